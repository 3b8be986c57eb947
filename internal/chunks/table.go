// Package chunks is the table of chunks, generic over the codec of its chunks: package
// chunked's float points (internal/chunkenc) and tsdb's native histogram samples
// (internal/histenc) are keyed, written, read, compacted and deleted by this one
// implementation, the kinds differing only in their Codec. A table holds a series' values
// as chunks, an entity each, in a partition per series and span of time; the keys and
// properties are specified in docs/format.md ("Layout chunked", "Histogram tables").
//
// Writes never read: a chunk's keys are a function of its write and content. Reads merge
// the chunks that hold a time, the latest write (the highest priority) winning, and never
// follow a continuation inside a partition (see Table.Read), so a compaction that commits
// during a read neither hides a value nor shows it twice. Compaction replaces runs of small
// or overlapping chunks by as few full ones, each run in one transaction conditional on its
// chunks' ETags; a delete deletes the chunks inside a range and rewrites those it cuts
// (engine.DeleteRange).
package chunks

import (
	"context"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets/filter"
	"github.com/seed71701133/tablets/internal/engine"
	"github.com/seed71701133/tablets/internal/pager"
	"github.com/seed71701133/tablets/internal/partkey"
)

// Table is one table of chunks of V: a client of it, its layout, and how many requests
// an operation has in flight at once.
type Table[V any] struct {
	Client      engine.Client
	Layout      Layout[V]
	Concurrency int
}

// Plan packs the clauses of the series into sub-queries, in series then time order, each
// selecting sel.
func (t Table[V]) Plan(series []string, from, to uint64, sel string) ([]pager.SubQuery, error) {
	filters := t.packShared(series, from, to)
	if filters == nil {
		var clauses []filter.Expr
		for _, name := range series {
			clauses = append(clauses, t.Layout.Clauses(name, from, to)...)
		}
		var err error
		if filters, err = filter.Pack(clauses, t.Layout.Limits); err != nil {
			return nil, err
		}
	}
	plan := make([]pager.SubQuery, len(filters))
	for i, f := range filters {
		plan[i] = pager.SubQuery{Filter: f.String(), Select: sel}
	}
	return plan, nil
}

// Write writes values of one series (units strictly increasing) as chunks of priority prio
// (engine.WriteRows: a transaction per partition and 100 chunks, insert or replace: a chunk
// is always written whole, and a retried write lands on the same keys). It returns, for each
// value, the error of the transaction that held it (nil: stored), and the first failure.
func (t Table[V]) Write(ctx context.Context, series string, units []uint64, values []V, prio uint64) ([]error, error) {
	var rows []engine.Row
	t.Layout.Rows(series, units, values, prio, func(r engine.Row) { rows = append(rows, r) })
	rowErrs := engine.WriteRows(ctx, t.Client, rows, aztables.TransactionTypeInsertReplace, t.Concurrency)
	var errs []error
	var first error
	for i, err := range rowErrs {
		if err == nil {
			continue
		}
		if errs == nil {
			errs, first = make([]error, len(units)), err
		}
		for j := rows[i].From; j < rows[i].To; j++ {
			errs[j] = err
		}
	}
	return errs, first
}

// Delete removes the values of series in [lo, hi) (engine.DeleteRange): the chunks inside
// are deleted, the chunks the range cuts are rewritten without its values, conditionally on
// their ETags, and passes go on until one changes nothing.
func (t Table[V]) Delete(ctx context.Context, series string, lo, hi uint64) error {
	if lo >= hi {
		return nil
	}
	plan, err := t.Plan([]string{series}, lo, hi, t.Layout.KeySelect())
	if err != nil {
		return err
	}
	return engine.DeleteRange[V](ctx, t.Client, t.Layout, plan, lo, hi, true, t.Concurrency)
}

// packShared packs the filters of a read of many series within one partition's span,
// where every series' clause is its PartitionKey and the same narrowing of that partition
// (Layout.Clauses' head and tail): (PartitionKey eq a or PartitionKey eq b ...) and head and
// tail, which selects what the clauses OR-ed select. A series then costs one comparison of
// Azure's 15, not up to three: 13 series a request instead of 5. nil where the range spans
// partitions, for fewer than two series, or where a key does not fit what the narrowing
// leaves of the limits: Plan then packs clause by clause (and says what does not fit).
func (t Table[V]) packShared(series []string, from, to uint64) []filter.Expr {
	if len(series) < 2 || from >= to || t.Layout.PartitionOf(from) != t.Layout.PartitionOf(to-1) {
		return nil
	}
	maxCmp, maxLen := t.Layout.Limits.MaxComparisons, t.Layout.Limits.MaxLength
	if maxCmp == 0 {
		maxCmp = filter.MaxComparisons
	}
	if maxLen == 0 {
		maxLen = filter.DefaultMaxLength
	}
	shared := t.Layout.Narrowing(from, to)
	keysCmp, keysLen := maxCmp, maxLen-len("%28%29") // the keys' or, parenthesized
	for _, e := range shared {
		keysCmp -= e.Comparisons()
		keysLen -= len("+and+") + e.EncodedLen()
	}
	if keysCmp < 1 || keysLen < 1 {
		return nil
	}
	keys := make([]filter.Expr, len(series))
	for i, name := range series {
		keys[i] = filter.Eq("PartitionKey", t.Layout.PartitionKey(partkey.Escape(name), from))
	}
	packed, err := filter.Pack(keys, filter.Limits{MaxComparisons: keysCmp, MaxLength: keysLen})
	if err != nil {
		return nil // a key too long for what the narrowing leaves
	}
	for i, p := range packed {
		packed[i] = filter.And(append([]filter.Expr{p}, shared...)...)
		if packed[i].Comparisons() > maxCmp || packed[i].EncodedLen() > maxLen {
			return nil // never sent
		}
	}
	return packed
}
