package tsdb

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/testkit/clock"
	"github.com/seed71701133/tablets/internal/testkit/dbtest"
	"github.com/seed71701133/tablets/internal/testkit/itest"
	"github.com/seed71701133/tablets/tsdb"
)

// Staged points of a period Retain dropped are not read back, before the Fold as after it
// (the Fold leaves them out): a read answers the same whichever ran last. Points and
// histogram samples of the periods kept still are.
func TestTSDBStagedPointsOfADroppedPeriod(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2024, 5, 20, 12, 0, 0, 0, time.UTC)
	clk := clock.New(now)
	opts := stagingOptions(clk)
	opts.RawPeriod, opts.RawRetention = time.Hour, 48*time.Hour
	db, svc, _ := dbtest.NewDB(t, opts)
	var pts []tablets.Point
	for h := 1; h <= 47; h++ { // a point an hour, each in its own period, all staged
		pts = append(pts, tablets.Point{Time: now.Add(-time.Duration(h)*time.Hour + 30*time.Minute), Value: float64(h)})
	}
	require.NoError(t, db.Write(ctx, "cpu", pts...))
	require.NoError(t, db.WriteSamples(ctx, nil, []tsdb.SeriesHistograms{{Series: "lat", Histograms: []tsdb.HistogramPoint{
		hp(pts[0].Time, intHist(3)), hp(pts[len(pts)-1].Time, intHist(4))}}}))
	require.Positive(t, countEntities(t, svc, db.Name()+"w"), "staged")

	later := now.Add(24 * time.Hour) // the periods that ended 48 h before go
	_, err := db.Retain(ctx, later)
	require.NoError(t, err)
	kept := func(p tablets.Point) bool { return !p.Time.Before(later.Add(-48 * time.Hour).Truncate(time.Hour)) }
	var want []tablets.Point
	for i := len(pts) - 1; i >= 0; i-- {
		if kept(pts[i]) {
			want = append(want, pts[i])
		}
	}
	require.NotEmpty(t, want)
	require.Less(t, len(want), len(pts))
	read := func(what string) {
		t.Helper()
		got := itest.CollectPoints(t, db.Query(ctx, "cpu", now.Add(-72*time.Hour), now))
		require.Equal(t, want, got, what)
		hs := queryHist(t, db, "lat", now.Add(-72*time.Hour), now)
		require.Len(t, hs, 1, "%s: the histogram sample of the kept period only", what)
		require.True(t, hs[0].Time.Equal(pts[0].Time), what)
	}
	read("before the Fold")
	clk.Set(now.Add(time.Hour))
	_, err = db.Fold(ctx)
	require.NoError(t, err)
	read("after the Fold")
}
