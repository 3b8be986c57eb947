package chunked

import (
	"context"
	"fmt"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/filter"
	"github.com/seed71701133/tablets/internal/chunks"
	"github.com/seed71701133/tablets/internal/engine"
	"github.com/seed71701133/tablets/internal/priority"
	"github.com/seed71701133/tablets/rounding"
)

// Property names of a chunk entity.
const (
	lastProperty  = "L" // Edm.String: the last unit, fixed width (a filter compares it)
	chunkProperty = "C" // Edm.Binary: the chunk (internal/chunkenc)
)

// layout is the chunked key layout: a table of chunks of float points (package chunks, its
// Floats codec). All times are in resolution units.
type layout struct {
	format    rounding.KeyFormat
	partUnits uint64
	maxChunk  int // bytes of a chunk, before base64
	limits    filter.Limits
	priority  uint64 // of every chunk written; 0: the process's clock (priority.Next)
}

var (
	_ engine.Layout      = layout{}
	_ engine.Overlapping = layout{}
)

// chunks is the layout as package chunks keys, writes and reads it.
func (l layout) chunks() chunks.Layout[float64] {
	return chunks.Layout[float64]{Name: "chunked", Format: l.format, PartUnits: l.partUnits, MaxChunk: l.maxChunk, Limits: l.limits, Codec: chunks.Floats{}}
}

// table is the layout's table on client, concurrency requests at once.
func (l layout) table(client engine.Client, concurrency int) chunks.Table[float64] {
	return chunks.Table[float64]{Client: client, Layout: l.chunks(), Concurrency: concurrency}
}

func (l layout) Name() string { return "chunked" }
func (l layout) ID() string {
	return fmt.Sprintf("chunked/1/%d/%d", l.format.Resolution, l.partUnits)
}
func (l layout) Format() rounding.KeyFormat            { return l.format }
func (l layout) Granule() uint64                       { return 1 }
func (l layout) Select() string                        { return l.chunks().Select() }
func (l layout) KeySelect() string                     { return l.chunks().KeySelect() }
func (l layout) WriteAction() aztables.TransactionType { return aztables.TransactionTypeInsertReplace }
func (l layout) key(u uint64) string                   { return l.chunks().Key(u) }
func (l layout) partitionOf(u uint64) uint64           { return l.chunks().PartitionOf(u) }
func (l layout) Owns(partitionKey []byte, s string) bool {
	return l.chunks().Owns(partitionKey, s)
}

func (l layout) partitionKey(escaped string, u uint64) string {
	return l.chunks().PartitionKey(escaped, u)
}

func (l layout) ValidateSeries(series string) error { return l.chunks().ValidateSeries(series) }

// rowKey is first unit, "-", priority (16 hex digits), "-", FNV-1a of the chunk (8 hex
// digits): see chunks.Layout.RowKey.
func (l layout) rowKey(first, prio uint64, chunk []byte) string {
	return l.chunks().RowKey(first, prio, chunk)
}

// Rows cuts the points of each partition into chunks of at most maxChunk bytes, all with the
// priority of this write.
func (l layout) Rows(series string, units []uint64, values []float64, emit func(engine.Row)) {
	prio := l.priority
	if prio == 0 {
		prio = priority.Next()
	}
	l.chunks().Rows(series, units, values, prio, emit)
}

// Encode rewrites a chunk to hold these points: a new chunk, under a RowKey of its own
// first time and content, with the old chunk's priority.
func (l layout) Encode(partitionKey, rowKey string, units []uint64, values []float64) (string, []byte) {
	return l.chunks().Encode(partitionKey, rowKey, units, values)
}

// Clauses: see chunks.Layout.Clauses.
func (l layout) Clauses(series string, from, to uint64) []filter.Expr {
	return l.chunks().Clauses(series, from, to)
}

// AtOrAfter selects the chunks of series holding times at or after u: in u's partition
// those with L >= u, and every later partition.
func (l layout) AtOrAfter(series string, u uint64) filter.Expr {
	return l.chunks().AtOrAfter(series, u)
}

// Span is [first time, last time] of a chunk: from its RowKey and its L property.
func (l layout) Span(e *entity.Entity) (uint64, uint64, error) { return l.chunks().Span(e) }

// Priority is the write priority in the RowKey.
func (l layout) Priority(e *entity.Entity) (uint64, error) { return l.chunks().Priority(e) }

// Points decodes the chunk, checking it against the entity's keys.
func (l layout) Points(e *entity.Entity, yield func(t uint64, v float64)) error {
	return l.chunks().Points(e, yield)
}

// ReadRange, ReadMany and ReadWindow are the engine's reads of chunks (package chunks).
func (l layout) ReadRange(ctx context.Context, client engine.Client, series string, from, to uint64, top int32, grow bool, emit func(t uint64, v float64) bool) error {
	return l.table(client, 1).Read(ctx, series, from, to, top, grow, emit)
}

func (l layout) ReadMany(ctx context.Context, client engine.Client, series []string, from, to uint64, concurrency int, emit func(series int, t uint64, v float64) bool) error {
	return l.table(client, concurrency).ReadMany(ctx, series, from, to, emit)
}

func (l layout) ReadWindow(ctx context.Context, client engine.Client, series string, lo, hi uint64, top int) ([]uint64, []float64, uint64, bool, error) {
	return l.table(client, 1).Window(ctx, series, lo, hi, top)
}
