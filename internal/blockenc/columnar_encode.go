package blockenc

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/seed71701133/tablets/internal/bitcode"
)

// binaryProp is an Edm.Binary property of a block.
type binaryProp struct {
	name  string
	value []byte
}

// columnarProps returns the binary properties of b, in the order written.
func columnarProps(step time.Duration, b *Columnar) ([]binaryProp, error) {
	present, gamma, err := checkColumnar(step, b)
	if err != nil {
		return nil, err
	}
	props := []binaryProp{{propSealed, appendSealed(nil, b.Sealed, len(b.Windows))}, {propCount, appendCounts(nil, b.Windows)}}
	if len(present) > 0 {
		cols := newColumnValues(present)
		for _, vp := range valueProps {
			w := bitcode.Writer{}
			cols.column(vp.col).write(&w, cols.values(vp.col))
			if vp.col == ColFirst || vp.col == ColLast {
				writeTimes(&w, cols.times(vp.col))
			}
			props = append(props, binaryProp{vp.name, w.Finish()})
		}
	}
	if b.Exact {
		props = append(props, binaryProp{propExact, appendExact(nil, b.NaNs, len(b.Windows), present)})
	}
	if gamma != 0 {
		if props, err = appendParts(props, sketchPrefix, appendSketches(nil, gamma, present)); err != nil {
			return nil, err
		}
	}
	if h := appendHistograms(nil, b.Histograms); h != nil {
		if props, err = appendParts(props, histPrefix, h); err != nil {
			return nil, err
		}
	}
	return props, nil
}

// checkColumnar returns the windows of b with points and the gamma of their sketches' mapping
// (0: no sketch), or why b cannot be written.
func checkColumnar(step time.Duration, b *Columnar) (present []*Window, gamma float64, err error) {
	nw := len(b.Windows)
	switch {
	case nw < 1 || nw > MaxColumnarWindows:
		return nil, 0, fmt.Errorf("blockenc: %d windows, not in [1, %d]", nw, MaxColumnarWindows)
	case b.Sealed != nil && len(b.Sealed) != nw:
		return nil, 0, fmt.Errorf("blockenc: %d windows, %d sealed flags", nw, len(b.Sealed))
	case b.NaNs != nil && len(b.NaNs) != nw:
		return nil, 0, fmt.Errorf("blockenc: %d windows, %d NaN counts", nw, len(b.NaNs))
	case b.NaNs != nil && !b.Exact:
		return nil, 0, fmt.Errorf("blockenc: NaN counts without the exactness column")
	case b.Histograms != nil && len(b.Histograms) != nw:
		return nil, 0, fmt.Errorf("blockenc: %d windows, %d histogram windows", nw, len(b.Histograms))
	case step <= 0:
		return nil, 0, fmt.Errorf("blockenc: step %v", step)
	}
	for i, w := range b.Windows {
		if w == nil || w.Count == 0 {
			continue
		}
		if w.FirstAt < 0 || w.FirstAt > w.LastAt || w.LastAt >= step {
			return nil, 0, fmt.Errorf("blockenc: window %d: times of First and Last (%v, %v) outside the window", i, w.FirstAt, w.LastAt)
		}
		if w.Sketch != nil {
			if c := w.Sketch.Count(); c != w.Count {
				return nil, 0, fmt.Errorf("blockenc: window %d: count %d, its sketch's %d", i, w.Count, c)
			}
			if gamma == 0 {
				gamma = w.Sketch.Gamma()
			} else if w.Sketch.Gamma() != gamma {
				return nil, 0, fmt.Errorf("blockenc: window %d: its sketch's mapping differs from the others'", i)
			}
		}
		present = append(present, w)
	}
	return present, gamma, nil
}

// appendSketches appends the sketch stream of the windows with points, whose sketches have
// the mapping of gamma.
func appendSketches(dst []byte, gamma float64, present []*Window) []byte {
	w := bitcode.NewWriter(dst)
	w.WriteBits(math.Float64bits(gamma), 64)
	st := newSketchState()
	for _, win := range present {
		if win.Sketch == nil {
			w.WriteBits(0, 1)
			continue
		}
		w.WriteBits(1, 1)
		st.write(&w, win.Sketch)
	}
	return w.Finish()
}

// appendParts appends the properties prefix0, prefix1, ... that hold stream.
func appendParts(props []binaryProp, prefix string, stream []byte) ([]binaryProp, error) {
	for i := 0; len(stream) > 0; i++ {
		if i == maxParts {
			return nil, fmt.Errorf("%w: over %d bytes of %s", ErrTooLarge, maxParts*partBytes, prefix)
		}
		n := min(len(stream), partBytes)
		props = append(props, binaryProp{prefix + strconv.Itoa(i), stream[:n:n]})
		stream = stream[n:]
	}
	return props, nil
}

// appendSealed appends the sealed column: the first flag, then the lengths of its runs.
func appendSealed(dst []byte, sealed []bool, nw int) []byte {
	w := bitcode.NewWriter(dst)
	at := func(i int) bool { return sealed != nil && sealed[i] }
	if at(0) {
		w.WriteBits(1, 1)
	} else {
		w.WriteBits(0, 1)
	}
	a := bitcode.NewAdaptive()
	run := 1
	for i := 1; i <= nw; i++ {
		if i == nw || at(i) != at(i-1) {
			a.Write(&w, uint64(run-1))
			run = 0
		}
		run++
	}
	return w.Finish()
}

// appendCounts appends the count column: each window's count as its difference from the
// previous window's (0 before the first).
func appendCounts(dst []byte, windows []*Window) []byte {
	w := bitcode.NewWriter(dst)
	a := bitcode.NewAdaptive()
	prev := uint64(0)
	for _, win := range windows {
		c := uint64(0)
		if win != nil {
			c = win.Count
		}
		a.Write(&w, bitcode.Zigzag(int64(c-prev)))
		prev = c
	}
	return w.Finish()
}

// appendExact appends the exactness column: each window's NaN count (nans nil: none), then,
// if any window has points, the Resets of those (present) as a value column.
func appendExact(dst []byte, nans []uint64, nw int, present []*Window) []byte {
	w := bitcode.NewWriter(dst)
	a := bitcode.NewAdaptive()
	for i := range nw {
		n := uint64(0)
		if nans != nil {
			n = nans[i]
		}
		a.Write(&w, n)
	}
	if len(present) > 0 {
		resets := make([]float64, len(present))
		for j, win := range present {
			resets[j] = win.Resets
		}
		(&valueColumn{}).write(&w, resets)
	}
	return w.Finish()
}

// appendHistograms appends the histogram stream: per window the uvarint length of its
// encoded histogram window (0: none), then its bytes; nil when no window has one.
func appendHistograms(dst []byte, hs [][]byte) []byte {
	any := false
	for _, h := range hs {
		any = any || len(h) > 0
	}
	if !any {
		return nil
	}
	for _, h := range hs {
		dst = appendUvarint(dst, uint64(len(h)))
		dst = append(dst, h...)
	}
	return dst
}

func appendUvarint(dst []byte, x uint64) []byte {
	for x >= 0x80 {
		dst = append(dst, byte(x)|0x80)
		x >>= 7
	}
	return append(dst, byte(x))
}

// columnValues are the value columns of the windows with points, as the codings see them.
type columnValues struct {
	counts                     []float64
	sum, min, max, first, last []float64
	firstAt, lastAt            []uint64
}

func newColumnValues(present []*Window) *columnValues {
	n := len(present)
	c := &columnValues{counts: make([]float64, n), sum: make([]float64, n), min: make([]float64, n), max: make([]float64, n),
		first: make([]float64, n), last: make([]float64, n), firstAt: make([]uint64, n), lastAt: make([]uint64, n)}
	for j, w := range present {
		c.counts[j] = float64(w.Count)
		c.sum[j], c.min[j], c.max[j], c.first[j], c.last[j] = w.Sum, w.Min, w.Max, w.First, w.Last
		c.firstAt[j], c.lastAt[j] = uint64(w.FirstAt), uint64(w.LastAt)
	}
	return c
}

// column is the coding context of the value column col.
func (c *columnValues) column(col Columns) *valueColumn {
	switch col {
	case ColSum:
		return &valueColumn{scale: c.counts}
	case ColFirst:
		return &valueColumn{other: c.last}
	}
	return &valueColumn{}
}

func (c *columnValues) values(col Columns) []float64 {
	switch col {
	case ColSum:
		return c.sum
	case ColMin:
		return c.min
	case ColMax:
		return c.max
	case ColFirst:
		return c.first
	}
	return c.last
}

func (c *columnValues) times(col Columns) []uint64 {
	if col == ColFirst {
		return c.firstAt
	}
	return c.lastAt
}
