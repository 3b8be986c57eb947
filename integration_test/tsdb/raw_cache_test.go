package tsdb

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/testkit/clock"
	"github.com/seed71701133/tablets/internal/testkit/dbtest"
	"github.com/seed71701133/tablets/tsdb"
)

// A server reads a raw sample once: a refreshed read asks the change log of each period and
// reads again only what changed since. What another server changes (a late point, its
// fold, a backfill, a delete, a retention) shows in the next read of a server whose cache
// is warm, as in a reader without a cache.
func TestTSDBRawCache(t *testing.T) {
	ctx := context.Background()
	base := time.Date(2024, 5, 23, 0, 0, 0, 0, time.UTC) // a raw period's start (a day)
	clk := clock.New(base.Add(47 * time.Hour))
	opts := stagingOptions(clk)
	opts.RawCache = tsdb.NewRawCache(64 << 20)
	opts.StagingCache = tsdb.NewStagingCache(64 << 20)
	db, svc, checker := dbtest.NewDB(t, opts)
	open := func(o tsdb.Options) *tsdb.DB { return reopen(t, svc, db.Name(), o) }
	// Another server on the same database, and readers without caches, each opened anew,
	// to hold the answers against.
	plain := *stagingOptions(clk)
	other := open(plain)
	fresh := func() *tsdb.DB { return open(plain) }

	names := make([]string, 40)
	for i := range names {
		names[i] = fmt.Sprintf("mem.%02d", i)
	}
	// Two days at a minute: 1,440 points a series a period, written directly.
	var batch []tsdb.SeriesPoints
	for i, n := range names {
		var pts []tablets.Point
		for m := range 2 * 24 * 60 {
			pts = append(pts, tablets.Point{Time: base.Add(time.Duration(m) * time.Minute), Value: float64(i*10000 + m)})
		}
		batch = append(batch, tsdb.SeriesPoints{Series: n, Points: pts})
	}
	require.NoError(t, other.WriteMany(ctx, batch))

	readFrom := func(d *tsdb.DB, from time.Time) map[string][]tablets.Point {
		t.Helper()
		out := map[string][]tablets.Point{}
		for p, err := range d.QueryMany(ctx, names, from, clk.Now()) {
			require.NoError(t, err)
			out[p.Series] = append(out[p.Series], p.Point)
		}
		return out
	}
	read := func(d *tsdb.DB) map[string][]tablets.Point { return readFrom(d, base) }
	costFrom := func(what string, from time.Time) readCost {
		t.Helper()
		want := readFrom(fresh(), from)
		checker.Reset()
		got := readFrom(db, from)
		st := checker.Stats()
		require.Equal(t, want, got, what)
		t.Logf("%s: %d requests, %d bytes read", what, st.Requests, st.ResponseBytes)
		return readCost{st.Requests, st.ResponseBytes}
	}
	cost := func(what string) readCost { return costFrom(what, base) }

	first := cost("first read")
	again := cost("the same read again")
	require.Less(t, again.bytes*20, first.bytes, "a refresh reads under 5%% of the first read's bytes")
	require.Less(t, again.requests, first.requests)
	st := opts.RawCache.Stats()
	require.NotZero(t, st.Hits)
	require.NotZero(t, st.Bytes)

	// A late point, staged by another server: read from the staging table.
	late := base.Add(30*time.Hour + 30*time.Second)
	require.NoError(t, other.Write(ctx, names[3], tablets.Point{Time: late, Value: -1}))
	cost("after another server's late point")
	// Folded by it into the raw table: the staging table no longer has it, the log says
	// where the raw table changed.
	clk.Add(time.Hour)
	_, err := other.Fold(ctx)
	require.NoError(t, err)
	got := read(fresh())
	require.Contains(t, got[names[3]], tablets.Point{Time: late, Value: -1})
	// A read of the hours after the late point (a panel of the last hours, a rule): the fold
	// changed nothing there, so every series is a hit, though each entry holds the changed
	// time too.
	missed := opts.RawCache.Stats().Misses
	after := costFrom("the hours after the fold's change", late.Add(time.Hour))
	require.Equal(t, missed, opts.RawCache.Stats().Misses, "no series read again after the fold's change")
	require.Less(t, after.bytes*20, first.bytes)
	// The log records ranges, not series: every series' samples from the late point's time
	// on are read again (chunks that hold it, and the newer).
	afterFold := cost("after another server's fold")
	require.Less(t, afterFold.bytes, first.bytes, "only the changed range is read again")
	require.Less(t, cost("after the fold, again").bytes*20, first.bytes)

	// A backfill into the first day, written directly (150 points of one series).
	var backfill []tablets.Point
	for m := range 150 {
		backfill = append(backfill, tablets.Point{Time: base.Add(2*time.Hour + time.Duration(m)*time.Minute), Value: -float64(m)})
	}
	require.NoError(t, other.Write(ctx, names[4], backfill...))
	require.Equal(t, backfill[0], read(fresh())[names[4]][120])
	cost("after another server's backfill")

	// A delete of ten hours of a series.
	require.NoError(t, other.Delete(ctx, names[5], base.Add(10*time.Hour), base.Add(20*time.Hour)))
	require.Len(t, read(fresh())[names[5]], len(read(fresh())[names[0]])-600)
	cost("after another server's delete")

	// A retention that drops the first day.
	clk.Set(base.Add(48*time.Hour + time.Minute))
	retainOpts := plain
	retainOpts.RawRetention = 24 * time.Hour
	dropped, err := open(retainOpts).Retain(ctx, clk.Now())
	require.NoError(t, err)
	require.Contains(t, dropped, db.Name()+"r"+fmt.Sprint(base.Unix()))
	gone := cost("after another server's retention")
	require.NotZero(t, gone.requests)
	require.Equal(t, base.Add(24*time.Hour), read(fresh())[names[0]][0].Time, "the first day is gone")
}

// reopen opens database name again with options o: another server on it, or a reader
// without caches whose answers a test holds a cached one's against.
func reopen(t *testing.T, svc *aztables.ServiceClient, name string, o tsdb.Options) *tsdb.DB {
	t.Helper()
	d, err := tsdb.Open(context.Background(), svc, name, &o)
	require.NoError(t, err)
	return d
}
