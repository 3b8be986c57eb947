package tsdb

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A Select reads its batches' raw points into the raw cache while it reads their staged
// points (prefetchRaw), but the read of the tables after the staged one decides: another
// process's Fold that moves staged points into the raw table after the prefetch read it,
// and before the staged read (which then finds them gone), shows in the Select's answer.
// The staging query is held until the prefetch has cached every series, and the other
// process folds then.
func TestSelectRawPrefetchThenAFold(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	ctx := context.Background()
	base := querierBase.Add(46 * time.Hour)
	now := base.Add(4 * time.Hour)
	k := newKeyRangeDB(t, "pf", now, base)
	all, _, want := denseSeries(t, k.DB, 200, 160, base, 16, 15*time.Minute)
	// The first 8 points of each series are folded into the raw table, the last 8 staged.
	first, second := make([]SeriesPoints, len(all)), make([]SeriesPoints, len(all))
	for i, sp := range all {
		first[i] = SeriesPoints{Series: sp.Series, Points: sp.Points[:8]}
		second[i] = SeriesPoints{Series: sp.Series, Points: sp.Points[8:]}
	}
	k.clock.Store(now.Add(-40 * time.Minute).UnixNano())
	require.NoError(t, k.WriteMany(ctx, first))
	k.clock.Store(now.Add(-20 * time.Minute).UnixNano())
	rep, err := k.Fold(ctx)
	require.NoError(t, err)
	require.Equal(t, 200, rep.Series, "series of the first points folded")
	k.clock.Store(now.UnixNano())
	require.NoError(t, k.WriteMany(ctx, second))

	db := k.open(t, true) // a server's, with a raw cache
	q, err := db.Queryable(&QueryOptions{DisableTiers: true})
	require.NoError(t, err)
	other := k.open(t, false)
	k.reads.table = k.name + "w" // the staging table's queries
	var armed, prefetched atomic.Bool
	var folded atomic.Int64
	armed.Store(true)
	k.reads.before = func(*http.Request) {
		if !armed.CompareAndSwap(true, false) {
			return // the Fold's own queries, and the Select's after the first
		}
		// The Select's staged read: held until its prefetch cached the raw points of every
		// series (the first 8 of each), then another process folds the last 8.
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			if db.opts.RawCache.Stats().Entries >= 160 {
				prefetched.Store(true)
				break
			}
		}
		k.clock.Store(now.Add(20 * time.Minute).UnixNano())
		rep, err := other.Fold(ctx)
		k.clock.Store(now.UnixNano())
		if err != nil {
			t.Errorf("the other process's Fold: %v", err)
			return
		}
		folded.Store(int64(rep.Series))
	}

	got, err := selectDense(ctx, q, base, now)
	require.NoError(t, err)
	require.True(t, prefetched.Load(), "the raw points cached before the staged read")
	require.Equal(t, int64(200), folded.Load(), "series the other process folded during the Select")
	require.Eventually(t, func() bool { return q.Stats().RawPrefetches > 0 }, 5*time.Second, time.Millisecond, "batches prefetched")
	require.Equal(t, want, got, "every point: the first 8 from the raw table, the last 8 folded meanwhile")

	// A Select after it, from the caches, and a process without caches agree.
	k.reads.before = nil
	got, err = selectDense(ctx, q, base, now)
	require.NoError(t, err)
	require.Equal(t, want, got, "the next Select")
	plain, err := k.open(t, false).Queryable(&QueryOptions{DisableTiers: true})
	require.NoError(t, err)
	got, err = selectDense(ctx, plain, base, now)
	require.NoError(t, err)
	require.Equal(t, want, got, "a process without caches")
}
