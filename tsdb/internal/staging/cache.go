package staging

import (
	"context"
	"encoding/base64"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unique"
	"unsafe"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/filter"
	"github.com/seed71701133/tablets/internal/pager"
	"github.com/seed71701133/tablets/internal/stageenc"
	"github.com/seed71701133/tablets/tsdb/internal/azerr"
	"github.com/seed71701133/tablets/tsdb/internal/cache"
)

// Cache keeps the columns of staging entities that queries decoded, by table, entity key
// and ETag, so that a query reads again only what changed since: a refreshed panel lists
// the keys and ETags of the entities its range overlaps (a few hundred bytes an entity),
// takes the columns it knows from the cache, and fetches the others, the new entities'
// (one query a partition that has any).
//
// A staging entity is written once by the transaction of its write, rewritten only by a
// Delete of some of its samples (a new ETag), and deleted by the Fold: the listing is read
// from the account at every query, so a column is used only while its entity still stands
// with the ETag it was decoded at, whichever process changed it. A cached column is never
// the last word: the account is.
//
// A Table also caches the entities its own transactions wrote, as written, at the ETags of
// their replies (cacheWritten): a process that ingests a series answers its last minutes
// without fetching them.
//
// An entry is an entity (one lookup an entity of a read, whatever columns it asks for: a
// read of a hundred series of many entities looked up each column of each once, the
// rules' scale's most of its time): the columns decoded so far, and its columns as read
// when it was fetched whole. An entry does not change once cached: a read that decodes
// more columns of it caches a new entry in its place, with them all.
//
// A Cache may be shared by the Tables of many databases (a server's tenants); it is bounded
// by the bytes of the columns it holds (two generations of cache.Gen: what a generation
// does not use goes). Safe for concurrent use.
type Cache struct {
	counts   cache.Counts
	entities *cache.Gen[entityKey, *cachedEntity]
	maxBytes int64
	// shared counts the fetches under way that another read waited for (flights.go).
	shared atomic.Int64

	mu      sync.Mutex
	fetches map[[2]string]*fetchFlight // the fetches under way, by table and PartitionKey

	// unfolded holds, by table, how long after its arrival bucket's end an entity stays
	// cached unused (a tableHold: its Table's registration, keepUnfolded).
	unfolded sync.Map
	// frozen are the points of the entities held for the Folds, frozen (frozen.go).
	frozen frozenStore
	// memos are the staged points of the reads of many series (seriesmemo.go).
	memos *seriesMemos
}

// tableHold is how long a table's entities stay cached unused after their bucket's end,
// by its database's clock, and the buckets its last listing still found entities of
// (listed: their starts in Unix seconds, sorted; nil while none is known).
type tableHold struct {
	hold   time.Duration
	now    func() time.Time
	listed *atomic.Pointer[[]uint64]
}

// keepUnfolded makes the entities of table stay cached, however long unused, until hold
// after their arrival bucket's end by now (its database's clock): the Fold of the bucket
// is due by then, and every process's raw cache takes the Fold in from the entities it
// moved (FoldedFloats) only while it holds every one of them. Idle, they went between 5
// and 10 minutes after a query last read them (cache.Idle), and a refreshed panel reads
// only its newest minutes (the results cache keeps the rest): in the soak, with three
// servers, whole Selects of 1,339 to 18,746 series read the folded minutes back from the
// raw table after each Fold, the entities of its bucket's first minutes gone from their
// caches (docs/soak.md, runs 132 and 133). The bound of the cache's bytes drops them as
// any entry.
//
// A Fold may also come after its hold (one cut off by an outage and done again a tick
// later, or one paced out by a busy account): the entities of the buckets the table's last
// listing still found (listed, Table.noteListed) stay cached too, frozen or as they are,
// until a listing after the Fold no longer finds their bucket. Dropped before the Fold, they
// leave every process but the Fold's unable to take it in (its receipt names entities no
// longer held), and each reads the Fold's minutes of every series back from the raw
// tables (soak run 158: after the outage, two servers missed a Fold's receipt for all of a
// tenant's series, and Azurite was saturated for minutes; a Fold late past its hold is one
// way to miss it).
func (c *Cache) keepUnfolded(table string, hold time.Duration, now func() time.Time, listed *atomic.Pointer[[]uint64]) {
	c.unfolded.Store(table, tableHold{hold: hold, now: now, listed: listed})
}

// kept reports whether entity k stays cached though unused: its bucket's fold is not due
// yet, or its bucket is not folded yet as far as the table's last listing knows
// (keepUnfolded).
func (c *Cache) kept(k entityKey, _ *cachedEntity) bool {
	v, ok := c.unfolded.Load(k.table)
	return ok && v.(tableHold).holds(k.pk)
}

// holds reports whether the table's entities of partition pk stay cached unused (frozen, or
// as they are): their bucket's Fold is not due yet, or the last listing still found the
// bucket.
func (h tableHold) holds(pk string) bool {
	end := BucketEnd(pk)
	if end == tablets.MaxTime {
		return false
	}
	if h.now().Before(end.Add(h.hold)) {
		return true
	}
	if h.listed == nil {
		return false
	}
	buckets := h.listed.Load()
	if buckets == nil {
		return false
	}
	_, found := slices.BinarySearch(*buckets, uint64(end.Add(-Bucket).Unix()))
	return found
}

// Shared is how many times a read waited for another's fetch under way (of a partition's
// entities, or of every entity of a cold table) instead of fetching the same itself.
func (c *Cache) Shared() int64 { return c.shared.Load() }

// NewCache returns a cache of at most about maxBytes of decoded columns (at least 1 MiB),
// an eighth of them for the frozen points of the entities held for the Folds (frozen.go),
// and for the memos of reads of many series (seriesmemo.go) an eighth and what the
// entities cached leave.
func NewCache(maxBytes int64) *Cache {
	maxBytes = max(maxBytes, 1<<20)
	c := &Cache{entities: cache.NewIdle(int(maxBytes-maxBytes/frozenShare-maxBytes/memoShare), entityCost, cache.Idle), maxBytes: maxBytes,
		memos: newSeriesMemos(maxBytes / memoShare)}
	c.memos.room = func() int64 { return maxBytes - maxBytes/frozenShare - int64(c.entities.Size()) }
	c.entities.KeepIdle(c.kept)
	return c
}

// Stats returns the cache's counts: Hits are columns of entities found at their ETag,
// Misses those fetched; Entries are entities.
func (c *Cache) Stats() cache.Stats {
	s := cache.StatsOf(&c.counts, c.entities)
	frozen, entities := c.Frozen()
	memos := c.memos.stats()
	s.Bytes += frozen + memos.Bytes
	s.Entries += entities
	return s
}

// Memos returns the counts of the memos of reads of many series (in Stats' Bytes too):
// Hits are reads that took points from a memo (and of the entities it lacked only),
// Misses reads that kept a memo anew (the first of their series, or after a Fold, a Delete
// or a Retain changed what it kept); Entries are memos.
func (c *Cache) Memos() cache.Stats { return c.memos.stats() }

// entityKey names an entity of a staging table.
type entityKey struct {
	table, pk, rk string
}

// wholeEntity is the column of an entity that holds every column of it, decoded (a read of
// every series).
const wholeEntity = -1

// wholeAfter is how many reads fetched columns of an entity before the next fetches it whole
// (its columns kept as read, a few bytes a sample, and decoded when a read asks for one):
// reads of one series each (a remote read right after a burst) would otherwise each pay the
// overhead of every entity of the burst (its keys and ETag, a couple of hundred bytes) to
// read one column of it. The entities of one read are fetched whole only while their
// points' bytes (encodedPointBytes a point) fit in a quarter of the cache.
const wholeAfter = 3

// encodedPointBytes is about what a point of a staging column takes, as read.
const encodedPointBytes = 4

// cachedEntity is what the cache holds of an entity at its ETag: the columns decoded, by
// column (wholeEntity: every column's series together), and, for an entity fetched whole,
// every column as read (encoded). Never changed once cached.
type cachedEntity struct {
	etag    string
	version int
	cols    map[int]cachedColumn
	encoded map[int][]byte
	// cachedAt is when the entry was cached: a held entity is frozen freezeAfter later
	// (frozen.go).
	cachedAt time.Time
}

// cachedColumn is one column of an entity as decoded: empty when the entity has no such
// column.
type cachedColumn struct {
	series seriesPack
	hists  []stageenc.HistSeries
}

func (c cachedColumn) cost() int {
	n := int(unsafe.Sizeof(c)) + 16 + c.series.cost()
	for _, s := range c.hists {
		n += int(unsafe.Sizeof(s)) + len(s.Key) + len(s.Samples)*int(HistBytes)
	}
	return n
}

func entityCost(k entityKey, e *cachedEntity) int {
	n := int(unsafe.Sizeof(k)+unsafe.Sizeof(*e)) + len(k.table) + len(k.pk) + len(k.rk) + len(e.etag) + 64
	for col, c := range e.cols {
		n += c.cost()
		if col == wholeEntity && e.version == Version {
			n += indexRefBytes * c.series.len() // its records in the Table's seriesIndex
		}
	}
	for _, b := range e.encoded {
		n += 48 + cap(b)
	}
	return n
}

// columns returns e's columns keys, in their order, decoding from the columns as read
// those not decoded yet (decoded says which, to cache); ok is false when e lacks some.
func (e *cachedEntity) columns(keys []int) (cols []cachedColumn, decoded map[int]cachedColumn, ok bool) {
	cols = make([]cachedColumn, len(keys))
	for i, c := range keys {
		col, ok := e.cols[c]
		if !ok && c != wholeEntity {
			// From the whole entity decoded, which a wide read cached in place of the rest.
			if whole, has := e.cols[wholeEntity]; has {
				cols[i] = whole.column(c)
				continue
			}
		}
		if !ok {
			if e.encoded == nil {
				return nil, nil, false
			}
			var err error
			if c == wholeEntity {
				col, err = e.decodeAll()
			} else {
				col, err = e.decode(c)
			}
			if err != nil {
				return nil, nil, false // fetched again, and its error said then
			}
			if decoded == nil {
				decoded = map[int]cachedColumn{}
			}
			decoded[c] = col
		}
		cols[i] = col
	}
	return cols, decoded, true
}

// column is column c of a whole entity's columns (the wholeEntity column): its series
// whose key's hash puts them there, copied.
func (c cachedColumn) column(col int) cachedColumn {
	var out cachedColumn
	var series []stageenc.Series
	for i := range c.series.len() {
		if c.series.column(i) == col {
			series = append(series, c.series.at(i))
		}
	}
	if len(series) > 0 {
		out.series = packSeries(series)
	}
	for _, h := range c.hists {
		if _, hc := Hash(h.Key); hc == col {
			out.hists = append(out.hists, h)
		}
	}
	return out
}

// decode decodes column c of e's columns as read: empty when the entity has none.
func (e *cachedEntity) decode(c int) (cachedColumn, error) {
	var col cachedColumn
	err := e.decodeColumn(c, &col)
	col.series.seal()
	return col, err
}

// decodeColumn decodes column c of e's columns as read, of e's kind, into col (nothing when
// e has no such column).
func (e *cachedEntity) decodeColumn(c int, col *cachedColumn) error {
	b, ok := e.encoded[c]
	switch {
	case !ok:
		return nil
	case e.version == HistVersion:
		hists, err := stageenc.DecodeHist(b)
		col.hists = append(col.hists, hists...)
		return err
	default:
		return col.series.appendColumn(b, c)
	}
}

// decodeAll decodes every column of e's columns as read, in column order, as one (the
// wholeEntity column).
func (e *cachedEntity) decodeAll() (cachedColumn, error) {
	var all cachedColumn
	for _, c := range slices.Sorted(maps.Keys(e.encoded)) {
		if err := e.decodeColumn(c, &all); err != nil {
			return cachedColumn{}, fmt.Errorf("column %s%d: %w", ColumnChar, c, err)
		}
	}
	all.series.seal()
	return all, nil
}

// cacheWritten caches the entities a transaction of this Table wrote, at the ETags of its
// reply, as if read whole: a query of this process finds them from the listing's keys
// and ETags alone (the panels of the last minutes, right after the writes of a server that
// ingests them). Another process's write, or a Delete's, has another ETag: read then.
// Float entities are cached decoded whole (packed and sealed: 19 to 22 bytes a point of a
// scrape's write, where the columns as written take 47), histogram entities as written.
func (st *Table) cacheWritten(entities []*Entity, etags []string) {
	table := st.names.Staging()
	for i, e := range entities {
		version := Version
		if e.Version == HistVersion {
			version = HistVersion
		}
		head := entityHead{pk: e.PartitionKey, rk: e.RowKey, etag: etags[i], version: version}
		if version == Version {
			// Floats are kept decoded whole and packed: smaller than their columns as
			// written (each series' key again in every entity), and ready for the reads.
			written := &cachedEntity{version: version, encoded: e.Encoded()}
			if whole, err := written.decodeAll(); err == nil {
				st.cache.add(table, head, map[int]cachedColumn{wholeEntity: whole}, nil)
				continue
			}
		}
		st.cache.add(table, head, nil, e.Encoded())
	}
	// The cache holds some of the table now: the next read lists the table (keys and ETags)
	// and fetches only what it lacks, instead of reading every entity.
	st.warm.Store(true)
}

// entity returns the entry of the listed entity le of table, if cached at le's ETag.
func (c *Cache) entity(table string, le listedEntity) (*cachedEntity, bool) {
	e, ok := c.entities.Get(entityKey{table, le.pk, le.rk})
	if !ok || e.etag != le.etag {
		return nil, false
	}
	return e, true
}

// add caches cols (and encoded, the columns as read, if not nil) of the entity of table
// and head, with the columns cached of it at the same ETag.
func (c *Cache) add(table string, head entityHead, cols map[int]cachedColumn, encoded map[int][]byte) {
	c.entities.Update(entityKey{table, head.pk, head.rk}, func(old *cachedEntity, ok bool) *cachedEntity {
		e := &cachedEntity{etag: head.etag, version: head.version, cols: cols, encoded: encoded, cachedAt: time.Now()}
		if ok && old.etag == head.etag {
			e.cols = make(map[int]cachedColumn, len(old.cols)+len(cols))
			maps.Copy(e.cols, old.cols)
			maps.Copy(e.cols, cols)
			if e.encoded == nil {
				e.encoded = old.encoded
			}
		}
		// The whole entity decoded holds every column: the columns as read and those
		// decoded one by one are then only a second copy (a server's own writes, cached as
		// written, then read whole by a wide panel, held both: twice the bytes).
		if whole, has := e.cols[wholeEntity]; has {
			e.cols, e.encoded = map[int]cachedColumn{wholeEntity: whole}, nil
		}
		return e
	})
	c.memos.trim() // the entities grew: the memos make room past their eighth
	c.maybeFreeze()
}

// listedEntity is an entity of a listing: its keys and ETag (and its T and U, when
// listed by listedEntities).
type listedEntity struct {
	pk, rk, etag, first, last string
	points, fetches           int // N, and the reads of columns that fetched it (listedEntities only)
}

// pickFunc is the entities of a listing a read takes points of (those of listed it keeps,
// in order): a memo's (seriesMemo.pick). cachedEntities fetches, yields and takes only
// those it picks.
type pickFunc func(listed []listedEntity) []listedEntity

// cachedEntities yields the staging entities q's filter selects, each with the float series
// of columns (nil: every column) that want holds (nil: all; else with their slots) and the
// histogram series of those columns, as entitiesIn does, but from the cache where an
// entity's columns are there at its ETag: one listing of the keys, then a query of each
// partition holding an entity or column the cache lacks. An entity the Fold deleted
// between the listing and its fetch is left out (its samples are in the raw tables by
// then: a read of staging comes first).
//
// When it yields every entity listed (from the cache, or fetched before a Fold deleted
// it), *listedAt is set to Table.ReadsDone as of the listing they come from (else left
// alone): what it yields is what the table held then.
func (st *Table) cachedEntities(ctx context.Context, f filter.Expr, columns []int, slots *seriesSlots, read *collectRead, listedAt *uint64,
	take takeFunc, held func() error, pick pickFunc) iter.Seq2[Decoded, error] {
	return func(yield func(Decoded, error) bool) {
		fail := func(err error) {
			if !azerr.IsTableGone(err) {
				yield(Decoded{}, fmt.Errorf("tsdb: read staging: %w", err))
			}
		}
		keys := columns
		if keys == nil {
			keys = []int{wholeEntity}
		}
		if st.warm.CompareAndSwap(false, true) {
			// Nothing of this table is cached yet: a listing would only cost a request more.
			// The read is the query of every entity, which fills the cache. The reads that
			// come meanwhile wait for it, when it fetches the columns they ask for.
			cold := &fetchFlight{columns: columns, done: make(chan struct{})}
			st.cold.Store(cold)
			var order []listedEntity
			var got []entityColumns
			err := st.fetchColumns(ctx, f, "", nil, columns, false, read, func(le listedEntity, version int, cols map[int]cachedColumn) {
				order = append(order, le)
				got = append(got, entityColumns{version: version, cols: inOrder(keys, cols), whole: columns == nil})
			})
			st.cold.Store(nil)
			close(cold.done)
			if err != nil {
				fail(err)
				return
			}
			if pick != nil {
				// Every entity was fetched already: those picked are taken.
				picked := pick(order)
				var pickedGot []entityColumns
				for i, j := 0, 0; i < len(order) && j < len(picked); i++ {
					if order[i].pk == picked[j].pk && order[i].rk == picked[j].rk {
						pickedGot = append(pickedGot, got[i])
						j++
					}
				}
				order, got = picked, pickedGot
			}
			st.yieldListed(ctx, order, got, slots, read, take, held, yield)
			return
		}
		// The entities frozen are taken series by series, as the series index takes the
		// others (yieldListed): a read of every series assembles entities, and fetches them.
		frozenOK := st.index != nil && slots != nil && !slots.all
		listed, got, listedReads, err := st.gatherListed(ctx, f, columns, frozenOK, selectAll, read, pick)
		if err != nil {
			fail(err)
			return
		}
		if !slices.ContainsFunc(got, func(e entityColumns) bool { return e.cols == nil }) {
			// Every entity listed is read, from the cache or fetched: what is read is the
			// table as listed, though a Fold may have deleted some since. A Fold records
			// its change before it deletes, so a raw log read after the listing (a read
			// mark's), or after one before it the folds' log stood still since (logAfter),
			// has every change whose entities this read lacks: none.
			*listedAt = listedReads
		}
		st.yieldListed(ctx, listed, got, slots, read, take, held, yield)
	}
}

// Prefetch brings into the cache the staged entities of [from, to) the cache lacks, with the
// columns of series (nil: whole) of the kinds asked for, as a read of them (collect) would
// fetch them, without collecting their points: a query's read mark runs it beside its read
// of the raw log, so that its Select, which reads the same listing after the mark, finds
// them cached (or fetched under way) instead of fetching them after the mark. ctx should be
// of a read that began (BeginRead): the Select then takes the same listing. A Table without
// a cache, whose cache is not warm yet, or that does not read staged samples does nothing.
func (st *Table) Prefetch(ctx context.Context, series []string, from, to time.Time, kinds Kinds) error {
	if !st.Prefetches() || !from.Before(to) {
		return nil
	}
	read := st.beginRead()
	defer read.end()
	f, columns := queryParts(series, from, to, kinds)
	if len(columns) >= wholeColumns {
		columns = nil // as collect asks
	}
	// Of the entities the listing's refresh found written since the one before: those
	// before were there for the reads before, which fetched what they lacked (a refreshed
	// panel's prefetch looked up every entity of its range in the cache to find them all
	// there, the Select's read doing the same at once).
	if _, _, _, err := st.gatherListed(ctx, f, columns, st.index != nil && series != nil, selectRecent, read, nil); err != nil && !azerr.IsTableGone(err) {
		return fmt.Errorf("tsdb: prefetch staging: %w", err)
	}
	return nil
}

// Prefetches reports whether Prefetch would fetch anything: the Table reads staged samples
// and its cache is warm.
func (st *Table) Prefetches() bool {
	return st != nil && st.reads && st.cache != nil && st.warm.Load()
}

// gatherListed returns the entities f selects as the listing (the Table's, as of
// listedReads) has them, in key order, and their columns (nil: every column): from the
// cache where it holds them at the listed ETag, else fetched (and cached), a query a
// partition. An entity the Fold deleted between the listing and its fetch has no columns.
// An entity frozen (frozen.go) is taken from its bucket's frozen points when frozenOK (the
// read takes its series through the series index), else fetched; of the entities which
// selects (listedEntities), and of those only the ones pick picks (nil: all). The Table's
// cache must be warm.
func (st *Table) gatherListed(ctx context.Context, f filter.Expr, columns []int, frozenOK bool, which selection, read *collectRead, pick pickFunc) (listed []listedEntity, got []entityColumns, listedReads uint64, err error) {
	keys := columns
	if keys == nil {
		keys = []int{wholeEntity}
	}
	table := st.names.Staging()
	if cold := st.cold.Load(); cold != nil && cold.holds(nil, columns) && read.unheld() {
		st.cache.shared.Add(1)
		if err := waitFetch(ctx, read, cold); err != nil {
			return nil, nil, 0, err
		}
	}
	listed, listedReads, err = st.listedEntities(ctx, f, which)
	if err != nil {
		return nil, nil, 0, err
	}
	if pick != nil {
		listed = pick(listed) // a memo's: it holds the points of the others
	}
	// The entities whose columns the cache lacks, by partition.
	// The columns the cache holds are taken now (a later rotation may drop them).
	missing := map[string][]listedEntity{}
	at := map[[2]string]int{} // the missing entities' index in listed
	got = make([]entityColumns, len(listed))
	hits := 0
	fromCache := func(i int, le listedEntity) bool {
		e, ok := st.cache.entity(table, le)
		if !ok {
			if !frozenOK {
				return false
			}
			b, at, ok := st.cache.frozen.entity(table, le)
			if ok {
				got[i] = entityColumns{version: Version, cols: []cachedColumn{}, frozen: b, at: at}
				hits += len(keys)
			}
			return ok
		}
		if whole, has := e.cols[wholeEntity]; has && e.version == Version {
			// A whole float entity: its series are taken through the series index, or
			// assembled from it by the read's series, whatever columns the read asked for
			// (taking its columns out of it copied them at every read).
			got[i] = entityColumns{version: e.version, cols: []cachedColumn{whole}, whole: true}
			hits += len(keys)
			return true
		}
		cols, decoded, ok := e.columns(keys)
		if !ok {
			return false
		}
		if decoded != nil {
			st.cache.add(table, entityHead{pk: le.pk, rk: le.rk, etag: e.etag, version: e.version}, decoded, nil)
		}
		got[i] = entityColumns{version: e.version, cols: cols, whole: len(keys) == 1 && keys[0] == wholeEntity}
		hits += len(keys)
		return true
	}
	for i, le := range listed {
		if fromCache(i, le) {
			continue
		}
		missing[le.pk] = append(missing[le.pk], le)
		at[[2]string{le.pk, le.rk}] = i
	}
	whole := st.fetchWhole(missing, columns)
	// The partitions another read is fetching now are waited for, then taken from
	// the cache; what it did not leave there, this read fetches.
	waits, own := st.cache.boardFetches(table, missing, columns, whole, read.unheld())
	defer func() { st.cache.landFetches(table, own) }() // on an error: own is nil once landed
	for fl, les := range waits {
		if err := waitFetch(ctx, read, fl); err != nil {
			return nil, nil, 0, err
		}
		for _, le := range les {
			if !fromCache(at[[2]string{le.pk, le.rk}], le) {
				missing[le.pk] = append(missing[le.pk], le)
			}
		}
	}
	st.cache.counts.Hit(hits)
	misses := 0
	for _, les := range missing {
		misses += len(les) * len(keys)
	}
	st.cache.counts.Miss(misses)
	for _, pk := range slices.Sorted(maps.Keys(missing)) {
		if err := st.fetchColumns(ctx, f, pk, missing[pk], columns, whole[pk], read, func(le listedEntity, version int, cols map[int]cachedColumn) {
			if i, ok := at[[2]string{le.pk, le.rk}]; ok {
				got[i] = entityColumns{version: version, cols: inOrder(keys, cols), whole: columns == nil}
			}
		}); err != nil {
			return nil, nil, 0, err
		}
		if !whole[pk] {
			st.listing.fetched(missing[pk])
		}
	}
	st.cache.landFetches(table, own)
	own = nil
	return listed, got, listedReads, nil
}

// entityColumns are the columns of an entity a read asked for, in the order of its keys
// (nil: the entity is gone), or its whole entity's (whole: every column's series as one,
// whatever the read asked for).
type entityColumns struct {
	version int
	cols    []cachedColumn
	whole   bool
	// frozen, if not nil, holds the entity's points, at place at (frozen.go): cols is then
	// empty (not nil: the entity is read).
	frozen *frozenBucket
	at     int32
}

// inOrder is cols's columns keys, in their order.
func inOrder(keys []int, cols map[int]cachedColumn) []cachedColumn {
	out := make([]cachedColumn, len(keys))
	for i, c := range keys {
		out[i] = cols[c]
	}
	return out
}

// yieldListed collects what a read of slots' series asks for of the entities of listed (in
// order) whose columns got holds: the points of the whole float entities through the
// Table's series index, straight to take (held then holds them under the read budget),
// and the other entities assembled, yielded (yieldAssembled).
func (st *Table) yieldListed(ctx context.Context, listed []listedEntity, got []entityColumns, slots *seriesSlots,
	read *collectRead, take takeFunc, held func() error, yield func(Decoded, error) bool) {
	if st.index != nil && !slots.all {
		var err error
		if listed, got, err = takeFrozen(listed, got, slots.keys, take, held); err != nil {
			yield(Decoded{}, err)
			return
		}
		rest, err := st.index.take(listed, got, slots.keys, take, held, slots.covers())
		if err != nil {
			yield(Decoded{}, err)
			return
		}
		restListed, restGot := make([]listedEntity, len(rest)), make([]entityColumns, len(rest))
		for j, i := range rest {
			restListed[j], restGot[j] = listed[i], got[i]
		}
		listed, got = restListed, restGot
	}
	if len(listed) == 0 {
		return
	}
	st.yieldAssembled(ctx, listed, got, slots.byHandle(), read, yield)
}

// yieldAssembled yields the entities of listed (in order) whose columns got holds, their
// float series those want holds (nil: all), each held under the read budget while the
// consumer has it. An entity got lacks was deleted by the Fold between the listing and the
// fetch.
//
// Many entities are assembled ahead, in a goroutine of their own, while the consumer takes
// in the ones before: a refresh of 1,000 series takes the staged points of a few hundred
// entities from the cache, and spends about as long assembling them (a lookup a series) as
// collecting their points.
func (st *Table) yieldAssembled(ctx context.Context, listed []listedEntity, got []entityColumns,
	want map[unique.Handle[string]]int32, read *collectRead, yield func(Decoded, error) bool) {
	entities := func(yield func(Decoded) bool) {
		for i, le := range listed {
			if got[i].cols == nil {
				continue
			}
			if d, ok := assemble(le, got[i], want); ok && !yield(d) {
				return
			}
		}
	}
	if len(listed) >= assembleAheadMin {
		entities = ahead(entities, assembleAhead)
	}
	for d := range entities {
		n := d.DecodedBytes()
		if err := read.hold(ctx, n); err != nil {
			yield(Decoded{}, err)
			return
		}
		more := yield(d, nil)
		read.give(n)
		if !more {
			return
		}
	}
}

const (
	// assembleAheadMin is how many entities a read lists at least for them to be assembled
	// ahead; assembleAhead, how many at most wait assembled.
	assembleAheadMin = 16
	assembleAhead    = 32
)

// ahead runs seq in a goroutine of its own, at most n values ahead of the consumer; it
// stops when the consumer does.
func ahead[V any](seq iter.Seq[V], n int) iter.Seq[V] {
	return func(yield func(V) bool) {
		ch := make(chan V, n)
		stop := make(chan struct{})
		defer close(stop)
		go func() {
			defer close(ch)
			for v := range seq {
				select {
				case ch <- v:
				case <-stop:
					return
				}
			}
		}()
		for v := range ch {
			if !yield(v) {
				return
			}
		}
	}
}

// fetchWhole says, by partition, whether the entities missing of a read of columns (nil:
// every column, which is read whole anyway) are fetched whole: when each was fetched by
// wholeAfter reads of columns already, and their points fit in a quarter of the cache.
func (st *Table) fetchWhole(missing map[string][]listedEntity, columns []int) map[string]bool {
	whole := map[string]bool{}
	if columns == nil {
		return whole
	}
	budget := st.cache.maxBytes / 4
	for pk, les := range missing {
		var bytes int64
		ok := true
		for _, le := range les {
			if le.fetches < wholeAfter {
				ok = false
				break
			}
			bytes += int64(le.points) * encodedPointBytes
		}
		if ok && bytes <= budget {
			whole[pk] = true
			budget -= bytes
		}
	}
	return whole
}

// fetchColumns queries partition pk for the listed entities with their columns (nil: every
// column), or with pk "" every entity f selects, caches the columns at the ETag read, and
// passes got each entity's version and columns, in the order read.
//
// With whole (a read of columns), it fetches every column of the entities, and caches them
// as read besides the columns asked for, decoded.
func (st *Table) fetchColumns(ctx context.Context, f filter.Expr, pk string, entities []listedEntity, columns []int, whole bool, read *collectRead,
	got func(le listedEntity, version int, cols map[int]cachedColumn)) error {
	q := pager.SubQuery{Filter: f.String()}
	var wanted map[string]bool
	if pk != "" {
		wanted = make(map[string]bool, len(entities))
		lo, hi := entities[0].rk, entities[0].rk
		for _, le := range entities {
			wanted[le.rk] = true
			lo, hi = min(lo, le.rk), max(hi, le.rk)
		}
		q.Filter = filter.And(f, filter.Eq("PartitionKey", pk), filter.Ge("RowKey", lo), filter.Le("RowKey", hi)).String()
	}
	if columns != nil && !whole {
		sel := "PartitionKey,RowKey," + VersionProp
		for _, c := range columns {
			sel += "," + ColumnChar + strconv.Itoa(c)
		}
		q.Select = sel
	}
	q.Top, q.PageBytes = st.Page.Top, st.Page.PageBytes
	table := st.names.Staging()
	var e entity.Entity
	e.AllowStrings = true
	for page, err := range st.pagesAhead(ctx, q, read) {
		if err != nil {
			return err
		}
		held, err := st.cacheColumns(&e, table, page.entities, wanted, columns, whole, got)
		if err == nil {
			// The columns fetched live in the read until it ends, whether the cache keeps
			// them or not: they are held under the staging read budget, so that the reads
			// of a table that every cold query fetches at once wait their turn instead of
			// each holding a decoded copy (the soak: 80 queries, 2.2 GB).
			err = read.hold(ctx, held)
		}
		page.done()
		if err != nil {
			return err
		}
	}
	return nil
}

// cacheColumns decodes a page of fetchColumns (the entities wanted holds, nil: all), caches
// their columns, passes got each, and returns what the columns take.
func (st *Table) cacheColumns(e *entity.Entity, table string, page [][]byte, wanted map[string]bool, columns []int, whole bool,
	got func(le listedEntity, version int, cols map[int]cachedColumn)) (held int64, err error) {
	for _, r := range page {
		head, enc, err := encodedColumns(e, r)
		if err != nil {
			return 0, err
		}
		if wanted != nil && !wanted[head.rk] {
			continue // an entity the cache held, between two it lacked
		}
		ce := &cachedEntity{etag: head.etag, version: head.version, encoded: enc}
		cols := map[int]cachedColumn{}
		if columns == nil {
			all, err := ce.decodeAll()
			if err != nil {
				return 0, fmt.Errorf("staging entity %q %w", head.rk, err)
			}
			cols[wholeEntity] = all
		} else {
			for _, c := range columns {
				if cols[c], err = ce.decode(c); err != nil { // empty where the entity has none
					return 0, fmt.Errorf("staging entity %q column %s%d: %w", head.rk, ColumnChar, c, err)
				}
			}
		}
		if !whole {
			enc = nil // a read of some columns, or of every column decoded: not kept as read
		}
		st.cache.add(table, head, cols, enc)
		for _, col := range cols {
			held += int64(col.cost())
		}
		got(listedEntity{pk: head.pk, rk: head.rk, etag: head.etag}, head.version, cols)
	}
	return held, nil
}

// decodeHead decodes a staging entity's JSON into e, and returns its keys, ETag and version.
func decodeHead(e *entity.Entity, raw []byte) (entityHead, error) {
	if err := e.Decode(raw); err != nil {
		return entityHead{}, err
	}
	head := entityHead{pk: string(e.PartitionKey), rk: string(e.RowKey), etag: string(e.ETag)}
	version := -1.0
	for _, p := range e.Props {
		if string(p.Name) == VersionProp {
			version = p.Value
		}
	}
	if version != Version && version != HistVersion {
		return entityHead{}, fmt.Errorf("staging entity %q: %w %v", e.RowKey, ErrVersion, version)
	}
	head.version = int(version)
	return head, nil
}

// entityHead is what decodeColumns reads of an entity besides its columns.
type entityHead struct {
	pk, rk, etag string
	version      int
}

// encodedColumns reads one staging entity's JSON keeping each column's bytes as read (not
// decoded), by column.
func encodedColumns(e *entity.Entity, raw []byte) (entityHead, map[int][]byte, error) {
	head, err := decodeHead(e, raw)
	if err != nil {
		return entityHead{}, nil, err
	}
	enc := map[int][]byte{}
	for _, sp := range e.Strings {
		name := string(sp.Name)
		if !strings.HasPrefix(name, ColumnChar) {
			continue
		}
		c, err := strconv.Atoi(name[len(ColumnChar):])
		if err != nil {
			continue
		}
		b, err := base64.StdEncoding.DecodeString(string(sp.Value))
		if err != nil {
			return entityHead{}, nil, fmt.Errorf("staging entity %q column %s: %w", e.RowKey, name, err)
		}
		enc[c] = b
	}
	return head, enc, nil
}

// assemble is the listed entity le with its columns, its float series those want holds
// (nil: all; else with their slots, Decoded.Slots). Its slices are of the pool of
// assembled: its reader gives them back (Decoded.release) once it took the points out.
func assemble(le listedEntity, ec entityColumns, want map[unique.Handle[string]]int32) (Decoded, bool) {
	stamp, seq, ok := StampOf([]byte(le.rk))
	if !ok {
		return Decoded{}, false
	}
	b := assembledPool.Get().(*assembled)
	d := Decoded{PartitionKey: le.pk, RowKey: le.rk, Stamp: stamp, Seq: seq, Version: ec.version, Wanted: want != nil,
		Series: b.series[:0], Hists: b.hists[:0], pooled: b}
	if want != nil {
		d.Slots = b.slots[:0]
	}
	for _, col := range ec.cols {
		for i, key := range col.series.keys {
			if want == nil {
				d.Series = append(d.Series, col.series.at(i))
			} else if slot, ok := want[key]; ok {
				d.Series = append(d.Series, col.series.at(i))
				d.Slots = append(d.Slots, slot)
			}
		}
		d.Hists = append(d.Hists, col.hists...)
	}
	return d, true
}

// assembled are the slices of an entity assemble made, for another once its reader is done
// with them: the soak's queries assembled 50 to 60 MB a second of them, grown a series at a
// time.
type assembled struct {
	series []stageenc.Series
	slots  []int32
	hists  []stageenc.HistSeries
}

var assembledPool = sync.Pool{New: func() any { return new(assembled) }}

// release gives d's slices back to assemble's pool, if they are of it: d's reader took
// what it keeps out of them (the points, the samples: not the slices), and holds d no more.
func (d *Decoded) release() {
	b := d.pooled
	if b == nil {
		return
	}
	d.pooled = nil
	clear(d.Series) // the keys and columns the cache holds: not kept alive by the pool
	clear(d.Hists)
	b.series, b.slots, b.hists = d.Series[:0], d.Slots[:0], d.Hists[:0]
	d.Series, d.Slots, d.Hists = nil, nil, nil
	assembledPool.Put(b)
}
