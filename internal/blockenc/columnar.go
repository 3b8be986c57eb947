package blockenc

import (
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/internal/bitcode"
	"github.com/seed71701133/tablets/internal/sketchenc"
)

// VersionColumnar is the format version (property V) of a columnar block: a block whose
// windows are stored a column per aggregate, compressed, so that a read selects
// ($select) only the columns it needs (docs/format.md, "Columnar tier blocks"). Versions 1
// and 2 are the row blocks above, read forever; rollups write version 3 only.
const VersionColumnar = 3

// MaxColumnarWindows bounds the windows of a columnar block, so that every column but the
// sketches and histograms fits one property (64 KiB) whatever the values.
const MaxColumnarWindows = 1440

// Columns is a set of a columnar block's columns: what a read selects, and what a decoded
// block holds.
type Columns uint16

const (
	ColCount     Columns = 1 << iota // the windows' counts: which windows hold points (always read)
	ColSum                           // Sum
	ColMin                           // Min
	ColMax                           // Max
	ColFirst                         // First and FirstAt
	ColLast                          // Last and LastAt
	ColSketch                        // the windows' sketches
	ColHistogram                     // the windows' encoded histogram windows

	// AllColumns is every column.
	AllColumns = ColCount | ColSum | ColMin | ColMax | ColFirst | ColLast | ColSketch | ColHistogram
)

// Columnar is a columnar block's content: one series' windows in a span of a tier, from
// Start, len(Windows) windows of the tier's step.
type Columnar struct {
	Start  uint64  // Unix seconds
	Rolled float64 // when it was last written by a rollup, Unix seconds (the roller's clock)
	// Windows are the aggregates of the points, one per window of the block (its length is
	// the block's window count, 1 to MaxColumnarWindows); nil: no points. A decoded block
	// holds only the columns read: the fields of the others are zero, and Sketch is nil
	// without ColSketch.
	Windows []*Window
	// Sealed says, per window, that it was computed at least the seal delay after its end
	// (the roller's), so no point it lacks can arrive unflagged: len(Windows).
	Sealed []bool
	// Histograms are the encoded histogram windows (opaque here): nil, or one per window,
	// nil where a window holds no histogram sample. Decoded only with ColHistogram.
	Histograms [][]byte
	// Columns is, of a decoded block, the columns it was decoded with.
	Columns Columns
}

// ErrTooLarge is returned by AppendColumnar for a block whose entity would exceed Azure's
// limits (1 MiB of properties, 64 KiB a property, 252 properties) even without the
// sketches and histograms of the windows that do not fit.
var ErrTooLarge = errors.New("blockenc: block too large for an entity")

// The properties of a columnar block besides V, W and R (docs/format.md).
const (
	propSealed = "k"
	propCount  = "c"
	propSum    = "s"
	propMin    = "n"
	propMax    = "x"
	propFirst  = "f"
	propLast   = "l"
	// The sketch and histogram streams are spilled over properties q0, q1, ... and h0, h1,
	// ... of at most partBytes each.
	sketchPrefix = "q"
	histPrefix   = "h"
	partBytes    = 60 << 10
	maxParts     = 16
	// maxPropertyBytes is Azure's limit of a binary property.
	maxPropertyBytes = 64 << 10
)

// valueProps are the value columns' properties, in the order written.
var valueProps = []struct {
	col  Columns
	name string
}{{ColSum, propSum}, {ColMin, propMin}, {ColMax, propMax}, {ColLast, propLast}, {ColFirst, propFirst}}

// AppendColumnar appends the entity of b in the partition of series (a tier of step), or
// returns an error wrapping ErrTooLarge when it would not fit an entity: the caller then
// leaves out sketches (a window whose Sketch is nil is stored without one, and decodes so:
// its quantiles come from its raw points, or are unknown) or histograms and tries again.
// A window of Count 0 is stored as none, an empty histogram window as none; any other
// invalid block (a window count outside 1 to MaxColumnarWindows, Sealed or Histograms of
// another length, a time outside the window, a sketch whose count is not the window's or
// whose mapping differs from the others') is an error.
func AppendColumnar(dst []byte, series string, step time.Duration, b *Columnar) ([]byte, error) {
	props, err := columnarProps(step, b)
	if err != nil {
		return nil, err
	}
	size := 4 + 2*(len(series)+12) // Azure's billed size, keys counted as UTF-16 at most
	for _, p := range props {
		if len(p.value) > maxPropertyBytes {
			return nil, fmt.Errorf("%w: property %s holds %d bytes", ErrTooLarge, p.name, len(p.value))
		}
		size += 8 + 2*len(p.name) + 4 + len(p.value)
	}
	size += 3 * (8 + 2 + 8) // V, W, R
	if size > entity.MaxEntityBytes || len(props)+3 > entity.MaxUserProperties {
		return nil, fmt.Errorf("%w: %d bytes in %d properties", ErrTooLarge, size, len(props)+3)
	}
	dst = entity.AppendKeys(dst, series, Key(b.Start))
	dst = entity.AppendDouble(dst, "V", VersionColumnar)
	dst = entity.AppendDouble(dst, "W", float64(len(b.Windows)))
	dst = entity.AppendDouble(dst, "R", b.Rolled)
	for _, p := range props {
		dst = entity.AppendBinary(dst, p.name, p.value)
	}
	return entity.AppendEnd(dst), nil
}

type binaryProp struct {
	name  string
	value []byte
}

// columnarProps returns the binary properties of b, in the order written.
func columnarProps(step time.Duration, b *Columnar) ([]binaryProp, error) {
	nw := len(b.Windows)
	switch {
	case nw < 1 || nw > MaxColumnarWindows:
		return nil, fmt.Errorf("blockenc: %d windows, not in [1, %d]", nw, MaxColumnarWindows)
	case b.Sealed != nil && len(b.Sealed) != nw:
		return nil, fmt.Errorf("blockenc: %d windows, %d sealed flags", nw, len(b.Sealed))
	case b.Histograms != nil && len(b.Histograms) != nw:
		return nil, fmt.Errorf("blockenc: %d windows, %d histogram windows", nw, len(b.Histograms))
	case step <= 0:
		return nil, fmt.Errorf("blockenc: step %v", step)
	}
	var present []*Window
	var gamma float64
	sketches := 0
	for i, w := range b.Windows {
		if w == nil || w.Count == 0 {
			continue
		}
		if w.FirstAt < 0 || w.FirstAt > w.LastAt || w.LastAt >= step {
			return nil, fmt.Errorf("blockenc: window %d: times of First and Last (%v, %v) outside the window", i, w.FirstAt, w.LastAt)
		}
		if w.Sketch != nil {
			if c := w.Sketch.Count(); c != w.Count {
				return nil, fmt.Errorf("blockenc: window %d: count %d, its sketch's %d", i, w.Count, c)
			}
			if sketches == 0 {
				gamma = w.Sketch.Gamma()
			} else if w.Sketch.Gamma() != gamma {
				return nil, fmt.Errorf("blockenc: window %d: its sketch's mapping differs from the others'", i)
			}
			sketches++
		}
		present = append(present, w)
	}
	props := []binaryProp{{propSealed, appendSealed(nil, b.Sealed, nw)}, {propCount, appendCounts(nil, b.Windows)}}
	if len(present) > 0 {
		cols := newColumnValues(present)
		for _, vp := range valueProps {
			w := bitcode.Writer{}
			vc := cols.column(vp.col)
			vc.write(&w, cols.values(vp.col))
			if vp.col == ColFirst || vp.col == ColLast {
				writeTimes(&w, cols.times(vp.col))
			}
			props = append(props, binaryProp{vp.name, w.Finish()})
		}
	}
	if sketches > 0 {
		w := bitcode.Writer{}
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
		var err error
		if props, err = appendParts(props, sketchPrefix, w.Finish()); err != nil {
			return nil, err
		}
	}
	if h := appendHistograms(nil, b.Histograms); h != nil {
		var err error
		if props, err = appendParts(props, histPrefix, h); err != nil {
			return nil, err
		}
	}
	return props, nil
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

// readColumns is the set of columns decoded for cols: the count column always, and the
// columns they are predicted from (First's: Last).
func readColumns(cols Columns) Columns {
	cols |= ColCount
	if cols&ColFirst != 0 {
		cols |= ColLast
	}
	return cols & AllColumns
}

// SelectColumnar is the $select list that reads cols of a columnar block: the keys, V, W,
// R, the sealed and count columns always, then the properties of cols.
func SelectColumnar(cols Columns) string {
	cols = readColumns(cols)
	var sb strings.Builder
	sb.WriteString("PartitionKey,RowKey,V,W,R," + propSealed + "," + propCount)
	for _, vp := range valueProps {
		if cols&vp.col != 0 {
			sb.WriteString("," + vp.name)
		}
	}
	for _, s := range []struct {
		col    Columns
		prefix string
	}{{ColSketch, sketchPrefix}, {ColHistogram, histPrefix}} {
		if cols&s.col != 0 {
			for i := range maxParts {
				sb.WriteString("," + s.prefix + strconv.Itoa(i))
			}
		}
	}
	return sb.String()
}

// IsColumnar reports whether a decoded entity (any version) is a columnar block: its V is
// VersionColumnar.
func IsColumnar(e *entity.Entity) bool {
	for _, p := range e.Props {
		if string(p.Name) == "V" {
			return p.Value == VersionColumnar
		}
	}
	return false
}

// DecodeColumnar reads a columnar block entity (decoded with AllowStrings, maybe through a
// $select of SelectColumnar(cols): properties selected but absent come as null, and are
// ignored) of a tier of step, whose sketches have relative accuracy accuracy. What is not
// a valid block is an *entity.DecodeError. The block holds the columns of cols, and those
// they are coded from (Columns says which).
func DecodeColumnar(e *entity.Entity, step time.Duration, accuracy float64, cols Columns) (*Columnar, error) {
	d := columnarDecoder{e: e}
	c, reason := d.decode(step, accuracy, readColumns(cols))
	if reason != "" {
		return nil, &entity.DecodeError{PartitionKey: string(e.PartitionKey), RowKey: string(e.RowKey), Reason: reason}
	}
	return c, nil
}

type columnarDecoder struct {
	e *entity.Entity
}

// binary returns the bytes of binary property name, whether it is there, and whether it is
// valid base64.
func (d *columnarDecoder) binary(name string) ([]byte, bool, bool) {
	s, ok := d.e.String(name)
	if !ok {
		return nil, false, true
	}
	b, err := base64.StdEncoding.DecodeString(string(s))
	return b, true, err == nil
}

// parts returns the concatenation of the properties prefix0, prefix1, ...: "" reason, or
// why they are not a stream.
func (d *columnarDecoder) parts(prefix string) ([]byte, string) {
	var stream []byte
	missing := -1
	for i := range maxParts {
		b, ok, valid := d.binary(prefix + strconv.Itoa(i))
		switch {
		case !ok:
			if missing < 0 {
				missing = i
			}
			continue
		case !valid || len(b) == 0:
			return nil, fmt.Sprintf("property %s%d is not base64 of a part", prefix, i)
		case missing >= 0:
			return nil, fmt.Sprintf("property %s%d without %s%d", prefix, i, prefix, missing)
		}
		stream = append(stream, b...)
	}
	return stream, ""
}

func (d *columnarDecoder) decode(step time.Duration, accuracy float64, cols Columns) (*Columnar, string) {
	start, err := strconv.ParseUint(string(d.e.RowKey), 10, 64)
	if err != nil || len(d.e.RowKey) != 12 {
		return nil, "RowKey is not a block start"
	}
	if step <= 0 {
		return nil, fmt.Sprintf("step %v", step)
	}
	c := &Columnar{Start: start, Columns: cols}
	var v, nw float64
	var hasV, hasW, hasR bool
	for _, p := range d.e.Props {
		switch string(p.Name) {
		case "V":
			v, hasV = p.Value, true
		case "W":
			nw, hasW = p.Value, true
		case "R":
			c.Rolled, hasR = p.Value, true
		}
	}
	switch {
	case !hasV || v != VersionColumnar:
		return nil, fmt.Sprintf("format version %v, not %d", v, VersionColumnar)
	case !hasW || !(nw >= 1 && nw <= MaxColumnarWindows && nw == math.Trunc(nw)):
		return nil, fmt.Sprintf("window count %v not in [1, %d]", nw, MaxColumnarWindows)
	case !hasR:
		return nil, "no R"
	}
	n := int(nw)
	c.Windows = make([]*Window, n)
	sealed, ok, valid := d.binary(propSealed)
	if !ok || !valid {
		return nil, "no sealed column"
	}
	if c.Sealed, ok = readSealed(sealed, n); !ok {
		return nil, "bad sealed column"
	}
	counts, ok, valid := d.binary(propCount)
	if !ok || !valid {
		return nil, "no count column"
	}
	store := make([]Window, n)
	present, ok := readCounts(counts, store)
	if !ok {
		return nil, "bad count column"
	}
	for _, i := range present {
		c.Windows[i] = &store[i]
	}
	if reason := d.decodeValues(c, present, cols, step); reason != "" {
		return nil, reason
	}
	if cols&ColSketch != 0 {
		if reason := d.decodeSketches(c, present, accuracy); reason != "" {
			return nil, reason
		}
	}
	if cols&ColHistogram != 0 {
		stream, reason := d.parts(histPrefix)
		if reason != "" {
			return nil, reason
		}
		if stream != nil {
			if c.Histograms, ok = readHistograms(stream, n); !ok {
				return nil, "bad histogram stream"
			}
		}
	}
	return c, ""
}

func (d *columnarDecoder) decodeValues(c *Columnar, present []int, cols Columns, step time.Duration) string {
	cv := &columnValues{counts: make([]float64, len(present))}
	for j, i := range present {
		cv.counts[j] = float64(c.Windows[i].Count)
	}
	// Last before First, which is predicted from it.
	for _, col := range []Columns{ColLast, ColFirst, ColSum, ColMin, ColMax} {
		if cols&col == 0 {
			continue
		}
		var name string
		for _, vp := range valueProps {
			if vp.col == col {
				name = vp.name
			}
		}
		raw, ok, valid := d.binary(name)
		switch {
		case !valid:
			return fmt.Sprintf("property %s is not base64", name)
		case ok != (len(present) > 0):
			return fmt.Sprintf("property %s present: %v, with %d windows of points", name, ok, len(present))
		case !ok:
			continue
		}
		r := bitcode.NewReader(raw)
		v := make([]float64, len(present))
		if err := cv.column(col).read(&r, v); err != nil {
			return fmt.Sprintf("column %s: %v", name, err)
		}
		var t []uint64
		if col == ColFirst || col == ColLast {
			t = make([]uint64, len(present))
			if err := readTimes(&r, t, uint64(step)); err != nil {
				return fmt.Sprintf("column %s: times: %v", name, err)
			}
		}
		if !r.AtCleanEnd() {
			return fmt.Sprintf("column %s: bytes left over", name)
		}
		for j, i := range present {
			w := c.Windows[i]
			switch col {
			case ColSum:
				w.Sum = v[j]
			case ColMin:
				w.Min = v[j]
			case ColMax:
				w.Max = v[j]
			case ColFirst:
				w.First, w.FirstAt = v[j], time.Duration(t[j])
				if w.FirstAt > w.LastAt {
					return fmt.Sprintf("window %d: First after Last", i)
				}
			case ColLast:
				w.Last, w.LastAt = v[j], time.Duration(t[j])
			}
		}
		switch col {
		case ColLast:
			cv.last = v
		}
	}
	return ""
}

func (d *columnarDecoder) decodeSketches(c *Columnar, present []int, accuracy float64) string {
	stream, reason := d.parts(sketchPrefix)
	if reason != "" || stream == nil {
		return reason
	}
	if len(present) == 0 {
		return "sketches without windows of points"
	}
	if err := sketchenc.CheckAccuracy(accuracy); err != nil {
		return err.Error()
	}
	r := bitcode.NewReader(stream)
	if g := math.Float64frombits(r.ReadLong(64)); g != sketchenc.Gamma(accuracy) {
		return fmt.Sprintf("sketches of gamma %g, not of relative accuracy %g", g, accuracy)
	}
	lo, hi := sketchenc.KeyRange(accuracy)
	st := newSketchState()
	for _, i := range present {
		if r.ReadBits(1) == 0 {
			continue
		}
		sk, err := st.read(&r, accuracy, lo, hi)
		if err != nil {
			return fmt.Sprintf("window %d: bad sketch", i)
		}
		if sk.Count() != c.Windows[i].Count {
			return fmt.Sprintf("window %d: count %d, its sketch's %d", i, c.Windows[i].Count, sk.Count())
		}
		c.Windows[i].Sketch = sk
	}
	if !r.AtCleanEnd() {
		return "sketch stream: bytes left over"
	}
	return ""
}

// readSealed reads the sealed column of n windows.
func readSealed(b []byte, n int) ([]bool, bool) {
	r := bitcode.NewReader(b)
	s := make([]bool, n)
	v := r.ReadBits(1) == 1
	a := bitcode.NewAdaptive()
	for i := 0; i < n; {
		run := a.Read(&r) + 1
		if r.Err() || run > uint64(n-i) {
			return nil, false
		}
		for range run {
			s[i] = v
			i++
		}
		v = !v
	}
	return s, r.AtCleanEnd()
}

// readCounts reads the count column of len(ws) windows into ws, and returns the indexes of
// the windows with points.
func readCounts(b []byte, ws []Window) ([]int, bool) {
	r := bitcode.NewReader(b)
	a := bitcode.NewAdaptive()
	prev := uint64(0)
	var present []int
	for i := range ws {
		c := prev + uint64(bitcode.Unzigzag(a.Read(&r)))
		if r.Err() {
			return nil, false
		}
		if c > 0 {
			present = append(present, i)
		}
		ws[i].Count, prev = c, c
	}
	return present, r.AtCleanEnd()
}

// readHistograms reads the histogram stream of n windows.
func readHistograms(b []byte, n int) ([][]byte, bool) {
	hs := make([][]byte, n)
	for i := range n {
		l, k := uvarint(b)
		if k <= 0 || l > uint64(len(b)-k) {
			return nil, false
		}
		b = b[k:]
		if l > 0 {
			hs[i] = b[:l:l]
		}
		b = b[l:]
	}
	return hs, len(b) == 0
}

// uvarint is binary.Uvarint that accepts only the shortest encoding.
func uvarint(b []byte) (uint64, int) {
	var x uint64
	for i := 0; i < len(b) && i < 10; i++ {
		c := b[i]
		if i == 9 && c > 1 {
			return 0, -1
		}
		x |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			if c == 0 && i > 0 {
				return 0, -1
			}
			return x, i + 1
		}
	}
	return 0, -1
}
