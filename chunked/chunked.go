package chunked

import (
	"fmt"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/filter"
	"github.com/seed71701133/tablets/internal/chunkenc"
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

// Store is the chunked layout on the shared engine. It is safe for concurrent use. Write
// appends chunks and never reads; Query, QueryPage, QueryMany and Latest merge the chunks
// that hold a time, the latest write winning; Delete deletes the chunks inside the range and
// rewrites those it cuts; Compact merges small chunks into large ones.
type Store struct {
	*engine.Store
	client *aztables.Client
	layout layout
	opts   Options
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
	return &Store{Store: engine.New(client, l, o.Concurrency, l.limits), client: client, layout: l, opts: o}, nil
}

// Options returns the store's options with defaults filled in.
func (s *Store) Options() Options { return s.opts }
