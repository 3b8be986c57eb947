package blockenc

import (
	"errors"
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

// AppendColumnar appends the entity of b in the partition of series (a tier of step), or
// returns an error wrapping ErrTooLarge when it would not fit an entity: the caller then
// leaves out sketches (a window whose Sketch is nil is stored without one, and decodes so:
// its quantiles come from its raw points, or are unknown) or histograms and tries again.
func AppendColumnar(dst []byte, series string, step time.Duration, b *Columnar) ([]byte, error) {
	return nil, errors.New("blockenc: AppendColumnar: not yet implemented")
}

// SelectColumnar is the $select list that reads cols of a columnar block: the keys, V, W,
// R, the sealed and count columns always, then the properties of cols.
func SelectColumnar(cols Columns) string {
	return ""
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
// a valid block is an *entity.DecodeError.
func DecodeColumnar(e *entity.Entity, step time.Duration, accuracy float64, cols Columns) (*Columnar, error) {
	return nil, errors.New("blockenc: DecodeColumnar: not yet implemented")
}
