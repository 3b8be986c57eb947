package stageenc

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/seed71701133/tablets/internal/testkit/formatdoc"
)

const (
	staleNaN = 0x7ff0000000000002 // Prometheus' staleness marker
	key1     = "l31b6fcee16e88a9a05158678b02cd548"
	yearOne  = -62135596800000 // 0001-01-01T00:00:00Z in Unix milliseconds
)

// specials are the values whose bits are easiest to lose.
func specials() []float64 {
	return []float64{
		math.Float64frombits(0x7ff0000000000001), math.Float64frombits(staleNaN),
		math.Float64frombits(0xfff8000000000000), math.NaN(),
		math.Copysign(0, -1), 0, math.Inf(1), math.Inf(-1),
		math.SmallestNonzeroFloat64, -math.SmallestNonzeroFloat64, math.Float64frombits(0x000fffffffffffff),
		math.MaxFloat64, -math.MaxFloat64,
		1 << 53, 1<<53 + 2, -(1 << 53), -(1<<53 + 2), 1<<53 - 1, 1 << 62, 1 << 63, -(1 << 63),
		0.25, 37.5123, 0.1, -1.5, 1e300, 123456, 1, -1,
	}
}

// testColumns are the columns the round trip checks and the fuzzers start from.
func testColumns() map[string][]Series {
	many := Series{Key: "many"}
	for i := range 1000 {
		many.Times = append(many.Times, 1716422400000+int64(i)*15000+int64(i%7))
		many.Values = append(many.Values, float64(i*i)/4)
	}
	sp := specials()
	spTimes := make([]int64, len(sp))
	for i := range spTimes {
		spTimes[i] = yearOne + int64(i)*1000
	}
	return map[string][]Series{
		"empty":      nil,
		"one point":  {{Key: key1, Times: []int64{1716422400000}, Values: []float64{123456}}},
		"specials":   {{Key: key1, Times: spTimes, Values: sp}},
		"many":       {many},
		"int64 ends": {{Key: "x", Times: []int64{math.MinInt64, math.MinInt64 + 1, 0, math.MaxInt64}, Values: []float64{1, 2, 3, 4}}},
		"half range": {
			{Key: "a", Times: []int64{math.MaxInt64 / 2}, Values: []float64{-0.5}},
			{Key: "b", Times: []int64{math.MinInt64 / 2, yearOne}, Values: []float64{math.Inf(-1), 7}},
		},
		"keys": {
			{Key: key1, Times: []int64{5}, Values: []float64{1}},
			{Key: strings.ToUpper(key1[:1]) + key1[1:], Times: []int64{5}, Values: []float64{1}},
			{Key: "l" + strings.ToUpper(key1[1:]), Times: []int64{5}, Values: []float64{1}},
			{Key: key1[:32], Times: []int64{5}, Values: []float64{1}},
			{Key: key1 + "0", Times: []int64{5}, Values: []float64{1}},
			{Key: "cpu{host=\"é\"}\x00\xff", Times: []int64{4}, Values: []float64{2}},
			{Key: key1, Times: []int64{6, 7}, Values: []float64{3, 4}}, // a key again: allowed
			{Key: strings.Repeat("k", 300), Times: []int64{5}, Values: []float64{1}},
		},
		"negative times": {
			{Key: "n", Times: []int64{-3, -2, -1}, Values: []float64{0.25, 0.5, 0.75}},
			{Key: "m", Times: []int64{-1000}, Values: []float64{math.Float64frombits(staleNaN)}},
		},
	}
}

func sameSeries(t *testing.T, got, want []Series) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d series, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Key != w.Key || len(g.Times) != len(w.Times) || len(g.Values) != len(w.Values) {
			t.Fatalf("series %d: %q with %d/%d points, want %q with %d", i, g.Key, len(g.Times), len(g.Values), w.Key, len(w.Times))
		}
		for j := range w.Times {
			if g.Times[j] != w.Times[j] || math.Float64bits(g.Values[j]) != math.Float64bits(w.Values[j]) {
				t.Fatalf("series %q point %d: %d %#x, want %d %#x", w.Key, j,
					g.Times[j], math.Float64bits(g.Values[j]), w.Times[j], math.Float64bits(w.Values[j]))
			}
		}
	}
}

// checkRoundTrip: the column decodes to series bit for bit, and encodes back to itself.
func checkRoundTrip(t *testing.T, series []Series) []byte {
	t.Helper()
	b := Append(nil, series)
	got, err := Decode(b)
	if err != nil {
		t.Fatalf("Decode(%x): %v", b, err)
	}
	sameSeries(t, got, series)
	if again := Append(nil, got); !bytes.Equal(again, b) {
		t.Fatalf("re-encoded %x, was %x", again, b)
	}
	return b
}

func TestRoundTrip(t *testing.T) {
	for name, series := range testColumns() {
		t.Run(name, func(t *testing.T) { checkRoundTrip(t, series) })
	}
}

func TestAppendToPrefix(t *testing.T) {
	series := testColumns()["keys"]
	b := Append([]byte("prefix"), series)
	if !bytes.HasPrefix(b, []byte("prefix")) || !bytes.Equal(b[6:], Append(nil, series)) {
		t.Fatalf("Append to a prefix gave %x", b)
	}
}

// The empty column is its header: version 1 and base 0.
func TestEmptyColumn(t *testing.T) {
	b := Append(nil, nil)
	if !bytes.Equal(b, []byte{1, 0}) {
		t.Fatalf("empty column %x", b)
	}
	got, err := Decode(b)
	if err != nil || len(got) != 0 {
		t.Fatalf("Decode = %v, %v", got, err)
	}
}

// Only "l" and 32 lowercase hex digits take tag 1 (16 bytes); uppercase would not round-trip.
func TestKeyTags(t *testing.T) {
	for key, wantTag := range map[string]byte{
		key1:                                1,
		"l00000000000000000000000000000000": 1,
		"lffffffffffffffffffffffffffffffff": 1,
		"l" + strings.ToUpper(key1[1:]):     0,
		"L" + key1[1:]:                      0,
		key1[:32]:                           0,
		key1 + "a":                          0,
		"l31b6fcee16e88a9a05158678b02cd54g": 0,
		"cpu":                               0,
		"l3 b6fcee16e88a9a05158678b02cd548": 0,
		key1[1:]:                            0,
	} {
		b := Append(nil, []Series{{Key: key, Times: []int64{0}, Values: []float64{0}}})
		if b[2] != wantTag { // after version 1 and base 0
			t.Errorf("key %q: tag %d, want %d", key, b[2], wantTag)
		}
		wantLen := 2 + 1 + 16 + 3
		if wantTag == 0 {
			wantLen = 2 + 1 + 1 + len(key) + 3
		}
		if len(b) != wantLen {
			t.Errorf("key %q: %d bytes, want %d", key, len(b), wantLen)
		}
		checkRoundTrip(t, []Series{{Key: key, Times: []int64{0}, Values: []float64{0}}})
	}
}

// Integers up to 2^53 but -0 take the short form, everything else 9 bytes.
func TestValueForms(t *testing.T) {
	for _, c := range []struct {
		v    float64
		size int
	}{
		{0, 1}, {1, 1}, {-1, 1}, {31, 1}, {32, 2}, {-32, 1}, {-33, 2},
		{123456, 3}, {1 << 53, 8}, {-(1 << 53), 8}, {1<<53 + 2, 9}, {math.Copysign(0, -1), 9},
		{0.25, 9}, {math.Float64frombits(staleNaN), 9}, {math.Inf(1), 9},
	} {
		if got := len(appendValue(nil, c.v)); got != c.size {
			t.Errorf("%v (%#x): %d bytes, want %d", c.v, math.Float64bits(c.v), got, c.size)
		}
	}
}

func TestAppendPanics(t *testing.T) {
	for name, s := range map[string]Series{
		"empty key":      {Key: "", Times: []int64{1}, Values: []float64{1}},
		"no points":      {Key: "a"},
		"fewer values":   {Key: "a", Times: []int64{1, 2}, Values: []float64{1}},
		"more values":    {Key: "a", Times: []int64{1}, Values: []float64{1, 2}},
		"repeated time":  {Key: "a", Times: []int64{1, 1}, Values: []float64{1, 2}},
		"decreasing":     {Key: "a", Times: []int64{2, 1}, Values: []float64{1, 2}},
		"decreasing end": {Key: "a", Times: []int64{math.MaxInt64, math.MinInt64}, Values: []float64{1, 2}},
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("Append did not panic")
				}
			}()
			Append(nil, []Series{{Key: "ok", Times: []int64{0}, Values: []float64{0}}, s})
		})
	}
}

// randomSeries makes series of every shape Size has to bound.
func randomSeries(rng *rand.Rand) Series {
	s := Series{Key: key1}
	switch rng.IntN(3) {
	case 0:
		s.Key = strings.Repeat("k", 1+rng.IntN(200))
	case 1:
		s.Key = strings.Repeat("K", 1+rng.IntN(20000))
	}
	n := 1 + rng.IntN(50)
	t := rng.Int64() - math.MaxInt64/2
	sp := specials()
	for range n {
		s.Times = append(s.Times, t)
		s.Values = append(s.Values, []float64{
			sp[rng.IntN(len(sp))], float64(rng.Int64N(1 << 54)), math.Float64frombits(rng.Uint64()), rng.Float64(),
		}[rng.IntN(4)])
		step := []int64{1, 15000, rng.Int64N(1 << 40), rng.Int64N(math.MaxInt64/4) + 1}[rng.IntN(4)]
		if t > math.MaxInt64-step {
			break
		}
		t += step
	}
	s.Values = s.Values[:len(s.Times)]
	return s
}

// Size(s) bounds what s adds, within the 9 bytes the unknown base time costs.
func TestSizeBounds(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 1))
	for range 2000 {
		series := make([]Series, 1+rng.IntN(5))
		for i := range series {
			series[i] = randomSeries(rng)
		}
		b := Append(nil, series)
		base, k := binary.Varint(b[1:])
		if header := 1 + k; header > HeaderSize {
			t.Fatalf("header %d bytes, HeaderSize %d", header, HeaderSize)
		}
		end := 1 + k
		for i, s := range series {
			added := len(appendSeries(nil, base, s))
			end += added
			if size := Size(s); size < added || size > added+binary.MaxVarintLen64-1 {
				t.Fatalf("series %d of %d points, key %d bytes: Size %d, adds %d", i, len(s.Times), len(s.Key), size, added)
			}
		}
		if end != len(b) {
			t.Fatalf("column %d bytes, records end at %d", len(b), end)
		}
	}
}

// A column of one series is HeaderSize + Size bytes at most, whatever its base.
func TestSizeOneSeries(t *testing.T) {
	s := Series{Key: key1, Times: []int64{math.MinInt64 + 1}, Values: []float64{0.25}}
	if got, bound := len(Append(nil, []Series{s})), HeaderSize+Size(s); got > bound {
		t.Fatalf("%d bytes, bound %d", got, bound)
	}
}

// bytesPerSample encodes a remote write's worth of series of one sample each, spread over
// columns as a staging entity does.
func bytesPerSample(rng *rand.Rand, series, columns int) float64 {
	perColumn := make([][]Series, columns)
	for i := range series {
		var h [16]byte
		binary.LittleEndian.PutUint64(h[:], rng.Uint64())
		binary.LittleEndian.PutUint64(h[8:], rng.Uint64())
		key := "l" + hex.EncodeToString(h[:])
		var v float64
		switch rng.IntN(4) {
		case 0: // a counter
			v = float64(rng.IntN(1_000_000))
		case 1: // a small gauge
			v = float64(rng.IntN(100)) / 4
		case 2: // a fine gauge
			v = math.Round(rng.Float64()*1e6) / 1e4
		default:
			if rng.IntN(10) == 0 {
				v = math.Float64frombits(staleNaN)
			} else {
				v = float64(rng.IntN(50))
			}
		}
		c := i % columns
		perColumn[c] = append(perColumn[c], Series{Key: key, Times: []int64{1716422400000 + rng.Int64N(15000)}, Values: []float64{v}})
	}
	total := 0
	for _, col := range perColumn {
		total += len(Append(nil, col))
	}
	return float64(total) / float64(series)
}

// The package documentation's figure: 2,000 series of one sample each in 128 columns.
func TestBytesPerSample(t *testing.T) {
	got := bytesPerSample(rand.New(rand.NewPCG(19, 2)), 2000, 128)
	t.Logf("%.2f bytes a sample", got)
	if got < 25.5 || got > 26 {
		t.Errorf("%.2f bytes a sample, the documentation says 25.8", got)
	}
}

func TestDecodeRejects(t *testing.T) {
	varint := func(x int64) []byte { return binary.AppendVarint(nil, x) }
	uvarint := func(x uint64) []byte { return binary.AppendUvarint(nil, x) }
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	long := func(v float64) []byte { return binary.LittleEndian.AppendUint64([]byte{1}, math.Float64bits(v)) }
	good := Append(nil, []Series{{Key: "a", Times: []int64{10}, Values: []float64{0}}}) // 01 14 00 01 61 01 00 00
	key1Bytes := Append(nil, []Series{{Key: key1, Times: []int64{0}, Values: []float64{0}}})[3:19]
	for _, c := range []struct {
		name string
		b    []byte
		want string
	}{
		{"empty", nil, "empty"},
		{"version 0", []byte{0, 0}, "version 0"},
		{"version 2", []byte{2, 0}, "version 2"},
		{"no base", []byte{1}, "base time: truncated"},
		{"base cut short", []byte{1, 0x80}, "base time: truncated"},
		{"base not minimal", []byte{1, 0x80, 0x00}, "base time: uvarint not minimal"},
		{"base overflows", cat([]byte{1}, bytes.Repeat([]byte{0xff}, 9), []byte{2}), "overflows 64 bits"},
		{"base too long", cat([]byte{1}, bytes.Repeat([]byte{0x80}, 10), []byte{1}), "overflows 64 bits"},
		{"empty column, base 1", []byte{1, 2}, "without series"},
		{"base below the times", cat(good[:6], []byte{1, 0}), "not the column's smallest time"},
		{"no series at the base", []byte{1, 0, 0, 1, 'a', 1, 1, 0, 0, 1, 'b', 1, 2, 0}, "not the column's smallest time"},
		{"trailing byte", cat(good, []byte{0}), "key length: truncated"},
		{"trailing tag", cat(good, []byte{7}), "unknown key tag 7"},
		{"unknown tag", []byte{1, 0, 2, 1, 0, 0}, "unknown key tag 2"},
		{"series key cut short", cat([]byte{1, 0, 1}, key1Bytes[:15]), "series key: truncated"},
		{"no count after a series key", cat([]byte{1, 0, 1}, key1Bytes), "point count: truncated"},
		{"key of 0 bytes", []byte{1, 0, 0, 0, 1, 0, 0}, "a key of 0 bytes"},
		{"key past the end", []byte{1, 0, 0, 5, 'a', 1, 0, 0}, "a key of 5 bytes in 4"},
		{"key length not minimal", []byte{1, 0, 0, 0x81, 0x00, 'a', 1, 0, 0}, "key length: uvarint not minimal"},
		{"series key under tag 0", cat([]byte{1, 0, 0, 33}, []byte(key1), []byte{1, 0, 0}), "under tag 0"},
		{"count 0", []byte{1, 0, 0, 1, 'a', 0}, "0 points"},
		{"count past the bytes", []byte{1, 0, 0, 1, 'a', 2, 0, 0, 0}, "2 points in 3 bytes"},
		{"huge count", cat([]byte{1, 0, 0, 1, 'a'}, uvarint(math.MaxUint64), []byte{0, 0}), "points in 2 bytes"},
		{"count not minimal", []byte{1, 0, 0, 1, 'a', 0x81, 0x00, 0, 0}, "point count: uvarint not minimal"},
		{"time cut short", []byte{1, 0, 0, 1, 'a', 1, 0x80, 0x80}, "a time: truncated"},
		{"time not minimal", []byte{1, 0, 0, 1, 'a', 1, 0x80, 0x00, 0}, "a time: uvarint not minimal"},
		{"delta 0", []byte{1, 0, 0, 1, 'a', 2, 0, 0, 0, 0}, "time 1 repeats"},
		{"first time overflows", cat([]byte{1}, varint(math.MaxInt64), []byte{0, 1, 'a', 1, 1, 0}), "time 0: 9223372036854775807 + 1 overflows"},
		{"first time overflows from below", cat([]byte{1}, varint(-1), []byte{0, 1, 'a', 1}, uvarint(1<<63+1), []byte{0}), "overflows int64"},
		{"delta overflows", cat([]byte{1}, varint(math.MaxInt64-1), []byte{0, 1, 'a', 2, 0, 2, 0, 0}), "time 1: 9223372036854775806 + 2 overflows"},
		{"value cut short", []byte{1, 0, 0, 1, 'a', 1, 0, 0x80}, "a value: truncated"},
		{"value not minimal", []byte{1, 0, 0, 1, 'a', 1, 0, 0x80, 0x00}, "a value: uvarint not minimal"},
		{"long value cut short", []byte{1, 0, 0, 1, 'a', 1, 0, 1, 0, 0, 0, 0, 0, 0, 0xd0}, "value 0: truncated"},
		{"long form of 2", cat([]byte{1, 0, 0, 1, 'a', 1, 0}, long(2)), "which the short form holds"},
		{"long form of 0", cat([]byte{1, 0, 0, 1, 'a', 1, 0}, long(0)), "which the short form holds"},
		{"long form of -2^53", cat([]byte{1, 0, 0, 1, 'a', 1, 0}, long(-(1 << 53))), "which the short form holds"},
		{"short 2^53+1", cat([]byte{1, 0, 0, 1, 'a', 1, 0}, uvarint(zigzag(1<<53+1)<<1)), "beyond 2^53"},
		{"short -2^53-2", cat([]byte{1, 0, 0, 1, 'a', 1, 0}, uvarint(zigzag(-(1<<53+2))<<1)), "beyond 2^53"},
		{"short 2^62", cat([]byte{1, 0, 0, 1, 'a', 1, 0}, uvarint(math.MaxUint64-1)), "beyond 2^53"},
		{"reserved form 3", []byte{1, 0, 0, 1, 'a', 1, 0, 3}, "unknown form 3"},
		{"reserved form 2^64-1", cat([]byte{1, 0, 0, 1, 'a', 1, 0}, uvarint(math.MaxUint64)), "unknown form"},
		{"second series bad", cat(good, []byte{0, 1, 'b', 1, 0, 1}), "series 1, byte 14: value 0: truncated"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := Decode(c.b)
			if err == nil {
				t.Fatalf("Decode(%x) accepted %v", c.b, got)
			}
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Decode(%x): %v, want an ErrInvalid saying %q", c.b, err, c.want)
			}
		})
	}
}

// Columns at the edges of what is allowed, next to the rejected ones above, decode.
func TestDecodeRejectsTwins(t *testing.T) {
	for name, b := range map[string][]byte{
		"good":         Append(nil, []Series{{Key: "a", Times: []int64{10}, Values: []float64{0}}}),
		"max time":     append(binary.AppendVarint([]byte{1}, math.MaxInt64), 0, 1, 'a', 1, 0, 0),
		"2^53":         append([]byte{1, 0, 0, 1, 'a', 1, 0}, binary.AppendUvarint(nil, zigzag(1<<53)<<1)...),
		"-2^53":        append([]byte{1, 0, 0, 1, 'a', 1, 0}, binary.AppendUvarint(nil, zigzag(-(1<<53))<<1)...),
		"long 2^53+2":  binary.LittleEndian.AppendUint64([]byte{1, 0, 0, 1, 'a', 1, 0, 1}, math.Float64bits(1<<53+2)),
		"long -0":      binary.LittleEndian.AppendUint64([]byte{1, 0, 0, 1, 'a', 1, 0, 1}, 1<<63),
		"two points":   []byte{1, 0, 0, 1, 'a', 2, 0, 1, 0, 0},
		"uppercase l":  append(append([]byte{1, 0, 0, 33}, strings.ToUpper(key1)...), 1, 0, 0),
		"base -1":      append(binary.AppendVarint([]byte{1}, -1), 0, 1, 'a', 1, 0, 0),
		"max distance": append(binary.AppendUvarint(append(binary.AppendVarint([]byte{1}, math.MinInt64), 0, 1, 'a', 2, 0), math.MaxUint64), 0, 0),
	} {
		if _, err := Decode(b); err != nil {
			t.Errorf("%s: Decode(%x): %v", name, b, err)
		}
	}
}

// The worked example of docs/format.md ("Staging columns") is what Append writes, and
// decodes back.
func TestFormatDoc(t *testing.T) {
	series := []Series{
		{Key: key1, Times: []int64{1716422400000, 1716422415000}, Values: []float64{123456, math.Float64frombits(staleNaN)}},
		{Key: "cpu", Times: []int64{1716422405000}, Values: []float64{0.25}},
	}
	want := formatdoc.Hex(t, "stage-column")
	if got := Append(nil, series); !bytes.Equal(got, want) {
		t.Errorf("Append = %x, the document %x", got, want)
	}
	got, err := Decode(want)
	if err != nil {
		t.Fatal(err)
	}
	sameSeries(t, got, series)
}
