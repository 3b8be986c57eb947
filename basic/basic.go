package basic

import (
	"context"
	"fmt"
	"iter"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/filter"
	"github.com/seed71701133/tablets/internal/engine"
	"github.com/seed71701133/tablets/rounding"
)

// Options configure a Store. The zero value of each field means its default.
type Options struct {
	// Resolution is the store's time resolution: a written time truncates to a multiple of
	// it (from the Unix epoch). Default one millisecond; at least 14ns.
	Resolution time.Duration
	// Concurrency is the number of requests a call has in flight at once. Default 8.
	Concurrency int
}

// Defaults.
const (
	DefaultResolution  = time.Millisecond
	DefaultConcurrency = 8
)

// Store is the basic layout: an entity per point. It implements tablets.Store and is safe
// for concurrent use.
type Store struct {
	eng  *engine.Store
	opts Options
}

var _ tablets.Store = (*Store)(nil)

// New returns a store on client's table (which must exist: see tablets.EnsureTable). nil
// options mean the defaults; invalid options give an error wrapping tablets.ErrInvalidOptions.
func New(client *aztables.Client, opts *Options) (*Store, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: basic: nil client", tablets.ErrInvalidOptions)
	}
	o := Options{}
	if opts != nil {
		o = *opts
	}
	if o.Resolution == 0 {
		o.Resolution = DefaultResolution
	}
	if o.Concurrency == 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.Concurrency < 0 {
		return nil, fmt.Errorf("%w: basic: Concurrency %d is negative", tablets.ErrInvalidOptions, o.Concurrency)
	}
	format, err := rounding.NewKeyFormat(o.Resolution)
	if err != nil {
		return nil, fmt.Errorf("basic: %w", err)
	}
	return &Store{eng: engine.New(client, layout{format: format}, o.Concurrency, filter.Limits{}), opts: o}, nil
}

// Options returns the store's options with defaults filled in.
func (s *Store) Options() Options { return s.opts }

// Write upserts points of series, in any order: one entity per point, replaced whole, in
// transactions of up to 100 entities. A time truncates to the store's Resolution; within one
// call the later of two points with the same time wins. It does not keep points after it
// returns. A failure is a *tablets.WriteError whose Failed lists every point whose
// transaction failed (the others are stored); bad input is an error wrapping
// tablets.ErrInvalidSeries or tablets.ErrInvalidTime, before any request.
func (s *Store) Write(ctx context.Context, series string, points ...tablets.Point) error {
	return s.eng.Write(ctx, series, points...)
}

// Query yields the points of series with from <= Time < to, oldest first. Bad input is
// yielded as an error before any request (tablets.ErrInvalidSeries, tablets.ErrInvalidTime).
func (s *Store) Query(ctx context.Context, series string, from, to time.Time) iter.Seq2[tablets.Point, error] {
	return s.eng.Query(ctx, series, from, to)
}

// QueryPage returns at most limit points of series in [from, to), oldest first, and a token
// that resumes exactly after the last point returned ("" when there is nothing more); token
// "" starts at from. A limit below 1 is an error wrapping tablets.ErrInvalidLimit, a token
// this query did not issue one wrapping tablets.ErrInvalidToken.
func (s *Store) QueryPage(ctx context.Context, series string, from, to time.Time, limit int, token string) (tablets.Page, error) {
	return s.eng.QueryPage(ctx, series, from, to, limit, token)
}

// QueryMany yields the points of every named series with from <= Time < to, each series'
// points oldest first; a name given twice is read once. The series share requests: their
// clauses are packed into filters of at most Azure's 15 comparisons.
func (s *Store) QueryMany(ctx context.Context, series []string, from, to time.Time) iter.Seq2[tablets.SeriesPoint, error] {
	return s.eng.QueryMany(ctx, series, from, to)
}

// Latest returns the n newest points of series, newest first (fewer if it holds fewer),
// paying for about what it returns: it reads windows of time backwards from now until they
// hold n points. An n below 1 is an error wrapping tablets.ErrInvalidLimit.
func (s *Store) Latest(ctx context.Context, series string, n int) ([]tablets.Point, error) {
	return s.eng.Latest(ctx, series, n)
}

// LatestIn returns the n newest points of series with from <= Time < to, newest first, as
// Latest does; a to after tablets.MaxTime means every time from on. A range wholly in the
// past is listed by its keys at once: a database (package tsdb) reads each of its tables
// this way, and a table that does not hold the series costs one request.
func (s *Store) LatestIn(ctx context.Context, series string, n int, from, to time.Time) ([]tablets.Point, error) {
	return s.eng.LatestIn(ctx, series, n, from, to)
}

// Delete removes the points of series with from <= Time < to: it lists the range's entities
// a page at a time and deletes them in transactions.
func (s *Store) Delete(ctx context.Context, series string, from, to time.Time) error {
	return s.eng.Delete(ctx, series, from, to)
}

// layout is the basic key layout.
type layout struct {
	format rounding.KeyFormat
}

func (l layout) Name() string               { return "basic" }
func (l layout) ID() string                 { return fmt.Sprintf("basic/1/%d", l.format.Resolution) }
func (l layout) Format() rounding.KeyFormat { return l.format }
func (l layout) Select() string             { return "PartitionKey,RowKey," + entity.ValueProperty }
func (l layout) Granule() uint64            { return 1 }

func (l layout) ValidateSeries(series string) error {
	if err := entity.ValidateSeries(series, 0); err != nil {
		return fmt.Errorf("basic: %w", err)
	}
	return nil
}

func (l layout) key(u uint64) string { return string(l.format.AppendUnits(nil, u)) }

func (l layout) WriteAction() aztables.TransactionType { return aztables.TransactionTypeInsertReplace }

// Rows: an entity per point, PartitionKey the series, RowKey its time.
func (l layout) Rows(series string, units []uint64, values []float64, emit func(engine.Row)) {
	for i, u := range units {
		rk := l.key(u)
		_, body := l.Encode(series, rk, units[i:i+1], values[i:i+1])
		emit(engine.Row{PartitionKey: series, RowKey: rk, Body: body, From: i, To: i + 1})
	}
}

// Encode is the entity of one point: its keys and V.
func (l layout) Encode(partitionKey, rowKey string, _ []uint64, values []float64) (string, []byte) {
	b := entity.AppendKeys(make([]byte, 0, 64+len(partitionKey)+len(rowKey)), partitionKey, rowKey)
	return rowKey, entity.AppendEnd(entity.AppendDouble(b, entity.ValueProperty, values[0]))
}

func (l layout) KeySelect() string { return "PartitionKey,RowKey" }

// hintRowKey is the RowKey of a series' hint entity: "!" sorts before every time key, so no
// range filter (RowKey ge a time key) ever selects it, in this version or an older one.
const hintRowKey = "!latest"

var _ engine.Hinter = layout{}

// HintRow: {"PartitionKey":series,"RowKey":"!latest","V":newest unit}: V, so that the
// $select of a read brings it; a Double, exact up to 2^53 units and only a hint beyond.
func (l layout) HintRow(series string, newest uint64) engine.Row {
	b := entity.AppendKeys(make([]byte, 0, 64+len(series)), series, hintRowKey)
	return engine.Row{PartitionKey: series, RowKey: hintRowKey, Body: entity.AppendEnd(entity.AppendDouble(b, entity.ValueProperty, float64(newest)))}
}

func (l layout) HintClause(series string) filter.Expr {
	return filter.And(filter.Eq("PartitionKey", series), filter.Eq("RowKey", hintRowKey))
}

func (l layout) Hint(e *entity.Entity) (uint64, bool) {
	if string(e.RowKey) != hintRowKey || len(e.Props) != 1 || string(e.Props[0].Name) != entity.ValueProperty {
		return 0, false
	}
	v := e.Props[0].Value
	if !(v >= 0 && v < 1<<64) {
		return 0, false
	}
	return uint64(v), true
}

// Span is the entity's one time.
func (l layout) Span(e *entity.Entity) (uint64, uint64, error) {
	u, err := l.format.ParseUnitsBytes(e.RowKey)
	if err != nil {
		return 0, 0, &entity.DecodeError{PartitionKey: string(e.PartitionKey), RowKey: string(e.RowKey), Reason: "RowKey is not a basic time key"}
	}
	return u, u, nil
}

func (l layout) Clauses(series string, from, to uint64) []filter.Expr {
	return []filter.Expr{filter.And(
		filter.Eq("PartitionKey", series),
		filter.Ge("RowKey", l.key(from)),
		filter.Lt("RowKey", l.key(to)),
	)}
}

func (l layout) AtOrAfter(series string, u uint64) filter.Expr {
	return filter.And(filter.Eq("PartitionKey", series), filter.Ge("RowKey", l.key(u)))
}

func (l layout) Owns(partitionKey []byte, series string) bool { return string(partitionKey) == series }

func (l layout) Points(e *entity.Entity, yield func(t uint64, v float64)) error {
	u, err := l.format.ParseUnitsBytes(e.RowKey)
	if err != nil {
		return &entity.DecodeError{PartitionKey: string(e.PartitionKey), RowKey: string(e.RowKey), Reason: "RowKey is not a basic time key"}
	}
	if len(e.Props) != 1 || string(e.Props[0].Name) != entity.ValueProperty {
		return &entity.DecodeError{PartitionKey: string(e.PartitionKey), RowKey: string(e.RowKey),
			Reason: fmt.Sprintf("has %d value properties, want one %q (a row of another layout?)", len(e.Props), entity.ValueProperty)}
	}
	yield(u, e.Props[0].Value)
	return nil
}
