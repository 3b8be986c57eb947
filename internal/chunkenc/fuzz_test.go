package chunkenc

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/seed71701133/tablets/internal/bitcode"
)

// Run the fuzzers with, for example:
//
//	go test -run '^$' -fuzz '^FuzzRoundTrip$' -fuzztime 200000x ./internal/chunkenc
//	go test -run '^$' -fuzz '^FuzzDecode$' -fuzztime 200000x ./internal/chunkenc
//
// Inputs worth keeping live in testdata/fuzz and run with every go test.

// FuzzRoundTrip derives points from the input, encodes them whole and with limits, and
// checks they decode bit for bit.
func FuzzRoundTrip(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"))
	f.Add([]byte("\xff\xff\xff\xff\xff\xff\xff\x00\x09\x10\x11\x0a\x20\x21\x22\x33\x0b\x7f\x80\xff"))
	f.Add([]byte("\x01\x02\x03\x04\x05\x06\x07\x08\x26\x7f\xf0\x00\x00\x00\x00\x00\x02\x05\x80\x00\x00\x00\x00\x00\x00\x00\x36\x05"))
	f.Fuzz(func(t *testing.T, data []byte) {
		times, values := fuzzPoints(data)
		chunk := Append(nil, times, values)
		if want := makePlan(times, values).size(times); len(chunk) != want {
			t.Fatalf("chunk is %d bytes, plan said %d", len(chunk), want)
		}
		checkDecodes(t, chunk, times, values)
		if len(data) > 0 {
			checkLimit(t, series{times: times, values: values}, int(data[0]))
			checkLimit(t, series{times: times, values: values}, len(chunk)-int(data[0]%8))
		}
	})
}

// maxFuzzPoints keeps each run fast: the mutator sometimes grows inputs to megabytes.
const maxFuzzPoints = 2000

// fuzzPoints turns bytes into strictly increasing times and values. The first 8 bytes are
// the first time; then each point is a control byte whose low 3 bits pick the time delta
// and the next 3 bits the value, each reading a few more bytes. It stops where the input or
// the uint64 time range or maxFuzzPoints ends.
func fuzzPoints(data []byte) ([]uint64, []float64) {
	if len(data) < 8 {
		return nil, nil
	}
	t := binary.BigEndian.Uint64(data)
	data = data[8:]
	times := []uint64{t}
	values := []float64{0}
	take := func(n int) uint64 { // the next n bytes, zero-extended when short
		var buf [8]byte
		copy(buf[8-n:], data)
		data = data[min(n, len(data)):]
		return binary.BigEndian.Uint64(buf[:])
	}
	delta, scaledPrev := uint64(1000), int64(0)
	for len(data) > 0 && len(times) < maxFuzzPoints {
		c := data[0]
		data = data[1:]
		switch c & 7 {
		case 0: // the same delta again
		case 1, 2:
			delta = take(1) + 1
		case 3:
			delta = take(2) + 1
		case 4:
			delta = max(take(8), 1)
		case 5: // jitter around the previous delta
			delta = max(delta+uint64(int64(int8(take(1)))), 1)
		default:
			delta = 1000
		}
		if delta > math.MaxUint64-t {
			break
		}
		t += delta
		var v float64
		switch (c >> 3) & 7 {
		case 0, 1: // repeat
			v = values[len(values)-1]
		case 2: // raw bits
			v = math.Float64frombits(take(8))
		case 3, 4: // a decimal random walk
			scaledPrev += int64(int8(take(1)))
			v = bitcode.DecimalValue(scaledPrev, uint(c>>6))
		case 5: // a decimal at any exponent
			v = bitcode.DecimalValue(int64(take(4))-1<<31, uint(take(1)%(bitcode.MaxExp+1)))
		case 6: // a counter
			v = values[len(values)-1] + 1
		default: // specials
			v = [...]float64{math.NaN(), math.Inf(1), math.Copysign(0, -1), math.SmallestNonzeroFloat64,
				math.MaxFloat64, math.Float64frombits(0x7ff0000000000002), notDecimal, 1 << 53}[take(1)%8]
		}
		times = append(times, t)
		values = append(values, v)
	}
	return times, values
}

// FuzzDecode feeds arbitrary bytes to Decode: it must not panic, and what it accepts must
// agree with Header and re-encode to the same points.
func FuzzDecode(f *testing.F) {
	for _, s := range testSeries() {
		if len(s.times) <= 100 {
			f.Add(Append(nil, s.times, s.values))
		}
	}
	f.Add([]byte{1, 0, 0})
	f.Add([]byte{1, 2, 5, 0, 0, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, src []byte) {
		count, first, last, herr := Header(src)
		ts, _, err := decodeAll(src)
		if err != nil {
			return
		}
		if herr != nil {
			t.Fatalf("Decode accepted what Header rejected: %v", herr)
		}
		if count != len(ts) || (count > 0 && (first != ts[0] || last != ts[count-1])) {
			t.Fatalf("Header = %d, %d, %d; decoded %d points", count, first, last, len(ts))
		}
		for i := 1; i < len(ts); i++ {
			if ts[i] <= ts[i-1] {
				t.Fatalf("times %d, %d not increasing", ts[i-1], ts[i])
			}
		}
		checkReencodes(t, src)
	})
}
