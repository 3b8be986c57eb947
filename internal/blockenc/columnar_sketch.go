package blockenc

import (
	"github.com/seed71701133/tablets/internal/bitcode"
	"github.com/seed71701133/tablets/internal/sketchenc"
)

// The sketch stream (docs/format.md, "Columnar tier blocks"): the mapping's gamma, then per
// window with points whether it has a sketch, and its bins coded against the previous
// sketch's: consecutive windows of a series have similar distributions.

// sketchState is what the coding of a sketch predicts from, and the states of its rice codes.
type sketchState struct {
	zero uint64 // the previous sketch's zero count
	// stores are the bins of the last earlier store of each sign (positive, negative) that
	// had any, by ascending key.
	stores         [2][]sketchenc.Bin
	zeroS          bitcode.Adaptive
	nS, keyS, gapS bitcode.Adaptive
	newS, deltaS   bitcode.Adaptive // counts of keys the earlier store lacked, and of those it had
}

func newSketchState() *sketchState {
	return &sketchState{zeroS: bitcode.NewAdaptive(), nS: bitcode.NewAdaptive(), keyS: bitcode.NewAdaptive(),
		gapS: bitcode.NewAdaptive(), newS: bitcode.NewAdaptive(), deltaS: bitcode.NewAdaptive()}
}

// prevCount returns the previous store's count of key, walking it from *i (keys ascend).
func prevCount(prev []sketchenc.Bin, i *int, key int32) uint64 {
	for *i < len(prev) && prev[*i].Key < key {
		*i++
	}
	if *i < len(prev) && prev[*i].Key == key {
		return prev[*i].Count
	}
	return 0
}

// write writes sk, coded against the sketches written before.
func (s *sketchState) write(w *bitcode.Writer, sk *sketchenc.Sketch) {
	s.zeroS.Write(w, bitcode.Zigzag(int64(sk.ZeroCount()-s.zero)))
	s.zero = sk.ZeroCount()
	for side := range 2 {
		prev := s.stores[side]
		bins := sk.Bins(nil, side == 1)
		s.nS.Write(w, bitcode.Zigzag(int64(len(bins)-len(prev))))
		pi := 0
		for i, b := range bins {
			switch {
			case i > 0:
				s.gapS.Write(w, uint64(int64(b.Key)-int64(bins[i-1].Key)-1))
			case len(prev) > 0:
				s.keyS.Write(w, bitcode.Zigzag(int64(b.Key)-int64(prev[0].Key)))
			default:
				s.keyS.Write(w, bitcode.Zigzag(int64(b.Key)))
			}
			if pc := prevCount(prev, &pi, b.Key); pc == 0 {
				s.newS.Write(w, b.Count-1)
			} else {
				s.deltaS.Write(w, bitcode.Zigzag(int64(b.Count-pc)))
			}
		}
		if len(bins) > 0 {
			s.stores[side] = bins
		}
	}
}

// read reads a sketch of relative accuracy accuracy (keys within [lo, hi]).
func (s *sketchState) read(r *bitcode.Reader, accuracy float64, lo, hi int32) (*sketchenc.Sketch, error) {
	s.zero += uint64(bitcode.Unzigzag(s.zeroS.Read(r)))
	var sides [2][]sketchenc.Bin
	for side := range 2 {
		prev := s.stores[side]
		n := int64(len(prev)) + bitcode.Unzigzag(s.nS.Read(r))
		// A bin takes a bit at least: no more bins than bits left.
		if r.Err() || n < 0 || uint64(n) > r.Remaining() || n > int64(hi)-int64(lo)+1 {
			return nil, errBadColumn
		}
		bins := make([]sketchenc.Bin, n)
		pi := 0
		key := int64(0)
		for i := range bins {
			switch {
			case i > 0:
				gap := s.gapS.Read(r)
				if gap > uint64(hi-lo) {
					return nil, errBadColumn
				}
				key += int64(gap) + 1
			case len(prev) > 0:
				key = int64(prev[0].Key) + bitcode.Unzigzag(s.keyS.Read(r))
			default:
				key = bitcode.Unzigzag(s.keyS.Read(r))
			}
			if r.Err() || key < int64(lo) || key > int64(hi) {
				return nil, errBadColumn
			}
			b := sketchenc.Bin{Key: int32(key)}
			if pc := prevCount(prev, &pi, b.Key); pc == 0 {
				b.Count = s.newS.Read(r) + 1
			} else {
				b.Count = pc + uint64(bitcode.Unzigzag(s.deltaS.Read(r)))
			}
			if b.Count == 0 {
				return nil, errBadColumn
			}
			bins[i] = b
		}
		if n > 0 {
			s.stores[side] = bins
		}
		sides[side] = bins
	}
	if r.Err() {
		return nil, errBadColumn
	}
	sk, err := sketchenc.FromBins(accuracy, s.zero, sides[0], sides[1])
	if err != nil {
		return nil, errBadColumn
	}
	return sk, nil
}
