package server_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math"
	mrand "math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/prompb"

	"github.com/seed71701133/tablets/internal/testkit/azurite"
	"github.com/seed71701133/tablets/internal/testkit/dbtest"
	"github.com/seed71701133/tablets/internal/testkit/promrun"
)

// The histogram queries compared with Prometheus, over the native histograms of
// histTarget. histogram_quantile's answers are compared after histLogInterpolated (see
// there); the others as they are.
var (
	e2eHistQuantiles = []float64{0.5, 0.9, 0.99}
	e2eHistQueries   = []string{
		`histogram_count(rate(%s[1m]))`,
		`histogram_sum(rate(%s[1m]))`,
		`histogram_count(%s)`,
		`histogram_sum(%s)`,
	}
	e2eHistMetrics = []string{"e2e_latency_seconds", "e2e_offset_seconds"}
)

// TestE2ENativeHistograms runs tablets against a real Prometheus (2.42, with
// --enable-feature=native-histograms) that scrapes native histograms (client_golang's,
// negotiated in the protobuf exposition) from a target the test feeds with a fixed-seed
// latency distribution, besides itself, every second, and remote-writes them
// (send_native_histograms) through a round-robin proxy to two tablets servers on one
// database. Then the raw histogram samples in tablets must be P1's (and the staleness marker
// that ends a histogram series), and histogram_quantile, histogram_count and histogram_sum
// over them, from tablets' query API, P1's answers at the same evaluation times within 1e-6
// (histogram_quantile converted to Prometheus 3's interpolation: see histComparison), and
// those of Prometheus 3's engine over P1's raw samples (the engine tablets runs) too.
func TestE2ENativeHistograms(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test: needs Azurite and Prometheus; skipped under -short")
	}
	promrun.Need(t)
	azurite.Shared(t)
	t.Parallel() // beside the other end-to-end tests, as TestE2E
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	rnd := make([]byte, 6)
	_, _ = rand.Read(rnd)
	dbName := "e2eh" + hex.EncodeToString(rnd)
	dbtest.DropOnCleanup(t, dbName)
	var down atomic.Bool
	a := startNode(t, "A", dbName, &down, 30*time.Second)
	b := startNode(t, "B", dbName, &down, 30*time.Second)
	nodes := []*e2eNode{a, b}
	lb := newRoundRobin(t, a.http.URL, b.http.URL)
	lbSrv := httptest.NewServer(lb)
	t.Cleanup(lbSrv.Close)
	target := newHistTarget()
	targetSrv := httptest.NewServer(target)
	t.Cleanup(targetSrv.Close)

	p1 := promrun.Start(t, promrun.Config{
		SelfScrapeJob: "prometheus", // floats in the same requests, as in real life
		Scrape:        []promrun.ScrapeJob{{Name: "hist", Targets: []string{targetSrv.Listener.Addr().String()}}},
		RemoteWrite:   []promrun.RemoteWrite{{URL: lbSrv.URL + "/api/v1/write", Name: "tablets", SendNativeHistograms: true}},
		Args:          []string{"--enable-feature=native-histograms"},
	})
	if _, err := p1.WaitFor(ctx, `e2e_latency_seconds`); err != nil {
		t.Fatal(err)
	}
	firstScrape := time.Now()
	t.Logf("first scrape of the histograms %s after start", firstScrape.Sub(began).Round(time.Millisecond))
	if !target.protobuf.Load() {
		t.Fatal("Prometheus did not ask for the protobuf exposition: it cannot have scraped native histograms")
	}

	// The first writes of a series cost more (its labels, its index entries): the cost a
	// sample is bounded from here on.
	sleepUntil(ctx, firstScrape.Add(10*time.Second))
	warm := snapshotWrites(nodes)
	// handler="static" leaves the target's answer: P1 ends that histogram series with a
	// staleness marker, which the queries at the later evaluation times see.
	sleepUntil(ctx, firstScrape.Add(20*time.Second))
	target.dropStatic()
	dropAt := time.Now()
	sleepUntil(ctx, firstScrape.Add(35*time.Second))
	end := time.Now().Add(-5 * time.Second).Truncate(e2eStep)
	raw := waitHistDelivered(ctx, t, p1, nodes, end)
	schema := histSchema(t, raw)
	staleKey, staleAt := checkHistStale(ctx, t, p1, nodes, dropAt, end)

	// Evaluation times every 5 s over the last 30 s, moved by a few milliseconds if needed so
	// that no sample sits on the start of a rate window: Prometheus 3's ranges are left-open,
	// 2.42's closed, and the comparison is about storage, not that change.
	start, end := histEvalTimes(raw, end.Add(-30*time.Second), end, e2eStep, time.Minute)
	apis := map[string]apiClient{"A": newAPIClient(a.http.URL), "B": newAPIClient(b.http.URL)}
	ref := newHistRefEngine(t, raw, schema, map[string]int64{staleKey: staleAt})
	hc := &histComparison{p1: p1, ref: ref, apis: apis, start: start, end: end, schema: schema}
	for _, metric := range e2eHistMetrics {
		for _, format := range e2eHistQueries {
			hc.compare(ctx, t, fmt.Sprintf(format, metric), false)
		}
		for _, by := range []string{"", "sum by (job) "} {
			for _, qu := range e2eHistQuantiles {
				hc.compare(ctx, t, fmt.Sprintf(`histogram_quantile(%g, %s(rate(%s[1m])))`, qu, by, metric), true)
			}
		}
	}
	compared := hc.values
	t.Logf("compared %d values of %d queries at %d evaluation times [%s, %s] step %s; %d quantiles where 2.42 and 3 differ "+
		"by design (a rank exactly on a bucket boundary, or rounding inside the zero bucket): tablets' is 3's on P1's samples",
		compared, len(e2eHistMetrics)*(len(e2eHistQueries)+2*len(e2eHistQuantiles)),
		int(end.Sub(start)/e2eStep)+1, start.Format("15:04:05.000"), end.Format("15:04:05.000"), e2eStep, hc.ties)

	histSamples := 0
	for _, ss := range raw {
		histSamples += len(ss)
	}
	t.Logf("target scraped %d times; %d histogram series, %d histogram samples to %s, schema %d",
		target.scrapes.Load(), len(raw), histSamples, end.Format(time.TimeOnly), schema)
	checkHistWrites(t, nodes, lb, warm)
	t.Logf("run took %s", time.Since(began).Round(time.Millisecond))
}

// histTarget serves native histograms with client_golang: request latencies by handler
// (lognormal, three spreads and rates) and a clock offset that is negative, zero (the zero
// bucket) and positive. Each scrape first observes the next values of a fixed-seed
// sequence. The histograms start with 100 scrapes' worth of observations, so that rate's
// extrapolation at the start of the series is the same in Prometheus 2.42 and 3 (3 limits it
// to where the count would reach zero; 2.42 does not for histograms).
type histTarget struct {
	mu       sync.Mutex
	rnd      *mrand.Rand
	latency  *prometheus.HistogramVec
	offset   prometheus.Histogram
	handler  http.Handler
	scrapes  atomic.Int64
	protobuf atomic.Bool // Prometheus asked for the protobuf exposition
	dropped  bool        // handler="static" is gone
}

// histHandlers are the label values of e2e_latency_seconds: the median latency, the spread
// (sigma of the log) and the observations a scrape.
var histHandlers = []struct {
	name          string
	median, sigma float64
	perScrape     int
}{
	{"api", 0.05, 0.6, 20},
	{"db", 0.005, 1.2, 8},
	{"static", 0.0004, 0.3, 3},
}

func newHistTarget() *histTarget {
	reg := prometheus.NewRegistry()
	h := &histTarget{
		rnd: mrand.New(mrand.NewPCG(20, 26)),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "e2e_latency_seconds", Help: "Request latency.", NativeHistogramBucketFactor: 1.1,
		}, []string{"handler"}),
		offset: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "e2e_offset_seconds", Help: "Clock offset.", NativeHistogramBucketFactor: 1.1,
		}),
	}
	reg.MustRegister(h.latency, h.offset)
	h.handler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	for range 100 {
		h.observe()
	}
	return h
}

// observe records one scrape's observations.
func (h *histTarget) observe() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, hd := range histHandlers {
		if h.dropped && hd.name == "static" {
			continue
		}
		o := h.latency.WithLabelValues(hd.name)
		for range hd.perScrape {
			o.Observe(hd.median * math.Exp(hd.sigma*h.rnd.NormFloat64()))
		}
	}
	for i := range 5 {
		if i == 0 {
			h.offset.Observe(0)
		} else {
			h.offset.Observe(0.01 * h.rnd.NormFloat64())
		}
	}
}

// dropStatic removes handler="static" from the target.
func (h *histTarget) dropStatic() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.dropped = true
	h.latency.DeleteLabelValues("static")
}

func (h *histTarget) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.scrapes.Add(1)
	if strings.Contains(r.Header.Get("Accept"), "application/vnd.google.protobuf") {
		h.protobuf.Store(true)
	}
	h.observe()
	h.handler.ServeHTTP(w, r)
}

// histSample is a histogram sample as the query API renders it (a range vector's
// "histograms"): count, sum and the non-empty buckets.
type histSample struct {
	T          int64
	Count, Sum float64
	Buckets    []histBucket
}

// histBucket is a bucket of the API: its boundary rule (0: (lower, upper], 1: [lower,
// upper), 2: (lower, upper), 3: [lower, upper], the zero bucket), bounds and count.
type histBucket struct {
	Rule                int
	Lower, Upper, Count float64
}

// rawHistograms are the histogram samples of a range-vector query, by series.
type rawHistograms map[string][]histSample

// getter sends an API GET and returns the answer's data.
type getter func(ctx context.Context, path string, params url.Values) ([]byte, error)

func p1Getter(p *promrun.Prometheus) getter {
	return func(ctx context.Context, path string, params url.Values) ([]byte, error) {
		return p.API(ctx, path, params)
	}
}

func apiGetter(c apiClient) getter {
	return func(ctx context.Context, path string, params url.Values) ([]byte, error) {
		var data jsonRaw
		err := c.get(ctx, path, params, &data)
		return data, err
	}
}

// readHistograms returns the raw histogram samples of the series matching sel in
// (at-window, at] (an instant query of a range selector); any float sample is an error.
func readHistograms(ctx context.Context, get getter, sel string, at time.Time, window time.Duration) (rawHistograms, error) {
	q := fmt.Sprintf("%s[%ds]", sel, int(window.Seconds()))
	data, err := get(ctx, "/api/v1/query", url.Values{"query": {q}, "time": {apiTime(at)}})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", q, err)
	}
	m, err := decodeHistMatrix(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", q, err)
	}
	return m, nil
}

// waitHistDelivered waits until the raw histogram samples of e2eHistMetrics up to end in A
// and B are P1's (remote write is eventually delivered), and returns P1's. It fails the test
// if they still differ after a minute.
func waitHistDelivered(ctx context.Context, t *testing.T, p1 *promrun.Prometheus, nodes []*e2eNode, end time.Time) rawHistograms {
	t.Helper()
	sel := `{__name__=~"` + strings.Join(e2eHistMetrics, "|") + `"}`
	const window = 10 * time.Minute // the whole test
	want, err := readHistograms(ctx, p1Getter(p1), sel, end, window)
	if err != nil {
		t.Fatalf("P1: %v", err)
	}
	if len(want) != len(histHandlers)+1 {
		t.Fatalf("P1 has %d histogram series, want %d: %v", len(want), len(histHandlers)+1, sortedKeys(want))
	}
	deadline := time.Now().Add(time.Minute)
	waited := time.Now()
	for attempt := 1; ; attempt++ {
		var diffs []string
		for _, n := range nodes {
			got, err := readHistograms(ctx, apiGetter(newAPIClient(n.http.URL)), sel, end, window)
			if err != nil {
				diffs = append(diffs, fmt.Sprintf("node %s: %v", n.name, err))
				continue
			}
			for _, d := range diffHistograms(want, got, 10) {
				diffs = append(diffs, "node "+n.name+": "+d)
			}
		}
		if len(diffs) == 0 {
			t.Logf("raw histogram samples to %s identical in P1, A and B (%d series) after %d reads, %s",
				end.Format(time.TimeOnly), len(want), attempt, time.Since(waited).Round(time.Millisecond))
			return want
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("raw histogram samples to %s still differ from P1's after %d reads:\n\t%s", end.Format(time.TimeOnly), attempt, strings.Join(diffs, "\n\t"))
		}
		sleepUntil(ctx, time.Now().Add(2*time.Second))
	}
}

// checkHistStale checks that the histogram series of handler="static", dropped from the
// target at dropAt, ends with a staleness marker: in tablets (its remote read; 2.42's cannot
// read a series holding histograms), exactly one, a histogram whose Sum is the stale NaN (as
// Prometheus 2.42 writes the marker of a histogram series), after the last histogram; and
// that P1's answers end at it (a range query at a 1 s step stops within the second before
// it). It returns the series and the marker's time (the query API does not render markers,
// so the reference engine gets it from here). Remote write is eventually delivered: it
// waits a minute at most for the marker.
func checkHistStale(ctx context.Context, t *testing.T, p1 *promrun.Prometheus, nodes []*e2eNode, dropAt, end time.Time) (string, int64) {
	t.Helper()
	var key string
	var marker int64
	deadline := time.Now().Add(time.Minute)
	for {
		var problems []string
		key, marker, problems = histStaleMarker(ctx, nodes, dropAt, end)
		if len(problems) == 0 {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("the staleness marker of handler=\"static\":\n\t%s", strings.Join(problems, "\n\t"))
		}
		sleepUntil(ctx, time.Now().Add(2*time.Second))
	}
	q := `histogram_count(e2e_latency_seconds{handler="static"})`
	m, err := p1.QueryRange(ctx, q, dropAt.Add(-10*time.Second), end, time.Second)
	if err != nil {
		t.Fatalf("P1 %s: %v", q, err)
	}
	if len(m) != 1 || len(m[0].Values) == 0 {
		t.Fatalf("P1 %s: %v", q, m)
	}
	if last := m[0].Values[len(m[0].Values)-1].T; last >= marker || marker-last > 1000 {
		t.Errorf("P1 %s answers until %d; tablets' staleness marker is at %d", q, last, marker)
	}
	return key, marker
}

// histStaleMarker reads the series of handler="static" in (dropAt-1m, end] from each node
// and returns its key and the time of its staleness marker, or what is wrong.
func histStaleMarker(ctx context.Context, nodes []*e2eNode, dropAt, end time.Time) (key string, marker int64, problems []string) {
	matchers := []*prompb.LabelMatcher{{Type: prompb.LabelMatcher_EQ, Name: "__name__", Value: "e2e_latency_seconds"},
		{Type: prompb.LabelMatcher_EQ, Name: "handler", Value: "static"}}
	for _, n := range nodes {
		res, err := remoteReadResult(ctx, n.http.URL+"/api/v1/read", dropAt.Add(-time.Minute), end, matchers...)
		if err != nil {
			problems = append(problems, fmt.Sprintf("node %s: remote read: %v", n.name, err))
			continue
		}
		if len(res.Timeseries) != 1 {
			problems = append(problems, fmt.Sprintf("node %s: %d series, want 1", n.name, len(res.Timeseries)))
			continue
		}
		ts := res.Timeseries[0]
		key = promrunLabels(ts.Labels).String()
		hs := ts.Histograms
		stale := 0
		for _, h := range hs {
			if value.IsStaleNaN(h.Sum) {
				stale++
			}
		}
		switch last := len(hs) - 1; {
		case len(ts.Samples) > 0:
			problems = append(problems, fmt.Sprintf("node %s: %s: float samples %v, want none", n.name, key, ts.Samples))
		case last < 1 || stale != 1 || !value.IsStaleNaN(hs[last].Sum) || hs[last].Timestamp < dropAt.UnixMilli():
			problems = append(problems, fmt.Sprintf("node %s: %s: %d histograms, %d staleness markers, want many ending with one after %s",
				n.name, key, len(hs), stale, dropAt.Format(time.TimeOnly)))
		case marker != 0 && hs[last].Timestamp != marker:
			problems = append(problems, fmt.Sprintf("node %s: %s: staleness marker at %d, another node's at %d", n.name, key, hs[last].Timestamp, marker))
		default:
			marker = hs[last].Timestamp
		}
	}
	return key, marker, problems
}

// histComparison compares the answers of tablets' query API (apis) to range queries over
// [start, end] at e2eStep with P1's and with Prometheus 3's engine over P1's raw histogram
// samples (ref).
type histComparison struct {
	p1         *promrun.Prometheus
	ref        *refEngine
	apis       map[string]apiClient
	start, end time.Time
	schema     int32
	values     int // compared
	ties       int // quantiles at a bucket boundary resolved differently by 2.42 and 3
}

// compare runs query q: every tablets server must answer the same (exactly), the answer of
// Prometheus 3's engine on P1's samples within e2eRel, and P1's within e2eRel. P1's
// histogram_quantile answers (quantile set) are first converted to 3's interpolation
// (histLogInterpolated); where the rank falls exactly on the boundary between two
// non-empty buckets with empty ones between them, 2.42 answers the upper bound of the lower
// one and 3 (iterating from the top for q >= 0.5) the lower bound of the upper one; and
// inside the zero bucket (linear in both) the two round differently around 0 (answers like
// 5e-54 and -4e-54). There P1's answer must be on a bucket boundary or in the zero bucket,
// and tablets' be 3's on P1's samples.
func (c *histComparison) compare(ctx context.Context, t *testing.T, q string, quantile bool) {
	t.Helper()
	span := fmt.Sprintf("%s [%s, %s] step %s", q, c.start.Format(time.TimeOnly), c.end.Format(time.TimeOnly), e2eStep)
	p1Answer, err := c.p1.QueryRange(ctx, q, c.start, c.end, e2eStep)
	if err != nil {
		t.Fatalf("P1 %s: %v", span, err)
	}
	ref, err := c.ref.queryRange(ctx, q, c.start, c.end, e2eStep)
	if err != nil {
		t.Fatalf("reference engine %s: %v", span, err)
	}
	n := 0
	for _, s := range p1Answer {
		n += len(s.Values)
	}
	if n == 0 {
		t.Errorf("P1 %s: no values (the comparison would be vacuous)", span)
	}
	c.values += n
	var first promrun.Matrix
	for _, name := range sortedKeys(c.apis) {
		got, err := c.apis[name].queryRange(ctx, q, c.start, c.end, e2eStep)
		if err != nil {
			t.Errorf("tablets %s: %v", name, err)
			continue
		}
		if d := diffMatrix(ref, got, e2eRel, 10); len(d) > 0 {
			t.Errorf("tablets %s: %s differs from Prometheus 3's engine on P1's samples (rel %g):\n\t%s", name, span, e2eRel, strings.Join(d, "\n\t"))
		}
		want := p1Answer
		if quantile {
			var ties []string
			want, ties = c.convert(p1Answer, ref)
			if first == nil {
				c.ties += len(ties)
				if len(ties) > 0 {
					t.Logf("%s: ties (P1 -> Prometheus 3 on P1's samples): %s", q, strings.Join(ties, "; "))
				}
				t.Logf("%s: P1 (2.42, linear within buckets) differs from tablets (3, log-linear) by up to %.3g relative",
					q, maxRelDiff(p1Answer, got))
			}
		}
		if d := diffMatrix(want, got, e2eRel, 10); len(d) > 0 {
			t.Errorf("tablets %s: %s differs from P1 (rel %g):\n\t%s", name, span, e2eRel, strings.Join(d, "\n\t"))
		}
		if first == nil {
			first = got
		} else if d := diffMatrix(first, got, 0, 10); len(d) > 0 {
			t.Errorf("tablets A and %s answer %s differently:\n\t%s", name, span, strings.Join(d, "\n\t"))
		}
	}
}

// convert returns P1's quantiles in Prometheus 3's interpolation, and where that differs
// from 3's answer on P1's samples (ref) because of a tie on a bucket boundary (see compare),
// ref's value; and those ties.
func (c *histComparison) convert(p1Answer, ref promrun.Matrix) (promrun.Matrix, []string) {
	refAt := map[string]map[int64]float64{}
	for _, s := range ref {
		m := map[int64]float64{}
		for _, p := range s.Values {
			m[p.T] = p.V
		}
		refAt[s.Metric.String()] = m
	}
	var ties []string
	out := make(promrun.Matrix, len(p1Answer))
	for i, s := range p1Answer {
		out[i] = promrun.Stream{Metric: s.Metric, Values: make([]promrun.Point, len(s.Values))}
		for k, p := range s.Values {
			v := histLogInterpolated(p.V, c.schema, prometheus.DefNativeHistogramZeroThreshold)
			if r, ok := refAt[s.Metric.String()][p.T]; ok && !sameValue(v, r, e2eRel) && histOnBoundary(p.V, c.schema) {
				ties = append(ties, fmt.Sprintf("%s at %d: %v -> %v", s.Metric, p.T, p.V, r))
				v = r
			}
			out[i].Values[k] = promrun.Point{T: p.T, V: v}
		}
	}
	return out, ties
}

// histOnBoundary says whether v is (within rounding) a bound of an exponential bucket of
// schema, or the zero bucket's.
func histOnBoundary(v float64, schema int32) bool {
	a := math.Abs(v)
	if a <= prometheus.DefNativeHistogramZeroThreshold {
		return true
	}
	x := math.Log2(a) * math.Exp2(float64(schema))
	return math.Abs(x-math.Round(x)) < 1e-9
}

// histLogInterpolated turns a quantile Prometheus 2.42 interpolated linearly within an
// exponential bucket of schema into what Prometheus 2.50 and later (tablets runs 3's engine)
// answer: the same rank interpolated log-linearly within the same bucket. Both find the same
// bucket and the same fraction of it (the zero bucket stays linear), so this recovers 3's
// answer from 2.42's up to rounding.
func histLogInterpolated(v float64, schema int32, zeroThreshold float64) float64 {
	a := math.Abs(v)
	if math.IsNaN(v) || math.IsInf(v, 0) || a <= zeroThreshold {
		return v
	}
	per := math.Exp2(float64(schema)) // buckets per power of two
	idx := math.Ceil(math.Log2(a) * per)
	lower, upper := math.Exp2((idx-1)/per), math.Exp2(idx/per)
	// In absolute values, 2.42 answered lower + (upper-lower)*f where f is the fraction of
	// the rank counted from the bucket's bound nearer to zero (for a negative bucket 3
	// mirrors the positive case, so the same holds).
	f := (a - lower) / (upper - lower)
	r := math.Exp2(math.Log2(lower) + (math.Log2(upper)-math.Log2(lower))*f)
	return math.Copysign(r, v)
}

// histSchema derives the schema of the exponential buckets of every raw sample (the ratio of
// a bucket's bounds is 2^(2^-schema)) and fails the test unless there is exactly one.
func histSchema(t *testing.T, raw rawHistograms) int32 {
	t.Helper()
	seen := map[int32]int{}
	for _, ss := range raw {
		for _, s := range ss {
			for _, b := range s.Buckets {
				if b.Rule == 3 || b.Lower == 0 || b.Upper == 0 {
					continue // the zero bucket
				}
				ratio := math.Abs(b.Upper / b.Lower)
				if ratio < 1 {
					ratio = 1 / ratio
				}
				seen[int32(math.Round(-math.Log2(math.Log2(ratio))))]++
			}
		}
	}
	if len(seen) != 1 {
		t.Fatalf("histogram schemas %v, want exactly one", seen)
	}
	for s := range seen {
		if s != 3 { // NativeHistogramBucketFactor 1.1: the largest factor at most 1.1 is 2^(1/8)
			t.Errorf("schema %d, want 3", s)
		}
		return s
	}
	return 0
}

// histEvalTimes returns [start, end] moved later by the fewest milliseconds (under a second)
// that put no raw sample at the start of a window of length rng ending at an evaluation
// time.
func histEvalTimes(raw rawHistograms, start, end time.Time, step, rng time.Duration) (time.Time, time.Time) {
	at := map[int64]bool{}
	for _, ss := range raw {
		for _, s := range ss {
			at[s.T] = true
		}
	}
next:
	for shift := time.Duration(0); shift < time.Second; shift += time.Millisecond {
		for ts := start.Add(shift); !ts.After(end.Add(shift)); ts = ts.Add(step) {
			if at[ts.Add(-rng).UnixMilli()] {
				continue next
			}
		}
		return start.Add(shift), end.Add(shift)
	}
	return start, end
}

// writeCost is what the servers had written by remote write, samples (floats and
// histograms) and requests to Azure, at some time.
type writeCost struct {
	samples  uint64
	requests int64
}

func snapshotWrites(nodes []*e2eNode) writeCost {
	var c writeCost
	for _, n := range nodes {
		c.samples += writtenSamples(n.srv.WriteStats())
		c.requests += n.origins.counts(fromWrite).Requests
	}
	return c
}

// checkHistWrites checks that the servers stored every remote write (2xx only, nothing
// rejected), logs the Azure requests a sample written, and holds those of the remote
// writes since warm to e2eMaxTransactionsPerSample (a histogram sample counts as a sample).
func checkHistWrites(t *testing.T, nodes []*e2eNode, lb *roundRobin, warm writeCost) {
	t.Helper()
	var samples uint64
	var wire [numOrigins]int64
	for _, n := range nodes {
		ws := n.srv.WriteStats()
		samples += writtenSamples(ws)
		for code, count := range ws.Requests {
			if code != http.StatusNoContent {
				t.Errorf("node %s answered %d remote writes %d", n.name, count, code)
			}
		}
		if rejected := rejectedSamples(ws); rejected != 0 {
			t.Errorf("node %s rejected %d samples", n.name, rejected)
		}
		for o := range numOrigins {
			wire[o] += n.origins.counts(o).Requests
		}
		t.Logf("node %s: %+v", n.name, ws)
	}
	t.Logf("remote writes through the proxy: %s", lb.writeLatency())
	if samples == 0 {
		t.Error("no sample written")
		return
	}
	for o := range numOrigins {
		t.Logf("Azure requests for %s: %d (%.4f a sample written)", o, wire[o], float64(wire[o])/float64(samples))
	}
	now := snapshotWrites(nodes)
	if now.samples <= warm.samples {
		t.Errorf("no sample written after the first 10 s")
		return
	}
	tps := float64(now.requests-warm.requests) / float64(now.samples-warm.samples)
	t.Logf("after the first 10 s: %d samples written by remote write, %d Azure requests (%.4f a sample)",
		now.samples-warm.samples, now.requests-warm.requests, tps)
	if tps > e2eMaxTransactionsPerSample {
		t.Errorf("remote writes after the first 10 s: %.4f Azure transactions a sample, want at most %v", tps, e2eMaxTransactionsPerSample)
	}
}
