package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/util/annotations"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
)

func TestAppendFloat(t *testing.T) {
	for f, want := range map[float64]string{
		0:                 `"0"`,
		1:                 `"1"`,
		-2.5:              `"-2.5"`,
		0.1:               `"0.1"`,
		1e-6:              `"0.000001"`,
		9.99e-7:           `"9.99e-07"`,
		-1e-7:             `"-1e-07"`,
		1e20:              `"100000000000000000000"`,
		1e21:              `"1e+21"`,
		math.Inf(1):       `"+Inf"`,
		math.Inf(-1):      `"-Inf"`,
		math.NaN():        `"NaN"`,
		staleNaN:          `"NaN"`,
		1.0 / 3:           `"0.3333333333333333"`,
		math.MaxFloat64:   `"1.7976931348623157e+308"`,
		123456789.0123456: `"123456789.0123456"`,
	} {
		require.Equal(t, want, string(appendFloat(nil, f)), "%v", f)
	}
}

func TestAppendTimestamp(t *testing.T) {
	for ms, want := range map[int64]string{
		0:             "0",
		1000:          "1",
		1500:          "1.500",
		1_050:         "1.050",
		1_005:         "1.005",
		-1500:         "-1.500",
		-5:            "-0.005",
		1700000000123: "1700000000.123",
	} {
		require.Equal(t, want, string(appendTimestamp(nil, ms)), "%d", ms)
		// Whatever the digits, it is the JSON number of seconds.
		var f float64
		require.NoError(t, json.Unmarshal(appendTimestamp(nil, ms), &f))
		require.Equal(t, float64(ms)/1000, f)
	}
}

func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{"", "plain", `quo"te`, `back\\slash`, "tab\t", "<html>&", "é ü 日本", "\u2028", "bad\xffutf8", "ctl\x01"} {
		want, err := json.Marshal(s)
		require.NoError(t, err)
		require.Equal(t, string(want), string(appendString(nil, s)), "%q", s)
	}
}

func TestAppendLabels(t *testing.T) {
	got := appendLabels(nil, labels.FromStrings("b", "2", "a", `x"y`, "__name__", "m"))
	require.Equal(t, `{"__name__":"m","a":"x\"y","b":"2"}`, string(got))
	require.Equal(t, `{}`, string(appendLabels(nil, labels.EmptyLabels())))
	// As Prometheus' codec writes labels: no HTML escaping, bytes from 0x80 as they are.
	got = appendLabels(nil, labels.FromStrings("a", "<&>\\\n\x01\u2028\xff"))
	require.Equal(t, `{"a":"<&>\\\n\u0001`+"\u2028\xff"+`"}`, string(got))
}

func TestAppendHistogram(t *testing.T) {
	// Schema 0: positive bucket i spans (2^(i-1), 2^i]; the zero bucket is [-0.001, 0.001].
	h := &histogram.FloatHistogram{
		Schema:          0,
		Count:           10,
		Sum:             12.5,
		ZeroThreshold:   0.001,
		ZeroCount:       2,
		PositiveSpans:   []histogram.Span{{Offset: 0, Length: 3}},
		PositiveBuckets: []float64{3, 0, 5}, // the empty bucket is left out
	}
	want := `{"count":"10","sum":"12.5","buckets":[[3,"-0.001","0.001","2"],[0,"0.5","1","3"],[0,"2","4","5"]]}`
	require.Equal(t, want, string(appendHistogram(nil, h)))

	v := promql.Vector{{Metric: labels.FromStrings("a", "b"), T: 1500, H: h}}
	b, err := appendResult(nil, v)
	require.NoError(t, err)
	require.Equal(t, `[{"metric":{"a":"b"},"histogram":[1.500,`+want+`]}]`, string(b))

	m := promql.Matrix{{
		Metric:     labels.FromStrings("a", "b"),
		Floats:     []promql.FPoint{{T: 1000, F: 1}},
		Histograms: []promql.HPoint{{T: 2000, H: &histogram.FloatHistogram{Count: 0, Sum: 0}}},
	}}
	b, err = appendResult(nil, m)
	require.NoError(t, err)
	require.Equal(t, `[{"metric":{"a":"b"},"values":[[1,"1"]],"histograms":[[2,{"count":"0","sum":"0"}]]}]`, string(b))
}

// The memo of written floats writes every value as appendFloat does, whether it wrote it
// before or not, and once it is full.
func TestFloatMemo(t *testing.T) {
	m := &floatMemo{text: map[uint64]string{}}
	values := []float64{0, math.Copysign(0, -1), 1, -1, 0.001, -0.001, 1e-7, 1e21, 123456.789,
		math.Inf(1), math.Inf(-1), math.NaN(), math.Float64frombits(0x7ff8000000000001), math.SmallestNonzeroFloat64, math.MaxFloat64}
	for i := -40; i <= 40; i++ { // schema 3's boundaries
		values = append(values, math.Exp2(float64(i)/8))
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 2 * maxFloatMemo {
		values = append(values, math.Float64frombits(r.Uint64()))
	}
	for round := range 2 {
		for _, f := range values {
			require.Equal(t, string(appendFloat([]byte("x"), f)), string(m.appendFloat([]byte("x"), f)), "%v (%x), round %d", f, math.Float64bits(f), round)
		}
	}
	require.LessOrEqual(t, len(m.text), maxFloatMemo)
}

func TestEnvelope(t *testing.T) {
	// <, > and & are escaped as encoding/json (and Prometheus' jsoniter setup) does.
	require.Equal(t, `{"status":"success","data":[],"warnings":["w\u003c1\u003e"],"infos":["i"]}`,
		string(appendEnvelopeSuccess(nil, []byte("[]"), []string{"w<1>"}, []string{"i"})))
	// Decoding gives back the original strings.
	var r struct{ Warnings []string }
	require.NoError(t, json.Unmarshal(appendEnvelopeSuccess(nil, []byte("[]"), []string{"w<1>"}, nil), &r))
	require.Equal(t, []string{"w<1>"}, r.Warnings)
	require.Equal(t, `{"status":"error","errorType":"timeout","error":"it \"took\" long"}`,
		string(appendEnvelopeError(nil, ErrorTimeout, `it "took" long`)))
}

func TestParseTime(t *testing.T) {
	for in, want := range map[string]time.Time{
		"1700000000":                  time.Unix(1700000000, 0),
		"1700000000.123":              time.Unix(1700000000, 123e6),
		"1700000000.1236":             time.Unix(1700000000, 124e6), // rounded to ms
		"-1.5":                        time.Unix(-1, -5e8),
		"2023-11-14T22:13:20Z":        time.Unix(1700000000, 0),
		"2023-11-14T23:13:20.5+01:00": time.Unix(1700000000, 5e8),
		promMinTimeFormatted:          promMinTime,
		promMaxTimeFormatted:          promMaxTime,
	} {
		got, err := parseTime(in)
		require.NoError(t, err, in)
		require.True(t, want.Equal(got), "%s: got %v want %v", in, got, want)
	}
	for _, in := range []string{"", "now", "2023-11-14", "1e400"} {
		_, err := parseTime(in)
		require.Error(t, err, in)
	}
}

func TestStoreRange(t *testing.T) {
	day := time.Date(2025, 5, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name             string
		start, end       time.Time
		wantFrom, wantTo time.Time
		wantOK           bool
	}{
		{"inside", day, day.Add(time.Hour), day, day.Add(time.Hour), true},
		{"Prometheus' bounds", promMinTime, promMaxTime, tablets.MinTime, tablets.MaxTime, true},
		{"from before 1970", time.Unix(-10, 0), day, tablets.MinTime, day, true},
		{"one instant, the first", tablets.MinTime, tablets.MinTime, tablets.MinTime, tablets.MinTime, true},
		{"all before 1970", time.Unix(-10, 0), time.Unix(-1, 0), tablets.MinTime, time.Unix(-1, 0), false},
		{"all after the last time", tablets.MaxTime.Add(1), promMaxTime, tablets.MaxTime.Add(1), tablets.MaxTime, false},
	} {
		from, to, ok := storeRange(c.start, c.end)
		if !from.Equal(c.wantFrom) || !to.Equal(c.wantTo) || ok != c.wantOK {
			t.Errorf("%s: got [%v, %v] %v, want [%v, %v] %v", c.name, from, to, ok, c.wantFrom, c.wantTo, c.wantOK)
		}
	}
}

// rangeRecorder is a storage.Queryable that records the range of each Querier.
type rangeRecorder struct {
	storage.Queryable
	mu     sync.Mutex
	ranges [][2]int64
}

func (r *rangeRecorder) Querier(mint, maxt int64) (storage.Querier, error) {
	r.mu.Lock()
	r.ranges = append(r.ranges, [2]int64{mint, maxt})
	r.mu.Unlock()
	return r.Queryable.Querier(mint, maxt)
}

func (r *rangeRecorder) take() [][2]int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	got := r.ranges
	r.ranges = nil
	return got
}

// TestMetadataRangeInStores checks that the metadata endpoints ask the storage for the
// stores' range, whether start and end are absent or Prometheus' bounds as Grafana sends
// them, and answer a range outside it without asking.
func TestMetadataRangeInStores(t *testing.T) {
	rec := &rangeRecorder{Queryable: testStore()}
	a, err := New(rec, &Options{Now: func() time.Time { return time.Unix(t0+duration, 0) }})
	require.NoError(t, err)
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(func() {
		srv.Close()
		require.NoError(t, a.Close())
	})
	stores := [2]int64{tablets.MinTime.UnixMilli(), tablets.MaxTime.UnixMilli()}
	paths := []string{"/api/v1/series", "/api/v1/labels", "/api/v1/label/job/values"}
	for _, params := range []url.Values{
		{"match[]": {"up"}},
		{"match[]": {"up"}, "start": {promMinTimeFormatted}, "end": {promMaxTimeFormatted}},
	} {
		for _, path := range paths {
			r := ok(t, srv, http.MethodGet, path, params)
			require.NotEqual(t, "[]", string(r.Data), "%s %v", path, params)
			require.Equal(t, [][2]int64{stores}, rec.take(), "%s %v", path, params)
		}
	}
	before1970 := url.Values{"match[]": {"up"}, "start": {"-100"}, "end": {"-1"}}
	for _, path := range paths {
		r := ok(t, srv, http.MethodGet, path, before1970)
		require.Equal(t, "[]", string(r.Data), path)
		require.Empty(t, rec.take(), "%s: no Querier for a range before 1970", path)
	}
}

func TestParseDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"15":     15 * time.Second,
		"0.5":    500 * time.Millisecond,
		"1m":     time.Minute,
		"1h30m":  90 * time.Minute,
		"1d":     24 * time.Hour,
		"250ms":  250 * time.Millisecond,
		"-1":     -time.Second,
		"1.5e+1": 15 * time.Second,
	} {
		got, err := parseDuration(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, in := range []string{"", "1x", "1e20", "m"} {
		_, err := parseDuration(in)
		require.Error(t, err, in)
	}
}

func TestAcceptsGzip(t *testing.T) {
	for h, want := range map[string]bool{
		"":                   false,
		"gzip":               true,
		"gzip, deflate, br":  true,
		"deflate, GZIP;q=.5": true,
		"br;q=1.0, gzip;q=0": false,
		"gzip;q=0.000":       false,
		"*":                  true,
		"identity":           false,
	} {
		require.Equal(t, want, acceptsGzip(h), "%q", h)
	}
}

func TestClassifyAndStatus(t *testing.T) {
	cases := []struct {
		err    error
		typ    ErrorType
		status int
	}{
		{fmt.Errorf("expanding series: %w", fmt.Errorf("%w: bad step", tablets.ErrInvalidOptions)), ErrorBadData, 400},
		{promql.ErrStorage{Err: fmt.Errorf("%w: x", tablets.ErrInvalidOptions)}, ErrorBadData, 400},
		{promql.ErrStorage{Err: fmt.Errorf("tsdb: %w: bad regexp", tablets.ErrInvalidMatcher)}, ErrorBadData, 400},
		{promql.ErrStorage{Err: fmt.Errorf("tsdb: %w: empty name", tablets.ErrInvalidLabels)}, ErrorBadData, 400},
		{fmt.Errorf("expanding series: %w", fmt.Errorf("%w: n 0", tablets.ErrInvalidLimit)), ErrorBadData, 400},
		{promql.ErrStorage{Err: errors.New("disk")}, ErrorInternal, 500},
		{promql.ErrQueryCanceled("eval"), ErrorCanceled, 499},
		{promql.ErrQueryTimeout("eval"), ErrorTimeout, 503},
		{promql.ErrTooManySamples("eval"), ErrorExec, 422},
		{fmt.Errorf("expanding series: %w", context.Canceled), ErrorCanceled, 499},
		{fmt.Errorf("expanding series: %w", context.DeadlineExceeded), ErrorTimeout, 503},
		{errors.New("anything else"), ErrorExec, 422},
		// The account unreachable, throttled or failing: unavailable, not the query's fault.
		{fmt.Errorf("expanding series: %w", refusedDial(t)), ErrorUnavailable, 503},
		{promql.ErrStorage{Err: fmt.Errorf("tsdb: %w", refusedDial(t))}, ErrorUnavailable, 503},
		{fmt.Errorf("expanding series: %w", fmt.Errorf("%w: ServerBusy", tablets.ErrThrottled)), ErrorUnavailable, 503},
		{fmt.Errorf("expanding series: %w", &azcore.ResponseError{StatusCode: 500, ErrorCode: "InternalError"}), ErrorUnavailable, 503},
		{fmt.Errorf("expanding series: %w", &azcore.ResponseError{StatusCode: 400, ErrorCode: "InvalidInput"}), ErrorExec, 422},
	}
	for _, c := range cases {
		e := classify(c.err)
		require.Equal(t, c.typ, e.typ, "%v", c.err)
		require.Equal(t, c.status, httpStatus(e.typ), "%v", c.err)
	}
	require.Nil(t, classify(nil))
	require.Equal(t, 503, httpStatus(ErrorUnavailable))
	require.Equal(t, 404, httpStatus(ErrorNotFound))
	require.Equal(t, 500, httpStatus("something"))
}

func TestMalformedForm(t *testing.T) {
	a, err := New(testStore(), nil)
	require.NoError(t, err)
	defer a.Close()
	req := httptest.NewRequest(http.MethodPost, "/api/v1/query", strings.NewReader("query=%zz"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	rec := httptest.NewRecorder()
	a.Handler().ServeHTTP(rec, req)
	require.Equal(t, http.StatusBadRequest, rec.Code)
	var r response
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &r))
	require.Equal(t, "bad_data", r.ErrorType)
	require.Contains(t, r.Error, "error parsing form values")
}

// A bad limit keeps Prometheus' message and matches tablets.ErrInvalidLimit.
func TestParseLimit(t *testing.T) {
	for in, want := range map[string]int{"": 0, "0": 0, "7": 7} {
		got, err := parseLimit(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for in, msg := range map[string]string{"-1": "limit must be non-negative", "x": `strconv.Atoi: parsing "x": invalid syntax`} {
		_, err := parseLimit(in)
		require.ErrorIs(t, err, tablets.ErrInvalidLimit, in)
		require.EqualError(t, err, msg, in)
	}
}

// refusedDial is the error of a connection to a port nothing listens on, as a client of an
// account that is down gets it.
func refusedDial(t *testing.T) error {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	c, err := net.Dial("tcp", addr)
	if err == nil {
		c.Close()
	}
	require.Error(t, err, "a closed port accepted a connection")
	return err
}

// TestRequestProfileLabels: an API request runs with its path and query as pprof labels
// (a POST's form too; a series request's first selector), the query cut at
// profileLabelMax: what /debug/pprof's profiles split the CPU by.
func TestRequestProfileLabels(t *testing.T) {
	long := "sum(rate(x[5m]))" + strings.Repeat(" + 1", 100)
	post := httptest.NewRequest(http.MethodPost, "/api/v1/query_range", strings.NewReader(url.Values{"query": {long}}.Encode()))
	post.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for _, tc := range []struct {
		req       *http.Request
		wantQuery string
	}{
		{httptest.NewRequest(http.MethodGet, "/api/v1/query?query=up", nil), "up"},
		{post, long[:profileLabelMax]},
		{httptest.NewRequest(http.MethodGet, "/api/v1/series?match[]=up{job=%22a%22}", nil), `up{job="a"}`},
	} {
		var path, query string
		h := (&API{}).wrap(func(r *http.Request) ([]byte, annotations.Annotations, *apiError) {
			path, _ = pprof.Label(r.Context(), "path")
			query, _ = pprof.Label(r.Context(), "query")
			return []byte(`[]`), nil, nil
		})
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, tc.req)
		if rec.Code != http.StatusOK || path != tc.req.URL.Path || query != tc.wantQuery {
			t.Errorf("%s: status %d, labels path %q query %q, want %q and %q", tc.req.URL, rec.Code, path, query, tc.req.URL.Path, tc.wantQuery)
		}
	}
}
