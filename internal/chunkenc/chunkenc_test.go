package chunkenc

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/seed71701133/tablets/internal/bitcode"
)

// series is one test case: points and a name. Every test below runs over the same table,
// as Prometheus' tsdb/chunkenc tests do.
type series struct {
	name   string
	times  []uint64
	values []float64
}

// regular returns n times start, start+step, ...
func regular(n int, start, step uint64) []uint64 {
	ts := make([]uint64, n)
	for i := range ts {
		ts[i] = start + uint64(i)*step
	}
	return ts
}

// jittered returns n times one second apart (in ms) with uniform ±500 ms jitter, strictly
// increasing.
func jittered(n int, rng *rand.Rand) []uint64 {
	ts := make([]uint64, n)
	for i := range ts {
		ts[i] = 1_700_000_000_000 + uint64(i)*1000 + uint64(rng.IntN(1000)) // +500 - 500
		if i > 0 && ts[i] <= ts[i-1] {
			ts[i] = ts[i-1] + 1
		}
	}
	return ts
}

// demoValues is the demo series: a daily and a 10-minute wave plus noise, 2 decimals.
func demoValues(n int) []float64 {
	rng := rand.New(rand.NewPCG(1, 2))
	vs := make([]float64, n)
	for i := range vs {
		v := 20 + 5*math.Sin(2*math.Pi*float64(i)/86400) + 0.5*math.Sin(2*math.Pi*float64(i)/600) + rng.NormFloat64()*0.2
		vs[i] = math.Round(v*100) / 100
	}
	return vs
}

func counterValues(n int) []float64 {
	vs := make([]float64, n)
	for i := range vs {
		vs[i] = float64(i)
	}
	return vs
}

func constValues(n int, v float64) []float64 {
	vs := make([]float64, n)
	for i := range vs {
		vs[i] = v
	}
	return vs
}

func randomValues(n int, seed uint64) []float64 {
	rng := rand.New(rand.NewPCG(seed, 7))
	vs := make([]float64, n)
	for i := range vs {
		vs[i] = rng.Float64()
	}
	return vs
}

// cycle repeats vs to n values.
func cycle(n int, vs ...float64) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = vs[i%len(vs)]
	}
	return out
}

// notDecimal is 0.1+0.2 computed in float64 (a Go constant expression would be exact 0.3):
// 0.30000000000000004, which looks decimal but is not n/10^e for any small n.
var notDecimal = func(a, b float64) float64 { return a + b }(0.1, 0.2)

const second = 1000 // the tests' times are in milliseconds
const epochMs = 1_700_000_000_000

func testSeries() []series {
	rng := rand.New(rand.NewPCG(3, 4))
	nan := func(bits uint64) float64 { return math.Float64frombits(bits) }
	negDecimals := demoValues(500)
	for i := range negDecimals {
		negDecimals[i] = math.Round((15-negDecimals[i])*100) / 100 // crosses zero
	}
	return []series{
		{"empty", nil, nil},
		{"one point", []uint64{epochMs}, []float64{20.37}},
		{"one point XOR", []uint64{math.MaxUint64}, []float64{math.NaN()}},
		{"one point zero time", []uint64{0}, []float64{0}},
		{"two points", []uint64{epochMs, epochMs + second}, []float64{1, 2}},
		{"constant", regular(1000, epochMs, second), constValues(1000, 42)},
		{"constant decimal", regular(1000, epochMs, second), constValues(1000, 3.14)},
		{"constant NaN", regular(300, epochMs, second), constValues(300, math.NaN())},
		{"counter", regular(2000, epochMs, second), counterValues(2000)},
		{"demo", regular(2000, epochMs, second), demoValues(2000)},
		{"negative decimals", regular(500, epochMs, second), negDecimals},
		{"mixed zeros", regular(100, epochMs, second), cycle(100, 0, math.Copysign(0, -1), 1, math.Copysign(0, -1))},
		{"NaN payloads", regular(100, epochMs, second), cycle(100, nan(0x7ff0000000000002), nan(0x7ff8000000000001),
			nan(0xfff0000000000001), nan(0x7fffffffffffffff), nan(0xffffffffffffffff), 1.5)},
		{"infinities", regular(100, epochMs, second), cycle(100, math.Inf(1), math.Inf(-1), 0, math.Inf(1))},
		{"subnormals", regular(100, epochMs, second), cycle(100, math.SmallestNonzeroFloat64, -math.SmallestNonzeroFloat64,
			nan(0x000fffffffffffff), 5e-324, 2.2250738585072014e-308)},
		{"extremes", regular(100, epochMs, second), cycle(100, math.MaxFloat64, -math.MaxFloat64, 1<<53, -(1 << 53), 1<<53+2, 1e300)},
		{"huge deltas", []uint64{0, 1, 1 << 63, math.MaxUint64}, []float64{1, 2, 3, 4}},
		{"max span", []uint64{0, math.MaxUint64}, []float64{-1, 1}},
		{"near max time", regular(100, math.MaxUint64-99, 1), counterValues(100)},
		{"from zero", regular(100, 0, 1), demoValues(100)},
		{"nanoseconds", regular(1000, 1_700_000_000_000_000_000, 1_000_000_000), demoValues(1000)},
		{"equal deltas of 1", regular(1000, epochMs, 1), demoValues(1000)},
		{"jitter", jittered(2000, rng), demoValues(2000)},
		{"gaps", withGaps(regular(2000, epochMs, second)), counterValues(2000)},
		{"random floats", regular(1000, epochMs, second), randomValues(1000, 1)},
		{"looks decimal", regular(100, epochMs, second), cycle(100, notDecimal, 0.3, 20.37, notDecimal*1.1)},
		{"decimal then not", regular(100, epochMs, second), append(demoValues(99), notDecimal)},
		{"tiny decimals", regular(100, epochMs, second), cycle(100, 1e-22, 2e-22, 9e-7, 1.5e-10)},
		{"big integers", regular(100, epochMs, second), cycle(100, 1<<53, -(1 << 53), 0, 1<<52+1)},
		{"beyond 2^53", regular(100, epochMs, second), cycle(100, 1<<53+2, 0)},
		{"many exponents", regular(23, epochMs, second), func() []float64 {
			vs := make([]float64, 23)
			for i := range vs {
				vs[i] = bitcode.DecimalValue(1, uint(i))
			}
			return vs
		}()},
	}
}

// withGaps drops a few stretches of times, as a scraper that was down would.
func withGaps(ts []uint64) []uint64 {
	for i := range ts {
		ts[i] += uint64(i/500) * 3600 * second
	}
	return ts
}

func TestRoundTrip(t *testing.T) {
	for _, s := range testSeries() {
		t.Run(s.name, func(t *testing.T) {
			prefix := []byte("prefix")
			enc := Append(bytes.Clone(prefix), s.times, s.values)
			if !bytes.HasPrefix(enc, prefix) {
				t.Fatal("Append changed dst")
			}
			chunk := enc[len(prefix):]
			if want := makePlan(s.times, s.values).size(s.times); len(chunk) != want {
				t.Errorf("chunk is %d bytes, plan said %d", len(chunk), want)
			}
			checkDecodes(t, chunk, s.times, s.values)
			t.Logf("%d points, %d bytes, mode %#x", len(s.times), len(chunk), chunk[1])
		})
	}
}

// checkDecodes checks Header and Decode give exactly the points, bit for bit.
func checkDecodes(t *testing.T, chunk []byte, times []uint64, values []float64) {
	t.Helper()
	count, first, last, err := Header(chunk)
	if err != nil {
		t.Fatalf("Header: %v", err)
	}
	var wantFirst, wantLast uint64
	if len(times) > 0 {
		wantFirst, wantLast = times[0], times[len(times)-1]
	}
	if count != len(times) || first != wantFirst || last != wantLast {
		t.Errorf("Header = %d, %d, %d; want %d, %d, %d", count, first, last, len(times), wantFirst, wantLast)
	}
	gotT, gotV, err := decodeAll(chunk)
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if len(gotT) != len(times) {
		t.Fatalf("decoded %d points, want %d", len(gotT), len(times))
	}
	for i := range times {
		if gotT[i] != times[i] || math.Float64bits(gotV[i]) != math.Float64bits(values[i]) {
			t.Fatalf("point %d = (%d, %#x), want (%d, %#x)", i,
				gotT[i], math.Float64bits(gotV[i]), times[i], math.Float64bits(values[i]))
		}
	}
}

func decodeAll(chunk []byte) ([]uint64, []float64, error) {
	var ts []uint64
	var vs []float64
	err := Decode(chunk, func(t uint64, v float64) {
		ts = append(ts, t)
		vs = append(vs, v)
	})
	return ts, vs, err
}

func TestAppendLimit(t *testing.T) {
	for _, s := range testSeries() {
		t.Run(s.name, func(t *testing.T) {
			full := len(Append(nil, s.times, s.values))
			for maxBytes := 0; maxBytes <= full+2; maxBytes += 1 + maxBytes/64 {
				checkLimit(t, s, maxBytes)
			}
		})
	}
}

// TestDay round-trips the benchmark series, a day at 1 Hz each, whole and cut to one Azure
// Table binary property.
func TestDay(t *testing.T) {
	for _, s := range benchSeries() {
		t.Run(s.name, func(t *testing.T) {
			checkDecodes(t, Append(nil, s.times, s.values), s.times, s.values)
			checkLimit(t, s, 64<<10)
		})
	}
}

func checkLimit(t *testing.T, s series, maxBytes int) {
	t.Helper()
	prefix := []byte{0xAA}
	enc, n := AppendLimit(bytes.Clone(prefix), s.times, s.values, maxBytes)
	if !bytes.HasPrefix(enc, prefix) {
		t.Fatal("AppendLimit changed dst")
	}
	chunk := enc[len(prefix):]
	if len(s.times) == 0 {
		checkDecodes(t, chunk, nil, nil)
		return
	}
	if n == 0 {
		if maxBytes >= MinLimit || len(chunk) != 0 {
			t.Fatalf("maxBytes %d: no point encoded, %d bytes appended", maxBytes, len(chunk))
		}
		return
	}
	if len(chunk) > maxBytes {
		t.Fatalf("maxBytes %d: chunk of %d points is %d bytes", maxBytes, n, len(chunk))
	}
	checkDecodes(t, chunk, s.times[:n], s.values[:n])
	if n < len(s.times) {
		if next := len(Append(nil, s.times[:n+1], s.values[:n+1])); next <= maxBytes {
			t.Fatalf("maxBytes %d: stopped at %d points, but %d fit in %d bytes", maxBytes, n, n+1, next)
		}
	}
}

// TestMinLimit checks the largest one-point chunks fit in MinLimit.
func TestMinLimit(t *testing.T) {
	for _, v := range []float64{math.NaN(), -math.MaxFloat64, 1 << 53, -(1 << 53), notDecimal, 1e-22} {
		if n := len(Append(nil, []uint64{math.MaxUint64}, []float64{v})); n > MinLimit {
			t.Errorf("one point %v: %d bytes > MinLimit %d", v, n, MinLimit)
		}
	}
}

func TestTruncated(t *testing.T) {
	for _, s := range testSeries() {
		t.Run(s.name, func(t *testing.T) {
			chunk := Append(nil, s.times, s.values)
			for i := range len(chunk) {
				if _, _, err := decodeAll(chunk[:i]); err == nil {
					t.Fatalf("%d of %d bytes decoded without error", i, len(chunk))
				} else if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("%d of %d bytes: error %v is not ErrCorrupt", i, len(chunk), err)
				}
			}
			if _, _, err := decodeAll(append(chunk, 0)); err == nil {
				t.Fatal("trailing byte decoded without error")
			}
		})
	}
}

// TestCorrupted flips every bit of small chunks: Decode must not panic, and whatever it
// accepts must re-encode to the same points.
func TestCorrupted(t *testing.T) {
	for _, s := range testSeries() {
		if len(s.times) > 100 {
			continue
		}
		t.Run(s.name, func(t *testing.T) {
			chunk := Append(nil, s.times, s.values)
			for bit := range 8 * len(chunk) {
				bad := bytes.Clone(chunk)
				bad[bit/8] ^= 0x80 >> (bit % 8)
				checkReencodes(t, bad)
			}
		})
	}
}

// checkReencodes decodes src and, when it is valid, checks that encoding its points again
// decodes to the same points.
func checkReencodes(t *testing.T, src []byte) {
	t.Helper()
	ts, vs, err := decodeAll(src)
	if err != nil {
		return
	}
	checkDecodes(t, Append(nil, ts, vs), ts, vs)
}

func TestRejects(t *testing.T) {
	valid := Append(nil, []uint64{10, 20}, []float64{1, 2})
	for _, tc := range []struct {
		name string
		src  string // hex
		want error
	}{
		{"nothing", "", ErrCorrupt},
		{"version 0", "000000", ErrVersion},
		{"version 2", "020000", ErrVersion},
		{"empty with mode", "010100", ErrCorrupt},
		{"empty with bytes", "01000000", ErrCorrupt},
		{"reserved coding", "0103" + hex.EncodeToString(valid[2:]), ErrCorrupt},
		{"exponent too big", "01b9" + hex.EncodeToString(valid[2:]), ErrCorrupt},
		{"exponent with XOR", "0108" + hex.EncodeToString(valid[2:]), ErrCorrupt},
		{"count too big", "0100ff7f0affff03" + "0000000000000000", ErrCorrupt},
		{"overlong count varint", "0100ffffffffffffffffffff01", ErrCorrupt},
		{"span overflows", "010101ffffffffffffffffff0101" + "0000000000000000", ErrCorrupt},
		{"span too short", "010103000100000000000000000000", ErrCorrupt},
		{"one point with span", "010101000100000000000000000000", ErrCorrupt},
		{"nonzero padding", hex.EncodeToString(valid[:len(valid)-1]) + hex.EncodeToString([]byte{valid[len(valid)-1] | 1}), ErrCorrupt},
	} {
		src, err := hex.DecodeString(tc.src)
		if err != nil {
			t.Fatal(err)
		}
		if err := Decode(src, func(uint64, float64) {}); !errors.Is(err, tc.want) {
			t.Errorf("%s: Decode error %v, want %v", tc.name, err, tc.want)
		} else {
			t.Logf("%s: %v", tc.name, err)
		}
	}
}

func TestPanics(t *testing.T) {
	for name, f := range map[string]func(){
		"length mismatch": func() { Append(nil, []uint64{1, 2}, []float64{1}) },
		"equal times":     func() { Append(nil, []uint64{1, 1}, []float64{1, 2}) },
		"decreasing":      func() { AppendLimit(nil, []uint64{2, 1}, []float64{1, 2}, 100) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}

// TestGolden pins the worked example of doc.go byte for byte: if it fails, the format
// changed, which needs a new Version.
func TestGolden(t *testing.T) {
	const want = "011103e807d00f2ff5b380"
	times := []uint64{1000, 2000, 3000}
	values := []float64{20.37, 20.38, 20.36}
	got := hex.EncodeToString(Append(nil, times, values))
	if got != want {
		t.Fatalf("Append = %s, want %s", got, want)
	}
	chunk, _ := hex.DecodeString(want)
	checkDecodes(t, chunk, times, values)
}
