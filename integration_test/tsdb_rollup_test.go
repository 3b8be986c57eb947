package integration_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/testkit/azurite"
	"github.com/seed71701133/tablets/internal/testkit/clock"
	"github.com/seed71701133/tablets/internal/testkit/fault"
	"github.com/seed71701133/tablets/tsdb"
)

// modelWindow is a window computed from all its points.
type modelWindow struct {
	start                      time.Time
	count                      uint64
	sum, min, max, first, last float64
	firstT, lastT              time.Time
	values                     []float64
}

func modelWindows(pts []tablets.Point, from, to time.Time, step time.Duration) []*modelWindow {
	byStart := map[time.Time]*modelWindow{}
	for _, p := range pts {
		if p.Time.Before(from) || !p.Time.Before(to) {
			continue
		}
		ws := time.Unix(0, 0).UTC().Add(p.Time.Sub(time.Unix(0, 0)) / step * step)
		w := byStart[ws]
		if w == nil {
			w = &modelWindow{start: ws, min: math.Inf(1), max: math.Inf(-1)}
			byStart[ws] = w
		}
		w.count++
		w.sum += p.Value
		w.min, w.max = min(w.min, p.Value), max(w.max, p.Value)
		if w.count == 1 || !p.Time.After(w.firstT) {
			w.first, w.firstT = p.Value, p.Time
		}
		if w.count == 1 || !p.Time.Before(w.lastT) {
			w.last, w.lastT = p.Value, p.Time
		}
		w.values = append(w.values, p.Value)
	}
	var out []*modelWindow
	for _, w := range byStart {
		slices.Sort(w.values)
		out = append(out, w)
	}
	slices.SortFunc(out, func(a, b *modelWindow) int { return a.start.Compare(b.start) })
	return out
}

func collectWindows(t *testing.T, seq func(yield func(tsdb.Window, error) bool)) []tsdb.Window {
	t.Helper()
	var out []tsdb.Window
	for w, err := range seq {
		require.NoError(t, err)
		out = append(out, w)
	}
	return out
}

// requireWindows compares Aggregate's windows with the model: Count, Min, Max, First, Last
// exactly, Sum to float addition, quantiles within the relative accuracy.
func requireWindows(t *testing.T, want []*modelWindow, got []tsdb.Window, what string) {
	t.Helper()
	require.Len(t, got, len(want), what)
	for i, m := range want {
		g := got[i]
		require.True(t, m.start.Equal(g.Start), "%s: window %d starts %v, want %v", what, i, g.Start, m.start)
		require.Equal(t, m.count, g.Count, "%s: window %v count", what, m.start)
		require.Equal(t, m.min, g.Min, "%s: window %v min", what, m.start)
		require.Equal(t, m.max, g.Max, "%s: window %v max", what, m.start)
		require.Equal(t, m.first, g.First, "%s: window %v first", what, m.start)
		require.Equal(t, m.last, g.Last, "%s: window %v last", what, m.start)
		require.InDelta(t, m.sum, g.Sum, 1e-9*math.Max(1, math.Abs(m.sum)), "%s: window %v sum", what, m.start)
		for _, q := range []float64{0, 0.5, 0.9, 0.99, 1} {
			exact := m.values[int(q*float64(len(m.values)-1))]
			require.InDelta(t, exact, g.Quantile(q), 0.0100001*math.Abs(exact)+1e-12, "%s: window %v q%v", what, m.start, q)
		}
	}
}

var rollupBase = time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)

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
			pts = append(pts, tablets.Point{Time: rollupBase.Add(time.Duration(i) * 37 * time.Second), Value: v})
		}
		require.NoError(t, db.Write(ctx, s, pts...))
		all = append(all, pts...)
	}
	// advanced truncates to the second: the model sees the stored times.
	for i := range all {
		all[i].Time = all[i].Time.Truncate(time.Second)
	}
	end := rollupBase.Add(48 * time.Hour)
	cases := []struct {
		from, to time.Time
		step     time.Duration
	}{
		{rollupBase, end, time.Hour},
		{rollupBase, end, 24 * time.Hour},
		{rollupBase, end, time.Minute},
		{rollupBase, end, 7 * time.Minute},
		{rollupBase, end, 90 * time.Second}, // no tier divides it: raw
		{rollupBase.Add(17*time.Minute + 3*time.Second), end.Add(-5*time.Hour - 11*time.Second), time.Hour}, // cut edges
	}
	check := func(what string) {
		for _, c := range cases {
			got := collectWindows(t, db.Aggregate(ctx, names, c.from, c.to, c.step, nil))
			requireWindows(t, modelWindows(all, c.from, c.to, c.step), got, what+" "+c.step.String())
		}
	}
	check("before Rollup")
	before := checker.Stats()
	rollupLate(t, db, rollupBase, end)
	t.Logf("Rollup of 2 days of 3 series: %d requests", checker.Stats().Requests-before.Requests)
	check("after Rollup")

	before = checker.Stats()
	got := collectWindows(t, db.Aggregate(ctx, names, rollupBase, end, time.Hour, nil))
	require.Len(t, got, 48)
	tierRequests := checker.Stats().Requests - before.Requests
	t.Logf("Aggregate of 2 days at 1 h from the tier: %d requests", tierRequests)
	require.LessOrEqual(t, tierRequests, int64(2), "read from the tier (and the dirty markers), not the raw points")

	// A late point into a rolled-up window: the tier window is flagged, the answer has it.
	late := tablets.Point{Time: rollupBase.Add(90*time.Minute + 30*time.Second), Value: 12345.5}
	require.NoError(t, db.Write(ctx, "b", late))
	all = append(all, late)
	check("after a late point")
	require.NoError(t, db.Rollup(ctx, rollupBase, end))
	check("after Rollup again")
}

// A Rollup that meets another's write of its block between its read of the block and its
// own write (here a late point written and rolled up by another process) fails that write
// and starts the series again: the block stored in the end holds the late point.
func TestTSDBRollupRace(t *testing.T) {
	ctx := context.Background()
	h := &hooked{}
	db, svc, _ := newDB(t, &tsdb.Options{RawPeriod: 24 * time.Hour})
	var pts []tablets.Point
	for i := range 120 {
		pts = append(pts, tablets.Point{Time: rollupBase.Add(time.Duration(i) * time.Minute), Value: float64(i)})
	}
	require.NoError(t, db.Write(ctx, "r", pts...))
	require.NoError(t, db.Rollup(ctx, rollupBase, rollupBase.Add(2*time.Hour)))
	// A point more, so that the next Rollup has a block to write.
	more := tablets.Point{Time: rollupBase.Add(90*time.Minute + 20*time.Second), Value: 0.5}
	require.NoError(t, db.Write(ctx, "r", more))

	// Through a hooked client, the second Rollup meets a Write and a Rollup before its first
	// block write.
	hdb, _ := newHookedDB(t, db.Name(), h)
	late := tablets.Point{Time: rollupBase.Add(30*time.Minute + 15*time.Second), Value: -7.5}
	injected := false
	h.arm(func(r *http.Request) bool { return isBatch(r) && strings.Contains(string(relPeekBody(r)), "t60p") }, func() {
		injected = true
		require.NoError(t, db.Write(ctx, "r", late))
		require.NoError(t, db.Rollup(ctx, rollupBase, rollupBase.Add(2*time.Hour)))
	}, nil)
	require.NoError(t, hdb.Rollup(ctx, rollupBase, rollupBase.Add(2*time.Hour)))
	require.True(t, injected)

	// The 1-minute tier's block, read raw, holds every point.
	all := append(pts, more, late)
	windows, sealed := columnarWindows(t, tierEntities(t, svc, db, time.Minute, rollupBase, rollupBase.Add(time.Hour), "r"), time.Minute)
	requireColumnar(t, windows, all, rollupBase, rollupBase.Add(2*time.Hour), time.Minute, "minutes")
	require.Equal(t, uint64(2), windows[rollupBase.Add(30*time.Minute)].Count, "window 30m holds the point written and the late one")
	require.True(t, sealed[rollupBase.Add(30*time.Minute)])
	w := collectWindows(t, hdb.Aggregate(ctx, []string{"r"}, rollupBase.Add(30*time.Minute), rollupBase.Add(31*time.Minute), time.Minute, nil))
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
	w := collectWindows(t, db.Aggregate(ctx, []string{"day"}, day, day.Add(24*time.Hour), time.Minute, nil))
	require.Len(t, w, 1440)
	t.Logf("a day at a 1-minute step: %d requests", checker.Stats().Requests-before.Requests)
	require.LessOrEqual(t, checker.Stats().Requests-before.Requests, int64(2), "a day at a 1-minute step")

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
	w = collectWindows(t, db.Aggregate(ctx, names, week, week.Add(7*24*time.Hour), time.Hour, nil))
	require.Len(t, w, 168)
	require.Equal(t, uint64(40*6), w[0].Count)
	t.Logf("40 series, 7 days at 1 h: %d requests", checker.Stats().Requests-before.Requests)
	require.LessOrEqual(t, checker.Stats().Requests-before.Requests, int64(6), "40 series, 7 days at 1 h")
	p99 := w[0].Quantile(0.99)
	require.InDelta(t, 39000.0, p99, 0.01*39000+6, "p99 across the 40 series")

	// A year of one series summarized at a 1-day step: at most 3 requests. (A point an hour:
	// the tier read costs the same whatever the raw density.)
	year := time.Date(2023, 1, 1, 0, 0, 0, 0, time.UTC)
	pts = pts[:0]
	for i := range 365 * 24 {
		pts = append(pts, tablets.Point{Time: year.Add(time.Duration(i) * time.Hour), Value: float64(i)})
	}
	require.NoError(t, db.Write(ctx, "year", pts...))
	rollupLate(t, db, year, year.AddDate(1, 0, 0))
	before = checker.Stats()
	w = collectWindows(t, db.Aggregate(ctx, []string{"year"}, year, year.AddDate(1, 0, 0), 24*time.Hour, nil))
	require.Len(t, w, 365)
	t.Logf("a year at a 1-day step: %d requests", checker.Stats().Requests-before.Requests)
	require.LessOrEqual(t, checker.Stats().Requests-before.Requests, int64(3), "a year at a 1-day step")
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

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
func newHookedDB(t *testing.T, name string, h *hooked) (*tsdb.DB, *aztables.ServiceClient) {
	srv := azurite.Shared(t)
	checker := azurite.NewChecker(nil, func(v string) { t.Errorf("Azure limit violated: %s", v) })
	h.next = checker
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
	w := collectWindows(t, db.Aggregate(ctx, []string{"x"}, day0, day0.Add(96*time.Hour), time.Hour, nil))
	require.Len(t, w, 96)
	w = collectWindows(t, db.Aggregate(ctx, []string{"x"}, day0, day0.Add(48*time.Hour), time.Minute, nil))
	require.Len(t, w, 288)
}

// Rollup is safe under lost replies (a retried write finds the ETag changed and starts
// again) and beside another Rollup; KeepRolledUp keeps the tiers current. 40 series, a day
// at 1 Hz: Rollup reads each series' raw rows once.
func TestTSDBRollupReliability(t *testing.T) {
	ctx := context.Background()
	srv := azurite.Shared(t)
	name := "rel" + strconv.FormatInt(time.Now().UnixNano()%1e9, 10)
	lossy, err := srv.NewServiceClient(&aztables.ClientOptions{ClientOptions: policy.ClientOptions{
		Transport: fault.New(azurite.DefaultTransport(), fault.Options{Seed: 3, LoseReply: 0.2}),
		Retry:     policy.RetryOptions{MaxRetries: 20, RetryDelay: time.Millisecond, MaxRetryDelay: 5 * time.Millisecond}}})
	require.NoError(t, err)
	t.Cleanup(func() { dropTables(t, name) })
	db, err := tsdb.Open(ctx, lossy, name, &tsdb.Options{RawPeriod: 24 * time.Hour})
	require.NoError(t, err)
	day := time.Date(2024, 6, 10, 0, 0, 0, 0, time.UTC)
	var names []string
	var all []tablets.Point
	for s := range 40 {
		n := fmt.Sprintf("s%02d", s) // in name order: between equal times, the later name's value is First and Last
		names = append(names, n)
		var pts []tablets.Point
		for i := range 86400 {
			pts = append(pts, tablets.Point{Time: day.Add(time.Duration(i) * time.Second), Value: float64((i*7 + s) % 1000)})
		}
		require.NoError(t, db.Write(ctx, n, pts...))
		all = append(all, pts...)
	}
	// Two Rollups at once, through lost replies.
	other, err := tsdb.Open(ctx, lossy, name, &tsdb.Options{RawPeriod: 24 * time.Hour})
	require.NoError(t, err)
	start := time.Now()
	errs := make(chan error, 2)
	for _, d := range []*tsdb.DB{db, other} {
		go func() { errs <- d.Rollup(ctx, day, day.Add(24*time.Hour)) }()
	}
	require.NoError(t, <-errs)
	require.NoError(t, <-errs)
	t.Logf("two concurrent Rollups of a day of 40 series at 1 Hz through 20%% lost replies: %.0f points/s", float64(len(all))/time.Since(start).Seconds())
	got := collectWindows(t, db.Aggregate(ctx, names, day, day.Add(24*time.Hour), time.Hour, nil))
	requireWindows(t, modelWindows(all, day, day.Add(24*time.Hour), time.Hour), got, "after Rollups through lost replies")

	// KeepRolledUp picks up a series written later, once sealed.
	db2, _, checker := newDB(t, &tsdb.Options{RawPeriod: 24 * time.Hour, SealDelay: 10 * time.Minute})
	old := time.Now().Add(-3 * time.Hour).Truncate(time.Hour)
	var pts []tablets.Point
	for i := range 60 {
		pts = append(pts, tablets.Point{Time: old.Add(time.Duration(i) * time.Minute), Value: float64(i)})
	}
	require.NoError(t, db2.Write(ctx, "k", pts...))
	require.ErrorIs(t, db2.KeepRolledUp(ctx, time.Second, 10*time.Minute, nil), tablets.ErrInvalidOptions, "a lookback not over SealDelay")
	require.ErrorIs(t, db2.KeepCompacted(ctx, time.Second, 0, nil), tablets.ErrInvalidOptions, "no lookback")
	loopCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	runs := newLoopRuns(loopCtx)
	go func() { done <- db2.KeepRolledUp(loopCtx, 20*time.Millisecond, 6*time.Hour, runs.report) }()
	runs.waitCovered(t, old, old.Add(time.Hour))
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	before := checker.Stats().Requests
	w := collectWindows(t, db2.Aggregate(ctx, []string{"k"}, old, old.Add(time.Hour), time.Hour, nil))
	require.Len(t, w, 1)
	require.Equal(t, uint64(60), w[0].Count)
	require.Equal(t, int64(2), checker.Stats().Requests-before, "the hour is read from the tier KeepRolledUp made, and the dirty markers (none)")
}

// dropTables deletes the tables whose names start with prefix.
func dropTables(t *testing.T, prefix string) {
	admin, err := azurite.Shared(t).NewServiceClient(nil)
	if err != nil {
		return
	}
	for p := admin.NewListTablesPager(nil); p.More(); {
		page, err := p.NextPage(context.Background())
		if err != nil {
			return
		}
		for _, tb := range page.Tables {
			if strings.HasPrefix(*tb.Name, prefix) {
				_, _ = admin.DeleteTable(context.Background(), *tb.Name, nil)
			}
		}
	}
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
