package promstore

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed71701133/tablets/tsdb"
)

// stagedGroupUnits is how many raw units of a Select share a read of the staged points. A
// staging entity holds points of thousands of series (and a read of a batch selects about a
// quarter of its columns), so that a Select of 12,000 series in batches of 64 reading the
// staging a batch read its bytes about 50 times; sharing one read among all of them held
// every staged point of the 12,000 series for the Select's whole read (10 to 15 minutes of
// points, until a fold moves them: 170 MB for the soak's dashboards). A group of 16 batches
// (1,024 series) reads the staging about a twelfth as often, and holds a group's points
// only while its batches are read.
const stagedGroupUnits = 16

// stagedGroups are the groups of consecutive raw units of a Select that share a read of the
// staged points (tsdb.DB.ReadStaged), read by the first unit of a group that needs it, and
// dropped when the group's last unit is read. A group of a single unit reads its own
// (acquire gives nil). It is safe for concurrent use by the pipeline's fetches.
type stagedGroups struct {
	q        *Queryable
	from, to time.Time
	groupOf  []int // by unit: its group's index, -1 for a tier unit or a group of one
	groups   []*stagedGroup
}

type stagedGroup struct {
	series []string
	once   sync.Once
	staged *tsdb.Staged
	err    error
	left   atomic.Int32 // units not yet released
}

func newStagedGroups(q *Queryable, units []unit, from, to time.Time) *stagedGroups {
	sg := &stagedGroups{q: q, from: from, to: to, groupOf: make([]int, len(units))}
	var members [][]int
	for i, u := range units {
		sg.groupOf[i] = -1
		if u.tier {
			continue
		}
		if n := len(members); n == 0 || len(members[n-1]) == stagedGroupUnits {
			members = append(members, nil)
		}
		members[len(members)-1] = append(members[len(members)-1], i)
	}
	for _, m := range members {
		if len(m) < 2 {
			continue
		}
		g := &stagedGroup{}
		g.left.Store(int32(len(m)))
		for _, i := range m {
			sg.groupOf[i] = len(sg.groups)
			for _, e := range units[i].entries {
				g.series = append(g.series, e.series)
			}
		}
		sg.groups = append(sg.groups, g)
	}
	return sg
}

// acquire returns the staged points of unit i's group, reading them if no unit of the group
// did yet; nil for a unit that reads its own.
func (sg *stagedGroups) acquire(ctx context.Context, i int) (*tsdb.Staged, error) {
	if sg.groupOf[i] < 0 {
		return nil, nil
	}
	g := sg.groups[sg.groupOf[i]]
	g.once.Do(func() {
		sg.q.sharedStaged.Add(1)
		g.staged, g.err = sg.q.db.ReadStaged(ctx, g.series, sg.from, sg.to)
		g.series = nil // read: the Staged holds what the units need
	})
	return g.staged, g.err
}

// release says unit i is read: the last of its group drops the group's staged points.
func (sg *stagedGroups) release(i int) {
	if sg.groupOf[i] < 0 {
		return
	}
	if g := sg.groups[sg.groupOf[i]]; g.left.Add(-1) == 0 {
		g.staged = nil
	}
}
