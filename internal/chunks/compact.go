package chunks

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"iter"
	"math"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/filter"
	"github.com/seed71701133/tablets/internal/batch"
	"github.com/seed71701133/tablets/internal/engine"
	"github.com/seed71701133/tablets/internal/pager"
	"github.com/seed71701133/tablets/internal/partkey"
)

const (
	// maxRunChunks bounds the chunks one compaction transaction replaces, leaving room in
	// its 100 operations for the chunks that replace them.
	maxRunChunks = 90
	// maxRunOutput bounds the bytes of the chunks it merges, in units of MaxChunk.
	maxRunOutput = 8
	// maxConflicts bounds the attempts at a partition that keeps changing.
	maxConflicts = 20
)

// GrowingChunks is how many chunks CompactAll waits for in a partition still being written
// before it compacts it: 4 to 7, by a hash of its key, so that the series a writer writes
// together (a fold writes every series) are not all compacted by the same run, but a few
// at every run. A partition holds that many more chunks at most, all in one read.
func GrowingChunks(pk string) int {
	h := fnv.New32a()
	h.Write([]byte(pk))
	return minGrowingChunks + int(h.Sum32()%4)
}

// minGrowingChunks is the fewest GrowingChunks.
const minGrowingChunks = 4

// Compacted is what a CompactAll found and did.
type Compacted struct {
	// Partitions is how many partitions it read and compacted.
	Partitions int
	// Headroom is the fewest chunks any partition of the range can gain before a CompactAll
	// of the same range (and the same growing) finds one worth compacting: at least 1,
	// counting the partitions it found none of (a new series') and those it compacted, as
	// they were left. A writer that adds a chunk a partition a write (a write whose points
	// of a partition fit in one chunk) can skip the scan while fewer writes than that
	// came since: nothing would be found.
	Headroom int
}

// headroomOf is the chunks a partition of n chunks, worth compacting from least, can gain
// before it is: 1 where it holds least or more but no run worth merging (full chunks), as
// its next chunk may make one.
func headroomOf(n, least int) int { return max(least-n, 1) }

// Keys are the keys of a chunk as a key scan reads them.
type Keys struct {
	PartitionKey string
	Series       string
	Start        uint64 // of the partition
	First, Last  uint64
}

// SplitKey recovers the series and partition start of an entity's PartitionKey.
func (l Layout[V]) SplitKey(e *entity.Entity) (string, uint64, error) {
	series, start, err := partkey.Split(l.Format, e.PartitionKey)
	if err != nil {
		return "", 0, bad(e, err.Error())
	}
	return series, start, nil
}

// ScanFilter selects the chunks of the partitions that [lo, hi) overlaps, whole: those whose
// first time (the start of the RowKey) is before the end of the last partition, and whose
// last (L) is at or after the start of the first. Every chunk of such a partition is
// selected, so that a page cut inside a partition is always cut after some of its chunks.
// lower and upper, unless "", bound the PartitionKeys (lower inclusive, or exclusive with
// strict; upper exclusive): four comparisons at most.
func (l Layout[V]) ScanFilter(lo, hi uint64, lower string, strict bool, upper string) filter.Expr {
	first, last := l.PartitionOf(lo), l.PartitionOf(hi-1)
	clauses := []filter.Expr{filter.Ge(lastProperty, l.Key(first))}
	if end := last + l.PartUnits; end > last && end <= l.Format.Last {
		clauses = append(clauses, filter.Lt("RowKey", l.Key(end)))
	}
	switch {
	case lower != "" && strict:
		clauses = append(clauses, filter.Gt("PartitionKey", lower))
	case lower != "":
		clauses = append(clauses, filter.Ge("PartitionKey", lower))
	}
	if upper != "" {
		clauses = append(clauses, filter.Lt("PartitionKey", upper))
	}
	return filter.And(clauses...)
}

// ScanKeys yields the keys of every chunk of every series in the partitions that [lo, hi)
// overlaps (whole partitions), series by series, each series' chunks by first time: one
// query across partitions (ScanFilter), paged (at most 1,000 chunks a page), selecting the
// keys and L only. It is not a snapshot: use it to plan work, not to read values.
func (t Table[V]) ScanKeys(ctx context.Context, lo, hi uint64) iter.Seq2[Keys, error] {
	return func(yield func(Keys, error) bool) {
		q := pager.SubQuery{Filter: t.Layout.ScanFilter(lo, hi, "", false, "").String(), Select: t.Layout.KeySelect()}
		e := entity.Entity{AllowStrings: true}
		for page, err := range pager.Each(ctx, t.Client, q, 0) {
			if err != nil {
				yield(Keys{}, err)
				return
			}
			for _, raw := range page.Entities {
				if err := e.Decode(raw); err != nil {
					yield(Keys{}, err)
					return
				}
				first, last, err := t.Layout.Span(&e)
				if err != nil {
					yield(Keys{}, err)
					return
				}
				series, start, err := t.Layout.SplitKey(&e)
				if err != nil {
					yield(Keys{}, err)
					return
				}
				if !yield(Keys{string(e.PartitionKey), series, start, first, last}, nil) {
					return
				}
			}
		}
	}
}

// CompactAll compacts every series of the table in the partitions that [lo, hi) overlaps:
// a key scan (ScanKeys) finds the partitions that hold runs worth merging, and only those
// are read and compacted (CompactPartition), Concurrency partitions at a time. A table whose
// partitions hold a chunk each costs the scan only. A partition that fails does not stop
// the others; the error names each series that failed.
//
// A partition that ends after unit growing is still being written, a chunk a write: it is
// compacted once it holds GrowingChunks of them (growing ^uint64(0): none is), not at its
// second, so that a series written every few minutes is not read and rewritten whole after
// every write (the soak's compactions, after each fold, read and rewrote every series of
// every tenant, and held the account for longer than the folds' interval).
//
// It reports the partitions compacted and the range's headroom (Compacted), which is
// meaningful only without an error.
func (t Table[V]) CompactAll(ctx context.Context, lo, hi, growing uint64) (Compacted, error) {
	if lo >= hi {
		return Compacted{Headroom: math.MaxInt}, nil
	}
	type partition struct {
		pk, series string
		start      uint64
		least      int
	}
	least := func(pk string, start uint64) int {
		if end := start + t.Layout.PartUnits; end > growing || end < start {
			return GrowingChunks(pk)
		}
		return 2
	}
	// A partition of the range the scan finds no chunk of (a series new to it) can gain as
	// many as the least of any partition of the range.
	headroom := minGrowingChunks
	if first := t.Layout.PartitionOf(lo); first+t.Layout.PartUnits <= growing && first+t.Layout.PartUnits > first {
		headroom = 2 // the first partition has ended
	}
	var todo []partition
	var cur partition
	var chunks []Chunk
	done := func() {
		if cur.pk == "" {
			return
		}
		if len(chunks) >= cur.least && len(t.runs(chunks)) > 0 {
			todo = append(todo, cur)
		} else {
			headroom = min(headroom, headroomOf(len(chunks), cur.least))
		}
		chunks = chunks[:0]
	}
	for k, err := range t.ScanKeys(ctx, lo, hi) {
		if err != nil {
			return Compacted{}, fmt.Errorf("%s: compact: scan: %w", t.Layout.Name, err)
		}
		if k.PartitionKey != cur.pk {
			done()
			cur = partition{k.PartitionKey, k.Series, k.Start, least(k.PartitionKey, k.Start)}
		}
		// The sizes are unknown: a run of full chunks is read, and found compact.
		chunks = append(chunks, Chunk{First: k.First, Last: k.Last})
	}
	done()
	left := make([]int, len(todo))
	errs := batch.Run(ctx, t.Concurrency, len(todo), func(ctx context.Context, i int) error {
		n, err := t.compactPartition(ctx, todo[i].pk)
		if err != nil {
			return fmt.Errorf("%s: compact %q: %w", t.Layout.Name, todo[i].series, err)
		}
		left[i] = n
		return nil
	})
	for i, p := range todo {
		headroom = min(headroom, headroomOf(left[i], p.least))
	}
	return Compacted{Partitions: len(todo), Headroom: headroom}, errors.Join(errs...)
}

// CompactPartition merges runs of one partition until none is worth merging: runs of small
// or overlapping chunks become as few chunks of up to MaxChunk bytes as hold their values
// (the latest write of each time kept), with the highest priority of the run. Each run is
// replaced in one transaction, which deletes the chunks it read only if they are unchanged
// (their ETags), so a concurrent delete or compaction makes it start again, and a
// concurrent write is never lost: a write adds a chunk of its own, and a later write has a
// higher priority than any chunk compacted before it. The partition is read again after a
// pass that merged several runs (their chunks may merge further) or met a conflict; not
// after one run of all its chunks merged, the common case (a chunk a write since the last
// compaction): a chunk written meanwhile waits for the next compaction.
func (t Table[V]) CompactPartition(ctx context.Context, pk string) error {
	_, err := t.compactPartition(ctx, pk)
	return err
}

// compactPartition is CompactPartition; it returns how many chunks it left in the partition
// (those written meanwhile aside).
func (t Table[V]) compactPartition(ctx context.Context, pk string) (int, error) {
	for range maxConflicts {
		chunks, err := t.readPartition(ctx, pk)
		if err != nil {
			return 0, err
		}
		conflict, merged, left := false, false, len(chunks)
		runs := t.runs(chunks)
		for _, run := range runs {
			replaced, err := t.mergeRun(ctx, pk, run)
			if batch.IsConflict(err) {
				conflict = true
				break
			}
			if err != nil {
				return 0, err
			}
			if replaced > 0 {
				merged, left = true, left-len(run)+replaced
			}
		}
		// One run of every chunk, merged: its chunks are as few as hold the values, and
		// nothing is left beside them to merge with. Not read again to find that.
		if !conflict && (!merged || len(runs) == 1 && len(runs[0]) == len(chunks)) {
			return left, nil
		}
	}
	return 0, fmt.Errorf("partition %q still changing after %d attempts", pk, maxConflicts)
}

// readPartition reads every chunk of a partition, in key order (first time).
func (t Table[V]) readPartition(ctx context.Context, pk string) ([]Chunk, error) {
	q := pager.SubQuery{Filter: filter.Eq("PartitionKey", pk).String(), Select: t.Layout.Select()}
	e := entity.Entity{AllowStrings: true}
	var out []Chunk
	for page, err := range pager.Each(ctx, t.Client, q, 0) {
		if err != nil {
			return nil, err
		}
		for _, raw := range page.Entities {
			if err := e.Decode(raw); err != nil {
				return nil, err
			}
			c, err := t.Layout.Decode(&e, true)
			if err != nil {
				return nil, err
			}
			out = append(out, c)
		}
	}
	return out, nil
}

// runs groups chunks (in order of first time) into runs worth merging: each a whole number
// of closed segments (no chunk outside a segment overlaps it in time, so no chunk left out
// of a run holds a time it holds), of at most maxRunChunks chunks and about maxRunOutput
// full chunks of bytes, with at least two chunks.
func (t Table[V]) runs(chunks []Chunk) [][]Chunk {
	var runs [][]Chunk
	var run []Chunk
	size := 0
	flush := func() {
		if len(run) >= 2 {
			runs = append(runs, run)
		}
		run, size = nil, 0
	}
	for i := 0; i < len(chunks); {
		// The closed segment starting at i.
		j, last := i+1, chunks[i].Last
		for j < len(chunks) && chunks[j].First <= last {
			last = max(last, chunks[j].Last)
			j++
		}
		segSize := 0
		for _, c := range chunks[i:j] {
			segSize += len(c.Data)
		}
		if len(run) > 0 && (len(run)+j-i > maxRunChunks || size+segSize > maxRunOutput*t.Layout.MaxChunk) {
			flush()
		}
		if j-i > maxRunChunks {
			i = j // too many overlapping chunks for one transaction: left as they are
			continue
		}
		run = append(run, chunks[i:j]...)
		size += segSize
		i = j
	}
	flush()
	return runs
}

// mergeRun replaces a run by the fewest chunks that hold its values, in one transaction. It
// returns how many chunks replaced it (0: none did, as the run is already as compact, or
// its replacement would not fit one transaction).
func (t Table[V]) mergeRun(ctx context.Context, pk string, run []Chunk) (int, error) {
	var m Merger[V]
	var prio uint64
	for _, c := range run {
		prio = max(prio, c.Prio)
		if err := t.Layout.Values(c, 0, ^uint64(0), func(u uint64, v V) { m.Add(u, v, c.Prio) }); err != nil {
			return 0, err
		}
	}
	var units []uint64
	var values []V
	m.Release(^uint64(0), func(u uint64, v V) bool {
		units, values = append(units, u), append(values, v)
		return true
	})
	var rows []engine.Row
	for i := 0; i < len(units); {
		chunk, n := t.Layout.Codec.AppendLimit(nil, units[i:], values[i:], t.Layout.MaxChunk)
		rk := t.Layout.RowKey(units[i], prio, chunk)
		rows = append(rows, engine.Row{PartitionKey: pk, RowKey: rk, Body: t.Layout.Body(pk, rk, units[i+n-1], chunk)})
		i += n
	}
	if len(rows) >= len(run) || len(rows)+len(run) > entity.MaxBatchOperations {
		return 0, nil
	}
	old := make(map[string]bool, len(run))
	for _, c := range run {
		old[c.RowKey] = true
	}
	var actions []aztables.TransactionAction
	kept := map[string]bool{}
	for _, r := range rows {
		if old[r.RowKey] {
			kept[r.RowKey] = true // the same chunk, content and all: leave it
			continue
		}
		actions = append(actions, aztables.TransactionAction{ActionType: aztables.TransactionTypeInsertReplace, Entity: r.Body})
	}
	for _, c := range run {
		if !kept[c.RowKey] {
			etag := azcore.ETag(c.ETag)
			actions = append(actions, aztables.TransactionAction{ActionType: aztables.TransactionTypeDelete, Entity: batch.KeysBody(pk, c.RowKey), IfMatch: &etag})
		}
	}
	return len(rows), batch.Submit(ctx, t.Client, pk, actions)
}
