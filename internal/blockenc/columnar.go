package blockenc

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/seed71701133/tablets/entity"
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
	ColExact                         // the exactness column: NaNs and Resets (Columnar.Exact)

	// AllColumns is every column.
	AllColumns = ColCount | ColSum | ColMin | ColMax | ColFirst | ColLast | ColSketch | ColHistogram | ColExact
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
	// (the roller's), so no point it lacks can arrive unflagged: len(Windows). Nil to write
	// says none is; a decoded block always has them.
	Sealed []bool
	// Histograms are the encoded histogram windows (opaque here): nil, or one per window,
	// nil where a window holds no histogram sample. Decoded only with ColHistogram.
	Histograms [][]byte
	// Columns is, of a decoded block, the columns it was decoded with.
	Columns Columns
	// Exact says the block has the exactness column: NaNs, and each window's Resets. To
	// write: the column is written (rollups since it exists always write it). Decoded (with
	// ColExact): the block had it; a block rolled up before has not, and its windows'
	// Resets are unknown.
	Exact bool
	// NaNs are, with Exact, the NaN samples (staleness markers not counted) of each window:
	// nil or len(Windows) to write (nil: none), len(Windows) when decoded. A NaN is not a
	// point (no window counts it), but a PromQL function over the raw samples sees it.
	NaNs []uint64
}

// ErrTooLarge is returned by AppendColumnar for a block whose entity would exceed Azure's
// limits (1 MiB an entity, its JSON body counted; 64 KiB a property; 252 properties).
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
	propExact  = "r"
	// The sketch and histogram streams are spilled over properties q0, q1, ... and h0, h1,
	// ... of at most partBytes each.
	sketchPrefix = "q"
	histPrefix   = "h"
	partBytes    = 60 << 10
	// maxParts bounds the parts of a stream, and so the $select of sketches or histograms:
	// 13 full parts are 1,064,960 characters of base64, over an entity's 1 MiB.
	maxParts = 13
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
	return appendColumnar(dst, series, Key(b.Start), false, step, b)
}

// appendColumnar is AppendColumnar at the given keys; packed adds the block's start as
// property T (the packed layout's).
func appendColumnar(dst []byte, pk, rk string, packed bool, step time.Duration, b *Columnar) ([]byte, error) {
	props, err := columnarProps(step, b)
	if err != nil {
		return nil, err
	}
	for _, p := range props {
		if len(p.value) > maxPropertyBytes {
			return nil, fmt.Errorf("%w: property %s holds %d bytes", ErrTooLarge, p.name, len(p.value))
		}
	}
	head := 3 // V, W, R
	if packed {
		head++ // T
	}
	if len(props)+head > entity.MaxUserProperties {
		return nil, fmt.Errorf("%w: %d properties", ErrTooLarge, len(props)+head)
	}
	from := len(dst)
	dst = entity.AppendKeys(dst, pk, rk)
	if packed {
		dst = entity.AppendStringProperty(dst, propStart, Key(b.Start))
	}
	dst = entity.AppendDouble(dst, "V", VersionColumnar)
	dst = entity.AppendDouble(dst, "W", float64(len(b.Windows)))
	dst = entity.AppendDouble(dst, "R", b.Rolled)
	for _, p := range props {
		dst = entity.AppendBinary(dst, p.name, p.value)
	}
	// Azure's limit is 1 MiB of property data, which the JSON body always exceeds: the body
	// is what a client can check (so does the limit Checker of the tests).
	if n := len(dst) + 1 - from; n > entity.MaxEntityBytes {
		return nil, fmt.Errorf("%w: a body of %d bytes", ErrTooLarge, n)
	}
	return entity.AppendEnd(dst), nil
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
	if cols&ColExact != 0 {
		sb.WriteString("," + propExact)
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
