package tsdb

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/seed71701133/tablets/internal/batch"
	"github.com/seed71701133/tablets/internal/histenc"
	"github.com/seed71701133/tablets/internal/priority"
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

// histToStage is one series' histogram samples to stage, sorted by millisecond with the
// last argument of a millisecond kept, and the caller's samples of each (for failures).
type histToStage struct {
	samples []histenc.Sample
	args    [][]HistogramPoint // args[i]: the arguments of samples[i]'s millisecond
}

// sortedHists sorts a plan's samples idx (indexes into pl.samples) by millisecond, the
// later argument winning a millisecond.
func sortedHists(pl histPlanned, idx []int) histToStage {
	units := make([]uint64, len(idx))
	for j, i := range idx {
		units[j] = pl.units[i]
	}
	var out histToStage
	byUnit := map[uint64][]HistogramPoint{}
	for j, i := range idx {
		byUnit[units[j]] = append(byUnit[units[j]], pl.samples[i])
	}
	for _, k := range batch.LastWins(units) {
		h := pl.samples[idx[k]]
		out.samples = append(out.samples, histenc.Sample{Unit: units[k], H: h.H, FH: h.FH})
		out.args = append(out.args, byUnit[units[k]])
	}
	return out
}

// stageHistEntities packs the staged samples of plans (staged[i] of plans[i]) into
// histogram staging entities, by partition. A series' samples too large for one record
// (half a column) are cut into several.
func (db *DB) stageHistEntities(plans []histPlanned, staged []histToStage) map[string][]*stagingEntity {
	bucket := floorSec(unix(db.now()), stageBucket)
	stamp := priority.Next()
	byPartition := map[string][]*stagingEntity{}
	n := 0
	for i, pl := range plans {
		rest := staged[i]
		if len(rest.samples) == 0 {
			continue
		}
		slot, column := stageHash(pl.series)
		lo, hi := stageSlotRange(slot, db.opts.StagingPartitions)
		pk := stagePartitionKey(bucket, lo)
		for len(rest.samples) > 0 {
			chunk, k := histenc.AppendLimit(nil, rest.samples, stageMaxColumn/2)
			var args []HistogramPoint
			for _, a := range rest.args[:k] {
				args = append(args, a...)
			}
			first, last := int64(rest.samples[0].Unit), int64(rest.samples[k-1].Unit)
			size := stageenc.HistRecordSize(pl.series, len(chunk))
			es := byPartition[pk]
			var e *stagingEntity
			if len(es) > 0 && es[len(es)-1].fits(column, size) {
				e = es[len(es)-1]
			} else {
				e = &stagingEntity{partitionKey: pk, rowKey: stageRowKey(stamp, db.writer, n), lo: lo, hi: hi, version: stageHistVersion}
				n++
				byPartition[pk] = append(es, e)
			}
			e.addHist(column, pl.series, chunk, first, last, k, stagedPiece{plan: i, hists: args})
			rest = histToStage{samples: rest.samples[k:], args: rest.args[k:]}
		}
	}
	return byPartition
}

// stageHistograms writes the staged samples of plans into the staging table and returns
// the samples of each plan whose transaction failed, with the first error of each.
func (db *DB) stageHistograms(ctx context.Context, plans []histPlanned, staged []histToStage) (failed [][]HistogramPoint, errs []error) {
	failed = make([][]HistogramPoint, len(plans))
	errs = make([]error, len(plans))
	for e, err := range db.submitStaging(ctx, db.stageHistEntities(plans, staged)) {
		for _, p := range e.pieces {
			failed[p.plan] = append(failed[p.plan], p.hists...)
			if errs[p.plan] == nil {
				errs[p.plan] = fmt.Errorf("tsdb: stage histograms: %w", err)
			}
		}
	}
	return failed, errs
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
