package chunkenc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/seed71701133/tablets/internal/bitcode"
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
	n := bitcode.LastFit(0, hi, estimateFit(times[:hi], values[:hi], p, maxBytes), fits)
	if n == 0 {
		return dst, 0
	}
	return encode(dst, times[:n], values[:n], best), n
}

// estimateFit guesses how many leading points fit in maxBytes by adding up their codes as p,
// the plan for all the points, codes them. A plan for fewer points can differ (a smaller
// exponent, another prediction, another D), so this is only a guess for lastFit.
func estimateFit(times []uint64, values []float64, p plan, maxBytes int) int {
	header := p.size(times) - (p.bits+7)/8
	budget := 8 * (maxBytes - header)
	tc := bitcode.NewTimeCoder(p.timeOrder2, len(times), times[0], times[len(times)-1])
	xs := bitcode.XORState{Prev: math.Float64bits(values[0])}
	dc := bitcode.NewDecimalCoder(p.exp, p.values == valuesDelta2)
	used := 64
	if p.values != valuesXOR {
		n, _ := bitcode.Scaled(values[0], p.exp)
		used = dc.First(n)
	}
	for i := 1; i < len(times); i++ {
		used += tc.S.Cost(tc.Residual(times[i] - times[i-1]))
		if p.values == valuesXOR {
			used += xs.Step(nil, math.Float64bits(values[i]))
		} else {
			n, _ := bitcode.Scaled(values[i], p.exp)
			used += dc.S.Cost(dc.Residual(n))
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
	t1 := bitcode.NewTimeCoder(false, len(times), first, last)
	t2 := bitcode.NewTimeCoder(true, len(times), first, last)
	xs := bitcode.XORState{Prev: math.Float64bits(values[0])}
	e, decimal := bitcode.FindExp(values)
	d1, d2 := bitcode.NewDecimalCoder(e, false), bitcode.NewDecimalCoder(e, true)
	ct1, ct2, cd1, cd2 := 0, 0, 0, 0
	cx := 64 // value 0's bits
	if decimal {
		n, _ := bitcode.Scaled(values[0], e)
		cd1, cd2 = d1.First(n), d2.First(n)
	}
	for i := 1; i < len(times); i++ {
		delta := times[i] - times[i-1]
		ct1 += t1.S.Cost(t1.Residual(delta))
		ct2 += t2.S.Cost(t2.Residual(delta))
		cx += xs.Step(nil, math.Float64bits(values[i]))
		if decimal {
			n, _ := bitcode.Scaled(values[i], e)
			cd1 += d1.S.Cost(d1.Residual(n))
			cd2 += d2.S.Cost(d2.Residual(n))
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

func encode(dst []byte, times []uint64, values []float64, p plan) []byte {
	dst = append(dst, Version, p.mode())
	dst = binary.AppendUvarint(dst, uint64(len(times)))
	if len(times) == 0 {
		return dst
	}
	first, last := times[0], times[len(times)-1]
	dst = binary.AppendUvarint(dst, first)
	dst = binary.AppendUvarint(dst, last-first)

	w := bitcode.NewWriter(dst)
	tc := bitcode.NewTimeCoder(p.timeOrder2, len(times), first, last)
	if p.values == valuesXOR {
		xs := bitcode.XORState{Prev: math.Float64bits(values[0])}
		w.WriteBits(xs.Prev, 64)
		for i := 1; i < len(times); i++ {
			tc.Write(&w, times[i]-times[i-1])
			xs.Step(&w, math.Float64bits(values[i]))
		}
		return w.Finish()
	}
	dc := bitcode.NewDecimalCoder(p.exp, p.values == valuesDelta2)
	dc.WriteFirst(&w, values[0])
	for i := 1; i < len(times); i++ {
		tc.Write(&w, times[i]-times[i-1])
		dc.WriteNext(&w, values[i])
	}
	return w.Finish()
}

func uvarintLen(x uint64) int {
	n := 1
	for ; x >= 0x80; x >>= 7 {
		n++
	}
	return n
}
