package remote

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/batch"
	"github.com/seed71701133/tablets/tsdb"
)

// staleNaN is Prometheus' staleness marker.
var staleNaN = math.Float64frombits(0x7ff0000000000002)

// fakeSink records what it is given. Keys are the label sets' String().
type fakeSink struct {
	mu       sync.Mutex
	sets     [][]tsdb.Labels
	batches  [][]tsdb.SeriesPoints
	hbatches [][]tsdb.SeriesHistograms
	commits  int // WriteSamples calls
	seriesFn func([]tsdb.Labels) error
	writeFn  func(context.Context, []tsdb.SeriesPoints) error
	histFn   func(context.Context, []tsdb.SeriesHistograms) error
}

func (f *fakeSink) SeriesOfMany(_ context.Context, sets []tsdb.Labels) ([]string, error) {
	f.mu.Lock()
	f.sets = append(f.sets, sets)
	fn := f.seriesFn
	f.mu.Unlock()
	if fn != nil {
		if err := fn(sets); err != nil {
			return nil, err
		}
	}
	keys := make([]string, len(sets))
	for i, ls := range sets {
		keys[i] = ls.String()
	}
	return keys, nil
}

// WriteSamples records the points and the histograms as separate batches (those it is
// given), and answers writeFn's error for the points and histFn's for the histograms: one
// of them as it is, both joined (their parts flattened), as one commit of both reports.
func (f *fakeSink) WriteSamples(ctx context.Context, points []tsdb.SeriesPoints, hists []tsdb.SeriesHistograms) error {
	f.mu.Lock()
	f.commits++
	if len(points) > 0 {
		f.batches = append(f.batches, points)
	}
	if len(hists) > 0 {
		f.hbatches = append(f.hbatches, hists)
	}
	writeFn, histFn := f.writeFn, f.histFn
	f.mu.Unlock()
	var pointsErr, histsErr error
	if writeFn != nil && len(points) > 0 {
		pointsErr = writeFn(ctx, points)
	}
	if histFn != nil && len(hists) > 0 {
		histsErr = histFn(ctx, hists)
	}
	if pointsErr == nil || histsErr == nil {
		return cmp.Or(pointsErr, histsErr)
	}
	var parts []error
	for _, err := range []error{pointsErr, histsErr} {
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			parts = append(parts, j.Unwrap()...)
		} else {
			parts = append(parts, err)
		}
	}
	return errors.Join(parts...)
}

// writtenHistograms returns every histogram sample written, by series key.
func (f *fakeSink) writtenHistograms() map[string][]tablets.HistogramPoint {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string][]tablets.HistogramPoint{}
	for _, b := range f.hbatches {
		for _, sh := range b {
			out[sh.Series] = append(out[sh.Series], sh.Histograms...)
		}
	}
	return out
}

// written returns every point written, by series key.
func (f *fakeSink) written() map[string][]tablets.Point {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string][]tablets.Point{}
	for _, b := range f.batches {
		for _, sp := range b {
			out[sp.Series] = append(out[sp.Series], sp.Points...)
		}
	}
	return out
}

func (f *fakeSink) calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.sets) + len(f.batches) + len(f.hbatches)
}

func v1Labels(pairs ...string) []prompb.Label {
	var out []prompb.Label
	for i := 0; i < len(pairs); i += 2 {
		out = append(out, prompb.Label{Name: pairs[i], Value: pairs[i+1]})
	}
	return out
}

func encodeV1(t testing.TB, req *prompb.WriteRequest) []byte {
	t.Helper()
	data, err := req.Marshal()
	require.NoError(t, err)
	return snappy.Encode(nil, data)
}

// v2Builder makes a 2.0 request, interning strings in its symbols table.
type v2Builder struct {
	req writev2.Request
	ref map[string]uint32
}

func newV2() *v2Builder {
	return &v2Builder{req: writev2.Request{Symbols: []string{""}}, ref: map[string]uint32{"": 0}}
}

func (b *v2Builder) sym(s string) uint32 {
	if r, ok := b.ref[s]; ok {
		return r
	}
	b.ref[s] = uint32(len(b.req.Symbols))
	b.req.Symbols = append(b.req.Symbols, s)
	return b.ref[s]
}

func (b *v2Builder) series(samples []writev2.Sample, pairs ...string) *writev2.TimeSeries {
	ts := writev2.TimeSeries{Samples: samples}
	for _, p := range pairs {
		ts.LabelsRefs = append(ts.LabelsRefs, b.sym(p))
	}
	b.req.Timeseries = append(b.req.Timeseries, ts)
	return &b.req.Timeseries[len(b.req.Timeseries)-1]
}

func (b *v2Builder) encode(t testing.TB) []byte {
	t.Helper()
	data, err := b.req.Marshal()
	require.NoError(t, err)
	return snappy.Encode(nil, data)
}

const ctV2 = "application/x-protobuf;proto=io.prometheus.write.v2.Request"

func post(t testing.TB, h http.Handler, contentType, encoding string, body []byte) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "/api/v1/write", bytes.NewReader(body))
	if contentType != "" {
		r.Header.Set("Content-Type", contentType)
	}
	if encoding != "" {
		r.Header.Set("Content-Encoding", encoding)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func newWrite(t testing.TB, sink Sink, opts *WriteOptions) *WriteHandler {
	t.Helper()
	h, err := NewWriteHandler(sink, opts)
	require.NoError(t, err)
	return h
}

func pt(ms int64, v float64) tablets.Point {
	return tablets.Point{Time: time.UnixMilli(ms).UTC(), Value: v}
}

// requireSamePoints compares points exactly: times, and values bit for bit.
func requireSamePoints(t testing.TB, want, got []tablets.Point) {
	t.Helper()
	require.Len(t, got, len(want))
	for i := range want {
		require.True(t, want[i].Time.Equal(got[i].Time), "point %d: time %v, want %v", i, got[i].Time, want[i].Time)
		require.Equal(t, math.Float64bits(want[i].Value), math.Float64bits(got[i].Value), "point %d: value bits", i)
	}
}

func TestWriteV1(t *testing.T) {
	sink := &fakeSink{}
	h := newWrite(t, sink, nil)
	req := &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
		{Labels: v1Labels("__name__", "up", "job", "a"), Samples: []prompb.Sample{{Timestamp: 1700000000000, Value: 1}, {Timestamp: 1700000015123, Value: staleNaN}}},
		// Labels out of order and an empty value: canonicalized as tsdb does.
		{Labels: v1Labels("job", "b", "__name__", "up", "empty", ""), Samples: []prompb.Sample{{Timestamp: 1700000000001, Value: 1e-300}}},
		// The same set as the first, again: one SeriesPoints.
		{Labels: v1Labels("__name__", "up", "job", "a"), Samples: []prompb.Sample{{Timestamp: 1700000030000, Value: 2.5}}},
	}}
	for _, ct := range []string{"application/x-protobuf", "", "application/x-protobuf;proto=prometheus.WriteRequest", "application/x-protobuf; proto=prometheus.WriteRequest"} {
		t.Run(ct, func(t *testing.T) {
			*sink = fakeSink{}
			w := post(t, h, ct, "snappy", encodeV1(t, req))
			require.Equal(t, http.StatusNoContent, w.Code, w.Body.String())
			assert.Empty(t, w.Header().Get(HeaderSamplesWritten), "1.0 answers carry no 2.0 headers")
			require.Len(t, sink.sets, 1)
			assert.Equal(t, []tsdb.Labels{
				tsdb.LabelsFromStrings("__name__", "up", "job", "a"),
				tsdb.LabelsFromStrings("__name__", "up", "job", "b"),
			}, sink.sets[0])
			require.Len(t, sink.batches, 1)
			require.Len(t, sink.batches[0], 2)
			got := sink.written()
			requireSamePoints(t, []tablets.Point{pt(1700000000000, 1), pt(1700000015123, staleNaN), pt(1700000030000, 2.5)}, got[`up{job="a"}`])
			requireSamePoints(t, []tablets.Point{pt(1700000000001, 1e-300)}, got[`up{job="b"}`])
		})
	}
}

func TestWriteV2(t *testing.T) {
	sink := &fakeSink{}
	h := newWrite(t, sink, nil)
	b := newV2()
	ts := b.series([]writev2.Sample{{Timestamp: 1700000000000, Value: 3}, {Timestamp: 1700000001000, Value: staleNaN}}, "__name__", "http_requests_total", "code", "200")
	ts.Exemplars = []writev2.Exemplar{{LabelsRefs: []uint32{b.sym("trace_id"), b.sym("abc")}, Value: 1, Timestamp: 1700000000000}}
	ts.Metadata = writev2.Metadata{Type: writev2.Metadata_METRIC_TYPE_COUNTER, HelpRef: b.sym("Requests."), UnitRef: 0}
	ts.CreatedTimestamp = 1690000000000
	b.series([]writev2.Sample{{Timestamp: 1700000000500, Value: 7}}, "__name__", "temp", "room", "kitchen")

	w := post(t, h, ctV2, "snappy", b.encode(t))
	require.Equal(t, http.StatusNoContent, w.Code, w.Body.String())
	assert.Equal(t, "3", w.Header().Get(HeaderSamplesWritten))
	assert.Equal(t, "0", w.Header().Get(HeaderHistogramsWritten))
	assert.Equal(t, "0", w.Header().Get(HeaderExemplarsWritten), "exemplars are dropped, and said so")
	got := sink.written()
	requireSamePoints(t, []tablets.Point{pt(1700000000000, 3), pt(1700000001000, staleNaN)}, got[`http_requests_total{code="200"}`])
	requireSamePoints(t, []tablets.Point{pt(1700000000500, 7)}, got[`temp{room="kitchen"}`])

	st := h.Stats()
	assert.Equal(t, uint64(3), st.SamplesReceived)
	assert.Equal(t, uint64(3), st.SamplesWritten)
	assert.Equal(t, uint64(1), st.ExemplarsReceived)
	assert.Equal(t, map[int]uint64{204: 1}, st.Requests)
	assert.Equal(t, int64(0), st.SamplesInFlight)
}

func TestWriteEmptyV2(t *testing.T) {
	sink := &fakeSink{}
	w := post(t, newWrite(t, sink, nil), ctV2, "snappy", newV2().encode(t))
	require.Equal(t, http.StatusNoContent, w.Code)
	assert.Equal(t, "0", w.Header().Get(HeaderSamplesWritten))
	assert.Zero(t, sink.calls(), "nothing to store: no request to the sink")
}

func TestWriteNaNPayloadsBitExact(t *testing.T) {
	sink := &fakeSink{}
	values := []float64{staleNaN, math.NaN(), math.Float64frombits(0x7ff8000000000001), math.Float64frombits(0xfff0000000000002), math.Inf(-1), math.SmallestNonzeroFloat64}
	var samples []prompb.Sample
	var want []tablets.Point
	for i, v := range values {
		samples = append(samples, prompb.Sample{Timestamp: int64(i), Value: v})
		want = append(want, pt(int64(i), v))
	}
	w := post(t, newWrite(t, sink, nil), "application/x-protobuf", "snappy",
		encodeV1(t, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{Labels: v1Labels("__name__", "x"), Samples: samples}}}))
	require.Equal(t, http.StatusNoContent, w.Code, w.Body.String())
	requireSamePoints(t, want, sink.written()["x{}"])
}

func TestWriteDuplicateTimestampsLastWins(t *testing.T) {
	sink := &fakeSink{}
	b := newV2()
	// In request order: t=2 a, t=1 b, t=2 c | t=1 d, t=3 e, t=3 staleNaN.
	b.series([]writev2.Sample{{Timestamp: 2000, Value: 1}, {Timestamp: 1000, Value: 2}, {Timestamp: 2000, Value: 3}}, "__name__", "m")
	b.series([]writev2.Sample{{Timestamp: 1000, Value: 4}, {Timestamp: 3000, Value: 5}, {Timestamp: 3000, Value: staleNaN}}, "__name__", "m")
	w := post(t, newWrite(t, sink, nil), ctV2, "snappy", b.encode(t))
	require.Equal(t, http.StatusNoContent, w.Code, w.Body.String())
	assert.Equal(t, "6", w.Header().Get(HeaderSamplesWritten), "every sample was accepted; the later ones replace the earlier")
	require.Len(t, sink.batches, 1)
	require.Len(t, sink.batches[0], 1, "one SeriesPoints for the label set")
	requireSamePoints(t, []tablets.Point{pt(1000, 4), pt(2000, 3), pt(3000, staleNaN)}, sink.batches[0][0].Points)
}

func TestWriteUnsupported(t *testing.T) {
	body := encodeV1(t, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{Labels: v1Labels("__name__", "x"), Samples: []prompb.Sample{{Timestamp: 1, Value: 1}}}}})
	for _, tc := range []struct{ ct, enc string }{
		{"application/json", "snappy"},
		{"text/plain", ""},
		{"application/x-protobuf;proto=io.prometheus.write.v3.Request", "snappy"},
		{"application/x-protobuf;proto=prometheus.ReadRequest", "snappy"},
		{"application/x-protobuf;;", "snappy"},
		{"application/x-protobuf", "gzip"},
		{"application/x-protobuf", "zstd"},
		{ctV2, "identity"},
	} {
		t.Run(tc.ct+"/"+tc.enc, func(t *testing.T) {
			sink := &fakeSink{}
			w := post(t, newWrite(t, sink, nil), tc.ct, tc.enc, body)
			assert.Equal(t, http.StatusUnsupportedMediaType, w.Code, w.Body.String())
			assert.Empty(t, w.Header().Get(HeaderSamplesWritten))
			assert.Zero(t, sink.calls())
		})
	}
	t.Run("GET", func(t *testing.T) {
		sink := &fakeSink{}
		w := httptest.NewRecorder()
		newWrite(t, sink, nil).ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/api/v1/write", nil))
		assert.Equal(t, http.StatusMethodNotAllowed, w.Code)
		assert.Zero(t, sink.calls())
	})
	t.Run("encoding case-insensitive", func(t *testing.T) {
		w := post(t, newWrite(t, &fakeSink{}, nil), "application/x-protobuf", "Snappy", body)
		assert.Equal(t, http.StatusNoContent, w.Code, w.Body.String())
	})
}

func TestWriteBadBodies(t *testing.T) {
	valid := &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{Labels: v1Labels("__name__", "x"), Samples: []prompb.Sample{{Timestamp: 1, Value: 1}, {Timestamp: 2, Value: 2}, {Timestamp: 3, Value: 3}}}}}
	badRefs := newV2()
	badRefs.req.Timeseries = []writev2.TimeSeries{{LabelsRefs: []uint32{0, 7}, Samples: []writev2.Sample{{Timestamp: 1, Value: 1}}}}
	oddRefs := newV2()
	oddRefs.series([]writev2.Sample{{Timestamp: 1, Value: 1}}, "__name__", "x", "job")
	for _, tc := range []struct {
		name   string
		ct     string
		body   []byte
		opts   *WriteOptions
		status int
	}{
		{"not snappy", "", []byte("hello, this is not snappy at all"), nil, 400},
		{"snappy framed format", "", append([]byte{0xff, 0x06, 0x00, 0x00, 's', 'N', 'a', 'P', 'p', 'Y'}, snappy.Encode(nil, []byte("x"))...), nil, 400},
		{"not protobuf", "", snappy.Encode(nil, []byte{0xff, 0xff, 0xff, 0xff}), nil, 400},
		{"v2 not protobuf", ctV2, snappy.Encode(nil, []byte{0x0a, 0x7f}), nil, 400},
		{"v2 refs outside symbols", ctV2, badRefs.encode(t), nil, 400},
		{"v2 odd refs", ctV2, oddRefs.encode(t), nil, 400},
		{"body too big", "", encodeV1(t, valid), &WriteOptions{MaxBodyBytes: 10}, 413},
		{"decoded too big", "", snappy.Encode(nil, make([]byte, 4096)), &WriteOptions{MaxBodyBytes: 1024}, 413},
		{"more samples than in flight", "", encodeV1(t, valid), &WriteOptions{MaxSamplesInFlight: 2}, 413},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sink := &fakeSink{}
			h := newWrite(t, sink, tc.opts)
			w := post(t, h, tc.ct, "snappy", tc.body)
			assert.Equal(t, tc.status, w.Code, w.Body.String())
			assert.NotEmpty(t, w.Body.String(), "the reason is in the body")
			assert.Zero(t, sink.calls())
			if tc.ct == ctV2 {
				assert.Equal(t, "0", w.Header().Get(HeaderSamplesWritten))
			}
			assert.Equal(t, map[int]uint64{tc.status: 1}, h.Stats().Requests)
		})
	}
}

func TestWriteInvalidSamplesPartial(t *testing.T) {
	sink := &fakeSink{}
	h := newWrite(t, sink, nil)
	b := newV2()
	b.series([]writev2.Sample{{Timestamp: 1000, Value: 1}, {Timestamp: -1, Value: 2}, {Timestamp: 253402300800000, Value: 3}}, "__name__", "good")
	b.series([]writev2.Sample{{Timestamp: 1000, Value: 1}}, "job", "no-name")
	b.series([]writev2.Sample{{Timestamp: 1000, Value: 1}, {Timestamp: 2000, Value: 1}}, "__name__", "dup", "a", "1", "a", "2")
	b.series([]writev2.Sample{{Timestamp: 1000, Value: 1}}, "__name__", "bad\xffutf8")
	w := post(t, h, ctV2, "snappy", b.encode(t))
	require.Equal(t, http.StatusBadRequest, w.Code)
	assert.Equal(t, "1", w.Header().Get(HeaderSamplesWritten))
	msg := w.Body.String()
	assert.Contains(t, msg, "stored 1 of 7 float samples; 6 samples rejected")
	assert.Contains(t, msg, "no metric name")
	assert.Contains(t, msg, "duplicate label name")
	assert.Contains(t, msg, "outside 1970..9999")
	requireSamePoints(t, []tablets.Point{pt(1000, 1)}, sink.written()["good{}"])
	assert.Len(t, sink.written(), 1)
	st := h.Stats()
	assert.Equal(t, uint64(7), st.SamplesReceived)
	assert.Equal(t, uint64(6), st.SamplesRejected)
	assert.Equal(t, uint64(1), st.SamplesWritten)
}

// TestWriteRejectedByTheDatabase: samples the database rejects (older than its retention,
// here) are named in a 400 and counted as rejected; the rest of the request is stored.
func TestWriteRejectedByTheDatabase(t *testing.T) {
	old := pt(1000, 1)
	sink := &fakeSink{writeFn: func(_ context.Context, b []tsdb.SeriesPoints) error {
		require.Len(t, b, 1)
		require.Len(t, b[0].Points, 2, "the server leaves retention to the database")
		return errors.Join(&tablets.WriteError{Series: b[0].Series, Failed: []tablets.Point{old}, Index: -1,
			Err: fmt.Errorf("%w: older than the raw retention", tsdb.ErrExpired)})
	}}
	h := newWrite(t, sink, nil)
	b := newV2()
	b.series([]writev2.Sample{{Timestamp: 1000, Value: 1}, {Timestamp: 2000, Value: 2}}, "__name__", "m")
	w := post(t, h, ctV2, "snappy", b.encode(t))
	require.Equal(t, http.StatusBadRequest, w.Code)
	assert.Contains(t, w.Body.String(), "stored 1 of 2 float samples; 1 samples rejected: series m{}: 1 samples: "+tsdb.ErrExpired.Error())
	assert.Equal(t, "1", w.Header().Get(HeaderSamplesWritten))
	st := h.Stats()
	assert.Equal(t, uint64(2), st.SamplesReceived)
	assert.Equal(t, uint64(1), st.SamplesRejected)
	assert.Equal(t, uint64(1), st.SamplesWritten)
}

// azureError is the error aztables returns for a reply with this status and code.
func azureError(status int, code string) error {
	req, _ := http.NewRequest(http.MethodPost, "https://account.table.core.windows.net/t", nil)
	return runtime.NewResponseError(&http.Response{StatusCode: status, Status: http.StatusText(status),
		Header: http.Header{"X-Ms-Error-Code": {code}}, Body: io.NopCloser(strings.NewReader("")), Request: req})
}

// writeErr is the error WriteMany gives for a series of TestWriteSinkErrors' request not
// stored: every point of it listed, as tsdb does.
func writeErr(series string, err error) error {
	points := map[string]int{`b{}`: 2, `c{}`: 1}[series]
	return &tablets.WriteError{Series: series, Failed: make([]tablets.Point, points), Index: -1, Err: err}
}

func TestWriteSinkErrors(t *testing.T) {
	netErr := &url.Error{Op: "Post", URL: "https://account", Err: &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}}
	for _, tc := range []struct {
		name      string
		seriesErr error
		writeErr  error
		status    int
		written   string
	}{
		{"SeriesOfMany ErrInvalidLabels", fmt.Errorf("tsdb: label set 0: %w: too big", tablets.ErrInvalidLabels), nil, 400, "0"},
		{"SeriesOfMany throttled", fmt.Errorf("tsdb: register label sets: %w", azureError(503, "ServerBusy")), nil, 503, "0"},
		{"WriteMany ErrExpired", fmt.Errorf("tsdb: write %q: %w: dropped", "a", tsdb.ErrExpired), nil, 400, "0"},
		{"WriteMany ErrInvalidTime", fmt.Errorf("tsdb: write: %w", tablets.ErrInvalidTime), nil, 400, "0"},
		{"ServerBusy 503", nil, errors.Join(writeErr(`a{}`, azureError(503, "ServerBusy"))), 503, "3"},
		{"429", nil, errors.Join(writeErr(`a{}`, azureError(429, ""))), 503, "3"},
		{"500", nil, errors.Join(writeErr(`a{}`, azureError(500, "InternalError"))), 503, "3"},
		{"403 auth", nil, errors.Join(writeErr(`a{}`, azureError(403, "AuthorizationFailure"))), 503, "3"},
		{"409 table being deleted", nil, errors.Join(writeErr(`a{}`, azureError(409, "TableBeingDeleted"))), 503, "3"},
		{"batch 202 holding ServerBusy", nil, errors.Join(&tablets.WriteError{Series: `a{}`, Code: "ServerBusy", Status: 503, Err: azureError(202, "")}), 503, "3"},
		{"batch 202 holding InvalidInput", nil, errors.Join(&tablets.WriteError{Series: `a{}`, Code: "InvalidInput", Status: 400, Index: 3, Err: azureError(202, "")}), 400, "3"},
		{"SeriesOfMany batch 202 holding ServerBusy", &batch.Error{Code: "ServerBusy", Status: 503, Err: azureError(202, "")}, nil, 503, "0"},
		{"azure 400", nil, errors.Join(writeErr(`a{}`, azureError(400, "PropertyValueTooLarge"))), 400, "3"},
		{"network", nil, errors.Join(writeErr(`a{}`, netErr)), 503, "3"},
		{"canceled", nil, errors.Join(writeErr(`a{}`, context.Canceled)), 503, "3"},
		{"deadline", nil, fmt.Errorf("tsdb: %w", context.DeadlineExceeded), 503, "0"},
		{"unknown", nil, errors.New("something odd"), 500, "0"},
		{"unknown in a WriteError", nil, errors.Join(writeErr(`a{}`, errors.New("odd"))), 500, "3"},
		{"retryable and permanent", nil, errors.Join(writeErr(`a{}`, azureError(503, "ServerBusy")), writeErr(`b{}`, azureError(400, "InvalidInput"))), 400, "1"},
		{"retryable and unknown", nil, errors.Join(writeErr(`a{}`, azureError(503, "ServerBusy")), writeErr(`b{}`, errors.New("odd"))), 500, "1"},
		{"flagging failed after storing", nil, errors.Join(fmt.Errorf("tsdb: write %q: the points are stored, but flagging failed: %w", "b{}", azureError(503, "ServerBusy"))), 503, "0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sink := &fakeSink{
				seriesFn: func([]tsdb.Labels) error { return tc.seriesErr },
				writeFn:  func(context.Context, []tsdb.SeriesPoints) error { return tc.writeErr },
			}
			h := newWrite(t, sink, nil)
			b := newV2()
			b.series([]writev2.Sample{{Timestamp: 1, Value: 1}, {Timestamp: 2, Value: 2}}, "__name__", "b")
			b.series([]writev2.Sample{{Timestamp: 1, Value: 1}}, "__name__", "c")
			w := post(t, h, ctV2, "snappy", b.encode(t))
			assert.Equal(t, tc.status, w.Code, w.Body.String())
			assert.NotEmpty(t, w.Body.String())
			// Series b{} has 2 samples and c{} 1: stored are those of the series no
			// *tablets.WriteError names (none known when a part names no series).
			assert.Equal(t, tc.written, w.Header().Get(HeaderSamplesWritten))
			assert.Equal(t, map[int]uint64{tc.status: 1}, h.Stats().Requests)
		})
	}
}

// orderWriter records whether the sink had returned when the status was written.
type orderWriter struct {
	*httptest.ResponseRecorder
	sinkReturned *atomic.Bool
	statusEarly  bool
}

func (o *orderWriter) WriteHeader(code int) {
	if !o.sinkReturned.Load() {
		o.statusEarly = true
	}
	o.ResponseRecorder.WriteHeader(code)
}

func TestWriteNoStatusBeforeSinkReturns(t *testing.T) {
	var returned atomic.Bool
	release := make(chan struct{})
	sink := &fakeSink{writeFn: func(context.Context, []tsdb.SeriesPoints) error {
		<-release
		returned.Store(true)
		return nil
	}}
	h := newWrite(t, sink, nil)
	ow := &orderWriter{ResponseRecorder: httptest.NewRecorder(), sinkReturned: &returned}
	body := encodeV1(t, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{Labels: v1Labels("__name__", "x"), Samples: []prompb.Sample{{Timestamp: 1, Value: 1}}}}})
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.ServeHTTP(ow, httptest.NewRequest(http.MethodPost, "/api/v1/write", bytes.NewReader(body)))
	}()
	close(release)
	<-done
	assert.False(t, ow.statusEarly, "a status was written before WriteMany returned")
	assert.Equal(t, http.StatusNoContent, ow.Code)
}

func TestWriteBoundedInFlight(t *testing.T) {
	const limit, perRequest, requests = 10, 4, 6
	var inFlight, maxInFlight atomic.Int64
	entered := make(chan struct{}, requests)
	release := make(chan struct{})
	sink := &fakeSink{writeFn: func(_ context.Context, b []tsdb.SeriesPoints) error {
		n := int64(0)
		for _, sp := range b {
			n += int64(len(sp.Points))
		}
		cur := inFlight.Add(n)
		for {
			m := maxInFlight.Load()
			if cur <= m || maxInFlight.CompareAndSwap(m, cur) {
				break
			}
		}
		entered <- struct{}{}
		<-release
		inFlight.Add(-n)
		return nil
	}}
	h := newWrite(t, sink, &WriteOptions{MaxSamplesInFlight: limit})
	codes := make(chan int, requests)
	for i := range requests {
		var samples []prompb.Sample
		for j := range perRequest {
			samples = append(samples, prompb.Sample{Timestamp: int64(j), Value: float64(i)})
		}
		body := encodeV1(t, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{Labels: v1Labels("__name__", fmt.Sprint("m", i)), Samples: samples}}})
		go func() { codes <- post(t, h, "", "snappy", body).Code }()
	}
	// Two requests (8 samples) fit; the other four wait.
	<-entered
	<-entered
	waitFor(t, func() bool { return h.Stats().RequestsWaiting == requests-2 })
	st := h.Stats()
	assert.Equal(t, int64(2*perRequest), st.SamplesInFlight)
	select {
	case <-entered:
		t.Fatal("a third request reached the sink past the limit")
	default:
	}
	// Let them through one at a time.
	for range requests - 2 {
		release <- struct{}{}
		<-entered
		assert.LessOrEqual(t, h.Stats().SamplesInFlight, int64(limit))
	}
	release <- struct{}{}
	release <- struct{}{}
	for range requests {
		assert.Equal(t, http.StatusNoContent, <-codes)
	}
	assert.LessOrEqual(t, maxInFlight.Load(), int64(limit))
	assert.Equal(t, int64(2*perRequest), maxInFlight.Load())
	assert.Equal(t, int64(0), h.Stats().SamplesInFlight)
	assert.Len(t, sink.written(), requests)
}

func TestWriteWaitEndsWithContext(t *testing.T) {
	entered := make(chan struct{})
	release := make(chan struct{})
	sink := &fakeSink{writeFn: func(context.Context, []tsdb.SeriesPoints) error {
		entered <- struct{}{}
		<-release
		return nil
	}}
	h := newWrite(t, sink, &WriteOptions{MaxSamplesInFlight: 3})
	body := func(name string) []byte {
		return encodeV1(t, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{Labels: v1Labels("__name__", name), Samples: []prompb.Sample{{Timestamp: 1, Value: 1}, {Timestamp: 2, Value: 2}}}}})
	}
	first := make(chan int, 1)
	go func() { first <- post(t, h, "", "snappy", body("a")).Code }()
	<-entered

	ctx, cancel := context.WithCancel(context.Background())
	second := make(chan int, 1)
	go func() {
		r := httptest.NewRequestWithContext(ctx, http.MethodPost, "/api/v1/write", bytes.NewReader(body("b")))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		second <- w.Code
	}()
	waitFor(t, func() bool { return h.Stats().RequestsWaiting == 1 })
	cancel()
	assert.Equal(t, http.StatusServiceUnavailable, <-second)
	assert.Equal(t, 0, h.Stats().RequestsWaiting)
	assert.Equal(t, int64(2), h.Stats().SamplesInFlight, "the canceled request took nothing")
	close(release)
	assert.Equal(t, http.StatusNoContent, <-first)
	assert.Equal(t, int64(0), h.Stats().SamplesInFlight)
	assert.NotContains(t, sink.written(), "b{}")
}

// waitFor polls cond until it holds (synchronization with goroutines, not a timing claim).
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition never held")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestNewWriteHandlerOptions(t *testing.T) {
	_, err := NewWriteHandler(nil, nil)
	assert.ErrorIs(t, err, tablets.ErrInvalidOptions)
	_, err = NewWriteHandler(&fakeSink{}, &WriteOptions{MaxSamplesInFlight: -1})
	assert.ErrorIs(t, err, tablets.ErrInvalidOptions)
	h, err := NewWriteHandler(&fakeSink{}, nil)
	require.NoError(t, err)
	assert.Equal(t, int64(DefaultMaxSamplesInFlight), h.Stats().MaxSamplesInFlight)
}

// The gate serves waiters in arrival order: a later, smaller request that would fit waits
// behind a larger one, and units released go to the front first. In a bubble, each step is
// observed once every goroutine is blocked, so the order is exact.
func TestGateFIFO(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGate(10)
		require.NoError(t, g.acquire(context.Background(), 8))
		var mu sync.Mutex
		var order []string
		got := func() []string { mu.Lock(); defer mu.Unlock(); return slices.Clone(order) }
		acquire := func(name string, n int64) {
			go func() {
				if g.acquire(context.Background(), n) == nil {
					mu.Lock()
					order = append(order, name)
					mu.Unlock()
				}
			}()
			synctest.Wait() // waiting (or served) before the next one arrives
		}
		acquire("big", 9)
		acquire("small", 2) // 2 units would fit beside the 8 held, but the big request is ahead
		acquire("third", 9)
		used, waiting := g.state()
		assert.Equal(t, int64(8), used)
		assert.Equal(t, 3, waiting)
		assert.Empty(t, got(), "a later, smaller request overtook a waiting one")

		// Each release serves exactly one waiter, the first: the next does not fit beside it.
		g.release(8)
		synctest.Wait()
		assert.Equal(t, []string{"big"}, got())
		g.release(9)
		synctest.Wait()
		assert.Equal(t, []string{"big", "small"}, got())
		g.release(2)
		synctest.Wait()
		assert.Equal(t, []string{"big", "small", "third"}, got())
		used, waiting = g.state()
		assert.Equal(t, int64(9), used)
		assert.Zero(t, waiting)
	})
}

// A waiter that gives up leaves the queue, and the one behind it is served.
func TestGateCancelledWaiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGate(10)
		require.NoError(t, g.acquire(context.Background(), 6))
		ctx, cancel := context.WithCancel(context.Background())
		bigErr := make(chan error, 1)
		go func() { bigErr <- g.acquire(ctx, 9) }()
		synctest.Wait()
		small := make(chan error, 1)
		go func() { small <- g.acquire(context.Background(), 4) }()
		synctest.Wait()
		_, waiting := g.state()
		require.Equal(t, 2, waiting, "the small request waits behind the big one")
		cancel()
		require.ErrorIs(t, <-bigErr, context.Canceled)
		require.NoError(t, <-small)
		used, waiting := g.state()
		assert.Equal(t, int64(10), used)
		assert.Zero(t, waiting)
	})
}
