package tsdb

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/testkit/clock"
	"github.com/seed71701133/tablets/internal/testkit/dbtest"
	"github.com/seed71701133/tablets/tsdb"
)

// A query reads a staging entity once: a refreshed read lists the entities of its range
// and fetches only those written or changed since (by another process: its own writes
// are cached as written), and it answers what another process wrote, deleted or folded
// meanwhile, as a DB without the cache does.
func TestTSDBStagingCache(t *testing.T) {
	ctx := context.Background()
	base := time.Date(2024, 5, 23, 10, 0, 0, 0, time.UTC)
	clk := clock.New(base.Add(10 * time.Minute))
	opts := stagingOptions(clk)
	opts.StagingCache = tsdb.NewStagingCache(64 << 20)
	db, svc, checker := dbtest.NewDB(t, opts)
	// Another server on the same database, with a cache of its own.
	otherOpts := *opts
	otherOpts.StagingCache = tsdb.NewStagingCache(64 << 20)
	other, err := tsdb.Open(ctx, svc, db.Name(), &otherOpts)
	require.NoError(t, err)
	// And readers whose caches are empty, to hold the answers against: each opened anew.
	fresh := func() *tsdb.DB {
		t.Helper()
		plainOpts := *opts
		plainOpts.StagingCache = tsdb.NewStagingCache(1 << 20)
		plain, err := tsdb.Open(ctx, svc, db.Name(), &plainOpts)
		require.NoError(t, err)
		return plain
	}

	names := make([]string, 300)
	for i := range names {
		names[i] = fmt.Sprintf("cpu.%03d", i)
	}
	write := func(d *tsdb.DB, minute int) {
		t.Helper()
		var batch []tsdb.SeriesPoints
		for i, n := range names {
			var pts []tablets.Point
			for s := range 4 {
				pts = append(pts, tablets.Point{Time: base.Add(time.Duration(minute)*time.Minute + time.Duration(s*15)*time.Second), Value: float64(i*1000 + minute*4 + s)})
			}
			batch = append(batch, tsdb.SeriesPoints{Series: n, Points: pts})
		}
		require.NoError(t, d.WriteMany(ctx, batch))
	}
	read := func(d *tsdb.DB) map[string][]tablets.Point {
		t.Helper()
		out := map[string][]tablets.Point{}
		for p, err := range d.QueryMany(ctx, names, base, base.Add(time.Hour)) {
			require.NoError(t, err)
			out[p.Series] = append(out[p.Series], p.Point)
		}
		return out
	}
	cost := func(what string, want map[string][]tablets.Point) readCost {
		t.Helper()
		checker.Reset()
		got := read(db)
		st := checker.Stats()
		require.Equal(t, want, got, what)
		t.Logf("%s: %d requests, %d bytes read", what, st.Requests, st.ResponseBytes)
		return readCost{st.Requests, st.ResponseBytes}
	}

	for m := range 5 {
		write(other, m) // five writes: five sets of staging entities, of another server
	}
	want := read(fresh())
	require.Len(t, want, len(names))
	first := cost("first read", want)
	again := cost("the same read again", want)
	require.LessOrEqual(t, again.requests, first.requests, "a refresh lists the staging entities instead of reading them: no request more")
	require.Less(t, again.bytes*10, first.bytes, "a refresh reads under a tenth of the first read's bytes")
	stats := opts.StagingCache.Stats()
	require.NotZero(t, opts.StagingCache.Memos().Hits, "the refresh took the first read's points from its memo")
	require.NotZero(t, stats.Bytes)

	// Another server writes: the new entities are fetched, the others not.
	write(other, 5)
	want = read(fresh())
	newer := cost("after another server's write", want)
	require.Less(t, newer.bytes*3, first.bytes, "only the new write's entities are fetched")

	// This server writes: it cached its entities at the ETags of its transactions' replies,
	// and fetches none of them.
	hits := opts.StagingCache.Stats().Hits
	write(db, 6)
	want = read(fresh())
	own := cost("after this server's write", want)
	require.Less(t, own.bytes*2, newer.bytes, "its own entities are not fetched")
	require.Greater(t, opts.StagingCache.Stats().Hits, hits)

	// Another server deletes a range of a series: the entities holding it are rewritten
	// (new ETags), and the cached columns of their old versions are not used.
	require.NoError(t, other.Delete(ctx, names[7], base, base.Add(3*time.Minute)))
	want = read(fresh())
	require.Len(t, want[names[7]], 16, "the deleted 3 minutes of 7 are gone")
	cost("after another server's delete", want)

	// Another server folds: the entities are gone from the staging table, the points are in
	// the raw tables, and the answer is the same.
	clk.Set(base.Add(time.Hour))
	_, err = other.Fold(ctx)
	require.NoError(t, err)
	require.Equal(t, want, read(fresh()))
	cost("after another server's fold", want)
	for _, n := range names {
		require.True(t, slices.IsSortedFunc(want[n], func(a, b tablets.Point) int { return a.Time.Compare(b.Time) }))
	}
}

type readCost struct{ requests, bytes int64 }
