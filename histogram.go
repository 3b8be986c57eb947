package tablets

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// ErrInvalidHistogram: a native histogram sample that cannot be stored: a schema out of
// range, spans that do not match the bucket counts, custom bounds that are not strictly
// increasing, a negative bucket count, a NaN count, ... (see Histogram.Validate).
var ErrInvalidHistogram = errors.New("tablets: invalid histogram")

// CounterResetHint says how a histogram sample relates to the previous one of its series,
// with Prometheus' values (model/histogram.CounterResetHint): it is stored as written.
type CounterResetHint uint8

const (
	UnknownCounterReset CounterResetHint = iota // may or may not follow a counter reset
	CounterReset                                // follows a counter reset
	NotCounterReset                             // does not follow a counter reset
	GaugeType                                   // a gauge histogram: counter resets mean nothing
)

// Schemas of native histograms: exponential ones from MinSchema to MaxSchema (bucket
// boundaries at powers of 2^(2^-schema)), and CustomBucketsSchema, whose upper bounds are
// its CustomValues (NHCB).
const (
	MinSchema           int32 = -4
	MaxSchema           int32 = 8
	CustomBucketsSchema int32 = -53
)

// HistogramSpan is a run of Length consecutive buckets that starts Offset buckets after the
// previous span ends (the first span: at bucket index Offset).
type HistogramSpan struct {
	Offset int32
	Length uint32
}

// Histogram is a native histogram sample with integer counts, field for field Prometheus'
// model/histogram.Histogram. Bucket counts are deltas, as Prometheus writes them: the first
// bucket's absolute count, then each bucket's difference to the one before (across spans,
// and separately for each side).
type Histogram struct {
	CounterResetHint CounterResetHint
	Schema           int32
	ZeroThreshold    float64
	ZeroCount        uint64
	Count            uint64
	Sum              float64
	PositiveSpans    []HistogramSpan
	NegativeSpans    []HistogramSpan
	PositiveBuckets  []int64
	NegativeBuckets  []int64
	// CustomValues are the upper bounds of the buckets of CustomBucketsSchema (strictly
	// increasing, +Inf implied, never written); nil for the exponential schemas.
	CustomValues []float64
}

// FloatHistogram is a native histogram sample with float counts, field for field
// Prometheus' model/histogram.FloatHistogram. Bucket counts are absolute.
type FloatHistogram struct {
	CounterResetHint CounterResetHint
	Schema           int32
	ZeroThreshold    float64
	ZeroCount        float64
	Count            float64
	Sum              float64
	PositiveSpans    []HistogramSpan
	NegativeSpans    []HistogramSpan
	PositiveBuckets  []float64
	NegativeBuckets  []float64
	CustomValues     []float64
}

// HistogramPoint is one histogram sample of a series: exactly one of H and FH is set. A
// staleness marker is a histogram whose Sum has the bits of Prometheus' stale NaN.
type HistogramPoint struct {
	Time time.Time
	H    *Histogram
	FH   *FloatHistogram
}

// SeriesHistograms are histogram samples of one series, in a write of many series.
type SeriesHistograms struct {
	Series     string
	Histograms []HistogramPoint
}

// SeriesHistogram is a histogram sample together with its series, as a query of many
// series yields it.
type SeriesHistogram struct {
	Series string
	HistogramPoint
}

// Validate checks a histogram point: exactly one of H and FH, and that one valid.
func (p HistogramPoint) Validate() error {
	switch {
	case p.H != nil && p.FH != nil:
		return fmt.Errorf("%w: both an integer and a float histogram", ErrInvalidHistogram)
	case p.H != nil:
		return p.H.Validate()
	case p.FH != nil:
		return p.FH.Validate()
	}
	return fmt.Errorf("%w: no histogram", ErrInvalidHistogram)
}

// Validate applies Prometheus' rules (model/histogram's Validate, and the schema range its
// appenders check): the schema is exponential or CustomBucketsSchema; spans hold as many
// buckets as given, and only the first has a negative offset; no bucket count is negative;
// the buckets, with the zero bucket, hold Count observations (at most Count when Sum is NaN);
// custom bounds are strictly increasing, finite and cover the spans, and only
// CustomBucketsSchema has them (and no zero bucket nor negative side). Errors wrap
// ErrInvalidHistogram.
func (h *Histogram) Validate() error {
	var count uint64
	var err error
	if err = checkLayout(h.Schema, h.ZeroThreshold, float64(h.ZeroCount), h.PositiveSpans, h.NegativeSpans, len(h.PositiveBuckets), len(h.NegativeBuckets), h.CustomValues); err != nil {
		return err
	}
	for side, buckets := range [][]int64{h.PositiveBuckets, h.NegativeBuckets} {
		var abs int64
		for i, d := range buckets {
			abs += d
			if abs < 0 {
				return invalidHistogram("%s bucket %d has a negative count %d", sideName(side), i+1, abs)
			}
			count += uint64(abs)
		}
	}
	count += h.ZeroCount
	if math.IsNaN(h.Sum) {
		if count > h.Count {
			return invalidHistogram("%d observations in buckets, but Count is %d", count, h.Count)
		}
	} else if count != h.Count {
		return invalidHistogram("%d observations in buckets, but Count is %d", count, h.Count)
	}
	return nil
}

// Validate is Histogram.Validate for float counts, which must also not be NaN. As in
// Prometheus, Count is not compared with the buckets' total (float rounding).
func (h *FloatHistogram) Validate() error {
	if math.IsNaN(h.Count) || math.IsNaN(h.ZeroCount) {
		return invalidHistogram("a NaN count")
	}
	if h.Count < 0 || h.ZeroCount < 0 {
		return invalidHistogram("a negative count")
	}
	if err := checkLayout(h.Schema, h.ZeroThreshold, h.ZeroCount, h.PositiveSpans, h.NegativeSpans, len(h.PositiveBuckets), len(h.NegativeBuckets), h.CustomValues); err != nil {
		return err
	}
	for side, buckets := range [][]float64{h.PositiveBuckets, h.NegativeBuckets} {
		for i, c := range buckets {
			if c < 0 || math.IsNaN(c) {
				return invalidHistogram("%s bucket %d has count %v", sideName(side), i+1, c)
			}
		}
	}
	return nil
}

func invalidHistogram(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidHistogram}, args...)...)
}

func sideName(side int) string {
	if side == 0 {
		return "positive"
	}
	return "negative"
}

// checkLayout checks what integer and float histograms share: schema, spans, bounds.
func checkLayout(schema int32, zeroThreshold, zeroCount float64, pos, neg []HistogramSpan, nPos, nNeg int, custom []float64) error {
	if schema == CustomBucketsSchema {
		prev := math.Inf(-1)
		for _, b := range custom {
			if !(b > prev) {
				return invalidHistogram("custom bounds are not strictly increasing (%v after %v)", b, prev)
			}
			prev = b
		}
		if math.IsInf(prev, 1) {
			return invalidHistogram("the last custom bound is +Inf (it is implied)")
		}
		if zeroCount != 0 || zeroThreshold != 0 {
			return invalidHistogram("custom buckets with a zero bucket")
		}
		if len(neg) > 0 || nNeg > 0 {
			return invalidHistogram("custom buckets with a negative side")
		}
		spanned, covered := 0, 0
		for i, s := range pos {
			if s.Offset < 0 {
				return invalidHistogram("span %d has a negative offset %d", i+1, s.Offset)
			}
			spanned += int(s.Length)
			covered += int(s.Length) + int(s.Offset)
		}
		if spanned != nPos {
			return invalidHistogram("spans hold %d buckets, %d given", spanned, nPos)
		}
		if len(custom)+1 < covered {
			return invalidHistogram("%d custom bounds do not cover spans of %d buckets", len(custom), covered)
		}
		return nil
	}
	if schema < MinSchema || schema > MaxSchema {
		return invalidHistogram("schema %d is not in %d..%d nor %d", schema, MinSchema, MaxSchema, CustomBucketsSchema)
	}
	if custom != nil {
		return invalidHistogram("custom bounds with exponential schema %d", schema)
	}
	if zeroThreshold < 0 || math.IsNaN(zeroThreshold) {
		return invalidHistogram("zero threshold %v", zeroThreshold)
	}
	for side, sp := range [][]HistogramSpan{pos, neg} {
		n := 0
		for i, s := range sp {
			if i > 0 && s.Offset < 0 {
				return invalidHistogram("%s span %d has a negative offset %d", sideName(side), i+1, s.Offset)
			}
			n += int(s.Length)
		}
		if want := [2]int{nPos, nNeg}[side]; n != want {
			return invalidHistogram("%s spans hold %d buckets, %d given", sideName(side), n, want)
		}
	}
	return nil
}
