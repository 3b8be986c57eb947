package basic

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/filter"
	"github.com/seed71701133/tablets/internal/batch"
	"github.com/seed71701133/tablets/internal/pager"
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

// Store is the basic layout. It is safe for concurrent use.
type Store struct {
	client *aztables.Client
	opts   Options
	layout layout
	reader pager.Reader
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
	s := &Store{client: client, opts: o, layout: layout{format: format}}
	s.reader = pager.Reader{Client: client, Layout: s.layout, Concurrency: o.Concurrency}
	return s, nil
}

// Options returns the store's options with defaults filled in.
func (s *Store) Options() Options { return s.opts }

// Write upserts points of one series. See tablets.Store.
func (s *Store) Write(ctx context.Context, series string, points ...tablets.Point) error {
	if err := s.layout.ValidateSeries(series); err != nil {
		return err
	}
	units, err := batch.Units(s.layout.format, points)
	if err != nil {
		return fmt.Errorf("basic: write %q: %w", series, err)
	}
	kept := batch.LastWins(units)
	bodies := make([][]byte, len(kept))
	for i, idx := range kept {
		b := entity.AppendKeys(make([]byte, 0, 64+len(series)), series, string(s.layout.format.AppendUnits(nil, units[idx])))
		b = entity.AppendDouble(b, entity.ValueProperty, points[idx].Value)
		bodies[i] = entity.AppendEnd(b)
	}
	ends := entity.Batches(len(bodies), func(i int) int { return len(bodies[i]) + 2*len(series) })
	errs := batch.Run(ctx, s.opts.Concurrency, len(ends), func(ctx context.Context, t int) error {
		start := transactionStart(ends, t)
		actions := make([]aztables.TransactionAction, 0, ends[t]-start)
		for _, body := range bodies[start:ends[t]] {
			actions = append(actions, aztables.TransactionAction{ActionType: aztables.TransactionTypeInsertReplace, Entity: body})
		}
		return batch.Submit(ctx, s.client, series, actions)
	})
	// Every argument whose time went in a failed transaction may not be stored (superseded
	// duplicates included).
	lostUnits := map[uint64]bool{}
	for t, err := range errs {
		if err != nil {
			for _, idx := range kept[transactionStart(ends, t):ends[t]] {
				lostUnits[units[idx]] = true
			}
		}
	}
	if err := batch.WriteError(series, points, errs, func(i int) bool { return lostUnits[units[i]] }); err != nil {
		return fmt.Errorf("basic: %w", err)
	}
	return nil
}

// transactionStart is where transaction t starts, given every transaction's end.
func transactionStart(ends []int, t int) int {
	if t == 0 {
		return 0
	}
	return ends[t-1]
}

// Query yields the points with from <= Time < to, oldest first.
func (s *Store) Query(ctx context.Context, series string, from, to time.Time) iter.Seq2[tablets.Point, error] {
	return s.reader.Query(ctx, series, from, to)
}

// QueryPage returns at most limit points of [from, to) from token ("" to start).
func (s *Store) QueryPage(ctx context.Context, series string, from, to time.Time, limit int, token string) (tablets.Page, error) {
	return s.reader.QueryPage(ctx, series, from, to, limit, token)
}

// QueryMany yields the points of every named series in [from, to).
func (s *Store) QueryMany(ctx context.Context, series []string, from, to time.Time) iter.Seq2[tablets.SeriesPoint, error] {
	return s.reader.QueryMany(ctx, series, from, to)
}

// Latest returns the n newest points of the series, newest first.
func (s *Store) Latest(ctx context.Context, series string, n int) ([]tablets.Point, error) {
	return s.reader.Latest(ctx, series, n)
}

// Delete removes the points with from <= Time < to: it reads the keys in the range
// ($select=RowKey) and deletes them in transactions. A point already gone is no error.
func (s *Store) Delete(ctx context.Context, series string, from, to time.Time) error {
	lo, hi, err := s.reader.SeriesRange(series, from, to)
	if err != nil {
		return err
	}
	if lo >= hi {
		return nil
	}
	plan := []pager.SubQuery{{Filter: s.layout.Clauses(series, lo, hi)[0].String(), Select: "RowKey"}}
	var keys []string
	var e entity.Entity
	for page, err := range pager.Pages(ctx, s.client, plan, 0, pager.Continuation{}, 1) {
		if err != nil {
			return fmt.Errorf("basic: delete %q: %w", series, err)
		}
		for _, raw := range page.Entities {
			if err := e.Decode(raw); err != nil {
				return fmt.Errorf("basic: delete %q: %w", series, err)
			}
			keys = append(keys, string(e.RowKey))
		}
	}
	ends := entity.Batches(len(keys), func(i int) int { return 2*len(series) + 64 })
	errs := batch.Run(ctx, s.opts.Concurrency, len(ends), func(ctx context.Context, t int) error {
		start := transactionStart(ends, t)
		return batch.DeleteRows(ctx, s.client, series, keys[start:ends[t]])
	})
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("basic: delete %q: %w", series, err)
	}
	return nil
}

// layout is the basic key layout.
type layout struct {
	format rounding.KeyFormat
}

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
