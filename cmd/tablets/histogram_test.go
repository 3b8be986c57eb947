package main

import (
	"bufio"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"image"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/value"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gonum.org/v1/plot/plotutil"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/testkit/azurite"
	"github.com/seed71701133/tablets/tsdb"
)

// sampleHistogram has negative, zero and positive buckets, in two positive spans, with
// integer counts as deltas: absolute -1..-0.5: 1, zero: 1, (0.5,1]: 2, (1,2]: 3, (4,8]: 1.
func sampleHistogram() *tablets.Histogram {
	return &tablets.Histogram{Schema: 0, ZeroThreshold: 0.001, ZeroCount: 1, Count: 8, Sum: 12.5,
		PositiveSpans: []tablets.HistogramSpan{{Offset: 0, Length: 2}, {Offset: 1, Length: 1}}, PositiveBuckets: []int64{2, 1, -2},
		NegativeSpans: []tablets.HistogramSpan{{Offset: 0, Length: 1}}, NegativeBuckets: []int64{1}}
}

func TestFormatHistogram(t *testing.T) {
	fh := promFloat(tablets.HistogramPoint{H: sampleHistogram()})
	assert.Equal(t, "{count:8, sum:12.5, schema:0, [-1,-0.5):1, [-0.001,0.001]:1, (0.5,1]:2, (1,2]:3, (4,8]:1}", formatHistogram(fh))
	js := histogramJSON(fh)
	assert.Equal(t, `{"count":8,"sum":12.5,"schema":0,"zero_threshold":0.001,"reset_hint":"unknown","buckets":`+
		`[[1,-1,-0.5,1],[3,-0.001,0.001,1],[0,0.5,1,2],[0,1,2,3],[0,4,8,1]]}`, js)
	assert.True(t, json.Valid([]byte(js)))

	// A float gauge histogram with custom buckets (NHCB): the bounds are its custom values.
	gauge := promFloat(tablets.HistogramPoint{FH: &tablets.FloatHistogram{CounterResetHint: tablets.GaugeType,
		Schema: tablets.CustomBucketsSchema, Count: 3.5, Sum: 0.25, CustomValues: []float64{0.1, 0.2},
		PositiveSpans: []tablets.HistogramSpan{{Offset: 0, Length: 3}}, PositiveBuckets: []float64{1.5, 0, 2}}})
	assert.Equal(t, "{count:3.5, sum:0.25, schema:-53, gauge, [-Inf,0.1]:1.5, (0.2,+Inf]:2}", formatHistogram(gauge))
	js = histogramJSON(gauge)
	assert.Equal(t, `{"count":3.5,"sum":0.25,"schema":-53,"zero_threshold":0,"reset_hint":"gauge","buckets":`+
		`[[3,"-Infinity",0.1,1.5],[0,0.2,"Infinity",2]]}`, js)

	stale := sampleHistogram()
	stale.Sum = math.Float64frombits(value.StaleNaN)
	fh = promFloat(tablets.HistogramPoint{H: stale})
	assert.Equal(t, "stale", formatHistogram(fh))
	assert.Contains(t, histogramJSON(fh), `"sum":"NaN","schema":0,"zero_threshold":0.001,"reset_hint":"unknown","stale":true`)
	assert.Nil(t, promFloat(tablets.HistogramPoint{}))
}

// TestQuantileLines feeds a counter histogram whose samples are a base (mass in high
// buckets) plus n times an increment (mass in low buckets), reset once and interrupted by a
// staleness marker once: the quantiles of every interval must be the increment's (those of
// the samples themselves are the base's), which a missed reset or an increase across the
// marker would skew. Then a gauge histogram: the quantiles of each interval's last sample.
func TestQuantileLines(t *testing.T) {
	inc := &histogram.FloatHistogram{Schema: 0, Count: 10, Sum: 5,
		PositiveSpans: []histogram.Span{{Offset: -2, Length: 3}}, PositiveBuckets: []float64{4, 5, 1}}
	base := &histogram.FloatHistogram{Schema: 0, Count: 1000, Sum: 50000,
		PositiveSpans: []histogram.Span{{Offset: 5, Length: 2}}, PositiveBuckets: []float64{600, 400}}
	scaled := func(h *histogram.FloatHistogram, n float64) *histogram.FloatHistogram { return h.Copy().Mul(n) }
	sum := func(a, b *histogram.FloatHistogram) *histogram.FloatHistogram {
		s, err := a.Copy().Add(b)
		require.NoError(t, err)
		return s
	}
	t0 := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
	l := newQuantileLines(time.Minute)
	const n = 60 // 10 minutes at 10 s
	for i := range n {
		var h *histogram.FloatHistogram
		switch {
		case i < 25:
			h = sum(base, scaled(inc, float64(i)))
		case i == 25: // a counter reset: the increase is the sample itself
			h = scaled(inc, 2)
		case i == 40: // a staleness marker
			h = base.Copy()
			h.Sum = math.Float64frombits(value.StaleNaN)
		case i < 40:
			h = scaled(inc, float64(i-23))
		default: // resumed from far higher: no increase from before the marker
			h = sum(scaled(base, 7), scaled(inc, float64(i)))
		}
		l.push(t0.Add(time.Duration(i)*10*time.Second), h)
	}
	lines := l.finish("lat")
	require.Len(t, lines, 3)
	for k, q := range plotQuantiles {
		assert.Equal(t, fmt.Sprintf("lat p%g", q*100), lines[k].name)
		want := histogramQuantile(q, inc)
		require.Len(t, lines[k].t, n/6, "one point an interval")
		for j, v := range lines[k].avg {
			assert.Equal(t, float64(t0.Add(time.Duration(j)*time.Minute).Unix()), lines[k].t[j])
			assert.InDelta(t, want, v, 1e-12, "p%g of interval %d", q*100, j)
		}
		assert.NotEqual(t, want, histogramQuantile(q, base), "the base's quantiles must differ, or the test shows nothing")
	}
	assert.Equal(t, n, l.samples)
	assert.Zero(t, l.skipped)

	// A gauge histogram: each interval's last sample.
	g := newQuantileLines(time.Minute)
	var last []*histogram.FloatHistogram
	for i := range 12 {
		h := sum(scaled(base, float64(i%3+1)), scaled(inc, float64(100*(i%4))))
		h.CounterResetHint = histogram.GaugeType
		g.push(t0.Add(time.Duration(i)*20*time.Second), h)
		if i%3 == 2 {
			last = append(last, h)
		}
	}
	gl := g.finish("queue")
	for k, q := range plotQuantiles {
		require.Len(t, gl[k].avg, 4)
		for j, v := range gl[k].avg {
			assert.Equal(t, histogramQuantile(q, last[j]), v, "p%g of interval %d", q*100, j)
		}
	}
}

// histDB opens database name as the command does (the default layout), its requests
// through the limit Checker.
func histDB(t *testing.T, name string) *tsdb.DB {
	t.Helper()
	checker := azurite.NewChecker(nil, func(v string) { t.Errorf("Azure limit violated: %s", v) })
	svc, err := azurite.Shared(t).NewServiceClient(&aztables.ClientOptions{ClientOptions: policy.ClientOptions{Transport: checker}})
	require.NoError(t, err)
	def, err := findLayout(defaultLayout)
	require.NoError(t, err)
	db, err := tsdb.Open(context.Background(), svc, name, &tsdb.Options{
		Layout: func(c *aztables.Client) (tablets.Store, error) { return def.open(c, layoutOptions{}) }})
	require.NoError(t, err)
	return db
}

// TestQueryPlotHistograms writes a counter histogram series (integer, every 15 s for two
// hours, a latency distribution that drifts), a gauge histogram series (float) and a float
// series to a database, then queries them by selector and by key in every format, and
// plots them.
func TestQueryPlotHistograms(t *testing.T) {
	t.Parallel()
	env, _ := account(t)
	name := "clih" + strings.ToLower(azurite.NewTableName()[1:9])
	db := histDB(t, name)
	ctx := context.Background()
	start := time.Now().UTC().Truncate(time.Hour).Add(-3 * time.Hour)
	latKey, err := db.SeriesOf(ctx, tsdb.LabelsFromStrings("__name__", "lat", "job", "api"))
	require.NoError(t, err)
	queueKey, err := db.SeriesOf(ctx, tsdb.LabelsFromStrings("__name__", "queue", "job", "api"))
	require.NoError(t, err)
	const n = 480
	var lat, queue []tablets.HistogramPoint
	h := sampleHistogram()
	for i := range n {
		h = cumulate(h, i)
		lat = append(lat, tablets.HistogramPoint{Time: start.Add(time.Duration(i) * 15 * time.Second), H: h})
		queue = append(queue, tablets.HistogramPoint{Time: start.Add(time.Duration(i) * 15 * time.Second), FH: &tablets.FloatHistogram{
			CounterResetHint: tablets.GaugeType, Schema: 1, Count: float64(i%7) + 1.5, Sum: float64(i),
			PositiveSpans: []tablets.HistogramSpan{{Offset: int32(i % 5), Length: 2}}, PositiveBuckets: []float64{1, float64(i%7) + 0.5}}})
	}
	require.NoError(t, db.WriteSamples(ctx, nil, []tablets.SeriesHistograms{{Series: latKey, Histograms: lat}, {Series: queueKey, Histograms: queue}}))
	var floats strings.Builder
	for i := range 10 {
		fmt.Fprintf(&floats, "%s,%d\n", start.Add(time.Duration(i)*time.Minute).Format(time.RFC3339), i)
	}
	flags := []string{"--db", name}
	ok(t, env, floats.String(), append([]string{"write", "--labels", `up{job="api"}`}, flags...)...)
	rng := []string{"--from", start.Format(time.RFC3339), "--to", start.Add(3 * time.Hour).Format(time.RFC3339)}
	args := func(extra ...string) []string { return append(append(append([]string{}, extra...), flags...), rng...) }

	// JSON lines: one a sample, its counts those written.
	got := ok(t, env, "", args("query", `lat{job="api"}`, "--format", "json")...)
	lines := strings.Split(strings.TrimSpace(got), "\n")
	require.Len(t, lines, n)
	for i, line := range lines {
		var rec struct {
			Series    string
			Time      time.Time
			Histogram struct {
				Count, Sum float64
				Schema     int32
				Buckets    [][4]any
			}
		}
		require.NoError(t, json.Unmarshal([]byte(line), &rec), line)
		assert.Equal(t, `lat{job="api"}`, rec.Series)
		assert.True(t, rec.Time.Equal(lat[i].Time), line)
		assert.Equal(t, float64(lat[i].H.Count), rec.Histogram.Count, line)
		assert.Equal(t, lat[i].H.Sum, rec.Histogram.Sum, line)
		if i == 0 {
			assert.Equal(t, `{"series":"lat{job=\"api\"}","time":"`+lat[0].Time.Format(time.RFC3339Nano)+`","histogram":`+
				histogramJSON(promFloat(lat[0]))+`}`, line)
		}
	}

	// A table and CSV of the first two samples, by selector (two series) and by key.
	two := []string{"--from", start.Format(time.RFC3339), "--to", start.Add(30 * time.Second).Format(time.RFC3339)}
	got = ok(t, env, "", append(append([]string{"query", `{job="api", __name__=~"lat|queue"}`}, flags...), two...)...)
	tbl := strings.Split(strings.TrimSpace(got), "\n")
	require.Len(t, tbl, 5, got)
	assert.Regexp(t, `^TIME +SERIES +VALUE$`, tbl[0])
	assert.Contains(t, got, fmt.Sprintf("%-30s  %-16s  %s\n", start.Format(time.RFC3339Nano), `lat{job="api"}`, formatHistogram(promFloat(lat[0]))))
	assert.Contains(t, got, fmt.Sprintf("%-30s  %-16s  %s\n", start.Add(15*time.Second).Format(time.RFC3339Nano), `queue{job="api"}`, formatHistogram(promFloat(queue[1]))))
	got = ok(t, env, "", append(append([]string{"query", "--series", latKey, "--format", "csv"}, flags...), two...)...)
	recs, err := csv.NewReader(strings.NewReader(got)).ReadAll()
	require.NoError(t, err)
	assert.Equal(t, [][]string{{"time", "value"},
		{start.Format(time.RFC3339Nano), formatHistogram(promFloat(lat[0]))},
		{start.Add(15 * time.Second).Format(time.RFC3339Nano), formatHistogram(promFloat(lat[1]))}}, recs)

	// Floats of the same database print as before, and --step says it leaves histograms out.
	got = ok(t, env, "", args("query", "up", "--format", "csv")...)
	assert.Equal(t, 11, strings.Count(got, "\n"), got)
	// With --step, a histogram series' windows: the observations between its samples in each
	// hour (its increase), their count, sum and quantiles; min has none.
	for _, agg := range []string{"count", "sum", "avg", "p50", "p99", "min"} {
		r := cli(t, env, "", args("query", "lat", "--step", "1h", "--agg", agg, "--format", "csv")...)
		require.Equal(t, 0, r.code, r.stderr)
		assert.Contains(t, r.stderr, `series lat{job="api"} has histogram samples: with --step, avg, sum, count and the quantiles are those of their observations`)
		recs, err := csv.NewReader(strings.NewReader(r.stdout)).ReadAll()
		require.NoError(t, err)
		require.Len(t, recs, 3, r.stdout)
		for hour, rec := range recs[1:] {
			first, last := promFloat(lat[240*hour]), promFloat(lat[240*hour+239])
			inc, err := last.Copy().Sub(first)
			require.NoError(t, err)
			want := map[string]float64{"count": inc.Count, "sum": inc.Sum, "avg": inc.Sum / inc.Count,
				"p50": histogramQuantile(0.5, inc), "p99": histogramQuantile(0.99, inc), "min": math.NaN()}[agg]
			assert.Equal(t, start.Add(time.Duration(hour)*time.Hour).Format(time.RFC3339), rec[0], agg)
			got, err := strconv.ParseFloat(rec[2], 64)
			require.NoError(t, err)
			if math.IsNaN(want) {
				assert.True(t, math.IsNaN(got), "%s hour %d: %v", agg, hour, got)
			} else {
				assert.InDelta(t, want, got, 1e-9*math.Abs(want), "%s hour %d", agg, hour)
			}
		}
	}

	// The plot: three quantile lines a histogram series, the float series as before.
	png := filepath.Join(t.TempDir(), "hist.png")
	out := ok(t, env, "", args("plot", `{job="api"}`, "--out", png, "--width", "600", "--height", "300")...)
	assert.Contains(t, out, fmt.Sprintf("%s points", thousands(2*n+10)))
	f, err := os.Open(png)
	require.NoError(t, err)
	defer f.Close()
	img, _, err := image.Decode(bufio.NewReader(f))
	require.NoError(t, err)
	// Each of the seven lines (three quantiles of two histogram series, one float series)
	// in its own palette color.
	for i := range 7 {
		cr, cg, cb, _ := plotutil.Color(i).RGBA()
		near := 0
		for y := range 300 {
			for x := range 600 {
				r, g, b, _ := img.At(x, y).RGBA()
				if absDiff(r, cr) < 0x1000 && absDiff(g, cg) < 0x1000 && absDiff(b, cb) < 0x1000 {
					near++
				}
			}
		}
		assert.Greater(t, near, 20, "line %d: too few pixels of its color", i)
	}
}

func absDiff(a, b uint32) uint32 { return max(a, b) - min(a, b) }

// cumulate returns the next sample of a counter histogram after h: i+1 observations more,
// spread over the buckets so that the distribution drifts (integer deltas kept valid).
func cumulate(h *tablets.Histogram, i int) *tablets.Histogram {
	next := *h
	next.PositiveBuckets = append([]int64(nil), h.PositiveBuckets...)
	// Absolute counts from the deltas, add, back to deltas.
	abs := make([]int64, len(next.PositiveBuckets))
	var c int64
	for k, d := range next.PositiveBuckets {
		c += d
		abs[k] = c
	}
	abs[i%len(abs)] += int64(i + 1)
	var prev int64
	for k, a := range abs {
		next.PositiveBuckets[k] = a - prev
		prev = a
	}
	next.Count += uint64(i + 1)
	next.Sum += float64(i+1) * 1.5
	return &next
}
