package tiers

import (
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets/internal/batch"
	"github.com/seed71701133/tablets/tsdb/internal/times"
)

// A tail is a columnar block of the windows one rollup computed, written beside the block at
// its span's start (docs/format.md, "Tails"): the rollup reads no block, only the keys and
// ETag of the block at the span's start, its guard, and writes in one transaction:
//   - the tail, as new (an Add: a tail already there, from a rollup of the same windows,
//     fails it);
//   - an empty merge into the block at the span's start, conditional on the guard's ETag.
//     A splice of the span since the guard was read (another server's rollup of a dirty
//     slice, with a late point the tail's raw read missed) replaced or deleted that block,
//     so the tail's write fails rather than lay stale windows over the splice's.
//
// Where the span has no block at its start (nothing rolled up there yet, or nothing with
// points), the tail is written there, as new, its windows before the rollup's empty and
// unsealed: the next tails have their guard, and a splice writing the same block fails it.
// A failed write rolls the series up again by itself, splicing (rollupSeries).

// tailWrite returns the operations that write series' windows [a, b) of tier t (fresh, by
// start) as a tail guarded by guard (the ETag of the block at the span's start; "": none).
func (tr *Tiers) tailWrite(series string, t Tier, guard azcore.ETag, fresh map[uint64]*Window, a, b uint64, now time.Time) (sliceWrite, error) {
	step := uint64(t.Step / time.Second)
	bs := times.FloorSec(a, tr.blockSpan(t))
	start := a
	if guard == "" {
		start = bs
	}
	n := int((b - start) / step)
	windows, sealed := make([]*Window, n), make([]bool, n)
	sealBefore := times.Unix(now.Add(-tr.cfg.SealDelay))
	some := false
	for ws := a; ws < b; ws += step {
		i := (ws - start) / step
		if w := fresh[ws]; w != nil && (w.Count > 0 || w.hist != nil || w.NaNs > 0) {
			windows[i], some = w, true // (a window of staleness markers only is none)
		}
		sealed[i] = ws+step <= sealBefore
	}
	if !some && guard == "" {
		return nil, nil // nothing rolled up in the span, nothing to roll up
	}
	body, _, err := tr.appendColumnarFitting(series, t, start, windows, sealed, float64(now.Unix()), true)
	if err != nil {
		return nil, err
	}
	ops := []aztables.TransactionAction{{ActionType: aztables.TransactionTypeAdd, Entity: body}}
	if guard != "" {
		ops = append(ops, aztables.TransactionAction{ActionType: aztables.TransactionTypeUpdateMerge,
			Entity: batch.KeysBody(tr.keys.keys(series, bs)), IfMatch: &guard})
	}
	return sliceWrite{tierPeriod(t, bs): {ops}}, nil
}
