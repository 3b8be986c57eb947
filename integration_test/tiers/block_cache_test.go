package tiers

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/testkit/itest"
	"github.com/seed71701133/tablets/tsdb"
)

// A tier block is read once while its ETag stands: a second Aggregate of a week lists the
// blocks' keys and fetches none; another server's backfill into a rolled-up window rewrites
// its block, and the next Aggregate reads that block again and answers with the backfill.
func TestTSDBBlockCache(t *testing.T) {
	ctx := context.Background()
	opts := &tsdb.Options{RawPeriod: 24 * time.Hour, DirectWrites: true, BlockCache: tsdb.NewBlockCache(64 << 20)}
	db, svc, checker := newDB(t, opts)
	otherOpts := *opts
	otherOpts.BlockCache = tsdb.NewBlockCache(64 << 20)
	other, err := tsdb.Open(ctx, svc, db.Name(), &otherOpts)
	require.NoError(t, err)
	fresh := func() *tsdb.DB {
		o := *opts
		o.BlockCache = tsdb.NewBlockCache(1 << 20)
		d, err := tsdb.Open(ctx, svc, db.Name(), &o)
		require.NoError(t, err)
		return d
	}

	week := time.Date(2024, 7, 1, 0, 0, 0, 0, time.UTC)
	var names []string
	for s := range 20 {
		name := "s" + itoa(int64(s))
		names = append(names, name)
		var pts []tablets.Point
		for i := range 7 * 24 * 6 {
			pts = append(pts, tablets.Point{Time: week.Add(time.Duration(i) * 10 * time.Minute), Value: float64(s*1000 + i)})
		}
		require.NoError(t, db.Write(ctx, name, pts...))
	}
	rollupLate(t, db, week, week.Add(7*24*time.Hour))
	aggregate := func(d *tsdb.DB) []tsdb.Window {
		return itest.CollectWindows(t, d.Aggregate(ctx, names, week, week.Add(7*24*time.Hour), time.Hour, nil))
	}
	read := func(what string) (int64, int64) {
		t.Helper()
		want := aggregate(fresh())
		checker.Reset()
		got := aggregate(db)
		st := checker.Stats()
		require.Equal(t, want, got, what)
		t.Logf("%s: %d requests, %d bytes read", what, st.Requests, st.ResponseBytes)
		return st.Requests, st.ResponseBytes
	}
	_, first := read("first read")
	_, again := read("the same read again")
	require.Less(t, again*5, first, "a second read lists the blocks and fetches none")
	require.NotZero(t, opts.BlockCache.Stats().Hits)

	// Another server backfills a point into a rolled-up window and rolls it up: the block is
	// rewritten (a new ETag), read again, and the answer holds the point.
	late := tablets.Point{Time: week.Add(30*time.Hour + 5*time.Minute), Value: 1e6}
	require.NoError(t, other.Write(ctx, names[0], late)) // in the first filter of 13 series: its fetch must stay under 15 comparisons
	_, err = other.RollupFlagged(ctx)
	require.NoError(t, err)
	read("after another server's backfill")
	w := aggregate(db)
	require.Equal(t, 1e6, w[30].Max, "the backfilled window's max")
}
