package advanced

import (
	"fmt"
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

// Store is the advanced layout: a store on the shared engine with the advanced mapping. It
// is safe for concurrent use. Its methods are those of tablets.Store: Write merges each
// row's slots (one upsert-merge per row, a transaction per partition's rows); Delete deletes
// the rows wholly inside the range and rewrites those cut by its edges, conditionally on
// their ETags; QueryPage tokens resume inside a row.
type Store struct {
	*engine.Store
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
	return &Store{Store: engine.New(client, l, o.Concurrency, l.limits), opts: o}, nil
}

// Options returns the store's options with defaults filled in.
func (s *Store) Options() Options { return s.opts }
