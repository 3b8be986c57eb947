package staging

import (
	"cmp"
	"slices"
	"strings"
	"sync"
	"time"
	"unique"
	"unsafe"
)

// seriesIndex is, for a Table with a cache, where each float series is among the whole
// float entities its reads took from the cache: by series key, its records (the entity's
// pack, the record's place in it). A staging entity holds a point of each of the thousands
// of series of a scrape, so that a read that assembled its series from every entity it
// listed looked at every series of every entity: in the soak (18,746 series a tenant), a
// Select of 5,000 series read the staging in five groups, and each looked up the 750,000
// staged records of the tenant's last ten minutes to take the 200,000 of its own (the
// staging read's most of its CPU, which grew with the staging bucket until the fold).
// Through the index, a read looks at the records of its own series only, as Prometheus'
// head keeps each series' samples apart.
//
// The index is derived from the cache and never the last word: a read takes through it
// only the packs of the entities it listed at their ETag and got from the cache (or
// fetched) itself, each pack by its identity (the array of its keys, which a cached entry
// never changes); what the index says of other packs is not read. A pack enters the index
// the first time a read gets it, and leaves once the cache no longer holds it (prune: when
// the index has twice the packs the last prune kept, and at least every pruneEvery). Its
// cost is counted with the cached entity's (indexRefBytes a record), under the cache's
// bound.
type seriesIndex struct {
	cache *Cache
	table string
	now   func() time.Time

	mu     sync.RWMutex
	packs  []indexedPack                    // by number
	number map[*unique.Handle[string]]int32 // a pack's number, by its keys' array
	refs   map[string][]packRef             // each series' records, in the order indexed
	live   int                              // packs the last prune kept
	pruned time.Time                        // when (now)
}

// indexedPack is a pack of the index: its entity, and its series.
type indexedPack struct {
	key  entityKey
	pack seriesPack
}

// packRef is a record of a series: its pack's number, and its place in the pack.
type packRef struct {
	pack, i int32
}

// indexRefBytes is about what a record costs the index: a packRef, and the slack of the
// slices it is appended to.
const indexRefBytes = 12

// prunePacks is how many packs the index holds at least before it prunes those the cache
// no longer holds: it prunes once it holds twice as many as the last prune kept, and more.
const prunePacks = 256

// pruneEvery is how often at least the index prunes: a Table that reads no new entity
// (nothing written, or a fold moved them all) adds none.
const pruneEvery = time.Minute

func newSeriesIndex(cache *Cache, table string, now func() time.Time) *seriesIndex {
	return &seriesIndex{cache: cache, table: table, now: now, pruned: now(),
		number: map[*unique.Handle[string]]int32{}, refs: map[string][]packRef{}}
}

// packID is a pack's identity: the array of its keys (nil for a pack of no series).
func packID(p *seriesPack) *unique.Handle[string] { return unsafe.SliceData(p.keys) }

// takeFunc takes the points of a series record a read collects: its slot in the read, its
// entity's Stamp, and its Record (Decoded.Record).
type takeFunc func(slot int32, stamp uint64, record int, times []int64, values []float64)

// take takes, of the listed entities whose got columns are a whole float entity, the records
// of the series keys names (by slot), through the index, and returns the places in listed
// of those it did not take (to assemble). An entity whose RowKey holds no stamp is left
// out, as assemble leaves it. It calls held every heldRecords records or so, and at the
// end (where the read holds what it took under its budget), and stops at its error.
//
// With stop (a read of each series' latest point: seriesSlots.covers), it takes the
// entities newest first, by U, and takes none after the first that stop says can hold
// nothing the read keeps.
func (x *seriesIndex) take(listed []listedEntity, got []entityColumns, keys []string, take takeFunc, held func() error,
	stop func(last string) bool) (rest []int, err error) {
	ids := make([]*unique.Handle[string], len(listed))
	stamps := make([]uint64, len(listed))
	seqs := make([]int, len(listed))
	var missing []int // listed entities whose pack is not indexed yet
	x.mu.RLock()
	for i, le := range listed {
		ec := got[i]
		if ec.cols == nil {
			continue // gone: the Fold deleted it after the listing
		}
		if !ec.whole || ec.version != Version {
			rest = append(rest, i)
			continue
		}
		stamp, seq, ok := StampOf([]byte(le.rk))
		pack := &ec.cols[0].series
		if !ok || pack.len() == 0 {
			continue
		}
		ids[i], stamps[i], seqs[i] = packID(pack), stamp, seq
		if _, ok := x.number[ids[i]]; !ok {
			missing = append(missing, i)
		}
	}
	due := len(x.packs) > 0 && x.now().Sub(x.pruned) >= pruneEvery
	x.mu.RUnlock()
	if len(missing) > 0 || due {
		x.add(listed, got, missing)
	}

	x.mu.RLock()
	// Those not held were pruned since they were added (the cache dropped or replaced their
	// entries meanwhile): assembled.
	read, pruned := x.places(ids) // by pack number: its place in listed, -1 if none
	rest = append(rest, pruned...)
	// A series' records are in the order of their packs' numbers (add appends, prune keeps
	// the order): those of packs before the read's first are left out at once. A refresh
	// reads the newest few of the packs the index holds (in up-by-job-now's, 20 of 120:
	// looking at every record was a sixth of its staged read).
	first := slices.IndexFunc(read, func(place int32) bool { return place >= 0 })
	records := make([][]packRef, len(keys))
	for slot, key := range keys {
		refs := x.refs[key]
		if first > 0 {
			i, _ := slices.BinarySearchFunc(refs, int32(first), func(r packRef, n int32) int { return cmp.Compare(r.pack, n) })
			refs = refs[i:]
		}
		records[slot] = refs
	}
	// The slices taken are read after the lock: the index only appends to them past their
	// length, or makes new ones (prune).
	x.mu.RUnlock()

	// The records are taken entity by entity, in the order listed: a series' records are
	// each in another entity's arrays, and reading them series by series missed the
	// processor's cache at every point (in the soak's profile, 3.7 s of a minute stalled on
	// the first comparison of each point).
	sc := takeScratchPool.Get().(*takeScratch)
	defer takeScratchPool.Put(sc)
	starts := append(sc.starts[:0], make([]int32, len(listed)+1)...)
	for _, rs := range records {
		for _, r := range rs {
			if int(r.pack) < len(read) && read[r.pack] >= 0 { // else a pack indexed since, or not this read's
				starts[read[r.pack]+1]++
			}
		}
	}
	for i := 1; i < len(starts); i++ {
		starts[i] += starts[i-1]
	}
	n := int(starts[len(listed)])
	byEntity := slices.Grow(sc.records[:0], n)[:n]
	next := append(sc.next[:0], starts[:len(listed)]...)
	for slot, rs := range records {
		for _, r := range rs {
			if int(r.pack) < len(read) && read[r.pack] >= 0 {
				i := read[r.pack]
				byEntity[next[i]] = slotRecord{slot: int32(slot), i: r.i}
				next[i]++
			}
		}
	}
	sc.starts, sc.next, sc.records = starts, next, byEntity
	order := sc.order[:0] // the entities with records, in the order taken
	for i := range listed {
		if starts[i] < starts[i+1] { // else none of the read's series, or not taken through the index
			order = append(order, int32(i))
		}
	}
	if stop != nil {
		slices.SortFunc(order, func(a, b int32) int { return strings.Compare(listed[b].last, listed[a].last) })
	}
	sc.order = order
	taken := 0
	for _, i := range order {
		if stop != nil && stop(listed[i].last) {
			break // and every entity after: their points are earlier still
		}
		pack := &got[i].cols[0].series
		for _, sr := range byEntity[starts[i]:starts[i+1]] {
			times, values := pack.points(int(sr.i))
			take(sr.slot, stamps[i], seqs[i]<<20|int(sr.i), times, values)
		}
		if taken += int(starts[i+1] - starts[i]); taken >= heldRecords {
			taken = 0
			if err := held(); err != nil {
				return nil, err
			}
		}
	}
	if err := held(); err != nil {
		return nil, err
	}
	slices.Sort(rest)
	return rest, nil
}

// places returns, by pack number, the place in ids of each pack the index holds (-1: none
// of ids), and the places in ids of the packs it does not hold (a nil id is neither): x.mu
// is held.
func (x *seriesIndex) places(ids []*unique.Handle[string]) (place []int32, missing []int) {
	place = make([]int32, len(x.packs))
	for n := range place {
		place[n] = -1
	}
	for i, id := range ids {
		if id == nil {
			continue
		}
		n, ok := x.number[id]
		if !ok {
			missing = append(missing, i)
			continue
		}
		place[n] = int32(i)
	}
	return place, missing
}

// heldRecords is how many records take takes at most before it calls held.
const heldRecords = 1024

// slotRecord is a record a read takes: its series' slot, and its place in its pack.
type slotRecord struct {
	slot, i int32
}

// takeScratch is what take orders a read's records in, reused from read to read.
type takeScratch struct {
	starts, next, order []int32
	records             []slotRecord
}

var takeScratchPool = sync.Pool{New: func() any { return new(takeScratch) }}

// add indexes the packs of the listed entities at missing (those of got that are not yet),
// and prunes when due.
func (x *seriesIndex) add(listed []listedEntity, got []entityColumns, missing []int) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, i := range missing {
		pack := got[i].cols[0].series
		id := packID(&pack)
		if _, ok := x.number[id]; ok {
			continue // indexed by another read meanwhile
		}
		n := int32(len(x.packs))
		x.packs = append(x.packs, indexedPack{key: entityKey{x.table, listed[i].pk, listed[i].rk}, pack: pack})
		x.number[id] = n
		for j, h := range pack.keys {
			key := h.Value()
			x.refs[key] = append(x.refs[key], packRef{pack: n, i: int32(j)})
		}
	}
	if len(x.packs) >= max(2*x.live, prunePacks) || x.now().Sub(x.pruned) >= pruneEvery {
		x.prune()
	}
}

// prune drops the packs the cache no longer holds (evicted, or replaced by another read's
// decoding of the same entity), renumbering the others: x.mu is held. It makes new slices
// of records (a read may still hold the old ones).
func (x *seriesIndex) prune() {
	renumber := make([]int32, len(x.packs))
	var packs []indexedPack
	number := make(map[*unique.Handle[string]]int32, len(x.packs))
	for n, p := range x.packs {
		renumber[n] = -1
		if !x.cache.holds(p.key, &p.pack) {
			continue
		}
		renumber[n] = int32(len(packs))
		number[packID(&p.pack)] = int32(len(packs))
		packs = append(packs, p)
	}
	refs := make(map[string][]packRef, len(x.refs))
	for key, rs := range x.refs {
		var kept []packRef
		for _, r := range rs {
			if n := renumber[r.pack]; n >= 0 {
				kept = append(kept, packRef{pack: n, i: r.i})
			}
		}
		if len(kept) > 0 {
			refs[key] = kept
		}
	}
	x.packs, x.number, x.refs, x.live, x.pruned = packs, number, refs, len(packs), x.now()
}

// holds reports whether the cache holds pack as its entity key's whole float entity,
// without counting it as used.
func (c *Cache) holds(key entityKey, pack *seriesPack) bool {
	e, ok := c.entities.Peek(key)
	if !ok {
		return false
	}
	whole, ok := e.cols[wholeEntity]
	return ok && packID(&whole.series) == packID(pack)
}

// eachRecord calls f with the records of the series keys names in packs (by place: a whole
// float entity's pack, or nil), as the index holds them: each record's place in packs and
// its row in the pack. It returns the places of the packs the index does not hold (not
// yet taken by a read, or pruned): their records are not given. It is how a raw cache's
// take-in of a Fold (FoldedFloats) finds its series' points among the thousands of every
// entity the Fold moved without looking at each of them (the soak's take-in of another
// server's Fold looked up 412,500 records a batch of 64 series, for 1,408 of its own).
func (x *seriesIndex) eachRecord(packs []*seriesPack, keys []string, f func(place int, row int)) (unindexed []int) {
	ids := make([]*unique.Handle[string], len(packs))
	for i, p := range packs {
		if p != nil {
			ids[i] = packID(p)
		}
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	place, unindexed := x.places(ids) // by pack number: its place in packs, -1 if none
	for _, key := range keys {
		for _, r := range x.refs[key] {
			if int(r.pack) < len(place) && place[r.pack] >= 0 {
				f(int(place[r.pack]), int(r.i))
			}
		}
	}
	return unindexed
}
