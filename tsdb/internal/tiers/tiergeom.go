package tiers

import (
	"time"

	"github.com/seed71701133/tablets/internal/blockenc"
)

// The geometry of the columnar blocks (docs/format.md, "Columnar tier blocks").
//
// Rollup works a slice at a time: 24 windows of the coarsest tier (a day by default). A
// columnar block of a tier spans whole slices, or tiles one: as many windows as a read
// wants in one entity (an entity costs about 200 bytes of keys and metadata on the wire,
// whatever it holds) while a rollup of one slice rewrites little more than that slice. By
// default: a day of minutes (1,440 windows) and 14 days of hours (336).

// maxColumnarSlices bounds the slices of a columnar block: a rollup of one slice reads and
// rewrites the whole block.
const maxColumnarSlices = 14

// Slice is the span of Rollup's unit of work (and of the dirty markers): 24 windows of
// the coarsest tier; 0 without tiers.
func (tr *Tiers) Slice() time.Duration { return SliceOf(tr.cfg.Tiers) }

// SliceOf is the span of Rollup's slice of tiers (finest first, as CheckTiers returns them):
// 24 windows of the coarsest; 0 without tiers.
func SliceOf(tiers []Tier) time.Duration {
	if len(tiers) == 0 {
		return 0
	}
	return tiers[len(tiers)-1].block()
}

// ColumnarSpan is the span of tier t's columnar blocks, when slice is the span of a
// Rollup's slice: the longest multiple of 24 windows, of at most
// blockenc.MaxColumnarWindows windows, that divides t's Period and either divides slice or
// is at most maxColumnarSlices slices. 24 windows (a row block's span) always qualify, and
// are the span when slice is 0 (no tiers).
func ColumnarSpan(t Tier, slice time.Duration) time.Duration {
	best := t.block()
	if slice <= 0 {
		return best
	}
	for j := 2; j*blockWindows <= blockenc.MaxColumnarWindows; j++ {
		span := time.Duration(j) * t.block()
		if t.Period%span != 0 {
			continue
		}
		if slice%span == 0 || (span%slice == 0 && span/slice <= maxColumnarSlices) {
			best = span
		}
	}
	return best
}

// blockSpan is the span of the columnar blocks of tier t of tr.
func (tr *Tiers) blockSpan(t Tier) time.Duration { return ColumnarSpan(t, tr.Slice()) }
