package blockenc

import (
	"encoding/base64"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/internal/bitcode"
	"github.com/seed71701133/tablets/internal/sketchenc"
)

// columnarDecoder decodes one entity; its methods return "" or why it is no valid block.
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

// decode decodes the columns cols of the entity: "" reason, or why it is no block.
func (d *columnarDecoder) decode(step time.Duration, accuracy float64, cols Columns) (*Columnar, string) {
	if step <= 0 {
		return nil, fmt.Sprintf("step %v", step)
	}
	c, reason := d.decodeHead()
	if reason != "" {
		return nil, reason
	}
	c.Columns = cols
	n := len(c.Windows)
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
	present, presentCounts, ok := readCounts(counts, n)
	if !ok {
		return nil, "bad count column"
	}
	// One allocation for the windows that hold points: a day's block of a minute tier
	// has 1,440 windows, of which a block rolled up a minute at a time holds few.
	store := make([]Window, len(present))
	for k, i := range present {
		store[k].Count = presentCounts[k]
		c.Windows[i] = &store[k]
	}
	if reason := d.decodeValues(c, present, cols, step); reason != "" {
		return nil, reason
	}
	if cols&ColExact != 0 {
		if reason := d.decodeExact(c, present); reason != "" {
			return nil, reason
		}
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

// decodeHead reads the RowKey, V, W and R: a block of W windows, all nil.
func (d *columnarDecoder) decodeHead() (*Columnar, string) {
	start, ok := rowKeyStart(d.e)
	if !ok {
		return nil, "RowKey is not a block start"
	}
	c := &Columnar{Start: start}
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
	c.Windows = make([]*Window, int(nw))
	return c, ""
}

// decodeValues decodes the value columns of cols into the windows with points (present, by
// index) of c.
func (d *columnarDecoder) decodeValues(c *Columnar, present []int, cols Columns, step time.Duration) string {
	cv := &columnValues{counts: make([]float64, len(present))}
	for j, i := range present {
		cv.counts[j] = float64(c.Windows[i].Count)
	}
	// Last before First, which is predicted from it.
	for _, vp := range []struct {
		col  Columns
		name string
	}{{ColLast, propLast}, {ColFirst, propFirst}, {ColSum, propSum}, {ColMin, propMin}, {ColMax, propMax}} {
		if cols&vp.col == 0 {
			continue
		}
		raw, ok, valid := d.binary(vp.name)
		switch {
		case !valid:
			return fmt.Sprintf("property %s is not base64", vp.name)
		case ok != (len(present) > 0):
			return fmt.Sprintf("property %s present: %v, with %d windows of points", vp.name, ok, len(present))
		case !ok:
			continue
		}
		v, t, reason := cv.readColumn(raw, vp.col, step)
		if reason != "" {
			return fmt.Sprintf("column %s: %s", vp.name, reason)
		}
		for j, i := range present {
			w := c.Windows[i]
			switch vp.col {
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
		if vp.col == ColLast {
			cv.last = v
		}
	}
	return ""
}

// decodeExact decodes the exactness column, if c has it, into c.NaNs and the Resets of the
// windows with points (present, by index).
func (d *columnarDecoder) decodeExact(c *Columnar, present []int) string {
	raw, ok, valid := d.binary(propExact)
	switch {
	case !valid:
		return "property " + propExact + " is not base64"
	case !ok:
		return ""
	}
	r := bitcode.NewReader(raw)
	a := bitcode.NewAdaptive()
	c.Exact, c.NaNs = true, make([]uint64, len(c.Windows))
	for i := range c.NaNs {
		c.NaNs[i] = a.Read(&r)
		if r.Err() {
			return "column " + propExact + ": NaN counts cut short"
		}
	}
	if len(present) > 0 {
		v := make([]float64, len(present))
		if err := (&valueColumn{}).read(&r, v); err != nil {
			return "column " + propExact + ": " + err.Error()
		}
		for j, i := range present {
			c.Windows[i].Resets = v[j]
		}
	}
	if !r.AtCleanEnd() {
		return "column " + propExact + ": bytes left over"
	}
	return ""
}

// readColumn reads the property of value column col: its values and, of First and Last,
// their times.
func (cv *columnValues) readColumn(raw []byte, col Columns, step time.Duration) ([]float64, []uint64, string) {
	r := bitcode.NewReader(raw)
	v := make([]float64, len(cv.counts))
	if err := cv.column(col).read(&r, v); err != nil {
		return nil, nil, err.Error()
	}
	var t []uint64
	if col == ColFirst || col == ColLast {
		t = make([]uint64, len(v))
		if err := readTimes(&r, t, uint64(step)); err != nil {
			return nil, nil, "times: " + err.Error()
		}
	}
	if !r.AtCleanEnd() {
		return nil, nil, "bytes left over"
	}
	return v, t, ""
}

// decodeSketches decodes the sketch stream into the windows with points of c.
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

// readCounts reads the count column of n windows, and returns the indexes of the windows
// with points and their counts.
func readCounts(b []byte, n int) (present []int, counts []uint64, ok bool) {
	r := bitcode.NewReader(b)
	a := bitcode.NewAdaptive()
	prev := uint64(0)
	for i := range n {
		c := prev + uint64(bitcode.Unzigzag(a.Read(&r)))
		if r.Err() {
			return nil, nil, false
		}
		if c > 0 {
			present = append(present, i)
			counts = append(counts, c)
		}
		prev = c
	}
	return present, counts, r.AtCleanEnd()
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
