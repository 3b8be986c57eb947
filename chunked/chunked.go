package chunked

import (
	"context"
	"fmt"
	"iter"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/filter"
	"github.com/seed71701133/tablets/internal/chunkenc"
	"github.com/seed71701133/tablets/internal/chunks"
	"github.com/seed71701133/tablets/internal/engine"
	"github.com/seed71701133/tablets/rounding"
)

// Options configure a Store. The zero value of each field means its default.
type Options struct {
	// Resolution is the time resolution: a written time truncates to a multiple of it from
	// the Unix epoch. Default 1 ms. As fine as 1 ns: under 14 ns, times are 64-bit counts of
	// units that end before 9999 (at 1 ns, 2554-07-21T23:34:33.709551614Z), and writing a
	// later time is an error wrapping tablets.ErrInvalidTime.
	Resolution time.Duration
	// PartitionFactor is the span of time of one partition: the chunks of a series in it are
	// written in one transaction per 100 and compacted together. A multiple of Resolution.
	// Default 24 h: a day at 1 Hz written at once is one transaction, and read back in one
	// request.
	PartitionFactor time.Duration
	// MaxChunkBytes bounds a chunk's encoding (before base64). Default 16 KiB: large enough
	// that a chunk's keys cost little, small enough that reading a point costs little
	// (a chunk is read whole). Between 1 KiB and 48 KiB (a binary property holds 64 KiB, and
	// a chunk rewritten by Delete can grow a little).
	MaxChunkBytes int
	// Concurrency is the number of requests a call has in flight at once. Default 8.
	Concurrency int
}

// Defaults.
const (
	DefaultResolution      = time.Millisecond
	DefaultPartitionFactor = 24 * time.Hour
	DefaultMaxChunkBytes   = 16 << 10
	DefaultConcurrency     = 8
)

// Store is the chunked layout: compressed chunks of points with exact times. It implements
// tablets.Store and is safe for concurrent use. Its reads merge the chunks that hold a time,
// the latest write winning; Compact merges small chunks into large ones.
type Store struct {
	eng    *engine.Store
	client *aztables.Client
	layout layout
	opts   Options

	scanTop int32 // the page size a scan asks for; 0: the service's (tests set it)
}

var _ tablets.Store = (*Store)(nil)

// New returns a store on client's table (which must exist: see tablets.EnsureTable). nil
// options mean the defaults; invalid options give an error wrapping tablets.ErrInvalidOptions.
func New(client *aztables.Client, opts *Options) (*Store, error) {
	invalid := func(format string, args ...any) (*Store, error) {
		return nil, fmt.Errorf("chunked: %w: "+format, append([]any{tablets.ErrInvalidOptions}, args...)...)
	}
	if client == nil {
		return invalid("nil client")
	}
	o := Options{}
	if opts != nil {
		o = *opts
	}
	if o.Resolution == 0 {
		o.Resolution = DefaultResolution
	}
	if o.PartitionFactor == 0 {
		o.PartitionFactor = DefaultPartitionFactor
	}
	if o.MaxChunkBytes == 0 {
		o.MaxChunkBytes = DefaultMaxChunkBytes
	}
	if o.Concurrency == 0 {
		o.Concurrency = DefaultConcurrency
	}
	switch {
	case o.Resolution < 0 || o.PartitionFactor < 0:
		return invalid("Resolution %v and PartitionFactor %v must be positive", o.Resolution, o.PartitionFactor)
	case o.PartitionFactor%o.Resolution != 0:
		return invalid("PartitionFactor %v is not a multiple of Resolution %v", o.PartitionFactor, o.Resolution)
	case o.MaxChunkBytes < 1<<10 || o.MaxChunkBytes > 48<<10:
		return invalid("MaxChunkBytes %d is not between 1 KiB and 48 KiB", o.MaxChunkBytes)
	case o.Concurrency < 0:
		return invalid("Concurrency %d is negative", o.Concurrency)
	}
	format, err := rounding.NewFineKeyFormat(o.Resolution)
	if err != nil {
		return nil, fmt.Errorf("chunked: %w", err)
	}
	l := layout{
		format:    format,
		partUnits: uint64(o.PartitionFactor / o.Resolution),
		maxChunk:  max(o.MaxChunkBytes, chunkenc.MinLimit),
		limits:    filter.Limits{MaxComparisons: entity.MaxFilterComparisons, MaxLength: filter.DefaultMaxLength},
	}
	return &Store{eng: engine.New(client, l, o.Concurrency, l.limits), client: client, layout: l, opts: o}, nil
}

// table is the store's table of chunks (package chunks), Concurrency requests at once.
func (s *Store) table() chunks.Table[float64] { return s.layout.table(s.client, s.opts.Concurrency) }

// Options returns the store's options with defaults filled in.
func (s *Store) Options() Options { return s.opts }

// Write appends points of series, in any order, as compressed chunks of exact times (up to
// MaxChunkBytes each); it never reads. A time truncates to the store's Resolution; the
// latest write of a time wins, within one call the later argument. It does not keep points
// after it returns. A failure is a *tablets.WriteError whose Failed lists every point whose
// transaction failed (the others are stored); bad input is an error wrapping
// tablets.ErrInvalidSeries or tablets.ErrInvalidTime, before any request.
func (s *Store) Write(ctx context.Context, series string, points ...tablets.Point) error {
	return s.eng.Write(ctx, series, points...)
}

// WriteAt is Write with a priority of the caller's instead of the process's clock: where
// chunks hold the same time, the higher priority's value is read. A writer that moves points
// stored elsewhere first (tsdb's staging) writes them with the priority of their first
// write, so that moving them again, late, never hides a later write. priority must be
// positive (an error wrapping tablets.ErrInvalidOptions, before any request).
func (s *Store) WriteAt(ctx context.Context, series string, priority uint64, points ...tablets.Point) error {
	if priority == 0 {
		return fmt.Errorf("chunked: %w: priority 0", tablets.ErrInvalidOptions)
	}
	l := s.layout
	l.priority = priority
	return engine.New(s.client, l, s.opts.Concurrency, l.limits).Write(ctx, series, points...)
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

// WithSpill returns a context in which QueryMany, reading many series by the range of
// their keys (as tsdb's Selects do), passes sink the points in its range of each series of
// that range it was not asked for and read whole, instead of dropping them: a cache can keep
// them for the reads that ask for those series next. Each series is passed once, from the
// goroutine reading, before the read's iterator ends. It changes what reads cost only:
// the answers are the same. wants, if not nil, says which series to pass (asked once a
// series, before its points are gathered).
func (s *Store) WithSpill(ctx context.Context, wants func(series string) bool, sink func(series string, points []tablets.Point)) context.Context {
	format := s.layout.format
	return chunks.WithSpill(ctx, wants, func(series string, units []uint64, values []float64) {
		pts := make([]tablets.Point, len(units))
		for i, u := range units {
			pts[i] = tablets.Point{Time: format.Time(u), Value: values[i]}
		}
		sink(series, pts)
	})
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

// Delete removes the points of series with from <= Time < to: chunks inside the range are
// deleted, and those it cuts are rewritten without its points, conditionally on their ETags.
func (s *Store) Delete(ctx context.Context, series string, from, to time.Time) error {
	return s.eng.Delete(ctx, series, from, to)
}
