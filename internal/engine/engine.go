// Package engine is the one implementation of tablets.Store: Write, Delete, Query,
// QueryPage, QueryMany and Latest are written here once, over a Layout. A layout (basic,
// advanced, ...) is only its mapping: how points become rows, how a row is encoded and read
// back, and which rows a range of times selects.
//
// The data flows one way. Write: validate, map points to rows (Layout.Rows), pack the rows
// of each partition into transactions under the batch limits, send them with bounded
// concurrency (WriteRows). Read: plan sub-queries (Layout.Clauses packed into filters), page
// through them, decode each entity (Layout.Points), trim to the range and yield; a layout
// whose entities overlap (chunks: package chunks) reads them itself (Overlapping). Delete:
// list the keys of a range, delete the entities inside, rewrite those it cuts
// (DeleteRange, generic over the value an entity holds). tsdb's histogram tables (package
// chunks) write and delete through WriteRows and DeleteRange too.
package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/filter"
	"github.com/seed71701133/tablets/rounding"
)

// Layout is what a store is: how a series' points map to entities and back. All times are
// in resolution units (see rounding.KeyFormat).
type Layout interface {
	// Name names the layout in error messages ("basic", "advanced").
	Name() string
	// ID names the layout and its parameters; page tokens are bound to it.
	ID() string
	// Format is the store's time resolution and key format.
	Format() rounding.KeyFormat
	// ValidateSeries checks a series name for this layout's keys.
	ValidateSeries(series string) error
	// Granule is the number of units one entity spans (1 for one point each). Entities of a
	// series start at multiples of it.
	Granule() uint64

	// Rows maps points (units strictly increasing, values[i] at units[i]) to entities, in
	// key order, and calls emit with each.
	Rows(series string, units []uint64, values []float64, emit func(Row))
	// WriteAction is the transaction operation that writes a row: an upsert that merges
	// (rows written in pieces) or replaces (rows always written whole).
	WriteAction() aztables.TransactionType
	// Encode returns the entity that replaces the one with these keys when it is rewritten
	// to hold exactly these points (units increasing, all inside its span), as Delete does:
	// its RowKey (the same, or a new one in the same partition) and its body.
	Encode(partitionKey, rowKey string, units []uint64, values []float64) (string, []byte)

	// Clauses returns filter clauses, in time order, that select the entities of series that
	// hold times in [from, to). Each is a conjunction of a few comparisons.
	Clauses(series string, from, to uint64) []filter.Expr
	// AtOrAfter returns a clause that selects the entities of series whose first unit is at
	// or after u (u a multiple of Granule); the service returns them in time order.
	AtOrAfter(series string, u uint64) filter.Expr
	// Select is the $select of a read ("" for every property).
	Select() string
	// Owns reports whether an entity's PartitionKey belongs to series.
	Owns(partitionKey []byte, series string) bool
	// KeySelect is the $select of a read that needs only Span (keys, and what else Span reads).
	KeySelect() string
	// Span returns bounds of the units an entity holds (first <= every point's <= last),
	// from an entity read with KeySelect or with Select.
	Span(e *entity.Entity) (first, last uint64, err error)
	// Points calls yield with each point of a decoded entity, in time order.
	Points(e *entity.Entity, yield func(t uint64, v float64)) error
}

// Overlapping is implemented by layouts whose entities may hold the same times (chunks
// written by different calls, package chunks): such a layout reads its entities itself,
// keeping for each time the value of the entity with the highest priority, and the engine
// decodes their string properties (entity.Entity.AllowStrings) where it reads their keys.
type Overlapping interface {
	// ReadRange passes emit the points of series in [from, to), oldest first, in fresh
	// snapshots (see package chunks); top is the $top of the first request (0: the
	// service's page size), and with grow each request after it asks for twice as many.
	ReadRange(ctx context.Context, client Client, series string, from, to uint64, top int32, grow bool, emit func(t uint64, v float64) bool) error
	// ReadMany passes emit the points of every series in [from, to), each series oldest
	// first, concurrency requests at once.
	ReadMany(ctx context.Context, client Client, series []string, from, to uint64, concurrency int, emit func(series int, t uint64, v float64) bool) error
	// ReadWindow reads [lo, hi) of series in one request of at most top entities, for
	// Latest: complete when the reply holds fewer than top entities and nothing after them
	// (then units and values are its points); otherwise last is the first unit of the
	// newest entity read.
	ReadWindow(ctx context.Context, client Client, series string, lo, hi uint64, top int) (units []uint64, values []float64, last uint64, complete bool, err error)
}

// Hinter is implemented by layouts that keep, per series, a hint of its newest time: the
// newest time of the latest Write, in an entity that range filters never select. It is only
// a hint (another writer, or a Delete, may have made it stale): Latest places a window below
// it and still reads every window complete before it trusts anything.
type Hinter interface {
	// HintRow is the hint entity a Write of series whose newest point is at unit newest
	// adds to the last transaction of the series' partition.
	HintRow(series string, newest uint64) Row
	// HintClause selects the series' hint entity.
	HintClause(series string) filter.Expr
	// Hint returns the unit a hint entity holds; ok is false for any other entity.
	Hint(e *entity.Entity) (unit uint64, ok bool)
}

// Row is one entity a Write sends: its keys, its JSON body, and the points it holds (the
// indexes [From, To) of the units given to Layout.Rows).
type Row struct {
	PartitionKey, RowKey string
	Body                 []byte
	From, To             int
}

// Client is the part of *aztables.Client the engine uses.
type Client interface {
	NewListEntitiesPager(*aztables.ListEntitiesOptions) *runtime.Pager[aztables.ListEntitiesResponse]
	SubmitTransaction(ctx context.Context, actions []aztables.TransactionAction, opts *aztables.SubmitTransactionOptions) (aztables.TransactionResponse, error)
	UpsertEntity(ctx context.Context, entity []byte, options *aztables.UpsertEntityOptions) (aztables.UpsertEntityResponse, error)
	GetEntity(ctx context.Context, partitionKey string, rowKey string, options *aztables.GetEntityOptions) (aztables.GetEntityResponse, error)
	UpdateEntity(ctx context.Context, entity []byte, options *aztables.UpdateEntityOptions) (aztables.UpdateEntityResponse, error)
	DeleteEntity(ctx context.Context, partitionKey string, rowKey string, options *aztables.DeleteEntityOptions) (aztables.DeleteEntityResponse, error)
}

var _ Client = (*aztables.Client)(nil)

// Store implements tablets.Store over a Layout. It is safe for concurrent use.
type Store struct {
	client      Client
	layout      Layout
	concurrency int
	limits      filter.Limits
	now         func() time.Time
}

var _ tablets.Store = (*Store)(nil)

// New returns a store. concurrency is the number of requests a call has in flight at once
// (at least 1); limits bound each filter (zero: Azure's).
func New(client Client, layout Layout, concurrency int, limits filter.Limits) *Store {
	return &Store{client: client, layout: layout, concurrency: max(concurrency, 1), limits: limits, now: time.Now}
}

// Layout returns the store's layout.
func (s *Store) Layout() Layout { return s.layout }

// errorf prefixes an operation's error with the layout's name, once.
func (s *Store) errorf(format string, args ...any) error {
	return fmt.Errorf(s.layout.Name()+": "+format, args...)
}

// units validates a range and returns it in resolution units: [from, to) of times becomes
// [ceil(from), ceil(to)) of units, so that a unit is in the range iff its time is.
func (s *Store) units(from, to time.Time) (uint64, uint64, error) {
	if err := rounding.CheckRange(from, to); err != nil {
		return 0, 0, err
	}
	f := s.layout.Format()
	return ceilUnits(f, from), ceilUnits(f, to), nil
}

// seriesRange validates a series and a range together, as every single-series call does.
func (s *Store) seriesRange(series string, from, to time.Time) (uint64, uint64, error) {
	if err := s.layout.ValidateSeries(series); err != nil {
		return 0, 0, err
	}
	return s.units(from, to)
}

// ceilUnits is the first unit at or after t; Last+1 for a t after the format's last time
// (a format finer than 14ns ends before 9999).
func ceilUnits(f rounding.KeyFormat, t time.Time) uint64 {
	u, err := f.Units(t)
	if err != nil {
		return f.Last + 1
	}
	if f.Time(u).Before(t) {
		u++
	}
	return u
}

// endUnit is the exclusive bound of every unit a store holds.
func (s *Store) endUnit() uint64 { return ceilUnits(s.layout.Format(), tablets.MaxTime) }
