package staging

import (
	"math"
)

// latestPoints is what a read of each series' latest point (ReadPacked's latest) keeps:
// of each slot, the point that the read of all of them would keep last (LastWrites: the
// latest millisecond, of it the latest write), instead of every point. The PromQL engine
// evaluates an instant selector of an instant query (a Grafana stat panel's, a rule's)
// on that one point a series; a refresh of up-by-job-now took the 20 staged points of
// each of its 100 series from 20 entities, packed and merged them, and the engine read
// them all to find the last.
//
// It also says when the entities left cannot change what it keeps (covers): a read that
// goes through the entities newest first (by U) stops at the first whose U is before the
// least of the slots' points, once every slot has one.
type latestPoints struct {
	points  []Point // by slot; MS == noPoint: none yet
	missing int     // slots with none
	floor   string  // the time key of the least point's MS ("": to compute again)
}

// noPoint is the MS of a slot with no point: every point read is later.
const noPoint = math.MinInt64

func newLatestPoints(slots int) *latestPoints {
	l := &latestPoints{points: make([]Point, slots), missing: slots}
	for i := range l.points {
		l.points[i].MS = noPoint
	}
	return l
}

// offer keeps p if it is slot's latest so far.
func (l *latestPoints) offer(slot int32, p Point) {
	b := &l.points[slot]
	switch {
	case b.MS == noPoint:
		l.missing--
	case p.MS < b.MS || p.MS == b.MS && (p.Stamp < b.Stamp || p.Stamp == b.Stamp && p.Record <= b.Record):
		return // an earlier point, or an earlier write of the same millisecond
	case p.MS == b.MS:
		*b = p
		return // the floor stays
	}
	*b = p
	l.floor = ""
}

// covers reports whether an entity whose latest point's time key is last can hold no
// point that offer would keep: every slot has a point, and all are later than last. (A
// point of last's own millisecond may be a later write.)
func (l *latestPoints) covers(last string) bool {
	if l.missing > 0 {
		return false
	}
	if l.floor == "" {
		least := int64(math.MaxInt64)
		for _, p := range l.points {
			least = min(least, p.MS)
		}
		l.floor = TimeKey(least)
	}
	return last < l.floor
}

// appendTo appends the slots' points to dst, slot by slot (none for a slot without one),
// and returns it with where each slot's begin: starts[i] to starts[i+1].
func (l *latestPoints) appendTo(dst []Point, starts []int32) ([]Point, []int32) {
	starts = append(starts[:0], int32(len(dst)))
	for _, p := range l.points {
		if p.MS != noPoint {
			dst = append(dst, p)
		}
		starts = append(starts, int32(len(dst)))
	}
	return dst, starts
}
