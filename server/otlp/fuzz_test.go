package otlp_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/seed71701133/tablets/server/otlp"
)

// seedMetrics holds one metric of every type, for the fuzzer's seeds.
func seedMetrics() pmetric.Metrics {
	return metrics(func(ms pmetric.MetricSlice) {
		gauges("up")(ms)
		ts := pcommon.NewTimestampFromTime(testTime)

		m := ms.AppendEmpty()
		m.SetName("requests")
		s := m.SetEmptySum()
		s.SetIsMonotonic(true)
		s.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
		p := s.DataPoints().AppendEmpty()
		p.SetTimestamp(ts)
		p.SetIntValue(7)
		p.Attributes().PutStr("code", "200")

		m = ms.AppendEmpty()
		m.SetName("latency")
		m.SetUnit("s")
		eh := m.SetEmptyExponentialHistogram()
		eh.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
		ep := eh.DataPoints().AppendEmpty()
		ep.SetTimestamp(ts)
		ep.SetScale(3)
		ep.SetCount(6)
		ep.SetSum(2.5)
		ep.SetZeroCount(1)
		ep.Positive().SetOffset(-2)
		ep.Positive().BucketCounts().FromRaw([]uint64{1, 0, 3})
		ep.Negative().BucketCounts().FromRaw([]uint64{1})

		m = ms.AppendEmpty()
		m.SetName("size")
		h := m.SetEmptyHistogram()
		h.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
		hp := h.DataPoints().AppendEmpty()
		hp.SetTimestamp(ts)
		hp.ExplicitBounds().FromRaw([]float64{1, 2})
		hp.BucketCounts().FromRaw([]uint64{1, 1, 1})
		hp.SetCount(3)
		hp.SetSum(4)

		m = ms.AppendEmpty()
		m.SetName("rpc")
		sp := m.SetEmptySummary().DataPoints().AppendEmpty()
		sp.SetTimestamp(ts)
		sp.SetCount(2)
		sp.SetSum(3)
		q := sp.QuantileValues().AppendEmpty()
		q.SetQuantile(0.5)
		q.SetValue(1.5)
	})
}

// The request path (decompression, decoding, checks, translation, answer) never panics, and
// answers only what the package documents. The writer stores everything, so any answer but
// 200 comes before it is called.
func FuzzHandler(f *testing.F) {
	md := seedMetrics()
	proto, json := protoBody(f, md), jsonBody(f, md)
	f.Add(proto, false, false)
	f.Add(json, true, false)
	f.Add(gzipped(proto), false, true)
	f.Add(gzipped(json), true, true)
	f.Add([]byte(`{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"name":"x","sum":{"dataPoints":[{"asInt":"1"}],"aggregationTemporality":1}}]}]}]}`), true, false)
	f.Add([]byte{}, false, false)
	f.Fuzz(func(t *testing.T, body []byte, isJSON, isGzip bool) {
		rec := &recorder{}
		h, err := otlp.NewHandler(rec, &otlp.Options{MaxBodyBytes: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		req := httptest.NewRequest(http.MethodPost, "/api/v1/otlp/v1/metrics", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/x-protobuf")
		if isJSON {
			req.Header.Set("Content-Type", "application/json")
		}
		if isGzip {
			req.Header.Set("Content-Encoding", "gzip")
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		switch w.Code {
		case http.StatusOK:
			exportResponse(t, w.Header().Get("Content-Type"), w.Body.Bytes())
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
			statusMessage(t, w.Header().Get("Content-Type"), w.Body.Bytes())
			if rec.calls != 0 {
				t.Fatalf("answered %d after writing", w.Code)
			}
		default:
			t.Fatalf("status %d: %s", w.Code, w.Body)
		}
	})
}
