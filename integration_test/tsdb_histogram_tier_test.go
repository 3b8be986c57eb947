package integration_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser/posrange"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/server/promconv"
	"github.com/seed71701133/tablets/tsdb"
)

// randomFloatHistogram returns a valid float histogram: exponential (schemas -4..8, zero
// bucket, both sides) or of custom bounds, sparse, with empty buckets here and there.
func randomFloatHistogram(r *rand.Rand) *tablets.FloatHistogram {
	h := &tablets.FloatHistogram{CounterResetHint: tablets.GaugeType}
	spans := func(n int, firstOffset int32) ([]tablets.HistogramSpan, []float64) {
		var sp []tablets.HistogramSpan
		var bs []float64
		for i := 0; i < n; {
			l := 1 + r.IntN(4)
			off := int32(r.IntN(3))
			if i == 0 {
				off = firstOffset
			}
			sp = append(sp, tablets.HistogramSpan{Offset: off, Length: uint32(l)})
			for range l {
				c := float64(r.IntN(20))
				if r.IntN(5) == 0 {
					c = 0
				}
				bs = append(bs, c)
				h.Count += c
			}
			i += l
		}
		return sp, bs
	}
	if r.IntN(4) == 0 {
		h.Schema = tablets.CustomBucketsSchema
		b := 0.0
		for range 3 + r.IntN(6) {
			b += 0.5 + r.Float64()*3
			h.CustomValues = append(h.CustomValues, b)
		}
		n := 1 + r.IntN(len(h.CustomValues)+1) // the last bucket is (last bound, +Inf]
		off := r.IntN(len(h.CustomValues) + 2 - n)
		h.PositiveSpans = []tablets.HistogramSpan{{Offset: int32(off), Length: uint32(n)}}
		for range n {
			c := float64(r.IntN(20))
			h.PositiveBuckets = append(h.PositiveBuckets, c)
			h.Count += c
		}
		h.Sum = h.Count * 2
		return h
	}
	h.Schema = int32(r.IntN(13)) - 4
	if r.IntN(2) == 0 {
		h.ZeroThreshold = []float64{1e-128, 0.001, 0.5}[r.IntN(3)]
		h.ZeroCount = float64(r.IntN(5))
		h.Count += h.ZeroCount
	}
	h.PositiveSpans, h.PositiveBuckets = spans(r.IntN(12), int32(r.IntN(20))-10)
	if r.IntN(2) == 0 {
		h.NegativeSpans, h.NegativeBuckets = spans(r.IntN(8), int32(r.IntN(20))-10)
	}
	h.Sum = h.Count
	return h
}

// tsdb.HistogramQuantile answers as Prometheus' histogram_quantile does, on every kind of
// native histogram.
func TestHistogramQuantileMatchesPrometheus(t *testing.T) {
	r := rand.New(rand.NewPCG(20, 26))
	qs := []float64{0, 0.001, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 1, -0.5, 1.5, math.NaN()}
	for range 3000 {
		h := randomFloatHistogram(r)
		if err := h.Validate(); err != nil {
			t.Fatalf("the test made a bad histogram: %v", err)
		}
		// Not a NaN Sum (NaN observations): there, at the pinned module, Prometheus'
		// HistogramQuantile interpolates in the last bucket instead of the one the rank falls
		// in (its loop looking for NaN observations overwrites the bucket); the unit tests
		// check tsdb's answer in that case.
		ph := promconv.FloatToProm(h)
		if err := ph.Validate(); err != nil {
			t.Fatalf("Prometheus rejects %+v: %v", ph, err)
		}
		mine := promconv.FloatFromProm(ph)
		for _, q := range qs {
			want, _ := promql.HistogramQuantile(q, ph, "h", posrange.PositionRange{})
			got := tsdb.HistogramQuantile(q, mine)
			if !(got == want || math.IsNaN(got) && math.IsNaN(want) || math.Abs(got-want) <= 1e-12*math.Abs(want)) {
				t.Fatalf("q %v of %v (%+v): %v, Prometheus %v", q, ph, *ph, got, want)
			}
		}
	}
}
