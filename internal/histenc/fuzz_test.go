package histenc

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/seed71701133/tablets"
)

// Run the fuzzers with, for example:
//
//	go test -run '^$' -fuzz '^FuzzRoundTrip$' -fuzztime 100000x ./internal/histenc
//	go test -run '^$' -fuzz '^FuzzDecode$' -fuzztime 200000x ./internal/histenc
//
// Inputs worth keeping live in testdata/fuzz and run with every go test.

// FuzzRoundTrip derives samples from the input, encodes them whole and with a limit, and
// checks they decode bit for bit.
func FuzzRoundTrip(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("\x00\x00\x01\x8b\xcf\xe5\x68\x00\x0b\x03\x02\x01\x05\x02\x03\x07\x03\x01\x00\x00\x43\x00\x83\x00\x43\xff\x00\x03"))
	f.Add([]byte("\xff\xff\xff\xff\xff\xff\xff\x00\x0c\xfd\x01\x01\x02\x00\x01\x03\x01\x07\x7f\xf0\x00\x00\x00\x00\x00\x02\x24\x11\x22\x33\x44\x55\x66\x77\x88\x04\x09"))
	f.Add([]byte("\x00\x00\x00\x00\x00\x00\x00\x00\x28\xcb\x02\x00\x02\x01\x03\x00\x02\x40\x09\x21\xfb\x54\x44\x2d\x18\x08\x51\x07\x00\x10\x60\x60\x60\x60"))
	f.Fuzz(func(t *testing.T, data []byte) {
		samples := fuzzSamples(data)
		chunk := checkRoundTrip(t, samples)
		if len(samples) > 1 {
			limit := len(chunk) - int(data[len(data)-1]%64)
			out, n := AppendLimit(nil, samples, limit)
			if n < 1 || (n > 1 && len(out) > limit) {
				t.Fatalf("limit %d: %d samples in %d bytes", limit, n, len(out))
			}
			got, err := decodeAll(out)
			if err != nil {
				t.Fatal(err)
			}
			checkSame(t, got, samples[:n])
		}
	})
}

// maxFuzzSamples keeps each run fast: the mutator sometimes grows inputs to megabytes.
const maxFuzzSamples = 500

// fuzzReader hands out the input's bytes, zeros once it is used up.
type fuzzReader struct{ data []byte }

func (r *fuzzReader) take(n int) uint64 {
	var buf [8]byte
	copy(buf[8-n:], r.data)
	r.data = r.data[min(n, len(r.data)):]
	return binary.BigEndian.Uint64(buf[:])
}

func (r *fuzzReader) spans(first bool) []tablets.HistogramSpan {
	var spans []tablets.HistogramSpan
	for i := range int(r.take(1) % 4) {
		s := tablets.HistogramSpan{Offset: int32(r.take(1) % 8), Length: uint32(r.take(1) % 8)}
		if i == 0 && first {
			s.Offset = int32(int8(r.take(1)))
			if s.Offset == math.MinInt8 {
				s.Offset = math.MinInt32
			}
		}
		spans = append(spans, s)
	}
	return spans
}

func (r *fuzzReader) float(small bool) float64 {
	if small {
		return float64(int8(r.take(1))) / 4
	}
	return math.Float64frombits(r.take(8))
}

// fuzzSamples turns bytes into samples. The first 8 bytes are the first unit; then each
// sample is a control byte whose bits say what changes (time delta, kind, layout, hint)
// and how values are read, each reading a few more bytes. It stops where the input or the
// uint64 unit range or maxFuzzSamples ends.
func fuzzSamples(data []byte) []Sample {
	if len(data) < 8 {
		return nil
	}
	r := &fuzzReader{data: data}
	unit := r.take(8)
	var out []Sample
	var lay layout
	float, hint, delta := false, tablets.CounterResetHint(0), uint64(15000)
	var abs []int64
	for i := 0; len(r.data) > 0 && i < maxFuzzSamples; i++ {
		c := r.take(1)
		if i > 0 {
			switch c & 3 {
			case 1:
				delta = r.take(1) + 1
			case 2:
				delta = max(r.take(8), 1)
			case 3:
				delta = 15000
			}
			if delta > math.MaxUint64-unit {
				break
			}
			unit += delta
		}
		if c&4 != 0 {
			float = !float
		}
		if c&8 != 0 || i == 0 {
			lay = layout{schema: int32(int8(r.take(1))), pos: r.spans(true), neg: r.spans(true)}
			if lay.schema == math.MinInt8 {
				lay.schema = tablets.CustomBucketsSchema
			}
			if r.take(1)%2 == 1 {
				lay.zeroThreshold = r.float(false)
			}
			for range r.take(1) % 4 {
				lay.custom = append(lay.custom, r.float(c&16 != 0))
			}
			abs = make([]int64, bucketCount(lay.pos)+bucketCount(lay.neg))
		}
		if c&32 != 0 {
			hint = tablets.CounterResetHint(r.take(1))
		}
		small := c&64 == 0
		for j := range abs {
			if small {
				abs[j] += int64(int8(r.take(1)))
			} else {
				abs[j] = int64(r.take(8))
			}
		}
		nPos := bucketCount(lay.pos)
		sum := r.float(c&128 == 0)
		if !float {
			h := &tablets.Histogram{
				CounterResetHint: hint, Schema: lay.schema, ZeroThreshold: lay.zeroThreshold,
				PositiveSpans: lay.pos, NegativeSpans: lay.neg, CustomValues: lay.custom,
				PositiveBuckets: deltas(abs[:nPos]), NegativeBuckets: deltas(abs[nPos:]),
				ZeroCount: r.take(1), Count: r.take(2), Sum: sum,
			}
			out = append(out, Sample{Unit: unit, H: h})
			continue
		}
		h := &tablets.FloatHistogram{
			CounterResetHint: hint, Schema: lay.schema, ZeroThreshold: lay.zeroThreshold,
			PositiveSpans: lay.pos, NegativeSpans: lay.neg, CustomValues: lay.custom,
			ZeroCount: r.float(small), Count: r.float(small), Sum: sum,
		}
		for j := range abs {
			v := float64(abs[j])
			if !small {
				v = math.Float64frombits(uint64(abs[j]))
			}
			if j < nPos {
				h.PositiveBuckets = append(h.PositiveBuckets, v)
			} else {
				h.NegativeBuckets = append(h.NegativeBuckets, v)
			}
		}
		out = append(out, Sample{Unit: unit, FH: h})
	}
	return out
}

// FuzzDecode feeds any bytes to Decode: it must not panic, its errors wrap ErrCorrupt or
// ErrVersion, and what it decodes encodes again to a chunk of the same samples.
func FuzzDecode(f *testing.F) {
	for _, samples := range roundTripCases() {
		f.Add(Append(nil, samples))
	}
	f.Add(Append(nil, newRandomSeries(7).take(20)))
	f.Add([]byte{1, 0, 0, 0})
	f.Add([]byte{1, 0, 0, 1, 0, 0, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, chunk []byte) {
		got, err := decodeAll(chunk)
		checkErr(t, err)
		if err != nil {
			return
		}
		again, err := decodeAll(Append(nil, got))
		if err != nil {
			t.Fatalf("the decoded samples encode to a chunk that does not decode: %v", err)
		}
		checkSame(t, again, got)
	})
}
