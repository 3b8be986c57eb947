package otlp_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/prompb"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/server/otlp"
	"github.com/seed71701133/tablets/server/remote"
)

var testTime = time.Date(2026, 11, 24, 1, 0, 0, 123_000_000, time.UTC)

// metrics makes a request body's metrics: one resource (service.name "svc": job "svc", no
// target_info) whose scope holds what add adds.
func metrics(add func(ms pmetric.MetricSlice)) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", "svc")
	add(rm.ScopeMetrics().AppendEmpty().Metrics())
	return md
}

// gauges adds a gauge per name with one point of value 1.
func gauges(names ...string) func(ms pmetric.MetricSlice) {
	return func(ms pmetric.MetricSlice) {
		for _, name := range names {
			m := ms.AppendEmpty()
			m.SetName(name)
			p := m.SetEmptyGauge().DataPoints().AppendEmpty()
			p.SetTimestamp(pcommon.NewTimestampFromTime(testTime))
			p.SetDoubleValue(1)
		}
	}
}

func protoBody(t testing.TB, md pmetric.Metrics) []byte {
	b, err := pmetricotlp.NewExportRequestFromMetrics(md).MarshalProto()
	require.NoError(t, err)
	return b
}

func jsonBody(t testing.TB, md pmetric.Metrics) []byte {
	b, err := pmetricotlp.NewExportRequestFromMetrics(md).MarshalJSON()
	require.NoError(t, err)
	return b
}

func gzipped(b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(b)
	zw.Close()
	return buf.Bytes()
}

// post sends body and returns the answer's status, Content-Type and body.
func post(t *testing.T, url, contentType, contentEncoding string, body []byte) (int, string, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	require.NoError(t, err)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if contentEncoding != "" {
		req.Header.Set("Content-Encoding", contentEncoding)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header.Get("Content-Type"), b
}

// statusMessage decodes a google.rpc.Status, protobuf or JSON, to its message.
func statusMessage(t *testing.T, contentType string, body []byte) string {
	t.Helper()
	if contentType == "application/json" {
		var st struct{ Message string }
		require.NoError(t, json.Unmarshal(body, &st))
		return st.Message
	}
	require.Equal(t, "application/x-protobuf", contentType)
	msg := ""
	for len(body) > 0 {
		num, typ, n := protowire.ConsumeTag(body)
		require.GreaterOrEqual(t, n, 0)
		body = body[n:]
		require.Equal(t, protowire.Number(2), num, "only the message is set")
		require.Equal(t, protowire.BytesType, typ)
		s, n := protowire.ConsumeString(body)
		require.GreaterOrEqual(t, n, 0)
		msg, body = s, body[n:]
	}
	return msg
}

// exportResponse decodes a 200's ExportMetricsServiceResponse.
func exportResponse(t *testing.T, contentType string, body []byte) pmetricotlp.ExportResponse {
	t.Helper()
	resp := pmetricotlp.NewExportResponse()
	if contentType == "application/json" {
		require.NoError(t, resp.UnmarshalJSON(body))
	} else {
		require.Equal(t, "application/x-protobuf", contentType)
		require.NoError(t, resp.UnmarshalProto(body))
	}
	return resp
}

func TestNewHandlerOptions(t *testing.T) {
	_, err := otlp.NewHandler(nil, nil)
	require.ErrorIs(t, err, tablets.ErrInvalidOptions)
	_, err = otlp.NewHandler(&recorder{}, &otlp.Options{MaxBodyBytes: -1})
	require.ErrorIs(t, err, tablets.ErrInvalidOptions)
}

// JSON requests are answered in JSON; Content-Type parameters are ignored; values and
// timestamps arrive exactly.
func TestJSONRequest(t *testing.T) {
	rec := &recorder{}
	_, srv := serve(t, rec, nil)
	md := metrics(func(ms pmetric.MetricSlice) {
		m := ms.AppendEmpty()
		m.SetName("room.temperature")
		m.SetUnit("Cel")
		p := m.SetEmptyGauge().DataPoints().AppendEmpty()
		p.SetTimestamp(pcommon.NewTimestampFromTime(testTime))
		p.SetDoubleValue(21.5)
		p.Attributes().PutStr("room", "kitchen")
	})
	status, ct, body := post(t, srv.URL, "application/json; charset=utf-8", "", jsonBody(t, md))
	require.Equal(t, http.StatusOK, status, string(body))
	resp := exportResponse(t, ct, body)
	require.Zero(t, resp.PartialSuccess().RejectedDataPoints())
	require.Empty(t, resp.PartialSuccess().ErrorMessage())
	require.Equal(t, []string{"room_temperature_celsius"}, rec.names())
	s := rec.byName("room_temperature_celsius")["job=svc,room=kitchen"]
	require.Equal(t, []prompb.Sample{{Value: 21.5, Timestamp: testTime.UnixMilli()}}, s.Samples)
}

// Bad requests are refused before anything is stored, each with its status and, where the
// client speaks OTLP, a Status in its encoding saying why.
func TestRefusedRequests(t *testing.T) {
	valid := protoBody(t, metrics(gauges("a")))
	bomb := gzipped(make([]byte, 100_000))
	require.Less(t, len(bomb), 1000)
	for _, tc := range []struct {
		name, contentType, encoding string
		body                        []byte
		status                      int
		message                     string // in the Status ("" for plain-text answers)
	}{
		{"unknown content type", "text/plain", "", valid, 415, ""},
		{"no content type", "", "", valid, 415, ""},
		{"unknown encoding", "application/x-protobuf", "br", valid, 415, `Content-Encoding "br" is not supported`},
		{"bad protobuf", "application/x-protobuf", "", []byte("\xff\xff\xff"), 400, "decoding protobuf ExportMetricsServiceRequest"},
		{"bad JSON", "application/json", "", []byte(`{"resourceMetrics": [`), 400, "decoding JSON ExportMetricsServiceRequest"},
		{"not gzip", "application/x-protobuf", "gzip", valid, 400, "reading the body: gzip: invalid header"},
		{"truncated gzip", "application/x-protobuf", "gzip", gzipped(valid)[:20], 400, "reading the body: unexpected EOF"},
		{"too large", "application/x-protobuf", "", make([]byte, 1001), 413, "body of 1001 bytes, over the limit of 1000"},
		{"too large decompressed", "application/json", "gzip", bomb, 413, "body over the limit of 1000 bytes decompressed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			_, srv := serve(t, rec, &otlp.Options{MaxBodyBytes: 1000})
			status, ct, body := post(t, srv.URL, tc.contentType, tc.encoding, tc.body)
			require.Equal(t, tc.status, status, string(body))
			if tc.message != "" {
				require.Contains(t, statusMessage(t, ct, body), tc.message)
			}
			require.Zero(t, rec.calls)
		})
	}
}

func TestMethodNotAllowed(t *testing.T) {
	_, srv := serve(t, &recorder{}, nil)
	resp, err := http.Get(srv.URL)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
	require.Equal(t, "POST", resp.Header.Get("Allow"))
}

// A body sent without a Content-Length is cut at the limit too.
func TestChunkedBodyOverLimit(t *testing.T) {
	rec := &recorder{}
	_, srv := serve(t, rec, &otlp.Options{MaxBodyBytes: 1000})
	req, err := http.NewRequest(http.MethodPost, srv.URL, io.MultiReader(bytes.NewReader(make([]byte, 600)), bytes.NewReader(make([]byte, 600))))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-protobuf")
	require.Equal(t, int64(0), req.ContentLength)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	require.Contains(t, statusMessage(t, resp.Header.Get("Content-Type"), body), "over the limit of 1000 bytes")
	require.Zero(t, rec.calls)
}

// What the translator cannot convert refuses the request, naming the metric; nothing of it
// is stored.
func TestUntranslatableMetrics(t *testing.T) {
	for _, tc := range []struct {
		name    string
		add     func(ms pmetric.MetricSlice)
		message string
	}{
		{"delta sum", func(ms pmetric.MetricSlice) {
			m := ms.AppendEmpty()
			m.SetName("requests")
			sum := m.SetEmptySum()
			sum.SetIsMonotonic(true)
			sum.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
			sum.DataPoints().AppendEmpty().SetIntValue(1)
		}, `metric "requests" has delta temporality: only cumulative metrics are stored`},
		{"delta exponential histogram", func(ms pmetric.MetricSlice) {
			m := ms.AppendEmpty()
			m.SetName("latency")
			h := m.SetEmptyExponentialHistogram()
			h.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
			h.DataPoints().AppendEmpty().SetCount(1)
		}, `metric "latency" has delta temporality`},
		{"delta histogram", func(ms pmetric.MetricSlice) {
			m := ms.AppendEmpty()
			m.SetName("latency")
			h := m.SetEmptyHistogram()
			h.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
			h.DataPoints().AppendEmpty().SetCount(1)
		}, `metric "latency" has delta temporality`},
		{"unspecified temporality", func(ms pmetric.MetricSlice) {
			m := ms.AppendEmpty()
			m.SetName("requests")
			m.SetEmptySum().DataPoints().AppendEmpty().SetIntValue(1)
		}, `metric "requests" has unspecified temporality`},
		{"scale below -4", func(ms pmetric.MetricSlice) {
			m := ms.AppendEmpty()
			m.SetName("latency")
			h := m.SetEmptyExponentialHistogram()
			h.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
			p := h.DataPoints().AppendEmpty()
			p.SetScale(-5)
			p.SetCount(1)
		}, `metric "latency": exponential histogram scale -5 is below`},
		{"no type", func(ms pmetric.MetricSlice) {
			ms.AppendEmpty().SetName("mystery")
		}, `metric "mystery" has no data type`},
		{"no value", func(ms pmetric.MetricSlice) {
			m := ms.AppendEmpty()
			m.SetName("up")
			m.SetEmptyGauge().DataPoints().AppendEmpty()
		}, `metric "up": a data point has no value`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			h, srv := serve(t, rec, nil)
			md := metrics(func(ms pmetric.MetricSlice) {
				gauges("fine")(ms)
				tc.add(ms)
			})
			status, ct, body := post(t, srv.URL, "application/x-protobuf", "", protoBody(t, md))
			require.Equal(t, http.StatusBadRequest, status)
			require.Contains(t, statusMessage(t, ct, body), tc.message)
			require.Zero(t, rec.calls)
			require.Equal(t, uint64(md.DataPointCount()), h.Stats().DataPointsRefused)
		})
	}
}

// Every problem is named, up to ten.
func TestUntranslatableMetricsListed(t *testing.T) {
	rec := &recorder{}
	_, srv := serve(t, rec, nil)
	md := metrics(func(ms pmetric.MetricSlice) {
		for _, name := range strings.Split("a b c d e f g h i j k l", " ") {
			ms.AppendEmpty().SetName(name)
		}
	})
	status, ct, body := post(t, srv.URL, "application/json", "", jsonBody(t, md))
	require.Equal(t, http.StatusBadRequest, status)
	msg := statusMessage(t, ct, body)
	require.Contains(t, msg, `metric "a" has no data type; metric "b" has no data type`)
	require.Contains(t, msg, `metric "j" has no data type; and 2 more`)
	require.NotContains(t, msg, `metric "k"`)
}

// A metric without points is skipped with a warning; the others are stored.
func TestMetricWithoutPointsWarns(t *testing.T) {
	rec := &recorder{}
	_, srv := serve(t, rec, nil)
	md := metrics(func(ms pmetric.MetricSlice) {
		gauges("full")(ms)
		m := ms.AppendEmpty()
		m.SetName("empty")
		m.SetEmptyGauge()
	})
	status, ct, body := post(t, srv.URL, "application/x-protobuf", "", protoBody(t, md))
	require.Equal(t, http.StatusOK, status)
	resp := exportResponse(t, ct, body)
	require.Zero(t, resp.PartialSuccess().RejectedDataPoints())
	require.Equal(t, `warnings: metric "empty" has no data points`, resp.PartialSuccess().ErrorMessage())
	require.Equal(t, []string{"full"}, rec.names())
}

// Exemplars are dropped before translation: one without a value (which the translator
// refuses) does not fail its metric.
func TestExemplarsDropped(t *testing.T) {
	rec := &recorder{}
	_, srv := serve(t, rec, nil)
	md := metrics(func(ms pmetric.MetricSlice) {
		gauges("up")(ms)
		ms.At(0).Gauge().DataPoints().At(0).Exemplars().AppendEmpty().SetTimestamp(pcommon.NewTimestampFromTime(testTime))
	})
	status, _, body := post(t, srv.URL, "application/x-protobuf", "", protoBody(t, md))
	require.Equal(t, http.StatusOK, status, string(body))
	s := rec.byName("up")["job=svc"]
	require.Len(t, s.Samples, 1)
	require.Empty(t, s.Exemplars)
}

// A point flagged "no recorded value" is a staleness marker.
func TestNoRecordedValueIsStale(t *testing.T) {
	rec := &recorder{}
	_, srv := serve(t, rec, nil)
	md := metrics(func(ms pmetric.MetricSlice) {
		m := ms.AppendEmpty()
		m.SetName("up")
		p := m.SetEmptyGauge().DataPoints().AppendEmpty()
		p.SetTimestamp(pcommon.NewTimestampFromTime(testTime))
		p.SetFlags(pmetric.DefaultDataPointFlags.WithNoRecordedValue(true))
	})
	status, _, body := post(t, srv.URL, "application/x-protobuf", "", protoBody(t, md))
	require.Equal(t, http.StatusOK, status, string(body))
	s := rec.byName("up")["job=svc"]
	require.Len(t, s.Samples, 1)
	require.Equal(t, value.StaleNaN, math.Float64bits(s.Samples[0].Value))
}

// With ConvertHistogramsToNHCB an explicit-bucket histogram is one custom-bucket native
// histogram, its bounds kept.
func TestExplicitHistogramAsNHCB(t *testing.T) {
	rec := &recorder{}
	_, srv := serve(t, rec, &otlp.Options{ConvertHistogramsToNHCB: true})
	md := metrics(func(ms pmetric.MetricSlice) {
		m := ms.AppendEmpty()
		m.SetName("db.latency")
		m.SetUnit("ms")
		h := m.SetEmptyHistogram()
		h.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
		p := h.DataPoints().AppendEmpty()
		p.SetTimestamp(pcommon.NewTimestampFromTime(testTime))
		p.ExplicitBounds().FromRaw([]float64{1, 10, 100})
		p.BucketCounts().FromRaw([]uint64{1, 2, 1, 1})
		p.SetCount(5)
		p.SetSum(560.5)
	})
	status, _, body := post(t, srv.URL, "application/x-protobuf", "", protoBody(t, md))
	require.Equal(t, http.StatusOK, status, string(body))
	require.Equal(t, []string{"db_latency_milliseconds"}, rec.names())
	s := rec.byName("db_latency_milliseconds")["job=svc"]
	require.Len(t, s.Histograms, 1)
	h := s.Histograms[0].ToIntHistogram()
	require.NoError(t, h.Validate())
	require.Equal(t, int32(-53), h.Schema)
	require.Equal(t, []float64{1, 10, 100}, h.CustomValues)
	require.Equal(t, uint64(5), h.Count)
	require.Equal(t, 560.5, h.Sum)
	var counts []uint64
	for it := h.PositiveBucketIterator(); it.Next(); {
		counts = append(counts, it.At().Count)
	}
	require.Equal(t, []uint64{1, 2, 1, 1}, counts)
	require.Equal(t, testTime.UnixMilli(), s.Histograms[0].Timestamp)
}

// The writer's failures become OTLP's answers: a partial success when bad input was refused
// while the rest was stored, 400 when all of it was, 503 for anything a retry may fix.
func TestStorageAnswers(t *testing.T) {
	for _, tc := range []struct {
		name     string
		err      error // of the writer
		written  int   // float samples the writer stored, of 3
		status   int
		message  string
		rejected int64
	}{
		{"bad input in part", &remote.StatusError{Status: 400, Msg: "the reason"}, 1, 200, "2 of 3 samples not stored: the reason", 2},
		{"bad input all", &remote.StatusError{Status: 400, Msg: "the reason"}, 0, 400, "3 of 3 samples not stored: the reason", 0},
		{"too many samples", &remote.StatusError{Status: 413, Msg: "the reason"}, 0, 413, "3 of 3 samples not stored: the reason", 0},
		{"unavailable", &remote.StatusError{Status: 503, Msg: "the reason"}, 2, 503, "1 of 3 samples not stored, retry: the reason", 0},
		{"unknown", &remote.StatusError{Status: 500, Msg: "the reason"}, 0, 503, "3 of 3 samples not stored, retry: the reason", 0},
		{"throttled", &remote.StatusError{Status: 429, Msg: "the reason"}, 0, 503, "3 of 3 samples not stored, retry: the reason", 0},
		{"request timeout", &remote.StatusError{Status: 408, Msg: "the reason"}, 0, 503, "3 of 3 samples not stored, retry: the reason", 0},
		{"not a StatusError", errors.New("boom"), 0, 503, "3 of 3 samples not stored, retry: boom", 0},
	} {
		for _, enc := range []string{"application/x-protobuf", "application/json"} {
			t.Run(tc.name+" "+enc, func(t *testing.T) {
				rec := &recorder{answer: func([]prompb.TimeSeries) (remote.Written, error) {
					return remote.Written{Samples: tc.written}, tc.err
				}}
				h, srv := serve(t, rec, nil)
				md := metrics(gauges("a", "b", "c"))
				var body []byte
				if enc == "application/json" {
					body = jsonBody(t, md)
				} else {
					body = protoBody(t, md)
				}
				status, ct, body := post(t, srv.URL, enc, "", body)
				require.Equal(t, tc.status, status)
				require.Equal(t, enc, ct)
				if status == http.StatusOK {
					resp := exportResponse(t, ct, body)
					require.Equal(t, tc.rejected, resp.PartialSuccess().RejectedDataPoints())
					require.Equal(t, tc.message, resp.PartialSuccess().ErrorMessage())
				} else {
					require.Equal(t, tc.message, statusMessage(t, ct, body))
				}
				require.Equal(t, 1, rec.calls)
				require.Equal(t, otlp.Stats{DataPointsReceived: 3, SamplesWritten: uint64(tc.written), SamplesNotStored: uint64(3 - tc.written)}, h.Stats())
			})
		}
	}
}

// A write over the tenant's ingestion rate keeps its status, 429 or 503, and its Retry-After.
func TestRateLimitedAnswers(t *testing.T) {
	for _, status := range []int{http.StatusTooManyRequests, http.StatusServiceUnavailable} {
		rec := &recorder{answer: func([]prompb.TimeSeries) (remote.Written, error) {
			return remote.Written{}, &remote.StatusError{Status: status, Msg: "the rate", RetryAfter: 7}
		}}
		_, srv := serve(t, rec, nil)
		req, err := http.NewRequest(http.MethodPost, srv.URL, bytes.NewReader(protoBody(t, metrics(gauges("a")))))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/x-protobuf")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, status, resp.StatusCode)
		require.Equal(t, "7", resp.Header.Get("Retry-After"))
		require.Equal(t, "1 of 1 samples not stored, retry: the rate", statusMessage(t, "application/x-protobuf", body))
	}
}
