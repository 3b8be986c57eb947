package tiers

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/filter"
	"github.com/seed71701133/tablets/internal/batch"
	"github.com/seed71701133/tablets/internal/blockenc"
	"github.com/seed71701133/tablets/internal/pager"
	"github.com/seed71701133/tablets/tsdb/internal/azerr"
	"github.com/seed71701133/tablets/tsdb/internal/times"
)

// A Rollup of a slice splices it into the columnar blocks that overlap it: for each tier,
// it reads every entity stored in the span of those blocks (the columnar blocks, and the
// row blocks and stale flags of older versions, with their ETags), computes the slice's
// windows from the raw points, and writes each block with the slice's windows new and its
// others as stored (a row block's too: this converts it), conditionally on the ETags read,
// deleting the row blocks and flags it replaces in the same transaction. A block computed
// equal to the one stored is not written: its ETag does not change, so concurrent rollers
// of a range already rolled up do not fail each other's writes. A rollup of a few windows
// that complete no segment writes them as a tail instead (rolluptail.go).

// storedSpan is the range of Unix seconds of tier t's blocks that a rollup of [lo, hi)
// (slices) reads and rewrites: whole columnar blocks.
func (tr *Tiers) storedSpan(t Tier, lo, hi uint64) (uint64, uint64) {
	span := tr.blockSpan(t)
	return times.FloorSec(lo, span), ceilSec(hi, span)
}

// readSeriesBlocks reads, per tier, the entities of series stored in the blocks that hold
// the windows w: a query per tier table with windows in w.
func (tr *Tiers) readSeriesBlocks(ctx context.Context, series string, w rollupWindows) (storedBlocks, error) {
	stored := make(storedBlocks, len(tr.cfg.Tiers))
	for i, t := range tr.cfg.Tiers {
		lo, hi := w.tiers[i][0], w.tiers[i][1]
		if lo >= hi {
			continue
		}
		blo, bhi := tr.storedSpan(t, lo, hi)
		f := tr.keys.groupFilter([]string{series}, blo, bhi)
		err := tr.readTierEntities(ctx, t, blo, bhi, f, "", func(_ string, raw []byte) {
			stored[i] = append(stored[i], raw)
		})
		if err != nil {
			return nil, err
		}
	}
	return stored, nil
}

// storedBlocks are the entities of one series read in the span of a slice's blocks, per
// tier, as read (JSON): a batched Rollup holds many series' at once, decoded one series at
// a time.
type storedBlocks [][][]byte

// readTierEntities calls each with the series and JSON of every entity of tier t matching f
// in the tier tables of [blo, bhi), selecting sel ("": every property).
func (tr *Tiers) readTierEntities(ctx context.Context, t Tier, blo, bhi uint64, f filter.Expr, sel string, each func(series string, raw []byte)) error {
	q := pager.SubQuery{Filter: f.String(), Select: sel}
	for p := tierPeriod(t, blo); p < bhi; p += uint64(t.Period / time.Second) {
		var e entity.Entity
		e.AllowStrings = true
		for page, err := range pager.Each(ctx, tr.service.NewClient(tr.TierTable(t, p)), q, 0) {
			if azerr.IsTableGone(err) {
				break
			}
			if err != nil {
				return fmt.Errorf("read blocks: %w", err)
			}
			for _, raw := range page.Entities {
				if err := e.Decode(raw); err != nil {
					return fmt.Errorf("read blocks: %w", err)
				}
				series, _, ok := tr.keys.parse(string(e.PartitionKey), string(e.RowKey))
				if !ok {
					return fmt.Errorf("read blocks: %w", notBlock(&e))
				}
				each(series, slices.Clone(raw))
			}
		}
	}
	return nil
}

// decodeStored decodes the entities of one series read for a slice, per tier; of a tier
// written as a tail (tails), the entity read is the keys of the block at its span's start,
// if any, whose ETag it returns as that tier's guard.
func (tr *Tiers) decodeStored(stored storedBlocks, tails []bool) ([][]*tierBlock, []azcore.ETag, error) {
	out := make([][]*tierBlock, len(tr.cfg.Tiers))
	guards := make([]azcore.ETag, len(tr.cfg.Tiers))
	e := entity.Entity{AllowStrings: true}
	for i, raws := range stored {
		for _, raw := range raws {
			if err := e.Decode(raw); err != nil {
				return nil, nil, fmt.Errorf("read blocks: %w", err)
			}
			if tails[i] {
				guards[i] = azcore.ETag(e.ETag)
				continue
			}
			tb, err := tr.decodeTierBlock(&e, tr.cfg.Tiers[i], blockenc.AllColumns)
			if err != nil {
				return nil, nil, fmt.Errorf("read blocks: %w", err)
			}
			out[i] = append(out[i], tb)
		}
	}
	return out, guards, nil
}

// computeWindows aggregates points and histogram samples (each oldest first) into tier t's
// windows, by the Unix second of their start.
func (tr *Tiers) computeWindows(t Tier, pts []tablets.Point, hists []tablets.HistogramPoint) map[uint64]*Window {
	windows := map[uint64]*Window{}
	step := uint64(t.Step / time.Second)
	windowOf := func(tm time.Time) *Window {
		ws := times.FloorSec(times.Unix(tm), t.Step)
		w := windows[ws]
		if w == nil {
			w = newWindow(times.At(ws), tr.cfg.Accuracy)
			windows[ws] = w
		}
		return w
	}
	for _, p := range pts {
		windowOf(p.Time).add(p.Time, p.Value)
	}
	for len(hists) > 0 {
		// The samples of one window, then their window (none if all are staleness markers).
		w := windowOf(hists[0].Time)
		end := times.At(times.Unix(w.Start) + step)
		n := 1
		for n < len(hists) && hists[n].Time.Before(end) {
			n++
		}
		if h := histWindowOf(hists[:n]); h != nil {
			w.hist = h
		}
		hists = hists[n:]
	}
	return windows
}

// sliceWrite is what a rollup of a slice writes of one series and tier: per tier table
// (by period start), the operations of each block, one block's together.
type sliceWrite map[uint64][][]aztables.TransactionAction

// spliceSlice computes tier t's columnar blocks of series overlapping [lo, hi) (a slice, or
// several) from stored (the entities read in their span) and fresh (the windows of [lo, hi)
// computed, by start), sealing those that ended SealDelay before now, and returns the
// operations that write those that changed.
func (tr *Tiers) spliceSlice(series string, t Tier, stored []*tierBlock, fresh map[uint64]*Window, lo, hi uint64, now time.Time) (sliceWrite, error) {
	span := tr.blockSpan(t)
	blo, bhi := tr.storedSpan(t, lo, hi)
	step := uint64(t.Step / time.Second)
	out := sliceWrite{}
	for bs := blo; bs < bhi; bs += uint64(span / time.Second) {
		be := bs + uint64(span/time.Second)
		var in []*tierBlock // what is stored in the block's span
		for _, tb := range stored {
			if tb.start >= bs && tb.start < be {
				in = append(in, tb)
			}
		}
		n := int(span / t.Step)
		windows, sealed, inexact := overlay(in, bs, be, step, n)
		sealBefore := times.Unix(now.Add(-tr.cfg.SealDelay))
		for ws := max(lo, bs); ws < min(hi, be); ws += step {
			i := (ws - bs) / step
			windows[i], inexact[i] = fresh[ws], false
			if w := windows[i]; w != nil && w.Count == 0 && w.hist == nil && w.NaNs == 0 {
				windows[i] = nil // staleness markers only
			}
			sealed[i] = ws+step <= sealBefore
		}
		// The block stores NaNs and Resets only if it knows them for every window: those
		// it keeps of a block that did not store them, it does not.
		exact := !slices.Contains(inexact, true)
		ops, err := tr.blockOps(series, t, bs, in, windows, sealed, float64(now.Unix()), exact)
		if err != nil {
			return nil, err
		}
		if len(ops) > 0 {
			p := tierPeriod(t, bs)
			out[p] = append(out[p], ops)
		}
	}
	return out, nil
}

// overlay lays out the windows stored in a block's span [bs, be) (in: of any format) as n
// windows of step seconds from bs, as a reader takes them (laid): where two entities hold a
// window (tails beside their block, or a row block written by an older version beside a
// columnar block), the sealed one, or the most recently rolled up of those alike; the
// windows of a stale flag are unsealed. inexact says which windows came from a block that
// did not store their NaNs and Resets.
func overlay(in []*tierBlock, bs, be, step uint64, n int) (windows []*Window, sealed, inexact []bool) {
	windows = make([]*Window, n)
	sealed = make([]bool, n)
	inexact = make([]bool, n)
	held := make([]bool, n)
	for _, tb := range laid(in) {
		if tb.version == 0 {
			continue
		}
		for j, w := range tb.windows {
			ws := tb.start + uint64(j)*step
			if ws < bs || ws >= be {
				continue
			}
			i := (ws - bs) / step
			s := j < len(tb.sealed) && tb.sealed[j]
			if replaces(held[i], sealed[i], s) {
				windows[i], sealed[i], held[i], inexact[i] = w, s, true, !tb.exact
			}
		}
	}
	for _, tb := range in {
		if tb.version != 0 {
			continue
		}
		for j := range blockWindows {
			if ws := tb.start + uint64(j)*step; ws >= bs && ws < be {
				sealed[(ws-bs)/step] = false
			}
		}
	}
	return windows, sealed, inexact
}

// laid are blocks in the order a reader lays their windows over each other: of when they
// were rolled up, then of their starts (a tail after its block: R has a second's
// resolution).
func laid(blocks []*tierBlock) []*tierBlock {
	out := slices.Clone(blocks)
	slices.SortStableFunc(out, func(a, b *tierBlock) int {
		return cmp.Or(cmpFloat(a.rolled, b.rolled), cmp.Compare(a.start, b.start))
	})
	return out
}

// replaces reports whether a block's window (sealed or not) replaces the one laid before it
// (held: there is one; heldSealed: sealed). An unsealed window never replaces a sealed one: a
// window is sealed when computed the seal delay after its end, from every point but late
// ones, whose dirty markers readers heed until their slice is rolled up again; an unsealed
// one laid after it is a tail's window before its own (docs/format.md, "Tails") or a
// computation before the seal (another server's clock or seal delay).
func replaces(held, heldSealed, sealed bool) bool { return !held || sealed || !heldSealed }

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// blockOps returns the operations that store the block of series starting at bs (windows
// and sealed, rolled at rolled) in place of the entities in its span (in): none when the
// columnar block stored there already holds exactly that. exact: the block is written with
// its windows' NaNs and Resets.
func (tr *Tiers) blockOps(series string, t Tier, bs uint64, in []*tierBlock, windows []*Window, sealed []bool, rolled float64, exact bool) ([]aztables.TransactionAction, error) {
	var atKey *tierBlock // the entity at the block's key, of any format
	for _, tb := range in {
		if tb.start == bs {
			atKey = tb
		}
	}
	stored := atKey != nil && len(in) == 1 && atKey.version == blockenc.VersionColumnar && atKey.exact == exact
	if stored && sameWindows(atKey, windows, sealed) {
		return nil, nil
	}
	empty := !slices.ContainsFunc(windows, func(w *Window) bool { return w != nil })
	var ops []aztables.TransactionAction
	if !empty {
		body, kept, err := tr.appendColumnarFitting(series, t, bs, windows, sealed, rolled, exact)
		if err != nil {
			return nil, err
		}
		if stored && sameWindows(atKey, kept, sealed) {
			return nil, nil // as stored, once left out what does not fit
		}
		if atKey != nil {
			etag := atKey.etag
			ops = append(ops, aztables.TransactionAction{ActionType: aztables.TransactionTypeUpdateReplace, Entity: body, IfMatch: &etag})
		} else {
			ops = append(ops, aztables.TransactionAction{ActionType: aztables.TransactionTypeAdd, Entity: body})
		}
	}
	for _, tb := range in {
		if tb == atKey && !empty {
			continue
		}
		etag := tb.etag
		ops = append(ops, aztables.TransactionAction{ActionType: aztables.TransactionTypeDelete, Entity: batch.KeysBody(tr.keys.keys(series, tb.start)), IfMatch: &etag})
	}
	return ops, nil
}

// appendColumnarFitting returns the entity of the columnar block, and its windows as
// stored: when it would not fit an entity, without the windows' sketches (their quantiles
// are then read raw, or unknown), then without their histograms (stored as too large,
// read raw).
func (tr *Tiers) appendColumnarFitting(series string, t Tier, bs uint64, windows []*Window, sealed []bool, rolled float64, exact bool) ([]byte, []*Window, error) {
	body, err := tr.appendColumnar(series, t.Step, toColumnar(bs, windows, sealed, rolled, exact))
	if !errors.Is(err, blockenc.ErrTooLarge) {
		return body, windows, err
	}
	lean := make([]*Window, len(windows))
	for i, w := range windows {
		if w != nil {
			c := *w
			c.sk = nil
			lean[i] = &c
		}
	}
	body, err = tr.appendColumnar(series, t.Step, toColumnar(bs, lean, sealed, rolled, exact))
	if !errors.Is(err, blockenc.ErrTooLarge) {
		return body, lean, err
	}
	for _, w := range lean {
		if w != nil && w.hist != nil {
			w.hist = &histWindow{kind: histTooLarge, count: w.hist.count}
		}
	}
	body, err = tr.appendColumnar(series, t.Step, toColumnar(bs, lean, sealed, rolled, exact))
	if err != nil {
		return nil, nil, fmt.Errorf("block %s: %w", blockKey(bs), err)
	}
	return body, lean, nil
}

// appendColumnar is the entity of columnar block c of series, at the keys of the layout.
func (tr *Tiers) appendColumnar(series string, step time.Duration, c *blockenc.Columnar) ([]byte, error) {
	if tr.keys.packed() {
		return blockenc.AppendColumnarPacked(nil, series, step, c)
	}
	return blockenc.AppendColumnar(nil, series, step, c)
}

// sameWindows reports whether the stored block tb holds exactly windows and sealed (its
// Rolled aside).
func sameWindows(tb *tierBlock, windows []*Window, sealed []bool) bool {
	if len(tb.windows) != len(windows) || !slices.Equal(tb.sealed, sealed) {
		return false
	}
	for i, w := range windows {
		if !sameWindow(tb.windows[i], w) {
			return false
		}
	}
	return true
}

// sameWindow reports whether two windows (nil: none) store the same aggregates, sketches
// and histogram windows.
func sameWindow(a, b *Window) bool {
	if a == nil || b == nil {
		return a == b
	}
	same := func(x, y float64) bool { return math.Float64bits(x) == math.Float64bits(y) }
	if a.Count != b.Count || (a.hist == nil) != (b.hist == nil) || a.NaNs != b.NaNs || !same(a.Resets, b.Resets) ||
		a.resetsUnknown != b.resetsUnknown {
		return false
	}
	if a.Count > 0 {
		if !same(a.Sum, b.Sum) || !same(a.Min, b.Min) || !same(a.Max, b.Max) || !same(a.First, b.First) || !same(a.Last, b.Last) ||
			!a.firstT.Equal(b.firstT) || !a.lastT.Equal(b.lastT) || (a.sk == nil) != (b.sk == nil) {
			return false
		}
		if a.sk != nil && !bytes.Equal(a.sk.Append(nil), b.sk.Append(nil)) {
			return false
		}
	}
	return a.hist == nil || bytes.Equal(appendHistWindow(nil, a.hist, a.Start), appendHistWindow(nil, b.hist, b.Start))
}

// blockWrite is what a rollup of windows writes of one series into one partition of a
// tier table: the operations of each block that changed, one block's together.
type blockWrite struct {
	table, pk string
	series    string
	blocks    [][]aztables.TransactionAction
}

// sliceWrites computes what a rollup of the windows w writes of series (each tier's
// operations, spliceSlice's or tailWrite's), from the blocks stored there (nil: none), the
// guards of the tiers written as tails (decodeStored's; nil: none) and its points and
// histogram samples of w: a blockWrite per tier table, but those of tables past the tier's
// retention (Aggregate reads raw points there, if any).
func (tr *Tiers) sliceWrites(ctx context.Context, series string, stored [][]*tierBlock, guards []azcore.ETag, pts []tablets.Point, hists []tablets.HistogramPoint, w rollupWindows, now time.Time) ([]blockWrite, error) {
	var out []blockWrite
	tails := tr.tails(w)
	for i, t := range tr.cfg.Tiers {
		lo, hi := w.tiers[i][0], w.tiers[i][1]
		if lo >= hi {
			continue // no window of this tier to write
		}
		var in []*tierBlock
		if stored != nil {
			in = stored[i]
		}
		var sw sliceWrite
		var err error
		if tails[i] {
			var guard azcore.ETag
			if guards != nil {
				guard = guards[i]
			}
			sw, err = tr.tailWrite(series, t, guard, tr.computeWindows(t, pts, hists), lo, hi, now)
		} else {
			sw, err = tr.spliceSlice(series, t, in, tr.computeWindows(t, pts, hists), lo, hi, now)
		}
		if err != nil {
			return nil, err
		}
		for _, p := range slices.Sorted(maps.Keys(sw)) {
			name := tr.TierTable(t, p)
			if err := tr.tables.ensure(ctx, name); errors.Is(err, errTierDropped) {
				continue
			} else if err != nil {
				return nil, err
			}
			out = append(out, blockWrite{table: name, pk: tr.keys.partition(series), series: series, blocks: sw[p]})
		}
	}
	return out, nil
}

// computeWrites computes what a rollup of the windows w writes of series (sliceWrites)
// from its entities stored there (decoded here) and its points and histogram samples of w,
// under the rollup's compute limit: decoding and encoding blocks is CPU alone.
func (tr *Tiers) computeWrites(ctx context.Context, series string, stored storedBlocks, pts []tablets.Point, hists []tablets.HistogramPoint, w rollupWindows) ([]blockWrite, error) {
	var writes []blockWrite
	err := tr.compute().do(ctx, func() error {
		tails := tr.tails(w)
		blocks, guards, err := tr.decodeStored(stored, tails)
		if err != nil {
			return err
		}
		writes, err = tr.sliceWrites(ctx, series, blocks, guards, pts, hists, w, tr.now())
		return err
	})
	return writes, err
}

// submitWrites writes what sliceWrites computed: each tier table's in as few transactions
// as the batch limits allow, a block's operations always in one. An error that
// batch.IsConflict matches means a block changed since it was read.
func (tr *Tiers) submitWrites(ctx context.Context, writes []blockWrite) error {
	for _, bw := range writes {
		if err := submitBlocks(ctx, tr.service.NewClient(bw.table), bw.pk, bw.blocks); err != nil {
			return err
		}
	}
	return nil
}

// opsBytes is what operations take of a transaction's body: their entities and multipart
// headers.
func opsBytes(pk string, ops []aztables.TransactionAction) int {
	n := 0
	for _, op := range ops {
		n += len(op.Entity) + 2*len(pk) + 512 // the operation's multipart headers
	}
	return n
}

// fitsBatch reports whether a transaction of n operations of size bytes can take ops too.
func fitsBatch(n, size int, pk string, ops []aztables.TransactionAction) bool {
	return n+len(ops) <= entity.MaxBatchOperations && size+opsBytes(pk, ops) <= entity.MaxBatchBytes-64<<10
}

// submitBlocks sends the operations of blocks of one partition, in transactions under the
// batch limits, each block's in one.
func submitBlocks(ctx context.Context, client *aztables.Client, pk string, blocks [][]aztables.TransactionAction) error {
	var txn []aztables.TransactionAction
	size := 0
	for _, ops := range blocks {
		if len(txn) > 0 && !fitsBatch(len(txn), size, pk, ops) {
			if err := batch.Submit(ctx, client, pk, txn); err != nil {
				return err
			}
			txn, size = nil, 0
		}
		txn = append(txn, ops...)
		size += opsBytes(pk, ops)
	}
	if len(txn) > 0 {
		return batch.Submit(ctx, client, pk, txn)
	}
	return nil
}
