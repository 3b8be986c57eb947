package tsdb

import (
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets/tsdb/internal/catalog"
	"github.com/seed71701133/tablets/tsdb/internal/index"
	"github.com/seed71701133/tablets/tsdb/internal/naming"
	"github.com/seed71701133/tablets/tsdb/internal/raw"
	"github.com/seed71701133/tablets/tsdb/internal/staging"
	"github.com/seed71701133/tablets/tsdb/internal/tables"
)

// tiers is the tiers part of a DB: the rollup of raw points into tier windows (Rollup,
// RollupFlagged), the dirty markers late writes leave, the tier tables and
// their block geometry and decoding, and Aggregate with its planner. It owns the cache of
// the tier tables known to exist (tables).
//
// It is given the parts it reads, not the DB: what a rollup and an Aggregate read besides
// the tier tables are the series index (the series of a range), the staging table (the
// staged points and histogram samples), the raw part (the raw points and histogram
// samples, the spans and stores of a range), the period tables (which tables exist, which
// periods are dropped) and the catalog (dropped tables, the dirty markers). None of them
// calls it back: the Fold is given its flagging of late points as a function.
type tiers struct {
	service *aztables.ServiceClient
	names   naming.Names // the database's table names
	opts    Options      // the DB's, as Open checked them
	catalog *catalog.Catalog
	periods *tables.Periods // which raw and histogram tables exist, which periods are dropped
	tables  *tierTables     // which tier tables exist

	index   *index.Index   // the series of a range
	staging *staging.Table // the staged points and histogram samples
	floats  *raw.Floats    // the raw points
	hists   *raw.Hists     // the raw histogram samples
}

func newTiers(service *aztables.ServiceClient, names naming.Names, opts Options, c *catalog.Catalog, periods *tables.Periods,
	index *index.Index, staging *staging.Table, floats *raw.Floats, hists *raw.Hists) *tiers {
	return &tiers{
		service: service,
		names:   names,
		opts:    opts,
		catalog: c,
		periods: periods,
		tables:  newTierTables(service, c),
		index:   index,
		staging: staging,
		floats:  floats,
		hists:   hists,
	}
}

// now reads the clock (Options.Now).
func (tr *tiers) now() time.Time { return tr.opts.Now() }
