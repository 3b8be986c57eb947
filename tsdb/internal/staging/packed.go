package staging

import (
	"time"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/chunkenc"
)

// Packed are a series' staged points (sorted, one per millisecond) as a read of many
// series' staged points holds them between its batches: a chunk (internal/chunkenc) of
// their milliseconds and values, about 1 to 3 bytes a point where a []tablets.Point takes
// 32. Such a read, of a group of a Select's series, lives while its batches are read, and
// the staged points grow with the time since the last fold: in the soak, the queries in
// flight held tens of MB of them. It lives in memory only; no byte of it is stored.
type Packed []byte

// PackScratch is the buffers packing reuses from one series to the next.
type PackScratch struct {
	times  []uint64
	values []float64
}

// Pack packs pts (sorted by time, times at whole milliseconds and distinct); nil if there
// are none.
func (s *PackScratch) Pack(pts []tablets.Point) Packed {
	if len(pts) == 0 {
		return nil
	}
	s.times, s.values = s.times[:0], s.values[:0]
	for _, p := range pts {
		s.times = append(s.times, packedMilli(p.Time.UnixMilli()))
		s.values = append(s.values, p.Value)
	}
	return chunkenc.Append(nil, s.times, s.values)
}

// In returns the points in [from, to), oldest first.
func (p Packed) In(from, to time.Time) ([]tablets.Point, error) {
	if len(p) == 0 {
		return nil, nil
	}
	lo, hi := packedMilli(EarliestMilli(from)), packedMilli(EarliestMilli(to))
	n, _, _, err := chunkenc.Header(p)
	if err != nil {
		return nil, err
	}
	out := make([]tablets.Point, 0, n) // a batch's range is mostly its group's
	err = chunkenc.Decode(p, func(t uint64, v float64) {
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
