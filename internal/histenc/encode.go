package histenc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/bitcode"
)

// Sample is one histogram sample: its time in resolution units and exactly one of H, FH.
type Sample struct {
	Unit uint64
	H    *tablets.Histogram
	FH   *tablets.FloatHistogram
}

// Version is the format version, the first byte of every chunk.
const Version = 1

// Errors of Decode and Header.
var (
	ErrVersion = errors.New("histenc: unknown chunk version")
	ErrCorrupt = errors.New("histenc: corrupt chunk")
)

// MinLimit is the smallest limit AppendLimit is meant for: a sample of up to 40 buckets and
// 40 custom bounds, whatever its layout and values, makes a chunk of at most MinLimit bytes.
// (A chunk always holds its first sample, even over the limit.)
const MinLimit = 1 << 10

// Codings of the sums, the low two bits of the mode byte, as in internal/chunkenc.
const (
	valuesXOR     = 0 // Gorilla XOR of the float64 bits
	valuesDelta   = 1 // decimal: scaled integers, delta prediction
	valuesDelta2  = 2 // decimal: scaled integers, delta-of-delta prediction
	valueCodings  = 3 // number of value codings; 3 is reserved
	modeTimeOrder = 1 << 2
	modeExpShift  = 3
)

// Append appends the chunk of samples to dst. Units must strictly increase and each sample
// must have exactly one of H and FH, whose spans hold as many buckets as given and have no
// negative offset but the first's (what Validate checks): Append panics otherwise, as
// callers validate samples first. Zero samples make the 4-byte empty chunk. The same samples
// always make the same bytes (tsdb names chunks by a hash of them).
func Append(dst []byte, samples []Sample) []byte {
	mustValid(samples)
	return appendBest(dst, samples)
}

// AppendLimit appends a chunk of the first n samples whose encoding fits limit bytes, and
// returns it and n: n is the largest such count in all but contrived cases (the chunk of n
// fits and that of n+1 does not). The first sample always goes in, even alone over limit,
// which takes more than 40 buckets with a limit of MinLimit, or thousands of buckets for a
// limit of 64 KiB. It panics where Append does.
func AppendLimit(dst []byte, samples []Sample, limit int) ([]byte, int) {
	mustValid(samples)
	if len(samples) <= 1 {
		return appendBest(dst, samples), len(samples)
	}
	var best []byte
	size := 0 // of the last chunk tried
	fits := func(n int) bool {
		chunk := appendBest(nil, samples[:n])
		size = len(chunk)
		if size > limit {
			return false
		}
		best = chunk
		return true
	}
	// A probe of a few samples guesses the count from their mean size; lastFit brackets the
	// count from the guess and bisects, encoding prefixes not much longer than the answer
	// however many samples there are.
	probe := min(len(samples), 64)
	guess := func() int { return probe * min(limit, 1<<40) / size }
	var n int
	if fits(probe) {
		if probe == len(samples) {
			return append(dst, best...), probe
		}
		n = bitcode.LastFit(probe, len(samples)+1, guess(), fits)
	} else {
		n = bitcode.LastFit(0, probe, guess(), fits)
	}
	if n == 0 {
		best, n = appendBest(nil, samples[:1]), 1
	}
	return append(dst, best...), n
}

func mustValid(samples []Sample) {
	for i, s := range samples {
		if i > 0 && s.Unit <= samples[i-1].Unit {
			panic(fmt.Sprintf("histenc: sample %d at unit %d, not after %d", i, s.Unit, samples[i-1].Unit))
		}
		switch {
		case (s.H == nil) == (s.FH == nil):
			panic(fmt.Sprintf("histenc: sample %d has not exactly one of H and FH", i))
		case s.H != nil:
			checkSpans(s.H.PositiveSpans, len(s.H.PositiveBuckets), "positive")
			checkSpans(s.H.NegativeSpans, len(s.H.NegativeBuckets), "negative")
		default:
			checkSpans(s.FH.PositiveSpans, len(s.FH.PositiveBuckets), "positive")
			checkSpans(s.FH.NegativeSpans, len(s.FH.NegativeBuckets), "negative")
		}
	}
}

// plan is how a chunk codes its times, sums and float counts.
type plan struct {
	sums         uint // valuesXOR, valuesDelta or valuesDelta2
	sumExp       uint
	timeOrder2   bool
	floatDecimal bool // float counts as scaled integers, else XOR
	floatExp     uint
}

func (p plan) mode() byte {
	m := byte(p.sums) | byte(p.sumExp)<<modeExpShift
	if p.timeOrder2 {
		m |= modeTimeOrder
	}
	return m
}

func (p plan) floatMode() byte {
	if p.floatDecimal {
		return byte(p.floatExp) + 1
	}
	return 0
}

// appendBest appends the smallest chunk of the plans makePlan leaves open: float counts as
// decimals or XOR, when both can code them.
func appendBest(dst []byte, samples []Sample) []byte {
	p, decimalFloats := makePlan(samples)
	if !decimalFloats {
		return encode(dst, samples, p)
	}
	xor := encode(nil, samples, p)
	p.floatDecimal = true
	dec := encode(nil, samples, p)
	if len(dec) <= len(xor) {
		return append(dst, dec...)
	}
	return append(dst, xor...)
}

// makePlan picks the time prediction and the sum coding by their exact costs, ties going to
// the simpler one, and finds the exponent of float counts if they are all decimals (true).
func makePlan(samples []Sample) (plan, bool) {
	var p plan
	if len(samples) == 0 {
		return p, false
	}
	first, last := samples[0].Unit, samples[len(samples)-1].Unit
	t1 := bitcode.NewTimeCoder(false, len(samples), first, last)
	t2 := bitcode.NewTimeCoder(true, len(samples), first, last)
	sums := make([]float64, len(samples))
	var floats []float64
	for i, s := range samples {
		if s.H != nil {
			sums[i] = s.H.Sum
			continue
		}
		sums[i] = s.FH.Sum
		floats = append(floats, s.FH.ZeroCount, s.FH.Count)
		floats = append(floats, s.FH.PositiveBuckets...)
		floats = append(floats, s.FH.NegativeBuckets...)
	}
	xs := bitcode.XORState{Prev: math.Float64bits(sums[0])}
	e, decimal := bitcode.FindExp(sums)
	d1, d2 := bitcode.NewDecimalCoder(e, false), bitcode.NewDecimalCoder(e, true)
	ct1, ct2, cd1, cd2, cx := 0, 0, 0, 0, 64
	if decimal {
		n, _ := bitcode.Scaled(sums[0], e)
		cd1, cd2 = d1.First(n), d2.First(n)
	}
	for i := 1; i < len(samples); i++ {
		delta := samples[i].Unit - samples[i-1].Unit
		ct1 += t1.S.Cost(t1.Residual(delta))
		ct2 += t2.S.Cost(t2.Residual(delta))
		cx += xs.Step(nil, math.Float64bits(sums[i]))
		if decimal {
			n, _ := bitcode.Scaled(sums[i], e)
			cd1 += d1.S.Cost(d1.Residual(n))
			cd2 += d2.S.Cost(d2.Residual(n))
		}
	}
	p.timeOrder2 = ct2 < ct1
	best := cx
	if decimal && cd1 <= best {
		p.sums, p.sumExp, best = valuesDelta, e, cd1
	}
	if decimal && cd2 < best {
		p.sums, p.sumExp = valuesDelta2, e
	}
	if len(floats) == 0 {
		return p, false
	}
	p.floatExp, decimal = bitcode.FindExp(floats)
	return p, decimal
}

// sumCoder codes the sums of a chunk, one stream across both kinds.
type sumCoder struct {
	coding uint
	xs     bitcode.XORState
	dc     bitcode.DecimalCoder
}

func newSumCoder(coding, exp uint) sumCoder {
	return sumCoder{coding: coding, dc: bitcode.NewDecimalCoder(exp, coding == valuesDelta2)}
}

func (c *sumCoder) write(w *bitcode.Writer, v float64, first bool) {
	switch {
	case c.coding != valuesXOR && first:
		c.dc.WriteFirst(w, v)
	case c.coding != valuesXOR:
		c.dc.WriteNext(w, v)
	case first:
		c.xs.Prev = math.Float64bits(v)
		w.WriteBits(c.xs.Prev, 64)
	default:
		c.xs.Step(w, math.Float64bits(v))
	}
}

func (c *sumCoder) read(r *bitcode.Reader, first bool) (float64, bool) {
	switch {
	case c.coding != valuesXOR && first:
		return c.dc.ReadFirst(r)
	case c.coding != valuesXOR:
		return c.dc.ReadNext(r)
	case first:
		c.xs.Prev = r.ReadLong(64)
		return math.Float64frombits(c.xs.Prev), true
	}
	return c.xs.Read(r)
}

func encode(dst []byte, samples []Sample, p plan) []byte {
	dst = append(dst, Version, p.mode(), p.floatMode())
	dst = binary.AppendUvarint(dst, uint64(len(samples)))
	if len(samples) == 0 {
		return dst
	}
	first, last := samples[0].Unit, samples[len(samples)-1].Unit
	dst = binary.AppendUvarint(dst, first)
	dst = binary.AppendUvarint(dst, last-first)
	w := bitcode.NewWriter(dst)
	tc := bitcode.NewTimeCoder(p.timeOrder2, len(samples), first, last)
	sc := newSumCoder(p.sums, p.sumExp)
	st := newState()
	for i, s := range samples {
		if i > 0 {
			tc.Write(&w, s.Unit-samples[i-1].Unit)
		}
		st.writeHead(&w, s)
		if s.H != nil {
			st.writeInts(&w, s.H)
			sc.write(&w, s.H.Sum, i == 0)
			continue
		}
		if p.floatDecimal {
			st.writeDecimals(&w, s.FH, p.floatExp)
		} else {
			st.writeXORs(&w, s.FH)
		}
		sc.write(&w, s.FH.Sum, i == 0)
	}
	return w.Finish()
}

// writeHead writes a sample's kind, hint and layout (only what changed), and moves the
// state to it.
func (st *state) writeHead(w *bitcode.Writer, s Sample) {
	float := s.FH != nil
	hint := hintOf(s)
	lay := layoutOf(s)
	same := st.have && lay.equal(st.lay)
	if st.have {
		if same && float == st.float && hint == st.hint {
			w.WriteBits(0, 1)
			st.next(float, hint, lay, true)
			return
		}
		w.WriteBits(1, 1)
	}
	w.WriteBits(b2u(float), 1)
	w.WriteBits(uint64(hint), 8)
	if st.have {
		w.WriteBits(b2u(!same), 1)
	}
	if !same {
		lay.write(w)
	}
	st.next(float, hint, lay, same)
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// writeInts writes an integer histogram's counts: the zero bucket's, each bucket's
// absolute count, and Count's difference to their total.
func (st *state) writeInts(w *bitcode.Writer, h *tablets.Histogram) {
	st.zero.writeInt(w, int64(h.ZeroCount))
	total := h.ZeroCount
	for side, buckets := range [2][]int64{h.PositiveBuckets, h.NegativeBuckets} {
		states := st.sideStates(side)
		var abs int64
		for j, d := range buckets {
			abs += d
			states[j].writeInt(w, abs)
			total += uint64(abs)
		}
	}
	st.intCount.Write(w, bitcode.Zigzag(int64(h.Count-total)))
}

// writeDecimals writes a float histogram's counts as writeInts does, scaled by 10^e.
func (st *state) writeDecimals(w *bitcode.Writer, h *tablets.FloatHistogram, e uint) {
	total := mustScaled(h.ZeroCount, e)
	st.zero.writeInt(w, total)
	for side, buckets := range [2][]float64{h.PositiveBuckets, h.NegativeBuckets} {
		states := st.sideStates(side)
		for j, v := range buckets {
			n := mustScaled(v, e)
			states[j].writeInt(w, n)
			total += n
		}
	}
	st.decCount.Write(w, bitcode.Zigzag(mustScaled(h.Count, e)-total))
}

func mustScaled(v float64, e uint) int64 {
	n, _ := bitcode.Scaled(v, e) // makePlan checked every float count
	return n
}

// writeXORs writes a float histogram's counts, each XORed with the same count before.
func (st *state) writeXORs(w *bitcode.Writer, h *tablets.FloatHistogram) {
	st.zero.writeXOR(w, math.Float64bits(h.ZeroCount))
	for side, buckets := range [2][]float64{h.PositiveBuckets, h.NegativeBuckets} {
		states := st.sideStates(side)
		for j, v := range buckets {
			states[j].writeXOR(w, math.Float64bits(v))
		}
	}
	st.countX.writeXOR(w, math.Float64bits(h.Count))
}

func (st *state) sideStates(side int) []bucketState {
	if side == 0 {
		return st.pos
	}
	return st.neg
}

func hintOf(s Sample) tablets.CounterResetHint {
	if s.H != nil {
		return s.H.CounterResetHint
	}
	return s.FH.CounterResetHint
}
