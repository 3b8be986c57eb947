package staging

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"iter"
	"maps"
	"slices"
	"sync"
	"time"
	"unsafe"

	"github.com/seed71701133/tablets/internal/chunkenc"
)

// The staging cache holds a staged entity decoded (a seriesPack, 20 bytes a point, and 12
// more of the series index over it) while queries read it, and, for the Folds' take-in,
// until its bucket's Fold is due (keepUnfolded): about 20 minutes of every tenant's points on
// every server. In the soak with three servers (docs/soak.md, runs 135 to 138) that was a
// server's staging cache growing by 10 MB a minute for the first 16 to 25 minutes of a run,
// and its RSS by 40 to 56% after the warm-up. Decoded entity by entity, a scrape's points
// are a point of each of thousands of series; series by series, they compress as the raw
// cache's do.
//
// So a cached whole float entity of a held bucket moves, freezeAfter after it was cached,
// into its bucket's frozen points (a frozenBucket): the points of the bucket's frozen
// entities series by series, each series' as a chunk (package chunkenc: its times and
// values, as the raw cache keeps them) and the place of each point's entity, in a segment
// each freeze adds (merged into one past maxFrozenSegments). A scraped series then takes
// about 5 bytes a point where the entity cached took 38 (BenchmarkFrozenBytes). A read that takes its series through the series index takes
// those of the frozen entities it lists from their frozen points (takeFrozen), series by
// series; a read of every series fetches them again. The take-in of a Fold takes its
// points of the entities frozen from them too (FoldedFloats).

// freezeAfter is how long after it was cached a held entity is frozen: the reads of the
// newest minutes (a refresh's last steps, a server's own writes) take those from the
// entities cached, the rest from the frozen points.
const freezeAfter = 2 * time.Minute

// freezeEvery is how often at most the cache looks for entities to freeze (Cache.add
// starts it).
const freezeEvery = time.Minute

// frozenShare is the share of the cache's bound its frozen points may take (1/frozenShare;
// the entities cached take the rest): past it the buckets that end first go.
const frozenShare = 8

// frozenKey names a bucket's frozen points: its table and partition.
type frozenKey struct{ table, pk string }

// maxFrozenSegments is how many segments a bucket's frozen points hold at most: a freeze
// that would make one more merges them all into one. A freeze adds a segment of the
// entities it freezes, so that it does not decode and encode again those frozen before (a
// freeze of the whole bucket each minute was 8% of a server's CPU in the soak's run 139),
// and a read takes a series' points from each segment, so that a few segments cost it a few
// lookups (BenchmarkFreezeByMinute).
var maxFrozenSegments = 4 // a variable for BenchmarkFreezeByMinute

// frozenBucket is the frozen points of the entities of one partition of an arrival bucket
// (those of a table whose Folds the cache holds entities for). Never changed once made: a
// freeze that adds entities makes a new one in its place, which shares the segments of the
// old.
type frozenBucket struct {
	// entities are the entities frozen, by place. An entity frozen again at another ETag
	// (a Delete rewrote it) takes a new place; its old place stays, unreachable through
	// byRK, until a merge drops it.
	entities []frozenEntity
	byRK     map[string]int32 // the place of each entity's ETag frozen last, by RowKey
	segments []*frozenSegment // oldest first
	size     int              // cost, once made
}

// frozenSegment is the points of the entities one freeze added (or a merge of segments):
// each series' points as a chunk and the places of their entities.
type frozenSegment struct {
	series map[string]frozenSeries // by series key
	// loose are the series that two entities of the segment hold a point of at one
	// millisecond (a write sent twice, a later write of a time): a chunk holds one point a
	// time, and which one a read or the Fold keeps is the writes' order (LastWrites), so
	// theirs are kept as points, by time.
	loose map[string][]frozenPoint
	data  []byte
	size  int // cost, once made
}

// frozenEntity is an entity frozen: its keys, ETag, stamp and number in its write.
type frozenEntity struct {
	rk, etag string
	stamp    uint64
	seq      int
}

// frozenSeries is where a series' points are in its segment's data: [off, mid) the chunk,
// [mid, end) its points' entities (each an uvarint of the zigzag of its place in entities
// less the one before).
type frozenSeries struct{ off, mid, end uint32 }

// frozenPoint is a point being frozen: its time, value, and entity's place (and its row in
// its entity: the later row of a time in one entity is its last write).
type frozenPoint struct {
	ms    int64
	value float64
	ent   int32
	row   int32
}

// frozenInput is a whole float entity to freeze.
type frozenInput struct {
	frozenEntity
	pack *seriesPack
}

// cost is about what b holds.
func (b *frozenBucket) cost() int {
	n := int(unsafe.Sizeof(*b)) + 8*cap(b.segments)
	for _, e := range b.entities {
		n += int(unsafe.Sizeof(e)) + len(e.rk) + len(e.etag) + 48 // and its byRK entry
	}
	for _, s := range b.segments {
		n += s.size
	}
	return n
}

// cost is about what s holds.
func (s *frozenSegment) cost() int {
	n := int(unsafe.Sizeof(*s)) + cap(s.data)
	n += len(s.series) * (int(unsafe.Sizeof(frozenSeries{})) + 16 + 16) // the key's header, the map's share
	for _, ps := range s.loose {
		n += 48 + cap(ps)*int(unsafe.Sizeof(frozenPoint{}))
	}
	return n
}

// live reports whether place i holds its entity's ETag frozen last.
func (b *frozenBucket) live(i int32) bool { return b.byRK[b.entities[i].rk] == i }

// freeze returns old (nil: none) with the entities of in added, as a segment of their own
// (all of old's merged into one with them past maxFrozenSegments): an entity old holds at
// the same ETag is not added again, and one it holds at another (a Delete rewrote it)
// replaces it.
func freeze(old *frozenBucket, in []frozenInput) (*frozenBucket, error) {
	b := &frozenBucket{byRK: map[string]int32{}}
	if old != nil {
		b.entities = slices.Clone(old.entities)
		maps.Copy(b.byRK, old.byRK)
		b.segments = slices.Clone(old.segments)
	}
	points := map[string][]frozenPoint{}
	for _, e := range in {
		if i, ok := b.byRK[e.rk]; ok && b.entities[i].etag == e.etag {
			continue
		}
		ent := int32(len(b.entities))
		b.byRK[e.rk] = ent
		b.entities = append(b.entities, e.frozenEntity)
		for r := range e.pack.len() {
			key := e.pack.keys[r].Value()
			times, values := e.pack.points(r)
			for i, ms := range times {
				points[key] = append(points[key], frozenPoint{ms: ms, value: values[i], ent: ent, row: int32(r)})
			}
		}
	}
	if len(points) > 0 {
		b.segments = append(b.segments, frozenSegmentOf(points))
	}
	if len(b.segments) > maxFrozenSegments {
		return b.merged()
	}
	return b, nil
}

// merged returns b with its segments merged into one, and only the places of its live
// entities.
func (b *frozenBucket) merged() (*frozenBucket, error) {
	m := &frozenBucket{byRK: map[string]int32{}}
	remap := make([]int32, len(b.entities))
	for i, e := range b.entities {
		remap[i] = -1
		if b.live(int32(i)) {
			remap[i] = int32(len(m.entities))
			m.byRK[e.rk] = remap[i]
			m.entities = append(m.entities, e)
		}
	}
	points := map[string][]frozenPoint{}
	for _, s := range b.segments {
		for key := range s.keys() {
			// A segment holds one point of a time an entity: each point's row is 0.
			err := b.pointsOf(s, key, func(ms int64, v float64, ent int32) {
				if to := remap[ent]; to >= 0 {
					points[key] = append(points[key], frozenPoint{ms: ms, value: v, ent: to})
				}
			})
			if err != nil {
				return nil, err
			}
		}
	}
	if len(points) > 0 {
		m.segments = []*frozenSegment{frozenSegmentOf(points)}
	}
	return m, nil
}

// frozenSegmentOf makes a segment of points, by series key (sorted in place).
func frozenSegmentOf(points map[string][]frozenPoint) *frozenSegment {
	s := &frozenSegment{series: map[string]frozenSeries{}, loose: map[string][]frozenPoint{}}
	var times []uint64
	var values []float64
	var ents []int32
	for _, key := range slices.Sorted(maps.Keys(points)) {
		ps := points[key]
		slices.SortStableFunc(ps, func(a, c frozenPoint) int {
			return cmp.Or(cmp.Compare(a.ms, c.ms), cmp.Compare(a.ent, c.ent), cmp.Compare(a.row, c.row))
		})
		times, values, ents = times[:0], values[:0], ents[:0]
		kept := ps[:0] // in place: each point is read before any is written over it
		loose := false
		for i, p := range ps {
			if i+1 < len(ps) && ps[i+1].ms == p.ms {
				if ps[i+1].ent == p.ent {
					continue // the later row of the entity is its last write of the time
				}
				loose = true
			}
			kept = append(kept, p)
			times, values, ents = append(times, uint64(p.ms)), append(values, p.value), append(ents, p.ent)
		}
		if loose {
			s.loose[key] = slices.Clip(kept)
			continue
		}
		if len(times) == 0 {
			continue
		}
		fs := frozenSeries{off: uint32(len(s.data))}
		s.data = chunkenc.Append(s.data, times, values)
		fs.mid = uint32(len(s.data))
		prev := int32(0)
		for _, ent := range ents {
			s.data = binary.AppendUvarint(s.data, zigzag(int64(ent-prev)))
			prev = ent
		}
		fs.end = uint32(len(s.data))
		s.series[key] = fs
	}
	s.data = fitted(s.data)
	s.size = s.cost()
	return s
}

func zigzag(v int64) uint64   { return uint64(v<<1) ^ uint64(v>>63) }
func unzigzag(u uint64) int64 { return int64(u>>1) ^ -int64(u&1) }

// keys yields the keys of s's series.
func (s *frozenSegment) keys() iter.Seq[string] {
	return func(yield func(string) bool) {
		for key := range s.series {
			if !yield(key) {
				return
			}
		}
		for key := range s.loose {
			if !yield(key) {
				return
			}
		}
	}
}

// points passes f series key's points in s, oldest first, each with its entity's place (a
// loose series' points of one time in the order of their entities).
func (s *frozenSegment) points(key string, f func(ms int64, v float64, ent int32)) error {
	fs, ok := s.series[key]
	if !ok {
		for _, p := range s.loose[key] {
			f(p.ms, p.value, p.ent)
		}
		return nil
	}
	ents := s.data[fs.mid:fs.end]
	prev := int64(0)
	var bad error
	err := chunkenc.Decode(s.data[fs.off:fs.mid], func(t uint64, v float64) {
		if bad != nil {
			return
		}
		d, n := binary.Uvarint(ents)
		if n <= 0 {
			bad = fmt.Errorf("staging: frozen series %q: its entities end before its points", key)
			return
		}
		ents = ents[n:]
		prev += unzigzag(d)
		if prev < 0 {
			bad = fmt.Errorf("staging: frozen series %q: entity %d", key, prev)
			return
		}
		f(int64(t), v, int32(prev))
	})
	if err != nil {
		return err
	}
	return bad
}

// points passes f series key's points, segment by segment (each's oldest first), each with
// its entity's place: those of places no longer live too (a take asks for live places
// only).
func (b *frozenBucket) points(key string, f func(ms int64, v float64, ent int32)) error {
	for _, s := range b.segments {
		if err := b.pointsOf(s, key, f); err != nil {
			return err
		}
	}
	return nil
}

// pointsOf is s.points of a segment of b, each point's entity a place of b's.
func (b *frozenBucket) pointsOf(s *frozenSegment, key string, f func(ms int64, v float64, ent int32)) error {
	var bad error
	err := s.points(key, func(ms int64, v float64, ent int32) {
		if int(ent) >= len(b.entities) {
			if bad == nil {
				bad = fmt.Errorf("staging: frozen series %q: entity %d of %d", key, ent, len(b.entities))
			}
			return
		}
		f(ms, v, ent)
	})
	if err != nil {
		return err
	}
	return bad
}

// frozenStore is a Cache's frozen points, by table and partition.
type frozenStore struct {
	mu      sync.Mutex
	buckets map[frozenKey]*frozenBucket
	bytes   int64
	last    time.Time // the last freeze's start
	running bool
}

// entity returns the frozen bucket that holds entity le of table at le's ETag, and its
// place there.
func (fs *frozenStore) entity(table string, le listedEntity) (*frozenBucket, int32, bool) {
	fs.mu.Lock()
	b := fs.buckets[frozenKey{table, le.pk}]
	fs.mu.Unlock()
	if b == nil {
		return nil, 0, false
	}
	i, ok := b.byRK[le.rk]
	if !ok || b.entities[i].etag != le.etag {
		return nil, 0, false
	}
	return b, i, true
}

// chunkable reports whether p's times can be held in a chunk: none before 1970.
func (p *seriesPack) chunkable() bool {
	return !slices.ContainsFunc(p.times, func(t int64) bool { return t < 0 })
}

// maybeFreeze starts a freeze (freezeHeld) if none ran for freezeEvery.
func (c *Cache) maybeFreeze() {
	fs := &c.frozen
	fs.mu.Lock()
	now := time.Now()
	if fs.running || now.Sub(fs.last) < freezeEvery {
		fs.mu.Unlock()
		return
	}
	fs.running, fs.last = true, now
	fs.mu.Unlock()
	go func() {
		defer func() {
			fs.mu.Lock()
			fs.running = false
			fs.mu.Unlock()
		}()
		c.freezeHeld()
	}()
}

// freezeHeld moves the whole float entities that the cache holds for a Fold not done yet
// (keepUnfolded) and cached freezeAfter ago into their buckets' frozen points, then drops the frozen points of the buckets no longer held, and, past
// the frozen points' share of the bound, those of the buckets that end first. An entity
// is in the frozen points before it leaves the entities cached: a take-in finds it in
// one or the other throughout.
func (c *Cache) freezeHeld() {
	type frozenFrom struct {
		key  entityKey
		etag string
	}
	groups := map[frozenKey][]frozenInput{}
	from := map[frozenKey][]frozenFrom{}
	for _, k := range c.entities.Keys() {
		h, ok := c.unfolded.Load(k.table)
		if !ok {
			continue
		}
		if !h.(tableHold).holds(k.pk) {
			continue // not held: it goes unused as any entity
		}
		e, ok := c.entities.Peek(k)
		if !ok || e.version != Version {
			continue
		}
		whole, ok := e.cols[wholeEntity]
		if !ok {
			continue
		}
		if time.Since(e.cachedAt) < freezeAfter || !whole.series.chunkable() {
			continue
		}
		stamp, seq, ok := StampOf([]byte(k.rk))
		if !ok {
			continue
		}
		fk := frozenKey{k.table, k.pk}
		pack := whole.series
		groups[fk] = append(groups[fk], frozenInput{frozenEntity: frozenEntity{rk: k.rk, etag: e.etag, stamp: stamp, seq: seq}, pack: &pack})
		from[fk] = append(from[fk], frozenFrom{k, e.etag})
	}
	fs := &c.frozen
	for fk, in := range groups {
		fs.mu.Lock()
		old := fs.buckets[fk]
		fs.mu.Unlock()
		b, err := freeze(old, in)
		if err != nil {
			continue // they stay as they are cached
		}
		if !fs.replace(fk, old, b) {
			continue
		}
		for _, f := range from[fk] {
			c.entities.RemoveIf(f.key, func(e *cachedEntity) bool { return e.etag == f.etag })
		}
	}
	// The segments of a bucket that ended freezeAfter and a freeze ago, whose entities
	// written by then are all frozen, are merged into one, once: it is held and read the
	// rest of its hold as compact as it gets (BenchmarkFreezeByMinute).
	settled := map[frozenKey]*frozenBucket{}
	fs.mu.Lock()
	for fk, b := range fs.buckets {
		if _, fresh := groups[fk]; fresh || len(b.segments) < 2 {
			continue
		}
		if h, ok := c.unfolded.Load(fk.table); ok && h.(tableHold).now().After(BucketEnd(fk.pk).Add(freezeAfter+freezeEvery)) {
			settled[fk] = b
		}
	}
	fs.mu.Unlock()
	for fk, old := range settled {
		if m, err := old.merged(); err == nil {
			fs.replace(fk, old, m)
		}
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for fk, b := range fs.buckets {
		h, ok := c.unfolded.Load(fk.table)
		if !ok || !h.(tableHold).holds(fk.pk) {
			delete(fs.buckets, fk)
			fs.bytes -= int64(b.size)
		}
	}
	for fs.bytes > c.maxBytes/frozenShare && len(fs.buckets) > 0 {
		first := slices.MinFunc(slices.Collect(maps.Keys(fs.buckets)), func(a, b frozenKey) int {
			return BucketEnd(a.pk).Compare(BucketEnd(b.pk))
		})
		fs.bytes -= int64(fs.buckets[first].size)
		delete(fs.buckets, first)
	}
}

// replace makes b (its cost reckoned) the frozen points of fk if they are still old (nil:
// none), and reports whether it did.
func (fs *frozenStore) replace(fk frozenKey, old, b *frozenBucket) bool {
	b.size = b.cost()
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.buckets[fk] != old {
		return false
	}
	if fs.buckets == nil {
		fs.buckets = map[frozenKey]*frozenBucket{}
	}
	if old != nil {
		fs.bytes -= int64(old.size)
	}
	fs.buckets[fk] = b
	fs.bytes += int64(b.size)
	return true
}

// Frozen is about the bytes the frozen points hold, and the entities they hold.
func (c *Cache) Frozen() (bytes int64, entities int) {
	fs := &c.frozen
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for _, b := range fs.buckets {
		entities += len(b.byRK)
	}
	return fs.bytes, entities
}

// take passes add the points of the series of names that b's entities at places at hold,
// as staged Points (their entity's stamp and number in its write); false if b's data is
// corrupt.
func (b *frozenBucket) take(at []int32, names []string, add func(string, Point)) bool {
	err := b.taken(at, names, func(i int, ms int64, v float64, e *frozenEntity) {
		add(names[i], Point{MS: ms, Value: v, Stamp: e.stamp, Record: Decoded{Seq: e.seq}.Record(0)})
	}, nil)
	return err == nil
}

// taken passes f the points of each series of keys (by its index in keys) that b's
// entities at places at hold, with their entity, and calls after (if not nil) after each
// series, stopping at its error.
func (b *frozenBucket) taken(at []int32, keys []string, f func(i int, ms int64, v float64, e *frozenEntity), after func() error) error {
	asked := make([]bool, len(b.entities))
	for _, i := range at {
		asked[i] = true
	}
	for i, key := range keys {
		err := b.points(key, func(ms int64, v float64, ent int32) {
			if asked[ent] {
				f(i, ms, v, &b.entities[ent])
			}
		})
		if err != nil {
			return err
		}
		if after != nil {
			if err := after(); err != nil {
				return err
			}
		}
	}
	return nil
}

// takeFrozen takes, of the listed entities got found frozen, the points of the read's
// series (keys, by slot) as the series index takes those of the others (take, held), and
// returns the other entities of listed and got.
func takeFrozen(listed []listedEntity, got []entityColumns, keys []string, take takeFunc, held func() error) ([]listedEntity, []entityColumns, error) {
	if !slices.ContainsFunc(got, func(e entityColumns) bool { return e.frozen != nil }) {
		return listed, got, nil // none: nothing to copy (a refresh's entities are the newest)
	}
	byBucket := map[*frozenBucket][]int32{}
	var restListed []listedEntity
	var restGot []entityColumns
	for i := range got {
		if got[i].frozen == nil {
			restListed, restGot = append(restListed, listed[i]), append(restGot, got[i])
			continue
		}
		byBucket[got[i].frozen] = append(byBucket[got[i].frozen], got[i].at)
	}
	times, values := make([]int64, 1), make([]float64, 1) // take copies what it keeps
	points := 0
	for b, at := range byBucket {
		var heldErr error
		err := b.taken(at, keys, func(slot int, ms int64, v float64, e *frozenEntity) {
			times[0], values[0] = ms, v
			take(int32(slot), e.stamp, Decoded{Seq: e.seq}.Record(0), times, values)
			points++
		}, func() error {
			if points < heldRecords {
				return nil
			}
			points = 0
			heldErr = held()
			return heldErr
		})
		if heldErr != nil {
			return nil, nil, heldErr
		}
		if err != nil {
			return nil, nil, fmt.Errorf("tsdb: read staging: %w", err)
		}
	}
	if err := held(); err != nil {
		return nil, nil, err
	}
	return restListed, restGot, nil
}
