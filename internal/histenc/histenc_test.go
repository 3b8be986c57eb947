package histenc

import (
	"bytes"
	"math"
	"testing"

	"github.com/seed71701133/tablets"
)

type span = tablets.HistogramSpan

// intH is a small valid integer histogram of schema 3.
func intH(scale int64) *tablets.Histogram {
	return &tablets.Histogram{
		Schema: 3, ZeroThreshold: 0x1p-128, ZeroCount: uint64(scale), Count: uint64(12 * scale), Sum: 3.75 * float64(scale),
		PositiveSpans:   []span{{Offset: -2, Length: 2}, {Offset: 3, Length: 1}},
		PositiveBuckets: []int64{scale, 2 * scale, -scale},
		NegativeSpans:   []span{{Offset: 0, Length: 2}},
		NegativeBuckets: []int64{4 * scale, -2 * scale},
	}
}

func floatH(counts ...float64) *tablets.FloatHistogram {
	spans := []span{{Offset: 1, Length: uint32(len(counts))}}
	if len(counts) == 0 {
		spans = nil
	}
	var total float64
	for _, c := range counts {
		total += c
	}
	return &tablets.FloatHistogram{Schema: 0, Count: total, Sum: total * 1.5, PositiveSpans: spans, PositiveBuckets: counts}
}

func at(unit uint64, h any) Sample {
	switch h := h.(type) {
	case *tablets.Histogram:
		return Sample{Unit: unit, H: h}
	case *tablets.FloatHistogram:
		return Sample{Unit: unit, FH: h}
	}
	panic("not a histogram")
}

// withInt returns a copy of h changed by f.
func withInt(h *tablets.Histogram, f func(*tablets.Histogram)) *tablets.Histogram {
	c := *h
	f(&c)
	return &c
}

func withFloat(h *tablets.FloatHistogram, f func(*tablets.FloatHistogram)) *tablets.FloatHistogram {
	c := *h
	f(&c)
	return &c
}

func roundTripCases() map[string][]Sample {
	cases := map[string][]Sample{
		"one integer sample":  {at(1000, intH(1))},
		"one float sample":    {at(0, floatH(1.5, 2.25))},
		"empty histogram":     {at(5, &tablets.Histogram{}), at(6, &tablets.FloatHistogram{})},
		"units at the limits": {at(0, intH(1)), at(1, intH(2)), at(math.MaxUint64, intH(3))},
		"growing counter": {
			at(15000, intH(10)), at(30000, intH(20)), at(45000, intH(31)), at(60000, intH(40)), at(75000, intH(60)),
		},
		"counter reset": {at(1, intH(100)), at(2, intH(200)), at(3, withInt(intH(1), func(h *tablets.Histogram) { h.CounterResetHint = tablets.CounterReset }))},
		"hints": {
			at(1, withInt(intH(1), func(h *tablets.Histogram) { h.CounterResetHint = tablets.UnknownCounterReset })),
			at(2, withInt(intH(1), func(h *tablets.Histogram) { h.CounterResetHint = tablets.CounterReset })),
			at(3, withInt(intH(1), func(h *tablets.Histogram) { h.CounterResetHint = tablets.NotCounterReset })),
			at(4, withInt(intH(1), func(h *tablets.Histogram) { h.CounterResetHint = tablets.GaugeType })),
			at(5, withInt(intH(1), func(h *tablets.Histogram) { h.CounterResetHint = 255 })), // out of range: kept as given
			at(6, withFloat(floatH(1), func(h *tablets.FloatHistogram) { h.CounterResetHint = tablets.GaugeType })),
		},
		"sums": {
			at(1, withInt(intH(1), func(h *tablets.Histogram) { h.Sum = staleNaN })),
			at(2, withInt(intH(1), func(h *tablets.Histogram) { h.Sum = math.NaN() })),
			at(3, withInt(intH(1), func(h *tablets.Histogram) { h.Sum = math.Float64frombits(0xfff8000000000bad) })),
			at(4, withInt(intH(1), func(h *tablets.Histogram) { h.Sum = math.Copysign(0, -1) })),
			at(5, withInt(intH(1), func(h *tablets.Histogram) { h.Sum = math.Inf(1) })),
			at(6, withInt(intH(1), func(h *tablets.Histogram) { h.Sum = math.Inf(-1) })),
			at(7, withInt(intH(1), func(h *tablets.Histogram) { h.Sum = 5e-324 })),
			at(8, withFloat(floatH(2), func(h *tablets.FloatHistogram) { h.Sum = staleNaN })),
		},
		"decimal sums": {at(1, intH(1)), at(2, intH(2)), at(3, intH(4)), at(4, withInt(intH(4), func(h *tablets.Histogram) { h.Sum = 1234.56 }))},
		"stale marker": {at(1, intH(5)), at(2, &tablets.Histogram{Sum: staleNaN}), at(3, &tablets.FloatHistogram{Sum: staleNaN})},
		"zero thresholds": {
			at(1, withInt(intH(1), func(h *tablets.Histogram) { h.ZeroThreshold = 0 })),
			at(2, withInt(intH(1), func(h *tablets.Histogram) { h.ZeroThreshold = math.Copysign(0, -1) })),
			at(3, withInt(intH(1), func(h *tablets.Histogram) { h.ZeroThreshold = 0.001 })),
			at(4, withInt(intH(1), func(h *tablets.Histogram) { h.ZeroThreshold = math.Float64frombits(0x7ff8000000000001) })),
		},
		"spans as given": {
			at(1, &tablets.Histogram{Count: 3, PositiveSpans: []span{{Offset: math.MinInt32, Length: 0}, {Offset: 0, Length: 0}, {Offset: 7, Length: 3}, {Offset: math.MaxInt32, Length: 0}}, PositiveBuckets: []int64{1, 0, 0}}),
			at(2, &tablets.Histogram{PositiveSpans: []span{{Offset: 0, Length: 0}}}),
			at(3, &tablets.Histogram{PositiveSpans: []span{}, PositiveBuckets: []int64{}, NegativeSpans: nil}),
			at(4, &tablets.Histogram{Count: 2, NegativeSpans: []span{{Offset: math.MaxInt32, Length: 1}, {Offset: 0, Length: 1}}, NegativeBuckets: []int64{1, 0}}),
		},
		"extreme integer counts": {
			at(1, &tablets.Histogram{ZeroCount: math.MaxUint64, Count: 0, PositiveSpans: []span{{Length: 3}}, PositiveBuckets: []int64{math.MinInt64, math.MaxInt64, -1}}),
			at(2, &tablets.Histogram{ZeroCount: 0, Count: math.MaxUint64, PositiveSpans: []span{{Length: 3}}, PositiveBuckets: []int64{math.MaxInt64, math.MinInt64, 1}}),
			at(3, &tablets.Histogram{ZeroCount: 1 << 63, Count: 12345, PositiveSpans: []span{{Length: 3}}, PositiveBuckets: []int64{0, 0, 0}}),
		},
		"float counts integral": {at(1, floatH(1, 2, 3)), at(2, floatH(2, 4, 6)), at(3, floatH(3, 6, 9.5)), at(4, floatH(4, 8, 12.25))},
		"float counts any": {
			at(1, floatH(1.0/3, 2, math.Copysign(0, -1))),
			at(2, floatH(math.Inf(1), 5e-324, math.NaN())),
			at(3, withFloat(floatH(1, 2, 3), func(h *tablets.FloatHistogram) {
				h.Count, h.ZeroCount = math.Float64frombits(0x7ff4000000000001), -1
			})),
		},
		"kinds switching": {
			at(1, intH(1)), at(2, floatH(1, 2)), at(3, intH(2)), at(4, intH(3)), at(5, floatH(2, 3)), at(6, floatH(2.5, 3)), at(7, intH(4)),
		},
		"layout changing": {
			at(1, intH(1)),
			at(2, withInt(intH(2), func(h *tablets.Histogram) {
				h.PositiveSpans = []span{{Offset: -3, Length: 3}, {Offset: 2, Length: 1}}
				h.PositiveBuckets = []int64{1, 1, 2, -2}
				h.Count = 2*2 + 1 + 2 + 4 + 2 + 8 + 4
			})),
			at(3, withInt(intH(3), func(h *tablets.Histogram) { h.Schema = -4 })),
			at(4, withInt(intH(4), func(h *tablets.Histogram) { h.Schema = 8 })),
			at(5, withInt(intH(5), func(h *tablets.Histogram) { h.NegativeSpans, h.NegativeBuckets = nil, nil })),
		},
		"custom buckets": {
			at(1, customH([]float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}, 1)),
			at(2, customH([]float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}, 2)),
			at(3, customH([]float64{-1e308, -5e-324, 1.0 / 3, 1e300}, 3)),
			at(4, customH([]float64{-1, 0, 1}, 4)),
			at(5, customH([]float64{math.Copysign(0, -1), 1}, 5)),
			at(6, customH([]float64{math.Inf(-1), math.NaN(), 7}, 6)), // invalid bounds, kept as given
			at(7, withFloat(floatH(1, 2), func(h *tablets.FloatHistogram) {
				h.Schema, h.CustomValues = tablets.CustomBucketsSchema, []float64{0.1, 0.2}
			})),
		},
		"custom values with an exponential schema": {
			at(1, withInt(intH(1), func(h *tablets.Histogram) { h.CustomValues = []float64{1, 2} })),
		},
		"odd schemas": {
			at(1, withInt(intH(1), func(h *tablets.Histogram) { h.Schema = math.MinInt32 })),
			at(2, withInt(intH(1), func(h *tablets.Histogram) { h.Schema = math.MaxInt32 })),
		},
	}
	var schemas []Sample
	for s := tablets.MinSchema; s <= tablets.MaxSchema; s++ {
		schemas = append(schemas, at(uint64(s+10), withInt(intH(int64(s+5)), func(h *tablets.Histogram) { h.Schema = s })))
	}
	cases["every schema"] = schemas
	return cases
}

// customH is an integer histogram of custom bounds with a count of scale in each bucket.
func customH(bounds []float64, scale int64) *tablets.Histogram {
	buckets := make([]int64, len(bounds)+1)
	buckets[0] = scale
	return &tablets.Histogram{
		Schema: tablets.CustomBucketsSchema, Count: uint64(scale) * uint64(len(buckets)), Sum: 0.1 * float64(scale),
		PositiveSpans: []span{{Length: uint32(len(buckets))}}, PositiveBuckets: buckets, CustomValues: bounds,
	}
}

func TestRoundTrip(t *testing.T) {
	for name, samples := range roundTripCases() {
		t.Run(name, func(t *testing.T) {
			chunk := checkRoundTrip(t, samples)
			// Each prefix is a chunk of its own: the first sample codes everything.
			for n := 1; n < len(samples); n++ {
				checkRoundTrip(t, samples[n:])
			}
			// Appending to a buffer keeps what was there.
			prefix := []byte("xyz")
			if got := Append(bytes.Clone(prefix), samples); !bytes.Equal(got, append(prefix, chunk...)) {
				t.Errorf("Append to a buffer = %x, want %x after it", got, chunk)
			}
		})
	}
}

func TestEmptyChunk(t *testing.T) {
	chunk := Append(nil, nil)
	if !bytes.Equal(chunk, []byte{1, 0, 0, 0}) {
		t.Fatalf("empty chunk %x", chunk)
	}
	count, first, last, err := Header(chunk)
	if count != 0 || first != 0 || last != 0 || err != nil {
		t.Errorf("Header = %d, %d, %d, %v", count, first, last, err)
	}
	if got, err := decodeAll(chunk); len(got) != 0 || err != nil {
		t.Errorf("Decode = %d samples, %v", len(got), err)
	}
	if got, n := AppendLimit(nil, nil, MinLimit); n != 0 || !bytes.Equal(got, chunk) {
		t.Errorf("AppendLimit = %x, %d", got, n)
	}
}

// Decoded samples have memory of their own: changing one changes no other.
func TestDecodedSamplesOwnTheirMemory(t *testing.T) {
	samples := []Sample{at(1, intH(1)), at(2, intH(1)), at(3, floatH(1, 2)), at(4, floatH(1, 2))}
	got, err := decodeAll(Append(nil, samples))
	if err != nil {
		t.Fatal(err)
	}
	got[0].H.PositiveSpans[0].Length = 99
	got[0].H.PositiveBuckets[0] = 99
	got[2].FH.PositiveSpans[0].Offset = 99
	got[2].FH.PositiveBuckets[0] = 99
	checkSame(t, got[1:2], samples[1:2])
	checkSame(t, got[3:], samples[3:])
}

func TestAppendPanicsOnInvalidSamples(t *testing.T) {
	for name, samples := range map[string][]Sample{
		"units not increasing": {at(2, intH(1)), at(2, intH(1))},
		"no histogram":         {{Unit: 1}},
		"both histograms":      {{Unit: 1, H: intH(1), FH: floatH(1)}},
		"spans and buckets":    {at(1, withInt(intH(1), func(h *tablets.Histogram) { h.PositiveBuckets = h.PositiveBuckets[:2] }))},
		"negative offset": {at(1, withInt(intH(1), func(h *tablets.Histogram) {
			h.NegativeSpans = []span{{Offset: 0, Length: 1}, {Offset: -1, Length: 1}}
		}))},
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			Append(nil, samples)
		})
	}
}

// A chunk of samples with the same layout says so with one bit a sample: a chunk of a
// constant histogram costs a few bits a sample whatever its bucket count.
func TestSameLayoutIsCheap(t *testing.T) {
	const n = 200
	samples := make([]Sample, n)
	for i := range samples {
		samples[i] = at(uint64(i)*15000, customH([]float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}, 7))
	}
	chunk := checkRoundTrip(t, samples)
	one := Append(nil, samples[:1])
	// After the first: a time, a head, a zero count, 12 buckets, a count and a sum: 17 bits.
	// The header grows by 4 bytes (the count and the span), the padding by at most one.
	if extra, want := len(chunk)-len(one), (17*(n-1)+7)/8+5; extra > want {
		t.Errorf("%d bytes for %d more samples, want at most %d", extra, n-1, want)
	}
}

// A bucket that appears mid-chunk costs its layout and its own first counts: the other
// buckets keep their predictions across the layout change, by index.
func TestNewBucketKeepsTheOthersPredictions(t *testing.T) {
	samples := latencySamples(240, 50, 0, 9)
	grown := make([]Sample, len(samples))
	for i, s := range samples {
		h := *s.H
		if i >= 120 { // a bucket below the others gets one observation a scrape from now on
			first := h.PositiveSpans[0]
			h.PositiveSpans = []span{{Offset: first.Offset - 3, Length: 1}, {Offset: 2, Length: first.Length}}
			n := int64(i - 119)
			h.PositiveBuckets = append([]int64{n, h.PositiveBuckets[0] - n}, h.PositiveBuckets[1:]...)
			h.Count += uint64(n)
		}
		grown[i] = Sample{Unit: s.Unit, H: &h}
	}
	before := len(checkRoundTrip(t, samples))
	after := len(checkRoundTrip(t, grown))
	// The new head and layout take 20 bytes (the zero threshold alone 65 bits) and the new
	// bucket a bit a sample, 15 bytes; restarting the 20 other buckets would cost some 30
	// bits each, 75 bytes more.
	if after-before > 40 {
		t.Errorf("a new bucket costs %d bytes (%d, then %d)", after-before, before, after)
	}
	t.Logf("%d bytes, %d with a new bucket", before, after)
}

// Empty spans, buckets and bounds come back nil, as documented: the chunk does not tell
// them from nil.
func TestEmptyDecodesAsNil(t *testing.T) {
	h := &tablets.Histogram{Schema: tablets.CustomBucketsSchema, PositiveSpans: []span{}, NegativeSpans: []span{},
		PositiveBuckets: []int64{}, NegativeBuckets: []int64{}, CustomValues: []float64{}}
	got, err := decodeAll(Append(nil, []Sample{{Unit: 1, H: h}}))
	if err != nil {
		t.Fatal(err)
	}
	g := got[0].H
	if g.PositiveSpans != nil || g.NegativeSpans != nil || g.PositiveBuckets != nil || g.NegativeBuckets != nil || g.CustomValues != nil {
		t.Errorf("empty slices decode as %+v", g)
	}
}
