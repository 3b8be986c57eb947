package tiers

import (
	"context"
	"errors"
	"fmt"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/tsdb/internal/cache"
	"github.com/seed71701133/tablets/tsdb/internal/catalog"
)

// maxTierTablesCached bounds the cache of tier tables known to exist.
const maxTierTablesCached = 4096

// errTierDropped is ensure's answer for a tier table that Retain dropped: its windows are
// past the tier's retention, and the table is never created again.
var errTierDropped = errors.New("tsdb: tier table dropped")

// tierTables knows which tier tables exist (those this process created or found), and
// creates the others unless the catalog says they were dropped.
type tierTables struct {
	service *aztables.ServiceClient
	catalog *catalog.Catalog
	known   *cache.Gen[string, struct{}]
}

func newTierTables(service *aztables.ServiceClient, c *catalog.Catalog) *tierTables {
	return &tierTables{service: service, catalog: c, known: cache.New[string, struct{}](maxTierTablesCached, nil)}
}

// ensure creates a tier table unless this process knows it exists, or it was dropped
// (errTierDropped): a catalog read and a create, the first time.
func (t *tierTables) ensure(ctx context.Context, name string) error {
	if _, ok := t.known.Get(name); ok {
		return nil
	}
	dropped, err := t.catalog.IsDropped(ctx, name)
	if err != nil {
		return err
	}
	if dropped {
		return errTierDropped
	}
	if err := tablets.EnsureTable(ctx, t.service.NewClient(name)); err != nil {
		return fmt.Errorf("tsdb: %w", err)
	}
	t.known.Add(name, struct{}{})
	return nil
}

// recordDropped marks a tier table dropped in the catalog, before it goes.
func (t *tierTables) recordDropped(ctx context.Context, name string) error {
	if err := t.catalog.RecordDropped(ctx, name); err != nil {
		return err
	}
	t.known.Remove(name)
	return nil
}

// RecordDropped marks tier table name dropped in the catalog, before Retain drops it: no
// Rollup or Write of any process creates it again.
func (tr *Tiers) RecordDropped(ctx context.Context, name string) error {
	return tr.tables.recordDropped(ctx, name)
}
