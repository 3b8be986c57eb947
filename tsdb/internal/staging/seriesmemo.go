package staging

import (
	"cmp"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed71701133/tablets/tsdb/internal/cache"
)

// A refreshed panel reads the staged points of the same series at every refresh, of a
// range that moves on by the refresh's interval, and while samples arrive, the staging
// table holds a few entities more each time. Read by read, the cache's entities (or frozen
// points) gave each point again: an hour of 1,200 series staged (the Folds run hourly) was
// 288,000 points taken, sorted by series and resolved (LastWrites) at every refresh, 21 ms
// of CPU where Prometheus answers the whole query in 18 (BenchmarkDashboardIngesting,
// requests-1h-now).
//
// So the Cache keeps, by the series a read asks for, a seriesMemo: each series' staged
// points from the earliest start of the reads it served on (the last write of each
// millisecond, sorted), and the entities (PartitionKey, RowKey, ETag) they are of. A read of
// the same series then takes the points of the entities its listing has that the memo
// lacks, and the memo's for the rest: an entity never changes at its ETag. The memo holds
// only while the listing still has every entity of it that may hold one of its points, at
// its ETag (a Fold or a Delete by any process changes or removes some, and the read takes
// every entity again), while the read starts no earlier than the memo, and while no raw
// period its points are in was dropped since. Its points come from the same entities as a
// read without it, so the answers are the same.
//
// Memos share the Cache's bound: they may take what the entities cached leave of it but the
// frozen points' share, and always an eighth of it (memoShare: the entities take at most
// the rest); past that the memo used least recently goes (when a read keeps one, and when
// the entities cached grow: Cache.add), and one
// unused for cache.Idle goes at the next read after (between Idle and twice Idle), as the
// cache's entries do. A read finds a memo in use by another read (of the same series, at
// once) and reads as if there were none: reads never wait for each other here.

// memoWindow is how long a read's start keeps the memo's points from there (between one
// and two windows): the panels of a dashboard that read the same series over ranges of
// different lengths are refreshed together, every few seconds to a minute, and once the
// longer one is no longer read, the memo holds the shorter one's points only.
const memoWindow = 2 * time.Minute

// memoShare is the share of the cache's bound the memos may always take (1/memoShare), the
// entities cached taking at most the rest but the frozen points' share. The memos of a
// server's dashboards are the points of many panels' series (in the soak, 2 to 3 MB each,
// 15 to 20 filled an eighth of 384 MiB and more than half the reads missed), where the
// entities cached took a seventh of their share: the memos may take what they leave.
const memoShare = 8

// memoMinSeries is how many series a read asks for at least to keep a memo of them: the
// reads that cost are those of many series (a panel's Select takes its staged points for
// up to 1,024 series together, stagedGroupUnits); small ones would fill the memos.
const memoMinSeries = 128

// seriesMemos are a Cache's memos, by their series. Safe for concurrent use.
type seriesMemos struct {
	max int64 // what they may always take
	// room is what they may take now (Cache: the bound less the frozen points' share and
	// the entities cached), at least max; nil: max.
	room         func() int64
	hits, misses atomic.Uint64
	now          func() time.Time

	mu    sync.Mutex
	bytes int64
	tick  uint64
	byKey map[string]*seriesMemo
	swept time.Time // when the memos unused for cache.Idle were last dropped
}

// seriesMemo is the staged points of a read's series (its slots' keys, in slot order) from
// a time on, and the entities they are of.
type seriesMemo struct {
	memos *seriesMemos
	key   string
	mu    sync.Mutex // held by the read that uses it (TryLock: another reads without it)

	// Guarded by mu.
	kept bool  // filled by a read (else empty)
	from int64 // the points of milliseconds before are not kept
	// The earliest start of the reads of the current window of memoWindow (since
	// windowAt) and of the one before: the memo keeps the points from the earlier.
	starts   [2]int64
	windowAt time.Time
	entities map[[2]string]memoEntity // by PartitionKey and RowKey
	points   [][]Point                // by slot: the last write of each millisecond, sorted
	lo, hi   int64                    // the earliest and latest millisecond of the points
	// What the read under way found (pick) and keeps once it took the rest (keep).
	pending      map[[2]string]memoEntity
	pendingValid bool // the memo's points stand: the read took only the entities it lacked

	// Guarded by memos.mu.
	used   uint64
	usedAt time.Time
	bytes  int64
}

// memoEntity is what a memo keeps of an entity: its ETag, and its U (TimeKey of its last
// float point: whether it may hold a point of a range; "" where not known).
type memoEntity struct{ etag, last string }

func newSeriesMemos(maxBytes int64) *seriesMemos {
	return &seriesMemos{max: maxBytes, byKey: map[string]*seriesMemo{}, now: time.Now}
}

// memoKey is the key of a read of keys (in slot order): each key with its length.
func memoKey(keys []string) string {
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(strconv.Itoa(len(k)))
		b.WriteByte(':')
		b.WriteString(k)
	}
	return b.String()
}

// acquire returns the memo of keys, locked for the caller (who unlocks it), made empty if
// there is none; nil if another read holds it.
func (ms *seriesMemos) acquire(keys []string) *seriesMemo {
	key := memoKey(keys)
	ms.mu.Lock()
	now := ms.now()
	if now.Sub(ms.swept) >= cache.Idle {
		// As the cache's entries go, those unused for cache.Idle go, whatever the bound.
		ms.swept = now
		for k, o := range ms.byKey {
			if now.Sub(o.usedAt) >= cache.Idle {
				delete(ms.byKey, k)
				ms.bytes -= o.bytes
			}
		}
	}
	m, ok := ms.byKey[key]
	if !ok {
		m = &seriesMemo{memos: ms, key: key}
		ms.byKey[key] = m
	}
	ms.tick++
	m.used, m.usedAt = ms.tick, now
	ms.mu.Unlock()
	if !m.mu.TryLock() {
		return nil
	}
	m.pending = nil // of a read that failed
	return m
}

// resize sets m's bytes, and drops the memos used least recently (m last) while the memos
// hold more than their bound.
func (ms *seriesMemos) resize(m *seriesMemo, bytes int64) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if ms.byKey[m.key] != m {
		return // dropped meanwhile: its points go with the read
	}
	ms.bytes += bytes - m.bytes
	m.bytes = bytes
	ms.trimLocked()
}

// trim drops the memos used least recently while they hold more than they may take now
// (the entities cached grew).
func (ms *seriesMemos) trim() {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if ms.bytes > ms.max {
		ms.trimLocked()
	}
}

// limit is what the memos may take now: max, or room when more. ms.mu is held.
func (ms *seriesMemos) limit() int64 {
	if ms.room == nil {
		return ms.max
	}
	return max(ms.max, ms.room())
}

// trimLocked drops the memos used least recently while they hold more than limit. ms.mu
// is held.
func (ms *seriesMemos) trimLocked() {
	limit := ms.limit()
	for ms.bytes > limit && len(ms.byKey) > 0 {
		var oldest *seriesMemo
		for _, o := range ms.byKey {
			if oldest == nil || o.used < oldest.used {
				oldest = o
			}
		}
		delete(ms.byKey, oldest.key)
		ms.bytes -= oldest.bytes
	}
}

// stats are the memos' counts: Hits are reads that took some points from a memo, Misses
// those that took every entity (none kept yet, or the memo no longer held).
func (ms *seriesMemos) stats() cache.Stats {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	return cache.Stats{Hits: ms.hits.Load(), Misses: ms.misses.Load(), Entries: len(ms.byKey), Bytes: ms.bytes}
}

// start is the first millisecond a read of [from, ...) takes points of, and lists the
// entities of, with the memo: the memo's start, if it holds points from earlier (a longer
// panel's read lately).
func (m *seriesMemo) start(from int64) int64 {
	if m.kept && m.from < from {
		return m.from
	}
	return from
}

// pick is the entities of listed that a read of [from, ...) takes with the memo (before it
// fetches any): those it lacks, or all when it does not hold (see seriesMemo); listed are
// those of [start(from), ...). droppedIn says whether a raw period holding a millisecond
// of [lo, hi] is known dropped. It notes what the memo keeps once the read took them
// (keep). An entity the memo holds is not fetched, though the Fold may have deleted it
// since the listing: the read is of the table as listed (a read that fetched it would take
// its points in the raw tables then, the same).
//
// A memo holds the points from the earliest start of the reads it served lately (keep,
// memoWindow), so that reads of one series over ranges of different lengths (a dashboard's
// 1-hour and 7-day panels of the same metric, their first loads and their refreshes of the
// last steps) share it instead of making it anew in turn.
func (m *seriesMemo) pick(from int64, droppedIn func(lo, hi int64) bool, listed []listedEntity) []listedEntity {
	valid := m.kept && from >= m.from
	if valid && m.lo <= m.hi && droppedIn(m.lo, m.hi) {
		valid = false // Retain dropped a period since: its points are no longer staged ones
	}
	if valid {
		// Every entity kept whose points may reach the memo's start is listed, at its
		// ETag. (One of a table's first read, which fetched every entity without listing
		// it, has no U: it may.)
		fromKey := TimeKey(m.from)
		need, seen := 0, 0
		for _, e := range m.entities {
			if e.last == "" || e.last >= fromKey {
				need++
			}
		}
		for _, le := range listed {
			e, ok := m.entities[[2]string{le.pk, le.rk}]
			if !ok {
				continue
			}
			if e.etag != le.etag {
				valid = false
				break
			}
			seen++
		}
		valid = valid && seen == need
	}
	m.pending, m.pendingValid = make(map[[2]string]memoEntity, len(listed)), valid
	var picked []listedEntity
	for _, le := range listed {
		k := [2]string{le.pk, le.rk}
		m.pending[k] = memoEntity{le.etag, le.last}
		if valid {
			if _, ok := m.entities[k]; ok {
				continue
			}
		}
		picked = append(picked, le)
	}
	if valid {
		m.memos.hits.Add(1)
	} else {
		m.memos.misses.Add(1)
	}
	return picked
}

// keep takes into the memo the points a read of [from, ...) took of the entities pick gave
// it (taken, by slot, in any order), and returns each slot's points in [from, to) (of
// milliseconds): read-only slices of the memo's.
func (m *seriesMemo) keep(from, to int64, slots int, taken func(slot int) []Point) [][]Point {
	// The read took (and the memo holds) the points from start(from) on; the memo keeps
	// them from the earliest start of the reads of the last window or two.
	now := m.memos.now()
	switch since := now.Sub(m.windowAt); {
	case since >= 2*memoWindow:
		m.starts, m.windowAt = [2]int64{math.MaxInt64, math.MaxInt64}, now
	case since >= memoWindow:
		m.starts, m.windowAt = [2]int64{math.MaxInt64, m.starts[0]}, now
	}
	m.starts[0] = min(m.starts[0], from)
	start := max(m.start(from), min(m.starts[0], m.starts[1]))
	if !m.pendingValid || len(m.points) != slots {
		m.points = make([][]Point, slots)
	}
	size := int64(0)
	m.lo, m.hi = math.MaxInt64, math.MinInt64
	out := make([][]Point, slots)
	for slot := range slots {
		kept := m.points[slot]
		kept = kept[sortedFrom(kept, start):]
		kept = mergeLastWrites(kept, taken(slot))
		m.points[slot] = kept
		size += int64(cap(kept)) * PointBytes
		if len(kept) > 0 {
			m.lo, m.hi = min(m.lo, kept[0].MS), max(m.hi, kept[len(kept)-1].MS)
		}
		lo, hi := sortedFrom(kept, from), sortedFrom(kept, to)
		out[slot] = kept[lo:hi:hi]
	}
	m.kept, m.from, m.entities = true, start, m.pending
	m.pending = nil
	m.memos.resize(m, size+int64(len(m.entities))*memoEntityBytes)
	return out
}

// memoEntityBytes is about what a memo takes an entity (its keys and ETag).
const memoEntityBytes = 200

// sortedFrom is the index of the first of pts (sorted by MS) at or after ms.
func sortedFrom(pts []Point, ms int64) int {
	i, _ := slices.BinarySearchFunc(pts, ms, func(p Point, ms int64) int { return cmp.Compare(p.MS, ms) })
	return i
}

// mergeLastWrites merges writes (any order) into kept (the last write of each millisecond,
// sorted), keeping of each millisecond the last write (LastWrites: the higher Stamp, then
// Record). Writes all after kept are appended to it (in place: the memo's slices are only
// appended to past every slice given out); others make a new slice.
func mergeLastWrites(kept, writes []Point) []Point {
	if len(writes) == 0 {
		return kept
	}
	slices.SortFunc(writes, func(a, b Point) int {
		return cmp.Or(cmp.Compare(a.MS, b.MS), cmp.Compare(a.Stamp, b.Stamp), cmp.Compare(a.Record, b.Record))
	})
	last := writes[:0] // of each millisecond, the last write (in place)
	for i, w := range writes {
		if i+1 < len(writes) && writes[i+1].MS == w.MS {
			continue
		}
		last = append(last, w)
	}
	if len(kept) == 0 || last[0].MS > kept[len(kept)-1].MS {
		return append(kept, last...)
	}
	out := make([]Point, 0, len(kept)+len(last))
	i, j := 0, 0
	for i < len(kept) && j < len(last) {
		a, b := kept[i], last[j]
		switch {
		case a.MS < b.MS:
			out = append(out, a)
			i++
		case b.MS < a.MS:
			out = append(out, b)
			j++
		default: // one millisecond: the later write
			if cmp.Or(cmp.Compare(a.Stamp, b.Stamp), cmp.Compare(a.Record, b.Record)) > 0 {
				out = append(out, a)
			} else {
				out = append(out, b)
			}
			i++
			j++
		}
	}
	out = append(out, kept[i:]...)
	return append(out, last[j:]...)
}
