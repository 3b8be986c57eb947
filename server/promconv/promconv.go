// Package promconv converts between the library's native histograms (package tablets) and
// Prometheus' (model/histogram, prompb): field for field, so that every sample round-trips
// exactly, custom bounds included (prompb.FromIntHistogram, at the pinned module, leaves
// them out: ToPrompb does not).
package promconv

import (
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/prompb"

	"github.com/seed71701133/tablets"
)

func spansFromProm(s []histogram.Span) []tablets.HistogramSpan {
	if s == nil {
		return nil
	}
	out := make([]tablets.HistogramSpan, len(s))
	for i, sp := range s {
		out[i] = tablets.HistogramSpan{Offset: sp.Offset, Length: sp.Length}
	}
	return out
}

func spansToProm(s []tablets.HistogramSpan) []histogram.Span {
	if s == nil {
		return nil
	}
	out := make([]histogram.Span, len(s))
	for i, sp := range s {
		out[i] = histogram.Span{Offset: sp.Offset, Length: sp.Length}
	}
	return out
}

// FromProm converts an integer histogram of Prometheus'.
func FromProm(h *histogram.Histogram) *tablets.Histogram {
	return &tablets.Histogram{
		CounterResetHint: tablets.CounterResetHint(h.CounterResetHint),
		Schema:           h.Schema,
		ZeroThreshold:    h.ZeroThreshold,
		ZeroCount:        h.ZeroCount,
		Count:            h.Count,
		Sum:              h.Sum,
		PositiveSpans:    spansFromProm(h.PositiveSpans),
		NegativeSpans:    spansFromProm(h.NegativeSpans),
		PositiveBuckets:  h.PositiveBuckets,
		NegativeBuckets:  h.NegativeBuckets,
		CustomValues:     h.CustomValues,
	}
}

// ToProm converts an integer histogram to Prometheus'.
func ToProm(h *tablets.Histogram) *histogram.Histogram {
	return &histogram.Histogram{
		CounterResetHint: histogram.CounterResetHint(h.CounterResetHint),
		Schema:           h.Schema,
		ZeroThreshold:    h.ZeroThreshold,
		ZeroCount:        h.ZeroCount,
		Count:            h.Count,
		Sum:              h.Sum,
		PositiveSpans:    spansToProm(h.PositiveSpans),
		NegativeSpans:    spansToProm(h.NegativeSpans),
		PositiveBuckets:  h.PositiveBuckets,
		NegativeBuckets:  h.NegativeBuckets,
		CustomValues:     h.CustomValues,
	}
}

// FloatFromProm converts a float histogram of Prometheus'.
func FloatFromProm(h *histogram.FloatHistogram) *tablets.FloatHistogram {
	return &tablets.FloatHistogram{
		CounterResetHint: tablets.CounterResetHint(h.CounterResetHint),
		Schema:           h.Schema,
		ZeroThreshold:    h.ZeroThreshold,
		ZeroCount:        h.ZeroCount,
		Count:            h.Count,
		Sum:              h.Sum,
		PositiveSpans:    spansFromProm(h.PositiveSpans),
		NegativeSpans:    spansFromProm(h.NegativeSpans),
		PositiveBuckets:  h.PositiveBuckets,
		NegativeBuckets:  h.NegativeBuckets,
		CustomValues:     h.CustomValues,
	}
}

// FloatToProm converts a float histogram to Prometheus'.
func FloatToProm(h *tablets.FloatHistogram) *histogram.FloatHistogram {
	return &histogram.FloatHistogram{
		CounterResetHint: histogram.CounterResetHint(h.CounterResetHint),
		Schema:           h.Schema,
		ZeroThreshold:    h.ZeroThreshold,
		ZeroCount:        h.ZeroCount,
		Count:            h.Count,
		Sum:              h.Sum,
		PositiveSpans:    spansToProm(h.PositiveSpans),
		NegativeSpans:    spansToProm(h.NegativeSpans),
		PositiveBuckets:  h.PositiveBuckets,
		NegativeBuckets:  h.NegativeBuckets,
		CustomValues:     h.CustomValues,
	}
}

// ToPrompb is the remote-read protobuf of a histogram sample at t ms: prompb.FromIntHistogram
// (or FromFloatHistogram) with the custom bounds they leave out.
func ToPrompb(t int64, p tablets.HistogramPoint) prompb.Histogram {
	var out prompb.Histogram
	if p.H != nil {
		out = prompb.FromIntHistogram(t, ToProm(p.H))
		out.CustomValues = p.H.CustomValues
	} else {
		out = prompb.FromFloatHistogram(t, FloatToProm(p.FH))
		out.CustomValues = p.FH.CustomValues
	}
	return out
}

// FromPrompb converts a remote-write 1.0 histogram (custom bounds kept).
func FromPrompb(h prompb.Histogram) tablets.HistogramPoint {
	if h.IsFloatHistogram() {
		return tablets.HistogramPoint{FH: FloatFromProm(h.ToFloatHistogram())}
	}
	return tablets.HistogramPoint{H: FromProm(h.ToIntHistogram())}
}
