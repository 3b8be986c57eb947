package tsdb

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
)

// A warm-up scans the raw table once, by ranges of keys, and caches every series' points
// as the reads of a dashboard would: the Selects after it (of two metrics, the whole range)
// answer exactly without a query of the raw table. A point written after the warm-up (a
// late write, recorded in the change log) is read again, not hidden by the warm entry.
func TestWarmRawCacheAnswersTheFirstSelects(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	ctx := context.Background()
	k, base, now, want := foldedDense(t, "wm")
	truth, _, _ := k.selectMetric(t, mustQueryable(t, k.DB), "other", base, now) // uncached
	require.Len(t, truth, 40)

	db := k.open(t, true)
	_, err := db.WarmRawCache(ctx, now.Add(time.Minute))
	require.ErrorIs(t, err, tablets.ErrInvalidTime, "a warm-up from after now")

	k.reads.n.Store(0)
	rep, err := db.WarmRawCache(ctx, base)
	require.NoError(t, err)
	scans := k.reads.n.Load()
	t.Logf("warm-up: %+v in %d queries of the raw table", rep, scans)
	require.Equal(t, WarmReport{Series: 200, Points: 200 * 16, Bytes: rep.Bytes}, rep, "every series, every point, not full")
	require.Positive(t, rep.Bytes)
	require.EqualValues(t, db.opts.RawCache.Stats().Bytes, rep.Bytes, "the bytes the cache holds, all the warm-up's")
	require.LessOrEqual(t, scans, int64(2), "one scan of the table (200 series, a page)")

	q := mustQueryable(t, db)
	k.reads.n.Store(0)
	got, err := selectDense(ctx, q, base, now)
	require.NoError(t, err)
	require.Equal(t, want, got)
	require.Zero(t, k.reads.n.Load(), "raw table queries of dense_total after the warm-up")
	others, _, reads := k.selectMetric(t, q, "other", base, now)
	require.Equal(t, truth, others)
	require.Zero(t, reads, "raw table queries of other after the warm-up")
	require.EqualValues(t, 200, db.opts.RawCache.Stats().Hits)

	// A second warm-up finds every series held and caches none again.
	again, err := db.WarmRawCache(ctx, base)
	require.NoError(t, err)
	require.Zero(t, again.Series, "series the cache held already")

	// A late point into the raw table (a direct write records its change) is read.
	late := base.Add(90*time.Minute + 7*time.Second)
	key := seriesOfLabel(t, db, "dense_total", "005")
	require.NoError(t, db.Write(ctx, key, tablets.Point{Time: late, Value: -1}))
	got, err = selectDense(ctx, q, base, now)
	require.NoError(t, err)
	require.Contains(t, got["005"], fmt.Sprintf("%d:-1", late.UnixMilli()), "the late point, past the warm entry")
	require.Len(t, got["005"], 17)
}

// seriesOfLabel is the key of metric's series of label i.
func seriesOfLabel(t *testing.T, db *DB, metric, i string) string {
	t.Helper()
	key, err := db.SeriesOf(context.Background(), Labels{{Name: "__name__", Value: metric}, {Name: "i", Value: i}})
	require.NoError(t, err)
	return key
}

// Without a raw cache a warm-up does nothing, and sends no request.
func TestWarmRawCacheWithoutCache(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	k := newKeyRangeDB(t, "wn", querierBase.Add(time.Hour))
	before := k.reads.all.Load()
	rep, err := k.WarmRawCache(context.Background(), querierBase)
	require.NoError(t, err)
	require.Zero(t, rep)
	require.Equal(t, before, k.reads.all.Load(), "requests of a warm-up without a cache")
}
