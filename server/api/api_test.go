package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
)

// The test data: samples every 15s over one hour starting at t0.
const (
	t0       = int64(1_700_000_000) // seconds
	interval = int64(15)
	duration = int64(3600)
	resetAt  = t0 + 1800 // counter b restarts here
	staleAt  = t0 + 1215 // temperature{room="lab"} gets a staleness marker here
)

// Counter slopes per second; rate() over a linear counter must equal its slope.
var slopes = map[string]float64{"a": 2, "b": 3, "c": 0.5}

// Bucket slopes of req_duration_seconds_bucket (cumulative, per second).
var bucketBounds = []float64{0.1, 0.5, 1, math.Inf(1)}
var bucketSlopes = []float64{1, 3, 4, 4}

func counterValue(instance string, t int64) float64 {
	if instance == "b" && t >= resetAt {
		// Restarted right after the previous scrape: the increase over the scrape
		// interval that straddles the reset is still slope*interval.
		return slopes["b"]*float64(t-resetAt) + slopes["b"]*float64(interval)
	}
	return slopes[instance] * float64(t-t0)
}

func temperature(t int64) float64 { return 20 + float64(t-t0)/60 }

func testStore() *memStore {
	m := &memStore{}
	grid := func(from, to int64, f func(t int64) float64) ([]int64, []float64) {
		var ts []int64
		var vs []float64
		for t := from; t <= to; t += interval {
			ts = append(ts, t*1000)
			vs = append(vs, f(t))
		}
		return ts, vs
	}
	for _, inst := range []string{"a", "b", "c"} {
		job := "api"
		if inst == "c" {
			job = "web"
		}
		ts, vs := grid(t0, t0+duration, func(t int64) float64 { return counterValue(inst, t) })
		m.add(labels.FromStrings("__name__", "http_requests_total", "job", job, "instance", inst), ts, vs)
	}
	for i, le := range []string{"0.1", "0.5", "1", "+Inf"} {
		slope := bucketSlopes[i]
		ts, vs := grid(t0, t0+duration, func(t int64) float64 { return slope * float64(t-t0) })
		m.add(labels.FromStrings("__name__", "req_duration_seconds_bucket", "job", "api", "le", le), ts, vs)
	}
	// Two gauges ending at t0+1200; only "lab" is marked stale afterwards.
	ts, vs := grid(t0, t0+1200, temperature)
	m.add(labels.FromStrings("__name__", "temperature", "room", "lab"), append(ts, staleAt*1000), append(vs, staleNaN))
	ts, vs = grid(t0, t0+1200, temperature)
	m.add(labels.FromStrings("__name__", "temperature", "room", "hall"), ts, vs)
	// A label name that is not a legacy identifier.
	ts, vs = grid(t0, t0+duration, func(int64) float64 { return 1 })
	m.add(labels.FromStrings("__name__", "up", "job", "api", "http.status", "200"), ts, vs)
	return m
}

func newServer(t *testing.T, m *memStore, opts *Options) (*API, *httptest.Server) {
	t.Helper()
	if opts == nil {
		opts = &Options{}
	}
	if opts.Now == nil {
		opts.Now = func() time.Time { return time.Unix(t0+duration, 0) }
	}
	a, err := New(m, opts)
	require.NoError(t, err)
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(func() {
		srv.Close()
		require.NoError(t, a.Close())
	})
	return a, srv
}

type response struct {
	Status    string          `json:"status"`
	Data      json.RawMessage `json:"data"`
	ErrorType string          `json:"errorType"`
	Error     string          `json:"error"`
	Warnings  []string        `json:"warnings"`
	Infos     []string        `json:"infos"`
}

// do sends params by GET (URL query) or POST (form body) and decodes the envelope.
func do(t *testing.T, srv *httptest.Server, method, path string, params url.Values) (int, response, []byte) {
	t.Helper()
	var (
		resp *http.Response
		err  error
	)
	switch method {
	case http.MethodGet:
		u := srv.URL + path
		if len(params) > 0 {
			u += "?" + params.Encode()
		}
		resp, err = srv.Client().Get(u)
	case http.MethodPost:
		resp, err = srv.Client().PostForm(srv.URL+path, params)
	default:
		t.Fatalf("method %s", method)
	}
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	var r response
	require.NoError(t, json.Unmarshal(body, &r), "body: %s", body)
	return resp.StatusCode, r, body
}

// ok asserts a success response and returns it.
func ok(t *testing.T, srv *httptest.Server, method, path string, params url.Values) response {
	t.Helper()
	code, r, body := do(t, srv, method, path, params)
	require.Equal(t, http.StatusOK, code, "body: %s", body)
	require.Equal(t, "success", r.Status)
	return r
}

var methods = []string{http.MethodGet, http.MethodPost}

type queryData struct {
	ResultType string          `json:"resultType"`
	Result     json.RawMessage `json:"result"`
}

type point struct {
	T float64 // seconds
	V float64
}

// parsePoint decodes [ts, "value"].
func parsePoint(t *testing.T, raw []any) point {
	t.Helper()
	require.Len(t, raw, 2)
	ts, okT := raw[0].(float64)
	s, okV := raw[1].(string)
	require.True(t, okT && okV, "point %v", raw)
	v, err := strconv.ParseFloat(s, 64)
	require.NoError(t, err)
	return point{ts, v}
}

type series struct {
	Metric map[string]string
	Points []point
}

func decodeMatrix(t *testing.T, r response) []series {
	t.Helper()
	var d queryData
	require.NoError(t, json.Unmarshal(r.Data, &d))
	require.Equal(t, "matrix", d.ResultType)
	var raw []struct {
		Metric map[string]string `json:"metric"`
		Values [][]any           `json:"values"`
	}
	require.NoError(t, json.Unmarshal(d.Result, &raw))
	out := make([]series, len(raw))
	for i, s := range raw {
		out[i].Metric = s.Metric
		for _, p := range s.Values {
			out[i].Points = append(out[i].Points, parsePoint(t, p))
		}
	}
	return out
}

type sample struct {
	Metric map[string]string
	point
}

func decodeVector(t *testing.T, r response) []sample {
	t.Helper()
	var d queryData
	require.NoError(t, json.Unmarshal(r.Data, &d))
	require.Equal(t, "vector", d.ResultType)
	var raw []struct {
		Metric map[string]string `json:"metric"`
		Value  []any             `json:"value"`
	}
	require.NoError(t, json.Unmarshal(d.Result, &raw))
	out := make([]sample, len(raw))
	for i, s := range raw {
		out[i] = sample{s.Metric, parsePoint(t, s.Value)}
	}
	return out
}

func ts(sec int64) string { return strconv.FormatInt(sec, 10) }

func TestQueryRangeRateEqualsSlope(t *testing.T) {
	_, srv := newServer(t, testStore(), nil)
	start, end, step := t0+600, t0+3000, int64(60)
	for _, method := range methods {
		t.Run(method, func(t *testing.T) {
			r := ok(t, srv, method, "/api/v1/query_range", url.Values{
				"query": {"rate(http_requests_total[5m])"},
				"start": {ts(start)}, "end": {ts(end)}, "step": {"60"},
			})
			m := decodeMatrix(t, r)
			require.Len(t, m, 3)
			for _, s := range m {
				// rate drops the metric name.
				require.NotContains(t, s.Metric, "__name__")
				slope := slopes[s.Metric["instance"]]
				require.NotZero(t, slope, "instance %q", s.Metric["instance"])
				require.Len(t, s.Points, int((end-start)/step)+1)
				for i, p := range s.Points {
					require.Equal(t, float64(start+int64(i)*step), p.T)
					// Includes the windows around instance b's counter reset.
					require.InDelta(t, slope, p.V, 1e-9, "instance %s at %v", s.Metric["instance"], p.T)
				}
			}
		})
	}
}

func TestQuerySumByJob(t *testing.T) {
	_, srv := newServer(t, testStore(), nil)
	for _, method := range methods {
		t.Run(method, func(t *testing.T) {
			r := ok(t, srv, method, "/api/v1/query", url.Values{
				"query": {"sum by (job) (rate(http_requests_total[5m]))"},
				"time":  {ts(t0 + 2400)},
			})
			v := decodeVector(t, r)
			require.Len(t, v, 2)
			want := map[string]float64{
				"api": slopes["a"] + slopes["b"],
				"web": slopes["c"],
			}
			for _, s := range v {
				require.Len(t, s.Metric, 1)
				require.InDelta(t, want[s.Metric["job"]], s.V, 1e-9)
				require.Equal(t, float64(t0+2400), s.T)
			}
		})
	}
}

// refQuantile computes a quantile from cumulative buckets by linear interpolation
// within the bucket holding the rank, the classic Prometheus histogram definition.
func refQuantile(q float64, bounds, counts []float64) float64 {
	total := counts[len(counts)-1]
	rank := q * total
	for i, c := range counts {
		if c < rank {
			continue
		}
		if math.IsInf(bounds[i], 1) {
			return bounds[i-1]
		}
		lower, below := 0.0, 0.0
		if i > 0 {
			lower, below = bounds[i-1], counts[i-1]
		}
		return lower + (bounds[i]-lower)*(rank-below)/(c-below)
	}
	return math.NaN()
}

func TestHistogramQuantile(t *testing.T) {
	_, srv := newServer(t, testStore(), nil)
	at := t0 + 1000
	for _, q := range []float64{0.25, 0.5, 0.9} {
		// Cumulative counts at time `at`; their rates are the slopes, which have the
		// same proportions, so both queries below must give the same quantile.
		counts := make([]float64, len(bucketSlopes))
		for i, s := range bucketSlopes {
			counts[i] = s * float64(at-t0)
		}
		want := refQuantile(q, bucketBounds, counts)
		require.Equal(t, want, refQuantile(q, bucketBounds, bucketSlopes))
		for _, query := range []string{
			fmt.Sprintf("histogram_quantile(%g, req_duration_seconds_bucket)", q),
			fmt.Sprintf("histogram_quantile(%g, sum by (le) (rate(req_duration_seconds_bucket[5m])))", q),
		} {
			for _, method := range methods {
				r := ok(t, srv, method, "/api/v1/query", url.Values{"query": {query}, "time": {ts(at)}})
				v := decodeVector(t, r)
				require.Len(t, v, 1, query)
				require.NotContains(t, v[0].Metric, "le")
				require.InDelta(t, want, v[0].V, 1e-9, query)
			}
		}
	}
	require.InDelta(t, 0.3, refQuantile(0.5, bucketBounds, bucketSlopes), 1e-15) // sanity of the reference
}

func TestStalenessMarker(t *testing.T) {
	_, srv := newServer(t, testStore(), nil)
	rooms := func(at int64) map[string]float64 {
		r := ok(t, srv, http.MethodGet, "/api/v1/query", url.Values{"query": {"temperature"}, "time": {ts(at)}})
		out := map[string]float64{}
		for _, s := range decodeVector(t, r) {
			out[s.Metric["room"]] = s.V
		}
		return out
	}
	last := temperature(t0 + 1200)
	require.Equal(t, map[string]float64{"lab": last, "hall": last}, rooms(t0+1200))
	require.Equal(t, map[string]float64{"lab": last, "hall": last}, rooms(staleAt-1))
	// From the marker on, "lab" is gone although its last sample is within the lookback
	// delta; "hall", without a marker, lingers for the lookback delta (5m).
	require.Equal(t, map[string]float64{"hall": last}, rooms(staleAt))
	require.Equal(t, map[string]float64{"hall": last}, rooms(t0+1200+299))
	require.Empty(t, rooms(t0+1200+300))

	// A range query over the marker: "lab" has points up to the marker only.
	r := ok(t, srv, http.MethodPost, "/api/v1/query_range", url.Values{
		"query": {`temperature{room="lab"}`},
		"start": {ts(t0 + 1140)}, "end": {ts(t0 + 1260)}, "step": {"30"},
	})
	m := decodeMatrix(t, r)
	require.Len(t, m, 1)
	require.Equal(t, []point{
		{float64(t0 + 1140), temperature(t0 + 1140)},
		{float64(t0 + 1170), temperature(t0 + 1170)},
		{float64(t0 + 1200), temperature(t0 + 1200)},
	}, m[0].Points)
}

func TestExactJSON(t *testing.T) {
	_, srv := newServer(t, testStore(), nil)
	_, _, body := do(t, srv, http.MethodGet, "/api/v1/query", url.Values{"query": {"up"}, "time": {"1700000010.5"}})
	// Like Prometheus, timestamps with a fraction always have three decimals.
	require.JSONEq(t, `{"status":"success","data":{"resultType":"vector","result":[
		{"metric":{"__name__":"up","http.status":"200","job":"api"},"value":[1700000010.500,"1"]}]}}`, string(body))
	// Byte-exact as well: Prometheus writes no whitespace and omits empty warnings.
	require.Equal(t, `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"__name__":"up","http.status":"200","job":"api"},"value":[1700000010.500,"1"]}]}}`, string(body))

	_, _, body = do(t, srv, http.MethodGet, "/api/v1/query_range", url.Values{
		"query": {`up + 0.25`}, "start": {"1700000000.123"}, "end": {"1700000060.123"}, "step": {"1m"},
	})
	require.Equal(t, `{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"http.status":"200","job":"api"},"values":[[1700000000.123,"1.25"],[1700000060.123,"1.25"]]}]}}`, string(body))

	_, _, body = do(t, srv, http.MethodGet, "/api/v1/query", url.Values{"query": {"nothing_here"}, "time": {ts(t0)}})
	require.Equal(t, `{"status":"success","data":{"resultType":"vector","result":[]}}`, string(body))
}

func TestValueFormats(t *testing.T) {
	_, srv := newServer(t, testStore(), nil)
	at := "1700000000.123"
	cases := []struct {
		query, resultType, result string
	}{
		{"1/0", "scalar", `[1700000000.123,"+Inf"]`},
		{"-1/0", "scalar", `[1700000000.123,"-Inf"]`},
		{"0/0", "scalar", `[1700000000.123,"NaN"]`},
		{"1.5", "scalar", `[1700000000.123,"1.5"]`},
		// Scalars are always in 'f' format, vector values switch to 'e' at extremes.
		{"1e-7", "scalar", `[1700000000.123,"0.0000001"]`},
		{"vector(1e-7)", "vector", `[{"metric":{},"value":[1700000000.123,"1e-07"]}]`},
		{"vector(1e21)", "vector", `[{"metric":{},"value":[1700000000.123,"1e+21"]}]`},
		{"vector(123456.789)", "vector", `[{"metric":{},"value":[1700000000.123,"123456.789"]}]`},
		{"vector(0/0)", "vector", `[{"metric":{},"value":[1700000000.123,"NaN"]}]`},
		{"vector(-1/0)", "vector", `[{"metric":{},"value":[1700000000.123,"-Inf"]}]`},
		{`"hello"`, "string", `[1700000000.123,"hello"]`},
	}
	for _, c := range cases {
		for _, method := range methods {
			r := ok(t, srv, method, "/api/v1/query", url.Values{"query": {c.query}, "time": {at}})
			var d queryData
			require.NoError(t, json.Unmarshal(r.Data, &d))
			require.Equal(t, c.resultType, d.ResultType, c.query)
			require.Equal(t, c.result, string(d.Result), c.query)
		}
	}
}

func TestHintsReachSelect(t *testing.T) {
	m := testStore()
	_, srv := newServer(t, m, nil)
	start, end := t0+600, t0+3000
	ok(t, srv, http.MethodPost, "/api/v1/query_range", url.Values{
		"query": {"sum by (job) (rate(http_requests_total[5m]))"},
		"start": {ts(start)}, "end": {ts(end)}, "step": {"60"},
	})
	require.Len(t, m.hints, 1)
	h := m.hints[0]
	require.Equal(t, int64(60_000), h.Step)
	require.Equal(t, int64(300_000), h.Range)
	require.Equal(t, "rate", h.Func)
	require.Equal(t, end*1000, h.End)
	require.LessOrEqual(t, h.Start, (start-300)*1000+1)

	// Grouping reaches the storage when the aggregation applies to the selector directly.
	ok(t, srv, http.MethodGet, "/api/v1/query_range", url.Values{
		"query": {"max by (job) (http_requests_total)"},
		"start": {ts(start)}, "end": {ts(end)}, "step": {"300"},
	})
	require.Len(t, m.hints, 2)
	h = m.hints[1]
	require.Equal(t, int64(300_000), h.Step)
	require.Equal(t, "max", h.Func)
	require.Equal(t, []string{"job"}, h.Grouping)
	require.True(t, h.By)
}

func TestQueryLimitAndAnnotations(t *testing.T) {
	_, srv := newServer(t, testStore(), nil)
	r := ok(t, srv, http.MethodGet, "/api/v1/query", url.Values{
		"query": {"http_requests_total"}, "time": {ts(t0 + 60)}, "limit": {"1"},
	})
	require.Len(t, decodeVector(t, r), 1)
	require.Equal(t, []string{"results truncated due to limit"}, r.Warnings)

	// A PromQL info annotation: rate over a metric not named like a counter.
	r = ok(t, srv, http.MethodGet, "/api/v1/query", url.Values{
		"query": {`rate(temperature{room="hall"}[5m])`}, "time": {ts(t0 + 600)},
	})
	require.Len(t, r.Infos, 1)
	require.Contains(t, r.Infos[0], "might not be a counter")
	require.Empty(t, r.Warnings)

	// A PromQL warning: quantile out of range.
	r = ok(t, srv, http.MethodPost, "/api/v1/query", url.Values{
		"query": {`histogram_quantile(2, req_duration_seconds_bucket)`}, "time": {ts(t0 + 600)},
	})
	require.Len(t, r.Warnings, 1)
	require.Contains(t, r.Warnings[0], "quantile value should be between 0 and 1")
	v := decodeVector(t, r)
	require.Len(t, v, 1)
	require.True(t, math.IsInf(v[0].V, 1))
}

func decodeLabelsList(t *testing.T, r response) []map[string]string {
	t.Helper()
	var out []map[string]string
	require.NoError(t, json.Unmarshal(r.Data, &out))
	return out
}

func TestSeries(t *testing.T) {
	_, srv := newServer(t, testStore(), nil)
	for _, method := range methods {
		t.Run(method, func(t *testing.T) {
			r := ok(t, srv, method, "/api/v1/series", url.Values{"match[]": {`http_requests_total{job="api"}`}})
			require.Equal(t, []map[string]string{
				{"__name__": "http_requests_total", "instance": "a", "job": "api"},
				{"__name__": "http_requests_total", "instance": "b", "job": "api"},
			}, decodeLabelsList(t, r))

			// Several selectors: union without duplicates, sorted.
			r = ok(t, srv, method, "/api/v1/series", url.Values{"match[]": {
				`http_requests_total{instance="c"}`, `{job="web"}`, `temperature`,
			}})
			require.Equal(t, []map[string]string{
				{"__name__": "http_requests_total", "instance": "c", "job": "web"},
				{"__name__": "temperature", "room": "hall"},
				{"__name__": "temperature", "room": "lab"},
			}, decodeLabelsList(t, r))

			// start/end restrict to series with samples in the range.
			r = ok(t, srv, method, "/api/v1/series", url.Values{
				"match[]": {`temperature`}, "start": {ts(t0 + 2000)}, "end": {"2023-11-14T23:00:00Z"},
			})
			require.Equal(t, []map[string]string{}, decodeLabelsList(t, r))
			require.Equal(t, "[]", string(r.Data))

			r = ok(t, srv, method, "/api/v1/series", url.Values{"match[]": {`http_requests_total`}, "limit": {"2"}})
			require.Len(t, decodeLabelsList(t, r), 2)
			require.Equal(t, []string{"results truncated due to limit"}, r.Warnings)
		})
	}
}

func decodeStrings(t *testing.T, r response) []string {
	t.Helper()
	var out []string
	require.NoError(t, json.Unmarshal(r.Data, &out))
	return out
}

func TestLabels(t *testing.T) {
	_, srv := newServer(t, testStore(), nil)
	for _, method := range methods {
		t.Run(method, func(t *testing.T) {
			r := ok(t, srv, method, "/api/v1/labels", nil)
			require.Equal(t, []string{"__name__", "http.status", "instance", "job", "le", "room"}, decodeStrings(t, r))

			r = ok(t, srv, method, "/api/v1/labels", url.Values{"match[]": {"temperature"}})
			require.Equal(t, []string{"__name__", "room"}, decodeStrings(t, r))

			r = ok(t, srv, method, "/api/v1/labels", url.Values{"match[]": {"temperature", "up"}})
			require.Equal(t, []string{"__name__", "http.status", "job", "room"}, decodeStrings(t, r))

			r = ok(t, srv, method, "/api/v1/labels", url.Values{"start": {ts(t0 + 1300)}, "end": {ts(t0 + 1400)}, "match[]": {`{room=~".+"}`}})
			require.Equal(t, []string{}, decodeStrings(t, r))

			r = ok(t, srv, method, "/api/v1/labels", url.Values{"limit": {"2"}})
			require.Equal(t, []string{"__name__", "http.status"}, decodeStrings(t, r))
			require.Equal(t, []string{"results truncated due to limit"}, r.Warnings)
		})
	}
}

func TestLabelValues(t *testing.T) {
	_, srv := newServer(t, testStore(), nil)
	for _, method := range methods {
		t.Run(method, func(t *testing.T) {
			r := ok(t, srv, method, "/api/v1/label/job/values", nil)
			require.Equal(t, []string{"api", "web"}, decodeStrings(t, r))

			r = ok(t, srv, method, "/api/v1/label/__name__/values", url.Values{"start": {ts(t0)}, "end": {ts(t0 + 60)}})
			require.Equal(t, []string{"http_requests_total", "req_duration_seconds_bucket", "temperature", "up"}, decodeStrings(t, r))

			r = ok(t, srv, method, "/api/v1/label/instance/values", url.Values{"match[]": {`{job="api"}`, `{job="web"}`}})
			require.Equal(t, []string{"a", "b", "c"}, decodeStrings(t, r))

			// "http.status" in Prometheus 3's U__ value encoding ('.' is 0x2e).
			r = ok(t, srv, method, "/api/v1/label/U__http_2e_status/values", nil)
			require.Equal(t, []string{"200"}, decodeStrings(t, r))

			r = ok(t, srv, method, "/api/v1/label/nonexistent/values", nil)
			require.Equal(t, "[]", string(r.Data))
		})
	}
}

func TestStubEndpoints(t *testing.T) {
	_, srv := newServer(t, testStore(), nil)
	for _, method := range methods {
		r := ok(t, srv, method, "/api/v1/status/buildinfo", nil)
		var bi BuildInfo
		require.NoError(t, json.Unmarshal(r.Data, &bi))
		require.Equal(t, PrometheusCompatVersion, bi.Version)
		require.Equal(t, "tablets", bi.Branch)
		require.True(t, strings.HasPrefix(bi.GoVersion, "go"))
		var fields map[string]any
		require.NoError(t, json.Unmarshal(r.Data, &fields))
		require.NotContains(t, fields, "application") // would make Grafana think Mimir

		require.Equal(t, "{}", string(ok(t, srv, method, "/api/v1/metadata", nil).Data))
		require.Equal(t, "[]", string(ok(t, srv, method, "/api/v1/query_exemplars", url.Values{"query": {"up"}}).Data))
		require.Equal(t, `{"yaml":""}`, string(ok(t, srv, method, "/api/v1/status/config", nil).Data))
		require.Equal(t, "{}", string(ok(t, srv, method, "/api/v1/status/flags", nil).Data))
		require.Equal(t, `{"groups":[]}`, string(ok(t, srv, method, "/api/v1/rules", nil).Data))
		require.Equal(t, `{"alerts":[]}`, string(ok(t, srv, method, "/api/v1/alerts", nil).Data))
		require.Equal(t, `"sum by (job) (rate(x[5m]))"`, string(ok(t, srv, method, "/api/v1/format_query", url.Values{"query": {"sum(rate(x[5m]))by(job)"}}).Data))
	}
	custom := &BuildInfo{Version: "3.0.0", Branch: "x"}
	_, srv2 := newServer(t, testStore(), &Options{BuildInfo: custom})
	var bi BuildInfo
	require.NoError(t, json.Unmarshal(ok(t, srv2, http.MethodGet, "/api/v1/status/buildinfo", nil).Data, &bi))
	require.Equal(t, *custom, bi)
}

func TestBadRequests(t *testing.T) {
	_, srv := newServer(t, testStore(), nil)
	rng := func(kv ...string) url.Values {
		v := url.Values{"query": {"up"}, "start": {ts(t0)}, "end": {ts(t0 + 600)}, "step": {"60"}}
		for i := 0; i < len(kv); i += 2 {
			v.Set(kv[i], kv[i+1])
		}
		return v
	}
	cases := []struct {
		name, path string
		params     url.Values
		errSubstr  string
	}{
		{"bad query", "/api/v1/query", url.Values{"query": {"sum(up"}}, `invalid parameter "query"`},
		{"empty query", "/api/v1/query", nil, `invalid parameter "query"`},
		{"bad time", "/api/v1/query", url.Values{"query": {"up"}, "time": {"yesterday"}}, `invalid parameter "time"`},
		{"bad timeout", "/api/v1/query", url.Values{"query": {"up"}, "timeout": {"soon"}}, `invalid parameter "timeout"`},
		{"bad limit", "/api/v1/query", url.Values{"query": {"up"}, "limit": {"-1"}}, `invalid parameter "limit"`},
		{"bad lookback", "/api/v1/query", url.Values{"query": {"up"}, "lookback_delta": {"x"}}, "lookback delta"},
		{"bad resolution", "/api/v1/query", url.Values{"query": {"up"}, "max_source_resolution": {"fine"}}, `invalid parameter "max_source_resolution"`},
		{"range negative resolution", "/api/v1/query_range", rng("max_source_resolution", "-5m"), `invalid parameter "max_source_resolution"`},
		{"range bad query", "/api/v1/query_range", rng("query", "rate(up)"), `invalid parameter "query"`},
		{"range bad start", "/api/v1/query_range", rng("start", "2023-13-01T00:00:00Z"), `invalid parameter "start"`},
		{"range missing end", "/api/v1/query_range", rng("end", ""), `invalid parameter "end"`},
		{"end before start", "/api/v1/query_range", rng("end", ts(t0-1)), "end timestamp must not be before start time"},
		{"bad step", "/api/v1/query_range", rng("step", "often"), `invalid parameter "step"`},
		{"zero step", "/api/v1/query_range", rng("step", "0"), "zero or negative query resolution step"},
		{"too many points", "/api/v1/query_range", rng("end", ts(t0+11001), "step", "1"), "exceeded maximum resolution of 11,000 points per timeseries"},
		{"series without match", "/api/v1/series", url.Values{"start": {ts(t0)}}, "no match[] parameter provided"},
		{"series empty matcher", "/api/v1/series", url.Values{"match[]": {`{job=""}`}}, "match[] must contain at least one non-empty matcher"},
		{"series bad matcher", "/api/v1/series", url.Values{"match[]": {`{job=`}}, `invalid parameter "match[]"`},
		{"series end before start", "/api/v1/series", url.Values{"match[]": {"up"}, "start": {ts(t0)}, "end": {ts(t0 - 1)}}, "end timestamp must not be before start time"},
		{"labels bad start", "/api/v1/labels", url.Values{"start": {"x"}}, `invalid parameter "start"`},
		{"label values bad match", "/api/v1/label/job/values", url.Values{"match[]": {"{"}}, `invalid parameter "match[]"`},
		{"exemplars bad query", "/api/v1/query_exemplars", url.Values{"query": {"up{"}}, "unexpected"},
	}
	for _, c := range cases {
		for _, method := range methods {
			t.Run(c.name+"/"+method, func(t *testing.T) {
				code, r, body := do(t, srv, method, c.path, c.params)
				require.Equal(t, http.StatusBadRequest, code, "body: %s", body)
				require.Equal(t, "error", r.Status)
				require.Equal(t, "bad_data", r.ErrorType)
				require.Contains(t, r.Error, c.errSubstr)
				require.Nil(t, r.Data)
			})
		}
	}

	// Exactly 11,000 steps is still allowed.
	r := ok(t, srv, http.MethodGet, "/api/v1/query_range", rng("query", "vector(1)", "end", ts(t0+11000), "step", "1"))
	require.Len(t, decodeMatrix(t, r)[0].Points, 11001)

	// Error envelope, byte for byte.
	_, _, body := do(t, srv, http.MethodGet, "/api/v1/series", nil)
	require.Equal(t, `{"status":"error","errorType":"bad_data","error":"no match[] parameter provided"}`, string(body))
}

func TestStorageErrors(t *testing.T) {
	cases := []struct {
		name     string
		err      error
		code     int
		errType  string
		endpoint string
	}{
		{"invalid options via query", fmt.Errorf("%w: no tier for step", tablets.ErrInvalidOptions), 400, "bad_data", "/api/v1/query"},
		{"invalid options via series", fmt.Errorf("%w: no tier for step", tablets.ErrInvalidOptions), 400, "bad_data", "/api/v1/series"},
		{"invalid matcher via series", fmt.Errorf("tsdb: %w: bad regexp", tablets.ErrInvalidMatcher), 400, "bad_data", "/api/v1/series"},
		{"other error via query", errors.New("table unreachable"), 422, "execution", "/api/v1/query"},
		{"other error via series", errors.New("table unreachable"), 422, "execution", "/api/v1/series"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := testStore()
			m.selectErr = c.err
			_, srv := newServer(t, m, nil)
			for _, method := range methods {
				code, r, body := do(t, srv, method, c.endpoint, url.Values{"query": {"up"}, "match[]": {"up"}})
				require.Equal(t, c.code, code, "body: %s", body)
				require.Equal(t, c.errType, r.ErrorType)
				require.Contains(t, r.Error, c.err.Error())
			}
		})
	}
}

func TestTooManySamples(t *testing.T) {
	_, srv := newServer(t, testStore(), &Options{MaxSamples: 100})
	code, r, body := do(t, srv, http.MethodGet, "/api/v1/query", url.Values{
		"query": {"http_requests_total[1h]"}, "time": {ts(t0 + duration)},
	})
	require.Equal(t, http.StatusUnprocessableEntity, code, "body: %s", body)
	require.Equal(t, "execution", r.ErrorType)
	// Prometheus' message, word for word (promql.ErrTooManySamples).
	require.Equal(t, "query processing would load too many samples into memory in query execution", r.Error)
	// A query within the limit still works on the same engine.
	r = ok(t, srv, http.MethodGet, "/api/v1/query", url.Values{"query": {"up[5m]"}, "time": {ts(t0 + duration)}})
	require.Contains(t, string(r.Data), `"resultType":"matrix"`)
}

func blockingStore() *memStore {
	m := testStore()
	m.block = make(chan struct{})
	m.entered = make(chan struct{}, 16)
	return m
}

// releaseOnCleanup unblocks m's Selects before the test server shuts down (cleanups run
// last-registered first, so call it after newServer).
func releaseOnCleanup(t *testing.T, m *memStore) func() {
	var once sync.Once
	release := func() { once.Do(func() { close(m.block) }) }
	t.Cleanup(release)
	return release
}

func TestTimeout(t *testing.T) {
	t.Run("timeout parameter", func(t *testing.T) {
		m := blockingStore()
		_, srv := newServer(t, m, nil)
		releaseOnCleanup(t, m)
		for _, path := range []string{"/api/v1/query", "/api/v1/query_range"} {
			code, r, body := do(t, srv, http.MethodPost, path, url.Values{
				"query": {"up"}, "timeout": {"0.02"}, "start": {ts(t0)}, "end": {ts(t0 + 60)}, "step": {"15"},
			})
			require.Equal(t, http.StatusServiceUnavailable, code, "body: %s", body)
			require.Equal(t, "timeout", r.ErrorType)
		}
	})
	t.Run("engine timeout option", func(t *testing.T) {
		m := blockingStore()
		_, srv := newServer(t, m, &Options{Timeout: 20 * time.Millisecond})
		releaseOnCleanup(t, m)
		code, r, body := do(t, srv, http.MethodGet, "/api/v1/query", url.Values{"query": {"up"}})
		require.Equal(t, http.StatusServiceUnavailable, code, "body: %s", body)
		require.Equal(t, "timeout", r.ErrorType)
	})
}

func TestCanceled(t *testing.T) {
	m := blockingStore()
	a, _ := newServer(t, m, nil)
	releaseOnCleanup(t, m)
	ctx, cancel := context.WithCancel(context.Background())
	req := httptest.NewRequestWithContext(ctx, http.MethodGet, "/api/v1/query?query=up", nil)
	rec := httptest.NewRecorder()
	done := make(chan struct{})
	go func() {
		a.Handler().ServeHTTP(rec, req)
		close(done)
	}()
	<-m.entered // the query is inside the storage when the client goes away
	cancel()
	<-done
	require.Equal(t, StatusClientClosedRequest, rec.Code)
	var r response
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &r))
	require.Equal(t, "canceled", r.ErrorType)
}

func TestMaxConcurrency(t *testing.T) {
	m := blockingStore()
	_, srv := newServer(t, m, &Options{MaxConcurrency: 1})
	release := releaseOnCleanup(t, m)
	first := make(chan int, 1)
	go func() {
		resp, err := srv.Client().Get(srv.URL + "/api/v1/query?query=up&time=" + ts(t0))
		if err != nil {
			first <- 0
			return
		}
		resp.Body.Close()
		first <- resp.StatusCode
	}()
	<-m.entered // the first query holds the only slot

	// The second waits for a slot until its timeout and never reaches the storage.
	code, r, body := do(t, srv, http.MethodGet, "/api/v1/query", url.Values{"query": {"up"}, "timeout": {"0.05"}})
	require.Equal(t, http.StatusServiceUnavailable, code, "body: %s", body)
	require.Equal(t, "timeout", r.ErrorType)
	require.Equal(t, "query timed out in query queue", r.Error)
	m.mu.Lock()
	require.Equal(t, 1, m.selects)
	m.mu.Unlock()

	release()
	require.Equal(t, http.StatusOK, <-first)
	// The slot is free again.
	m.mu.Lock()
	m.block = nil
	m.mu.Unlock()
	ok(t, srv, http.MethodGet, "/api/v1/query", url.Values{"query": {"up"}, "time": {ts(t0)}})
}

func TestLookbackDelta(t *testing.T) {
	_, srv := newServer(t, testStore(), &Options{LookbackDelta: time.Minute})
	count := func(params url.Values) int {
		return len(decodeVector(t, ok(t, srv, http.MethodGet, "/api/v1/query", params)))
	}
	// temperature{room="hall"} ends at t0+1200 without a staleness marker.
	hall := url.Values{"query": {`temperature{room="hall"}`}, "time": {ts(t0 + 1200 + 90)}}
	require.Equal(t, 0, count(hall)) // beyond the 1m lookback option
	hall.Set("lookback_delta", "2m")
	require.Equal(t, 1, count(hall)) // per-request override
}

func TestDefaultTimeIsNow(t *testing.T) {
	now := time.Unix(t0+100, 250*int64(time.Millisecond))
	_, srv := newServer(t, testStore(), &Options{Now: func() time.Time { return now }})
	v := decodeVector(t, ok(t, srv, http.MethodGet, "/api/v1/query", url.Values{"query": {"up"}}))
	require.Len(t, v, 1)
	require.Equal(t, 1700000100.25, v[0].T)
}

func TestStats(t *testing.T) {
	_, srv := newServer(t, testStore(), nil)
	r := ok(t, srv, http.MethodGet, "/api/v1/query", url.Values{"query": {"up"}, "time": {ts(t0)}, "stats": {"1"}})
	var d struct {
		Stats struct {
			Timings map[string]any `json:"timings"`
			Samples map[string]any `json:"samples"`
		} `json:"stats"`
	}
	require.NoError(t, json.Unmarshal(r.Data, &d))
	require.Contains(t, d.Stats.Timings, "evalTotalTime")
	require.EqualValues(t, 1, d.Stats.Samples["totalQueryableSamples"])
}

func TestGzip(t *testing.T) {
	_, srv := newServer(t, testStore(), nil)
	u := srv.URL + "/api/v1/query_range?" + url.Values{
		"query": {"http_requests_total"}, "start": {ts(t0)}, "end": {ts(t0 + duration)}, "step": {"15"},
	}.Encode()
	// Go's transport asks for gzip itself and transparently decompresses.
	resp, err := srv.Client().Get(u)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.True(t, resp.Uncompressed)
	var r response
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&r))
	require.Equal(t, "success", r.Status)
	require.Len(t, decodeMatrix(t, r), 3)

	// Without Accept-Encoding the body is plain.
	req, err := http.NewRequest(http.MethodGet, u, nil)
	require.NoError(t, err)
	req.Header.Set("Accept-Encoding", "identity")
	resp2, err := srv.Client().Do(req)
	require.NoError(t, err)
	defer resp2.Body.Close()
	require.Empty(t, resp2.Header.Get("Content-Encoding"))
}

func TestUnknownPathAndMethod(t *testing.T) {
	_, srv := newServer(t, testStore(), nil)
	resp, err := srv.Client().Get(srv.URL + "/api/v1/nope")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	req, err := http.NewRequest(http.MethodDelete, srv.URL+"/api/v1/series", nil)
	require.NoError(t, err)
	resp, err = srv.Client().Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
}

func TestNew(t *testing.T) {
	_, err := New(nil, nil)
	require.ErrorIs(t, err, tablets.ErrInvalidOptions)
	for _, bad := range []Options{{LookbackDelta: -1}, {MaxSamples: -1}, {Timeout: -1}, {MaxConcurrency: -1}, {MaxSeriesPerSelect: -1}, {NoStepSubqueryInterval: -1}} {
		_, err = New(testStore(), &bad)
		require.ErrorIs(t, err, tablets.ErrInvalidOptions, "%+v", bad)
	}
	a, err := New(testStore(), nil)
	require.NoError(t, err)
	require.NoError(t, a.Close())
	mux := http.NewServeMux()
	a.Register(mux)
	_, pattern := mux.Handler(httptest.NewRequest(http.MethodPost, "/api/v1/query_range", nil))
	require.Equal(t, "POST /api/v1/query_range", pattern)
	require.True(t, slices.Contains([]string{"GET /api/v1/label/{name}/values"},
		func() string {
			_, p := mux.Handler(httptest.NewRequest(http.MethodGet, "/api/v1/label/job/values", nil))
			return p
		}()))
}
