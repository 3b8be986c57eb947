package raw

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/chunked"
)

// maxStores bounds the raw stores kept: a store is cheap to make (no request), so only the
// few periods in use are kept.
const maxStores = 8

// Stores makes and keeps the raw store of each period of float points (the float kind's
// tables of the raw part, pointTable), at most maxStores of them (the
// least recently used goes). It is safe for concurrent use.
type Stores struct {
	layout  func(*aztables.Client) (tablets.Store, error)
	service *aztables.ServiceClient
	table   func(period uint64) string

	mu     sync.Mutex
	stores map[uint64]*usedStore
	clock  uint64 // counts uses: the least recently used store has the smallest
}

type usedStore struct {
	store tablets.Store
	used  uint64
}

// NewStores makes the stores of layout over service's tables, period p's named table(p).
// It sends no request.
func NewStores(layout func(*aztables.Client) (tablets.Store, error), service *aztables.ServiceClient, table func(uint64) string) *Stores {
	return &Stores{layout: layout, service: service, table: table, stores: map[uint64]*usedStore{}}
}

// Get returns the raw store of period p.
func (r *Stores) Get(p uint64) (tablets.Store, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.clock++
	if s, ok := r.stores[p]; ok {
		s.used = r.clock
		return s.store, nil
	}
	s, err := r.layout(r.service.NewClient(r.table(p)))
	if err != nil {
		return nil, fmt.Errorf("tsdb: %w", err)
	}
	if len(r.stores) >= maxStores {
		oldest, first := uint64(0), true
		for q, u := range r.stores {
			if first || u.used < r.stores[oldest].used {
				oldest, first = q, false
			}
		}
		delete(r.stores, oldest)
	}
	r.stores[p] = &usedStore{store: s, used: r.clock}
	return s, nil
}

// Len is the number of stores kept.
func (r *Stores) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.stores)
}

// pointTable is a raw table of float points: a period's store of the raw layout (the
// float kind's table of the raw part).
type pointTable struct{ store tablets.Store }

// StoreOf is period p's store of the raw layout (no request), for the reads its own type
// offers: a batched Rollup scans a chunked one.
func (floats *Floats) StoreOf(p uint64) (tablets.Store, error) {
	t, err := floats.open(p)
	return t.store, err
}

func (t pointTable) queryMany(ctx context.Context, series []string, from, to time.Time, emit func(string, tablets.Point) bool) error {
	for p, err := range t.store.QueryMany(ctx, series, from, to) {
		if err != nil {
			return err
		}
		if !emit(p.Series, p.Point) {
			return nil
		}
	}
	return nil
}

func (t pointTable) spilling(ctx context.Context, wants func(string) bool, sink func(string, []tablets.Point)) context.Context {
	if c, ok := t.store.(*chunked.Store); ok {
		return c.WithSpill(ctx, wants, sink)
	}
	return ctx
}

// write stores points with the layout's Write, or with priority through chunked's WriteAt
// (the only layout that stages, and so the only one a Fold writes into). It finds the
// points the layout lists as not stored among pts.
func (t pointTable) write(ctx context.Context, series string, pts []tablets.Point, priority uint64) ([]int, error) {
	var err error
	if priority == 0 {
		err = t.store.Write(ctx, series, pts...)
	} else if c, ok := t.store.(*chunked.Store); ok {
		err = c.WriteAt(ctx, series, priority, pts...)
	} else {
		return allIndexes(len(pts)), fmt.Errorf("tsdb: raw store %T is not chunked: it cannot write at a priority", t.store)
	}
	if err == nil {
		return nil, nil
	}
	var we *tablets.WriteError
	if !errors.As(err, &we) {
		return allIndexes(len(pts)), err
	}
	type key struct {
		sec  int64
		nsec int
		bits uint64
	}
	left := map[key]int{}
	for _, f := range we.Failed {
		left[key{f.Time.Unix(), f.Time.Nanosecond(), math.Float64bits(f.Value)}]++
	}
	var failed []int
	for i, p := range pts {
		k := key{p.Time.Unix(), p.Time.Nanosecond(), math.Float64bits(p.Value)}
		if left[k] > 0 {
			left[k]--
			failed = append(failed, i)
		}
	}
	return failed, err
}

func (t pointTable) delete(ctx context.Context, series string, from, to time.Time) error {
	return t.store.Delete(ctx, series, from, to)
}

// compact compacts a table of a layout that compacts (chunked), and does nothing else (its
// headroom is then unbounded).
func (t pointTable) compact(ctx context.Context, from, to, growing time.Time) (int, error) {
	c, ok := t.store.(*chunked.Store)
	if !ok {
		return math.MaxInt, nil
	}
	did, err := c.CompactAll(ctx, from, to, &chunked.CompactOptions{Growing: growing})
	return did.Headroom, err
}
