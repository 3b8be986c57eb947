package tsdb

import (
	"cmp"
	"slices"
	"time"

	"github.com/seed71701133/tablets/internal/batch"
	"github.com/seed71701133/tablets/internal/histenc"
	"github.com/seed71701133/tablets/internal/stageenc"
)

// Histogram samples are staged as float points are (staging.go), in entities of their own
// in the same table: V is stageHistVersion, each column a histogram column
// (stageenc.AppendHist), and T and U are the time keys after the letter "h". As "h" sorts
// after every hex digit, a read of float entities (T and U compared with bare time keys)
// never matches a histogram entity, nor a read of histogram entities a float one: each kind
// is selected by the same two comparisons (docs/format.md, "Staging entities").

// stageHistKeyPrefix starts the time keys T and U of a histogram staging entity.
const stageHistKeyPrefix = "h"

// stageHistTimeKey is the time key of a histogram staging entity's T or U.
func stageHistTimeKey(ms int64) string { return stageHistKeyPrefix + stageTimeKey(ms) }

// addHist adds a series' record (its chunk encoded) to a histogram entity.
func (e *stagingEntity) addHist(column int, key string, chunk []byte, first, last int64, samples int, piece stagedPiece) {
	n := stageenc.HistRecordSize(key, len(chunk))
	if e.sizes[column] == 0 {
		e.sizes[column] = stageenc.HeaderSize
		e.size += stageenc.HeaderSize
	}
	e.sizes[column] += n
	e.size += n
	e.histRecords[column] = stageenc.AppendHistRecord(e.histRecords[column], key, chunk)
	e.points += samples
	if len(e.pieces) == 0 || first < e.first {
		e.first = first
	}
	if len(e.pieces) == 0 || last > e.last {
		e.last = last
	}
	e.pieces = append(e.pieces, piece)
}

// histUnit is the millisecond of a histogram sample's time (checked before: Units cannot
// fail).
func histUnit(t time.Time) uint64 {
	u, _ := histFormat.Units(t)
	return u
}

// sortedHists sorts the histogram samples idx (indexes into samples) by millisecond, the
// later argument winning a millisecond, with the arguments of each millisecond (for
// failures: a failed record lists them all).
func sortedHists(samples []sample, idx []int) ([]histenc.Sample, [][]int) {
	units := make([]uint64, len(idx))
	for j, i := range idx {
		units[j] = histUnit(samples[i].t)
	}
	byUnit := map[uint64][]int{}
	for j, i := range idx {
		byUnit[units[j]] = append(byUnit[units[j]], i)
	}
	kept := batch.LastWins(units)
	sorted := make([]histenc.Sample, len(kept))
	args := make([][]int, len(kept))
	for j, k := range kept {
		h := samples[idx[k]]
		sorted[j] = histenc.Sample{Unit: units[k], H: h.h, FH: h.fh}
		args[j] = byUnit[units[k]]
	}
	return sorted, args
}

// stagedHist is a staged histogram sample and where it was staged (see stagedPoint).
type stagedHist struct {
	sample histenc.Sample
	stamp  uint64
	record int
}

// lastHistWrites sorts staged samples by time and keeps, of each millisecond, the last
// write.
func lastHistWrites(hs []stagedHist) []histenc.Sample {
	slices.SortFunc(hs, func(a, b stagedHist) int {
		return cmp.Or(cmp.Compare(a.sample.Unit, b.sample.Unit), cmp.Compare(a.stamp, b.stamp), cmp.Compare(a.record, b.record))
	})
	out := make([]histenc.Sample, 0, len(hs))
	for i, h := range hs {
		if i+1 < len(hs) && hs[i+1].sample.Unit == h.sample.Unit {
			continue
		}
		out = append(out, h.sample)
	}
	return out
}

// knownDropped reports whether period p is known to have been dropped by Retain.
func (t *periodTables) knownDropped(p uint64) bool {
	_, dropped := t.dropped.get(p)
	return dropped
}
