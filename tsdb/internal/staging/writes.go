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

// LastWrites sorts staged points by time and keeps, of each time, the last write.
func LastWrites(pts []Point) []tablets.Point {
	slices.SortFunc(pts, func(a, b Point) int {
		return cmp.Or(cmp.Compare(a.MS, b.MS), cmp.Compare(a.Stamp, b.Stamp), cmp.Compare(a.Record, b.Record))
	})
	out := make([]tablets.Point, 0, len(pts))
	for i, p := range pts {
		if i+1 < len(pts) && pts[i+1].MS == p.MS {
			continue
		}
		out = append(out, tablets.Point{Time: time.UnixMilli(p.MS).UTC(), Value: p.Value})
	}
	return out
}

// LastHistWrites sorts staged samples by time and keeps, of each millisecond, the last
// write.
func LastHistWrites(hs []Hist) []histenc.Sample {
	slices.SortFunc(hs, func(a, b Hist) int {
		return cmp.Or(cmp.Compare(a.Sample.Unit, b.Sample.Unit), cmp.Compare(a.Stamp, b.Stamp), cmp.Compare(a.Record, b.Record))
	})
	out := make([]histenc.Sample, 0, len(hs))
	for i, h := range hs {
		if i+1 < len(hs) && hs[i+1].Sample.Unit == h.Sample.Unit {
			continue
		}
		out = append(out, h.Sample)
	}
	return out
}
