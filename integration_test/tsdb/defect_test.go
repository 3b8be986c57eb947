package tsdb

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/testkit/clock"
	"github.com/seed71701133/tablets/internal/testkit/itest"
	"github.com/seed71701133/tablets/tsdb"
)

// A series whose name holds a single quote can be rolled up again and again (issue #35): the
// first Rollup added its blocks under the name with the quote doubled, so the second found
// none, and its Add met them, "its blocks still changed after 20 attempts", on every tick.
func TestTSDBRollupQuotedNameTwice(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	ctx := context.Background()
	db, _, _ := newDB(t, nil)
	names := []string{"lat.a", "lat.b", "lat.q'ueue", "lat.c", "lat.d", "lat.e"}
	end := itest.RollupBase.Add(48 * time.Hour)
	var all = map[string][]tablets.Point{}
	for si, s := range names {
		var pts []tablets.Point
		for i := range 48 * 3600 / 10 {
			pts = append(pts, tablets.Point{Time: itest.RollupBase.Add(time.Duration(i) * 10 * time.Second), Value: float64(si*1000 + i%977)})
		}
		require.NoError(t, db.Write(ctx, s, pts...))
		all[s] = pts
	}
	require.NoError(t, db.Rollup(ctx, itest.RollupBase, end))
	for _, s := range names {
		got := itest.CollectWindows(t, db.Aggregate(ctx, []string{s}, itest.RollupBase, end, time.Hour, nil))
		itest.RequireWindows(t, itest.ModelWindows(all[s], itest.RollupBase, end, time.Hour), got, s)
	}
	require.NoError(t, db.Rollup(ctx, itest.RollupBase.Add(6*time.Hour+30*time.Minute), itest.RollupBase.Add(7*time.Hour)))
	require.NoError(t, db.Rollup(ctx, itest.RollupBase, end))
	for _, s := range names {
		got := itest.CollectWindows(t, db.Aggregate(ctx, []string{s}, itest.RollupBase, end, time.Hour, nil))
		itest.RequireWindows(t, itest.ModelWindows(all[s], itest.RollupBase, end, time.Hour), got, s+" after the second Rollup")
	}
}

// A handle opened before another server's Retain answers what that server answers (issue
// #35): it knew the raw tables it had written, so where it did not trust a tier window (not
// yet sealed: a long SealDelay here, a late point or a window never rolled up elsewhere) it
// read them, found them gone, took that as no points, and lost what the Retain had rolled
// up. Days 0-1 are rolled up, days 2-3 never; late points go into day 3 and day 1.
func TestTSDBAggregateAfterAnotherRetain(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	ctx := context.Background()
	base := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
	clock := clock.New(base.Add(4*24*time.Hour + 2*time.Hour + 30*time.Minute))
	first, svc, _ := newDB(t, &tsdb.Options{RawPeriod: 24 * time.Hour, SealDelay: 10 * time.Hour, Now: clock.Now})
	names := []string{"a", "b", "c"}
	all := map[string][]tablets.Point{}
	for si, s := range names {
		var pts []tablets.Point
		for i := range 4 * 24 * 60 {
			pts = append(pts, tablets.Point{Time: base.Add(time.Duration(i) * time.Minute), Value: float64(si*100 + i%61)})
		}
		require.NoError(t, first.Write(ctx, s, pts...))
		all[s] = pts
	}
	require.NoError(t, first.Rollup(ctx, base, base.Add(48*time.Hour))) // days 0-1; days 2-3 never
	// Late points: into day 3, and a backfill of the rolled-up day 1.
	for si, s := range names {
		var late []tablets.Point
		for i := range 60 {
			late = append(late,
				tablets.Point{Time: base.Add(24*time.Hour + 5*time.Hour + time.Duration(i)*time.Minute + 30*time.Second), Value: float64(1000 + si + i)},
				tablets.Point{Time: base.Add(3*24*time.Hour + 7*time.Hour + time.Duration(i)*time.Minute + 30*time.Second), Value: float64(2000 + si + i)})
		}
		require.NoError(t, first.Write(ctx, s, late...))
		all[s] = append(all[s], late...)
	}
	var pts []tablets.Point
	for _, s := range names {
		pts = append(pts, all[s]...)
	}
	end := base.Add(4 * 24 * time.Hour)
	want := itest.ModelWindows(pts, base, end, time.Hour)
	itest.RequireWindows(t, want, itest.CollectWindows(t, first.Aggregate(ctx, names, base, end, time.Hour, nil)), "before Retain")

	second, err := tsdb.Open(ctx, svc, first.Name(), &tsdb.Options{RawPeriod: 24 * time.Hour, SealDelay: 10 * time.Hour, RawRetention: 2 * time.Hour, Now: clock.Now})
	require.NoError(t, err)
	dropped, err := second.Retain(ctx, clock.Now())
	require.NoError(t, err)
	require.NotEmpty(t, dropped)
	itest.RequireWindows(t, want, itest.CollectWindows(t, second.Aggregate(ctx, names, base, end, time.Hour, nil)), "the handle that ran Retain")
	itest.RequireWindows(t, want, itest.CollectWindows(t, first.Aggregate(ctx, names, base, end, time.Hour, nil)), "a handle opened before the Retain")
}
