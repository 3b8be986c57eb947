package chunkenc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// Version is the format version byte written first in every chunk.
const Version = 1

// MinLimit is the smallest maxBytes for which AppendLimit always encodes at least one point:
// the largest possible one-point chunk is 22 bytes.
const MinLimit = 32

var (
	// ErrCorrupt is wrapped by every error about a malformed chunk.
	ErrCorrupt = errors.New("chunkenc: malformed chunk")
	// ErrVersion is wrapped by the error for a chunk of a version this package cannot read.
	ErrVersion = errors.New("chunkenc: unknown chunk version")
)

// Value codings, the low two bits of the mode byte.
const (
	valuesXOR     = 0 // Gorilla XOR of the float64 bits
	valuesDelta   = 1 // decimal: scaled integers, delta prediction
	valuesDelta2  = 2 // decimal: scaled integers, delta-of-delta prediction
	valueCodings  = 3 // number of value codings; 3 is reserved
	modeTimeOrder = 1 << 2
	modeExpShift  = 3
)

// Append encodes the points as one chunk appended to dst and returns the extended slice.
//
// times are counts of resolution units, strictly increasing; values are any float64 and
// round-trip bit for bit. Zero points are allowed: the chunk is the 3 bytes 01 00 00.
// Append panics if len(times) != len(values) or times are not strictly increasing: those
// are programming errors, and callers validate their input.
func Append(dst []byte, times []uint64, values []float64) []byte {
	mustValid(times, values)
	return encode(dst, times, values, makePlan(times, values))
}

// AppendLimit encodes as many leading points as fit in a chunk of at most maxBytes bytes,
// appends it to dst and returns the extended slice and the number of points encoded.
//
// The count is greedy: the chunk of n points fits and, when there are more, the chunk of n+1
// points does not. (Chunk size grows with the count in all but contrived cases, so n is the
// largest count that fits there too.) With maxBytes >= MinLimit at least one point is
// encoded when there is one; below it n may be 0, and then dst is returned unchanged. Zero
// points are encoded as Append does. AppendLimit panics where Append does.
func AppendLimit(dst []byte, times []uint64, values []float64, maxBytes int) ([]byte, int) {
	mustValid(times, values)
	if len(times) == 0 {
		return encode(dst, times, values, plan{}), 0
	}
	// More than hi points never fit: every point after the first costs at least 2 bits.
	hi := len(times)
	if maxBytes < (hi-2)/4 {
		hi = 4*max(maxBytes, 0) + 2
	}
	p := makePlan(times[:hi], values[:hi])
	if hi == len(times) && p.size(times) <= maxBytes {
		return encode(dst, times, values, p), len(times)
	}
	var best plan
	fits := func(n int) bool {
		p := makePlan(times[:n], values[:n])
		if p.size(times[:n]) > maxBytes {
			return false
		}
		best = p
		return true
	}
	n := lastFit(0, hi, estimateFit(times[:hi], values[:hi], p, maxBytes), fits)
	if n == 0 {
		return dst, 0
	}
	return encode(dst, times[:n], values[:n], best), n
}

// lastFit returns n in [lo, hi) with fits(n) (or n == lo) and !fits(n+1), given that
// fits(lo) holds (or lo is 0) and fits(hi) does not. It gallops from guess to bracket the
// boundary and bisects the bracket: a few probes when the guess is close.
func lastFit(lo, hi, guess int, fits func(int) bool) int {
	if hi-lo <= 1 {
		return lo
	}
	guess = min(max(guess, lo+1), hi-1)
	if fits(guess) {
		lo = guess
		for step := 1; lo+step < hi; step *= 2 {
			if !fits(lo + step) {
				hi = lo + step
				break
			}
			lo += step
		}
	} else {
		hi = guess
		for step := 1; hi-step > lo; step *= 2 {
			if fits(hi - step) {
				lo = hi - step
				break
			}
			hi -= step
		}
	}
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if fits(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}

// estimateFit guesses how many leading points fit in maxBytes by adding up their codes as p,
// the plan for all the points, codes them. A plan for fewer points can differ (a smaller
// exponent, another prediction, another D), so this is only a guess for lastFit.
func estimateFit(times []uint64, values []float64, p plan, maxBytes int) int {
	header := p.size(times) - (p.bits+7)/8
	budget := 8 * (maxBytes - header)
	tc := newTimeCoder(p.timeOrder2, len(times), times[0], times[len(times)-1])
	xs := xorState{prev: math.Float64bits(values[0])}
	dc := newDecimalCoder(p.exp, p.values == valuesDelta2)
	used := 64
	if p.values != valuesXOR {
		n, _ := scaled(values[0], p.exp)
		used = dc.first(n)
	}
	for i := 1; i < len(times); i++ {
		used += tc.s.cost(tc.residual(times[i] - times[i-1]))
		if p.values == valuesXOR {
			used += xs.step(nil, math.Float64bits(values[i]))
		} else {
			n, _ := scaled(values[i], p.exp)
			used += dc.s.cost(dc.residual(n))
		}
		if used > budget {
			return i
		}
	}
	return len(times)
}

func mustValid(times []uint64, values []float64) {
	if len(times) != len(values) {
		panic(fmt.Sprintf("chunkenc: %d times but %d values", len(times), len(values)))
	}
	for i := 1; i < len(times); i++ {
		if times[i] <= times[i-1] {
			panic(fmt.Sprintf("chunkenc: times[%d]=%d not after times[%d]=%d", i, times[i], i-1, times[i-1]))
		}
	}
}

// plan is how a chunk is coded, chosen by exact cost, and the resulting bit stream length.
type plan struct {
	values     uint // valuesXOR, valuesDelta or valuesDelta2
	exp        uint
	timeOrder2 bool
	bits       int
}

func (p plan) mode() byte {
	m := byte(p.values) | byte(p.exp)<<modeExpShift
	if p.timeOrder2 {
		m |= modeTimeOrder
	}
	return m
}

// size is the chunk size in bytes for these times.
func (p plan) size(times []uint64) int {
	n := 2 + uvarintLen(uint64(len(times)))
	if len(times) > 0 {
		n += uvarintLen(times[0]) + uvarintLen(times[len(times)-1]-times[0])
	}
	return n + (p.bits+7)/8
}

// makePlan picks the cheapest time prediction and value coding, ties going to the simpler
// one. Costs are exact: the coders run once over the points without writing.
func makePlan(times []uint64, values []float64) plan {
	if len(times) == 0 {
		return plan{}
	}
	first, last := times[0], times[len(times)-1]
	t1 := newTimeCoder(false, len(times), first, last)
	t2 := newTimeCoder(true, len(times), first, last)
	xs := xorState{prev: math.Float64bits(values[0])}
	e, decimal := findExp(values)
	d1, d2 := newDecimalCoder(e, false), newDecimalCoder(e, true)
	ct1, ct2, cd1, cd2 := 0, 0, 0, 0
	cx := 64 // value 0's bits
	if decimal {
		n, _ := scaled(values[0], e)
		cd1, cd2 = d1.first(n), d2.first(n)
	}
	for i := 1; i < len(times); i++ {
		delta := times[i] - times[i-1]
		ct1 += t1.s.cost(t1.residual(delta))
		ct2 += t2.s.cost(t2.residual(delta))
		cx += xs.step(nil, math.Float64bits(values[i]))
		if decimal {
			n, _ := scaled(values[i], e)
			cd1 += d1.s.cost(d1.residual(n))
			cd2 += d2.s.cost(d2.residual(n))
		}
	}
	p := plan{bits: ct1}
	if ct2 < ct1 {
		p = plan{bits: ct2, timeOrder2: true}
	}
	best := cx
	if decimal && cd1 <= best {
		p.values, p.exp, best = valuesDelta, e, cd1
	}
	if decimal && cd2 < best {
		p.values, p.exp, best = valuesDelta2, e, cd2
	}
	p.bits += best
	return p
}

// meanDelta is D, the reference delta of order-1 times: (last-first)/(count-1), rounded
// down. A reader computes it from the header alone.
func meanDelta(count int, first, last uint64) uint64 {
	if count < 2 {
		return 0
	}
	return (last - first) / uint64(count-1)
}

// timeCoder predicts each time delta as D (order 1) or as the previous delta (order 2, the
// first prediction being D); the residual, wrapping mod 2^64, is zigzagged and Rice-coded.
type timeCoder struct {
	order2 bool
	ref    uint64
	s      adaptive
}

func newTimeCoder(order2 bool, count int, first, last uint64) timeCoder {
	return timeCoder{order2: order2, ref: meanDelta(count, first, last), s: newAdaptive()}
}

func (c *timeCoder) residual(delta uint64) uint64 {
	z := zigzag(int64(delta - c.ref))
	if c.order2 {
		c.ref = delta
	}
	return z
}

func (c *timeCoder) write(w *bitWriter, delta uint64) {
	c.s.write(w, c.residual(delta))
}

func (c *timeCoder) read(r *bitReader) uint64 {
	z := c.s.read(r)
	delta := c.ref + uint64(unzigzag(z))
	if c.order2 {
		c.ref = delta
	}
	return delta
}

func encode(dst []byte, times []uint64, values []float64, p plan) []byte {
	dst = append(dst, Version, p.mode())
	dst = binary.AppendUvarint(dst, uint64(len(times)))
	if len(times) == 0 {
		return dst
	}
	first, last := times[0], times[len(times)-1]
	dst = binary.AppendUvarint(dst, first)
	dst = binary.AppendUvarint(dst, last-first)

	w := bitWriter{buf: dst}
	tc := newTimeCoder(p.timeOrder2, len(times), first, last)
	if p.values == valuesXOR {
		xs := xorState{prev: math.Float64bits(values[0])}
		w.writeBits(xs.prev, 64)
		for i := 1; i < len(times); i++ {
			tc.write(&w, times[i]-times[i-1])
			xs.step(&w, math.Float64bits(values[i]))
		}
		return w.finish()
	}
	dc := newDecimalCoder(p.exp, p.values == valuesDelta2)
	dc.writeFirst(&w, values[0])
	for i := 1; i < len(times); i++ {
		tc.write(&w, times[i]-times[i-1])
		dc.writeNext(&w, values[i])
	}
	return w.finish()
}

func uvarintLen(x uint64) int {
	n := 1
	for ; x >= 0x80; x >>= 7 {
		n++
	}
	return n
}
