package otlp_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/prompb"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/seed71701133/tablets/server/remote"
)

// The real SDK exporter's gauges, counters, up-down counters, exponential and explicit
// histograms arrive translated as Prometheus 3 translates them by default.
func TestSDKExportTranslatesAsPrometheus(t *testing.T) {
	rec := &recorder{}
	_, srv := serve(t, rec, nil)
	sdk := newSDK(t, srv.URL, false, true, "http.server.duration")
	meter := sdk.provider.Meter("shop")
	ctx := context.Background()

	gauge, err := meter.Float64Gauge("process.memory.usage", metric.WithUnit("By"))
	require.NoError(t, err)
	gauge.Record(ctx, 1234.5, metric.WithAttributes(attribute.String("pool", "heap")))
	counter, err := meter.Int64Counter("http.requests", metric.WithUnit("{request}"))
	require.NoError(t, err)
	get, post := metric.WithAttributes(attribute.String("http.method", "GET")), metric.WithAttributes(attribute.String("http.method", "POST"))
	counter.Add(ctx, 3, get)
	counter.Add(ctx, 2, get)
	counter.Add(ctx, 7, post)
	queue, err := meter.Int64UpDownCounter("queue.length")
	require.NoError(t, err)
	queue.Add(ctx, 5)
	queue.Add(ctx, -2)
	latency, err := meter.Float64Histogram("http.server.duration", metric.WithUnit("s"))
	require.NoError(t, err)
	for _, v := range observations {
		latency.Record(ctx, v)
	}
	db, err := meter.Float64Histogram("db.latency", metric.WithUnit("ms"), metric.WithExplicitBucketBoundaries(1, 10, 100))
	require.NoError(t, err)
	for _, v := range []float64{0.5, 5, 5, 50, 500} {
		db.Record(ctx, v)
	}

	before := time.Now().UnixMilli()
	require.NoError(t, sdk.export(t))
	after := time.Now().UnixMilli()
	require.Equal(t, 1, rec.calls)

	require.Equal(t, []string{
		"db_latency_milliseconds_bucket", "db_latency_milliseconds_count", "db_latency_milliseconds_sum",
		"http_requests_total", "http_server_duration_seconds", "process_memory_usage_bytes", "queue_length", "target_info",
	}, rec.names())
	target := "instance=pod-1,job=shop/checkout"
	floats := func(name, labels string) []prompb.Sample {
		t.Helper()
		s, ok := rec.byName(name)[labels]
		require.True(t, ok, "no series %s{%s} among %v", name, labels, rec.byName(name))
		require.Empty(t, s.Histograms)
		for _, p := range s.Samples {
			require.GreaterOrEqual(t, p.Timestamp, before)
			require.LessOrEqual(t, p.Timestamp, after)
		}
		return s.Samples
	}
	value := func(name, labels string) float64 {
		t.Helper()
		samples := floats(name, labels)
		require.Len(t, samples, 1)
		return samples[0].Value
	}
	require.Equal(t, 1234.5, value("process_memory_usage_bytes", target+",pool=heap"))
	require.Equal(t, 5.0, value("http_requests_total", "http_method=GET,"+target))
	require.Equal(t, 7.0, value("http_requests_total", "http_method=POST,"+target))
	require.Equal(t, 3.0, value("queue_length", target))
	require.Equal(t, 1.0, value("target_info", "host_name=h1,"+target))

	for le, n := range map[string]float64{"1": 1, "10": 3, "100": 4, "+Inf": 5} {
		require.Equal(t, n, value("db_latency_milliseconds_bucket", target+",le="+le), "le=%s", le)
	}
	require.Len(t, rec.byName("db_latency_milliseconds_bucket"), 4)
	require.Equal(t, 5.0, value("db_latency_milliseconds_count", target))
	require.Equal(t, 560.5, value("db_latency_milliseconds_sum", target))

	hs := rec.byName("http_server_duration_seconds")
	require.Len(t, hs, 1)
	s := hs[target]
	require.Empty(t, s.Samples)
	require.Len(t, s.Histograms, 1)
	requireHoldsObservations(t, s.Histograms[0], observations)
	require.GreaterOrEqual(t, s.Histograms[0].Timestamp, before)
	require.LessOrEqual(t, s.Histograms[0].Timestamp, after)
}

// requireHoldsObservations checks that h is an integer native histogram of exactly the
// values: their count and sum, and each value counted in the bucket holding it.
func requireHoldsObservations(t *testing.T, ph prompb.Histogram, values []float64) {
	t.Helper()
	require.False(t, ph.IsFloatHistogram())
	h := ph.ToIntHistogram()
	require.NoError(t, h.Validate())
	require.GreaterOrEqual(t, h.Schema, int32(histogram.ExponentialSchemaMin))
	require.LessOrEqual(t, h.Schema, int32(histogram.ExponentialSchemaMax))
	require.Equal(t, uint64(len(values)), h.Count)
	require.True(t, near(h.Sum, sum(values)), "sum %v, want %v", h.Sum, sum(values))
	require.Zero(t, h.ZeroCount)
	want := map[float64]uint64{} // bucket upper bound -> values in it
	for _, v := range values {
		found := false
		for it := h.PositiveBucketIterator(); it.Next(); {
			b := it.At()
			if b.Lower < v && v <= b.Upper {
				want[b.Upper]++
				found = true
			}
		}
		require.True(t, found, "no bucket holds %v", v)
	}
	got := map[float64]uint64{}
	for it := h.PositiveBucketIterator(); it.Next(); {
		if b := it.At(); b.Count > 0 {
			got[b.Upper] = b.Count
		}
	}
	require.Equal(t, want, got)
	require.False(t, h.NegativeBucketIterator().Next(), "negative buckets")
}

// A delta counter is a clear 400 naming the metric, and nothing of the request is stored:
// not even its gauge.
func TestSDKDeltaTemporalityIs400(t *testing.T) {
	rec := &recorder{}
	h, srv := serve(t, rec, nil)
	sdk := newSDK(t, srv.URL, true, false)
	meter := sdk.provider.Meter("shop")
	counter, err := meter.Int64Counter("http.requests")
	require.NoError(t, err)
	counter.Add(context.Background(), 1)
	gauge, err := meter.Int64Gauge("up")
	require.NoError(t, err)
	gauge.Record(context.Background(), 1)

	err = sdk.export(t)
	require.Error(t, err)
	require.Contains(t, err.Error(), "400 Bad Request")
	require.Contains(t, err.Error(), `metric "http.requests" has delta temporality`)
	require.Zero(t, rec.calls)
	require.Equal(t, uint64(2), h.Stats().DataPointsRefused)
	require.Equal(t, uint64(2), h.Stats().DataPointsReceived)
}

// The exporter sees a partial success: it returns no error (it does not retry) and reports
// the rejected points to OpenTelemetry's error handler.
func TestSDKPartialSuccess(t *testing.T) {
	rec := &recorder{answer: func(ts []prompb.TimeSeries) (remote.Written, error) {
		return remote.Written{Samples: 1}, &remote.StatusError{Status: 400, Msg: `series {__name__="b"}: invalid`}
	}}
	_, srv := serve(t, rec, nil)
	sdk := newSDK(t, srv.URL, false, false)
	meter := sdk.provider.Meter("shop")
	for _, name := range []string{"a", "b"} {
		g, err := meter.Float64Gauge(name)
		require.NoError(t, err)
		g.Record(context.Background(), 1)
	}
	var (
		mu       sync.Mutex
		reported []error
	)
	prev := otel.GetErrorHandler()
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		mu.Lock()
		defer mu.Unlock()
		reported = append(reported, err)
	}))
	t.Cleanup(func() { otel.SetErrorHandler(prev) })

	require.NoError(t, sdk.export(t))
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, reported, 1)
	// 3 samples: a, b and target_info.
	require.Contains(t, reported[0].Error(), `2 of 3 samples not stored: series {__name__="b"}: invalid`)
	require.Contains(t, reported[0].Error(), "2 metric data points rejected")
}

// A storage failure a retry can fix is a 503, which the exporter retries.
func TestSDKStorageFailureIsRetryable(t *testing.T) {
	rec := &recorder{answer: func(ts []prompb.TimeSeries) (remote.Written, error) {
		return remote.Written{}, &remote.StatusError{Status: 503, Msg: "the account is throttling"}
	}}
	_, srv := serve(t, rec, nil)
	sdk := newSDK(t, srv.URL, false, true)
	g, err := sdk.provider.Meter("shop").Float64Gauge("a")
	require.NoError(t, err)
	g.Record(context.Background(), 1)
	err = sdk.export(t)
	require.Error(t, err)
	// The exporter's error for 429, 502, 503 and 504 (its retries are off here).
	require.Contains(t, err.Error(), "retry-able request failure")
	require.Contains(t, err.Error(), "2 of 2 samples not stored, retry: the account is throttling")
}
