package api

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/util/teststorage"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets/internal/testkit/promjson"
)

// The native histogram tests: the same samples in the memStore behind the API and in
// Prometheus' own TSDB (teststorage); every query's HTTP answer must be byte for byte what
// Prometheus' web/api/v1 JSON codec writes for its engine's answer over its TSDB, and agree
// within 1e-9 once decoded.

// absHist is an integer histogram from absolute bucket counts (one span a side).
func absHist(schema int32, zt float64, zc uint64, posOff int32, pos []uint64, negOff int32, neg []uint64, sum float64) *histogram.Histogram {
	h := &histogram.Histogram{Schema: schema, ZeroThreshold: zt, ZeroCount: zc, Sum: sum, Count: zc}
	deltas := func(abs []uint64) []int64 {
		out := make([]int64, len(abs))
		prev := int64(0)
		for i, c := range abs {
			out[i] = int64(c) - prev
			prev = int64(c)
			h.Count += c
		}
		return out
	}
	if len(pos) > 0 {
		h.PositiveSpans = []histogram.Span{{Offset: posOff, Length: uint32(len(pos))}}
		h.PositiveBuckets = deltas(pos)
	}
	if len(neg) > 0 {
		h.NegativeSpans = []histogram.Span{{Offset: negOff, Length: uint32(len(neg))}}
		h.NegativeBuckets = deltas(neg)
	}
	return h
}

type histSeries struct {
	lset    labels.Labels
	samples []tSample
}

// histData: every 15 s over an hour from t0,
//   - lat_seconds{job="api"}: an integer counter histogram of schema 1 whose buckets widen
//     after 20 minutes and which restarts at resetAt;
//   - lat_seconds{job="web"}: a float counter histogram of custom buckets, with fractional
//     counts, marked stale at staleAt+1800 (a histogram staleness marker);
//   - mixed_metric: floats for 20 minutes, then gauge histograms with negative buckets;
//   - edge: a histogram a minute of bounds rendered in 'e' format, infinite and NaN sums,
//     a zero bucket of threshold 0, empty buckets.
func histData() []histSeries {
	rng := rand.New(rand.NewPCG(1, 2))
	var api, web, mixed, edge []tSample
	apiCounts := make([]uint64, 6)
	var apiZero uint64
	apiSum := 0.0
	webCounts := []float64{0, 0, 0, 0, 0}
	webSum := 0.0
	webStale := (staleAt + 1800) * 1000
	for sec := t0; sec <= t0+duration; sec += interval {
		ms := sec * 1000
		if sec == resetAt {
			clear(apiCounts)
			apiZero, apiSum = 0, 0
		}
		width := 4
		if sec >= t0+1200 {
			width = 6
		}
		for i := range width {
			n := uint64(rng.IntN(5))
			apiCounts[i] += n
			apiSum += float64(n) * math.Pow(2, float64(i)/2) * 0.8
		}
		apiZero += uint64(rng.IntN(2))
		api = append(api, tSample{t: ms, h: absHist(1, 0.001, apiZero, -1, apiCounts[:width], 0, nil, apiSum)})

		if ms < webStale {
			for i := range webCounts {
				x := rng.Float64() * 3
				webCounts[i] += x
				webSum += x * []float64{0.05, 0.3, 0.8, 3, 7}[i]
			}
			total := 0.0
			for _, c := range webCounts {
				total += c
			}
			web = append(web, tSample{t: ms, fh: &histogram.FloatHistogram{
				Schema: histogram.CustomBucketsSchema, Count: total, Sum: webSum,
				PositiveSpans:   []histogram.Span{{Offset: 0, Length: 5}},
				PositiveBuckets: append([]float64(nil), webCounts...),
				CustomValues:    []float64{0.1, 0.5, 1, 5},
			}})
		} else if ms == webStale {
			web = append(web, tSample{t: ms, fh: &histogram.FloatHistogram{
				Schema: histogram.CustomBucketsSchema, Sum: staleNaN, CustomValues: []float64{0.1, 0.5, 1, 5},
			}})
		}

		if sec < t0+1200 {
			mixed = append(mixed, tSample{t: ms, f: float64(sec-t0) / 10})
		} else {
			h := absHist(0, 0.5, uint64(rng.IntN(3)), 0, []uint64{uint64(rng.IntN(4)), 0, uint64(rng.IntN(4)) + 1}, 1, []uint64{uint64(rng.IntN(3)) + 1}, float64(rng.IntN(100))-50)
			h.CounterResetHint = histogram.GaugeType
			mixed = append(mixed, tSample{t: ms, h: h})
		}

		if (sec-t0)%60 == 0 {
			var h *histogram.Histogram
			switch (sec - t0) / 60 % 5 {
			case 0: // buckets of 2^16 each: (2^64, 2^80] and (2^80, 2^96] in 'e' format
				h = absHist(-4, 0, 0, 4, []uint64{2, 0, 3}, 0, nil, math.Inf(1))
			case 1: // tiny buckets of schema 8, and negative ones
				h = absHist(8, 0, 0, -6000, []uint64{1, 1}, -6000, []uint64{4}, 1e-7)
			case 2: // a zero bucket of threshold 0
				h = absHist(3, 0, 5, 2, []uint64{1}, 0, nil, math.NaN())
			case 3: // an empty histogram
				h = absHist(0, 0.001, 0, 0, nil, 0, nil, 0)
			case 4: // a gauge histogram with a negative sum
				h = absHist(2, 1e-10, 1, -3, []uint64{7, 0, 0, 1}, 2, []uint64{3, 3}, -12.5)
				h.CounterResetHint = histogram.GaugeType
			}
			edge = append(edge, tSample{t: ms, h: h})
		}
	}
	return []histSeries{
		{labels.FromStrings("__name__", "lat_seconds", "job", "api"), api},
		{labels.FromStrings("__name__", "lat_seconds", "job", "web"), web},
		{labels.FromStrings("__name__", "mixed_metric"), mixed},
		{labels.FromStrings("__name__", "edge"), edge},
	}
}

// promStorage loads the series into Prometheus' own TSDB.
func promStorage(t *testing.T, data []histSeries) storage.Storage {
	st := teststorage.New(t)
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	app := st.Appender(context.Background())
	for _, s := range data {
		for _, x := range s.samples {
			var err error
			switch {
			case x.h != nil:
				_, err = app.AppendHistogram(0, s.lset, x.t, x.h.Copy(), nil)
			case x.fh != nil:
				_, err = app.AppendHistogram(0, s.lset, x.t, nil, x.fh.Copy())
			default:
				_, err = app.Append(0, s.lset, x.t, x.f)
			}
			require.NoError(t, err, "%s at %d", s.lset, x.t)
		}
	}
	require.NoError(t, app.Commit())
	return st
}

// The queries: histograms as they are, PromQL's histogram functions, rate of histograms.
var histQueries = []string{
	`lat_seconds`,
	`rate(lat_seconds[5m])`,
	`increase(lat_seconds{job="api"}[2m])`,
	`histogram_count(rate(lat_seconds[5m]))`,
	`histogram_sum(rate(lat_seconds[5m]))`,
	`histogram_quantile(0.9, rate(lat_seconds[5m]))`,
	`histogram_quantile(0.5, sum by (job) (rate(lat_seconds[5m])))`,
	`histogram_quantile(0.99, lat_seconds)`,
	`histogram_count(lat_seconds)`,
	`histogram_avg(rate(lat_seconds[5m]))`,
	`histogram_fraction(0, 0.5, rate(lat_seconds[5m]))`,
	`mixed_metric`,
	`histogram_sum(mixed_metric)`,
	`edge`,
	`histogram_count(edge)`,
}

func TestHistogramQueriesAsPrometheus(t *testing.T) {
	data := histData()
	m := &memStore{}
	for _, s := range data {
		m.addMixed(s.lset, s.samples)
	}
	_, srv := newServer(t, m, nil)
	ref := promStorage(t, data)
	engine := promql.NewEngine(promql.EngineOpts{MaxSamples: DefaultMaxSamples, Timeout: time.Minute, LookbackDelta: 5 * time.Minute, EnableAtModifier: true, EnableNegativeOffset: true})
	ctx := context.Background()

	// expect is what Prometheus answers: its engine over its TSDB, in its JSON.
	expect := func(q promql.Query, query string) []byte {
		t.Helper()
		defer q.Close()
		res := q.Exec(ctx)
		require.NoError(t, res.Err, query)
		warnings, infos := res.Warnings.AsStrings(query, 10, 10)
		return promJSON(t, promjson.Response{Status: "success", Data: promjson.QueryData{ResultType: res.Value.Type(), Result: res.Value}, Warnings: warnings, Infos: infos})
	}
	histograms := 0
	for _, query := range histQueries {
		for _, at := range []int64{t0 + 600, t0 + 1205, resetAt + 10, staleAt + 1800, staleAt + 1801, t0 + duration} {
			q, err := engine.NewInstantQuery(ctx, ref, nil, query, time.Unix(at, 0))
			require.NoError(t, err)
			want := expect(q, query)
			_, _, body := do(t, srv, http.MethodGet, "/api/v1/query", url.Values{"query": {query}, "time": {ts(at)}})
			sameAnswer(t, want, body, "%s at %d", query, at)
			require.Equal(t, string(want), string(body), "%s at %d", query, at)
			histograms += countHistograms(body)
		}
		for _, step := range []int64{60, 135} {
			start, end := t0+30, t0+duration
			q, err := engine.NewRangeQuery(ctx, ref, nil, query, time.Unix(start, 0), time.Unix(end, 0), time.Duration(step)*time.Second)
			require.NoError(t, err)
			want := expect(q, query)
			_, _, body := do(t, srv, http.MethodPost, "/api/v1/query_range", url.Values{"query": {query}, "start": {ts(start)}, "end": {ts(end)}, "step": {strconv.FormatInt(step, 10)}})
			sameAnswer(t, want, body, "%s step %d", query, step)
			require.Equal(t, string(want), string(body), "%s step %d", query, step)
			histograms += countHistograms(body)
		}
	}
	require.Greater(t, histograms, 500, "histograms in the answers")
	t.Logf("%d histograms in the answers", histograms)
}

// countHistograms counts the histogram objects of an answer.
func countHistograms(body []byte) int {
	n := 0
	for i := 0; i+8 <= len(body); i++ {
		if string(body[i:i+8]) == `"count":` {
			n++
		}
	}
	return n
}

// sameAnswer decodes two answers and compares them: equal structure, numbers (in strings
// too) within 1e-9 relatively.
func sameAnswer(t *testing.T, want, got []byte, msgAndArgs ...any) {
	t.Helper()
	var w, g any
	require.NoError(t, json.Unmarshal(want, &w))
	require.NoError(t, json.Unmarshal(got, &g), "%s", got)
	if path, ok := within(w, g, "$"); !ok {
		require.Fail(t, "answers differ at "+path, msgAndArgs...)
	}
}

func within(w, g any, path string) (string, bool) {
	switch w := w.(type) {
	case map[string]any:
		gm, ok := g.(map[string]any)
		if !ok || len(gm) != len(w) {
			return path, false
		}
		for k, v := range w {
			if p, ok := within(v, gm[k], path+"."+k); !ok {
				return p, false
			}
		}
		return "", true
	case []any:
		ga, ok := g.([]any)
		if !ok || len(ga) != len(w) {
			return path, false
		}
		for i := range w {
			if p, ok := within(w[i], ga[i], fmt.Sprintf("%s[%d]", path, i)); !ok {
				return p, false
			}
		}
		return "", true
	case string:
		gs, ok := g.(string)
		if !ok {
			return path, false
		}
		if gs == w {
			return "", true
		}
		wf, err1 := strconv.ParseFloat(w, 64)
		gf, err2 := strconv.ParseFloat(gs, 64)
		if err1 != nil || err2 != nil {
			return path, false
		}
		return path, math.Abs(wf-gf) <= 1e-9*math.Max(1, math.Abs(wf))
	case float64:
		gf, ok := g.(float64)
		return path, ok && math.Abs(w-gf) <= 1e-9*math.Max(1, math.Abs(w))
	}
	return path, w == g
}

func promJSON(t *testing.T, r promjson.Response) []byte {
	t.Helper()
	b, err := promjson.Marshal(r)
	require.NoError(t, err)
	return b
}

// randomHistogram is a float histogram of any schema, spans with gaps, counts of any size
// (zero ones too, which are left out), and any sum.
func randomHistogram(rng *rand.Rand) *histogram.FloatHistogram {
	h := &histogram.FloatHistogram{Schema: int32(rng.IntN(13)) - 4}
	custom := rng.IntN(4) == 0
	if custom {
		h.Schema = histogram.CustomBucketsSchema
		b := -10 + rng.Float64()
		for range 1 + rng.IntN(8) {
			b += rng.ExpFloat64() * math.Pow(10, float64(rng.IntN(9)-4))
			h.CustomValues = append(h.CustomValues, b)
		}
	} else {
		h.ZeroThreshold = []float64{0, 1e-128, 0.001, 0.5}[rng.IntN(4)]
		h.ZeroCount = float64(rng.IntN(3))
	}
	count := func() float64 {
		switch rng.IntN(4) {
		case 0:
			return 0
		case 1:
			return float64(rng.IntN(1000))
		case 2:
			return rng.Float64() * 1e-8
		}
		return rng.ExpFloat64() * 1e22
	}
	spans := func(first int32, maxIndex int) ([]histogram.Span, []float64) {
		var sp []histogram.Span
		var counts []float64
		for i := range 1 + rng.IntN(3) {
			off := first
			if i > 0 {
				off = int32(rng.IntN(4))
			}
			n := 1 + rng.IntN(4)
			sp = append(sp, histogram.Span{Offset: off, Length: uint32(n)})
			for range n {
				counts = append(counts, count())
			}
		}
		return sp, counts
	}
	if custom {
		h.PositiveSpans, h.PositiveBuckets = []histogram.Span{{Offset: 0, Length: uint32(len(h.CustomValues) + 1)}}, nil
		for range len(h.CustomValues) + 1 {
			h.PositiveBuckets = append(h.PositiveBuckets, count())
		}
	} else {
		h.PositiveSpans, h.PositiveBuckets = spans(int32(rng.IntN(4000))-2000, 0)
		if rng.IntN(2) == 0 {
			h.NegativeSpans, h.NegativeBuckets = spans(int32(rng.IntN(4000))-2000, 0)
		}
	}
	h.Count = h.ZeroCount
	for _, c := range append(slices.Clone(h.PositiveBuckets), h.NegativeBuckets...) {
		h.Count += c
	}
	h.Sum = []float64{math.NaN(), math.Inf(1), math.Inf(-1), 0, -1.5e-9, rng.NormFloat64() * 1e6}[rng.IntN(6)]
	return h
}

// The JSON of histograms, samples and series is byte for byte Prometheus' for histograms
// of every kind, labels needing escapes included.
func TestHistogramJSONAsPrometheus(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	lsets := []labels.Labels{
		labels.FromStrings("__name__", "h"),
		labels.FromStrings("a", `<&>"\`, "b", "é\u2028\x01"),
		labels.FromStrings("c\n", "\xff\x7f\t\r\x1f", "d", "\u2029ok"),
		labels.EmptyLabels(),
	}
	for i := range 2000 {
		h := randomHistogram(rng)
		require.NoError(t, h.Validate(), "%d: %v", i, h)
		ls := lsets[i%len(lsets)]
		tm := rng.Int64N(4e12) - 1e12
		v := promql.Vector{{Metric: ls, T: tm, H: h}, {Metric: ls, T: tm, F: rng.NormFloat64()}}
		got, err := appendResult(nil, v)
		require.NoError(t, err)
		require.Equal(t, string(promJSON(t, promjson.Response{Status: "success", Data: v}))[len(`{"status":"success","data":`):], string(got)+"}", "%d: %v", i, h)

		m := promql.Matrix{{Metric: ls, Floats: []promql.FPoint{{T: tm, F: 1}}, Histograms: []promql.HPoint{{T: tm, H: h}, {T: tm + 1, H: randomHistogram(rng)}}}}
		got, err = appendResult(nil, m)
		require.NoError(t, err)
		require.Equal(t, string(promJSON(t, promjson.Response{Status: "success", Data: m}))[len(`{"status":"success","data":`):], string(got)+"}", "%d: %v", i, h)
	}
}
