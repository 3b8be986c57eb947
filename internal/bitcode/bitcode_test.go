package bitcode

import (
	"math"
	"math/rand/v2"
	"testing"
)

// notDecimal is 0.1+0.2 computed in float64 (a Go constant expression would be exact 0.3).
var notDecimal = func(a, b float64) float64 { return a + b }(0.1, 0.2)

func TestFindExp(t *testing.T) {
	for _, tc := range []struct {
		values []float64
		exp    uint
		ok     bool
	}{
		{[]float64{1, 2, -3}, 0, true},
		{[]float64{20.37, 20.4, 20}, 2, true},
		{[]float64{notDecimal}, 0, false},
		{[]float64{math.Copysign(0, -1)}, 0, false},
		{[]float64{math.NaN()}, 0, false},
		{[]float64{1e-22}, 22, true},
		{[]float64{1 << 53}, 0, true},
		{[]float64{1<<53 + 2}, 0, false},
	} {
		exp, ok := FindExp(tc.values)
		if exp != tc.exp || ok != tc.ok {
			t.Errorf("FindExp(%v) = %d, %v; want %d, %v", tc.values, exp, ok, tc.exp, tc.ok)
		}
	}
}

func TestBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	type item struct {
		v  uint64
		nb uint
	}
	var items []item
	w := Writer{}
	for range 10000 {
		nb := uint(rng.IntN(65))
		v := rng.Uint64() & LowMask(nb)
		items = append(items, item{v, nb})
		w.WriteBits(v, nb)
	}
	r := NewReader(w.Finish())
	for i, it := range items {
		if got := r.ReadLong(it.nb); got != it.v || r.Err() {
			t.Fatalf("item %d: read %#x (err %v), want %#x in %d bits", i, got, r.Err(), it.v, it.nb)
		}
	}
	if !r.AtCleanEnd() {
		t.Fatal("not at a clean end")
	}
}

func TestRice(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	var zs []uint64
	w := Writer{}
	bitsWritten := 0
	costs, writes := NewAdaptive(), NewAdaptive()
	for range 20000 {
		// Runs of small and of large residuals, so k climbs and falls.
		z := rng.Uint64() >> (rng.IntN(8) + 8*(len(zs)/500%8))
		zs = append(zs, z)
		bitsWritten += costs.Cost(z)
		writes.Write(&w, z)
	}
	buf := w.Finish()
	if len(buf) != (bitsWritten+7)/8 {
		t.Fatalf("%d bytes written, RiceBits says %d bits", len(buf), bitsWritten)
	}
	r := NewReader(buf)
	reads := NewAdaptive()
	for i, z := range zs {
		got := reads.Read(&r)
		if got != z || r.Err() {
			t.Fatalf("value %d: read %d (err %v), want %d", i, got, r.Err(), z)
		}
	}
}
