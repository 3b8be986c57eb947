package histenc

import (
	"fmt"
	"math"
	"slices"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/bitcode"
)

// layout is what a chunk writes once and then only repeats with a "same layout" bit: the
// schema, the zero threshold, the spans of both sides and the custom bounds.
type layout struct {
	schema        int32
	zeroThreshold float64
	pos, neg      []tablets.HistogramSpan
	custom        []float64
}

func layoutOf(s Sample) layout {
	if s.H != nil {
		return layout{s.H.Schema, s.H.ZeroThreshold, s.H.PositiveSpans, s.H.NegativeSpans, s.H.CustomValues}
	}
	h := s.FH
	return layout{h.Schema, h.ZeroThreshold, h.PositiveSpans, h.NegativeSpans, h.CustomValues}
}

// equal compares bit for bit (NaN bounds and -0 included); empty and nil are equal, as the
// chunk does not tell them apart.
func (l layout) equal(o layout) bool {
	return l.schema == o.schema &&
		math.Float64bits(l.zeroThreshold) == math.Float64bits(o.zeroThreshold) &&
		slices.Equal(l.pos, o.pos) && slices.Equal(l.neg, o.neg) &&
		slices.EqualFunc(l.custom, o.custom, func(a, b float64) bool {
			return math.Float64bits(a) == math.Float64bits(b)
		})
}

// bucketCount is the number of buckets spans hold.
func bucketCount(spans []tablets.HistogramSpan) int {
	n := 0
	for _, s := range spans {
		n += int(s.Length)
	}
	return n
}

// appendIndexes appends the bucket index of each bucket of spans: the first span starts at
// its offset, each later one offset buckets after the end of the one before. With no
// negative offset after the first span, the indexes strictly increase.
func appendIndexes(dst []int64, spans []tablets.HistogramSpan) []int64 {
	next := int64(0)
	for _, s := range spans {
		next += int64(s.Offset)
		for range s.Length {
			dst = append(dst, next)
			next++
		}
	}
	return dst
}

// checkSpans panics on what the writer cannot code: callers validate samples first
// (tablets' Validate), so this is a programming error.
func checkSpans(spans []tablets.HistogramSpan, buckets int, side string) {
	for i, s := range spans {
		if i > 0 && s.Offset < 0 {
			panic(fmt.Sprintf("histenc: %s span %d has a negative offset", side, i+1))
		}
	}
	if n := bucketCount(spans); n != buckets {
		panic(fmt.Sprintf("histenc: %s spans hold %d buckets, %d given", side, n, buckets))
	}
}

// write codes the layout: schema, zero threshold, positive and negative spans, custom bounds.
func (l layout) write(w *bitcode.Writer) {
	w.WriteN(bitcode.Zigzag(int64(l.schema)))
	if math.Float64bits(l.zeroThreshold) == 0 {
		w.WriteBits(0, 1)
	} else {
		w.WriteBits(1, 1)
		w.WriteBits(math.Float64bits(l.zeroThreshold), 64)
	}
	writeSpans(w, l.pos)
	writeSpans(w, l.neg)
	writeBounds(w, l.custom)
}

func writeSpans(w *bitcode.Writer, spans []tablets.HistogramSpan) {
	w.WriteN(uint64(len(spans)))
	for _, s := range spans {
		w.WriteN(bitcode.Zigzag(int64(s.Offset)))
		w.WriteN(uint64(s.Length))
	}
}

// writeBounds codes custom bounds as scaled integers, each the difference to the one before,
// when they are all decimals (bucket bounds mostly are), else as their 64 bits each.
func writeBounds(w *bitcode.Writer, bounds []float64) {
	w.WriteN(uint64(len(bounds)))
	if len(bounds) == 0 {
		return
	}
	e, decimal := bitcode.FindExp(bounds)
	if !decimal {
		w.WriteBits(0, 1)
		for _, b := range bounds {
			w.WriteBits(math.Float64bits(b), 64)
		}
		return
	}
	w.WriteBits(1, 1)
	w.WriteBits(uint64(e), 5)
	prev := int64(0)
	for _, b := range bounds {
		n, _ := bitcode.Scaled(b, e)
		w.WriteN(bitcode.Zigzag(n - prev))
		prev = n
	}
}

// readLayout reads a layout. Counts of spans and bounds are checked against the bits left
// before anything is allocated: each span takes at least 14 bits, each bound 7.
func readLayout(r *bitcode.Reader) (layout, error) {
	var l layout
	schema, ok := r.ReadN()
	if !ok || !fitsInt32(bitcode.Unzigzag(schema)) {
		return l, corrupt("bad schema")
	}
	l.schema = int32(bitcode.Unzigzag(schema))
	if r.ReadBits(1) == 1 {
		l.zeroThreshold = math.Float64frombits(r.ReadLong(64))
	}
	var err error
	if l.pos, err = readSpans(r, "positive"); err != nil {
		return l, err
	}
	if l.neg, err = readSpans(r, "negative"); err != nil {
		return l, err
	}
	if l.custom, err = readBounds(r); err != nil {
		return l, err
	}
	if r.Err() {
		return l, corrupt("truncated layout")
	}
	return l, nil
}

func fitsInt32(x int64) bool { return x >= math.MinInt32 && x <= math.MaxInt32 }

func readSpans(r *bitcode.Reader, side string) ([]tablets.HistogramSpan, error) {
	n, ok := r.ReadN()
	if !ok || n > r.Remaining()/14 {
		return nil, corrupt("bad %s span count", side)
	}
	if n == 0 {
		return nil, nil
	}
	spans := make([]tablets.HistogramSpan, n)
	for i := range spans {
		off, ok1 := r.ReadN()
		length, ok2 := r.ReadN()
		o := bitcode.Unzigzag(off)
		if !ok1 || !ok2 || !fitsInt32(o) || length > math.MaxUint32 || (i > 0 && o < 0) {
			return nil, corrupt("bad %s span %d", side, i+1)
		}
		spans[i] = tablets.HistogramSpan{Offset: int32(o), Length: uint32(length)}
	}
	return spans, nil
}

func readBounds(r *bitcode.Reader) ([]float64, error) {
	n, ok := r.ReadN()
	if !ok || n > r.Remaining()/7 {
		return nil, corrupt("bad custom bound count")
	}
	if n == 0 {
		return nil, nil
	}
	bounds := make([]float64, n)
	if r.ReadBits(1) == 0 {
		for i := range bounds {
			bounds[i] = math.Float64frombits(r.ReadLong(64))
		}
		return bounds, nil
	}
	e := uint(r.ReadBits(5))
	if e > bitcode.MaxExp {
		return nil, corrupt("custom bounds with exponent %d > %d", e, bitcode.MaxExp)
	}
	prev := int64(0)
	for i := range bounds {
		d, ok := r.ReadN()
		prev += bitcode.Unzigzag(d)
		if !ok || !bitcode.InDecimalRange(prev) {
			return nil, corrupt("bad custom bound %d", i+1)
		}
		bounds[i] = bitcode.DecimalValue(prev, e)
	}
	return bounds, nil
}
