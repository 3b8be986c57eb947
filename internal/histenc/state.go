package histenc

import (
	"github.com/seed71701133/tablets"

	"github.com/seed71701133/tablets/internal/bitcode"
)

// bucketState is the prediction state of one count stream (a bucket, the zero bucket, a
// float count) from one sample to the next. An integer or decimal count is predicted as the
// last count plus the stream's mean delta, a moving average over about 8 samples: counters
// grow by their rate plus noise, and the mean of recent deltas predicts the next one better
// than the last delta does (for Poisson noise, half the variance of delta-of-delta). The
// residual is Rice-coded with the stream's own adaptive parameter, so a tail bucket that
// rarely moves costs a bit and a busy middle one about the entropy of its noise. XOR counts
// keep Gorilla's window.
type bucketState struct {
	seen    bool // the previous sample had this stream; else the value is coded unpredicted
	hasMean bool // the stream has had a delta
	c       int64
	mean    int64 // in sixteenths
	s       bitcode.Adaptive
	x       bitcode.XORState // XOR: the last bits and window
}

// meanShift sets the weight of a new delta in the mean: 1/8. Deltas in sixteenths keep the
// mean's fractions; arithmetic wraps the same way for the writer and the reader.
const meanShift = 3

func (b *bucketState) prediction() int64 {
	if !b.hasMean {
		return b.c
	}
	return b.c + (b.mean+8)>>4
}

// learn moves to the value v.
func (b *bucketState) learn(v int64) {
	d := v - b.c
	if b.hasMean {
		b.mean += (d<<4 - b.mean) >> meanShift
	} else {
		b.mean, b.hasMean = d<<4, true
	}
	b.c = v
}

func (b *bucketState) writeInt(w *bitcode.Writer, v int64) {
	if !b.seen {
		w.WriteN(bitcode.Zigzag(v))
		*b = bucketState{seen: true, c: v, s: bitcode.NewAdaptive()}
		return
	}
	b.s.Write(w, bitcode.Zigzag(v-b.prediction()))
	b.learn(v)
}

func (b *bucketState) readInt(r *bitcode.Reader) int64 {
	if !b.seen {
		z, ok := r.ReadN()
		if !ok {
			r.Fail()
		}
		v := bitcode.Unzigzag(z)
		*b = bucketState{seen: true, c: v, s: bitcode.NewAdaptive()}
		return v
	}
	v := b.prediction() + bitcode.Unzigzag(b.s.Read(r))
	b.learn(v)
	return v
}

func (b *bucketState) writeXOR(w *bitcode.Writer, v uint64) {
	if !b.seen {
		w.WriteBits(v, 64)
		*b = bucketState{seen: true, x: bitcode.XORState{Prev: v}}
		return
	}
	b.x.Step(w, v)
}

// readXOR returns false for an XOR code the writer cannot make (see bitcode.XORState.Read).
func (b *bucketState) readXOR(r *bitcode.Reader) (uint64, bool) {
	if !b.seen {
		v := r.ReadLong(64)
		*b = bucketState{seen: true, x: bitcode.XORState{Prev: v}}
		return v, true
	}
	_, ok := b.x.Read(r)
	return b.x.Prev, ok
}

// state is what the writer and the reader know after a sample: its kind, hint and layout,
// and the count streams, which carry over to the next sample of the same kind bucket by
// bucket index.
type state struct {
	have   bool
	float  bool
	hint   tablets.CounterResetHint
	lay    layout
	posIdx []int64 // the bucket index of each positive bucket
	negIdx []int64
	zero   bucketState
	pos    []bucketState
	neg    []bucketState
	countX bucketState // a float count in XOR coding

	// Residuals of integer counts from the buckets' total, and of scaled float counts: each
	// one adaptive state for the chunk.
	intCount, decCount bitcode.Adaptive
}

func newState() state {
	return state{intCount: bitcode.NewAdaptive(), decCount: bitcode.NewAdaptive()}
}

// next moves to a sample of kind float with layout lay (same: the previous sample's).
// Streams of the other kind start afresh; a bucket whose index the previous sample lacked
// too.
func (st *state) next(float bool, hint tablets.CounterResetHint, lay layout, same bool) {
	kindSame := st.have && float == st.float
	if !kindSame {
		st.zero, st.countX = bucketState{}, bucketState{}
	}
	if !same {
		posIdx, negIdx := appendIndexes(nil, lay.pos), appendIndexes(nil, lay.neg)
		if kindSame {
			st.pos = carry(st.posIdx, st.pos, posIdx)
			st.neg = carry(st.negIdx, st.neg, negIdx)
		} else {
			st.pos, st.neg = make([]bucketState, len(posIdx)), make([]bucketState, len(negIdx))
		}
		st.posIdx, st.negIdx = posIdx, negIdx
	} else if !kindSame {
		clear(st.pos)
		clear(st.neg)
	}
	st.have, st.float, st.hint, st.lay = true, float, hint, lay
}

// carry returns the states of the buckets at newIdx: the old one of the same index, or a
// fresh one. Both index lists strictly increase.
func carry(oldIdx []int64, old []bucketState, newIdx []int64) []bucketState {
	out := make([]bucketState, len(newIdx))
	j := 0
	for i, idx := range newIdx {
		for j < len(oldIdx) && oldIdx[j] < idx {
			j++
		}
		if j < len(oldIdx) && oldIdx[j] == idx {
			out[i] = old[j]
		}
	}
	return out
}
