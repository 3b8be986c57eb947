package sketchenc

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/bits"

	enc "github.com/DataDog/sketches-go/ddsketch/encoding"
)

// The blocks of DDSketch's encoding that ours uses, in the order written (see
// docs/format.md): the mapping last, so that any truncation lacks it.
var (
	flagZeroCount = enc.FlagZeroCountVarFloat
	flagPosBins   = enc.NewFlag(enc.FlagTypePositiveStore, enc.BinEncodingIndexDeltasAndCounts)
	flagNegBins   = enc.NewFlag(enc.FlagTypeNegativeStore, enc.BinEncodingIndexDeltasAndCounts)
	flagMapping   = enc.FlagIndexMappingBaseLogarithmic
)

// Append appends the encoding of s to dst (docs/format.md, "Sketch").
func (s *Sketch) Append(dst []byte) []byte {
	b := append(dst, Version)
	if s.zero > 0 {
		enc.EncodeFlag(&b, flagZeroCount)
		enc.EncodeVarfloat64(&b, float64(s.zero))
	}
	b = appendBins(b, flagPosBins, s.pos)
	b = appendBins(b, flagNegBins, s.neg)
	enc.EncodeFlag(&b, flagMapping)
	enc.EncodeFloat64LE(&b, s.m.gamma)
	enc.EncodeFloat64LE(&b, 0)
	return b
}

func appendBins(b []byte, flag enc.Flag, store map[int32]uint64) []byte {
	if len(store) == 0 {
		return b
	}
	enc.EncodeFlag(&b, flag)
	enc.EncodeUvarint64(&b, uint64(len(store)))
	prev := int64(0)
	for _, bin := range sortedBins(store) {
		enc.EncodeVarint64(&b, int64(bin.key)-prev)
		enc.EncodeVarfloat64(&b, float64(bin.n))
		prev = int64(bin.key)
	}
	return b
}

// ErrInvalid is wrapped by the errors of Decode on bytes that are not a sketch's encoding.
var ErrInvalid = errors.New("invalid sketch encoding")

// Decode decodes the encoding of a sketch of relative accuracy a (0: the default): any
// bytes but what [Sketch.Append] writes for a sketch of that accuracy are an error wrapping
// [ErrInvalid] (an invalid accuracy: an error of its own). It never panics, and allocates
// in proportion to len(b).
func Decode(b []byte, a float64) (*Sketch, error) {
	if err := CheckAccuracy(a); err != nil {
		return nil, err
	}
	if len(b) == 0 {
		return nil, fmt.Errorf("%w: empty", ErrInvalid)
	}
	if b[0] != Version {
		return nil, fmt.Errorf("%w: unknown version %d", ErrInvalid, b[0])
	}
	s := newSketch(newMapping(a))
	rest := b[1:]
	var total uint64
	stage := 0 // the blocks read: 1 zero count, 2 positive bins, 3 negative bins, 4 mapping
	for stage < 4 {
		flag, err := enc.DecodeFlag(&rest)
		if err != nil {
			return nil, fmt.Errorf("%w: truncated", ErrInvalid)
		}
		switch {
		case flag == flagZeroCount && stage < 1:
			stage = 1
			if s.zero, err = decodeCount(&rest); err != nil {
				return nil, err
			}
			total = s.zero
		case flag == flagPosBins && stage < 2:
			stage = 2
			if total, err = decodeBins(&rest, s.pos, &s.m, total); err != nil {
				return nil, err
			}
		case flag == flagNegBins && stage < 3:
			stage = 3
			if total, err = decodeBins(&rest, s.neg, &s.m, total); err != nil {
				return nil, err
			}
		case flag == flagMapping:
			stage = 4
			gamma, err1 := enc.DecodeFloat64LE(&rest)
			offset, err2 := enc.DecodeFloat64LE(&rest)
			if err1 != nil || err2 != nil {
				return nil, fmt.Errorf("%w: truncated", ErrInvalid)
			}
			if math.Float64bits(gamma) != math.Float64bits(s.m.gamma) || math.Float64bits(offset) != 0 {
				return nil, fmt.Errorf("%w: index mapping (gamma %g, offset %g) is not of relative accuracy %g (gamma %g)",
					ErrInvalid, gamma, offset, s.m.accuracy, s.m.gamma)
			}
		default:
			return nil, fmt.Errorf("%w: unexpected block %#x", ErrInvalid, flag)
		}
	}
	if len(rest) > 0 {
		return nil, fmt.Errorf("%w: %d bytes after the index mapping", ErrInvalid, len(rest))
	}
	// What is left to reject is what Append would write otherwise (overlong varints,
	// say): whatever decodes re-encodes to the same bytes.
	if !bytes.Equal(s.Append(make([]byte, 0, len(b))), b) {
		return nil, fmt.Errorf("%w: not canonical", ErrInvalid)
	}
	return s, nil
}

// decodeCount decodes a varfloat64 count: an integer in [1, 2^53].
func decodeCount(b *[]byte) (uint64, error) {
	f, err := enc.DecodeVarfloat64(b)
	if err != nil {
		return 0, fmt.Errorf("%w: truncated", ErrInvalid)
	}
	if !(f >= 1 && f <= 1<<53 && f == math.Trunc(f)) {
		return 0, fmt.Errorf("%w: count %g", ErrInvalid, f)
	}
	return uint64(f), nil
}

// decodeBins decodes the bins of a store into store, and returns total plus their counts.
func decodeBins(b *[]byte, store map[int32]uint64, m *logMapping, total uint64) (uint64, error) {
	n, err := enc.DecodeUvarint64(b)
	if err != nil {
		return 0, fmt.Errorf("%w: truncated", ErrInvalid)
	}
	if n == 0 || n > uint64(len(*b))/2 { // a bin takes 2 bytes at least
		return 0, fmt.Errorf("%w: %d bins in %d bytes", ErrInvalid, n, len(*b))
	}
	key := int64(0)
	for i := range n {
		d, err := enc.DecodeVarint64(b)
		if err != nil {
			return 0, fmt.Errorf("%w: truncated", ErrInvalid)
		}
		if i > 0 && d <= 0 {
			return 0, fmt.Errorf("%w: keys not ascending", ErrInvalid)
		}
		key += d // may wrap only far below minKey: key was in int32 range
		if !(key >= int64(m.minKey) && key <= int64(m.infKey())) {
			return 0, fmt.Errorf("%w: key %d out of [%d, %d]", ErrInvalid, key, m.minKey, m.infKey())
		}
		c, err := decodeCount(b)
		if err != nil {
			return 0, err
		}
		var carry uint64
		if total, carry = bits.Add64(total, c, 0); carry != 0 {
			return 0, fmt.Errorf("%w: count overflows", ErrInvalid)
		}
		store[int32(key)] = c
	}
	return total, nil
}
