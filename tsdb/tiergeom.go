package tsdb

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

// slice is the span of Rollup's unit of work (and of the dirty markers): 24 windows of
// the coarsest tier; 0 without tiers.
func (tr *tiers) slice() time.Duration {
	tiers := tr.opts.Tiers
	if len(tiers) == 0 {
		return 0
	}
	return tiers[len(tiers)-1].block()
}

// columnarSpan is the span of tier t's columnar blocks, when slice is the span of a
// Rollup's slice: the longest multiple of 24 windows, of at most
// blockenc.MaxColumnarWindows windows, that divides t's Period and either divides slice or
// is at most maxColumnarSlices slices. 24 windows (a row block's span) always qualify.
func columnarSpan(t Tier, slice time.Duration) time.Duration {
	best := t.block()
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
func (tr *tiers) blockSpan(t Tier) time.Duration { return columnarSpan(t, tr.slice()) }
