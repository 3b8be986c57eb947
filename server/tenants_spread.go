package server

import (
	"hash/fnv"
	"time"

	"github.com/seed71701133/tablets/tsdb"
)

// DefaultSpread is the default of TenantsOptions.Spread. The folds of a tenant's 10-minute
// arrival bucket may begin 5 minutes after its end and have until the next bucket's, and a
// rollup of sealed windows has a quarter of an hour (DefaultRollupGrain) until the next:
// 5 minutes leaves each of them most of that. Measured in the soak (docs/soak.md, run 126:
// 3 servers, 4 tenants of 18,746 series on Azurite), the four folds of one bucket kept the
// account busy for 1 to 3 minutes at once (up to 1,000 transactions a second together), and
// the four rollups at 11:00 for 80 s; the dashboards' point reads of the change logs took
// 0.2 to 0.37 s on average meanwhile (0.07 to 0.09 s outside them), and most answers over
// 2.5 s were in those minutes.
const DefaultSpread = 5 * time.Minute

// spreadOf is the share of spread that database name's fold and rollups wait: a fraction of
// it fixed by the name (FNV-1a), so that every server of the account gives the database the
// same delay.
func spreadOf(name string, spread time.Duration) time.Duration {
	if spread <= 0 {
		return 0
	}
	h := fnv.New64a()
	h.Write([]byte(name))
	return time.Duration(h.Sum64() % uint64(spread))
}

// spreadDB is opts (nil: the defaults) with the FoldDelay of database name, unless opts set
// one.
func spreadDB(opts *tsdb.Options, name string, spread time.Duration) *tsdb.Options {
	o := tsdb.Options{}
	if opts != nil {
		o = *opts
	}
	if o.FoldDelay == 0 {
		o.FoldDelay = spreadOf(name, spread)
	}
	return &o
}

// databaseOf is the name of tenant id's database.
func (t *Tenants) databaseOf(id string) string { return tenantDatabase(t.base, id) }
