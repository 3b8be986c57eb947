package tsdb

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Two Selects of the same series over the same range at once (the panels of a dashboard
// opened together, over one metric) read the raw table once: the second waits for the
// first's read under way and takes the series from the cache, and both give every sample
// exactly. The first's raw query is held until the second waits for it (or 5 s pass, and
// the second reads the table itself: the test fails).
func TestConcurrentSelectsShareRawReads(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	ctx := context.Background()
	base := querierBase.Add(46 * time.Hour)
	now := base.Add(4 * time.Hour)
	k := newKeyRangeDB(t, "sh", now, base)
	k.reads.table = k.names.RawTable(k.names.PeriodOf(base))
	all, _, want := denseSeries(t, k.DB, 200, 160, base, 16, 15*time.Minute)
	require.NoError(t, k.WriteMany(ctx, all))
	_, err := k.Fold(ctx)
	require.NoError(t, err)

	db := k.open(t, true) // a server's, with a raw cache
	q, err := db.Queryable(&QueryOptions{DisableTiers: true})
	require.NoError(t, err)
	held := make(chan struct{})
	var once sync.Once
	k.reads.before = func() {
		once.Do(func() {
			close(held)
			for deadline := time.Now().Add(5 * time.Second); db.opts.RawCache.Shared() == 0 && time.Now().Before(deadline); {
				time.Sleep(time.Millisecond)
			}
		})
	}
	k.reads.n.Store(0)
	selectAll := func() (map[string][]string, error) {
		got := map[string][]string{}
		for s, err := range q.Querier(base, now).Select(ctx, nil, Matcher{Type: MatchEqual, Name: "__name__", Value: "dense_total"}) {
			if err != nil {
				return nil, err
			}
			for it := s.Iterator(); it.Next(); {
				x := it.At()
				got[s.Labels.Get("i")] = append(got[s.Labels.Get("i")], fmt.Sprintf("%d:%v", x.T, x.F))
			}
		}
		return got, nil
	}
	var first map[string][]string
	var firstErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		first, firstErr = selectAll()
	}()
	<-held // the first is reading the raw table
	second, err := selectAll()
	require.NoError(t, err)
	<-done
	require.NoError(t, firstErr)
	require.Equal(t, want, first, "the first Select")
	require.Equal(t, want, second, "the second Select, from the first's read")
	require.Equal(t, int64(1), k.reads.n.Load(), "raw table queries of both Selects (one alone takes 1)")
	require.Equal(t, int64(160), db.opts.RawCache.Shared(), "series the second took from the first's read")
}
