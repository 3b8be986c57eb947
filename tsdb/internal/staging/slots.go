package staging

import (
	"sync"
	"unique"
)

// seriesSlots numbers the float series a read collects staged points of, and holds each
// one's points in its slot: a refresh of a panel over a thousand series takes the staged
// points of a hundred entities from the cache, and looking each series up in a map by its
// key (hashing and comparing the string), once an entity, was a quarter of its staging
// read's CPU. The cache's entities name their series by interned key (seriesPack), which
// handles looks up by pointer; an entity assembled from the cache carries its series'
// slots (Decoded.Slots).
type seriesSlots struct {
	all     bool // every series read: a key not seen yet gets a slot
	keys    []string
	index   map[string]int32
	handles map[unique.Handle[string]]int32 // index by interned key: made by byHandle
	taken   *takenPoints
}

// newSeriesSlots numbers series, distinct keys in order (nil: every series read, numbered
// as they come).
func newSeriesSlots(series []string) *seriesSlots {
	s := &seriesSlots{all: series == nil, index: make(map[string]int32, len(series)), taken: takenPool.Get().(*takenPoints)}
	for _, key := range series {
		if _, dup := s.index[key]; !dup {
			s.add(key)
		}
	}
	return s
}

// slot is key's slot; false when the read did not ask for key.
func (s *seriesSlots) slot(key string) (int32, bool) {
	if i, ok := s.index[key]; ok {
		return i, true
	}
	if !s.all {
		return 0, false
	}
	return s.add(key), true
}

// add gives key the next slot.
func (s *seriesSlots) add(key string) int32 {
	i := int32(len(s.keys))
	s.index[key] = i
	s.keys = append(s.keys, key)
	return i
}

// byHandle is the slots by interned key, nil when every series is read (the cache's
// entities then yield all theirs).
func (s *seriesSlots) byHandle() map[unique.Handle[string]]int32 {
	if s.all {
		return nil
	}
	if s.handles == nil {
		s.handles = make(map[unique.Handle[string]]int32, len(s.keys))
		for i, key := range s.keys {
			s.handles[unique.Make(key)] = int32(i)
		}
	}
	return s.handles
}

// take adds a point of slot's series (in the order taken: a series' points keep theirs).
func (s *seriesSlots) take(slot int32, p Point) {
	s.taken.points = append(s.taken.points, p)
	s.taken.slots = append(s.taken.slots, slot)
}

// found is the points taken, by series: those with any, each a slice of one array that
// release gives back (the caller copies out what it keeps first).
func (s *seriesSlots) found() map[string][]Point {
	t := s.taken
	starts := t.bySlot(len(s.keys))
	out := make(map[string][]Point, len(s.keys))
	for i, key := range s.keys {
		if lo, hi := starts[i], starts[i+1]; lo < hi {
			out[key] = t.sorted[lo:hi:hi]
		}
	}
	return out
}

// release gives the arrays of the points taken back to the pool: found's slices are then
// no longer the caller's.
func (s *seriesSlots) release() {
	t := s.taken
	if t == nil {
		return
	}
	s.taken = nil
	if cap(t.points) > maxPooledPoints {
		return // a read of a rare size: not kept for the next
	}
	t.points, t.slots, t.sorted, t.starts = t.points[:0], t.slots[:0], t.sorted[:0], t.starts[:0]
	takenPool.Put(t)
}

// takenPoints are the points a read collects, in the order it takes them (an entity's
// series after another's) with each one's slot, then sorted by slot (stably: bySlot). A
// read's points were a slice a series, each grown as the entities came, and then sorted by
// LastWrites: in the soak, a refresh collects tens of points of each of 16,000 series
// from the staging entities of the last minutes, and growing them was the first of the
// server's allocations (9 GB in 280 s, of 88). Taken in two arrays (pooled), a read
// allocates none of it.
type takenPoints struct {
	points []Point
	slots  []int32
	sorted []Point
	starts []int32
}

// maxPooledPoints is the most points a pooled takenPoints keeps room for (36 MB).
const maxPooledPoints = 1 << 20

var takenPool = sync.Pool{New: func() any { return new(takenPoints) }}

// bySlot sorts the points taken by slot (of n), each slot's in the order taken, into
// t.sorted, and returns where each slot's begin: slot i's are sorted[starts[i]:starts[i+1]].
func (t *takenPoints) bySlot(n int) []int32 {
	t.starts = append(t.starts[:0], make([]int32, n+1)...)
	for _, slot := range t.slots {
		t.starts[slot+1]++
	}
	for i := 1; i <= n; i++ {
		t.starts[i] += t.starts[i-1]
	}
	if cap(t.sorted) < len(t.points) {
		t.sorted = make([]Point, len(t.points))
	}
	t.sorted = t.sorted[:len(t.points)]
	next := append([]int32(nil), t.starts[:n]...)
	for i, p := range t.points {
		slot := t.slots[i]
		t.sorted[next[slot]] = p
		next[slot]++
	}
	return t.starts
}
