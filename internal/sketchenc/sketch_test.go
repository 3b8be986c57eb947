package sketchenc

import (
	"bytes"
	"errors"
	"maps"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/DataDog/sketches-go/ddsketch"
	enc "github.com/DataDog/sketches-go/ddsketch/encoding"
	"github.com/DataDog/sketches-go/ddsketch/mapping"
	"github.com/DataDog/sketches-go/ddsketch/store"
)

var testAccuracies = []float64{1e-6, 1e-4, 0.001, 0.01, 0.02, 0.05, 0.1, 0.5, 0.9}

// TestSketchMappingIsDDSketchs checks logMapping against DDSketch's LogarithmicMapping.
func TestSketchMappingIsDDSketchs(t *testing.T) {
	for _, a := range testAccuracies {
		m := newMapping(a)
		dm, err := mapping.NewLogarithmicMapping(a)
		if err != nil {
			t.Fatal(err)
		}
		if m.relAccuracy != dm.RelativeAccuracy() || m.minIndexable != dm.MinIndexableValue() {
			t.Fatalf("accuracy %g: relative accuracy %g, min indexable %g; DDSketch's %g, %g",
				a, m.relAccuracy, m.minIndexable, dm.RelativeAccuracy(), dm.MinIndexableValue())
		}
		var b []byte
		dm.Encode(&b)
		if ours := newSketch(m).Append(nil); !bytes.HasSuffix(ours, b) {
			t.Fatalf("accuracy %g: the encoding of the mapping is not DDSketch's", a)
		}
		// Keys and values of DDSketch's indexable range.
		r := rand.New(rand.NewPCG(1, math.Float64bits(a)))
		lo, hi := math.Log(dm.MinIndexableValue()), math.Log(dm.MaxIndexableValue())
		for i := range 100000 {
			v := math.Exp(lo + (hi-lo)*r.Float64())
			switch i {
			case 0:
				v = dm.MinIndexableValue()
			case 1:
				v = dm.MaxIndexableValue()
			case 2:
				v = 1
			}
			k := m.key(v)
			if int(k) != dm.Index(v) {
				t.Fatalf("accuracy %g: the key of %g is %d, DDSketch's %d", a, v, k, dm.Index(v))
			}
			if m.value(k) != dm.Value(int(k)) {
				t.Fatalf("accuracy %g: the value of key %d is %g, DDSketch's %g", a, k, m.value(k), dm.Value(int(k)))
			}
			if k < m.minKey || k > m.maxKey {
				t.Fatalf("accuracy %g: key %d of %g out of [%d, %d]", a, k, v, m.minKey, m.maxKey)
			}
		}
		// Above: our keys up to math.MaxFloat64 keep the accuracy.
		for i := range 10000 {
			v := dm.MaxIndexableValue() + (math.MaxFloat64-dm.MaxIndexableValue())*(float64(i)/9999)
			if k := m.key(v); k > m.maxKey || !withinAccuracy(m.value(k), v, a) {
				t.Fatalf("accuracy %g: the value of %g is %g (key %d, max %d)", a, v, m.value(k), k, m.maxKey)
			}
		}
		if m.key(math.MaxFloat64) != m.maxKey || m.infKey() != m.maxKey+1 {
			t.Fatalf("accuracy %g: max key %d, inf key %d", a, m.maxKey, m.infKey())
		}
		// The key of infinities is Inf in DDSketch's mapping too.
		if v := dm.Value(int(m.infKey())); !math.IsInf(v, 1) {
			t.Errorf("accuracy %g: DDSketch's value of the key of +Inf is %g", a, v)
		}
	}
}

// staleNaN is Prometheus' staleness marker.
var staleNaN = math.Float64frombits(0x7ff0000000000002)

// distributions draw the values of the tests.
var distributions = []struct {
	name string
	draw func(r *rand.Rand) float64
}{
	{"uniform", func(r *rand.Rand) float64 { return r.Float64() }},
	{"normal", func(r *rand.Rand) float64 { return 100 + 15*r.NormFloat64() }},
	{"standard normal", func(r *rand.Rand) float64 { return r.NormFloat64() }},
	{"lognormal", func(r *rand.Rand) float64 { return math.Exp(2 * r.NormFloat64()) }},
	{"negative", func(r *rand.Rand) float64 { return -1000 * math.Exp(r.NormFloat64()) }},
	{"mixed signs", func(r *rand.Rand) float64 { return (2*r.Float64() - 1) * math.Pow(10, 20*r.Float64()-10) }},
	{"zeros", func(r *rand.Rand) float64 { return 0 }},
	{"half zeros", func(r *rand.Rand) float64 { return float64(r.IntN(2)) * r.NormFloat64() }},
	{"constant", func(r *rand.Rand) float64 { return 42.5 }},
	{"negative constant", func(r *rand.Rand) float64 { return -0.25 }},
	{"integers", func(r *rand.Rand) float64 { return float64(r.IntN(100) - 20) }},
	{"huge range", func(r *rand.Rand) float64 {
		return float64(2*r.IntN(2)-1) * math.Pow(10, 600*r.Float64()-300)
	}},
	{"near MaxFloat64", func(r *rand.Rand) float64 {
		return float64(2*r.IntN(2)-1) * math.MaxFloat64 * (1 - r.Float64()/4)
	}},
}

// build returns the sketch of n values drawn by draw.
func build(accuracy float64, r *rand.Rand, n int, draw func(*rand.Rand) float64) *Sketch {
	s := New(accuracy)
	for range n {
		s.Add(draw(r))
	}
	return s
}

// testSketches returns sketches of the distributions, and one with some NaNs (ignored) and
// infinities.
func testSketches(accuracy float64, n int) map[string]*Sketch {
	ss := map[string]*Sketch{"empty": New(accuracy)}
	for di, d := range distributions {
		ss[d.name] = build(accuracy, rand.New(rand.NewPCG(uint64(di), 3)), n, d.draw)
	}
	ss["with infinities"] = build(accuracy, rand.New(rand.NewPCG(4, 4)), n, func(r *rand.Rand) float64 {
		if r.IntN(10) == 0 {
			return []float64{math.Inf(1), math.Inf(-1), staleNaN}[r.IntN(3)]
		}
		return r.NormFloat64()
	})
	return ss
}

// withinAccuracy reports whether got is within relative accuracy a of want (with some room
// for the rounding of math.Log and math.Exp).
func withinAccuracy(got, want, a float64) bool {
	if got == want {
		return true
	}
	return math.Abs(got-want) <= a*math.Abs(want)*(1+1e-9)
}

// quantile is the value of rank floor(q × (count-1)), as a window's Quantile takes it.
func quantile(s *Sketch, q float64) float64 {
	n := s.Count()
	if n == 0 {
		return math.NaN()
	}
	return s.ValueAtRank(min(uint64(math.Floor(q*float64(n-1))), n-1))
}

// TestSketchDDSketchDecodes checks that DDSketch decodes the encoding (after our version
// byte) to the same bins.
func TestSketchDDSketchDecodes(t *testing.T) {
	for _, a := range []float64{0.001, 0.01, 0.05} {
		for name, w := range testSketches(a, 3000) {
			b := w.Append(nil)
			ds, err := ddsketch.DecodeDDSketch(b[1:], store.SparseStoreConstructor, nil)
			if err != nil {
				t.Fatalf("accuracy %g, %s: %v", a, name, err)
			}
			dm, _ := mapping.NewLogarithmicMapping(a)
			if !ds.IndexMapping.Equals(dm) || ds.GetCount() != float64(w.Count()) || ds.GetZeroCount() != float64(w.zero) {
				t.Fatalf("accuracy %g, %s: DDSketch decodes count %g zero count %g, want %d %d",
					a, name, ds.GetCount(), ds.GetZeroCount(), w.Count(), w.zero)
			}
			for _, tc := range []struct {
				s    store.Store
				want map[int32]uint64
			}{{ds.GetPositiveValueStore(), w.pos}, {ds.GetNegativeValueStore(), w.neg}} {
				got := map[int32]uint64{}
				tc.s.ForEach(func(i int, c float64) bool { got[int32(i)] = uint64(c); return false })
				if !maps.Equal(got, tc.want) {
					t.Fatalf("accuracy %g, %s: DDSketch decodes other bins", a, name)
				}
			}
			// DDSketch's quantiles (of a rank of its own: q*(count-1), so take q for whole
			// ranks) are ours, but for our clamping to [Min, Max].
			if n := w.Count(); n > 1 && name != "with infinities" && name != "near MaxFloat64" {
				for _, r := range []uint64{1, n / 2, n - 2} {
					q := float64(r) / float64(n-1)
					if float64(q*float64(n-1)) != float64(r) {
						continue
					}
					want, _ := ds.GetValueAtQuantile(q)
					if got := w.ValueAtRank(r); got != want {
						t.Fatalf("accuracy %g, %s: the value of rank %d is %g, DDSketch's %g", a, name, r, got, want)
					}
				}
			}
		}
	}
}

func TestSketchEncodingRoundTrip(t *testing.T) {
	for _, a := range []float64{0, 1e-4, 0.01, 0.05, 0.5} {
		for _, n := range []int{1, 100, 5000} {
			for name, w := range testSketches(a, n) {
				prefix := []byte("prefix")
				b := w.Append(prefix[:len(prefix):len(prefix)])
				if !bytes.HasPrefix(b, prefix) || b[len(prefix)] != Version {
					t.Fatalf("%s: Append does not append", name)
				}
				b = b[len(prefix):]
				s, err := Decode(b, a)
				if err != nil {
					t.Fatalf("accuracy %g, %s, %d points: %v", a, name, n, err)
				}
				if s.zero != w.zero || !maps.Equal(s.pos, w.pos) || !maps.Equal(s.neg, w.neg) || s.m != w.m {
					t.Fatalf("accuracy %g, %s, %d points: decodes to other bins", a, name, n)
				}
				if again := s.Append(nil); !bytes.Equal(again, b) {
					t.Fatalf("accuracy %g, %s, %d points: re-encodes to other bytes", a, name, n)
				}
				for _, q := range []float64{0, 0.01, 0.5, 0.9, 0.99, 1} {
					if got, want := quantile(s, q), quantile(w, q); math.Float64bits(got) != math.Float64bits(want) {
						t.Fatalf("accuracy %g, %s, %d points: decoded quantile %g = %g, want %g", a, name, n, q, got, want)
					}
				}
			}
		}
	}
}

func TestSketchDecodeRejects(t *testing.T) {
	good := testSketches(0, 500)["with infinities"].Append(nil)
	if _, err := Decode(good, 0); err != nil {
		t.Fatal(err)
	}
	reject := func(what string, b []byte, a float64) {
		t.Helper()
		if s, err := Decode(b, a); err == nil {
			t.Errorf("%s: decodes to %d points", what, s.Count())
		}
	}
	// Unknown versions.
	for _, v := range []byte{0, 2, 0x80, 0xff} {
		b := bytes.Clone(good)
		b[0] = v
		if _, err := Decode(b, 0); !errors.Is(err, ErrInvalid) {
			t.Errorf("version %d: %v", v, err)
		}
	}
	// Every truncation, of windows with and without bins.
	for name, w := range testSketches(0, 50) {
		b := w.Append(nil)
		for i := range len(b) {
			reject(name+", truncated", b[:i], 0)
		}
	}
	// Another accuracy, invalid accuracies.
	reject("another accuracy", good, 0.02)
	reject("accuracy 1e-7", good, 1e-7)
	reject("accuracy NaN", good, math.NaN())
	reject("bytes after", append(bytes.Clone(good), 0), 0)
	// DDSketch's encoding of the same sketch: its mapping first, so not ours.
	ds, _ := ddsketch.DecodeDDSketch(good[1:], store.SparseStoreConstructor, nil)
	theirs := []byte{Version}
	ds.Encode(&theirs, false)
	reject("DDSketch's own order", theirs, 0)
	// Blocks out of order, repeated, or empty; an overlong varint; counts not whole.
	mappingBlock := good[len(good)-17:]
	block := func(parts ...[]byte) []byte { return append([]byte{Version}, bytes.Join(parts, nil)...) }
	pos := []byte{0x05, 1, 2, 2} // 1 bin: key 1, count 1
	neg := []byte{0x07, 1, 2, 2}
	varfloat := func(f float64) []byte { var b []byte; enc.EncodeVarfloat64(&b, f); return b }
	if _, err := Decode(block(pos, neg, mappingBlock), 0); err != nil {
		t.Fatalf("a valid handmade encoding: %v", err)
	}
	for name, b := range map[string][]byte{
		"negative before positive":  block(neg, pos, mappingBlock),
		"positive twice":            block(pos, pos, mappingBlock),
		"mapping twice":             block(pos, mappingBlock, mappingBlock),
		"mapping first":             block(mappingBlock, pos),
		"no mapping":                block(pos, neg),
		"no bins":                   block([]byte{0x05, 0}, mappingBlock),
		"overlong varint":           block([]byte{0x05, 0x81, 0, 2, 2}, mappingBlock),
		"zero count 0":              block([]byte{0x04, 0}, mappingBlock),
		"count 0":                   block([]byte{0x05, 1, 2, 0}, mappingBlock),
		"count 1.5":                 block([]byte{0x05, 1, 2}, varfloat(1.5), mappingBlock),
		"count -1":                  block([]byte{0x05, 1, 2}, varfloat(-1), mappingBlock),
		"count NaN":                 block([]byte{0x05, 1, 2}, varfloat(math.NaN()), mappingBlock),
		"count 2^54":                block([]byte{0x05, 1, 2}, varfloat(1<<54), mappingBlock),
		"zero count +Inf":           block([]byte{0x04}, varfloat(math.Inf(1)), mappingBlock),
		"keys not ascending":        block([]byte{0x05, 2, 2, 2, 0, 2}, mappingBlock),
		"key above +Inf's":          block([]byte{0x05, 1, 0xfe, 0xff, 0xff, 0xff, 0x0f, 2}, mappingBlock),
		"many bins, few bytes":      block([]byte{0x05, 0xff, 0xff, 0xff, 0xff, 0x0f, 2, 2}, mappingBlock),
		"exact summary statistics":  block([]byte{0x84, 0, 0, 0, 0, 0, 0, 0, 0}, mappingBlock),
		"linearly interpolated map": block(pos, append([]byte{0x06}, mappingBlock[1:]...)),
	} {
		reject(name, b, 0)
	}
}

// TestSketchSizes logs the sizes of encoded sketches (go test -v -run TestSketchSizes).
func TestSketchSizes(t *testing.T) {
	for _, d := range []struct {
		name string
		draw func(r *rand.Rand) float64
	}{
		{"N(0,1)", func(r *rand.Rand) float64 { return r.NormFloat64() }},
		{"N(100,15)", func(r *rand.Rand) float64 { return 100 + 15*r.NormFloat64() }},
		{"lognormal(0,2)", func(r *rand.Rand) float64 { return math.Exp(2 * r.NormFloat64()) }},
		{"±10^U(-300,300)", func(r *rand.Rand) float64 { // the worst case: bins over the whole range
			return float64(2*r.IntN(2)-1) * math.Pow(10, 600*r.Float64()-300)
		}},
	} {
		for _, n := range []int{60, 240, 3600, 86400} {
			w := build(0.01, rand.New(rand.NewPCG(5, uint64(n))), n, d.draw)
			t.Logf("%-15s %6d points, 1%%: %5d bytes, %4d bins", d.name, n, len(w.Append(nil)), len(w.pos)+len(w.neg))
		}
	}
}

func FuzzDecodeSketch(f *testing.F) {
	for _, a := range []float64{0.01, 0.02} {
		for _, n := range []int{1, 20} {
			for _, w := range testSketches(a, n) {
				f.Add(w.Append(nil))
			}
		}
	}
	f.Add([]byte{})
	f.Add([]byte{Version})
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := Decode(b, 0.01)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("an error not ErrInvalid: %v", err)
			}
			return
		}
		again := s.Append(nil)
		if !bytes.Equal(again, b) {
			t.Fatalf("decodes, and re-encodes to other bytes")
		}
		s2, err := Decode(again, 0.01)
		if err != nil {
			t.Fatalf("the re-encoding does not decode: %v", err)
		}
		// The quantiles of the sketch, as a window whose Min and Max are the sketch's takes
		// them (ranks 0 and n-1 are Min and Max).
		n := s.Count()
		prev := math.Inf(-1)
		for _, q := range []float64{0, 0.01, 0.25, 0.5, 0.75, 0.9, 0.99, 1} {
			v, v2 := quantile(s, q), quantile(s2, q)
			if n == 0 {
				if !math.IsNaN(v) || !math.IsNaN(v2) {
					t.Fatalf("empty: Quantile(%g) = %g, %g", q, v, v2)
				}
				continue
			}
			if v != v2 || math.IsNaN(v) || v < prev {
				t.Fatalf("Quantile(%g): %g, after re-encoding %g, previous %g", q, v, v2, prev)
			}
			prev = v
		}
	})
}

// Infinities are counted in the key past the largest finite one, of their sign, and survive
// the encoding; subnormal magnitudes count as zeros; a NaN counts nowhere.
func TestSketchInfinitiesSubnormalsNaN(t *testing.T) {
	inf := math.Inf(1)
	s := New(0)
	for _, v := range []float64{staleNaN, 1, 2, math.NaN(), 3, inf, -inf, inf, 4, staleNaN} {
		s.Add(v)
	}
	d, err := Decode(s.Append(nil), 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*Sketch{s, d} {
		if s.Count() != 7 || s.pos[s.m.infKey()] != 2 || s.neg[s.m.infKey()] != 1 || s.zero != 0 {
			t.Errorf("count %d, %d +Inf, %d -Inf, %d zeros", s.Count(), s.pos[s.m.infKey()], s.neg[s.m.infKey()], s.zero)
		}
		if s.ValueAtRank(0) != -inf || s.ValueAtRank(6) != inf || !withinAccuracy(s.ValueAtRank(3), 3, DefaultAccuracy) {
			t.Errorf("ranks 0, 3, 6: %g %g %g", s.ValueAtRank(0), s.ValueAtRank(3), s.ValueAtRank(6))
		}
	}
	tiny := New(0)
	for _, v := range []float64{5e-324, 1e-323, -1.5e-323} {
		tiny.Add(v)
	}
	if tiny.zero != 3 || len(tiny.pos)+len(tiny.neg) != 0 {
		t.Errorf("subnormals: %d zeros, %d bins", tiny.zero, len(tiny.pos)+len(tiny.neg))
	}
}
