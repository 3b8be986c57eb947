package otlp_test

import (
	"context"
	"math"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/prometheus/prompb"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"

	"github.com/seed71701133/tablets/server/otlp"
	"github.com/seed71701133/tablets/server/remote"
)

// recorder is a Writer that keeps what it is given and answers as told.
type recorder struct {
	mu      sync.Mutex
	calls   int
	series  []prompb.TimeSeries
	answer  func(ts []prompb.TimeSeries) (remote.Written, error)
	written remote.Written
}

func (r *recorder) WriteTimeSeries(_ context.Context, ts []prompb.TimeSeries) (remote.Written, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	r.series = append(r.series, ts...)
	if r.answer != nil {
		return r.answer(ts)
	}
	w := remote.Written{}
	for _, s := range ts {
		w.Samples += len(s.Samples)
		w.Histograms += len(s.Histograms)
	}
	return w, nil
}

// byName returns the recorded series of a metric name, each as its labels without
// __name__ ("k=v,..." sorted) to the series.
func (r *recorder) byName(name string) map[string]prompb.TimeSeries {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]prompb.TimeSeries{}
	for _, s := range r.series {
		if labelValue(s, "__name__") != name {
			continue
		}
		out[labelKey(s)] = s
	}
	return out
}

// names lists the recorded metric names, sorted.
func (r *recorder) names() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, s := range r.series {
		if n := labelValue(s, "__name__"); !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

func labelValue(s prompb.TimeSeries, name string) string {
	for _, l := range s.Labels {
		if l.Name == name {
			return l.Value
		}
	}
	return ""
}

func labelKey(s prompb.TimeSeries) string {
	var parts []string
	for _, l := range s.Labels {
		if l.Name != "__name__" {
			parts = append(parts, l.Name+"="+l.Value)
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// serve runs a Handler over w.
func serve(t *testing.T, w otlp.Writer, opts *otlp.Options) (*otlp.Handler, *httptest.Server) {
	t.Helper()
	h, err := otlp.NewHandler(w, opts)
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return h, srv
}

// testResource is the resource of the SDK tests: job "shop/checkout", instance "pod-1", and
// one more attribute for target_info.
func testResource() *resource.Resource {
	return resource.NewSchemaless(
		attribute.String("service.namespace", "shop"),
		attribute.String("service.name", "checkout"),
		attribute.String("service.instance.id", "pod-1"),
		attribute.String("host.name", "h1"),
	)
}

// sdk is a meter provider whose metrics are exported on demand, by the real OTLP/HTTP
// exporter, to url: one request per export.
type sdk struct {
	provider *sdkmetric.MeterProvider
	reader   *sdkmetric.ManualReader
	exporter *otlpmetrichttp.Exporter
}

// newSDK makes an sdk exporting with temporality (cumulative unless delta), compressing
// with gzip when gzip is set, and aggregating the histograms named in exponential as
// base-2 exponential histograms.
func newSDK(t *testing.T, url string, delta, gzip bool, exponential ...string) *sdk {
	t.Helper()
	ctx := context.Background()
	opts := []otlpmetrichttp.Option{otlpmetrichttp.WithEndpointURL(url + "/api/v1/otlp/v1/metrics"),
		otlpmetrichttp.WithRetry(otlpmetrichttp.RetryConfig{Enabled: false})}
	if gzip {
		opts = append(opts, otlpmetrichttp.WithCompression(otlpmetrichttp.GzipCompression))
	}
	exp, err := otlpmetrichttp.New(ctx, opts...)
	require.NoError(t, err)
	temporality := sdkmetric.DefaultTemporalitySelector
	if delta {
		temporality = func(sdkmetric.InstrumentKind) metricdata.Temporality { return metricdata.DeltaTemporality }
	}
	reader := sdkmetric.NewManualReader(sdkmetric.WithTemporalitySelector(temporality))
	var views []sdkmetric.View
	for _, name := range exponential {
		views = append(views, sdkmetric.NewView(sdkmetric.Instrument{Name: name},
			sdkmetric.Stream{Aggregation: sdkmetric.AggregationBase2ExponentialHistogram{MaxSize: 160, MaxScale: 20}}))
	}
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader), sdkmetric.WithResource(testResource()), sdkmetric.WithView(views...))
	t.Cleanup(func() {
		_ = provider.Shutdown(context.Background())
		_ = exp.Shutdown(context.Background())
	})
	return &sdk{provider: provider, reader: reader, exporter: exp}
}

// export collects the metrics and sends them in one request: the exporter's error.
func (s *sdk) export(t *testing.T) error {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, s.reader.Collect(context.Background(), &rm))
	return s.exporter.Export(context.Background(), &rm)
}

// observations are the values the histogram tests record.
var observations = []float64{0.003, 0.02, 0.02, 0.1, 0.25, 0.25, 0.25, 1.5, 4, 12}

func sum(values []float64) float64 {
	s := 0.0
	for _, v := range values {
		s += v
	}
	return s
}

// near reports whether a and b are equal but for float rounding of a sum.
func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }
