package tiers

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/filter"
	"github.com/seed71701133/tablets/internal/blockenc"
	"github.com/seed71701133/tablets/internal/pager"
	"github.com/seed71701133/tablets/tsdb/internal/azerr"
	"github.com/seed71701133/tablets/tsdb/internal/cache"
	"github.com/seed71701133/tablets/tsdb/internal/times"
)

// maxSeriesPerFilter keeps a block read's filter under 15 comparisons: the RowKey range (2)
// and one PartitionKey equality a series.
const maxSeriesPerFilter = 13

// scanFilters is how many filters of maxSeriesPerFilter series a block read sends before it
// scans the partitions from the first name to the last instead.
const scanFilters = 2

type blockRef struct {
	series string
	start  uint64
}

// readTierBlocks reads the blocks of tier t of the series names (sorted, distinct) that hold
// windows in [lo, hi) (Unix seconds), by series: the columnar ones with cols selected, the
// row blocks and stale flags whole (a second query for them, as they turn out to be row
// blocks only once read).
func (tr *Tiers) readTierBlocks(ctx context.Context, names []string, t Tier, lo, hi uint64, cols blockenc.Columns) (map[string][]*tierBlock, error) {
	r := newBlockReader(tr, t, cols, names)
	blo := times.FloorSec(lo, tr.blockSpan(t))
	period := uint64(t.Period / time.Second)
	for p := tierPeriod(t, blo); p < hi; p += period {
		table := tr.TierTable(t, p)
		r.table = table
		if err := r.readTable(ctx, tr.service.NewClient(table), names, blockKey(max(blo, p)), blockKey(min(hi, p+period))); err != nil {
			return nil, fmt.Errorf("tsdb: read tier: %w", err)
		}
	}
	return r.bySeries(), nil
}

func newBlockReader(tr *Tiers, t Tier, cols blockenc.Columns, names []string) *blockReader {
	r := &blockReader{tiers: tr, tier: t, cols: cols, want: make(map[string]bool, len(names)), found: map[blockRef]*tierBlock{}}
	for _, s := range names {
		r.want[s] = true
	}
	return r
}

// bySeries are the blocks found, by series: of each, the row blocks and flags first, then
// the columnar ones, by start.
func (r *blockReader) bySeries() map[string][]*tierBlock {
	out := map[string][]*tierBlock{}
	for ref, b := range r.found {
		out[ref.series] = append(out[ref.series], b)
	}
	for _, bs := range out {
		// Row blocks and flags first: where a columnar block covers the same windows, its
		// windows are the ones used.
		slices.SortFunc(bs, func(a, b *tierBlock) int {
			ac, bc := a.version == blockenc.VersionColumnar, b.version == blockenc.VersionColumnar
			if ac != bc {
				if ac {
					return 1
				}
				return -1
			}
			return cmp.Compare(a.start, b.start)
		})
	}
	return out
}

// blockReader reads the blocks of a tier's tables.
type blockReader struct {
	tiers *Tiers
	tier  Tier
	cols  blockenc.Columns
	want  map[string]bool
	found map[blockRef]*tierBlock
	e     entity.Entity
	// rows are the series of the table being read that hold row blocks or flags, and the
	// range of their keys: read again whole.
	rows         map[string]bool
	rowLo, rowHi string
	selectsAll   bool
	table        string // the name of the table being read
}

// readTable reads the blocks of names with keys in [rkLo, rkHi) of one tier table.
func (r *blockReader) readTable(ctx context.Context, client pager.Lister, names []string, rkLo, rkHi string) error {
	sel := blockenc.SelectColumnar(r.cols)
	r.rows, r.rowLo, r.rowHi = map[string]bool{}, "", ""
	r.selectsAll = sel == "" // every column: the row blocks are read whole already
	if r.tiers.cfg.Blocks != nil {
		// Warm: this table was read before for the same series and columns (a panel
		// refreshed, or zoomed): a listing then saves what the cache holds. A read of other
		// series reads as ever, and fills the cache.
		shape := readShape(r.table, sel, names)
		_, warm := r.tiers.warm.Get(shape)
		r.tiers.warm.Add(shape, struct{}{})
		if warm {
			gone, err := r.readCached(ctx, client, names, rkLo, rkHi, sel)
			if gone || err != nil || len(r.rows) == 0 {
				return err
			}
			keys := []filter.Expr{filter.Ge("RowKey", r.rowLo), filter.Le("RowKey", r.rowHi)}
			_, err = r.readFiltered(ctx, client, slices.Sorted(maps.Keys(r.rows)), keys, "", true)
			return err
		}
	}
	rest := names
	if len(names) > scanFilters*maxSeriesPerFilter {
		// One scan of the partitions from the first name to the last, as long as its pages
		// hold mostly asked series; the names not reached then are read by filters.
		rest = nil
		f := filter.And(filter.Ge("PartitionKey", names[0]), filter.Le("PartitionKey", names[len(names)-1]),
			filter.Ge("RowKey", rkLo), filter.Lt("RowKey", rkHi))
		for page, err := range pager.Each(ctx, client, pager.SubQuery{Filter: f.String(), Select: sel}, 0) {
			if azerr.IsTableGone(err) {
				return nil
			}
			if err != nil {
				return err
			}
			asked, last := 0, ""
			for _, raw := range page.Entities {
				r.hold(raw, sel)
				pk, ok, err := r.add(raw, false)
				if err != nil {
					return err
				}
				if ok {
					asked++
				}
				last = pk
			}
			if n := len(page.Entities); n > 0 && 2*asked < n {
				i, _ := slices.BinarySearch(names, last)
				rest = names[i:]
				break
			}
		}
	}
	keys := []filter.Expr{filter.Ge("RowKey", rkLo), filter.Lt("RowKey", rkHi)}
	gone, err := r.readFiltered(ctx, client, rest, keys, sel, false)
	if gone || err != nil || len(r.rows) == 0 {
		return err
	}
	keys = []filter.Expr{filter.Ge("RowKey", r.rowLo), filter.Le("RowKey", r.rowHi)}
	_, err = r.readFiltered(ctx, client, slices.Sorted(maps.Keys(r.rows)), keys, "", true)
	return err
}

// readFiltered reads the blocks of names whose keys match keys (two comparisons),
// maxSeriesPerFilter series a query, selecting sel (whole: "" selects all, and only the row
// blocks and flags are kept). It reports whether the table is gone.
func (r *blockReader) readFiltered(ctx context.Context, client pager.Lister, names []string, keys []filter.Expr, sel string, whole bool) (bool, error) {
	for i := 0; i < len(names); i += maxSeriesPerFilter {
		group := names[i:min(i+maxSeriesPerFilter, len(names))]
		f := filter.And(append(slices.Clone(keys), anyPartition(group))...)
		for page, err := range pager.Each(ctx, client, pager.SubQuery{Filter: f.String(), Select: sel}, 0) {
			if azerr.IsTableGone(err) {
				return true, nil
			}
			if err != nil {
				return false, err
			}
			for _, raw := range page.Entities {
				if !whole {
					r.hold(raw, sel)
				}
				if _, _, err := r.add(raw, whole); err != nil {
					return false, err
				}
			}
		}
	}
	return false, nil
}

// add decodes an entity read and keeps it if its series is asked for: a columnar block
// read with r.cols; a row block or flag when read whole, else noted to be read whole. It
// returns the entity's PartitionKey and whether its series is asked for.
func (r *blockReader) add(raw []byte, whole bool) (string, bool, error) {
	r.e = entity.Entity{AllowStrings: true, AllowNull: true} // $select: absent columns come as null
	if err := r.e.Decode(raw); err != nil {
		return "", false, err
	}
	pk := string(r.e.PartitionKey)
	if !r.want[pk] {
		return pk, false, nil
	}
	columnar := blockenc.IsColumnar(&r.e)
	if whole == columnar && !r.selectsAll {
		if !whole {
			rk := string(r.e.RowKey)
			r.rows[pk] = true
			if r.rowLo == "" || rk < r.rowLo {
				r.rowLo = rk
			}
			r.rowHi = max(r.rowHi, rk)
		}
		return pk, true, nil // a columnar block read whole again is already kept
	}
	b, err := r.tiers.decodeTierBlock(&r.e, r.tier, r.cols)
	if err != nil {
		return "", false, err
	}
	r.found[blockRef{pk, b.start}] = b
	return pk, true, nil
}

// readCached is the first pass of readTable (the blocks of names with keys in [rkLo,
// rkHi), selecting sel) through the block cache: it lists the keys and ETags of the
// entities the pass reads (the scan's filter for many names, a filter a group of
// maxSeriesPerFilter for few), takes those the cache holds at their ETag, and fetches the
// others in one query a filter, from the smallest RowKey missing to the largest (blocks key
// by their start: a rollup rewrites the newest ones). It reports whether the table is gone.
func (r *blockReader) readCached(ctx context.Context, client pager.Lister, names []string, rkLo, rkHi, sel string) (bool, error) {
	// Each query's series part: the scan's partition range for many names, a group's
	// equalities for few. The listing adds the read's RowKey range, the fetch the range of
	// the keys missing (within it): at most 15 comparisons either way.
	var parts []filter.Expr
	if len(names) > scanFilters*maxSeriesPerFilter {
		parts = []filter.Expr{filter.And(filter.Ge("PartitionKey", names[0]), filter.Le("PartitionKey", names[len(names)-1]))}
	} else {
		for i := 0; i < len(names); i += maxSeriesPerFilter {
			group := names[i:min(i+maxSeriesPerFilter, len(names))]
			parts = append(parts, anyPartition(group))
		}
	}
	type listed struct{ pk, rk, etag string }
	for _, part := range parts {
		f := filter.And(filter.Ge("RowKey", rkLo), filter.Lt("RowKey", rkHi), part)
		var all []listed
		got := map[[2]string][]byte{}
		lo, hi := "", ""
		e := entity.Entity{AllowStrings: true, AllowNull: true}
		for page, err := range pager.Each(ctx, client, pager.SubQuery{Filter: f.String(), Select: "PartitionKey,RowKey"}, 0) {
			if azerr.IsTableGone(err) {
				return true, nil
			}
			if err != nil {
				return false, err
			}
			for _, raw := range page.Entities {
				if err := e.Decode(raw); err != nil {
					return false, err
				}
				le := listed{string(e.PartitionKey), string(e.RowKey), string(e.ETag)}
				if !r.want[le.pk] {
					continue
				}
				all = append(all, le)
				if held, ok := r.tiers.cfg.Blocks.Get(cache.EntityKey{Table: r.table, PartitionKey: le.pk, RowKey: le.rk, Select: sel}, le.etag); ok {
					got[[2]string{le.pk, le.rk}] = held
					continue
				}
				if lo == "" || le.rk < lo {
					lo = le.rk
				}
				hi = max(hi, le.rk)
			}
		}
		if lo != "" {
			fetch := filter.And(filter.Ge("RowKey", lo), filter.Le("RowKey", hi), part)
			for page, err := range pager.Each(ctx, client, pager.SubQuery{Filter: fetch.String(), Select: sel}, 0) {
				if azerr.IsTableGone(err) {
					return true, nil
				}
				if err != nil {
					return false, err
				}
				for _, raw := range page.Entities {
					if err := e.Decode(raw); err != nil {
						return false, err
					}
					k := [2]string{string(e.PartitionKey), string(e.RowKey)}
					if _, held := got[k]; !held && r.want[k[0]] {
						got[k] = bytes.Clone(raw)
						r.hold(raw, sel)
					}
				}
			}
		}
		for _, le := range all {
			raw, ok := got[[2]string{le.pk, le.rk}]
			if !ok {
				continue // deleted between the listing and the fetch (Retain)
			}
			if _, _, err := r.add(raw, false); err != nil {
				return false, err
			}
		}
	}
	return false, nil
}

// hold puts an entity read with sel into the block cache, if there is one.
func (r *blockReader) hold(raw []byte, sel string) {
	if r.tiers.cfg.Blocks == nil {
		return
	}
	var e entity.Entity
	e.AllowStrings, e.AllowNull = true, true
	if e.Decode(raw) != nil || !r.want[string(e.PartitionKey)] {
		return
	}
	r.tiers.cfg.Blocks.Add(cache.EntityKey{Table: r.table, PartitionKey: string(e.PartitionKey), RowKey: string(e.RowKey), Select: sel}, string(e.ETag), raw)
}

// readShape names a read of a tier table: the table, the columns selected and the series.
func readShape(table, sel string, names []string) string {
	h := sha256.New()
	for _, n := range names {
		h.Write([]byte(n))
		h.Write([]byte{0})
	}
	return table + "\x00" + sel + "\x00" + string(h.Sum(nil))
}

// anyPartition is the filter of the entities of any of the series (a PartitionKey equality
// each).
func anyPartition(series []string) filter.Expr {
	eqs := make([]filter.Expr, len(series))
	for i, s := range series {
		eqs[i] = filter.Eq("PartitionKey", s)
	}
	return filter.Or(eqs...)
}
