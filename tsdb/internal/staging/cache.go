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
	"unsafe"

	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/filter"
	"github.com/seed71701133/tablets/internal/pager"
	"github.com/seed71701133/tablets/internal/stageenc"
	"github.com/seed71701133/tablets/tsdb/internal/azerr"
	"github.com/seed71701133/tablets/tsdb/internal/cache"
)

// Cache keeps the columns of staging entities that queries decoded, by table, entity key,
// column and ETag, so that a query reads again only what changed since: a refreshed panel
// lists the keys and ETags of the entities its range overlaps (a few hundred bytes an
// entity), takes the columns it knows from the cache, and fetches the others, the new
// entities' (one query a partition that has any).
//
// A staging entity is written once by the transaction of its write, rewritten only by a
// Delete of some of its samples (a new ETag), and deleted by the Fold: the listing is read
// from the account at every query, so a column is used only while its entity still stands
// with the ETag it was decoded at, whichever process changed it. A cached column is never
// the last word: the account is.
//
// A Cache may be shared by the Tables of many databases (a server's tenants); it is bounded
// by the bytes of the columns it holds (two generations of cache.Gen: what a generation
// does not use goes). Safe for concurrent use.
type Cache struct {
	counts   cache.Counts
	columns  *cache.Gen[columnKey, cachedColumn]
	maxBytes int64
}

// NewCache returns a cache of at most about maxBytes of decoded columns (at least 1 MiB).
func NewCache(maxBytes int64) *Cache {
	maxBytes = max(maxBytes, 1<<20)
	return &Cache{columns: cache.New(int(maxBytes), columnCost), maxBytes: maxBytes}
}

// Stats returns the cache's counts: Hits are columns of entities found at their ETag,
// Misses those fetched.
func (c *Cache) Stats() cache.Stats { return cache.StatsOf(&c.counts, c.columns) }

// columnKey names a column of an entity of a staging table: wholeEntity for a read of
// every column.
type columnKey struct {
	table, pk, rk string
	column        int
}

// wholeEntity is the column of a key that holds every column of its entity, decoded (a read
// of every series); encodedEntity the column of a key that holds every column of its
// entity as read, not decoded (see wholeAfter).
const (
	wholeEntity   = -1
	encodedEntity = -2
)

// wholeAfter is how many reads fetched columns of an entity before the next fetches it whole
// (its columns kept as read, a few bytes a sample, and decoded when a read asks for one):
// reads of one series each (a remote read right after a burst) would otherwise each pay the
// overhead of every entity of the burst (its keys and ETag, a couple of hundred bytes) to
// read one column of it. The entities of one read are fetched whole only while their
// points' bytes (encodedPointBytes a point) fit in a quarter of the cache.
const wholeAfter = 3

// encodedPointBytes is about what a point of a staging column takes, as read.
const encodedPointBytes = 4

// cachedColumn is one column of an entity as decoded, at the entity's ETag: empty when the
// entity has no such column.
type cachedColumn struct {
	etag    string
	version int
	series  []stageenc.Series
	hists   []stageenc.HistSeries
	encoded map[int][]byte // of an encodedEntity key: every column's bytes, as read
}

func columnCost(k columnKey, c cachedColumn) int {
	n := int(unsafe.Sizeof(k)+unsafe.Sizeof(c)) + len(k.table) + len(k.pk) + len(k.rk) + len(c.etag) + 64
	for _, s := range c.series {
		n += int(unsafe.Sizeof(s)) + len(s.Key) + 8*(cap(s.Times)+cap(s.Values))
	}
	for _, s := range c.hists {
		n += int(unsafe.Sizeof(s)) + len(s.Key) + len(s.Samples)*int(HistBytes)
	}
	for _, b := range c.encoded {
		n += 48 + cap(b)
	}
	return n
}

// listedEntity is an entity of a listing: its keys and ETag (and its T and U, when
// listed by listedEntities).
type listedEntity struct {
	pk, rk, etag, first, last string
	points, fetches           int // N, and the reads of columns that fetched it (listedEntities only)
}

// cachedEntities yields the staging entities q's filter selects, each with the float series
// of columns (nil: every column) that want holds (nil: all) and the histogram series of
// those columns, as entitiesIn does, but from the cache where an entity's columns are there
// at its ETag: one listing of the keys, then a query of each partition holding an entity
// or column the cache lacks. An entity the Fold deleted between the listing and its fetch
// is left out (its samples are in the raw tables by then: a read of staging comes first).
func (st *Table) cachedEntities(ctx context.Context, f filter.Expr, columns []int, want map[string]bool, read *collectRead) iter.Seq2[Decoded, error] {
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
		table := st.names.Staging()
		if !st.warm.Load() {
			// Nothing of this table is cached yet: a listing would only cost a request more.
			// The read is the query of every entity, which fills the cache.
			st.warm.Store(true)
			got := map[[2]string]map[int]cachedColumn{}
			var order []listedEntity
			err := st.fetchColumns(ctx, f, "", nil, columns, false, read, func(le listedEntity, cols map[int]cachedColumn) {
				got[[2]string{le.pk, le.rk}] = cols
				order = append(order, le)
			})
			if err != nil {
				fail(err)
				return
			}
			st.yieldAssembled(ctx, order, keys, got, want, read, yield)
			return
		}
		listed, err := st.listedEntities(ctx, f)
		if err != nil {
			fail(err)
			return
		}
		// The entities whose columns the cache lacks, by partition.
		// The columns the cache holds are taken now (a later rotation may drop them).
		missing := map[string][]listedEntity{}
		got := make(map[[2]string]map[int]cachedColumn, len(listed))
		for _, le := range listed {
			cols := make(map[int]cachedColumn, len(keys))
			for _, c := range keys {
				col, ok := st.cache.lookupColumn(table, le, c)
				if !ok {
					missing[le.pk] = append(missing[le.pk], le)
					cols = nil
					break
				}
				cols[c] = col
			}
			if cols != nil {
				got[[2]string{le.pk, le.rk}] = cols
			}
		}
		whole := st.fetchWhole(missing, columns)
		for _, pk := range slices.Sorted(maps.Keys(missing)) {
			if err := st.fetchColumns(ctx, f, pk, missing[pk], columns, whole[pk], read, func(le listedEntity, cols map[int]cachedColumn) {
				got[[2]string{le.pk, le.rk}] = cols
			}); err != nil {
				fail(err)
				return
			}
			if !whole[pk] {
				st.listing.fetched(missing[pk])
			}
		}
		st.yieldAssembled(ctx, listed, keys, got, want, read, yield)
	}
}

// yieldAssembled yields the entities of listed (in order) whose columns keys are in got,
// their float series those want holds (nil: all), each held under the read budget while
// the consumer has it. An entity got lacks was deleted by the Fold between the listing and
// the fetch.
func (st *Table) yieldAssembled(ctx context.Context, listed []listedEntity, keys []int, got map[[2]string]map[int]cachedColumn,
	want map[string]bool, read *collectRead, yield func(Decoded, error) bool) {
	for _, le := range listed {
		cols, ok := got[[2]string{le.pk, le.rk}]
		if !ok {
			continue
		}
		d, ok := assemble(le, keys, cols, want)
		if !ok {
			continue
		}
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

// lookupColumn returns column c of the listed entity le from the cache, at le's ETag: its
// entry, or decoded from the entity's columns as read (an entity fetched whole), counting
// a hit or a miss.
func (c *Cache) lookupColumn(table string, le listedEntity, column int) (cachedColumn, bool) {
	col, ok := c.columns.Get(columnKey{table, le.pk, le.rk, column})
	if ok && col.etag == le.etag {
		c.counts.Hit(1)
		return col, true
	}
	if column != wholeEntity {
		if enc, ok := c.columns.Get(columnKey{table, le.pk, le.rk, encodedEntity}); ok && enc.etag == le.etag {
			col, err := decodeColumn(enc, column)
			if err == nil {
				c.columns.Add(columnKey{table, le.pk, le.rk, column}, col)
				c.counts.Hit(1)
				return col, true
			}
		}
	}
	c.counts.Miss(1)
	return cachedColumn{}, false
}

// decodeColumn decodes column c of an entity's columns as read (enc: an encodedEntity
// entry): empty when the entity has none.
func decodeColumn(enc cachedColumn, c int) (cachedColumn, error) {
	col := cachedColumn{etag: enc.etag, version: enc.version}
	b, ok := enc.encoded[c]
	if !ok {
		return col, nil
	}
	var err error
	if enc.version == HistVersion {
		col.hists, err = stageenc.DecodeHist(b)
	} else {
		col.series, err = stageenc.DecodeSome(b, nil)
	}
	return col, err
}

// lookup returns k's column if it is cached at etag, counting a hit or a miss.
func (c *Cache) lookup(k columnKey, etag string) (cachedColumn, bool) {
	// A column is looked up alone: an entity read whole (a read of every series) is held
	// apart, and a column taken from it would bring every other column's series along.
	col, ok := c.columns.Get(k)
	if ok && col.etag == etag {
		c.counts.Hit(1)
		return col, true
	}
	c.counts.Miss(1)
	return cachedColumn{}, false
}

// fetchColumns queries partition pk for the listed entities with their columns (nil: every
// column), or with pk "" every entity f selects, caches each column at the ETag read, and
// passes got each entity's columns, in the order read.
//
// With whole (a read of columns), it fetches every column of the entities, and caches them
// as read (an encodedEntity entry) besides the columns asked for, decoded.
func (st *Table) fetchColumns(ctx context.Context, f filter.Expr, pk string, entities []listedEntity, columns []int, whole bool, read *collectRead,
	got func(le listedEntity, cols map[int]cachedColumn)) error {
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
	top := q.Top
	var cont pager.Continuation
	for {
		done, err := st.Budget.take(ctx, read, int64(q.PageBytes))
		if err != nil {
			return err
		}
		raw, next, err := pager.Fetch(ctx, st.client, q, top, cont)
		if err != nil {
			done()
			return err
		}
		top = pager.NextTop(q, top, raw)
		var held int64 // what the page's decoded columns take, which the read holds until it ends
		for _, r := range raw {
			var head entityHead
			var cols map[int]cachedColumn
			var err error
			if whole {
				var enc cachedColumn
				if head, enc, err = encodedColumns(&e, r); err == nil && (wanted == nil || wanted[head.rk]) {
					st.cache.columns.Add(columnKey{table, head.pk, head.rk, encodedEntity}, enc)
					cols = map[int]cachedColumn{}
					for _, c := range columns {
						if cols[c], err = decodeColumn(enc, c); err != nil {
							break
						}
					}
				}
			} else {
				head, cols, err = decodeColumns(&e, r)
			}
			if err != nil {
				done()
				return err
			}
			if wanted != nil && !wanted[head.rk] {
				continue // an entity the cache held, between two it lacked
			}
			if columns == nil {
				whole := cachedColumn{etag: head.etag, version: head.version}
				for _, c := range cols {
					whole.series = append(whole.series, c.series...)
					whole.hists = append(whole.hists, c.hists...)
				}
				cols = map[int]cachedColumn{wholeEntity: whole}
			} else {
				for _, c := range columns {
					if _, ok := cols[c]; !ok {
						cols[c] = cachedColumn{etag: head.etag, version: head.version} // none there
					}
				}
			}
			for c, col := range cols {
				k := columnKey{table, head.pk, head.rk, c}
				st.cache.columns.Add(k, col)
				held += int64(columnCost(k, col))
			}
			got(listedEntity{pk: head.pk, rk: head.rk, etag: head.etag}, cols)
		}
		// The columns fetched live in the read until it ends, whether the cache keeps them or
		// not: they are held under the staging read budget, so that the reads of a table
		// that every cold query fetches at once wait their turn instead of each holding a
		// decoded copy (the soak: 80 queries, 2.2 GB).
		if err := read.hold(ctx, held); err != nil {
			done()
			return err
		}
		done()
		if next.IsZero() {
			return nil
		}
		cont = next
	}
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

// decodeColumns decodes one staging entity's JSON column by column (every series of
// each column), each at the entity's ETag.
func decodeColumns(e *entity.Entity, raw []byte) (entityHead, map[int]cachedColumn, error) {
	head, enc, err := encodedColumns(e, raw)
	if err != nil {
		return entityHead{}, nil, err
	}
	cols := make(map[int]cachedColumn, len(enc.encoded))
	for c := range enc.encoded {
		if cols[c], err = decodeColumn(enc, c); err != nil {
			return entityHead{}, nil, fmt.Errorf("staging entity %q column %s%d: %w", head.rk, ColumnChar, c, err)
		}
	}
	return head, cols, nil
}

// encodedColumns reads one staging entity's JSON keeping each column's bytes as read (not
// decoded), at the entity's ETag.
func encodedColumns(e *entity.Entity, raw []byte) (entityHead, cachedColumn, error) {
	head, err := decodeHead(e, raw)
	if err != nil {
		return entityHead{}, cachedColumn{}, err
	}
	enc := cachedColumn{etag: head.etag, version: head.version, encoded: map[int][]byte{}}
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
			return entityHead{}, cachedColumn{}, fmt.Errorf("staging entity %q column %s: %w", e.RowKey, name, err)
		}
		enc.encoded[c] = b
	}
	return head, enc, nil
}

// assemble is the listed entity le with its columns keys, its float series those want
// holds (nil: all).
func assemble(le listedEntity, keys []int, cols map[int]cachedColumn, want map[string]bool) (Decoded, bool) {
	stamp, seq, ok := StampOf([]byte(le.rk))
	if !ok {
		return Decoded{}, false
	}
	d := Decoded{PartitionKey: le.pk, RowKey: le.rk, Stamp: stamp, Seq: seq}
	for _, c := range keys {
		col := cols[c]
		d.Version = col.version
		for _, s := range col.series {
			if want == nil || want[s.Key] {
				d.Series = append(d.Series, s)
			}
		}
		d.Hists = append(d.Hists, col.hists...)
	}
	return d, true
}
