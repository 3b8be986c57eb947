package remote

import (
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"

	"github.com/seed71701133/tablets"
)

// Histograms are converted straight from the decoded protobuf, field for field (the bucket
// slices are the request's own, not copied): a sample is stored exactly as sent, deltas or
// absolute counts, custom bounds, counter reset hint and the staleness marker's NaN bits
// included. Whether it is an integer or a float histogram is the type of its count, as in
// Prometheus. Empty spans, buckets and bounds become nil.

// histogramWeight is what a histogram sample counts against MaxSamplesInFlight, in float
// samples: about its memory once built (a float point is 32 bytes; a histogram point some
// 250 bytes of structure plus 8 bytes a bucket, span and bound), so 8 plus a quarter of its
// buckets, spans and custom bounds. A 20-bucket histogram weighs 14 samples.
func histogramWeight(buckets, spans, bounds int) int {
	return 8 + (buckets+spans+bounds+3)/4
}

func weightV1(h *prompb.Histogram) int {
	return histogramWeight(len(h.PositiveDeltas)+len(h.NegativeDeltas)+len(h.PositiveCounts)+len(h.NegativeCounts),
		len(h.PositiveSpans)+len(h.NegativeSpans), len(h.CustomValues))
}

func weightV2(h *writev2.Histogram) int {
	return histogramWeight(len(h.PositiveDeltas)+len(h.NegativeDeltas)+len(h.PositiveCounts)+len(h.NegativeCounts),
		len(h.PositiveSpans)+len(h.NegativeSpans), len(h.CustomValues))
}

// fromV1 converts a remote-write 1.0 histogram sample.
func fromV1(h *prompb.Histogram) tablets.HistogramPoint {
	if _, ok := h.Count.(*prompb.Histogram_CountFloat); ok {
		return tablets.HistogramPoint{FH: &tablets.FloatHistogram{
			CounterResetHint: tablets.CounterResetHint(h.ResetHint),
			Schema:           h.Schema,
			ZeroThreshold:    h.ZeroThreshold,
			ZeroCount:        h.GetZeroCountFloat(),
			Count:            h.GetCountFloat(),
			Sum:              h.Sum,
			PositiveSpans:    spansV1(h.PositiveSpans),
			NegativeSpans:    spansV1(h.NegativeSpans),
			PositiveBuckets:  orNil(h.PositiveCounts),
			NegativeBuckets:  orNil(h.NegativeCounts),
			CustomValues:     orNil(h.CustomValues),
		}}
	}
	return tablets.HistogramPoint{H: &tablets.Histogram{
		CounterResetHint: tablets.CounterResetHint(h.ResetHint),
		Schema:           h.Schema,
		ZeroThreshold:    h.ZeroThreshold,
		ZeroCount:        h.GetZeroCountInt(),
		Count:            h.GetCountInt(),
		Sum:              h.Sum,
		PositiveSpans:    spansV1(h.PositiveSpans),
		NegativeSpans:    spansV1(h.NegativeSpans),
		PositiveBuckets:  orNil(h.PositiveDeltas),
		NegativeBuckets:  orNil(h.NegativeDeltas),
		CustomValues:     orNil(h.CustomValues),
	}}
}

// fromV2 converts a remote-write 2.0 histogram sample.
func fromV2(h *writev2.Histogram) tablets.HistogramPoint {
	if _, ok := h.Count.(*writev2.Histogram_CountFloat); ok {
		return tablets.HistogramPoint{FH: &tablets.FloatHistogram{
			CounterResetHint: tablets.CounterResetHint(h.ResetHint),
			Schema:           h.Schema,
			ZeroThreshold:    h.ZeroThreshold,
			ZeroCount:        h.GetZeroCountFloat(),
			Count:            h.GetCountFloat(),
			Sum:              h.Sum,
			PositiveSpans:    spansV2(h.PositiveSpans),
			NegativeSpans:    spansV2(h.NegativeSpans),
			PositiveBuckets:  orNil(h.PositiveCounts),
			NegativeBuckets:  orNil(h.NegativeCounts),
			CustomValues:     orNil(h.CustomValues),
		}}
	}
	return tablets.HistogramPoint{H: &tablets.Histogram{
		CounterResetHint: tablets.CounterResetHint(h.ResetHint),
		Schema:           h.Schema,
		ZeroThreshold:    h.ZeroThreshold,
		ZeroCount:        h.GetZeroCountInt(),
		Count:            h.GetCountInt(),
		Sum:              h.Sum,
		PositiveSpans:    spansV2(h.PositiveSpans),
		NegativeSpans:    spansV2(h.NegativeSpans),
		PositiveBuckets:  orNil(h.PositiveDeltas),
		NegativeBuckets:  orNil(h.NegativeDeltas),
		CustomValues:     orNil(h.CustomValues),
	}}
}

func orNil[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return s
}

func spansV1(s []prompb.BucketSpan) []tablets.HistogramSpan {
	if len(s) == 0 {
		return nil
	}
	out := make([]tablets.HistogramSpan, len(s))
	for i, sp := range s {
		out[i] = tablets.HistogramSpan{Offset: sp.Offset, Length: sp.Length}
	}
	return out
}

func spansV2(s []writev2.BucketSpan) []tablets.HistogramSpan {
	if len(s) == 0 {
		return nil
	}
	out := make([]tablets.HistogramSpan, len(s))
	for i, sp := range s {
		out[i] = tablets.HistogramSpan{Offset: sp.Offset, Length: sp.Length}
	}
	return out
}
