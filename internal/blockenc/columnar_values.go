package blockenc

import (
	"errors"
	"math"

	"github.com/seed71701133/tablets/internal/bitcode"
)

// The coding of a value column (docs/format.md, "Columnar tier blocks"): the values of the
// windows with points, each as the decimal n = v × 10^e, coded as its difference from the
// prediction of a predictor chosen by the writer, plus, for a value that is not exactly the
// double nearest n / 10^e, the difference of the bits.

// Predictors of a value column: of the values y_j = v_j / scale_j (scale: the window counts
// for Sum, so that it predicts a mean; else 1), from the earlier ones of the column.
const (
	predPrevious  = iota // y_{j-1}
	predSlope            // y_{j-1} + (y_{j-1} - y_{j-2})
	predMeanSlope        // y_{j-1} + (y_{j-1} - y_0) / (j - 1)
	predOther            // the other column's value of the previous window (First: Last's)
	predictors
)

var errBadColumn = errors.New("bad column")

// valueColumn is what both sides know of a value column before its values: the scales and
// the other column (nil: none).
type valueColumn struct {
	scale []float64 // nil: 1
	other []float64
}

// predict returns the prediction of value j of column v (v[:j] known) with predictor p.
func (c *valueColumn) predict(p int, v []float64, j int) float64 {
	y := func(i int) float64 {
		if c.scale == nil {
			return v[i]
		}
		return float64(v[i] / c.scale[i])
	}
	var pred float64
	switch {
	case p == predOther:
		if j == 0 {
			return 0
		}
		return c.other[j-1]
	case j == 0:
		return 0
	case p == predSlope && j >= 2:
		d := float64(y(j-1) - y(j-2))
		pred = float64(y(j-1) + d)
	case p == predMeanSlope && j >= 2:
		d := float64(float64(y(j-1)-y(0)) / float64(j-1))
		pred = float64(y(j-1) + d)
	default:
		pred = y(j - 1)
	}
	if c.scale != nil {
		pred = float64(pred * c.scale[j])
	}
	return pred
}

// columnExp is the decimal exponent of a column: of the exponents that make one of its
// values an exact decimal (the smallest for each), the smallest at which the most are
// (a value exact at one exponent may be out of range at a larger); and whether all are.
func columnExp(v []float64) (e uint, exact bool) {
	var seen [bitcode.MaxExp + 1]bool
	for _, x := range v {
		for k := uint(0); k <= bitcode.MaxExp; k++ {
			if _, ok := bitcode.Scaled(x, k); ok {
				seen[k] = true
				break
			}
		}
	}
	best := -1
	for k := uint(0); k <= bitcode.MaxExp; k++ {
		if !seen[k] {
			continue
		}
		n := 0
		for _, x := range v {
			if _, ok := bitcode.Scaled(x, k); ok {
				n++
			}
		}
		if n > best {
			best, e = n, k
		}
	}
	return e, best == len(v)
}

// valueCode is the coding of one value: the decimal's difference from the prediction, and
// the bits' difference from the decimal's.
func valueCode(x, pred float64, e uint) (residual, ulps uint64) {
	pn, _ := bitcode.Scaled(pred, e) // 0 out of range
	n, ok := bitcode.Scaled(x, e)
	if !ok && n == 0 {
		n = pn // out of range, or a tiny value: all in the bits
	}
	d := bitcode.DecimalValue(n, e)
	return bitcode.Zigzag(n - pn), bitcode.Zigzag(int64(math.Float64bits(x) - math.Float64bits(d)))
}

// write writes column v: the predictor that codes it in the fewest bits.
func (c *valueColumn) write(w *bitcode.Writer, v []float64) {
	e, exact := columnExp(v)
	best, bestBits := 0, math.MaxInt
	for p := range predictors {
		if p == predOther && c.other == nil {
			continue
		}
		a, b := bitcode.NewAdaptive(), bitcode.NewAdaptive()
		bits := 0
		for j, x := range v {
			r, u := valueCode(x, c.predict(p, v, j), e)
			bits += a.Cost(r)
			if !exact {
				bits += b.Cost(u)
			}
		}
		if bits < bestBits {
			best, bestBits = p, bits
		}
	}
	w.WriteBits(uint64(best), 2)
	w.WriteBits(uint64(e), 5)
	if exact {
		w.WriteBits(1, 1)
	} else {
		w.WriteBits(0, 1)
	}
	a, b := bitcode.NewAdaptive(), bitcode.NewAdaptive()
	for j, x := range v {
		r, u := valueCode(x, c.predict(best, v, j), e)
		a.Write(w, r)
		if !exact {
			b.Write(w, u)
		}
	}
}

// read reads a column of len(v) values into v.
func (c *valueColumn) read(r *bitcode.Reader, v []float64) error {
	p := int(r.ReadBits(2))
	e := uint(r.ReadBits(5))
	exact := r.ReadBits(1) == 1
	if r.Err() || e > bitcode.MaxExp || (p == predOther && c.other == nil) {
		return errBadColumn
	}
	a, b := bitcode.NewAdaptive(), bitcode.NewAdaptive()
	for j := range v {
		pn, _ := bitcode.Scaled(c.predict(p, v, j), e)
		n := pn + bitcode.Unzigzag(a.Read(r))
		if !bitcode.InDecimalRange(n) {
			return errBadColumn
		}
		bits := math.Float64bits(bitcode.DecimalValue(n, e))
		if !exact {
			bits += uint64(bitcode.Unzigzag(b.Read(r)))
		}
		if r.Err() {
			return errBadColumn
		}
		v[j] = math.Float64frombits(bits)
	}
	return nil
}

// writeTimes writes offsets from the windows' starts (in [0, step)): a unit 10^u of
// nanoseconds that divides them all, then each one's difference from the previous.
func writeTimes(w *bitcode.Writer, t []uint64) {
	u := uint(0)
	for unit := uint64(10); u < 15; unit *= 10 {
		ok := true
		for _, x := range t {
			if x%unit != 0 {
				ok = false
				break
			}
		}
		if !ok {
			break
		}
		u++
	}
	w.WriteBits(uint64(u), 4)
	unit := pow10u(u)
	a := bitcode.NewAdaptive()
	prev := uint64(0)
	for _, x := range t {
		x /= unit
		a.Write(w, bitcode.Zigzag(int64(x-prev)))
		prev = x
	}
}

// readTimes reads len(t) offsets, each below limit.
func readTimes(r *bitcode.Reader, t []uint64, limit uint64) error {
	u := uint(r.ReadBits(4))
	if u > 15 {
		return errBadColumn
	}
	unit := pow10u(u)
	a := bitcode.NewAdaptive()
	prev := uint64(0)
	for j := range t {
		x := prev + uint64(bitcode.Unzigzag(a.Read(r)))
		if r.Err() || x > limit/unit || x*unit >= limit {
			return errBadColumn
		}
		t[j], prev = x*unit, x
	}
	return nil
}

func pow10u(u uint) uint64 {
	p := uint64(1)
	for range u {
		p *= 10
	}
	return p
}
