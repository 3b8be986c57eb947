package chunks

import (
	"github.com/seed71701133/tablets/internal/chunkenc"
	"github.com/seed71701133/tablets/internal/histenc"
)

// Codec is how a chunk holds values of type V, each at a unit (its time in the table's
// resolution): the one thing that differs between the kinds of samples a table of chunks
// holds.
type Codec[V any] interface {
	// Property names the chunk's binary property in its entity.
	Property() string
	// Append appends the chunk of values at units (strictly increasing) to dst.
	Append(dst []byte, units []uint64, values []V) []byte
	// AppendLimit appends the chunk of the longest prefix of the values that fits in limit
	// bytes (at least one value), and returns the prefix's length.
	AppendLimit(dst []byte, units []uint64, values []V, limit int) ([]byte, int)
	// Header returns a chunk's count of values and its first and last unit, without
	// decoding it.
	Header(chunk []byte) (count int, first, last uint64, err error)
	// Decode calls yield with each value of a chunk, in time order. It never panics,
	// whatever the chunk holds.
	Decode(chunk []byte, yield func(u uint64, v V)) error
}

// Floats is the codec of float points (internal/chunkenc): the chunks of package chunked,
// in property C (docs/format.md, "Layout chunked").
type Floats struct{}

var _ Codec[float64] = Floats{}

func (Floats) Property() string { return "C" }
func (Floats) Append(dst []byte, units []uint64, values []float64) []byte {
	return chunkenc.Append(dst, units, values)
}
func (Floats) AppendLimit(dst []byte, units []uint64, values []float64, limit int) ([]byte, int) {
	return chunkenc.AppendLimit(dst, units, values, limit)
}
func (Floats) Header(chunk []byte) (int, uint64, uint64, error) { return chunkenc.Header(chunk) }
func (Floats) Decode(chunk []byte, yield func(uint64, float64)) error {
	return chunkenc.Decode(chunk, yield)
}

// Histograms is the codec of native histogram samples (internal/histenc): the chunks of
// tsdb's histogram tables, in property H (docs/format.md, "Histogram tables"). A value is a
// histenc.Sample whose Unit is the unit it is at.
type Histograms struct{}

var _ Codec[histenc.Sample] = Histograms{}

func (Histograms) Property() string { return "H" }
func (Histograms) Append(dst []byte, _ []uint64, values []histenc.Sample) []byte {
	return histenc.Append(dst, values)
}
func (Histograms) AppendLimit(dst []byte, _ []uint64, values []histenc.Sample, limit int) ([]byte, int) {
	return histenc.AppendLimit(dst, values, limit)
}
func (Histograms) Header(chunk []byte) (int, uint64, uint64, error) { return histenc.Header(chunk) }
func (Histograms) Decode(chunk []byte, yield func(uint64, histenc.Sample)) error {
	return histenc.Decode(chunk, func(s histenc.Sample) { yield(s.Unit, s) })
}

// HistogramUnits returns the units of samples, as the table's functions take them beside
// the values.
func HistogramUnits(samples []histenc.Sample) []uint64 {
	units := make([]uint64, len(samples))
	for i, s := range samples {
		units[i] = s.Unit
	}
	return units
}
