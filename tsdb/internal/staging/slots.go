package staging

import (
	"sync"
	"unique"
)

// seriesSlots numbers the float series a read collects staged points of, and takes each
// one's points with its slot (takenPoints): a refresh of a panel over a thousand series takes the staged
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
	latest  *latestPoints // if not nil (keepLatest), what take keeps instead of taken
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
// After keepLatest, it keeps the slot's latest only.
func (s *seriesSlots) take(slot int32, p Point) {
	if s.latest != nil {
		s.latest.offer(slot, p)
		return
	}
	s.taken.add(slot, p)
}

// keepLatest has the slots keep each series' latest point only (latestPoints): of a read
// of the series it numbered (not of every series), before the first take.
func (s *seriesSlots) keepLatest() {
	if !s.all {
		s.latest = newLatestPoints(len(s.keys))
	}
}

// covers is the latestPoints' covers after keepLatest; nil before (or of every series): no
// entity is left out.
func (s *seriesSlots) covers() func(last string) bool {
	if s.latest == nil {
		return nil
	}
	return s.latest.covers
}

// found is the points taken, by series: those with any, each a slice of one array that
// release gives back (the caller copies out what it keeps first).
func (s *seriesSlots) found() map[string][]Point {
	t := s.taken
	var starts []int32
	if s.latest != nil {
		t.sorted, t.starts = s.latest.appendTo(t.sorted[:0], t.starts)
		starts = t.starts
	} else {
		starts = t.bySlot(len(s.keys))
	}
	out := make(map[string][]Point, len(s.keys))
	for i, key := range s.keys {
		if lo, hi := starts[i], starts[i+1]; lo < hi {
			out[key] = t.sorted[lo:hi:hi]
		}
	}
	return out
}

// release gives the arrays of the points taken back to their pools: found's slices are
// then no longer the caller's.
func (s *seriesSlots) release() {
	if t := s.taken; t != nil {
		s.taken = nil
		t.release()
	}
}

// takenPoints are the points a read collects, in the order it takes them (an entity's
// series after another's) with each one's slot, in blocks of takenBlockPoints, then sorted
// by slot (stably: bySlot) into one array. A read's points were a slice a series, each
// grown as the entities came, and then sorted by LastWrites: in the soak, a refresh
// collects tens of points of each of 16,000 series from the staging entities of the last
// minutes, and growing them was the first of the server's allocations (9 GB in 280 s, of
// 88). The blocks are pooled, and the sorted array too unless larger than
// maxPooledPoints: a read allocates none of it but the sorted array of a large one.
type takenPoints struct {
	blocks []*takenBlock
	n      int // points in the last block
	// The last block's arrays (nil before the first): what add writes to.
	points []Point
	slots  []int32
	sorted []Point
	starts []int32
}

// takenBlockPoints is how many points a block of takenPoints holds (about 600 KB), but its
// first, takenFirstPoints (about 74 KB): a refresh of a small panel takes a few thousand
// points, and a block of 600 KB a read was memory the kernel had to give the process
// again, page by page, whenever the pool had lost its blocks to a collection (profiled:
// 95 ns a point taken, 6% of up-by-job-now's refresh; 3% with the smaller first block).
const (
	takenBlockPoints = 1 << 14
	takenFirstPoints = 1 << 11
)

type takenBlock struct {
	points []Point
	slots  []int32
}

// maxPooledPoints is the most points a pooled sorted array of takenPoints holds (32 MB).
const maxPooledPoints = 1 << 20

var (
	takenPool = sync.Pool{New: func() any { return new(takenPoints) }}
	// takenFirstPool holds the reads' first blocks, takenBlockPool the others.
	takenFirstPool = sync.Pool{New: func() any { return newTakenBlock(takenFirstPoints) }}
	takenBlockPool = sync.Pool{New: func() any { return newTakenBlock(takenBlockPoints) }}
)

func newTakenBlock(n int) *takenBlock {
	return &takenBlock{points: make([]Point, n), slots: make([]int32, n)}
}

// add takes a point of slot: two stores where the last block has room (a refresh of an
// hour's staged points takes hundreds of thousands).
func (t *takenPoints) add(slot int32, p Point) {
	if t.n == len(t.points) {
		t.grow()
	}
	t.points[t.n], t.slots[t.n] = p, slot
	t.n++
}

// grow adds a block: the read's first, or another.
func (t *takenPoints) grow() {
	var b *takenBlock
	if len(t.blocks) == 0 {
		b = takenFirstPool.Get().(*takenBlock)
	} else {
		b = takenBlockPool.Get().(*takenBlock)
	}
	t.blocks = append(t.blocks, b)
	t.points, t.slots, t.n = b.points, b.slots, 0
}

// len is the number of points taken.
func (t *takenPoints) len() int {
	n := 0
	for _, b := range t.blocks[:max(len(t.blocks)-1, 0)] {
		n += len(b.points)
	}
	if len(t.blocks) > 0 {
		n += t.n
	}
	return n
}

// each calls f with each block's points and slots taken, in order.
func (t *takenPoints) each(f func(points []Point, slots []int32)) {
	for i, b := range t.blocks {
		n := len(b.points)
		if i == len(t.blocks)-1 {
			n = t.n
		}
		f(b.points[:n], b.slots[:n])
	}
}

// bySlot sorts the points taken by slot (of n), each slot's in the order taken, into
// t.sorted, and returns where each slot's begin: slot i's are sorted[starts[i]:starts[i+1]].
func (t *takenPoints) bySlot(n int) []int32 {
	t.starts = append(t.starts[:0], make([]int32, n+1)...)
	t.each(func(_ []Point, slots []int32) {
		for _, slot := range slots {
			t.starts[slot+1]++
		}
	})
	for i := 1; i <= n; i++ {
		t.starts[i] += t.starts[i-1]
	}
	if total := t.len(); cap(t.sorted) < total {
		t.sorted = make([]Point, total)
	} else {
		t.sorted = t.sorted[:total]
	}
	next := append([]int32(nil), t.starts[:n]...)
	t.each(func(points []Point, slots []int32) {
		for i, p := range points {
			slot := slots[i]
			t.sorted[next[slot]] = p
			next[slot]++
		}
	})
	return t.starts
}

// release gives t's blocks and t back to their pools (t's sorted array with it, unless
// larger than maxPooledPoints).
func (t *takenPoints) release() {
	for i, b := range t.blocks {
		if len(b.points) == takenFirstPoints {
			takenFirstPool.Put(b)
		} else {
			takenBlockPool.Put(b)
		}
		t.blocks[i] = nil
	}
	t.blocks, t.n, t.starts = t.blocks[:0], 0, t.starts[:0]
	t.points, t.slots = nil, nil
	if cap(t.sorted) > maxPooledPoints {
		t.sorted = nil
	}
	t.sorted = t.sorted[:0]
	takenPool.Put(t)
}
