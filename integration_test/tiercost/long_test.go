package tiercost

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/chunked"
	"github.com/seed71701133/tablets/internal/azurite"
	"github.com/seed71701133/tablets/internal/dbtest"
	"github.com/seed71701133/tablets/tsdb"
)

// yearData is a database of one tier (an hour) holding a year of 100 narrow gauges
// ("m000".."m099", memory-like: 1e9 ± 0.5%) and 100 noisy ones ("n000".."n099": ± 50%), a
// point every 15 minutes, rolled up.
func yearData(t testing.TB) (*tsdb.DB, *azurite.Checker, time.Time, time.Time, map[string][]tablets.Point) {
	db, _, checker := dbtest.NewDB(t, &tsdb.Options{RawPeriod: 364 * 24 * time.Hour, Tiers: []tsdb.Tier{{Step: time.Hour}}})
	to := pastDay()
	from := to.AddDate(-1, 0, 0)
	rng := rand.New(rand.NewPCG(21, 3))
	series := map[string][]tablets.Point{}
	for i := range 100 {
		series[fmt.Sprintf("m%03d", i)] = memoryPoints(rng, from, to, 15*time.Minute, 0.005)
		series[fmt.Sprintf("n%03d", i)] = memoryPoints(rng, from, to, 15*time.Minute, 0.5)
	}
	writeAll(t, db, series)
	require.NoError(t, db.Rollup(context.Background(), from, to))
	return db, checker, from, to, series
}

// A year at an hour of 100 series, merged, with the 99th percentile: at most 6 requests
// and 10 MB for narrow gauges; the figure for noisy ones is reported.
func TestYearOfHours(t *testing.T) {
	ctx := context.Background()
	db, checker, from, to, series := yearData(t)
	fields := &tsdb.AggregateOptions{Fields: tsdb.FieldSum | tsdb.FieldQuantiles}
	for _, prefix := range []string{"m", "n"} {
		var names []string
		var all []tablets.Point
		for i := range 100 {
			name := fmt.Sprintf("%s%03d", prefix, i)
			names = append(names, name)
			all = append(all, series[name]...)
		}
		var got []tsdb.Window
		c := measure(checker, func() { got = collect(t, db.Aggregate(ctx, names, from, to, time.Hour, fields)) })
		want := modelWindows(all, from, to, time.Hour)
		require.Len(t, got, len(want))
		for i, m := range want {
			require.Equal(t, m.count, got[i].Count, "window %v", m.start)
			exact := m.values[int(0.99*float64(len(m.values)-1))]
			require.InDelta(t, exact, got[i].Quantile(0.99), 0.0100001*exact, "window %v: p99", m.start)
		}
		t.Logf("a year at 1 h of 100 series (%s), merged, with p99: %d requests, %.2f MB, %.1f bytes a series' window",
			prefix, c.requests, float64(c.bytes)/1e6, float64(c.bytes)/float64(100*len(want)))
		if prefix == "m" {
			require.LessOrEqual(t, c.requests, int64(6), "requests of a year of 100 narrow gauges")
			require.LessOrEqual(t, c.bytes, int64(10e6), "bytes of a year of 100 narrow gauges")
		}
	}
}

// dashboardData writes 20 counters scraped every 15 s over [start, end) (server's
// BenchmarkDashboard's) into a chunked database and rolls them up.
func dashboardData(t testing.TB, start, end time.Time) (*tsdb.DB, *azurite.Checker, []string) {
	layout := func(c *aztables.Client) (tablets.Store, error) { return chunked.New(c, nil) }
	db, _, checker := dbtest.NewDB(t, &tsdb.Options{Layout: layout, DirectWrites: true})
	rng := rand.New(rand.NewPCG(1, 1))
	series := map[string][]tablets.Point{}
	var names []string
	for i := range 20 {
		name := fmt.Sprintf("dash_i%02d_job%d", i, i%4)
		names = append(names, name)
		series[name] = counterPoints(rng, start, end, 15*time.Second)
	}
	writeAll(t, db, series)
	require.NoError(t, db.Rollup(context.Background(), start, end))
	slices.Sort(names)
	return db, checker, names
}

// 7 days of 20 counters at 15 s, their last value a minute from the minute tier, read
// apart (AggregateSeries: what rate needs) cost no more bytes than their raw points.
func TestDashboardFromMinuteTier(t *testing.T) {
	ctx := context.Background()
	end := time.Now().UTC().Add(-2 * time.Hour).Truncate(time.Hour)
	start := end.Add(-7 * 24 * time.Hour)
	db, checker, names := dashboardData(t, start, end)
	points := 0
	raw := measure(checker, func() {
		for _, err := range db.QueryMany(ctx, names, start, end) {
			require.NoError(t, err)
			points++
		}
	})
	windows := 0
	last := map[string]float64{}
	tier := measure(checker, func() {
		for w, err := range db.AggregateSeries(ctx, names, start, end, time.Minute, &tsdb.AggregateOptions{Fields: tsdb.FieldLast}) {
			require.NoError(t, err)
			require.GreaterOrEqual(t, w.Last, last[w.Series], "a counter's last values grow")
			require.Equal(t, uint64(4), w.Count)
			last[w.Series] = w.Last
			windows++
		}
	})
	require.Equal(t, 20*7*24*60, windows)
	require.Equal(t, 4*windows, points)
	t.Logf("7 days of 20 counters at 15 s: raw %d requests, %d bytes (%.2f a point); minute tier with FieldLast %d requests, %d bytes (%.2f a window)",
		raw.requests, raw.bytes, float64(raw.bytes)/float64(points), tier.requests, tier.bytes, float64(tier.bytes)/float64(windows))
	require.LessOrEqual(t, tier.bytes, raw.bytes, "the minute tier's last values cost no more than the raw points")
}
