package tiers

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/testkit/azurite"
	"github.com/seed71701133/tablets/internal/testkit/clock"
	"github.com/seed71701133/tablets/internal/testkit/itest"
	"github.com/seed71701133/tablets/tsdb"
)

// Aggregate answers the same, exactly, before a Rollup (raw points) and after (tiers), for
// steps a tier divides and steps none does, aligned ranges and cut ones; and a point written
// late into rolled-up windows shows at once.
func TestTSDBAggregate(t *testing.T) {
	ctx := context.Background()
	db, _, checker := newDB(t, &tsdb.Options{RawPeriod: 24 * time.Hour})
	rng := rand.New(rand.NewPCG(1, 2))
	names := []string{"a", "b", "c"}
	var all []tablets.Point
	for _, s := range names {
		var pts []tablets.Point
		for i := range 2 * 86400 / 37 {
			v := math.Round(rng.NormFloat64()*1000) / 10
			pts = append(pts, tablets.Point{Time: itest.RollupBase.Add(time.Duration(i) * 37 * time.Second), Value: v})
		}
		require.NoError(t, db.Write(ctx, s, pts...))
		all = append(all, pts...)
	}
	// advanced truncates to the second: the model sees the stored times.
	for i := range all {
		all[i].Time = all[i].Time.Truncate(time.Second)
	}
	end := itest.RollupBase.Add(48 * time.Hour)
	cases := []struct {
		from, to time.Time
		step     time.Duration
	}{
		{itest.RollupBase, end, time.Hour},
		{itest.RollupBase, end, 24 * time.Hour},
		{itest.RollupBase, end, time.Minute},
		{itest.RollupBase, end, 7 * time.Minute},
		{itest.RollupBase, end, 90 * time.Second}, // no tier divides it: raw
		{itest.RollupBase.Add(17*time.Minute + 3*time.Second), end.Add(-5*time.Hour - 11*time.Second), time.Hour}, // cut edges
	}
	check := func(what string) {
		for _, c := range cases {
			got := itest.CollectWindows(t, db.Aggregate(ctx, names, c.from, c.to, c.step, nil))
			itest.RequireWindows(t, itest.ModelWindows(all, c.from, c.to, c.step), got, what+" "+c.step.String())
		}
	}
	check("before Rollup")
	before := checker.Stats()
	rollupLate(t, db, itest.RollupBase, end)
	t.Logf("Rollup of 2 days of 3 series: %d requests", checker.Stats().Requests-before.Requests)
	check("after Rollup")

	before = checker.Stats()
	got := itest.CollectWindows(t, db.Aggregate(ctx, names, itest.RollupBase, end, time.Hour, nil))
	require.Len(t, got, 48)
	tierRequests := checker.Stats().Requests - before.Requests
	t.Logf("Aggregate of 2 days at 1 h from the tier: %d requests", tierRequests)
	require.LessOrEqual(t, tierRequests, int64(3), "read from the tier (and the dirty markers and the staged points), not the raw points")

	// A late point into a rolled-up window: the tier window is flagged, the answer has it.
	late := tablets.Point{Time: itest.RollupBase.Add(90*time.Minute + 30*time.Second), Value: 12345.5}
	require.NoError(t, db.Write(ctx, "b", late))
	all = append(all, late)
	check("after a late point")
	require.NoError(t, db.Rollup(ctx, itest.RollupBase, end))
	check("after Rollup again")
}

// A Rollup that meets another's write of its block between its read of the block and its
// own write (here a late point written and rolled up by another process) fails that write
// and starts the series again: the block stored in the end holds the late point.
func TestTSDBRollupRace(t *testing.T) {
	ctx := context.Background()
	h := &itest.Hooked{}
	db, svc, _ := newDB(t, &tsdb.Options{RawPeriod: 24 * time.Hour})
	var pts []tablets.Point
	for i := range 120 {
		pts = append(pts, tablets.Point{Time: itest.RollupBase.Add(time.Duration(i) * time.Minute), Value: float64(i)})
	}
	require.NoError(t, db.Write(ctx, "r", pts...))
	require.NoError(t, db.Rollup(ctx, itest.RollupBase, itest.RollupBase.Add(2*time.Hour)))
	// A point more, so that the next Rollup has a block to write.
	more := tablets.Point{Time: itest.RollupBase.Add(90*time.Minute + 20*time.Second), Value: 0.5}
	require.NoError(t, db.Write(ctx, "r", more))

	// Through a hooked client, the second Rollup meets a Write and a Rollup before its first
	// block write.
	hdb, _ := newHookedDB(t, db.Name(), h)
	late := tablets.Point{Time: itest.RollupBase.Add(30*time.Minute + 15*time.Second), Value: -7.5}
	injected := false
	h.Arm(func(r *http.Request) bool {
		return itest.IsBatch(r) && strings.Contains(string(itest.PeekBody(r)), "t60p")
	}, func() {
		injected = true
		require.NoError(t, db.Write(ctx, "r", late))
		require.NoError(t, db.Rollup(ctx, itest.RollupBase, itest.RollupBase.Add(2*time.Hour)))
	}, nil)
	require.NoError(t, hdb.Rollup(ctx, itest.RollupBase, itest.RollupBase.Add(2*time.Hour)))
	require.True(t, injected)

	// The 1-minute tier's block, read raw, holds every point.
	all := append(pts, more, late)
	windows, sealed := columnarWindows(t, tierEntities(t, svc, db, time.Minute, itest.RollupBase, itest.RollupBase.Add(time.Hour), "r"), time.Minute)
	requireColumnar(t, windows, all, itest.RollupBase, itest.RollupBase.Add(2*time.Hour), time.Minute, "minutes")
	require.Equal(t, uint64(2), windows[itest.RollupBase.Add(30*time.Minute)].Count, "window 30m holds the point written and the late one")
	require.True(t, sealed[itest.RollupBase.Add(30*time.Minute)])
	w := itest.CollectWindows(t, hdb.Aggregate(ctx, []string{"r"}, itest.RollupBase.Add(30*time.Minute), itest.RollupBase.Add(31*time.Minute), time.Minute, nil))
	require.Len(t, w, 1)
	require.Equal(t, uint64(2), w[0].Count)
	require.Equal(t, -7.5, w[0].Min)
}

// The request targets with the default tiers, after Rollup.
func TestTSDBAggregateRequests(t *testing.T) {
	ctx := context.Background()
	db, _, checker := newDB(t, nil)
	// A day of one series at 1 Hz, summarized at a 1-minute step: at most 2 requests.
	day := time.Date(2024, 6, 3, 0, 0, 0, 0, time.UTC)
	var pts []tablets.Point
	for i := range 86400 {
		pts = append(pts, tablets.Point{Time: day.Add(time.Duration(i) * time.Second), Value: float64(i % 600)})
	}
	require.NoError(t, db.Write(ctx, "day", pts...))
	before := checker.Stats()
	start := time.Now()
	require.NoError(t, db.Rollup(ctx, day, day.Add(24*time.Hour)))
	t.Logf("Rollup of a day at 1 Hz: %.0f points/s, %d requests", 86400/time.Since(start).Seconds(), checker.Stats().Requests-before.Requests)
	_, err := db.RollupFlagged(ctx) // the slice its late write marked dirty
	require.NoError(t, err)
	before = checker.Stats()
	w := itest.CollectWindows(t, db.Aggregate(ctx, []string{"day"}, day, day.Add(24*time.Hour), time.Minute, nil))
	require.Len(t, w, 1440)
	t.Logf("a day at a 1-minute step: %d requests", checker.Stats().Requests-before.Requests)
	require.LessOrEqual(t, checker.Stats().Requests-before.Requests, int64(3), "a day at a 1-minute step: the tier, the dirty markers, the staged points")

	// 40 series over 7 days at a 1-hour step, merged: at most 6 requests.
	week := time.Date(2024, 7, 1, 0, 0, 0, 0, time.UTC)
	var names []string
	for s := range 40 {
		name := "s" + itoa(int64(s))
		names = append(names, name)
		var pts []tablets.Point
		for i := range 7 * 24 * 6 {
			pts = append(pts, tablets.Point{Time: week.Add(time.Duration(i) * 10 * time.Minute), Value: float64(s*1000 + i)})
		}
		require.NoError(t, db.Write(ctx, name, pts...))
	}
	rollupLate(t, db, week, week.Add(7*24*time.Hour))
	before = checker.Stats()
	w = itest.CollectWindows(t, db.Aggregate(ctx, names, week, week.Add(7*24*time.Hour), time.Hour, nil))
	require.Len(t, w, 168)
	require.Equal(t, uint64(40*6), w[0].Count)
	t.Logf("40 series, 7 days at 1 h: %d requests", checker.Stats().Requests-before.Requests)
	require.LessOrEqual(t, checker.Stats().Requests-before.Requests, int64(6), "40 series, 7 days at 1 h")
	p99 := w[0].Quantile(0.99)
	require.InDelta(t, 39000.0, p99, 0.01*39000+6, "p99 across the 40 series")

	// A year of one series summarized at a 1-day step: at most 6 requests: the staged points,
	// the dirty markers, the hour tier's two tables, and the raw points of the two partial
	// raw periods at the year's ends (the scanning rollup of the chunked layout leaves their
	// windows to be read raw; the advanced layout's rollup did not: 3 requests). (A point an
	// hour: the tier read costs the same whatever the raw density.)
	year := time.Date(2023, 1, 1, 0, 0, 0, 0, time.UTC)
	pts = pts[:0]
	for i := range 365 * 24 {
		pts = append(pts, tablets.Point{Time: year.Add(time.Duration(i) * time.Hour), Value: float64(i)})
	}
	require.NoError(t, db.Write(ctx, "year", pts...))
	rollupLate(t, db, year, year.AddDate(1, 0, 0))
	before = checker.Stats()
	w = itest.CollectWindows(t, db.Aggregate(ctx, []string{"year"}, year, year.AddDate(1, 0, 0), 24*time.Hour, nil))
	require.Len(t, w, 365)
	t.Logf("a year at a 1-day step: %d requests", checker.Stats().Requests-before.Requests)
	require.LessOrEqual(t, checker.Stats().Requests-before.Requests, int64(6), "a year at a 1-day step")
}

// rollupLate rolls up [from, to) of points written late (older than the seal delay): a
// Rollup, then RollupFlagged for the slices their writes marked dirty, which Aggregate
// reads raw until then.
func rollupLate(t *testing.T, db *tsdb.DB, from, to time.Time) {
	t.Helper()
	require.NoError(t, db.Rollup(context.Background(), from, to))
	_, err := db.RollupFlagged(context.Background())
	require.NoError(t, err)
}

func blockKeyTest(s int64) string { return fmt.Sprintf("%012d", s) }

// newHookedDB opens the database name again, through a hookable transport.
func newHookedDB(t *testing.T, name string, h *itest.Hooked) (*tsdb.DB, *aztables.ServiceClient) {
	srv := azurite.Shared(t)
	checker := azurite.NewChecker(nil, func(v string) { t.Errorf("Azure limit violated: %s", v) })
	h.Next = checker
	svc, err := srv.NewServiceClient(&aztables.ClientOptions{ClientOptions: policy.ClientOptions{
		Transport: h, Retry: azurite.TestRetryOptions()}})
	require.NoError(t, err)
	db, err := tsdb.Open(context.Background(), svc, name, &tsdb.Options{RawPeriod: 24 * time.Hour})
	require.NoError(t, err)
	return db, svc
}

// Retain drops a tier's tables past its retention, one request each; no Rollup or Write
// creates them again; Aggregate answers from the raw points there.
func TestTSDBTierRetention(t *testing.T) {
	ctx := context.Background()
	tiers := []tsdb.Tier{{Step: time.Minute, Period: 24 * time.Hour, Retention: 48 * time.Hour}, {Step: time.Hour}}
	db, svc, _ := newDB(t, &tsdb.Options{RawPeriod: 24 * time.Hour, Tiers: tiers})
	day0 := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
	var pts []tablets.Point
	for i := range 4 * 24 * 6 { // 4 days, every 10 minutes
		pts = append(pts, tablets.Point{Time: day0.Add(time.Duration(i) * 10 * time.Minute), Value: float64(i)})
	}
	require.NoError(t, db.Write(ctx, "x", pts...))
	require.NoError(t, db.Rollup(ctx, day0, day0.Add(96*time.Hour)))
	dropped, err := db.Retain(ctx, day0.Add(96*time.Hour)) // the first 2 days of the minute tier go
	require.NoError(t, err)
	var tierDropped []string
	for _, name := range dropped {
		if strings.Contains(name, "t60p") {
			tierDropped = append(tierDropped, name)
		}
	}
	require.Len(t, tierDropped, 2, "dropped: %v", dropped)
	// Rolling up again does not create them again.
	require.NoError(t, db.Rollup(ctx, day0, day0.Add(96*time.Hour)))
	for p := svc.NewListTablesPager(nil); p.More(); {
		page, err := p.NextPage(ctx)
		require.NoError(t, err)
		for _, tb := range page.Tables {
			require.NotContains(t, tierDropped, *tb.Name, "a dropped tier table was created again")
		}
	}
	// The minute step over the dropped days is answered from the raw points.
	w := itest.CollectWindows(t, db.Aggregate(ctx, []string{"x"}, day0, day0.Add(96*time.Hour), time.Hour, nil))
	require.Len(t, w, 96)
	w = itest.CollectWindows(t, db.Aggregate(ctx, []string{"x"}, day0, day0.Add(48*time.Hour), time.Minute, nil))
	require.Len(t, w, 288)
}

// A slice that straddles a dropped raw period and a kept one is not recomputed from the raw
// points that remain: its windows over the dropped period would be lost; the slices after
// it are spliced into their block keeping its windows over the dropped period. With a
// minute tier alone, a slice is 24 minutes, [10:48, 11:12) here, across the raw periods of
// 10:00 and 11:00, and a block 336 minutes.
func TestTSDBRollupAfterRawDropped(t *testing.T) {
	ctx := context.Background()
	day := time.Date(2024, 5, 20, 0, 0, 0, 0, time.UTC)
	clock := clock.New(day.Add(11*time.Hour + 10*time.Minute))
	tiers := []tsdb.Tier{{Step: time.Minute, Retention: 10 * time.Hour}}
	db, _, _ := newDB(t, &tsdb.Options{RawPeriod: time.Hour, RawRetention: 2 * time.Hour, Tiers: tiers, Now: clock.Now})
	require.NoError(t, db.Write(ctx, "x",
		tablets.Point{Time: day.Add(10*time.Hour + 50*time.Minute), Value: 1},
		tablets.Point{Time: day.Add(11*time.Hour + 5*time.Minute), Value: 2}))
	from, to := day.Add(10*time.Hour), day.Add(12*time.Hour)
	clock.Add(80 * time.Minute) // 12:30: the block is sealed when rolled up (SealDelay 1 h)
	require.NoError(t, db.Rollup(ctx, from, to))
	windows := func() []time.Time {
		var out []time.Time
		for w, err := range db.Aggregate(ctx, []string{"x"}, from, to, time.Minute, nil) {
			require.NoError(t, err)
			out = append(out, w.Start)
		}
		return out
	}
	want := []time.Time{day.Add(10*time.Hour + 50*time.Minute), day.Add(11*time.Hour + 5*time.Minute)}
	require.Equal(t, want, windows())

	clock.Add(40 * time.Minute) // 13:10: the raw period of 10:00 is past the retention
	dropped, err := db.Retain(ctx, clock.Now())
	require.NoError(t, err)
	require.Contains(t, dropped, db.Name()+"r"+fmt.Sprint(day.Add(10*time.Hour).Unix()))
	require.NoError(t, db.Rollup(ctx, from, to))
	require.Equal(t, want, windows(), "a Rollup after the raw period was dropped lost the tier's windows there")
}
