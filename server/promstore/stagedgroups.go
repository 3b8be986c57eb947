package promstore

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed71701133/tablets/tsdb"
)

// stagedGroups share a read of the staged points (tsdb.DB.ReadStaged) among the units of a
// Select (raw batches, and tier batches: AggregateOptions.Staged), over the range of all:
// one read of all their series, by the first unit that needs it, each unit's
// points dropped once the unit is read, and the rest when the last is. A staging entity
// holds points of thousands of series, in columns by hash: a batch of 64 series selects
// about a quarter of the columns, a group of 1,024 every column, so that reading the
// staging a batch (or a group) read its bytes tens of times in a large Select, and the
// dashboards of the soak kept the account busy with it. One read costs the staging's bytes
// once, and holds the staged points of the Select's series (5 to 15 minutes of points, until
// a fold moves them) no longer than the batches that need them. A Select of a single unit
// reads its own (acquire gives nil). It is safe for concurrent use by the pipeline's
// fetches.
type stagedGroups struct {
	q        *Queryable
	from, to time.Time
	groupOf  []int // by unit: its group's index, -1 for a group of one
	groups   []*stagedGroup
	units    []unit
}

type stagedGroup struct {
	series []string
	once   sync.Once
	staged *tsdb.Staged
	err    error
	left   atomic.Int32 // units not yet released
}

func newStagedGroups(q *Queryable, units []unit, from, to time.Time) *stagedGroups {
	sg := &stagedGroups{q: q, from: from, to: to, groupOf: make([]int, len(units)), units: units}
	var all []int
	for i, u := range units {
		sg.groupOf[i] = -1
		all = append(all, i)
		if u.tier { // whole windows: from the window holding from
			sg.from = earlier(sg.from, u.from)
			sg.to = later(sg.to, u.to)
		}
	}
	for _, m := range [][]int{all} {
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

// release says unit i is read: its staged points are dropped, and the last unit of its
// group drops the group's Staged.
func (sg *stagedGroups) release(i int) {
	if sg.groupOf[i] < 0 {
		return
	}
	g := sg.groups[sg.groupOf[i]]
	if st := g.staged; st != nil {
		series := make([]string, len(sg.units[i].entries))
		for j, e := range sg.units[i].entries {
			series[j] = e.series
		}
		st.Drop(series)
	}
	if g.left.Add(-1) == 0 {
		g.staged = nil
	}
}

func earlier(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
