package server_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/prompb"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"

	"github.com/seed71701133/tablets/internal/testkit/clock"
	"github.com/seed71701133/tablets/server"
	"github.com/seed71701133/tablets/server/limits"
)

// limitHits records LimitHit's calls by limit.
type limitHits struct {
	mu sync.Mutex
	n  map[string]int
}

func (h *limitHits) hit(limit string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n == nil {
		h.n = map[string]int{}
	}
	h.n[limit]++
}

func (h *limitHits) get(limit string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n[limit]
}

// postWrite sends a remote write 1.0 of n series of metric (label i=0..n-1, labels its
// other labels), samples samples each, every 15 s from start.
func postWrite(t *testing.T, base, metric string, n, samples int, start time.Time, extra ...string) *http.Response {
	t.Helper()
	req := &prompb.WriteRequest{}
	for i := range n {
		ls := []prompb.Label{{Name: "__name__", Value: metric}, {Name: "i", Value: fmt.Sprint(i)}}
		for j := 0; j+1 < len(extra); j += 2 {
			ls = append(ls, prompb.Label{Name: extra[j], Value: extra[j+1]})
		}
		ts := prompb.TimeSeries{Labels: ls}
		for j := range samples {
			ts.Samples = append(ts.Samples, prompb.Sample{Timestamp: start.Add(time.Duration(j) * 15 * time.Second).UnixMilli(), Value: float64(j)})
		}
		req.Timeseries = append(req.Timeseries, ts)
	}
	data, err := req.Marshal()
	require.NoError(t, err)
	return postSnappy(t, base+"/api/v1/write", data)
}

func postSnappy(t *testing.T, u string, data []byte) *http.Response {
	t.Helper()
	r, err := http.NewRequest(http.MethodPost, u, bytes.NewReader(snappy.Encode(nil, data)))
	require.NoError(t, err)
	r.Header.Set("Content-Type", "application/x-protobuf")
	r.Header.Set("Content-Encoding", "snappy")
	resp, err := http.DefaultClient.Do(r)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp
}

func bodyOf(resp *http.Response) string {
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// metricValue reads one sample of the server's /metrics.
func metricValue(t *testing.T, base, name string) string {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return v
		}
	}
	t.Fatalf("no %s in /metrics", name)
	return ""
}

// A tenant's limits apply to its server through every endpoint, refused requests cost no
// request to the account, and a configuration reloaded applies to the next request.
func TestServerTenantLimits(t *testing.T) {
	const file = `
limits:
  ingestion_rate: 10
  ingestion_burst_size: 100
  max_series_per_request: 5
  max_label_value_length: 20
overrides:
  teama:
    max_samples_per_query: 50
    max_series_per_select: 3
    max_concurrent_queries: 2
`
	parse := func(s string) *limits.Config {
		c, err := limits.Parse([]byte(s), limits.Limits{})
		require.NoError(t, err)
		return c
	}
	var live atomic.Pointer[limits.Config]
	live.Store(parse(file))
	hits := &limitHits{}
	clock := clock.New(time.Unix(0, time.Now().Truncate(time.Minute).UnixNano()))
	_, hs, checker := newServer(t, nil, &server.Options{FoldEvery: -1, RollupEvery: -1, CompactEvery: -1, RetainEvery: -1,
		Tenant: "teama", Limits: live.Load, LimitHit: hits.hit, Now: clock.Now})
	start := clock.Now().Add(-10 * time.Minute)
	refusedFree := func(name string, send func() *http.Response) *http.Response {
		t.Helper()
		before := checker.Stats().Requests
		resp := send()
		require.Equal(t, before, checker.Stats().Requests, "%s: a refused write costs no request to the account", name)
		return resp
	}

	// Ingest: series per request, then the rate.
	resp := refusedFree("series", func() *http.Response { return postWrite(t, hs.URL, "lim_a", 6, 1, start) })
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, bodyOf(resp))
	require.Equal(t, 1, hits.get("max_series_per_request"))
	resp = postWrite(t, hs.URL, "lim_a", 4, 20, start) // 80 of the 100 tokens
	require.Equal(t, http.StatusNoContent, resp.StatusCode, bodyOf(resp))
	resp = refusedFree("rate", func() *http.Response { return postWrite(t, hs.URL, "lim_a", 4, 10, start.Add(5*time.Minute)) })
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, bodyOf(resp))
	require.Equal(t, "2", resp.Header.Get("Retry-After"), "20 samples missing at 10/s")
	require.Equal(t, 1, hits.get("ingestion_rate"))
	clock.Add(2 * time.Second)
	resp = postWrite(t, hs.URL, "lim_a", 4, 10, start.Add(5*time.Minute))
	require.Equal(t, http.StatusNoContent, resp.StatusCode, bodyOf(resp))
	// A label value over the limit: that series refused, the others stored.
	clock.Add(10 * time.Second)
	resp = postWrite(t, hs.URL, "lim_b", 2, 1, start, "long", strings.Repeat("x", 21))
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Contains(t, bodyOf(resp), "stored 0 of 2 float samples")
	require.Equal(t, 2, hits.get("max_label_value_length"))

	// Queries: the override's limits replace the server's (none).
	at := start.Add(10 * time.Minute).Format(time.RFC3339)
	require.Equal(t, "2", metricValue(t, hs.URL, "prometheus_engine_queries_concurrent_max"))
	for _, c := range []struct {
		query string
		code  int
		limit string
	}{
		{`lim_a{i="0"}[1h]`, 200, ""}, // 30 samples
		{`lim_a{i=~"0|1"}[1h]`, http.StatusUnprocessableEntity, "max_samples_per_query"}, // 60
		{`count(lim_a)`, http.StatusUnprocessableEntity, "max_series_per_select"},        // 4 series
	} {
		before := 0
		if c.limit != "" {
			before = hits.get(c.limit)
		}
		code, out := queryStatus(t, hs.URL, url.Values{"query": {c.query}, "time": {at}})
		require.Equal(t, c.code, code, "%s: %v", c.query, out)
		if c.limit != "" {
			require.Equal(t, "execution", out["errorType"])
			require.Equal(t, before+1, hits.get(c.limit), c.query)
		}
	}
	// Remote read: the series per select too, 400.
	read := func() *http.Response {
		rr := &prompb.ReadRequest{Queries: []*prompb.Query{{StartTimestampMs: start.UnixMilli(), EndTimestampMs: start.Add(time.Hour).UnixMilli(),
			Matchers: []*prompb.LabelMatcher{{Type: prompb.LabelMatcher_EQ, Name: "__name__", Value: "lim_a"}}}},
			AcceptedResponseTypes: []prompb.ReadRequest_ResponseType{prompb.ReadRequest_STREAMED_XOR_CHUNKS}}
		data, err := rr.Marshal()
		require.NoError(t, err)
		return postSnappy(t, hs.URL+"/api/v1/read", data)
	}
	resp = read()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Contains(t, bodyOf(resp), "max_series_per_select of 3 series")

	// A reload lifting the override's query limits and the label limit applies at once.
	live.Store(parse(strings.Replace(strings.Replace(file, "max_label_value_length: 20", "max_label_value_length: 0", 1),
		"    max_samples_per_query: 50\n    max_series_per_select: 3\n", "", 1)))
	for _, q := range []string{`lim_a{i=~"0|1"}[1h]`, `count(lim_a)`} {
		code, out := queryStatus(t, hs.URL, url.Values{"query": {q}, "time": {at}})
		require.Equal(t, http.StatusOK, code, "%s: %v", q, out)
	}
	resp = read()
	require.Equal(t, http.StatusOK, resp.StatusCode, bodyOf(resp))
	resp = postWrite(t, hs.URL, "lim_b", 2, 1, start, "long", strings.Repeat("x", 21))
	require.Equal(t, http.StatusNoContent, resp.StatusCode, bodyOf(resp))
	require.Equal(t, "2", metricValue(t, hs.URL, "prometheus_engine_queries_concurrent_max"), "the concurrency override stays")
	// What the streamed read's count of series before its first frame costs: measured, with
	// a limit it stays under and with none.
	cost := func() (int64, int64) {
		before := checker.Stats()
		resp := read()
		require.Equal(t, http.StatusOK, resp.StatusCode, bodyOf(resp))
		after := checker.Stats()
		return after.Requests - before.Requests, after.ResponseBytes - before.ResponseBytes
	}
	cost() // the staging cache takes in the write above: both reads below list its entities alone
	reqsNone, bytesNone := cost()
	live.Store(parse("limits: {max_series_per_select: 10}"))
	reqsLimit, bytesLimit := cost()
	t.Logf("streamed remote read of 4 series: %d requests, %d response bytes without a series limit; %d, %d with one",
		reqsNone, bytesNone, reqsLimit, bytesLimit)
	require.Equal(t, reqsNone+1, reqsLimit, "the count reads the series index once")

	live.Store(parse("limits: {max_concurrent_queries: 7}"))
	code, out := queryStatus(t, hs.URL, url.Values{"query": {"count(lim_a)"}, "time": {at}})
	require.Equal(t, http.StatusOK, code, "%v", out)
	require.Equal(t, "7", metricValue(t, hs.URL, "prometheus_engine_queries_concurrent_max"), "the new engine's metrics are served")

	// OTLP goes through the same bucket, and keeps the configured status and Retry-After.
	live.Store(parse("limits: {ingestion_rate: 1, ingestion_burst_size: 1}\nrequests: {rate_limited_status: 429}"))
	otlpGauge := func() *http.Response {
		md := pmetric.NewMetrics()
		rm := md.ResourceMetrics().AppendEmpty()
		rm.Resource().Attributes().PutStr("service.name", "svc")
		g := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
		g.SetName("otlp_up")
		gp := g.SetEmptyGauge().DataPoints().AppendEmpty()
		gp.SetTimestamp(pcommon.NewTimestampFromTime(start))
		gp.SetDoubleValue(1)
		body, err := pmetricotlp.NewExportRequestFromMetrics(md).MarshalProto()
		require.NoError(t, err)
		resp, err := http.Post(hs.URL+"/api/v1/otlp/v1/metrics", "application/x-protobuf", bytes.NewReader(body))
		require.NoError(t, err)
		resp.Body.Close()
		return resp
	}
	require.Equal(t, http.StatusOK, otlpGauge().StatusCode)
	resp = refusedFree("otlp rate", otlpGauge)
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	require.Equal(t, "1", resp.Header.Get("Retry-After"))
}

// Queries while the query limits change under them: every answer is that of one set of
// limits or the other, and the engines made meanwhile register nothing twice.
func TestServerQueryLimitsReloadedUnderLoad(t *testing.T) {
	small, err := limits.Parse([]byte("limits: {max_samples_per_query: 10}"), limits.Limits{})
	require.NoError(t, err)
	large, err := limits.Parse([]byte("limits: {max_samples_per_query: 1000, max_concurrent_queries: 3}"), limits.Limits{})
	require.NoError(t, err)
	var live atomic.Pointer[limits.Config]
	live.Store(small)
	_, hs, _ := newServer(t, nil, &server.Options{FoldEvery: -1, RollupEvery: -1, CompactEvery: -1, RetainEvery: -1, Limits: live.Load})
	start := time.Now().Add(-10 * time.Minute).Truncate(time.Minute)
	resp := postWrite(t, hs.URL, "load", 1, 20, start)
	require.Equal(t, http.StatusNoContent, resp.StatusCode, bodyOf(resp))
	at := start.Add(10 * time.Minute).Format(time.RFC3339)

	var wg sync.WaitGroup
	codes := make(chan int, 4*25)
	for range 4 {
		wg.Go(func() {
			for range 25 {
				code, _ := queryStatus(t, hs.URL, url.Values{"query": {"load[1h]"}, "time": {at}}) // 20 samples
				codes <- code
			}
		})
	}
	for i := range 50 {
		if i%2 == 0 {
			live.Store(large)
		} else {
			live.Store(small)
		}
		metricValue(t, hs.URL, "prometheus_engine_queries_concurrent_max")
	}
	wg.Wait()
	close(codes)
	seen := map[int]int{}
	for code := range codes {
		seen[code]++
	}
	for code := range seen {
		require.Contains(t, []int{http.StatusOK, http.StatusUnprocessableEntity}, code, "%v", seen)
	}
	t.Logf("answers: %v", seen)
	live.Store(large)
	code, out := queryStatus(t, hs.URL, url.Values{"query": {"load[1h]"}, "time": {at}})
	require.Equal(t, http.StatusOK, code, "%v", out)
	require.Equal(t, "3", metricValue(t, hs.URL, "prometheus_engine_queries_concurrent_max"))
}
