package remote

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"testing"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/server/promconv"
)

// fuzzSeeds are protobuf bodies of 1.0 and 2.0 requests: float samples, and histograms of
// every kind, valid and not.
func fuzzSeeds(f *testing.F) {
	v1 := prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{Labels: []prompb.Label{{Name: "__name__", Value: "up"}}, Samples: []prompb.Sample{{Value: 1, Timestamp: 1700000000000}}}}}
	b1, _ := v1.Marshal()
	v2 := writev2.Request{Symbols: []string{"", "__name__", "up"}, Timeseries: []writev2.TimeSeries{{LabelsRefs: []uint32{1, 2}, Samples: []writev2.Sample{{Value: 1, Timestamp: 1700000000000}}}}}
	b2, _ := v2.Marshal()
	f.Add(b1, false)
	f.Add(b2, true)
	f.Add([]byte{0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f}, false)

	bad := &tablets.Histogram{Schema: 9, Count: 1, PositiveSpans: []tablets.HistogramSpan{{Offset: 0, Length: 1}}, PositiveBuckets: []int64{1}}
	hists := []tablets.HistogramPoint{hp(1000, hInt), hp(2000, hMinSchema), hp(3000, hMaxSchema), hp(4000, hFloat), hp(5000, hCustom),
		hp(6000, hCustomFloat), hp(7000, hStale), hp(8000, hStaleFloat), hp(9000, bad)}
	h1 := prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{Labels: []prompb.Label{{Name: "__name__", Value: "lat"}},
		Samples: []prompb.Sample{{Value: 1, Timestamp: 500}}, Histograms: toV1(hists...)}}}
	b1, _ = h1.Marshal()
	f.Add(b1, false)
	h2 := writev2.Request{Symbols: []string{"", "__name__", "lat"}, Timeseries: []writev2.TimeSeries{{LabelsRefs: []uint32{1, 2},
		Samples: []writev2.Sample{{Value: 1, Timestamp: 500}}, Histograms: toV2(hists...)}}}
	b2, _ = h2.Marshal()
	f.Add(b2, true)
}

// FuzzWriteBody: whatever a sender posts (the protobuf inside the snappy block is the
// fuzzed part, in both versions), the handler answers without panicking, with a code the
// spec allows for a request that reached a healthy sink, and 204 only for a decodable one
// whose every histogram is valid, Histograms-Written counting them all.
func FuzzWriteBody(f *testing.F) {
	fuzzSeeds(f)
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
			histograms := 0
			if version2 {
				var r writev2.Request
				if err = r.Unmarshal(body); err == nil {
					for _, ts := range r.Timeseries {
						for i := range ts.Histograms {
							histograms++
							if verr := fromV2(&ts.Histograms[i]).Validate(); verr != nil {
								t.Fatalf("204 for an invalid histogram: %v", verr)
							}
						}
					}
				}
			} else {
				var r prompb.WriteRequest
				if err = r.Unmarshal(body); err == nil {
					for _, ts := range r.Timeseries {
						for i := range ts.Histograms {
							histograms++
							if verr := fromV1(&ts.Histograms[i]).Validate(); verr != nil {
								t.Fatalf("204 for an invalid histogram: %v", verr)
							}
						}
					}
				}
			}
			if err != nil {
				t.Fatalf("204 for a body protobuf cannot decode: %v", err)
			}
			if version2 && rec.Header().Get(HeaderHistogramsWritten) != strconv.Itoa(histograms) {
				t.Fatalf("204 with %s histograms written of %d", rec.Header().Get(HeaderHistogramsWritten), histograms)
			}
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		default:
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
	})
}

// FuzzEncodeChunks: every histogram the write path accepts (a fuzzed 1.0 request's, valid
// ones, by time) can be read back as streamed chunks without a panic or an error, and
// Prometheus' decoding of the chunks gives as many samples, at the same times.
func FuzzEncodeChunks(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, body []byte, _ bool) {
		var r prompb.WriteRequest
		if r.Unmarshal(body) != nil {
			return
		}
		for _, ts := range r.Timeseries {
			var samples []chunks.Sample
			seen := map[int64]bool{}
			for i := range ts.Histograms {
				p := fromV1(&ts.Histograms[i])
				if p.Validate() != nil || seen[ts.Histograms[i].Timestamp] {
					continue
				}
				seen[ts.Histograms[i].Timestamp] = true
				if p.H != nil {
					samples = append(samples, smp{t: ts.Histograms[i].Timestamp, h: promconv.ToProm(p.H)})
				} else {
					samples = append(samples, smp{t: ts.Histograms[i].Timestamp, fh: promconv.FloatToProm(p.FH)})
				}
			}
			slices.SortStableFunc(samples, func(a, b chunks.Sample) int {
				switch {
				case a.T() < b.T():
					return -1
				case a.T() > b.T():
					return 1
				}
				return 0
			})
			var times []int64
			err := encodeChunks(storage.NewListSeries(labels.EmptyLabels(), samples).Iterator(nil), func(c prompb.Chunk, n int) error {
				chk, err := chunkenc.FromData(chunkenc.Encoding(c.Type), c.Data)
				if err != nil {
					t.Fatalf("Prometheus cannot read a chunk: %v", err)
				}
				it := chk.Iterator(nil)
				for vt := it.Next(); vt != chunkenc.ValNone; vt = it.Next() {
					times = append(times, it.AtT())
				}
				if it.Err() != nil || chk.NumSamples() != n {
					t.Fatalf("chunk of %d samples, %d said: %v", chk.NumSamples(), n, it.Err())
				}
				return nil
			})
			if err != nil {
				t.Fatalf("encoding valid histograms: %v", err)
			}
			if len(times) != len(samples) {
				t.Fatalf("%d samples read back of %d", len(times), len(samples))
			}
			for i, s := range samples {
				if times[i] != s.T() {
					t.Fatalf("sample %d at %d read back at %d", i, s.T(), times[i])
				}
			}
		}
	})
}
