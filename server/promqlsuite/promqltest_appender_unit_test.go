package promqlsuite_test

import (
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets/server/remote"
)

// recordingHandler keeps the remote writes it gets, decoded, and answers status (204 when
// zero) with the 2.0 headers counting what the request held (samples: written instead,
// when set).
type recordingHandler struct {
	t       *testing.T
	status  int
	written *int

	requests []*http.Request
	v2       []writev2.Request
	v1       []prompb.WriteRequest
}

func (h *recordingHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.requests = append(h.requests, r)
	compressed, err := io.ReadAll(r.Body)
	require.NoError(h.t, err)
	raw, err := snappy.Decode(nil, compressed)
	require.NoError(h.t, err)
	status := h.status
	if status == 0 {
		status = http.StatusNoContent
	}
	if r.Header.Get("Content-Type") == "application/x-protobuf" {
		var req prompb.WriteRequest
		require.NoError(h.t, req.Unmarshal(raw))
		h.v1 = append(h.v1, req)
		w.WriteHeader(status)
		return
	}
	var req writev2.Request
	require.NoError(h.t, req.Unmarshal(raw))
	h.v2 = append(h.v2, req)
	samples, histograms := 0, 0
	for _, ts := range req.Timeseries {
		samples += len(ts.Samples)
		histograms += len(ts.Histograms)
	}
	if h.written != nil {
		samples = *h.written
	}
	w.Header().Set(remote.HeaderSamplesWritten, strconv.Itoa(samples))
	w.Header().Set(remote.HeaderHistogramsWritten, strconv.Itoa(histograms))
	w.WriteHeader(status)
	_, _ = w.Write([]byte("the handler's answer"))
}

// What TestRemoteWriteAppender appends: a float series, an integer histogram series, a
// custom-bucket float histogram series.
var (
	appFloats = labels.FromStrings("__name__", "up", "job", "a")
	appInts   = labels.FromStrings("__name__", "latency", "job", "a")
	appNHCB   = labels.FromStrings("__name__", "latency_nhcb", "job", "a")
	appH      = &histogram.Histogram{CounterResetHint: histogram.GaugeType, Schema: 1, ZeroThreshold: 0.001, ZeroCount: 1, Count: 4, Sum: 2.5,
		PositiveSpans: []histogram.Span{{Offset: -1, Length: 2}}, PositiveBuckets: []int64{1, 1},
		NegativeSpans: []histogram.Span{{Offset: 0, Length: 1}}, NegativeBuckets: []int64{0}}
	appFH = &histogram.FloatHistogram{Schema: histogram.CustomBucketsSchema, Count: 3, Sum: 7,
		PositiveSpans: []histogram.Span{{Offset: 0, Length: 2}}, PositiveBuckets: []float64{1, 2}, CustomValues: []float64{1, 10}}
)

// appendFloat and appendHistogram append and require no error.
func appendFloat(t *testing.T, app *remoteWriteAppender, l labels.Labels, ts int64, v float64) {
	t.Helper()
	_, err := app.Append(0, l, ts, v)
	require.NoError(t, err)
}

func appendHistogram(t *testing.T, app *remoteWriteAppender, l labels.Labels, ts int64, h *histogram.Histogram, fh *histogram.FloatHistogram) {
	t.Helper()
	_, err := app.AppendHistogram(0, l, ts, h, fh)
	require.NoError(t, err)
}

// The suite's appender sends each Commit as one remote write 2.0 request holding every
// series appended (floats, integer and float histograms, custom bounds), or as parts cut by
// time, or as 1.0, nothing on Rollback, and fails unless the handler answers 204 having
// written everything.
func TestRemoteWriteAppender(t *testing.T) {
	var b labels.ScratchBuilder
	t.Run("one 2.0 request a Commit", func(t *testing.T) {
		h := &recordingHandler{t: t}
		var sentSamples, sentHistograms int
		app := newRemoteWriteAppender(h, func(samples, histograms int, _ time.Duration) {
			sentSamples, sentHistograms = sentSamples+samples, sentHistograms+histograms
		})
		appendFloat(t, app, appFloats, 1000, 1)
		appendHistogram(t, app, appInts, 1000, appH, nil)
		appendFloat(t, app, appFloats, 2000, 2)
		appendHistogram(t, app, appNHCB, 2000, nil, appFH)
		appendHistogram(t, app, appFloats, 3000, appH, nil) // a series turning into a histogram
		require.Empty(t, h.requests, "nothing is sent before Commit")
		require.NoError(t, app.Commit())
		require.Len(t, h.requests, 1, "one request a Commit")
		require.Equal(t, "application/x-protobuf;proto=io.prometheus.write.v2.Request", h.requests[0].Header.Get("Content-Type"))
		require.Equal(t, "snappy", h.requests[0].Header.Get("Content-Encoding"))
		require.Equal(t, "/api/v1/write", h.requests[0].URL.Path)
		req := h.v2[0]
		require.Equal(t, "", req.Symbols[0], "a 2.0 symbol table starts with the empty string")
		require.Len(t, req.Timeseries, 3)
		require.Equal(t, appFloats, req.Timeseries[0].ToLabels(&b, req.Symbols))
		require.Equal(t, []writev2.Sample{{Value: 1, Timestamp: 1000}, {Value: 2, Timestamp: 2000}}, req.Timeseries[0].Samples)
		require.Equal(t, []writev2.Histogram{writev2.FromIntHistogram(3000, appH)}, req.Timeseries[0].Histograms)
		require.Equal(t, appInts, req.Timeseries[1].ToLabels(&b, req.Symbols))
		require.Equal(t, appH, req.Timeseries[1].Histograms[0].ToIntHistogram(), "an integer histogram, hint included")
		require.Equal(t, appNHCB, req.Timeseries[2].ToLabels(&b, req.Symbols))
		require.Equal(t, []writev2.Histogram{writev2.FromFloatHistogram(2000, appFH)}, req.Timeseries[2].Histograms)
		require.True(t, req.Timeseries[2].Histograms[0].IsFloatHistogram())
		require.Equal(t, []float64{1, 10}, req.Timeseries[2].Histograms[0].CustomValues, "custom bounds kept")
		require.Equal(t, []int{2, 3}, []int{sentSamples, sentHistograms})
		require.ErrorIs(t, app.Commit(), errAppenderDone)
		_, err := app.Append(0, appFloats, 4000, 4)
		require.ErrorIs(t, err, errAppenderDone)
	})

	t.Run("nothing on Rollback or an empty Commit", func(t *testing.T) {
		h := &recordingHandler{t: t}
		app := newRemoteWriteAppender(h, nil)
		appendFloat(t, app, appFloats, 4000, 4)
		require.NoError(t, app.Rollback())
		require.ErrorIs(t, app.Commit(), errAppenderDone)
		require.NoError(t, newRemoteWriteAppender(h, nil).Commit())
		require.Empty(t, h.requests)
	})

	t.Run("failures", func(t *testing.T) {
		h := &recordingHandler{t: t, status: http.StatusBadRequest}
		app := newRemoteWriteAppender(h, nil)
		appendFloat(t, app, appFloats, 4000, 4)
		require.ErrorContains(t, app.Commit(), "400 the handler's answer")

		none := 0
		h = &recordingHandler{t: t, written: &none}
		app = newRemoteWriteAppender(h, nil)
		appendFloat(t, app, appFloats, 4000, 4)
		require.ErrorContains(t, app.Commit(), remote.HeaderSamplesWritten, "a 204 that wrote less is a failure")

		_, err := newRemoteWriteAppender(h, nil).Append(0, labels.EmptyLabels(), 1, 1)
		require.ErrorIs(t, err, errInvalidAppend)
		_, err = newRemoteWriteAppender(h, nil).AppendHistogram(0, appFloats, 1, nil, nil)
		require.ErrorIs(t, err, errInvalidAppend)
	})

	t.Run("parts by time", func(t *testing.T) {
		h := &recordingHandler{t: t}
		app := newRemoteWriteAppender(h, nil)
		app.parts = 2
		appendFloat(t, app, appFloats, 1000, 1)
		appendHistogram(t, app, appInts, 2000, appH, nil)
		appendFloat(t, app, appFloats, 3000, 3)
		appendHistogram(t, app, appInts, 3000, appH, nil)
		require.NoError(t, app.Commit())
		require.Len(t, h.v2, 2, "two requests")
		first, second := h.v2[0], h.v2[1]
		require.Len(t, first.Timeseries, 1)
		require.Equal(t, appFloats, first.Timeseries[0].ToLabels(&b, first.Symbols))
		require.Equal(t, []writev2.Sample{{Value: 1, Timestamp: 1000}}, first.Timeseries[0].Samples)
		require.Len(t, second.Timeseries, 2)
		require.Equal(t, appFloats, second.Timeseries[0].ToLabels(&b, second.Symbols))
		require.Equal(t, []writev2.Sample{{Value: 3, Timestamp: 3000}}, second.Timeseries[0].Samples)
		require.Equal(t, appInts, second.Timeseries[1].ToLabels(&b, second.Symbols))
		require.Equal(t, []writev2.Histogram{writev2.FromIntHistogram(2000, appH), writev2.FromIntHistogram(3000, appH)}, second.Timeseries[1].Histograms)
	})

	t.Run("1.0", func(t *testing.T) {
		h := &recordingHandler{t: t}
		app := newRemoteWriteAppender(h, nil)
		app.v1 = true
		appendFloat(t, app, appFloats, 1000, 1)
		appendHistogram(t, app, appNHCB, 2000, nil, appFH)
		appendHistogram(t, app, appInts, 2000, appH, nil)
		require.NoError(t, app.Commit())
		require.Len(t, h.requests, 1)
		require.Equal(t, "application/x-protobuf", h.requests[0].Header.Get("Content-Type"))
		require.Equal(t, "0.1.0", h.requests[0].Header.Get("X-Prometheus-Remote-Write-Version"))
		require.Equal(t, "snappy", h.requests[0].Header.Get("Content-Encoding"))
		req := h.v1[0]
		require.Len(t, req.Timeseries, 3)
		require.Equal(t, appFloats, req.Timeseries[0].ToLabels(&b, nil))
		require.Equal(t, []prompb.Sample{{Value: 1, Timestamp: 1000}}, req.Timeseries[0].Samples)
		require.Equal(t, appNHCB, req.Timeseries[1].ToLabels(&b, nil))
		require.Equal(t, []float64{1, 10}, req.Timeseries[1].Histograms[0].CustomValues, "custom bounds kept")
		require.True(t, appFH.Equals(req.Timeseries[1].Histograms[0].ToFloatHistogram()), "the float histogram as appended")
		require.Equal(t, appH, req.Timeseries[2].Histograms[0].ToIntHistogram())
	})
}
