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
//   - the tail, inserted or replacing one at its key (a rollup of the same windows again:
//     after a crash, or by another server);
//   - an empty merge into the block at the span's start, conditional on the guard's ETag.
//
// Every write into a span changes that block's ETag (a tail's merge, a splice's replace), so
// the guard versions the span: a tail computed from raw points read after its guard is
// written only if nothing was written into the span since. A splice in between (another
// server's rollup of a dirty slice, with a late point the tail's raw read missed) fails it,
// rather than the tail laying stale windows over the splice's; so does another tail.
//
// Where the span has no block at its start (nothing rolled up there yet, or nothing with
// points), the tail is written there, as new, its windows before the rollup's empty and
// unsealed: it is the next tails' guard, and a splice writing the same block fails it. A
// failed write rolls the series up again by itself, splicing (rollupSeries).

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
	if guard == "" {
		return sliceWrite{tierPeriod(t, bs): {{{ActionType: aztables.TransactionTypeAdd, Entity: body}}}}, nil
	}
	ops := []aztables.TransactionAction{
		{ActionType: aztables.TransactionTypeInsertReplace, Entity: body},
		{ActionType: aztables.TransactionTypeUpdateMerge, Entity: batch.KeysBody(tr.keys.keys(series, bs)), IfMatch: &guard},
	}
	return sliceWrite{tierPeriod(t, bs): {ops}}, nil
}
