package tsdb

import (
	"github.com/seed71701133/tablets/tsdb/internal/naming"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
)

// tiers is the tiers part of a DB: the rollup of raw points into tier windows (Rollup,
// RollupFlagged), the dirty markers late writes leave, the tier tables and
// their block geometry and decoding, and Aggregate with its planner. It owns the cache of
// the tier tables known to exist (tables); the catalog, the period tables and the options
// it is given are the DB's, shared.
//
// A known dependency to cut: db, a back-pointer to the DB, for the reads of other parts a
// rollup and an Aggregate make (the series index, the raw and staged points and
// histograms, the read plan of the raw tables, the catalog's progress). The part is not
// yet its own package because of it.
type tiers struct {
	service *aztables.ServiceClient
	names   naming.Names // the database's table names
	opts    Options      // the DB's, as Open checked them
	catalog *catalog
	periods *periodTables // which raw and histogram tables exist, which periods are dropped
	tables  *tierTables   // which tier tables exist

	db *DB // the reads of other parts (see above)
}

func newTiers(db *DB) *tiers {
	return &tiers{
		service: db.service,
		names:   db.names,
		opts:    db.opts,
		catalog: db.catalog,
		periods: db.tables,
		tables:  newTierTables(db.service, db.catalog),
		db:      db,
	}
}

// now reads the clock (Options.Now).
func (tr *tiers) now() time.Time { return tr.opts.Now() }
