package otlp_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/prometheus/prompb"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/seed71701133/tablets/server/otlp"
	"github.com/seed71701133/tablets/server/remote"
)

// discard is a Writer that keeps nothing and says it stored everything.
type discard struct{}

func (discard) WriteTimeSeries(_ context.Context, ts []prompb.TimeSeries) (remote.Written, error) {
	var w remote.Written
	for _, s := range ts {
		w.Samples += len(s.Samples)
		w.Histograms += len(s.Histograms)
	}
	return w, nil
}

// BenchmarkHandler measures the endpoint's own work (gzip, decoding, translation, answer)
// over a writer that stores nothing: a request of 500 counter points and 500 exponential
// histogram points of 20 buckets, one resource.
func BenchmarkHandler(b *testing.B) {
	ts := pcommon.NewTimestampFromTime(testTime)
	md := metrics(func(ms pmetric.MetricSlice) {
		c := ms.AppendEmpty()
		c.SetName("http.requests")
		sum := c.SetEmptySum()
		sum.SetIsMonotonic(true)
		sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
		h := ms.AppendEmpty()
		h.SetName("http.server.duration")
		h.SetUnit("s")
		eh := h.SetEmptyExponentialHistogram()
		eh.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
		counts := make([]uint64, 20)
		for i := range counts {
			counts[i] = uint64(i * 3)
		}
		for i := range 500 {
			p := sum.DataPoints().AppendEmpty()
			p.SetTimestamp(ts)
			p.SetIntValue(int64(i))
			p.Attributes().PutStr("route", "/api/"+strconv.Itoa(i))
			hp := eh.DataPoints().AppendEmpty()
			hp.SetTimestamp(ts)
			hp.Attributes().PutStr("route", "/api/"+strconv.Itoa(i))
			hp.SetScale(3)
			hp.Positive().SetOffset(-40)
			hp.Positive().BucketCounts().FromRaw(counts)
			hp.SetCount(570)
			hp.SetSum(100)
		}
	})
	body := gzipped(protoBody(b, md))
	h, err := otlp.NewHandler(discard{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	start := time.Now()
	for b.Loop() {
		req := httptest.NewRequest(http.MethodPost, "/api/v1/otlp/v1/metrics", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/x-protobuf")
		req.Header.Set("Content-Encoding", "gzip")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			b.Fatalf("status %d: %s", w.Code, w.Body)
		}
	}
	b.ReportMetric(float64(b.N*md.DataPointCount())/time.Since(start).Seconds(), "points/s")
	b.ReportMetric(float64(len(body))/float64(md.DataPointCount()), "gzip-bytes/point")
}
