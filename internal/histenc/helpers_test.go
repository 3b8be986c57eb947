package histenc

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"testing"

	"github.com/seed71701133/tablets"
)

// staleNaN is Prometheus' staleness marker (model/value.StaleNaN).
var staleNaN = math.Float64frombits(0x7ff0000000000002)

// canonical is a sample with every float as its bits and empty slices as nil: two samples
// round-trip when their canonical forms are deeply equal.
type canonical struct {
	Unit                uint64
	Float               bool
	Hint                tablets.CounterResetHint
	Schema              int32
	ZeroThreshold       uint64
	ZeroCount, Count    uint64
	Sum                 uint64
	PosSpans, NegSpans  []tablets.HistogramSpan
	PosInts, NegInts    []int64
	PosFloats, NegFloat []uint64
	Custom              []float64Bits
}

type float64Bits uint64

func bitsOf(fs []float64) []uint64 {
	if len(fs) == 0 {
		return nil
	}
	out := make([]uint64, len(fs))
	for i, f := range fs {
		out[i] = math.Float64bits(f)
	}
	return out
}

func nilIfEmpty[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return s
}

func canon(s Sample) canonical {
	c := canonical{Unit: s.Unit}
	var custom []float64
	if h := s.H; h != nil {
		c.Hint, c.Schema, c.ZeroThreshold = h.CounterResetHint, h.Schema, math.Float64bits(h.ZeroThreshold)
		c.ZeroCount, c.Count, c.Sum = h.ZeroCount, h.Count, math.Float64bits(h.Sum)
		c.PosSpans, c.NegSpans = nilIfEmpty(h.PositiveSpans), nilIfEmpty(h.NegativeSpans)
		c.PosInts, c.NegInts = nilIfEmpty(h.PositiveBuckets), nilIfEmpty(h.NegativeBuckets)
		custom = h.CustomValues
	} else {
		h := s.FH
		c.Float = true
		c.Hint, c.Schema, c.ZeroThreshold = h.CounterResetHint, h.Schema, math.Float64bits(h.ZeroThreshold)
		c.ZeroCount, c.Count, c.Sum = math.Float64bits(h.ZeroCount), math.Float64bits(h.Count), math.Float64bits(h.Sum)
		c.PosSpans, c.NegSpans = nilIfEmpty(h.PositiveSpans), nilIfEmpty(h.NegativeSpans)
		c.PosFloats, c.NegFloat = bitsOf(h.PositiveBuckets), bitsOf(h.NegativeBuckets)
		custom = h.CustomValues
	}
	for _, b := range custom {
		c.Custom = append(c.Custom, float64Bits(math.Float64bits(b)))
	}
	return c
}

// decodeAll decodes a chunk, checking that Header agrees with the samples.
func decodeAll(chunk []byte) ([]Sample, error) {
	var out []Sample
	err := Decode(chunk, func(s Sample) { out = append(out, s) })
	if err != nil {
		return out, err
	}
	count, first, last, err := Header(chunk)
	switch {
	case err != nil:
		return out, fmt.Errorf("Decode succeeded, Header failed: %w", err)
	case count != len(out):
		return out, fmt.Errorf("Header says %d samples, Decode yielded %d", count, len(out))
	case count > 0 && (first != out[0].Unit || last != out[count-1].Unit):
		return out, fmt.Errorf("Header says units %d..%d, samples %d..%d", first, last, out[0].Unit, out[count-1].Unit)
	}
	return out, nil
}

// checkRoundTrip encodes samples, decodes them and compares bit for bit; it returns the
// chunk.
func checkRoundTrip(t testing.TB, samples []Sample) []byte {
	t.Helper()
	chunk := Append(nil, samples)
	got, err := decodeAll(chunk)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	checkSame(t, got, samples)
	return chunk
}

func checkSame(t testing.TB, got, want []Sample) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d samples back, want %d", len(got), len(want))
	}
	for i := range want {
		if g, w := canon(got[i]), canon(want[i]); !reflect.DeepEqual(g, w) {
			t.Fatalf("sample %d:\n got %+v\nwant %+v", i, g, w)
		}
	}
}

func checkErr(t testing.TB, err error) {
	t.Helper()
	if err != nil && !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrVersion) {
		t.Fatalf("error %v wraps neither ErrCorrupt nor ErrVersion", err)
	}
}
