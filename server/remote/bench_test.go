package remote

import (
	"context"
	"net/http"
	"testing"

	"github.com/prometheus/prometheus/prompb"

	"github.com/seed71701133/tablets/tsdb"
)

// discardSink stores nothing and says it stored everything.
type discardSink struct{}

func (discardSink) SeriesOfMany(_ context.Context, sets []tsdb.Labels) ([]string, error) {
	return make([]string, len(sets)), nil
}
func (discardSink) WriteSamples(context.Context, []tsdb.SeriesPoints, []tsdb.SeriesHistograms) error {
	return nil
}

// BenchmarkWriteHistogramsHandler: the handler's own cost (decoding, validating, grouping)
// of a 1.0 request of 500 latency histograms (20 buckets each, one of each of 500 series),
// into a sink that stores nothing: ns and bytes allocated a histogram sample.
func BenchmarkWriteHistogramsHandler(b *testing.B) {
	const series, buckets = 500, 20
	req := &prompb.WriteRequest{}
	for i := range series {
		deltas := make([]int64, buckets)
		var count, prev int64
		for j := range buckets {
			c := int64((1 + (i+j)%7) * (buckets - j))
			deltas[j], prev = c-prev, c
			count += c
		}
		req.Timeseries = append(req.Timeseries, prompb.TimeSeries{
			Labels: v1Labels("__name__", "http_request_duration_seconds", "instance", "host-"+string(rune('a'+i%26))+string(rune('a'+i/26)), "job", "api"),
			Histograms: []prompb.Histogram{{Count: &prompb.Histogram_CountInt{CountInt: uint64(count)}, Sum: 1.5, Schema: 3,
				ZeroCount:     &prompb.Histogram_ZeroCountInt{},
				PositiveSpans: []prompb.BucketSpan{{Offset: -20, Length: buckets / 2}, {Offset: 3, Length: buckets / 2}}, PositiveDeltas: deltas,
				Timestamp: 1_700_000_000_000}},
		})
	}
	body := encodeV1(b, req)
	h := newWrite(b, discardSink{}, nil)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if w := post(b, h, "", "snappy", body); w.Code != http.StatusNoContent {
			b.Fatalf("%d %s", w.Code, w.Body)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*series), "ns/sample")
}
