package server_test

import (
	"bytes"
	"context"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"
)

// otelExporter is the OpenTelemetry Go SDK with its OTLP/HTTP exporter sending to a server,
// one request per export.
type otelExporter struct {
	provider *sdkmetric.MeterProvider
	reader   *sdkmetric.ManualReader
	exporter *otlpmetrichttp.Exporter
}

func newOTelExporter(t *testing.T, base string, temporality metricdata.Temporality) *otelExporter {
	t.Helper()
	exp, err := otlpmetrichttp.New(context.Background(), otlpmetrichttp.WithEndpointURL(base+"/api/v1/otlp/v1/metrics"),
		otlpmetrichttp.WithCompression(otlpmetrichttp.GzipCompression), otlpmetrichttp.WithRetry(otlpmetrichttp.RetryConfig{Enabled: false}))
	require.NoError(t, err)
	reader := sdkmetric.NewManualReader(sdkmetric.WithTemporalitySelector(func(sdkmetric.InstrumentKind) metricdata.Temporality { return temporality }))
	res := resource.NewSchemaless(attribute.String("service.namespace", "shop"), attribute.String("service.name", "checkout"),
		attribute.String("service.instance.id", "pod-1"), attribute.String("host.name", "h1"))
	exponential := sdkmetric.NewView(sdkmetric.Instrument{Name: "http.server.duration"},
		sdkmetric.Stream{Aggregation: sdkmetric.AggregationBase2ExponentialHistogram{MaxSize: 160, MaxScale: 20}})
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader), sdkmetric.WithResource(res), sdkmetric.WithView(exponential))
	t.Cleanup(func() {
		_ = provider.Shutdown(context.Background())
		_ = exp.Shutdown(context.Background())
	})
	return &otelExporter{provider: provider, reader: reader, exporter: exp}
}

func (e *otelExporter) export(t *testing.T) error {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, e.reader.Collect(context.Background(), &rm))
	return e.exporter.Export(context.Background(), &rm)
}

// instantValues runs an instant query and returns its result's values by their labels
// (the JSON of the metric).
func instantValues(t *testing.T, base, query string, at time.Time) map[string]float64 {
	t.Helper()
	out := getJSON(t, base+"/api/v1/query", url.Values{"query": {query}, "time": {strconv.FormatFloat(float64(at.UnixMilli())/1000, 'f', 3, 64)}})
	values := map[string]float64{}
	for _, r := range out["data"].(map[string]any)["result"].([]any) {
		m := r.(map[string]any)
		labels := ""
		for _, k := range sortedKeys(m["metric"].(map[string]any)) {
			labels += k + "=" + m["metric"].(map[string]any)[k].(string) + ","
		}
		v, err := strconv.ParseFloat(m["value"].([]any)[1].(string), 64)
		require.NoError(t, err)
		values[labels] = v
	}
	return values
}

// The OpenTelemetry Go SDK's exporter stores gauges, counters, exponential and explicit
// histograms through the server, which reads them back through PromQL with the values sent,
// named and labelled as Prometheus names them. A delta export is refused and stores nothing.
func TestServerOTLP(t *testing.T) {
	s, hs, checker := newServer(t, nil, nil)
	ctx := context.Background()
	sdk := newOTelExporter(t, hs.URL, metricdata.CumulativeTemporality)
	meter := sdk.provider.Meter("shop")

	gauge, err := meter.Float64Gauge("process.memory.usage", metric.WithUnit("By"))
	require.NoError(t, err)
	gauge.Record(ctx, 1234.5, metric.WithAttributes(attribute.String("pool", "heap")))
	counter, err := meter.Int64Counter("http.requests", metric.WithUnit("{request}"))
	require.NoError(t, err)
	counter.Add(ctx, 5, metric.WithAttributes(attribute.String("http.method", "GET")))
	counter.Add(ctx, 7, metric.WithAttributes(attribute.String("http.method", "POST")))
	latency, err := meter.Float64Histogram("http.server.duration", metric.WithUnit("s"))
	require.NoError(t, err)
	observations := []float64{0.003, 0.02, 0.02, 0.1, 0.25, 0.25, 0.25, 1.5, 4, 12}
	sum := 0.0
	for _, v := range observations {
		latency.Record(ctx, v)
		sum += v
	}
	dbLatency, err := meter.Float64Histogram("db.latency", metric.WithUnit("ms"), metric.WithExplicitBucketBoundaries(1, 10, 100))
	require.NoError(t, err)
	for _, v := range []float64{0.5, 5, 5, 50, 500} {
		dbLatency.Record(ctx, v)
	}

	before := checker.Stats()
	require.NoError(t, sdk.export(t))
	after := checker.Stats()
	exported := time.Now()
	t.Logf("one OTLP export of 5 metrics (11 series: 10 float samples, 1 native histogram): %d requests, %d bytes sent to the account",
		after.Requests-before.Requests, after.RequestBytes-before.RequestBytes)

	target := "instance=pod-1,job=shop/checkout,"
	for query, want := range map[string]map[string]float64{
		"process_memory_usage_bytes": {"__name__=process_memory_usage_bytes," + target + "pool=heap,": 1234.5},
		"http_requests_total": {
			"__name__=http_requests_total,http_method=GET," + target:  5,
			"__name__=http_requests_total,http_method=POST," + target: 7,
		},
		"target_info": {"__name__=target_info,host_name=h1," + target: 1},
		`db_latency_milliseconds_bucket{le=~"1|10|100"}`: {"__name__=db_latency_milliseconds_bucket," + target + "le=1,": 1, "__name__=db_latency_milliseconds_bucket," + target + "le=10,": 3, "__name__=db_latency_milliseconds_bucket," + target + "le=100,": 4},
		"db_latency_milliseconds_count":                  {"__name__=db_latency_milliseconds_count," + target: 5},
		"db_latency_milliseconds_sum":                    {"__name__=db_latency_milliseconds_sum," + target: 560.5},
		"histogram_count(http_server_duration_seconds)":  {target: 10},
		"histogram_sum(http_server_duration_seconds)":    {target: sum},
		// 0.003, 0.02, 0.02 and 0.1 of the ten values are at most 0.125, a bucket boundary at
		// every schema from 0 up (the SDK's scale here is 3): no interpolation.
		"histogram_fraction(0, 0.125, http_server_duration_seconds)": {target: 0.4},
	} {
		got := instantValues(t, hs.URL, query, exported)
		require.Len(t, got, len(want), query)
		for labels, v := range want {
			require.Contains(t, got, labels, query)
			require.InDelta(t, v, got[labels], 1e-9*math.Max(1, math.Abs(v)), "%s %s", query, labels)
		}
	}
	requireHistogramJSON(t, hs.URL, "http_server_duration_seconds", exported, observations)
	require.EqualValues(t, 1, s.OTLPStats().HistogramsWritten)
	require.EqualValues(t, 10, s.OTLPStats().SamplesWritten)

	// A second export of the same series, the counter grown: the new value at the new time.
	counter.Add(ctx, 1, metric.WithAttributes(attribute.String("http.method", "GET")))
	before = checker.Stats()
	require.NoError(t, sdk.export(t))
	after = checker.Stats()
	t.Logf("the next export of the same series: %d requests, %d bytes sent to the account",
		after.Requests-before.Requests, after.RequestBytes-before.RequestBytes)
	got := instantValues(t, hs.URL, `http_requests_total{http_method="GET"}`, time.Now())
	require.Equal(t, map[string]float64{"__name__=http_requests_total,http_method=GET," + target: 6}, got)
	require.EqualValues(t, 20, s.OTLPStats().SamplesWritten)

	// Delta temporality: 400, naming the metric, and the gauge of the same request is not
	// stored either.
	deltaSDK := newOTelExporter(t, hs.URL, metricdata.DeltaTemporality)
	jobs, err := deltaSDK.provider.Meter("shop").Int64Counter("jobs.done")
	require.NoError(t, err)
	jobs.Add(ctx, 3)
	up, err := deltaSDK.provider.Meter("shop").Int64Gauge("queue.up")
	require.NoError(t, err)
	up.Record(ctx, 1)
	before = checker.Stats()
	err = deltaSDK.export(t)
	require.ErrorContains(t, err, "400 Bad Request")
	require.ErrorContains(t, err, `metric "jobs.done" has delta temporality`)
	require.Equal(t, before.Requests, checker.Stats().Requests, "nothing sent to the account")
	series := getJSON(t, hs.URL+"/api/v1/series", url.Values{"match[]": {`{__name__=~"jobs.*|queue.*"}`}, "start": {"0"}})
	require.Empty(t, series["data"])

	resp, err := http.Get(hs.URL + "/metrics")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`tablets_http_requests_total{code="200",handler="otlp"} 2`,
		`tablets_http_requests_total{code="400",handler="otlp"} 1`,
		"tablets_otlp_datapoints_received_total 12",
		"tablets_otlp_datapoints_refused_total 2",
		"tablets_otlp_samples_written_total 20",
		"tablets_otlp_histograms_written_total 2",
		"tablets_otlp_samples_not_stored_total 0",
	} {
		require.True(t, strings.Contains(string(body), want+"\n"), "/metrics lacks %q", want)
	}
}

// requireHistogramJSON checks that the query API renders the histogram of metric at time at
// with the values observed: their count and sum, and each counted in the bucket holding it
// (Prometheus' JSON: buckets as [boundary rule, lower, upper, count]).
func requireHistogramJSON(t *testing.T, base, metric string, at time.Time, values []float64) {
	t.Helper()
	out := getJSON(t, base+"/api/v1/query", url.Values{"query": {metric}, "time": {strconv.FormatFloat(float64(at.UnixMilli())/1000, 'f', 3, 64)}})
	result := out["data"].(map[string]any)["result"].([]any)
	require.Len(t, result, 1)
	h := result[0].(map[string]any)["histogram"].([]any)[1].(map[string]any)
	require.Equal(t, strconv.Itoa(len(values)), h["count"])
	sum, err := strconv.ParseFloat(h["sum"].(string), 64)
	require.NoError(t, err)
	want := 0.0
	for _, v := range values {
		want += v
	}
	require.InDelta(t, want, sum, 1e-9)
	got := map[string]float64{} // "lower upper" -> count
	type bucket struct{ lower, upper float64 }
	var buckets []bucket
	for _, b := range h["buckets"].([]any) {
		fields := b.([]any)
		require.Equal(t, 0.0, fields[0], "boundary rule: open left, closed right")
		lower, err := strconv.ParseFloat(fields[1].(string), 64)
		require.NoError(t, err)
		upper, err := strconv.ParseFloat(fields[2].(string), 64)
		require.NoError(t, err)
		count, err := strconv.ParseFloat(fields[3].(string), 64)
		require.NoError(t, err)
		got[fields[1].(string)+" "+fields[2].(string)] = count
		buckets = append(buckets, bucket{lower, upper})
	}
	expected := map[string]float64{}
	for _, v := range values {
		held := 0
		for i, b := range buckets {
			if b.lower < v && v <= b.upper {
				fields := h["buckets"].([]any)[i].([]any)
				expected[fields[1].(string)+" "+fields[2].(string)]++
				held++
			}
		}
		require.Equal(t, 1, held, "buckets holding %v", v)
	}
	require.Equal(t, expected, got)
}

// A histogram the database refuses (more in its buckets than its count) is counted in an
// OTLP partial success naming its series, and the gauge of the same request is stored.
func TestServerOTLPPartialSuccess(t *testing.T) {
	_, hs, _ := newServer(t, nil, nil)
	at := time.Now().Truncate(time.Millisecond)
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", "svc")
	ms := rm.ScopeMetrics().AppendEmpty().Metrics()
	g := ms.AppendEmpty()
	g.SetName("up")
	gp := g.SetEmptyGauge().DataPoints().AppendEmpty()
	gp.SetTimestamp(pcommon.NewTimestampFromTime(at))
	gp.SetDoubleValue(1)
	h := ms.AppendEmpty()
	h.SetName("latency")
	eh := h.SetEmptyExponentialHistogram()
	eh.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	hp := eh.DataPoints().AppendEmpty()
	hp.SetTimestamp(pcommon.NewTimestampFromTime(at))
	hp.SetScale(2)
	hp.SetCount(1)
	hp.Positive().BucketCounts().FromRaw([]uint64{3})
	body, err := pmetricotlp.NewExportRequestFromMetrics(md).MarshalProto()
	require.NoError(t, err)

	resp, err := http.Post(hs.URL+"/api/v1/otlp/v1/metrics", "application/x-protobuf", bytes.NewReader(body))
	require.NoError(t, err)
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, string(answer))
	out := pmetricotlp.NewExportResponse()
	require.NoError(t, out.UnmarshalProto(answer))
	require.EqualValues(t, 1, out.PartialSuccess().RejectedDataPoints())
	require.Contains(t, out.PartialSuccess().ErrorMessage(), "1 of 2 samples not stored")
	require.Contains(t, out.PartialSuccess().ErrorMessage(), `latency`)
	t.Logf("partial success: %s", out.PartialSuccess().ErrorMessage())

	require.Equal(t, map[string]float64{"__name__=up,job=svc,": 1}, instantValues(t, hs.URL, "up", at))
	require.Empty(t, instantValues(t, hs.URL, "histogram_count(latency)", at))
}
