package remote

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/server/promconv"
	"github.com/seed71701133/tablets/tsdb"
)

// Histogram samples of every kind a sender writes: integer and float, the smallest and the
// largest exponential schema, custom buckets (NHCB), both sides and the zero bucket, every
// counter reset hint, and the staleness markers.
var (
	hInt = &tablets.Histogram{CounterResetHint: tablets.NotCounterReset, Schema: 3, ZeroThreshold: 1e-128, ZeroCount: 2,
		Count: 12, Sum: 123.5,
		PositiveSpans: []tablets.HistogramSpan{{Offset: -2, Length: 2}, {Offset: 1, Length: 1}}, PositiveBuckets: []int64{1, 2, -1},
		NegativeSpans: []tablets.HistogramSpan{{Offset: 0, Length: 1}}, NegativeBuckets: []int64{4}}
	hMinSchema = &tablets.Histogram{CounterResetHint: tablets.CounterReset, Schema: tablets.MinSchema, Count: 1, Sum: 3,
		PositiveSpans: []tablets.HistogramSpan{{Offset: 0, Length: 1}}, PositiveBuckets: []int64{1}}
	hMaxSchema = &tablets.Histogram{Schema: tablets.MaxSchema, ZeroThreshold: 0.001, Count: 7, Sum: -2.25,
		NegativeSpans: []tablets.HistogramSpan{{Offset: 1000, Length: 2}}, NegativeBuckets: []int64{3, 1}}
	hFloat = &tablets.FloatHistogram{CounterResetHint: tablets.GaugeType, Schema: 0, ZeroThreshold: 1e-9, ZeroCount: 0.5,
		Count: 4.75, Sum: -1e300,
		PositiveSpans: []tablets.HistogramSpan{{Offset: 1, Length: 3}}, PositiveBuckets: []float64{0.25, 2, 1},
		NegativeSpans: []tablets.HistogramSpan{{Offset: -5, Length: 1}}, NegativeBuckets: []float64{1}}
	hCustom = &tablets.Histogram{Schema: tablets.CustomBucketsSchema, Count: 9, Sum: 4.5,
		PositiveSpans: []tablets.HistogramSpan{{Offset: 0, Length: 5}}, PositiveBuckets: []int64{1, 1, 0, -1, 2},
		CustomValues: []float64{0.1, 0.5, 1, 5}}
	hCustomFloat = &tablets.FloatHistogram{CounterResetHint: tablets.NotCounterReset, Schema: tablets.CustomBucketsSchema, Count: 4, Sum: 2,
		PositiveSpans: []tablets.HistogramSpan{{Offset: 0, Length: 1}, {Offset: 1, Length: 1}}, PositiveBuckets: []float64{1.5, 2.5},
		CustomValues: []float64{-1, 2}}
	hStale      = &tablets.Histogram{Sum: staleNaN}
	hStaleFloat = &tablets.FloatHistogram{Sum: staleNaN}
)

// hp makes a histogram point at ms.
func hp(ms int64, h any) tablets.HistogramPoint {
	p := tablets.HistogramPoint{Time: time.UnixMilli(ms).UTC()}
	switch h := h.(type) {
	case *tablets.Histogram:
		p.H = h
	case *tablets.FloatHistogram:
		p.FH = h
	}
	return p
}

// toV1 is the 1.0 protobuf of histogram points (through promconv, independently of the
// handler's decoding).
func toV1(ps ...tablets.HistogramPoint) []prompb.Histogram {
	out := make([]prompb.Histogram, len(ps))
	for i, p := range ps {
		out[i] = promconv.ToPrompb(p.Time.UnixMilli(), p)
	}
	return out
}

// toV2 is the 2.0 protobuf of histogram points.
func toV2(ps ...tablets.HistogramPoint) []writev2.Histogram {
	out := make([]writev2.Histogram, len(ps))
	for i, p := range ps {
		if p.H != nil {
			out[i] = writev2.FromIntHistogram(p.Time.UnixMilli(), promconv.ToProm(p.H))
		} else {
			out[i] = writev2.FromFloatHistogram(p.Time.UnixMilli(), promconv.FloatToProm(p.FH))
		}
	}
	return out
}

// requireSameHistograms compares histogram points exactly, Sum bit for bit (NaN included).
func requireSameHistograms(t testing.TB, want, got []tablets.HistogramPoint) {
	t.Helper()
	require.Len(t, got, len(want))
	for i := range want {
		w, g := want[i], got[i]
		require.True(t, w.Time.Equal(g.Time), "histogram %d: time %v, want %v", i, g.Time, w.Time)
		require.Equal(t, w.H == nil, g.H == nil, "histogram %d: integer or float", i)
		if w.H != nil {
			require.Equal(t, math.Float64bits(w.H.Sum), math.Float64bits(g.H.Sum), "histogram %d: Sum bits", i)
			wc, gc := *w.H, *g.H
			wc.Sum, gc.Sum = 0, 0
			require.Equal(t, wc, gc, "histogram %d", i)
		} else {
			require.Equal(t, math.Float64bits(w.FH.Sum), math.Float64bits(g.FH.Sum), "histogram %d: Sum bits", i)
			wc, gc := *w.FH, *g.FH
			wc.Sum, gc.Sum = 0, 0
			require.Equal(t, wc, gc, "histogram %d", i)
		}
	}
}

// histRequest is a request in both versions: series "lat" with histograms only, "mixed" with
// floats and histograms at other times (in two TimeSeries, the second repeating a time: the
// later wins), and "f" with floats only.
func histRequest(t testing.TB, version string) (contentType string, body []byte) {
	lat := []tablets.HistogramPoint{hp(1000, hInt), hp(2000, hMinSchema), hp(3000, hMaxSchema), hp(4000, hFloat),
		hp(5000, hCustom), hp(6000, hCustomFloat), hp(7000, hStale), hp(8000, hStaleFloat)}
	if version == "v1" {
		return "", encodeV1(t, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
			{Labels: v1Labels("__name__", "lat", "job", "a"), Histograms: toV1(lat...)},
			{Labels: v1Labels("__name__", "mixed"), Samples: []prompb.Sample{{Timestamp: 1000, Value: 1}}, Histograms: toV1(hp(2000, hInt), hp(3000, hCustom))},
			{Labels: v1Labels("__name__", "f"), Samples: []prompb.Sample{{Timestamp: 1000, Value: 5}}},
			{Labels: v1Labels("__name__", "mixed"), Samples: []prompb.Sample{{Timestamp: 4000, Value: 2}}, Histograms: toV1(hp(2000, hFloat))},
		}})
	}
	b := newV2()
	b.series(nil, "__name__", "lat", "job", "a").Histograms = toV2(lat...)
	b.series([]writev2.Sample{{Timestamp: 1000, Value: 1}}, "__name__", "mixed").Histograms = toV2(hp(2000, hInt), hp(3000, hCustom))
	b.series([]writev2.Sample{{Timestamp: 1000, Value: 5}}, "__name__", "f")
	b.series([]writev2.Sample{{Timestamp: 4000, Value: 2}}, "__name__", "mixed").Histograms = toV2(hp(2000, hFloat))
	return ctV2, b.encode(t)
}

func TestWriteHistograms(t *testing.T) {
	for _, version := range []string{"v1", "v2"} {
		t.Run(version, func(t *testing.T) {
			sink := &fakeSink{}
			h := newWrite(t, sink, nil)
			ct, body := histRequest(t, version)
			w := post(t, h, ct, "snappy", body)
			require.Equal(t, http.StatusNoContent, w.Code, w.Body.String())
			if version == "v2" {
				assert.Equal(t, "3", w.Header().Get(HeaderSamplesWritten))
				assert.Equal(t, "11", w.Header().Get(HeaderHistogramsWritten), "duplicates count as written, as for floats")
			}
			// One registration of every label set, one commit of both kinds.
			require.Len(t, sink.sets, 1)
			assert.Len(t, sink.sets[0], 3)
			assert.Equal(t, 1, sink.commits)
			require.Len(t, sink.batches, 1)
			require.Len(t, sink.hbatches, 1)
			assert.Len(t, sink.hbatches[0], 2, "series with histograms only")

			hs := sink.writtenHistograms()
			requireSameHistograms(t, []tablets.HistogramPoint{hp(1000, hInt), hp(2000, hMinSchema), hp(3000, hMaxSchema), hp(4000, hFloat),
				hp(5000, hCustom), hp(6000, hCustomFloat), hp(7000, hStale), hp(8000, hStaleFloat)}, hs[`lat{job="a"}`])
			requireSameHistograms(t, []tablets.HistogramPoint{hp(2000, hFloat), hp(3000, hCustom)}, hs[`mixed{}`])
			assert.NotContains(t, hs, `f{}`)
			fs := sink.written()
			requireSamePoints(t, []tablets.Point{pt(1000, 1), pt(4000, 2)}, fs[`mixed{}`])
			requireSamePoints(t, []tablets.Point{pt(1000, 5)}, fs[`f{}`])
			assert.NotContains(t, fs, `lat{job="a"}`)

			st := h.Stats()
			assert.Equal(t, uint64(11), st.HistogramsReceived)
			assert.Equal(t, uint64(11), st.HistogramsWritten)
			assert.Equal(t, uint64(0), st.HistogramsRejected)
			assert.Equal(t, uint64(3), st.SamplesWritten)
		})
	}
}

// TestWriteHistogramsBadInput: each invalid histogram makes a 400 naming its series and the
// reason, while the float samples and the valid histograms of the same request are stored.
func TestWriteHistogramsBadInput(t *testing.T) {
	for _, tc := range []struct {
		name   string
		bad    any
		reason string
	}{
		{"spans not matching the buckets", &tablets.Histogram{Schema: 0, Count: 2,
			PositiveSpans: []tablets.HistogramSpan{{Offset: 0, Length: 3}}, PositiveBuckets: []int64{1, 0}}, "positive spans hold 3 buckets, 2 given"},
		{"schema out of range", &tablets.Histogram{Schema: 9, Count: 1,
			PositiveSpans: []tablets.HistogramSpan{{Offset: 0, Length: 1}}, PositiveBuckets: []int64{1}}, "schema 9 is not in -4..8"},
		{"schema below range", &tablets.FloatHistogram{Schema: -5, Count: 1}, "schema -5 is not in -4..8"},
		{"custom values not sorted", &tablets.Histogram{Schema: tablets.CustomBucketsSchema, Count: 2,
			PositiveSpans: []tablets.HistogramSpan{{Offset: 0, Length: 2}}, PositiveBuckets: []int64{1, 0},
			CustomValues: []float64{1, 0.5}}, "custom bounds are not strictly increasing"},
		{"negative count in an integer histogram", &tablets.Histogram{Schema: 1, Count: 1,
			PositiveSpans: []tablets.HistogramSpan{{Offset: 0, Length: 2}}, PositiveBuckets: []int64{2, -3}}, "positive bucket 2 has a negative count -1"},
		{"NaN count", &tablets.FloatHistogram{Schema: 1, Count: math.NaN(),
			PositiveSpans: []tablets.HistogramSpan{{Offset: 0, Length: 1}}, PositiveBuckets: []float64{1}}, "a NaN count"},
	} {
		for _, version := range []string{"v1", "v2"} {
			t.Run(tc.name+"/"+version, func(t *testing.T) {
				sink := &fakeSink{}
				h := newWrite(t, sink, nil)
				good := []tablets.HistogramPoint{hp(1000, hInt), hp(3000, hCustom)}
				bad := hp(2000, tc.bad)
				var body []byte
				ct := ""
				if version == "v1" {
					body = encodeV1(t, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
						{Labels: v1Labels("__name__", "lat", "job", "a"), Samples: []prompb.Sample{{Timestamp: 500, Value: 1}}, Histograms: toV1(good[0], bad, good[1])},
						{Labels: v1Labels("__name__", "f"), Samples: []prompb.Sample{{Timestamp: 500, Value: 2}}},
					}})
				} else {
					ct = ctV2
					b := newV2()
					b.series([]writev2.Sample{{Timestamp: 500, Value: 1}}, "__name__", "lat", "job", "a").Histograms = toV2(good[0], bad, good[1])
					b.series([]writev2.Sample{{Timestamp: 500, Value: 2}}, "__name__", "f")
					body = b.encode(t)
				}
				w := post(t, h, ct, "snappy", body)
				require.Equal(t, http.StatusBadRequest, w.Code)
				msg := w.Body.String()
				assert.Contains(t, msg, "stored 2 of 2 float samples and 2 of 3 histogram samples; 1 histogram samples rejected: ")
				assert.Contains(t, msg, `series lat{job="a"}: histogram at 2000 ms: `+tablets.ErrInvalidHistogram.Error()+": "+tc.reason)
				if version == "v2" {
					assert.Equal(t, "2", w.Header().Get(HeaderSamplesWritten))
					assert.Equal(t, "2", w.Header().Get(HeaderHistogramsWritten))
				}
				requireSameHistograms(t, good, sink.writtenHistograms()[`lat{job="a"}`])
				requireSamePoints(t, []tablets.Point{pt(500, 1)}, sink.written()[`lat{job="a"}`])
				requireSamePoints(t, []tablets.Point{pt(500, 2)}, sink.written()[`f{}`])
				st := h.Stats()
				assert.Equal(t, uint64(3), st.HistogramsReceived)
				assert.Equal(t, uint64(1), st.HistogramsRejected)
				assert.Equal(t, uint64(2), st.HistogramsWritten)
			})
		}
	}
}

// TestWriteHistogramsInvalidSeries: histograms of a label set without a metric name, or at a
// time outside 1970..9999, are rejected like float samples.
func TestWriteHistogramsInvalidSeries(t *testing.T) {
	sink := &fakeSink{}
	h := newWrite(t, sink, nil)
	b := newV2()
	b.series(nil, "job", "no-name").Histograms = toV2(hp(1000, hInt), hp(2000, hInt))
	b.series(nil, "__name__", "lat").Histograms = append(toV2(hp(1000, hInt)), writev2.FromIntHistogram(-1, promconv.ToProm(hInt)))
	w := post(t, h, ctV2, "snappy", b.encode(t))
	require.Equal(t, http.StatusBadRequest, w.Code)
	msg := w.Body.String()
	assert.Contains(t, msg, "stored 0 of 0 float samples and 1 of 4 histogram samples; 3 histogram samples rejected: ")
	assert.Contains(t, msg, "no metric name")
	assert.Contains(t, msg, "timestamp -1 ms is outside 1970..9999")
	assert.Equal(t, "1", w.Header().Get(HeaderHistogramsWritten))
	requireSameHistograms(t, []tablets.HistogramPoint{hp(1000, hInt)}, sink.writtenHistograms()[`lat{}`])
	assert.Len(t, sink.sets[0], 1)
}

// TestWriteHistogramAtAFloatsTime: a histogram at the time of a float sample of its series is
// rejected (Prometheus' receiver stores the float and rejects the histogram as a duplicate
// sample for the timestamp); the float is stored.
func TestWriteHistogramAtAFloatsTime(t *testing.T) {
	sink := &fakeSink{}
	h := newWrite(t, sink, nil)
	body := encodeV1(t, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
		{Labels: v1Labels("__name__", "m"), Samples: []prompb.Sample{{Timestamp: 1000, Value: 1}}, Histograms: toV1(hp(2000, hInt), hp(3000, hInt))},
		{Labels: v1Labels("__name__", "m"), Samples: []prompb.Sample{{Timestamp: 3000, Value: 3}}, Histograms: toV1(hp(1000, hFloat))},
	}})
	w := post(t, h, "", "snappy", body)
	require.Equal(t, http.StatusBadRequest, w.Code)
	msg := w.Body.String()
	assert.Contains(t, msg, "stored 2 of 2 float samples and 1 of 3 histogram samples; 2 histogram samples rejected: ")
	assert.Contains(t, msg, "series m{}: a histogram and a float sample at 1000 ms")
	assert.Contains(t, msg, "series m{}: a histogram and a float sample at 3000 ms")
	requireSamePoints(t, []tablets.Point{pt(1000, 1), pt(3000, 3)}, sink.written()[`m{}`])
	requireSameHistograms(t, []tablets.HistogramPoint{hp(2000, hInt)}, sink.writtenHistograms()[`m{}`])
}

// histWriteErr is the error WriteSamples gives for a series not stored: count samples.
func histWriteErr(series string, count int, err error) error {
	return &tablets.WriteError{Series: series, FailedHistograms: make([]tablets.HistogramPoint, count), Index: -1, Err: err}
}

// TestWriteHistogramSinkErrors: the errors of a commit's histograms decide the answer as its
// points' do, and the written headers count what each kind stored.
func TestWriteHistogramSinkErrors(t *testing.T) {
	for _, tc := range []struct {
		name              string
		histErr, floatErr error
		status            int
		samples, hists    string
		body              string
	}{
		{"throttled", errors.Join(histWriteErr(`lat{}`, 2, azureError(503, "ServerBusy"))), nil, 503, "2", "1",
			"storing 3 histogram samples: 2 not stored"},
		{"expired", errors.Join(histWriteErr(`lat{}`, 1, fmt.Errorf("%w: older than the raw retention", tsdb.ErrExpired))), nil, 400, "2", "2",
			"stored 2 of 2 float samples and 2 of 3 histogram samples; 1 histogram samples rejected: series lat{}: 1 histogram samples: " + tsdb.ErrExpired.Error()},
		{"invalid in the database", errors.Join(histWriteErr(`lat{}`, 1, fmt.Errorf("%w: odd", tablets.ErrInvalidHistogram))), nil, 400, "2", "2",
			"1 histogram samples rejected"},
		// One commit of both kinds: an error naming no series stored neither.
		{"unknown", errors.New("odd"), nil, 500, "0", "0", "storing 3 histogram samples: odd"},
		{"both throttled", errors.Join(histWriteErr(`lat{}`, 3, azureError(503, "ServerBusy"))), errors.Join(writeErr(`b{}`, azureError(503, "ServerBusy"))), 503, "0", "0",
			"storing 2 samples: 2 not stored"},
		{"floats permanent, histograms throttled", errors.Join(histWriteErr(`lat{}`, 3, azureError(503, "ServerBusy"))), errors.Join(writeErr(`b{}`, azureError(400, "InvalidInput"))), 400, "0", "0",
			"storing 3 histogram samples: 3 not stored"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sink := &fakeSink{
				histFn:  func(context.Context, []tsdb.SeriesHistograms) error { return tc.histErr },
				writeFn: func(context.Context, []tsdb.SeriesPoints) error { return tc.floatErr },
			}
			h := newWrite(t, sink, nil)
			b := newV2()
			b.series([]writev2.Sample{{Timestamp: 1, Value: 1}, {Timestamp: 2, Value: 2}}, "__name__", "b")
			b.series(nil, "__name__", "lat").Histograms = toV2(hp(1, hInt), hp(2, hFloat), hp(3, hCustom))
			w := post(t, h, ctV2, "snappy", b.encode(t))
			assert.Equal(t, tc.status, w.Code, w.Body.String())
			assert.Contains(t, w.Body.String(), tc.body)
			assert.Equal(t, tc.samples, w.Header().Get(HeaderSamplesWritten))
			assert.Equal(t, tc.hists, w.Header().Get(HeaderHistogramsWritten))
		})
	}
}

// TestWriteHistogramWeight: a histogram counts against MaxSamplesInFlight by its size: a
// 20-bucket histogram (one span) weighs 8 + ceil(21/4) = 14 float samples.
func TestWriteHistogramWeight(t *testing.T) {
	buckets := make([]int64, 20)
	buckets[0] = 1
	big := &tablets.Histogram{Schema: 2, Count: 20, Sum: 1, PositiveSpans: []tablets.HistogramSpan{{Offset: 0, Length: 20}}, PositiveBuckets: buckets}
	body := encodeV1(t, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
		{Labels: v1Labels("__name__", "lat"), Samples: []prompb.Sample{{Timestamp: 1, Value: 1}}, Histograms: toV1(hp(2, big))},
	}})
	w := post(t, newWrite(t, &fakeSink{}, &WriteOptions{MaxSamplesInFlight: 14}), "", "snappy", body)
	require.Equal(t, http.StatusRequestEntityTooLarge, w.Code, w.Body.String())
	assert.Contains(t, w.Body.String(), "holds 15 samples (histograms weighted), over the limit of 14")

	var h *WriteHandler
	var inFlight int64
	sink := &fakeSink{histFn: func(context.Context, []tsdb.SeriesHistograms) error {
		inFlight = h.Stats().SamplesInFlight
		return nil
	}}
	h = newWrite(t, sink, &WriteOptions{MaxSamplesInFlight: 15})
	w = post(t, h, "", "snappy", body)
	require.Equal(t, http.StatusNoContent, w.Code, w.Body.String())
	assert.Equal(t, int64(15), inFlight, "held while stored")
	assert.Equal(t, int64(0), h.Stats().SamplesInFlight)
	assert.Equal(t, 14, histogramWeight(20, 1, 0))
	assert.Equal(t, 8, histogramWeight(0, 0, 0), "a staleness marker")
}

func TestWriteTimeSeries(t *testing.T) {
	t.Run("stored", func(t *testing.T) {
		sink := &fakeSink{}
		h := newWrite(t, sink, nil)
		n, err := h.WriteTimeSeries(context.Background(), []prompb.TimeSeries{
			{Labels: v1Labels("__name__", "lat"), Samples: []prompb.Sample{{Timestamp: 1, Value: 1}}, Histograms: toV1(hp(2, hCustom), hp(3, hStale))},
			{Labels: v1Labels("__name__", "g"), Samples: []prompb.Sample{{Timestamp: 1, Value: 7}, {Timestamp: 2, Value: 8}}},
		})
		require.NoError(t, err)
		assert.Equal(t, Written{Samples: 3, Histograms: 2}, n)
		requireSameHistograms(t, []tablets.HistogramPoint{hp(2, hCustom), hp(3, hStale)}, sink.writtenHistograms()[`lat{}`])
		requireSamePoints(t, []tablets.Point{pt(1, 7), pt(2, 8)}, sink.written()[`g{}`])
		assert.Empty(t, h.Stats().Requests, "not an HTTP request of its own")
	})
	t.Run("bad histogram", func(t *testing.T) {
		sink := &fakeSink{}
		n, err := newWrite(t, sink, nil).WriteTimeSeries(context.Background(), []prompb.TimeSeries{
			{Labels: v1Labels("__name__", "lat"), Samples: []prompb.Sample{{Timestamp: 1, Value: 1}}, Histograms: toV1(hp(2, &tablets.FloatHistogram{Count: math.NaN()}))},
		})
		var se *StatusError
		require.ErrorAs(t, err, &se)
		assert.Equal(t, http.StatusBadRequest, se.Status)
		assert.Contains(t, se.Msg, `series lat{}: histogram at 2 ms`)
		assert.Equal(t, Written{Samples: 1}, n)
		requireSamePoints(t, []tablets.Point{pt(1, 1)}, sink.written()[`lat{}`])
	})
	t.Run("throttled", func(t *testing.T) {
		sink := &fakeSink{histFn: func(context.Context, []tsdb.SeriesHistograms) error {
			return errors.Join(histWriteErr(`lat{}`, 1, azureError(503, "ServerBusy")))
		}}
		n, err := newWrite(t, sink, nil).WriteTimeSeries(context.Background(), []prompb.TimeSeries{
			{Labels: v1Labels("__name__", "lat"), Histograms: toV1(hp(2, hInt))},
		})
		var se *StatusError
		require.ErrorAs(t, err, &se)
		assert.Equal(t, http.StatusServiceUnavailable, se.Status)
		assert.Equal(t, Written{}, n)
	})
	t.Run("too many", func(t *testing.T) {
		_, err := newWrite(t, &fakeSink{}, &WriteOptions{MaxSamplesInFlight: 7}).WriteTimeSeries(context.Background(), []prompb.TimeSeries{
			{Labels: v1Labels("__name__", "lat"), Histograms: toV1(hp(2, hStale))},
		})
		var se *StatusError
		require.ErrorAs(t, err, &se)
		assert.Equal(t, http.StatusRequestEntityTooLarge, se.Status)
	})
	t.Run("context ended while waiting", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		h := newWrite(t, &fakeSink{}, &WriteOptions{MaxSamplesInFlight: 8})
		require.NoError(t, h.gate.acquire(context.Background(), 1))
		_, err := h.WriteTimeSeries(ctx, []prompb.TimeSeries{{Labels: v1Labels("__name__", "lat"), Histograms: toV1(hp(2, hStale))}})
		var se *StatusError
		require.ErrorAs(t, err, &se)
		assert.Equal(t, http.StatusServiceUnavailable, se.Status)
	})
}
