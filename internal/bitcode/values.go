package bitcode

import (
	"math"
	"math/bits"
)

// MaxExp is the largest decimal exponent: 10^22 is the largest power of ten a float64 holds
// exactly, which is what makes n / 10^e a single correctly rounded operation.
const MaxExp = 22

// maxDecimal bounds |n|: every integer up to 2^53 converts to float64 exactly.
const maxDecimal = 1 << 53

var pow10 = [MaxExp + 1]float64{
	1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
	1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
}

// DecimalValue is how a reader turns the scaled integer n back into a float: one IEEE 754
// division, correctly rounded, so it is the same on every platform.
func DecimalValue(n int64, e uint) float64 {
	return float64(n) / pow10[e]
}

// Scaled returns n with DecimalValue(n, e) bit-identical to v, if there is one.
func Scaled(v float64, e uint) (int64, bool) {
	s := math.RoundToEven(v * pow10[e])
	if !(math.Abs(s) <= maxDecimal) { // also false for NaN and ±Inf
		return 0, false
	}
	n := int64(s)
	// Bit equality, not ==: it rejects -0 (0/10^e is +0) and decimals that only look decimal.
	return n, math.Float64bits(DecimalValue(n, e)) == math.Float64bits(v)
}

// FindExp returns the smallest exponent e at which every value round-trips, or false.
func FindExp(values []float64) (uint, bool) {
	e := uint(0)
	for i := 0; i < len(values); i++ {
		if _, ok := Scaled(values[i], e); ok {
			continue
		}
		e2, ok := minExp(values[i], e+1)
		if !ok {
			return 0, false
		}
		// Rounding at a larger scale can differ, so the values already checked are checked
		// again. e only grows, so this restarts at most MaxExp times.
		e, i = e2, -1
	}
	return e, true
}

// minExp returns the smallest exponent >= from at which v round-trips.
func minExp(v float64, from uint) (uint, bool) {
	for e := from; e <= MaxExp; e++ {
		if _, ok := Scaled(v, e); ok {
			return e, true
		}
	}
	return 0, false
}

// DecimalCoder is the state shared by the writer and the reader of scaled integers: each is
// predicted from the previous one (order 1) or from the previous one plus the previous delta
// (order 2), and the residual is Rice-coded. Arithmetic wraps the same way on both sides.
type DecimalCoder struct {
	e         uint
	order2    bool
	S         Adaptive // codes the residuals
	prev      int64
	prevDelta int64
}

// NewDecimalCoder returns a coder of integers scaled by 10^e.
func NewDecimalCoder(e uint, order2 bool) DecimalCoder {
	return DecimalCoder{e: e, order2: order2, S: NewAdaptive()}
}

// First starts the coder at the first scaled integer and returns the bits its code takes.
func (c *DecimalCoder) First(n int64) int {
	c.prev = n
	return 6 + bits.Len64(Zigzag(n)+1) - 1
}

// Residual returns the zigzagged residual of the next scaled integer and advances the
// prediction.
func (c *DecimalCoder) Residual(n int64) uint64 {
	d := n - c.prev
	r := d
	if c.order2 {
		r -= c.prevDelta
	}
	c.prev, c.prevDelta = n, d
	return Zigzag(r)
}

// WriteFirst writes the first value, which must be Scaled at the exponent of c.
func (c *DecimalCoder) WriteFirst(w *Writer, v float64) {
	n, _ := Scaled(v, c.e)
	c.First(n)
	w.WriteLen(Zigzag(n) + 1)
}

// WriteNext writes the next value, which must be Scaled at the exponent of c.
func (c *DecimalCoder) WriteNext(w *Writer, v float64) {
	n, _ := Scaled(v, c.e)
	c.S.Write(w, c.Residual(n))
}

// ReadFirst and readNext return false for a scaled integer outside ±2^53: corrupt input.
func (c *DecimalCoder) ReadFirst(r *Reader) (float64, bool) {
	n := Unzigzag(r.ReadLen() - 1)
	c.prev = n
	return DecimalValue(n, c.e), InDecimalRange(n)
}

// ReadNext reads a WriteNext code.
func (c *DecimalCoder) ReadNext(r *Reader) (float64, bool) {
	d := Unzigzag(c.S.Read(r))
	if c.order2 {
		d += c.prevDelta
	}
	n := c.prev + d
	c.prev, c.prevDelta = n, d
	return DecimalValue(n, c.e), InDecimalRange(n)
}

// InDecimalRange reports whether n is a scaled integer a writer can make: |n| <= 2^53.
func InDecimalRange(n int64) bool { return n >= -maxDecimal && n <= maxDecimal }

// The XOR mode is Gorilla's: each value is XORed with the previous one; a zero XOR is one
// bit, otherwise the meaningful bits are written inside the previous leading/trailing zero
// window when they fit, or with a new window.

// XORState is the window shared by the XOR writer, reader and cost function.
type XORState struct {
	Prev      uint64 // the bits of the last value
	lead      uint   // leading zeros of the window (at most 31)
	trail     uint
	hasWindow bool
}

// Step codes x (writing it when w is not nil) and returns the bits it takes.
func (s *XORState) Step(w *Writer, cur uint64) int {
	x := cur ^ s.Prev
	s.Prev = cur
	if x == 0 {
		if w != nil {
			w.WriteBits(0, 1)
		}
		return 1
	}
	lead := min(uint(bits.LeadingZeros64(x)), 31)
	trail := uint(bits.TrailingZeros64(x))
	sig := 64 - lead - trail
	// Reuse the window when x fits in it, unless a new window is shorter: Gorilla always
	// reuses, and a window widened once by an outlier then costs every later value.
	if wsig := 64 - s.lead - s.trail; s.hasWindow && lead >= s.lead && trail >= s.trail && wsig <= 11+sig {
		sig := wsig
		if w != nil {
			w.WriteBits(0b10, 2)
			w.WriteBits(x>>s.trail, sig)
		}
		return 2 + int(sig)
	}
	s.lead, s.trail, s.hasWindow = lead, trail, true
	if w != nil {
		w.WriteBits(0b11, 2)
		w.WriteBits(uint64(lead), 5)
		w.WriteBits(uint64(sig&63), 6) // 64 is written as 0
		w.WriteBits(x>>trail, sig)
	}
	return 13 + int(sig)
}

// Read decodes the next value; false means malformed input.
func (s *XORState) Read(r *Reader) (float64, bool) {
	if r.ReadBits(1) == 0 {
		return math.Float64frombits(s.Prev), true
	}
	if r.ReadBits(1) == 1 {
		lead := uint(r.ReadBits(5))
		sig := uint(r.ReadBits(6))
		if sig == 0 {
			sig = 64
		}
		if lead+sig > 64 {
			return 0, false
		}
		s.lead, s.trail, s.hasWindow = lead, 64-lead-sig, true
	} else if !s.hasWindow {
		return 0, false
	}
	sig := 64 - s.lead - s.trail
	s.Prev ^= r.ReadLong(sig) << s.trail
	return math.Float64frombits(s.Prev), true
}
