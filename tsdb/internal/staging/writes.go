package staging

import (
	"cmp"
	"slices"
	"time"
	"unsafe"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/histenc"
)

// Point is a staged point and where it was staged, to order the writes of one time.
type Point struct {
	MS     int64
	Value  float64
	Stamp  uint64 // of its entity: the later write has the higher
	Record int    // in its write (Decoded.Record): the later argument is higher
}

// Hist is a staged histogram sample and where it was staged (see Point).
type Hist struct {
	Sample histenc.Sample
	Stamp  uint64
	Record int
}

// HistWeight is how many points a staged histogram sample counts as in a read's budget and
// a fold's round: decoded, a 20-bucket histogram takes about 500 bytes.
const HistWeight = 16

// The bytes a collected point and histogram sample take, as a read's budget counts them:
// their size, and a histogram's decoded buckets as HistWeight points.
const (
	PointBytes = int64(unsafe.Sizeof(Point{}))
	HistBytes  = int64(unsafe.Sizeof(Hist{})) + HistWeight*PointBytes
)

// Written is a staged write of one sample S: a Point (of a tablets.Point) or a Hist (of a
// histogram sample), which LastWrites orders the same way whatever the kind.
type Written[S any] interface {
	Point | Hist
	// written is the sample's millisecond and where it was staged (Point's Stamp and
	// Record): the later write of a millisecond is the greater.
	written() (ms int64, stamp uint64, record int)
	// sample is the sample written.
	sample() S
}

func (p Point) written() (int64, uint64, int) { return p.MS, p.Stamp, p.Record }

func (p Point) sample() tablets.Point {
	return tablets.Point{Time: time.UnixMilli(p.MS).UTC(), Value: p.Value}
}

func (h Hist) written() (int64, uint64, int) { return int64(h.Sample.Unit), h.Stamp, h.Record }

func (h Hist) sample() histenc.Sample { return h.Sample }

// LastWrites sorts staged writes by millisecond and keeps, of each millisecond, the
// sample of the last write: LastWrites[tablets.Point] of Points, LastWrites[histenc.Sample]
// of Hists.
func LastWrites[S any, W Written[S]](ws []W) []S {
	slices.SortFunc(ws, func(a, b W) int {
		ams, astamp, arecord := a.written()
		bms, bstamp, brecord := b.written()
		return cmp.Or(cmp.Compare(ams, bms), cmp.Compare(astamp, bstamp), cmp.Compare(arecord, brecord))
	})
	out := make([]S, 0, len(ws))
	for i, w := range ws {
		if ms, _, _ := w.written(); i+1 < len(ws) {
			if next, _, _ := ws[i+1].written(); next == ms {
				continue
			}
		}
		out = append(out, w.sample())
	}
	return out
}

// appendLastPoints appends LastWrites of staged points to dst (sorting ws): the points of
// a series staged in time order, as scrapes stage them, are checked so and copied, not
// sorted.
func appendLastPoints(dst []tablets.Point, ws []Point) []tablets.Point {
	inOrder := true
	for i := 1; i < len(ws); i++ {
		if ws[i].MS <= ws[i-1].MS {
			inOrder = false
			break
		}
	}
	if !inOrder {
		return append(dst, LastWrites[tablets.Point](ws)...)
	}
	dst = slices.Grow(dst, len(ws))
	for _, w := range ws {
		dst = append(dst, w.sample())
	}
	return dst
}
