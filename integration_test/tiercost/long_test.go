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
	"github.com/seed71701133/tablets/internal/testkit/azurite"
	"github.com/seed71701133/tablets/tsdb"
)

// chunkedLayout stores the raw points in chunks (cheap to write and read back).
func chunkedLayout(c *aztables.Client) (tablets.Store, error) { return chunked.New(c, nil) }

// yearData is a database of one tier (an hour) holding a year of narrowSeries narrow
// gauges ("m000".."m039", memory-like: 1e9 ± 0.5%) and noisySeries noisy ones
// ("n000".."n009": ± 50%), a point every 15 minutes, rolled up. (A Rollup of a year takes
// about a second a series on Azurite: a day's slice at a time, each rewriting its 14-day
// block.)
func yearData(t testing.TB) (*tsdb.DB, *azurite.Checker, time.Time, time.Time, map[string][]tablets.Point) {
	db, writer, checker := newLiveDB(t, tsdb.Options{Layout: chunkedLayout, DirectWrites: true, RawPeriod: 364 * 24 * time.Hour,
		Tiers: []tsdb.Tier{{Step: time.Hour}}})
	to := pastDay()
	from := to.AddDate(-1, 0, 0)
	rng := rand.New(rand.NewPCG(21, 3))
	series := map[string][]tablets.Point{}
	for i := range narrowSeries {
		series[fmt.Sprintf("m%03d", i)] = memoryPoints(rng, from, to, 15*time.Minute, 0.005)
		if i < noisySeries {
			series[fmt.Sprintf("n%03d", i)] = memoryPoints(rng, from, to, 15*time.Minute, 0.5)
		}
	}
	start := time.Now()
	writeAll(t, writer, series)
	t.Logf("wrote %d series of a year at 15 min in %v", len(series), time.Since(start).Round(time.Second))
	start = time.Now()
	require.NoError(t, db.Rollup(context.Background(), from, to))
	t.Logf("rolled them up in %v", time.Since(start).Round(time.Second))
	return db, checker, from, to, series
}

// narrowSeries is how many narrow gauges yearData writes: more than Aggregate reads by
// filters of 13 series (26), so that it scans the tier's partitions, as for 100. The cost
// target is for 100 series, but a year of them takes minutes to write and roll up (about a
// second a series): it is checked scaled to narrowSeries (its bytes are linear in the
// series, its requests a page per 1,000 blocks of a tier table, see yearRequests).
const narrowSeries = 40

// noisySeries is how many noisy gauges yearData writes: their figure is reported per
// series, and scaled to 100.
const noisySeries = 10

// yearRequests is the most requests Aggregate of n series over [from, to) from the hour
// tier may make: the dirty markers, the staged points, and a page per 1,000 blocks (14 days
// each) of each tier table (364 days) the range touches: 6 for 100 series over a year.
func yearRequests(n int, from, to time.Time) int {
	const block, period = int64(14 * 24 * 3600), int64(364 * 24 * 3600)
	blocks := map[int64]int{} // by table
	for b := from.Unix() / block * block; b < to.Unix(); b += block {
		blocks[b/period] += n
	}
	requests := 2
	for _, k := range blocks {
		requests += (k + 999) / 1000
	}
	return requests
}

// A year at an hour of narrow gauges, merged, with the 99th percentile: for 100 series at
// most 6 requests and 10 MB, checked on narrowSeries (yearRequests, and 10 MB scaled); the
// figure for noisy ones is reported (of 10 series, and scaled to 100).
func TestYearOfHours(t *testing.T) {
	ctx := context.Background()
	db, checker, from, to, series := yearData(t)
	fields := &tsdb.AggregateOptions{Fields: tsdb.FieldQuantiles} // and Min and Max, which bound them
	for _, prefix := range []string{"m", "n"} {
		n := narrowSeries
		if prefix == "n" {
			n = noisySeries
		}
		var names []string
		var all []tablets.Point
		for i := range n {
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
		t.Logf("a year at 1 h of %d series (%s), merged, with p99: %d requests, %.2f MB, %.1f bytes a series' window (%.2f MB for 100 series)",
			n, prefix, c.requests, float64(c.bytes)/1e6, float64(c.bytes)/float64(n*len(want)), float64(c.bytes)*100/float64(n)/1e6)
		if prefix == "m" {
			require.LessOrEqual(t, c.requests, int64(yearRequests(n, from, to)), "requests of a year of %d narrow gauges", n)
			require.LessOrEqual(t, c.bytes, int64(10e6*n/100), "bytes of a year of %d narrow gauges (10 MB for 100)", n)
		}
	}
}

// dashboardData writes 20 counters scraped every 15 s over [start, end) (server's
// BenchmarkDashboard's) into a chunked database and rolls them up.
func dashboardData(t testing.TB, start, end time.Time) (*tsdb.DB, *azurite.Checker, []string) {
	db, writer, checker := newLiveDB(t, tsdb.Options{Layout: chunkedLayout, DirectWrites: true})
	rng := rand.New(rand.NewPCG(1, 1))
	series := map[string][]tablets.Point{}
	var names []string
	for i := range 20 {
		name := fmt.Sprintf("dash_i%02d_job%d", i, i%4)
		names = append(names, name)
		series[name] = counterPoints(rng, start, end, 15*time.Second)
	}
	writeAll(t, writer, series)
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
