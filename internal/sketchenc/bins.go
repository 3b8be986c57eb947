package sketchenc

import (
	"fmt"
	"math"
	"math/bits"
)

// Bin is a key of a sketch's index mapping and the number of values counted in it.
type Bin struct {
	Key   int32
	Count uint64
}

// ZeroCount is the number of values counted as zero.
func (s *Sketch) ZeroCount() uint64 { return s.zero }

// Bins returns the bins of the positive values (negative: of the negative values'
// magnitudes) by ascending key, appended to dst.
func (s *Sketch) Bins(dst []Bin, negative bool) []Bin {
	store := s.pos
	if negative {
		store = s.neg
	}
	for _, b := range sortedBins(store) {
		dst = append(dst, Bin{b.key, b.n})
	}
	return dst
}

// Gamma is the base of s's index mapping: two sketches merge exactly when theirs are equal.
func (s *Sketch) Gamma() float64 { return s.m.gamma }

// Gamma is the base of the index mapping of relative accuracy a (0: the default), which
// [CheckAccuracy] accepts.
func Gamma(a float64) float64 { m := newMapping(a); return m.gamma }

// KeyRange is the range of the keys a sketch of relative accuracy a (0: the default), which
// [CheckAccuracy] accepts, may hold: the key of the smallest magnitude counted apart from
// zero, and the key of infinities.
func KeyRange(a float64) (lo, hi int32) {
	m := newMapping(a)
	return m.minKey, m.infKey()
}

// FromBins returns the sketch of relative accuracy a (0: the default) of zero values counted
// as zero and the given bins, each of a count of at least 1, by strictly ascending key
// within KeyRange(a). Anything else is an error wrapping [ErrInvalid] (an invalid accuracy:
// an error of its own), as is a total count that overflows.
func FromBins(a float64, zero uint64, pos, neg []Bin) (*Sketch, error) {
	if err := CheckAccuracy(a); err != nil {
		return nil, err
	}
	s := newSketch(newMapping(a))
	s.zero = zero
	total := zero
	for _, side := range []struct {
		bins  []Bin
		store map[int32]uint64
	}{{pos, s.pos}, {neg, s.neg}} {
		prev := int64(math.MinInt64)
		for _, b := range side.bins {
			if int64(b.Key) <= prev {
				return nil, fmt.Errorf("%w: keys not ascending", ErrInvalid)
			}
			if b.Key < s.m.minKey || b.Key > s.m.infKey() {
				return nil, fmt.Errorf("%w: key %d out of [%d, %d]", ErrInvalid, b.Key, s.m.minKey, s.m.infKey())
			}
			if b.Count == 0 {
				return nil, fmt.Errorf("%w: key %d has count 0", ErrInvalid, b.Key)
			}
			var carry uint64
			if total, carry = bits.Add64(total, b.Count, 0); carry != 0 {
				return nil, fmt.Errorf("%w: count overflows", ErrInvalid)
			}
			prev = int64(b.Key)
			side.store[b.Key] = b.Count
		}
	}
	return s, nil
}
