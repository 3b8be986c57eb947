package tsdb

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/filter"
	"github.com/seed71701133/tablets/internal/batch"
	"github.com/seed71701133/tablets/internal/histenc"
	"github.com/seed71701133/tablets/internal/pager"
	"github.com/seed71701133/tablets/internal/partkey"
)

const (
	// histMaxRunChunks bounds the chunks one compaction transaction replaces, leaving room
	// in its 100 operations for the chunks that replace them.
	histMaxRunChunks = 90
	// histMaxRunBytes bounds the bytes of the chunks it merges: about 8 full chunks out.
	histMaxRunBytes = 8 * histMaxChunk
	// histCompactConcurrency is how many partitions a Compact merges at once.
	histCompactConcurrency = 8
)

// compactHistograms merges the small chunks of the histogram tables of [from, to): each
// table is scanned once for the partitions (series and day) that hold several chunks, and
// only those are read and merged. A partition that fails does not stop the others.
func (db *DB) compactHistograms(ctx context.Context, from, to time.Time) error {
	spans, err := db.spans(ctx, histKind, from, to)
	if err != nil {
		return err
	}
	var errs []error
	for _, sp := range spans {
		lo, hi := histUnits(sp.from, sp.to)
		if lo >= hi {
			continue
		}
		err := compactHistTable(ctx, db.service.NewClient(db.names.HistTable(sp.period)), lo, hi)
		if !db.readDone(histKind, sp.period, err) && err != nil {
			errs = append(errs, fmt.Errorf("tsdb: compact %s: %w", db.names.HistTable(sp.period), err))
		}
	}
	return errors.Join(errs...)
}

// compactHistTable compacts the partitions of one table that [lo, hi) overlaps (whole
// partitions) holding two chunks or more: a key scan across the table finds them (one
// query, a page per 1,000 chunks).
func compactHistTable(ctx context.Context, client histClient, lo, hi uint64) error {
	first, last := histPartitionOf(lo), histPartitionOf(hi-1)
	f := filter.And(filter.Ge(histLastProperty, histKey(first)), filter.Lt("RowKey", histKey(last+histPartUnits))).String()
	e := entity.Entity{AllowStrings: true}
	var todo []string
	cur, n := "", 0
	done := func() {
		if n >= 2 {
			todo = append(todo, cur)
		}
	}
	for page, err := range pager.Each(ctx, client, pager.SubQuery{Filter: f, Select: histKeySelect}, 0) {
		if err != nil {
			return err
		}
		for _, raw := range page.Entities {
			if err := e.Decode(raw); err != nil {
				return err
			}
			if _, err := decodeHistChunk(&e, false); err != nil {
				return err
			}
			if string(e.PartitionKey) != cur {
				done()
				cur, n = string(e.PartitionKey), 0
			}
			n++
		}
	}
	done()
	errs := batch.Run(ctx, histCompactConcurrency, len(todo), func(ctx context.Context, i int) error {
		if err := compactHistPartition(ctx, client, todo[i]); err != nil {
			series, _, _ := partkey.Split(histFormat, []byte(todo[i]))
			return fmt.Errorf("series %q: %w", series, err)
		}
		return nil
	})
	return errors.Join(errs...)
}

// compactHistPartition merges runs of one partition until none is worth merging.
func compactHistPartition(ctx context.Context, client histClient, pk string) error {
	for range histMaxConflicts {
		chunks, err := readHistPartition(ctx, client, pk)
		if err != nil {
			return err
		}
		conflict, merged := false, false
		for _, run := range histRuns(chunks) {
			did, err := mergeHistRun(ctx, client, pk, run)
			if batch.IsConflict(err) {
				conflict = true
				break
			}
			if err != nil {
				return err
			}
			merged = merged || did
		}
		if !conflict && !merged {
			return nil
		}
	}
	return fmt.Errorf("partition %q still changing after %d attempts", pk, histMaxConflicts)
}

// readHistPartition reads every chunk of a partition, in key order (first millisecond).
func readHistPartition(ctx context.Context, client histClient, pk string) ([]histChunk, error) {
	q := pager.SubQuery{Filter: filter.Eq("PartitionKey", pk).String(), Select: histSelect}
	e := entity.Entity{AllowStrings: true}
	var out []histChunk
	for page, err := range pager.Each(ctx, client, q, 0) {
		if err != nil {
			return nil, err
		}
		for _, raw := range page.Entities {
			if err := e.Decode(raw); err != nil {
				return nil, err
			}
			c, err := decodeHistChunk(&e, true)
			if err != nil {
				return nil, err
			}
			out = append(out, c)
		}
	}
	return out, nil
}

// histRuns groups chunks (in order of first millisecond) into runs worth merging: each a
// whole number of closed segments (no chunk outside a segment overlaps it in time, so no
// chunk left out of a run holds a millisecond it holds), of at most histMaxRunChunks chunks
// and about histMaxRunBytes, with at least two chunks.
func histRuns(chunks []histChunk) [][]histChunk {
	var runs [][]histChunk
	var run []histChunk
	size := 0
	flush := func() {
		if len(run) >= 2 {
			runs = append(runs, run)
		}
		run, size = nil, 0
	}
	for i := 0; i < len(chunks); {
		j, last := i+1, chunks[i].last
		for j < len(chunks) && chunks[j].first <= last {
			last = max(last, chunks[j].last)
			j++
		}
		segSize := 0
		for _, c := range chunks[i:j] {
			segSize += len(c.chunk)
		}
		if len(run) > 0 && (len(run)+j-i > histMaxRunChunks || size+segSize > histMaxRunBytes) {
			flush()
		}
		if j-i > histMaxRunChunks {
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

// mergeHistRun replaces a run by the fewest chunks of up to histMaxChunk bytes that hold its
// samples (the latest write of each millisecond), with the highest priority of the run, in
// one transaction that deletes the chunks read only if they are unchanged (their ETags): a
// concurrent Delete or Compact makes it start again, and a concurrent write is never lost
// (it adds a chunk of its own, of a higher priority). It reports whether it merged (false:
// the run is already as compact).
func mergeHistRun(ctx context.Context, client histClient, pk string, run []histChunk) (bool, error) {
	var m histMerger
	var prio uint64
	for _, c := range run {
		prio = max(prio, c.prio)
		if err := c.samples(0, ^uint64(0), func(s histenc.Sample) { m.add(s, c.prio) }); err != nil {
			return false, err
		}
	}
	var samples []histenc.Sample
	m.release(^uint64(0), func(s histenc.Sample) bool {
		samples = append(samples, s)
		return true
	})
	var rows []histRow
	for i := 0; i < len(samples); {
		chunk, n := histenc.AppendLimit(nil, samples[i:], histMaxChunk)
		rk := histRowKey(samples[i].Unit, prio, chunk)
		rows = append(rows, histRow{pk: pk, rk: rk, body: histBody(pk, rk, samples[i+n-1].Unit, chunk)})
		i += n
	}
	if len(rows) >= len(run) || len(rows)+len(run) > entity.MaxBatchOperations {
		return false, nil
	}
	old := make(map[string]bool, len(run))
	for _, c := range run {
		old[c.rk] = true
	}
	var actions []aztables.TransactionAction
	kept := map[string]bool{}
	for _, r := range rows {
		if old[r.rk] {
			kept[r.rk] = true // the same chunk, content and all: leave it
			continue
		}
		actions = append(actions, aztables.TransactionAction{ActionType: aztables.TransactionTypeInsertReplace, Entity: r.body})
	}
	for _, c := range run {
		if !kept[c.rk] {
			etag := azcore.ETag(c.etag)
			actions = append(actions, aztables.TransactionAction{ActionType: aztables.TransactionTypeDelete, Entity: batch.KeysBody(pk, c.rk), IfMatch: &etag})
		}
	}
	return true, batch.Submit(ctx, client, pk, actions)
}
