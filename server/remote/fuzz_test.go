package remote

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
)

// FuzzWriteBody: whatever a sender posts (the protobuf inside the snappy block is the
// fuzzed part, in both versions), the handler answers without panicking, with a code the
// spec allows for a request that reached a healthy sink, and 204 only for a decodable one.
func FuzzWriteBody(f *testing.F) {
	v1 := prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{Labels: []prompb.Label{{Name: "__name__", Value: "up"}}, Samples: []prompb.Sample{{Value: 1, Timestamp: 1700000000000}}}}}
	b1, _ := v1.Marshal()
	v2 := writev2.Request{Symbols: []string{"", "__name__", "up"}, Timeseries: []writev2.TimeSeries{{LabelsRefs: []uint32{1, 2}, Samples: []writev2.Sample{{Value: 1, Timestamp: 1700000000000}}}}}
	b2, _ := v2.Marshal()
	f.Add(b1, false)
	f.Add(b2, true)
	f.Add([]byte{0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f}, false)
	f.Fuzz(func(t *testing.T, body []byte, version2 bool) {
		h, err := NewWriteHandler(&fakeSink{}, &WriteOptions{MaxSamplesInFlight: 10000, MaxBodyBytes: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		req := httptest.NewRequest(http.MethodPost, "/api/v1/write", bytes.NewReader(snappy.Encode(nil, body)))
		req.Header.Set("Content-Encoding", "snappy")
		if version2 {
			req.Header.Set("Content-Type", "application/x-protobuf;proto=io.prometheus.write.v2.Request")
		} else {
			req.Header.Set("Content-Type", "application/x-protobuf")
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		switch rec.Code {
		case http.StatusNoContent:
			var err error
			if version2 {
				var r writev2.Request
				err = r.Unmarshal(body)
			} else {
				var r prompb.WriteRequest
				err = r.Unmarshal(body)
			}
			if err != nil {
				t.Fatalf("204 for a body protobuf cannot decode: %v", err)
			}
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		default:
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
	})
}
