package tiers

import (
	"math"
	"slices"

	"github.com/seed71701133/tablets"
)

// histBucket is a bucket of a histogram, by its bounds.
type histBucket struct {
	lower, upper, count float64
}

// ascendingBuckets lists h's buckets from the lowest values to the highest: the negative
// ones, the zero bucket (if it holds observations), the positive ones; as Prometheus'
// AllBucketIterator, a bucket reaching into the zero bucket ends at its threshold.
func ascendingBuckets(h *tablets.FloatHistogram) []histBucket {
	d := dense{schema: h.Schema, custom: h.CustomValues}
	var out []histBucket
	clamp := func(b histBucket) histBucket {
		switch {
		case b.upper < 0 && b.upper > -h.ZeroThreshold:
			b.upper = -h.ZeroThreshold
		case b.lower > 0 && b.lower < h.ZeroThreshold:
			b.lower = h.ZeroThreshold
		}
		return b
	}
	bucketIndexes(h.NegativeSpans, func(i int, idx int32) {
		if i < len(h.NegativeBuckets) {
			lo, hi := d.bounds(idx)
			out = append(out, clamp(histBucket{-hi, -lo, h.NegativeBuckets[i]}))
		}
	})
	slices.Reverse(out)
	if h.ZeroCount > 0 && h.Schema != tablets.CustomBucketsSchema {
		out = append(out, histBucket{-h.ZeroThreshold, h.ZeroThreshold, h.ZeroCount})
	}
	bucketIndexes(h.PositiveSpans, func(i int, idx int32) {
		if i < len(h.PositiveBuckets) {
			lo, hi := d.bounds(idx)
			out = append(out, clamp(histBucket{lo, hi, h.PositiveBuckets[i]}))
		}
	})
	return out
}

// HistogramQuantile returns the q-quantile of the observations of the native histogram h,
// as Prometheus' histogram_quantile computes it for native histograms: the bucket where the
// rank q × Count falls, and within it a linear interpolation (custom bounds, the zero
// bucket) or one on a logarithmic scale (exponential buckets). It is -Inf for q < 0, +Inf
// for q > 1, NaN for a NaN q or an empty or nil h; a quantile in the first custom bucket is
// interpolated from 0 (or is its bound if that is not positive), one in the last (+Inf)
// custom bucket is its lower bound.
func HistogramQuantile(q float64, h *tablets.FloatHistogram) float64 {
	switch {
	case q < 0:
		return math.Inf(-1)
	case q > 1:
		return math.Inf(1)
	case h == nil || h.Count == 0 || math.IsNaN(q):
		return math.NaN()
	}
	buckets := ascendingBuckets(h)
	forward := math.IsNaN(h.Sum) || q < 0.5
	rank := (1 - q) * h.Count
	if forward {
		rank = q * h.Count
	} else {
		slices.Reverse(buckets)
	}
	var bucket histBucket
	var count float64
	for _, b := range buckets {
		bucket = b
		if b.count == 0 {
			continue
		}
		count += b.count
		if count >= rank {
			break
		}
	}
	custom := h.Schema == tablets.CustomBucketsSchema
	switch {
	case !custom && bucket.lower < 0 && bucket.upper > 0:
		switch {
		case len(h.NegativeBuckets) == 0 && len(h.PositiveBuckets) > 0:
			bucket.lower = 0
		case len(h.PositiveBuckets) == 0 && len(h.NegativeBuckets) > 0:
			bucket.upper = 0
		}
	case custom && math.IsInf(bucket.lower, -1):
		if bucket.upper <= 0 {
			return bucket.upper
		}
		bucket.lower = 0
	case custom && math.IsInf(bucket.upper, 1):
		return bucket.lower
	}
	count = min(count, h.Count) // float rounding
	if count < rank {
		if math.IsNaN(h.Sum) {
			return math.NaN() // NaN observations: the rank is past the buckets
		}
		return bucket.upper
	}
	if forward {
		rank -= count - bucket.count
	} else {
		rank = count - rank
	}
	fraction := rank / bucket.count
	if custom || (bucket.lower <= 0 && bucket.upper >= 0) {
		return bucket.lower + (bucket.upper-bucket.lower)*fraction
	}
	logLower, logUpper := math.Log2(math.Abs(bucket.lower)), math.Log2(math.Abs(bucket.upper))
	if bucket.lower > 0 {
		return math.Exp2(logLower + (logUpper-logLower)*fraction)
	}
	return -math.Exp2(logUpper + (logLower-logUpper)*(1-fraction))
}
