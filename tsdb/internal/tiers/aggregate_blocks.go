package tiers

import (
	"bytes"
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
		if err := r.readTable(ctx, tr.service.NewClient(table), names, max(blo, p), min(hi, p+period)); err != nil {
			return nil, fmt.Errorf("tsdb: read tier: %w", err)
		}
	}
	return r.bySeries(), nil
}

func newBlockReader(tr *Tiers, t Tier, cols blockenc.Columns, names []string) *blockReader {
	r := &blockReader{tiers: tr, keys: tr.keys, tier: t, cols: cols, want: make(map[string]bool, len(names)), found: map[blockRef]*tierBlock{}}
	for _, s := range names {
		r.want[s] = true
	}
	return r
}

// bySeries are the blocks found, by series, each series' laid in order (laid): where two
// hold a window, cover takes the sealed one, or the one rolled up last.
func (r *blockReader) bySeries() map[string][]*tierBlock {
	out := map[string][]*tierBlock{}
	for ref, b := range r.found {
		out[ref.series] = append(out[ref.series], b)
	}
	for s, bs := range out {
		out[s] = laid(bs)
	}
	return out
}

// blockReader reads the blocks of a tier's tables.
type blockReader struct {
	tiers *Tiers
	keys  tierKeys
	tier  Tier
	cols  blockenc.Columns
	want  map[string]bool
	found map[blockRef]*tierBlock
	e     entity.Entity
	// rows are the series of the table being read that hold row blocks or flags (the
	// series layout's older versions), and the range of their starts: read again whole.
	rows         map[string]bool
	rowLo, rowHi uint64
	selectsAll   bool
	table        string // the name of the table being read
}

// readPart is a part of a read of many series: a scan (the keys' scanFilter) of the
// series, or a filter of a group of them (groupFilter).
type readPart struct {
	names []string
	scan  bool
}

// parts cuts the names of a read into its queries: a scan if they are more than
// scanFilters filters would hold, else the filters of the keys' groups.
func (r *blockReader) parts(names []string) []readPart {
	per := maxSeriesPerFilter
	if r.keys.packed() {
		per = maxPackedPerFilter
	}
	if len(names) > scanFilters*per {
		return []readPart{{names: names, scan: true}}
	}
	var out []readPart
	for _, g := range r.keys.groups(names) {
		out = append(out, readPart{names: g})
	}
	return out
}

// filter is the filter of the blocks of part starting in [lo, hi).
func (r *blockReader) filter(part readPart, lo, hi uint64) filter.Expr {
	if part.scan {
		return r.keys.scanFilter(part.names, lo, hi)
	}
	return r.keys.groupFilter(part.names, lo, hi)
}

// readTable reads the blocks of names starting in [lo, hi) (Unix seconds) of one tier table.
func (r *blockReader) readTable(ctx context.Context, client pager.Lister, names []string, lo, hi uint64) error {
	sel := blockenc.SelectColumnar(r.cols)
	r.rows, r.rowLo, r.rowHi = map[string]bool{}, 0, 0
	r.selectsAll = sel == "" // every column: the row blocks are read whole already
	if r.tiers.cfg.Blocks != nil {
		// Warm: this table was read before for the same series and columns (a panel
		// refreshed, or zoomed): a listing then saves what the cache holds. A read of other
		// series reads as ever, and fills the cache.
		shape := readShape(r.table, sel, names)
		_, warm := r.tiers.warm.Get(shape)
		r.tiers.warm.Add(shape, struct{}{})
		if warm {
			gone, err := r.readCached(ctx, client, names, lo, hi, sel)
			if gone || err != nil || len(r.rows) == 0 {
				return err
			}
			_, err = r.readFiltered(ctx, client, slices.Sorted(maps.Keys(r.rows)), r.rowLo, r.rowHi+1, "", true)
			return err
		}
	}
	var rest []string
	for _, part := range r.parts(names) {
		if !part.scan {
			rest = append(rest, part.names...)
			continue
		}
		// One scan of the series from the part's first to its last, as long as its pages
		// hold mostly asked series; the names not reached then are read by filters.
		for page, err := range pager.Each(ctx, client, pager.SubQuery{Filter: r.filter(part, lo, hi).String(), Select: sel}, 0) {
			if azerr.IsTableGone(err) {
				return nil
			}
			if err != nil {
				return err
			}
			asked, last := 0, ""
			for _, raw := range page.Entities {
				r.hold(raw, sel)
				series, ok, err := r.add(raw, false)
				if err != nil {
					return err
				}
				if ok {
					asked++
				}
				last = series
			}
			if n := len(page.Entities); n > 0 && 2*asked < n {
				rest = append(rest, r.keys.notBefore(part.names, last)...)
				break
			}
		}
	}
	gone, err := r.readFiltered(ctx, client, rest, lo, hi, sel, false)
	if gone || err != nil || len(r.rows) == 0 {
		return err
	}
	_, err = r.readFiltered(ctx, client, slices.Sorted(maps.Keys(r.rows)), r.rowLo, r.rowHi+1, "", true)
	return err
}

// readFiltered reads the blocks of names starting in [lo, hi), a query a group of the keys,
// selecting sel (whole: "" selects all, and only the row blocks and flags are kept). It
// reports whether the table is gone.
func (r *blockReader) readFiltered(ctx context.Context, client pager.Lister, names []string, lo, hi uint64, sel string, whole bool) (bool, error) {
	for _, group := range r.keys.groups(names) {
		f := r.keys.groupFilter(group, lo, hi)
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
// returns the entity's series and whether it is asked for.
func (r *blockReader) add(raw []byte, whole bool) (string, bool, error) {
	r.e = entity.Entity{AllowStrings: true, AllowNull: true} // $select: absent columns come as null
	if err := r.e.Decode(raw); err != nil {
		return "", false, err
	}
	series, start, ok := r.keys.parse(string(r.e.PartitionKey), string(r.e.RowKey))
	if !ok {
		return "", false, notBlock(&r.e)
	}
	if !r.want[series] {
		return series, false, nil
	}
	columnar := blockenc.IsColumnar(&r.e)
	if whole == columnar && !r.selectsAll {
		if !whole {
			if len(r.rows) == 0 || start < r.rowLo {
				r.rowLo = start
			}
			r.rows[series] = true
			r.rowHi = max(r.rowHi, start)
		}
		return series, true, nil // a columnar block read whole again is already kept
	}
	b, err := r.tiers.decodeTierBlock(&r.e, r.tier, r.cols)
	if err != nil {
		return "", false, err
	}
	r.found[blockRef{series, b.start}] = b
	return series, true, nil
}

// notBlock is the error of a tier table's entity whose keys are no block's of the layout.
func notBlock(e *entity.Entity) error {
	return &entity.DecodeError{PartitionKey: string(e.PartitionKey), RowKey: string(e.RowKey), Reason: "keys of no tier block"}
}

// readCached is the first pass of readTable (the blocks of names starting in [lo, hi),
// selecting sel) through the block cache: it lists the keys and ETags of the entities each
// of its queries reads (parts), takes those the cache holds at their ETag, and fetches the
// others in one query a part, of the starts from the smallest missing to the largest (a
// rollup rewrites the newest blocks). It reports whether the table is gone.
func (r *blockReader) readCached(ctx context.Context, client pager.Lister, names []string, lo, hi uint64, sel string) (bool, error) {
	type listed struct{ pk, rk, etag string }
	for _, part := range r.parts(names) {
		var all []listed
		got := map[[2]string][]byte{}
		var mlo, mhi uint64
		missing := false
		e := entity.Entity{AllowStrings: true, AllowNull: true}
		for page, err := range pager.Each(ctx, client, pager.SubQuery{Filter: r.filter(part, lo, hi).String(), Select: "PartitionKey,RowKey"}, 0) {
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
				series, start, ok := r.keys.parse(le.pk, le.rk)
				if !ok {
					return false, notBlock(&e)
				}
				if !r.want[series] {
					continue
				}
				all = append(all, le)
				if held, ok := r.tiers.cfg.Blocks.Get(cache.EntityKey{Table: r.table, PartitionKey: le.pk, RowKey: le.rk, Select: sel}, le.etag); ok {
					got[[2]string{le.pk, le.rk}] = held
					continue
				}
				if !missing || start < mlo {
					mlo = start
				}
				mhi, missing = max(mhi, start), true
			}
		}
		if missing {
			for page, err := range pager.Each(ctx, client, pager.SubQuery{Filter: r.filter(part, mlo, mhi+1).String(), Select: sel}, 0) {
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
					series, _, ok := r.keys.parse(k[0], k[1])
					if _, held := got[k]; !held && ok && r.want[series] {
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
	if e.Decode(raw) != nil {
		return
	}
	if series, _, ok := r.keys.parse(string(e.PartitionKey), string(e.RowKey)); !ok || !r.want[series] {
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
