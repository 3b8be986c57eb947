package staging

import (
	"slices"
	"time"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/chunkenc"
)

// Packed are a series' staged points (sorted, one per millisecond) as a read of many
// series' staged points holds them between its batches: either as they are (plain), or as
// a chunk (internal/chunkenc) of their milliseconds and values, about 1 to 3 bytes a point
// where a []tablets.Point takes 32. Such a read, of a group of a Select's series, lives
// while its batches are read, and the staged points grow with the time since the last
// fold: in the soak, the queries in flight held tens of MB of them. The first
// PackScratch.PlainLeft points of a read stay plain: a refresh of a panel over a thousand
// series spent an eighth of its CPU packing and unpacking them. It lives in memory only;
// no byte of it is stored.
type Packed struct {
	chunk []byte
	plain []tablets.Point
}

// PackScratch is the buffers packing reuses from one series to the next, and how many
// points may still be kept plain.
type PackScratch struct {
	// PlainLeft is how many more points Pack keeps plain: a series whose points fit is
	// kept as it is (and PlainLeft lowered), the others are encoded.
	PlainLeft int
	times     []uint64
	values    []float64
}

// Pack packs pts (sorted by time, times at whole milliseconds and distinct): kept as they
// are (pts itself, which the caller must no longer change) while they fit in s.PlainLeft,
// else encoded. No points pack to the zero Packed.
func (s *PackScratch) Pack(pts []tablets.Point) Packed {
	if len(pts) == 0 {
		return Packed{}
	}
	if len(pts) <= s.PlainLeft {
		s.PlainLeft -= len(pts)
		return Packed{plain: pts[:len(pts):len(pts)]}
	}
	s.times, s.values = s.times[:0], s.values[:0]
	for _, p := range pts {
		s.times = append(s.times, packedMilli(p.Time.UnixMilli()))
		s.values = append(s.values, p.Value)
	}
	return Packed{chunk: chunkenc.Append(nil, s.times, s.values)}
}

// Plain says whether p holds its points as they are.
func (p Packed) Plain() bool { return p.plain != nil }

// Bytes is about the memory p holds.
func (p Packed) Bytes() int { return len(p.chunk) + 32*len(p.plain) }

// In returns the points in [from, to), oldest first. Points kept plain are returned as a
// slice of p's own (its capacity cut at its end, so that an append copies): read-only.
func (p Packed) In(from, to time.Time) ([]tablets.Point, error) {
	if p.plain != nil {
		lo, _ := slices.BinarySearchFunc(p.plain, from, func(pt tablets.Point, t time.Time) int { return pt.Time.Compare(t) })
		hi, _ := slices.BinarySearchFunc(p.plain, to, func(pt tablets.Point, t time.Time) int { return pt.Time.Compare(t) })
		if lo >= hi {
			return nil, nil
		}
		return p.plain[lo:hi:hi], nil
	}
	if len(p.chunk) == 0 {
		return nil, nil
	}
	lo, hi := packedMilli(EarliestMilli(from)), packedMilli(EarliestMilli(to))
	n, _, _, err := chunkenc.Header(p.chunk)
	if err != nil {
		return nil, err
	}
	out := make([]tablets.Point, 0, n) // a batch's range is mostly its group's
	err = chunkenc.Decode(p.chunk, func(t uint64, v float64) {
		if t >= lo && t < hi {
			out = append(out, tablets.Point{Time: time.UnixMilli(unpackedMilli(t)).UTC(), Value: v})
		}
	})
	return out, err
}

// packedMilli maps a Unix millisecond to a chunk's unsigned time, in the same order: the
// sign bit flipped, for the times before 1970.
func packedMilli(ms int64) uint64 { return uint64(ms) ^ 1<<63 }

func unpackedMilli(t uint64) int64 { return int64(t ^ 1<<63) }
