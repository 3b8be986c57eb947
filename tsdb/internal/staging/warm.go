package staging

import (
	"context"
	"fmt"
	"time"

	"github.com/seed71701133/tablets/tsdb/internal/azerr"
)

// Warm brings the staged entities of [from, to) into the cache, whole, as the first read
// of every series of the range would fetch them (a dashboard's panels opened together),
// without collecting their points, and lists the table: the first queries of a process
// just started then list only what was written since and fetch only that. Its entities
// stay cached until their bucket's Fold is due, used or not (keepUnfolded). It returns the
// number of entities listed in the range, each cached whole unless the cache's bound
// dropped it. A Table without a cache, or that does not read staged samples, does nothing.
func (st *Table) Warm(ctx context.Context, from, to time.Time) (int, error) {
	if st == nil || !st.reads || st.cache == nil || !from.Before(to) {
		return 0, nil
	}
	read := st.beginRead()
	defer read.end()
	f, _ := queryParts(nil, from, to, Both)
	if st.warm.CompareAndSwap(false, true) {
		// Nothing of the table is cached yet: one query of every entity of the range, as
		// a cold read's (cachedEntities), which the reads that come meanwhile wait for.
		cold := &fetchFlight{done: make(chan struct{})}
		st.cold.Store(cold)
		err := st.fetchColumns(ctx, f, "", nil, nil, false, read, func(listedEntity, int, map[int]cachedColumn) {})
		st.cold.Store(nil)
		close(cold.done)
		if err != nil {
			return 0, warmError(err)
		}
	}
	// The listing, and what was written since the query (or what a read before this one
	// did not fetch whole).
	listed, got, _, err := st.gatherListed(ctx, f, nil, false, selectAll, read, nil)
	if err != nil {
		return 0, warmError(err)
	}
	if st.index != nil {
		// The series index of the float entities too, which the first read through it
		// would build (a pack each, every series' record in it).
		var whole []int
		for i, ec := range got {
			if ec.cols != nil && ec.whole && ec.version == Version && ec.cols[0].series.len() > 0 {
				whole = append(whole, i)
			}
		}
		st.index.add(listed, got, whole)
	}
	return len(listed), nil
}

func warmError(err error) error {
	if azerr.IsTableGone(err) {
		return nil // nothing staged: no table yet
	}
	return fmt.Errorf("tsdb: warming the staging cache: %w", err)
}
