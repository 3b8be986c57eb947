package tsdb

import (
	"context"

	"testing"

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
