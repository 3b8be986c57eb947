package tiers

import (
	"time"

	"github.com/seed71701133/tablets/internal/blockenc"
	"github.com/seed71701133/tablets/tsdb/internal/times"
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

// A rollup of windows sealed since the last one (the maintenance loop's, a quarter of an
// hour's by default) writes them as a tail: a columnar block of just those windows, beside
// the block at its span's start, rather than read and rewrite that block whole. The tails
// of a segment (tailSegment, or the tier's 24 windows if longer) are spliced into the block
// by the rollup that completes the segment, and a tail holds at least 1/maxSegmentTails of
// a segment: a reader reads at most that many tails beside a block, and a rollup reads and
// rewrites a block whole at most once a segment. See docs/format.md, "Tails".

// tailSegment bounds a tier's segment: the tails written before a splice.
const tailSegment = 4 * time.Hour

// maxSegmentTails bounds the tails of a segment: a rollup of fewer of its windows (one a
// minute, say) splices them, as before tails.
const maxSegmentTails = 24

// segment is the span of tier t's segments: the longest multiple of its 24 windows, at most
// tailSegment (or 24 windows), that divides its block span. By default: 4 hours of
// minutes (6 a day's block, tails of at least 10 minutes) and a day of hours (14 a
// fortnight's, tails of an hour or more).
func (tr *Tiers) segment(t Tier) time.Duration {
	span, block := tr.blockSpan(t), t.block()
	best := block
	for k := time.Duration(2); k*block <= tailSegment; k++ {
		if span%(k*block) == 0 {
			best = k * block
		}
	}
	return best
}

// writesTail reports whether a rollup writes tier t's windows [a, b) (Unix seconds) as a
// tail: they lie in one block span, not at its start (the first windows of a span are
// spliced, which makes the block at its start), hold at least 1/maxSegmentTails of a
// segment and complete none.
func (tr *Tiers) writesTail(t Tier, a, b uint64) bool {
	span := uint64(tr.blockSpan(t) / time.Second)
	seg := tr.segment(t)
	bs := a / span * span
	return a > bs && b <= bs+span && (b-a)*maxSegmentTails >= uint64(seg/time.Second) && times.FloorSec(b, seg) <= a
}
