package histenc

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/seed71701133/tablets"
)

// randomSeries makes n samples of one series that does what series do, at random: counters
// that grow and reset, buckets that appear and go, layouts and kinds that switch, special
// floats. Everything a writer may be given, valid for tablets or not, as long as Append
// takes it.
type randomSeries struct {
	rng *rand.Rand
	// The current layout and counts, changed a little at each sample.
	schema  int32
	pos     []tablets.HistogramSpan
	neg     []tablets.HistogramSpan
	custom  []float64
	counts  []int64 // absolute, positive then negative
	float   bool
	decimal bool // float counts stay decimals
	hint    tablets.CounterResetHint
	unit    uint64
}

func newRandomSeries(seed uint64) *randomSeries {
	r := &randomSeries{rng: rand.New(rand.NewPCG(seed, seed^0x5eed))}
	r.unit = r.rng.Uint64N(1 << 50)
	r.newLayout()
	return r
}

func (r *randomSeries) randomSpans(maxSpans int) []tablets.HistogramSpan {
	n := r.rng.IntN(maxSpans + 1)
	if n == 0 {
		return nil
	}
	spans := make([]tablets.HistogramSpan, n)
	for i := range spans {
		spans[i] = tablets.HistogramSpan{Offset: int32(r.rng.IntN(5)), Length: uint32(r.rng.IntN(6))}
	}
	spans[0].Offset = int32(r.rng.IntN(40) - 20)
	return spans
}

func (r *randomSeries) newLayout() {
	switch r.rng.IntN(4) {
	case 0:
		r.schema = tablets.CustomBucketsSchema
		r.custom = nil
		for b := 0.0; len(r.custom) < r.rng.IntN(30); {
			b += []float64{0.005, 1.0 / 7, 10, 2.5}[r.rng.IntN(4)]
			r.custom = append(r.custom, b)
		}
		r.pos, r.neg = r.randomSpans(3), nil
	default:
		r.schema = tablets.MinSchema + int32(r.rng.IntN(13))
		r.custom = nil
		r.pos, r.neg = r.randomSpans(4), r.randomSpans(2)
	}
	r.counts = make([]int64, bucketCount(r.pos)+bucketCount(r.neg))
}

func (r *randomSeries) next() Sample {
	rng := r.rng
	switch rng.IntN(20) {
	case 0:
		r.newLayout()
	case 1:
		r.float = !r.float
	case 2:
		r.decimal = !r.decimal
	case 3:
		r.hint = tablets.CounterResetHint(rng.IntN(4))
	case 4:
		clear(r.counts) // a counter reset
	}
	rate := math.Exp2(float64(rng.IntN(20)))
	for i := range r.counts {
		r.counts[i] += int64(rng.Float64() * rate * float64(i%5))
	}
	switch rng.IntN(10) {
	case 0:
		r.unit += 1 + rng.Uint64N(1<<40)
	case 1, 2:
		r.unit += 15000 + rng.Uint64N(20) - 10
	default:
		r.unit += 15000
	}
	sum := float64(rng.IntN(1000)) / 100
	switch rng.IntN(12) {
	case 0:
		sum = staleNaN
	case 1:
		sum = math.Copysign(0, -1)
	case 2:
		sum = math.Inf(rng.IntN(2)*2 - 1)
	case 3, 4:
		sum = rng.NormFloat64() * 1e6
	}
	nPos := bucketCount(r.pos)
	if !r.float {
		h := &tablets.Histogram{
			CounterResetHint: r.hint, Schema: r.schema, Sum: sum, CustomValues: r.custom,
			PositiveSpans: r.pos, NegativeSpans: r.neg,
			PositiveBuckets: deltas(r.counts[:nPos]), NegativeBuckets: deltas(r.counts[nPos:]),
		}
		if r.schema != tablets.CustomBucketsSchema {
			h.ZeroThreshold, h.ZeroCount = 0x1p-128, uint64(rng.IntN(3))
		}
		h.Count = h.ZeroCount + uint64(rng.IntN(2)) // usually the buckets' total, sometimes not
		for _, c := range r.counts {
			h.Count += uint64(c)
		}
		return Sample{Unit: r.unit, H: h}
	}
	h := &tablets.FloatHistogram{
		CounterResetHint: r.hint, Schema: r.schema, Sum: sum, CustomValues: r.custom,
		PositiveSpans: r.pos, NegativeSpans: r.neg,
		PositiveBuckets: r.floats(r.counts[:nPos]), NegativeBuckets: r.floats(r.counts[nPos:]),
	}
	for _, side := range [][]float64{h.PositiveBuckets, h.NegativeBuckets} {
		for _, c := range side {
			h.Count += c
		}
	}
	if rng.IntN(10) == 0 {
		h.Count = math.NaN()
	}
	return Sample{Unit: r.unit, FH: h}
}

func deltas(abs []int64) []int64 {
	if len(abs) == 0 {
		return nil
	}
	out := make([]int64, len(abs))
	var prev int64
	for i, c := range abs {
		out[i], prev = c-prev, c
	}
	return out
}

func (r *randomSeries) floats(abs []int64) []float64 {
	if len(abs) == 0 {
		return nil
	}
	out := make([]float64, len(abs))
	for i, c := range abs {
		out[i] = float64(c)
		if !r.decimal {
			out[i] /= 3
		}
	}
	return out
}

func (r *randomSeries) take(n int) []Sample {
	out := make([]Sample, n)
	for i := range out {
		out[i] = r.next()
	}
	return out
}

func TestRandomRoundTrip(t *testing.T) {
	for seed := range uint64(200) {
		samples := newRandomSeries(seed).take(1 + int(seed%7)*int(seed%13)*5)
		checkRoundTrip(t, samples)
	}
}

// AppendLimit cuts a series into chunks of at most limit bytes (a chunk of one sample may
// be more), each as long as fits, which together decode to the series.
func TestAppendLimit(t *testing.T) {
	for seed := range uint64(31) {
		samples := newRandomSeries(seed).take(400)
		if seed == 30 { // long, as tsdb cuts a day of scrapes into chunks of 16 KiB
			samples = latencySamples(5760, 50, 0.1, seed)
		}
		for _, limit := range []int{MinLimit, 1500, 4000, 64 << 10, math.MaxInt} {
			var got []Sample
			for rest := samples; len(rest) > 0; {
				prefix := []byte{7}
				out, n := AppendLimit(prefix, rest, limit)
				if n < 1 || n > len(rest) || out[0] != 7 {
					t.Fatalf("seed %d limit %d: n = %d of %d", seed, limit, n, len(rest))
				}
				chunk := out[1:]
				if !bytes.Equal(chunk, Append(nil, rest[:n])) {
					t.Fatalf("seed %d limit %d: the chunk of %d is not Append's", seed, limit, n)
				}
				if len(chunk) > limit && n > 1 {
					t.Fatalf("seed %d limit %d: %d samples in %d bytes", seed, limit, n, len(chunk))
				}
				if n < len(rest) && len(Append(nil, rest[:n+1])) <= limit {
					t.Fatalf("seed %d limit %d: %d samples taken, %d fit", seed, limit, n, n+1)
				}
				decoded, err := decodeAll(chunk)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, decoded...)
				rest = rest[n:]
			}
			checkSame(t, got, samples)
		}
	}
}

// MinLimit holds one sample of 40 buckets and 40 bounds, the costliest there is: a span
// each with the longest codes, counts and bounds that are no decimals.
func TestMinLimitHoldsOneSample(t *testing.T) {
	const n = 40
	custom := make([]float64, n)
	counts := make([]float64, n)
	spans := make([]span, n)
	for i := range n {
		custom[i] = math.Float64frombits(0x3ff123456789abcd + uint64(i)*0x1234567)
		counts[i] = math.Float64frombits(0x4321fedcba987654 + uint64(i)*0x7654321)
		spans[i] = span{Offset: math.MaxInt32, Length: 1}
	}
	spans[0].Offset = math.MinInt32
	h := &tablets.FloatHistogram{
		CounterResetHint: 255, Schema: math.MinInt32, ZeroThreshold: math.NaN(),
		ZeroCount: math.Pi, Count: math.E, Sum: staleNaN, CustomValues: custom,
		PositiveSpans: spans, PositiveBuckets: counts,
	}
	chunk := Append(nil, []Sample{{Unit: math.MaxUint64, FH: h}})
	if len(chunk) > MinLimit {
		t.Errorf("one sample takes %d bytes, over MinLimit %d", len(chunk), MinLimit)
	}
	t.Logf("%d bytes", len(chunk))
}

// Every strict prefix of a chunk, and a chunk with a byte more, is corrupt; another version
// is ErrVersion. Flipped bits never panic and fail, when they do, with the errors of the
// package.
func TestCorruptChunks(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for seed := range uint64(20) {
		chunk := Append(nil, newRandomSeries(seed).take(30))
		for n := range len(chunk) {
			if _, err := decodeAll(chunk[:n]); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("seed %d: a prefix of %d of %d bytes: %v", seed, n, len(chunk), err)
			}
		}
		if _, err := decodeAll(append(bytes.Clone(chunk), 0)); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("seed %d: a byte more: %v", seed, err)
		}
		other := bytes.Clone(chunk)
		other[0] = 2
		if _, err := decodeAll(other); !errors.Is(err, ErrVersion) {
			t.Fatalf("seed %d: version 2: %v", seed, err)
		}
		for range 200 {
			bad := bytes.Clone(chunk)
			bad[rng.IntN(len(bad))] ^= 1 << rng.IntN(8)
			_, err := decodeAll(bad)
			checkErr(t, err)
		}
	}
}

// Below the size of its first sample, a chunk holds that one sample.
func TestAppendLimitBelowOneSample(t *testing.T) {
	samples := newRandomSeries(1).take(50)
	one := Append(nil, samples[:1])
	for _, limit := range []int{-1, 0, 1, len(one) - 1} {
		chunk, n := AppendLimit(nil, samples, limit)
		if n != 1 || !bytes.Equal(chunk, one) {
			t.Errorf("limit %d: %d samples in %x, want 1 in %x", limit, n, chunk, one)
		}
	}
}

// Headers a reader rejects, each with the error it wraps.
func TestBadHeaders(t *testing.T) {
	for name, c := range map[string]struct {
		chunk []byte
		want  error
	}{
		"nothing":                {[]byte{}, ErrCorrupt},
		"version 0":              {[]byte{0, 0, 0, 0}, ErrVersion},
		"version 2":              {[]byte{2}, ErrVersion},
		"short":                  {[]byte{1, 0, 0}, ErrCorrupt},
		"reserved sum coding":    {[]byte{1, 3, 0, 0}, ErrCorrupt},
		"sum exponent 23":        {[]byte{1, 23<<3 | 1, 0, 0}, ErrCorrupt},
		"exponent with XOR sums": {[]byte{1, 1 << 3, 0, 0}, ErrCorrupt},
		"float mode 24":          {[]byte{1, 0, 24, 0}, ErrCorrupt},
		"empty with a mode":      {[]byte{1, 4, 0, 0}, ErrCorrupt},
		"empty with bytes":       {[]byte{1, 0, 0, 0, 0}, ErrCorrupt},
		"count cut":              {[]byte{1, 0, 0, 0x80}, ErrCorrupt},
		"first cut":              {[]byte{1, 0, 0, 1, 0x80}, ErrCorrupt},
		"span missing":           {[]byte{1, 0, 0, 1, 5}, ErrCorrupt},
		"last overflows":         {[]byte{1, 0, 0, 2, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1, 1, 0, 0}, ErrCorrupt},
		"span under count":       {[]byte{1, 0, 0, 3, 0, 1, 0, 0, 0, 0}, ErrCorrupt},
		"a span for one sample":  {[]byte{1, 0, 0, 1, 0, 1, 0, 0, 0, 0}, ErrCorrupt},
		"more samples than bits": {[]byte{1, 0, 0, 14, 0, 100, 0, 0, 0, 0, 0, 0, 0, 0}, ErrCorrupt},
	} {
		count, _, _, err := Header(c.chunk)
		if !errors.Is(err, c.want) || count != 0 {
			t.Errorf("%s: Header = %d, %v; want %v", name, count, err, c.want)
		}
		if err := Decode(c.chunk, func(Sample) { t.Errorf("%s: a sample", name) }); !errors.Is(err, c.want) {
			t.Errorf("%s: Decode: %v, want %v", name, err, c.want)
		}
	}
}
