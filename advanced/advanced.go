package advanced

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
	// PartitionFactor is the time span of one partition; a multiple of RowFactor. Default 1h.
	PartitionFactor time.Duration
	// RowFactor is the time span of one row (entity); a multiple of Resolution, and at most
	// 252 resolutions (one property per slot). Default 4m.
	RowFactor time.Duration
	// Resolution is the time resolution: a written time truncates to a multiple of it (from
	// the Unix epoch), and a row has RowFactor/Resolution slots. Default 1s.
	Resolution time.Duration
	// Concurrency is the number of requests a call has in flight at once (partitions written,
	// sub-queries read). Default 8.
	Concurrency int
}

// Defaults.
const (
	DefaultPartitionFactor = time.Hour
	DefaultRowFactor       = 4 * time.Minute
	DefaultResolution      = time.Second
	DefaultConcurrency     = 8
)

// Store is the advanced layout: many points per entity, a property per occupied slot of a
// row. It implements tablets.Store and is safe for concurrent use.
type Store struct {
	eng  *engine.Store
	opts Options
}

var _ tablets.Store = (*Store)(nil)

// New returns a store on client's table (which must exist: see tablets.EnsureTable). nil
// options mean the defaults; invalid options give an error wrapping tablets.ErrInvalidOptions.
func New(client *aztables.Client, opts *Options) (*Store, error) {
	invalid := func(format string, args ...any) (*Store, error) {
		return nil, fmt.Errorf("advanced: %w: "+format, append([]any{tablets.ErrInvalidOptions}, args...)...)
	}
	if client == nil {
		return invalid("nil client")
	}
	o := Options{}
	if opts != nil {
		o = *opts
	}
	defaults := []struct {
		v *time.Duration
		d time.Duration
	}{{&o.PartitionFactor, DefaultPartitionFactor}, {&o.RowFactor, DefaultRowFactor}, {&o.Resolution, DefaultResolution}}
	for _, f := range defaults {
		if *f.v == 0 {
			*f.v = f.d
		}
	}
	if o.Concurrency == 0 {
		o.Concurrency = DefaultConcurrency
	}
	switch {
	case o.PartitionFactor < 0 || o.RowFactor < 0 || o.Resolution < 0:
		return invalid("factors must be positive (PartitionFactor %v, RowFactor %v, Resolution %v)", o.PartitionFactor, o.RowFactor, o.Resolution)
	case o.Concurrency < 0:
		return invalid("Concurrency %d is negative", o.Concurrency)
	case o.RowFactor%o.Resolution != 0:
		return invalid("RowFactor %v is not a multiple of Resolution %v", o.RowFactor, o.Resolution)
	case o.RowFactor/o.Resolution > entity.MaxUserProperties:
		return invalid("RowFactor/Resolution = %d slots a row, over Azure's %d properties an entity", o.RowFactor/o.Resolution, entity.MaxUserProperties)
	case o.PartitionFactor%o.RowFactor != 0:
		return invalid("PartitionFactor %v is not a multiple of RowFactor %v", o.PartitionFactor, o.RowFactor)
	}
	format, err := rounding.NewKeyFormat(o.Resolution)
	if err != nil {
		return nil, fmt.Errorf("advanced: %w", err)
	}
	l := layout{
		format:    format,
		rowUnits:  uint64(o.RowFactor / o.Resolution),
		partUnits: uint64(o.PartitionFactor / o.Resolution),
		limits:    filter.Limits{MaxComparisons: entity.MaxFilterComparisons, MaxLength: filter.DefaultMaxLength},
	}
	return &Store{eng: engine.New(client, l, o.Concurrency, l.limits), opts: o}, nil
}

// Options returns the store's options with defaults filled in.
func (s *Store) Options() Options { return s.opts }

// Write upserts points of series, in any order: each row's slots are merged into its entity
// (one upsert-merge per row, a transaction per partition's rows), so other slots of the row
// are kept. A time truncates to the store's Resolution; within one call the later of two
// points with the same time wins. It does not keep points after it returns. A failure is a
// *tablets.WriteError whose Failed lists every point whose transaction failed (the others
// are stored); bad input is an error wrapping tablets.ErrInvalidSeries or
// tablets.ErrInvalidTime, before any request.
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
// this query did not issue one wrapping tablets.ErrInvalidToken. A token can resume inside a row.
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

// Delete removes the points of series with from <= Time < to: the rows wholly inside the
// range are deleted, and those cut by its edges are rewritten without the range's slots,
// conditionally on their ETags (a concurrent write makes it read the row again).
func (s *Store) Delete(ctx context.Context, series string, from, to time.Time) error {
	return s.eng.Delete(ctx, series, from, to)
}
