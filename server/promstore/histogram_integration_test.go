package promstore

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/util/teststorage"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/testkit/dbtest"
	"github.com/seed71701133/tablets/server/api"
	"github.com/seed71701133/tablets/server/promconv"
	"github.com/seed71701133/tablets/tsdb"
)

// hsample is a float or a histogram sample of the tests (h or fh set for a histogram).
type hsample struct {
	t  time.Time
	f  float64
	h  *tablets.Histogram
	fh *tablets.FloatHistogram
}

// writeMixed registers the label sets and writes their floats (WriteMany) and histograms
// (WriteSamples).
func writeMixed(t *testing.T, db *tsdb.DB, sets []labels.Labels, samples [][]hsample) {
	t.Helper()
	ctx := context.Background()
	tls := make([]tsdb.Labels, len(sets))
	for i, ls := range sets {
		tls[i] = LabelsToTSDB(ls)
	}
	keys, err := db.SeriesOfMany(ctx, tls)
	require.NoError(t, err)
	var floats []tsdb.SeriesPoints
	var hists []tsdb.SeriesHistograms
	for i, k := range keys {
		sp := tsdb.SeriesPoints{Series: k}
		sh := tsdb.SeriesHistograms{Series: k}
		for _, s := range samples[i] {
			if s.h == nil && s.fh == nil {
				sp.Points = append(sp.Points, tablets.Point{Time: s.t, Value: s.f})
			} else {
				sh.Histograms = append(sh.Histograms, tablets.HistogramPoint{Time: s.t, H: s.h, FH: s.fh})
			}
		}
		if len(sp.Points) > 0 {
			floats = append(floats, sp)
		}
		if len(sh.Histograms) > 0 {
			hists = append(hists, sh)
		}
	}
	if len(floats) > 0 {
		require.NoError(t, db.WriteMany(ctx, floats))
	}
	if len(hists) > 0 {
		require.NoError(t, db.WriteSamples(ctx, nil, hists))
	}
}

// absHist is an integer histogram from absolute bucket counts (one span a side).
func absHist(hint tablets.CounterResetHint, schema int32, zt float64, zc uint64, posOff int32, pos []uint64, negOff int32, neg []uint64, sum float64) *tablets.Histogram {
	h := &tablets.Histogram{CounterResetHint: hint, Schema: schema, ZeroThreshold: zt, ZeroCount: zc, Sum: sum, Count: zc}
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
		h.PositiveSpans = []tablets.HistogramSpan{{Offset: posOff, Length: uint32(len(pos))}}
		h.PositiveBuckets = deltas(pos)
	}
	if len(neg) > 0 {
		h.NegativeSpans = []tablets.HistogramSpan{{Offset: negOff, Length: uint32(len(neg))}}
		h.NegativeBuckets = deltas(neg)
	}
	return h
}

// gotSample is a sample as Select's iterator gives it.
type gotSample struct {
	t  int64
	vt chunkenc.ValueType
	f  uint64
	h  *histogram.Histogram
	fh *histogram.FloatHistogram
}

// collectMixed reads a whole SeriesSet of float and histogram samples.
func collectMixed(t *testing.T, ss storage.SeriesSet) map[string][]gotSample {
	t.Helper()
	out := map[string][]gotSample{}
	var prev labels.Labels
	for ss.Next() {
		s := ss.At()
		if prev.Len() > 0 {
			require.Negative(t, labels.Compare(prev, s.Labels()), "sorted by labels")
		}
		prev = s.Labels()
		var got []gotSample
		it := s.Iterator(nil)
		for vt := it.Next(); vt != chunkenc.ValNone; vt = it.Next() {
			g := gotSample{t: it.AtT(), vt: vt}
			switch vt {
			case chunkenc.ValFloat:
				_, v := it.At()
				g.f = math.Float64bits(v)
			case chunkenc.ValHistogram:
				_, g.h = it.AtHistogram(nil)
			case chunkenc.ValFloatHistogram:
				_, g.fh = it.AtFloatHistogram(nil)
			}
			got = append(got, g)
		}
		require.NoError(t, it.Err())
		out[s.Labels().String()] = got
	}
	require.NoError(t, ss.Err())
	return out
}

// want is what Select must give for samples: histograms converted field for field, the
// float of a histogram's millisecond left out. NaN sums are compared by their bits.
func want(samples []hsample) []gotSample {
	hist := map[int64]bool{}
	for _, s := range samples {
		if s.h != nil || s.fh != nil {
			hist[ms(s.t)] = true
		}
	}
	var out []gotSample
	for _, s := range samples {
		switch {
		case s.h != nil:
			out = append(out, gotSample{t: ms(s.t), vt: chunkenc.ValHistogram, h: promconv.ToProm(s.h)})
		case s.fh != nil:
			out = append(out, gotSample{t: ms(s.t), vt: chunkenc.ValFloatHistogram, fh: promconv.FloatToProm(s.fh)})
		case !hist[ms(s.t)]:
			out = append(out, gotSample{t: ms(s.t), vt: chunkenc.ValFloat, f: math.Float64bits(s.f)})
		}
	}
	return out
}

// sameSamples compares samples, NaN sums by their bits.
func sameSamples(t *testing.T, want, got []gotSample, msgAndArgs ...any) {
	t.Helper()
	require.Len(t, got, len(want), msgAndArgs...)
	for i := range want {
		w, g := want[i], got[i]
		if w.h != nil && g.h != nil {
			require.Equal(t, math.Float64bits(w.h.Sum), math.Float64bits(g.h.Sum), msgAndArgs...)
			wc, gc := w.h.Copy(), g.h.Copy()
			wc.Sum, gc.Sum = 0, 0
			w.h, g.h = wc, gc
		}
		if w.fh != nil && g.fh != nil {
			require.Equal(t, math.Float64bits(w.fh.Sum), math.Float64bits(g.fh.Sum), msgAndArgs...)
			wc, gc := w.fh.Copy(), g.fh.Copy()
			wc.Sum, gc.Sum = 0, 0
			w.fh, g.fh = wc, gc
		}
		require.Equal(t, w, g, append([]any{"sample %d"}, i)...)
	}
}

// Select returns histogram samples exactly as written: integer and float ones, every
// counter reset hint, exponential and custom buckets, staleness markers, merged by time
// with the series' floats; where a float and a histogram share a millisecond, the
// histogram.
func TestSelectHistogramsExact(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	db, _, _ := dbtest.NewDB(t, &tsdb.Options{Layout: chunkedLayout})
	at := func(offset int64) time.Time { return base.Add(time.Duration(offset) * time.Millisecond) }
	stale := &tablets.Histogram{Sum: math.Float64frombits(staleNaN)}
	staleF := &tablets.FloatHistogram{Schema: tablets.CustomBucketsSchema, Sum: math.Float64frombits(staleNaN), CustomValues: []float64{1, 2}}
	custom := func(hint tablets.CounterResetHint, c float64) *tablets.FloatHistogram {
		return &tablets.FloatHistogram{CounterResetHint: hint, Schema: tablets.CustomBucketsSchema, Count: 3 * c, Sum: 1.25 * c,
			PositiveSpans:   []tablets.HistogramSpan{{Offset: 0, Length: 1}, {Offset: 1, Length: 1}},
			PositiveBuckets: []float64{c, 2 * c}, CustomValues: []float64{0.25, 1, 4}}
	}
	intCustom := &tablets.Histogram{Schema: tablets.CustomBucketsSchema, Count: 5, Sum: 2,
		PositiveSpans: []tablets.HistogramSpan{{Offset: 1, Length: 2}}, PositiveBuckets: []int64{2, 1}, CustomValues: []float64{0.5, 1}}
	sets := []labels.Labels{
		labels.FromStrings("__name__", "exact", "k", "int"),
		labels.FromStrings("__name__", "exact", "k", "custom"),
		labels.FromStrings("__name__", "exact", "k", "floats"),
	}
	samples := [][]hsample{
		{
			{t: at(1), f: 1.5},
			{t: at(2), h: absHist(tablets.UnknownCounterReset, 0, 0.001, 2, -1, []uint64{1, 3}, 0, nil, 7.5)},
			{t: at(999), f: 2.5}, // a float and a histogram in one millisecond: the histogram
			{t: at(999), h: absHist(tablets.CounterReset, 8, 0, 0, -300, []uint64{4, 0, 1}, 5, []uint64{2}, -0.5)},
			{t: at(60_000), h: absHist(tablets.NotCounterReset, -4, 1e-9, 0, 2, []uint64{9}, 0, nil, math.Inf(1))},
			{t: at(60_001), h: stale},
			{t: at(3_600_000), f: math.Float64frombits(staleNaN)},
			{t: at(3_600_001), h: absHist(tablets.GaugeType, 3, 0.5, 1, 0, nil, 0, []uint64{1, 1}, -3)},
			{t: at(7_200_003), f: math.Inf(-1)},
		},
		{
			{t: at(5), fh: custom(tablets.UnknownCounterReset, 1)},
			{t: at(6), fh: custom(tablets.NotCounterReset, 2.5)},
			{t: at(7), h: intCustom},
			{t: at(8), fh: staleF},
			{t: at(86_399_999), fh: custom(tablets.GaugeType, 0.125)},
		},
		{{t: at(3), f: 3}, {t: at(4), f: 4}},
	}
	writeMixed(t, db, sets, samples)
	ctx := context.Background()
	sel := labels.MustNewMatcher(labels.MatchEqual, "__name__", "exact")
	for _, batch := range []int{1, DefaultBatchSize} {
		q, err := New(db, &Options{BatchSize: batch})
		require.NoError(t, err)
		querier, err := q.Querier(math.MinInt64, math.MaxInt64)
		require.NoError(t, err)
		got := collectMixed(t, querier.Select(ctx, true, nil, sel))
		require.NoError(t, querier.Close())
		require.Len(t, got, 3)
		for i, ls := range sets {
			sameSamples(t, want(samples[i]), got[ls.String()], "%s, batches of %d", ls, batch)
		}
		shared := uint64(0) // batches of 1: three batches share a staged read
		if batch == 1 {
			shared = 1
		}
		require.Equal(t, Stats{RawSelects: 1, Series: 3, Samples: 8 + 5 + 2, Histograms: 5 + 5, SharedStagedReads: shared}, paths(q.Stats()))

		// A range: its ends included, a histogram at each.
		querier, err = q.Querier(ms(at(2)), ms(at(60_000)))
		require.NoError(t, err)
		got = collectMixed(t, querier.Select(ctx, true, nil, sel))
		require.NoError(t, querier.Close())
		sameSamples(t, want(samples[0][1:5]), got[sets[0].String()])
		sameSamples(t, want(samples[1][:4]), got[sets[1].String()])
		sameSamples(t, want(samples[2]), got[sets[2].String()])
	}
}

// latencyData: every 15 s over three hours from base,
//   - latency_seconds{job="api"}: an integer counter histogram of schema 1 whose buckets
//     widen after an hour and which restarts at 1:30;
//   - latency_seconds{job="web"}: a float counter histogram of custom buckets, marked
//     stale at 2:30 (a histogram staleness marker);
//   - mixed_metric: floats for an hour, then gauge histograms with negative buckets.
func latencyData() ([]labels.Labels, [][]hsample) {
	rng := rand.New(rand.NewPCG(3, 4))
	var apiS, webS, mixed []hsample
	apiCounts := make([]uint64, 6)
	var apiZero uint64
	apiSum := 0.0
	webCounts := make([]float64, 5)
	webSum := 0.0
	for at := base; at.Before(base.Add(3 * time.Hour)); at = at.Add(15 * time.Second) {
		d := at.Sub(base)
		if d == 90*time.Minute {
			clear(apiCounts)
			apiZero, apiSum = 0, 0
		}
		width := 4
		if d >= time.Hour {
			width = 6
		}
		for i := range width {
			n := uint64(rng.IntN(5))
			apiCounts[i] += n
			apiSum += float64(n) * math.Pow(2, float64(i)/2) * 0.8
		}
		apiZero += uint64(rng.IntN(2))
		apiS = append(apiS, hsample{t: at, h: absHist(tablets.UnknownCounterReset, 1, 0.001, apiZero, -1, apiCounts[:width], 0, nil, apiSum)})

		switch {
		case d < 150*time.Minute:
			total := 0.0
			for i := range webCounts {
				x := rng.Float64() * 3 * float64(5-i)
				webCounts[i] += x
				webSum += x * []float64{0.05, 0.3, 0.8, 3, 7}[i]
				total += webCounts[i]
			}
			webS = append(webS, hsample{t: at, fh: &tablets.FloatHistogram{
				Schema: tablets.CustomBucketsSchema, Count: total, Sum: webSum,
				PositiveSpans:   []tablets.HistogramSpan{{Offset: 0, Length: 5}},
				PositiveBuckets: append([]float64(nil), webCounts...),
				CustomValues:    []float64{0.1, 0.5, 1, 5},
			}})
		case d == 150*time.Minute:
			webS = append(webS, hsample{t: at, fh: &tablets.FloatHistogram{
				Schema: tablets.CustomBucketsSchema, Sum: math.Float64frombits(staleNaN), CustomValues: []float64{0.1, 0.5, 1, 5},
			}})
		}

		if d < time.Hour {
			mixed = append(mixed, hsample{t: at, f: d.Seconds() / 10})
		} else {
			mixed = append(mixed, hsample{t: at, h: absHist(tablets.GaugeType, 0, 0.5, uint64(rng.IntN(3)), 0,
				[]uint64{uint64(rng.IntN(4)), 0, uint64(rng.IntN(4)) + 1}, 1, []uint64{uint64(rng.IntN(3)) + 1}, float64(rng.IntN(100))-50)})
		}
	}
	sets := []labels.Labels{
		labels.FromStrings("__name__", "latency_seconds", "job", "api"),
		labels.FromStrings("__name__", "latency_seconds", "job", "web"),
		labels.FromStrings("__name__", "mixed_metric"),
	}
	return sets, [][]hsample{apiS, webS, mixed}
}

// promStorage loads the samples into Prometheus' own TSDB.
func promStorage(t *testing.T, sets []labels.Labels, samples [][]hsample) storage.Storage {
	t.Helper()
	st := teststorage.New(t)
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	app := st.Appender(context.Background())
	for i, ls := range sets {
		for _, s := range samples[i] {
			var err error
			switch {
			case s.h != nil:
				_, err = app.AppendHistogram(0, ls, ms(s.t), promconv.ToProm(s.h).Copy(), nil)
			case s.fh != nil:
				_, err = app.AppendHistogram(0, ls, ms(s.t), nil, promconv.FloatToProm(s.fh).Copy())
			default:
				_, err = app.Append(0, ls, ms(s.t), s.f)
			}
			require.NoError(t, err)
		}
	}
	require.NoError(t, app.Commit())
	return st
}

// apiServer serves the query API over q.
func apiServer(t *testing.T, q storage.Queryable) *httptest.Server {
	t.Helper()
	a, err := api.New(q, &api.Options{Now: func() time.Time { return base.Add(3 * time.Hour) }})
	require.NoError(t, err)
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(func() {
		srv.Close()
		require.NoError(t, a.Close())
	})
	return srv
}

func get(t *testing.T, srv *httptest.Server, path string, params url.Values) []byte {
	t.Helper()
	resp, err := srv.Client().Get(srv.URL + path + "?" + params.Encode())
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	return body
}

// sameJSON decodes two answers and compares them: equal structure, numbers (in strings
// too) within 1e-9 relatively.
func sameJSON(t *testing.T, want, got []byte, msgAndArgs ...any) {
	t.Helper()
	var w, g any
	require.NoError(t, json.Unmarshal(want, &w))
	require.NoError(t, json.Unmarshal(got, &g), "%s", got)
	if path, ok := jsonWithin(w, g, "$"); !ok {
		require.Fail(t, fmt.Sprintf("answers differ at %s:\n%s\n%s", path, want, got), msgAndArgs...)
	}
}

func jsonWithin(w, g any, path string) (string, bool) {
	near := func(a, b float64) bool {
		return a == b || math.IsNaN(a) && math.IsNaN(b) || math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(a))
	}
	switch w := w.(type) {
	case map[string]any:
		gm, ok := g.(map[string]any)
		if !ok || len(gm) != len(w) {
			return path, false
		}
		for k, v := range w {
			if p, ok := jsonWithin(v, gm[k], path+"."+k); !ok {
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
			if p, ok := jsonWithin(w[i], ga[i], fmt.Sprintf("%s[%d]", path, i)); !ok {
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
		return path, err1 == nil && err2 == nil && near(wf, gf)
	case float64:
		gf, ok := g.(float64)
		return path, ok && near(w, gf)
	}
	return path, w == g
}

// The query API over tablets answers native histogram queries as over Prometheus' own TSDB
// with the same samples: the same JSON (the API writes Prometheus' JSON, see server/api),
// numbers within 1e-9.
func TestPromQLHistogramsAsPrometheus(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	db, _, checker := dbtest.NewDB(t, &tsdb.Options{Layout: chunkedLayout, Tiers: []tsdb.Tier{{Step: time.Minute}}})
	sets, samples := latencyData()
	writeMixed(t, db, sets, samples)
	q, err := New(db, &Options{MaxResolution: tsdb.AnyResolution}) // a tier where cheaper
	require.NoError(t, err)
	ours := apiServer(t, q)
	theirs := apiServer(t, promStorage(t, sets, samples))
	checker.Reset()

	queries := []string{
		`latency_seconds`,
		`rate(latency_seconds[5m])`,
		`increase(latency_seconds{job="api"}[2m])`,
		`histogram_count(rate(latency_seconds[5m]))`,
		`histogram_sum(rate(latency_seconds[5m]))`,
		`histogram_quantile(0.9, rate(latency_seconds[5m]))`,
		`histogram_quantile(0.5, sum by (job) (rate(latency_seconds[5m])))`,
		`histogram_quantile(0.99, latency_seconds)`,
		`histogram_count(latency_seconds)`,
		`histogram_avg(rate(latency_seconds[5m]))`,
		`histogram_fraction(0, 0.5, rate(latency_seconds[5m]))`,
		`mixed_metric`,
		`histogram_sum(mixed_metric)`,
		`count_over_time(mixed_metric[10m])`,
	}
	sec := func(d time.Duration) string { return strconv.FormatInt(base.Add(d).Unix(), 10) }
	answers := 0
	for _, query := range queries {
		for _, d := range []time.Duration{10 * time.Minute, time.Hour, 90*time.Minute + 10*time.Second, 150 * time.Minute, 150*time.Minute + time.Second, 3 * time.Hour} {
			p := url.Values{"query": {query}, "time": {sec(d)}}
			want, got := get(t, theirs, "/api/v1/query", p), get(t, ours, "/api/v1/query", p)
			sameJSON(t, want, got, "%s at %v", query, d)
			require.Equal(t, string(want), string(got), "%s at %v", query, d)
			answers++
		}
		// Steps of a minute (raw) and of an hour (where a float series would read the
		// minute tier: these read raw, and answer the same).
		for _, step := range []string{"60", "3600"} {
			p := url.Values{"query": {query}, "start": {sec(5 * time.Minute)}, "end": {sec(3 * time.Hour)}, "step": {step}}
			want, got := get(t, theirs, "/api/v1/query_range", p), get(t, ours, "/api/v1/query_range", p)
			sameJSON(t, want, got, "%s step %s", query, step)
			require.Equal(t, string(want), string(got), "%s step %s", query, step)
			answers++
		}
	}
	st := q.Stats()
	require.Zero(t, st.TierSelects, "no histogram series reads a tier")
	require.Positive(t, st.HistogramRawSeries, "the hour steps would have read the tier")
	require.Positive(t, st.Histograms)
	cost := checker.Stats()
	t.Logf("%d answers as Prometheus'; %d series, %d samples (%d histograms) read in %d requests, %d response bytes",
		answers, st.Series, st.Samples, st.Histograms, cost.Requests, cost.ResponseBytes)
}

// A Select that reads a tier reads raw for the series with histogram samples: the float
// series get a sample a window, the histogram series every sample, in the labels' order.
func TestTierSelectReadsHistogramsRaw(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	db, _, _ := dbtest.NewDB(t, &tsdb.Options{Layout: chunkedLayout, Tiers: []tsdb.Tier{{Step: time.Minute}}})
	sets, samples := latencyData()
	// A float counter among the histogram series, sorted between them.
	sets = append(sets, labels.FromStrings("__name__", "latency_seconds", "job", "b_floats"))
	var floats []hsample
	for at, c := base, 0.0; at.Before(base.Add(3 * time.Hour)); at, c = at.Add(15*time.Second), c+10 {
		floats = append(floats, hsample{t: at, f: c})
	}
	samples = append(samples, floats)
	writeMixed(t, db, sets, samples)
	require.NoError(t, db.Rollup(context.Background(), base, base.Add(3*time.Hour)))

	q, err := New(db, &Options{PreferTiers: true})
	require.NoError(t, err)
	start, end := base.Add(10*time.Minute), base.Add(2*time.Hour)
	querier, err := q.Querier(ms(start), ms(end))
	require.NoError(t, err)
	defer querier.Close()
	hints := &storage.SelectHints{Start: ms(start), End: ms(end), Step: time.Hour.Milliseconds(), Range: (10 * time.Minute).Milliseconds(), Func: "rate"}
	got := collectMixed(t, querier.Select(context.Background(), false, hints, labels.MustNewMatcher(labels.MatchEqual, "__name__", "latency_seconds")))
	// The two histogram series are two raw batches (the float series between them is read
	// from the tier): they share a staged read.
	require.Equal(t, Stats{TierSelects: 1, Series: 3, Samples: q.Stats().Samples, Histograms: q.Stats().Histograms, HistogramRawSeries: 2, SharedStagedReads: 1}, paths(q.Stats()))
	require.Len(t, got, 3)
	in := func(ss []hsample) []hsample {
		var out []hsample
		for _, s := range ss {
			if !s.t.Before(start) && !s.t.After(end) {
				out = append(out, s)
			}
		}
		return out
	}
	sameSamples(t, want(in(samples[0])), got[sets[0].String()], "api: raw")
	sameSamples(t, want(in(samples[1])), got[sets[1].String()], "web: raw")
	// The float series: a sample at each whole minute window's end, its last value.
	fl := got[sets[3].String()]
	require.Len(t, fl, 110, "windows 0:10 to 2:00")
	for i, s := range fl {
		end := base.Add(10*time.Minute + time.Duration(i+1)*time.Minute)
		require.Equal(t, ms(end)-1, s.t)
		require.Equal(t, chunkenc.ValFloat, s.vt)
		require.Equal(t, math.Float64bits(float64(end.Sub(base)/(15*time.Second)-1)*10), s.f)
	}
}

// What reading histogram series costs, by BatchSize (a histogram series weighs
// histogramWeight series in a batch): every sample read exactly, fewer requests with larger
// batches. The figures are in the log.
func TestSelectHistogramsCost(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	db, _, checker := dbtest.NewDB(t, &tsdb.Options{Layout: chunkedLayout})
	const n, perSeries = 40, 240
	var sets []labels.Labels
	var samples [][]hsample
	for i := range n {
		sets = append(sets, labels.FromStrings("__name__", "latency", "i", fmt.Sprintf("%02d", i)))
		var ss []hsample
		counts := make([]uint64, 20)
		for at := base; len(ss) < perSeries; at = at.Add(15 * time.Second) {
			for j := range counts {
				counts[j] += uint64((j*7 + i + len(ss)) % 5)
			}
			ss = append(ss, hsample{t: at, h: absHist(tablets.UnknownCounterReset, 3, 0.001, 0, 0, counts, 0, nil, float64(len(ss))*1.5)})
		}
		samples = append(samples, ss)
	}
	writeMixed(t, db, sets, samples)
	prev := int64(math.MaxInt64)
	for _, size := range []int{16, DefaultBatchSize, 640} {
		q, err := New(db, &Options{BatchSize: size})
		require.NoError(t, err)
		checker.Reset()
		querier, err := q.Querier(ms(base), ms(base.Add(time.Hour)))
		require.NoError(t, err)
		got := collectMixed(t, querier.Select(context.Background(), true, nil, labels.MustNewMatcher(labels.MatchEqual, "__name__", "latency")))
		require.NoError(t, querier.Close())
		require.Len(t, got, n)
		for i, ls := range sets {
			sameSamples(t, want(samples[i]), got[ls.String()], "%s", ls)
		}
		st := checker.Stats()
		t.Logf("BatchSize %d: %d series of %d 20-bucket histograms: %d requests, %d response bytes (%.1f a sample)",
			size, n, perSeries, st.Requests, st.ResponseBytes, float64(st.ResponseBytes)/(n*perSeries))
		require.LessOrEqual(t, st.Requests, prev, "larger batches, fewer requests")
		prev = st.Requests
	}
}
