package tsdb

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A Select of most of a table's series, read by the range of their keys, caches the other
// series of that range too (the raw cache's spill): the next Select, of another metric whose
// series lie there, answers from the cache, exactly, without a query of the raw table. A
// dashboard's panels each select a metric; together, most of the table.
func TestSelectCachesTheSeriesItsRangeReadHolds(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	ctx := context.Background()
	k, base, now, want := foldedDense(t, "sp")
	truth, _, _ := k.selectMetric(t, mustQueryable(t, k.DB), "other", base, now) // uncached
	require.Len(t, truth, 40)

	db := k.open(t, true)
	q := mustQueryable(t, db)
	got, err := selectDense(ctx, q, base, now)
	require.NoError(t, err)
	require.Equal(t, want, got)
	spilled := db.opts.RawCache.Spilled()
	t.Logf("series of other cached by the read of dense_total: %d of 40", spilled)
	require.Greater(t, spilled, int64(20), "most of the 40 other series lie among the 160 dense ones' keys")
	require.LessOrEqual(t, spilled, int64(40), "only series not asked for")

	others, _, reads := k.selectMetric(t, q, "other", base, now)
	require.Equal(t, truth, others, "the other series, from the cache where spilled")
	if spilled == 40 {
		require.Zero(t, reads, "raw table queries of a Select the spill cached whole")
	} else {
		require.LessOrEqual(t, reads, int64(4), "raw table queries of the series not spilled only")
	}
	hits := db.opts.RawCache.Stats().Hits
	require.GreaterOrEqual(t, int64(hits), spilled, "the spilled series were hits")
}

func mustQueryable(t *testing.T, db *DB) *Queryable {
	t.Helper()
	q, err := db.Queryable(&QueryOptions{DisableTiers: true})
	require.NoError(t, err)
	return q
}

// A read by the range of keys that reaches further back than what the cache holds of the
// series beside it widens their entries: after a 1-hour panel of dense_total (which spills
// the hour of other), a 4-hour panel of dense_total holds the 4 hours of other too, and a
// 4-hour panel of other then reads no raw table. Each 7-day panel of a dashboard, over its
// own metric, read the hour the 1-hour panels had cached again, whole key ranges of it.
func TestSelectWidensTheEntriesItsRangeReadHolds(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	ctx := context.Background()
	k, base, now, want := foldedDense(t, "sw")
	truth, _, _ := k.selectMetric(t, mustQueryable(t, k.DB), "other", base, now) // uncached
	require.Len(t, truth, 40)

	db := k.open(t, true)
	q := mustQueryable(t, db)
	hour := now.Add(-time.Hour)
	_, err := selectDense(ctx, q, hour, now)
	require.NoError(t, err)
	spilledByHour := db.opts.RawCache.Spilled()
	require.Greater(t, spilledByHour, int64(20), "the hour of most of other, beside dense_total's")
	got, err := selectDense(ctx, q, base, now)
	require.NoError(t, err)
	require.Equal(t, want, got)
	widened := db.opts.RawCache.Spilled() - spilledByHour
	require.Equal(t, spilledByHour, widened, "each series of other the hour spilled, widened to the 4 hours")

	others, _, reads := k.selectMetric(t, q, "other", base, now)
	require.Equal(t, truth, others, "the other series, from the cache where widened")
	if spilledByHour == 40 {
		require.Zero(t, reads, "raw table queries of a Select the widened entries hold whole")
	} else {
		require.LessOrEqual(t, reads, int64(4), "raw table queries of the series not spilled only")
	}
}
