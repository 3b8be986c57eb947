package tsdb

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/tsdb/internal/changelog"
	"github.com/seed71701133/tablets/tsdb/internal/index"
	"github.com/seed71701133/tablets/tsdb/internal/staging"
	"github.com/seed71701133/tablets/tsdb/internal/times"
)

// stagedGroupUnits is how many consecutive units of a Select (raw batches, and tier
// batches: AggregateOptions.staged) share a read of the staged samples (readStagedSet).
// A staging entity holds points of thousands of series, in columns by hash: a batch of 64
// series selects about a quarter of the columns, so that a Select of 12,000 series reading
// the staging a batch read its bytes about 50 times. One read for a whole Select reads them
// once, but holds the staged points of all its series (5 to 15 minutes of points, until a
// fold moves them) while its batches are read: in the 30-minute soak, 290 MB of them at
// the peaks. A group of 16 batches (1,024 series, every column) reads the staging about a
// twelfth as often as batches do, and holds a group's points only while its batches are
// read (each batch's dropped once it is). A last group of under half as many units joins
// the one before.
const stagedGroupUnits = 16

// stagedGroups are the groups of consecutive units of a Select that share a read of the
// staged points, over the range of all the units, read by the first unit of a group that
// needs it. Each unit's points are dropped once it is read, and the group's Staged once its
// last unit is. A group of a single unit reads its own (acquire gives nil). It is safe for
// concurrent use by the pipeline's fetches.
type stagedGroups struct {
	q        *Queryable
	from, to time.Time
	groupOf  []int // by unit: its group's index, -1 for a group of one
	groups   []*stagedGroup
	units    []unit
	// latest: the reads of staged points read each series' latest only
	// (SelectHints.Latest, staging.Table.ReadPacked).
	latest bool
}

type stagedGroup struct {
	series []string
	hist   bool // a series of the group has histogram samples: they are read too
	once   sync.Once
	staged *stagedSet
	err    error
	read   atomic.Bool  // once has run
	left   atomic.Int32 // units not yet released
}

func newStagedGroups(q *Queryable, units []unit, from, to time.Time) *stagedGroups {
	sg := &stagedGroups{q: q, from: from, to: to, groupOf: make([]int, len(units)), units: units}
	for i, u := range units {
		sg.groupOf[i] = -1
		if u.tier { // whole windows: from the window holding from
			sg.from = times.Earlier(sg.from, u.from)
			sg.to = times.Later(sg.to, u.to)
		}
	}
	for first, last := 0, 0; first < len(units); first = last {
		last = min(first+stagedGroupUnits, len(units))
		if len(units)-last < stagedGroupUnits/2 {
			// A remainder of under half a group joins this one: each group's read assembles
			// every staged entity of the range, whatever its series (a Select of 1,200
			// series read them twice, for 1,024 series and for 176).
			last = len(units)
		}
		if last-first < 2 {
			continue
		}
		g := &stagedGroup{}
		g.left.Store(int32(last - first))
		for i := first; i < last; i++ {
			sg.groupOf[i] = len(sg.groups)
			for _, e := range units[i].entries {
				g.series = append(g.series, e.series)
				g.hist = g.hist || e.hist
			}
		}
		sg.groups = append(sg.groups, g)
	}
	return sg
}

// acquire returns the staged points of unit i's group, reading them if no unit of the group
// did yet; nil for a unit that reads its own.
func (sg *stagedGroups) acquire(ctx context.Context, i int) (*stagedSet, error) {
	if sg.groupOf[i] < 0 {
		return nil, nil
	}
	g := sg.groups[sg.groupOf[i]]
	g.once.Do(func() {
		sg.q.sharedStaged.Add(1)
		kinds := staging.Floats
		if g.hist {
			kinds = staging.Both
		}
		g.staged, g.err = sg.q.db.readStagedSet(ctx, g.series, sg.from, sg.to, kinds, sg.latest)
		g.series = nil // read: the Staged holds what the units need
		g.read.Store(true)
	})
	return g.staged, g.err
}

// unread reports whether unit i's staged points are still to be read: its group's read
// did not end yet, or it reads its own.
func (sg *stagedGroups) unread(i int) bool {
	return sg.groupOf[i] < 0 || !sg.groups[sg.groupOf[i]].read.Load()
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
		st.drop(series)
	}
	if g.left.Add(-1) == 0 {
		g.staged = nil
	}
}

// PrefetchStaged brings into the staging cache what the Selects of a read that began
// (BeginRead) will read of the staging table over [from, to): the staged entities the
// cache lacks, with the columns of the series the selectors (sets of matchers, each as a
// Select's) find in the index. A query's Selects fetch the entities staged since the last
// refresh after its read mark: run beside the mark, this has that fetch under way (or
// done) while the mark lists the staging table and reads the change logs, so that a
// refreshed panel waits for one request less. Without a staging cache (or
// one still cold), an index cache, or a read that began, it does nothing; a selector that
// selects every series is left out. Its errors are the Selects' to find again: it only
// fills a cache.
func (db *DB) PrefetchStaged(ctx context.Context, from, to time.Time, selectors ...[]Matcher) error {
	if !db.staging.Began(ctx) || !db.staging.Prefetches() {
		return nil
	}
	seen := map[string]bool{}
	var series []string
	kinds := staging.Floats
	// The series as the index cache last had them, however old: which series' columns are
	// fetched only makes the Selects' reads cheaper or not, and the index log is read with
	// the raw log's by the mark (DB.ReadMark), while this runs beside it. A
	// selector whose sets the cache lacks (a server just started) is left to the Select,
	// which reads the index itself: this reads no index table.
	guess := changelog.AnyKnown(ctx)
	for _, ms := range selectors {
		found, err := db.index.SelectSets(guess, from, to, ms, true)
		if errors.Is(err, tablets.ErrInvalidMatcher) || errors.Is(err, index.ErrNotCached) {
			continue
		}
		if err != nil {
			return err
		}
		for _, s := range found {
			if !seen[s.Series] {
				seen[s.Series] = true
				series = append(series, s.Series)
			}
			if s.Histograms {
				kinds = staging.Both
			}
		}
	}
	if len(series) == 0 {
		return nil
	}
	return db.staging.Prefetch(ctx, series, from, to, kinds)
}
