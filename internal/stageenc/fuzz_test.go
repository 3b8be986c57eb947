package stageenc

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math"
	"strings"
	"testing"
)

// Run the fuzzers with, for example:
//
//	go test -run '^$' -fuzz '^FuzzDecode$' -fuzztime 200000x ./internal/stageenc
//	go test -run '^$' -fuzz '^FuzzRoundTrip$' -fuzztime 200000x ./internal/stageenc

// FuzzDecode feeds arbitrary bytes to Decode: it never panics, its errors wrap ErrInvalid,
// and what it accepts encodes back to exactly the input.
func FuzzDecode(f *testing.F) {
	for _, series := range testColumns() {
		if b := Append(nil, series); len(b) < 4096 {
			f.Add(b)
		}
	}
	f.Add([]byte{1, 0x80, 0x00})
	f.Add([]byte{1, 0, 0, 1, 'a', 1, 0, 1, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f})
	f.Fuzz(func(t *testing.T, b []byte) {
		series, err := Decode(b)
		// DecodeSome checks as much as Decode whatever it keeps.
		if _, serr := DecodeSome(b, map[string]bool{}); (serr == nil) != (err == nil) {
			t.Fatalf("Decode: %v, but DecodeSome of no series: %v", err, serr)
		}
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		if again := Append(nil, series); !bytes.Equal(again, b) {
			t.Fatalf("decoded %v re-encodes to %x, not %x", series, again, b)
		}
		// Every other series kept: exactly those, as Decode gives them.
		want, kept := map[string]bool{}, []Series(nil)
		for i, s := range series {
			if i%2 == 0 {
				want[s.Key] = true
			}
		}
		for _, s := range series {
			if want[s.Key] {
				kept = append(kept, s)
			}
		}
		some, err := DecodeSome(b, want)
		if err != nil {
			t.Fatalf("DecodeSome: %v, where Decode succeeded", err)
		}
		sameSeries(t, some, kept)
	})
}

// FuzzRoundTrip derives series from the input, encodes them, and checks that they decode
// bit for bit, that the column encodes back to itself, and that Size bounds each record.
func FuzzRoundTrip(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\x10\x11\x12\x13"))
	f.Add([]byte("\x17\xff\xff\xff\xff\xff\xff\xff\xff\x7f\xf0\x00\x00\x00\x00\x00\x02\x3c\x80\x00\x00\x00\x00\x00\x00\x00\x51\x09"))
	f.Add([]byte("\xfe\x80\x00\x00\x00\x00\x00\x00\x01\x20\x03abc\x9f\x00\x00\x00\x00\x00\x00\x20\x00\x41"))
	f.Fuzz(func(t *testing.T, data []byte) {
		series := fuzzSeries(data)
		b := Append(nil, series)
		got, err := Decode(b)
		if err != nil {
			t.Fatalf("Decode(%x): %v", b, err)
		}
		sameSeries(t, got, series)
		if again := Append(nil, got); !bytes.Equal(again, b) {
			t.Fatalf("re-encoded %x, was %x", again, b)
		}
		bound := HeaderSize
		for _, s := range series {
			bound += Size(s)
		}
		if len(b) > bound {
			t.Fatalf("column %d bytes, HeaderSize + Sizes %d", len(b), bound)
		}
	})
}

// maxFuzzSeries keeps each run fast: the mutator sometimes grows inputs to megabytes.
const maxFuzzSeries = 200

// fuzzSeries turns bytes into series. Each series starts with a control byte: its low 3 bits
// are the number of points less one, the next 2 bits pick the key, the top 3 bits the times;
// then each point's value reads a selector byte and a few more. Short inputs are extended
// with zeros, so that every input makes series.
func fuzzSeries(data []byte) []Series {
	take := func(n int) uint64 { // the next n bytes, zero-extended when short
		var buf [8]byte
		copy(buf[8-n:], data)
		data = data[min(n, len(data)):]
		return binary.BigEndian.Uint64(buf[:])
	}
	var out []Series
	for len(data) > 0 && len(out) < maxFuzzSeries {
		c := byte(take(1))
		s := Series{Key: fuzzKey(c>>3&3, take, out)}
		t := int64(take(8))
		for j := range int(c&7) + 1 {
			if j > 0 {
				var d uint64
				switch c >> 5 {
				case 0, 1, 2:
					d = take(1) + 1
				case 3, 4:
					d = take(2) + 1
				case 5:
					d = max(take(8)>>1, 1)
				default:
					d = 15000
				}
				if d > uint64(math.MaxInt64)-uint64(t) {
					break // past the int64 range: fewer points
				}
				t = int64(uint64(t) + d)
			}
			s.Times = append(s.Times, t)
			s.Values = append(s.Values, fuzzValue(take))
		}
		out = append(out, s)
	}
	return out
}

func fuzzKey(kind byte, take func(int) uint64, before []Series) string {
	switch kind {
	case 0: // a series key (tag 1)
		var h [16]byte
		binary.BigEndian.PutUint64(h[:], take(8))
		binary.BigEndian.PutUint64(h[8:], take(8))
		return "l" + hex.EncodeToString(h[:])
	case 1: // the same, uppercase (tag 0)
		var h [16]byte
		binary.BigEndian.PutUint64(h[:], take(8))
		return "l" + strings.ToUpper(hex.EncodeToString(h[:]))
	case 2: // 1 to 8 raw bytes
		n := int(take(1)%8) + 1
		return string(binary.BigEndian.AppendUint64(nil, take(n))[8-n:])
	default: // a key of the column again
		if len(before) == 0 {
			return "x"
		}
		return before[int(take(1))%len(before)].Key
	}
}

func fuzzValue(take func(int) uint64) float64 {
	switch sel := take(1); sel % 8 {
	case 0, 1: // raw bits
		return math.Float64frombits(take(8))
	case 2: // a small integer
		return float64(int8(take(1)))
	case 3: // an integer near 2^53
		return float64(int64(1<<53) - int64(take(1))*2 + 256)
	case 4: // a decimal
		return float64(int32(take(4))) / 1e4
	case 5: // a large integer of either sign
		return float64(int64(take(8)) >> (sel >> 3))
	default: // specials
		sp := specials()
		return sp[int(take(1))%len(sp)]
	}
}

// FuzzDecodeHist feeds arbitrary bytes to DecodeHist: it never panics, its errors wrap
// ErrInvalid, and what it accepts encodes (its samples re-encoded by internal/histenc) to a
// column that decodes to the same samples.
//
//	go test -run '^$' -fuzz '^FuzzDecodeHist$' -fuzztime 200000x ./internal/stageenc
func FuzzDecodeHist(f *testing.F) {
	for _, series := range histTestColumns() {
		f.Add(AppendHist(nil, series))
	}
	f.Add([]byte{HistVersion, 0, 1, 'a', 4, 1, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		series, err := DecodeHist(b)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		again, err := DecodeHist(AppendHist(nil, series))
		if err != nil {
			t.Fatalf("the decoded series encode to a column that does not decode: %v", err)
		}
		sameHists(t, again, series)
	})
}
