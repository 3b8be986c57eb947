package chunked

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/filter"
	"github.com/seed71701133/tablets/internal/batch"
	"github.com/seed71701133/tablets/internal/chunkenc"
	"github.com/seed71701133/tablets/internal/engine"
	"github.com/seed71701133/tablets/internal/pager"
	"github.com/seed71701133/tablets/internal/partkey"
	"github.com/seed71701133/tablets/rounding"
)

const (
	// maxGroupChunks bounds the chunks one compaction transaction replaces, leaving room in
	// its 100 operations for the chunks that replace them.
	maxGroupChunks = 90
	// maxGroupOutput bounds the chunks it writes, in units of MaxChunkBytes.
	maxGroupOutput = 8
	// maxConflicts bounds the attempts at a partition that keeps changing.
	maxConflicts = 20
)

// stored is a chunk as compaction reads it.
type stored struct {
	rowKey      string
	etag        azcore.ETag
	first, last uint64
	prio        uint64
	chunk       []byte
}

// Compact merges the chunks of series in every partition that [from, to) overlaps: runs of
// small or overlapping chunks become as few chunks of up to MaxChunkBytes as hold their
// points (the latest write of each time kept). Each run is replaced in one transaction,
// which deletes the chunks it read only if they are unchanged (their ETags), so a
// concurrent Delete or Compact makes it start again, and a concurrent Write is never lost: a
// write adds a chunk of its own, and a later write has a higher priority than any chunk
// compacted before it. A reader reads each partition in one request or in fresh snapshots
// (see the engine), so it sees every point once, before or after. Compact never runs as
// part of a Write: call it (or CompactAll) on a timer beside a long-running writer.
func (s *Store) Compact(ctx context.Context, series string, from, to time.Time) error {
	if err := s.layout.ValidateSeries(series); err != nil {
		return err
	}
	lo, hi, err := s.units(from, to)
	if err != nil || lo >= hi {
		return err
	}
	escaped := partkey.Escape(series)
	for p := s.layout.partitionOf(lo); p < hi; p += s.layout.partUnits {
		if err := s.compactPartition(ctx, s.layout.partitionKey(escaped, p)); err != nil {
			return fmt.Errorf("chunked: compact %q: %w", series, err)
		}
		if p+s.layout.partUnits < p {
			break
		}
	}
	return nil
}

// CompactAll is Compact of every series of the table: a key scan of the partitions that
// [from, to) overlaps (ScanChunks: one query, a page per 1,000 chunks) finds those that hold
// runs worth merging, and only those are read and compacted, as Compact does them (each run
// conditional on its chunks' ETags), Concurrency partitions at a time. A table whose
// partitions hold a chunk each costs the scan only. A partition that fails does not stop
// the others; the error names each series that failed.
func (s *Store) CompactAll(ctx context.Context, from, to time.Time) error {
	lo, hi, err := s.scanUnits(from, to)
	if err != nil || lo >= hi {
		return err
	}
	type partition struct{ pk, series string }
	var todo []partition
	var cur partition
	var chunks []stored
	done := func() {
		if len(chunks) >= 2 && len(s.runs(chunks)) > 0 {
			todo = append(todo, cur)
		}
		chunks = chunks[:0]
	}
	for k, err := range s.scanKeys(ctx, lo, hi) {
		if err != nil {
			return fmt.Errorf("chunked: compact: scan: %w", err)
		}
		if k.partitionKey != cur.pk {
			done()
			cur = partition{k.partitionKey, k.series}
		}
		// The sizes are unknown: a run of full chunks is read, and found compact.
		chunks = append(chunks, stored{first: k.first, last: k.last})
	}
	done()
	errs := batch.Run(ctx, s.opts.Concurrency, len(todo), func(ctx context.Context, i int) error {
		if err := s.compactPartition(ctx, todo[i].pk); err != nil {
			return fmt.Errorf("chunked: compact %q: %w", todo[i].series, err)
		}
		return nil
	})
	return errors.Join(errs...)
}

// units returns [from, to) as units: the floor of from, the ceiling of to.
func (s *Store) units(from, to time.Time) (uint64, uint64, error) {
	if err := rounding.CheckRange(from, to); err != nil {
		return 0, 0, err
	}
	f := s.layout.format
	lo, _ := f.Units(from)
	hi, _ := f.Units(to)
	if f.Time(hi).Before(to) {
		hi++
	}
	return lo, hi, nil
}

// compactPartition merges runs of one partition until none is worth merging.
func (s *Store) compactPartition(ctx context.Context, pk string) error {
	for range maxConflicts {
		chunks, err := s.readPartition(ctx, pk)
		if err != nil {
			return err
		}
		conflict, merged := false, false
		for _, run := range s.runs(chunks) {
			done, err := s.mergeRun(ctx, pk, run)
			if batch.IsConflict(err) {
				conflict = true
				break
			}
			if err != nil {
				return err
			}
			merged = merged || done
		}
		if !conflict && !merged {
			return nil
		}
	}
	return fmt.Errorf("partition %q still changing after %d attempts", pk, maxConflicts)
}

// readPartition reads every chunk of a partition, in key order (first time).
func (s *Store) readPartition(ctx context.Context, pk string) ([]stored, error) {
	q := pager.SubQuery{Filter: filter.Eq("PartitionKey", pk).String(), Select: s.layout.Select()}
	var out []stored
	e := entity.Entity{AllowStrings: true}
	for page, err := range pager.Each(ctx, s.client, q, 0) {
		if err != nil {
			return nil, err
		}
		for _, raw := range page.Entities {
			if err := e.Decode(raw); err != nil {
				return nil, err
			}
			first, last, err := s.layout.Span(&e)
			if err != nil {
				return nil, err
			}
			prio, _ := s.layout.Priority(&e)
			encoded, _ := e.String(chunkProperty)
			chunk, err := base64.StdEncoding.DecodeString(string(encoded))
			if err != nil {
				return nil, fmt.Errorf("chunk %q: %w", e.RowKey, err)
			}
			out = append(out, stored{rowKey: string(e.RowKey), etag: azcore.ETag(e.ETag), first: first, last: last, prio: prio, chunk: chunk})
		}
	}
	return out, nil
}

// runs groups chunks (in order of first time) into runs worth merging: each a whole number
// of closed segments (no chunk outside a segment overlaps it in time, so no chunk left out
// of a run holds a time it holds), of at most maxGroupChunks chunks and about
// maxGroupOutput full chunks of bytes, with at least two chunks.
func (s *Store) runs(chunks []stored) [][]stored {
	var runs [][]stored
	var run []stored
	size := 0
	flush := func() {
		if len(run) >= 2 {
			runs = append(runs, run)
		}
		run, size = nil, 0
	}
	for i := 0; i < len(chunks); {
		// The closed segment starting at i.
		j, last := i+1, chunks[i].last
		for j < len(chunks) && chunks[j].first <= last {
			last = max(last, chunks[j].last)
			j++
		}
		segSize := 0
		for _, c := range chunks[i:j] {
			segSize += len(c.chunk)
		}
		if len(run) > 0 && (len(run)+j-i > maxGroupChunks || size+segSize > maxGroupOutput*s.layout.maxChunk) {
			flush()
		}
		if j-i > maxGroupChunks {
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

// mergeRun replaces a run by the fewest chunks that hold its points, in one transaction. It
// reports whether it did (false: the run is already as compact).
func (s *Store) mergeRun(ctx context.Context, pk string, run []stored) (bool, error) {
	var m engine.Merger
	var prio uint64
	for _, c := range run {
		prio = max(prio, c.prio)
		err := chunkenc.Decode(c.chunk, func(t uint64, v float64) { m.Add(t, v, c.prio) })
		if err != nil {
			return false, fmt.Errorf("chunk %q: %w", c.rowKey, err)
		}
	}
	var units []uint64
	var values []float64
	m.Release(^uint64(0), func(t uint64, v float64) bool {
		units, values = append(units, t), append(values, v)
		return true
	})
	var rows []engine.Row
	for i := 0; i < len(units); {
		chunk, n := chunkenc.AppendLimit(nil, units[i:], values[i:], s.layout.maxChunk)
		rk := s.layout.rowKey(units[i], prio, chunk)
		rows = append(rows, engine.Row{PartitionKey: pk, RowKey: rk, Body: s.layout.body(pk, rk, units[i+n-1], chunk)})
		i += n
	}
	if len(rows) >= len(run) {
		return false, nil
	}
	old := make(map[string]bool, len(run))
	for _, c := range run {
		old[c.rowKey] = true
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
		if !kept[c.rowKey] {
			etag := c.etag
			actions = append(actions, aztables.TransactionAction{ActionType: aztables.TransactionTypeDelete, Entity: batch.KeysBody(pk, c.rowKey), IfMatch: &etag})
		}
	}
	return true, batch.Submit(ctx, s.client, pk, actions)
}
