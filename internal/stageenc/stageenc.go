package stageenc

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
)

// Version is the first byte of every column.
const Version = 1

// HeaderSize bounds the column header: the version byte and the base time.
const HeaderSize = 1 + binary.MaxVarintLen64

// ErrInvalid is wrapped by every error of Decode.
var ErrInvalid = errors.New("malformed staging column")

// Series is one series' points in a column: Times strictly increasing (Unix milliseconds),
// Values the same length, float64 kept bit for bit (NaN payloads, -0, Inf).
type Series struct {
	Key    string
	Times  []int64
	Values []float64
}

// The tags of a record's key.
const (
	tagRaw       = 0 // uvarint length >= 1, then the key's bytes
	tagSeriesKey = 1 // the 16 bytes that the 32 hex digits of "l" + 32 lowercase hex spell
)

// seriesKeyBytes is the length of a series key's binary form (tag 1).
const seriesKeyBytes = 16

// The value forms: an even uvarint is a short integer, this one announces 8 bytes of bits.
const longValue = 1

// maxShort bounds the magnitude of a value in the short form: every integer up to 2^53 is a
// float64 exactly.
const maxShort = 1 << 53

// Append appends the column holding series (in the given order) to dst. Every Series must
// have a non-empty Key, at least one point, as many Values as Times, and strictly increasing
// Times; Append panics otherwise (a programming error: the caller sorted and deduplicated).
func Append(dst []byte, series []Series) []byte {
	var base int64
	for i, s := range series {
		mustBeValid(i, s)
		if i == 0 || s.Times[0] < base {
			base = s.Times[0]
		}
	}
	dst = append(dst, Version)
	dst = binary.AppendVarint(dst, base)
	for _, s := range series {
		dst = appendSeries(dst, base, s)
	}
	return dst
}

func mustBeValid(i int, s Series) {
	switch {
	case s.Key == "":
		panic(fmt.Sprintf("stageenc: series %d has an empty key", i))
	case len(s.Times) == 0:
		panic(fmt.Sprintf("stageenc: series %q has no points", s.Key))
	case len(s.Values) != len(s.Times):
		panic(fmt.Sprintf("stageenc: series %q has %d times and %d values", s.Key, len(s.Times), len(s.Values)))
	}
	for j := 1; j < len(s.Times); j++ {
		if s.Times[j] <= s.Times[j-1] {
			panic(fmt.Sprintf("stageenc: series %q: times %d, %d not strictly increasing", s.Key, s.Times[j-1], s.Times[j]))
		}
	}
}

func appendSeries(dst []byte, base int64, s Series) []byte {
	dst = appendKey(dst, s.Key)
	dst = binary.AppendUvarint(dst, uint64(len(s.Times)))
	// Differences modulo 2^64 are exact: every one is in [0, 2^64-1].
	dst = binary.AppendUvarint(dst, uint64(s.Times[0])-uint64(base))
	for j := 1; j < len(s.Times); j++ {
		dst = binary.AppendUvarint(dst, uint64(s.Times[j])-uint64(s.Times[j-1]))
	}
	for _, v := range s.Values {
		dst = appendValue(dst, v)
	}
	return dst
}

func appendKey(dst []byte, key string) []byte {
	if isSeriesKey(key) {
		dst = append(dst, tagSeriesKey)
		dst, _ = hex.AppendDecode(dst, []byte(key[1:])) // cannot fail: isSeriesKey checked the digits
		return dst
	}
	dst = append(dst, tagRaw)
	dst = binary.AppendUvarint(dst, uint64(len(key)))
	return append(dst, key...)
}

// isSeriesKey reports whether key is "l" and 32 lowercase hex digits, the form of a label
// set's series key, which tag 1 stores in 16 bytes. Uppercase digits would not round-trip.
func isSeriesKey[K string | []byte](key K) bool {
	if len(key) != 1+2*seriesKeyBytes || key[0] != 'l' {
		return false
	}
	for i := 1; i < len(key); i++ {
		if c := key[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func appendValue(dst []byte, v float64) []byte {
	if n, ok := shortValue(v); ok {
		return binary.AppendUvarint(dst, zigzag(n)<<1)
	}
	dst = append(dst, longValue)
	return binary.LittleEndian.AppendUint64(dst, math.Float64bits(v))
}

// shortValue returns v as an integer when the short form holds it: an integer of magnitude
// at most 2^53, and not -0 (whose bits an integer cannot carry).
func shortValue(v float64) (int64, bool) {
	if v < -maxShort || v > maxShort || v != math.Trunc(v) || (v == 0 && math.Signbit(v)) {
		return 0, false // NaN fails v == Trunc(v)
	}
	return int64(v), true
}

func zigzag(n int64) uint64 { return uint64(n<<1) ^ uint64(n>>63) }

func unzigzag(z uint64) int64 { return int64(z>>1) ^ -int64(z&1) }

// Size is an upper bound of the bytes s adds to a column (so the caller can pack columns
// under Azure's 64 KiB binary property limit without encoding twice). It is exact but for
// the first time, whose distance to the column's base time it counts as 10 bytes, the most.
// HeaderSize bounds the column header.
func Size(s Series) int {
	n := 1 + seriesKeyBytes
	if !isSeriesKey(s.Key) {
		n = 1 + uvarintLen(uint64(len(s.Key))) + len(s.Key)
	}
	n += uvarintLen(uint64(len(s.Times))) + binary.MaxVarintLen64
	for j := 1; j < len(s.Times); j++ {
		n += uvarintLen(uint64(s.Times[j]) - uint64(s.Times[j-1]))
	}
	for _, v := range s.Values {
		if i, ok := shortValue(v); ok {
			n += uvarintLen(zigzag(i) << 1)
		} else {
			n += 1 + 8
		}
	}
	return n
}

func uvarintLen(x uint64) int {
	n := 1
	for ; x >= 0x80; x >>= 7 {
		n++
	}
	return n
}
