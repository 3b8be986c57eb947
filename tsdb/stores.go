package tsdb

import (
	"fmt"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets"
)

// maxStores bounds the raw stores kept: a store is cheap to make (no request), so only the
// few periods in use are kept.
const maxStores = 8

// rawStores makes and keeps the raw store of each period, at most maxStores of them (the
// least recently used goes).
type rawStores struct {
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

func newRawStores(layout func(*aztables.Client) (tablets.Store, error), service *aztables.ServiceClient, table func(uint64) string) *rawStores {
	return &rawStores{layout: layout, service: service, table: table, stores: map[uint64]*usedStore{}}
}

// get returns the raw store of period p.
func (r *rawStores) get(p uint64) (tablets.Store, error) {
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

// len is the number of stores kept.
func (r *rawStores) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.stores)
}
