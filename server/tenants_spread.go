package server

import (
	"hash/fnv"
	"slices"
	"time"

	"github.com/seed71701133/tablets/server/limits"
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

// DefaultFoldPace is the default of tablets serve's --background.fold-pace
// (tsdb.Options.FoldPace): a tenant's fold of a bucket writes over at least a minute, the
// time between two tenants' folds where the spread (DefaultSpread) ranks four, as the
// soak's. Unpaced, each fold wrote its 18,700 series in 40-45 s (docs/soak.md, run 129),
// as fast as the account allowed, and most answers over 2.5 s fell in those seconds.
const DefaultFoldPace = time.Minute

// DefaultRollupPace is the default of tablets serve's --background.rollup-pace
// (tsdb.Options.RollupPace): a tenant's rollup of the windows sealed since the last one
// takes at least a minute, as a fold does, the time between two tenants' starts where the
// spread (DefaultSpread) ranks four. Unpaced, each of the soak's tenants' rollups kept
// Azurite's one thread busy for 20 to 25 s (docs/soak.md, run 149), and the answers over
// 2.5 s gathered in those minutes.
const DefaultRollupPace = time.Minute

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

// spreadRanked is the share of spread that tenant id waits when the configuration's allow
// list names the tenants: the default tenant ranks first, the others follow in order, and
// the n-th of m waits n/m of the spread, as far from each other as they can be. Every
// server reading the same configuration ranks them alike. Two hashes (spreadOf) can land
// close together (in the soak, soak0 and soak3 both waited 4.0 minutes, and their folds
// began together: docs/soak.md, run 128); ranks cannot. ok is false when the list allows
// any tenant ("*") or does not name id: then the hash of its database's name decides.
func spreadRanked(id string, allow []string, spread time.Duration) (d time.Duration, ok bool) {
	if spread <= 0 || slices.Contains(allow, "*") {
		return 0, false
	}
	ranked := []string{limits.DefaultTenant}
	for _, a := range slices.Sorted(slices.Values(allow)) {
		if a != limits.DefaultTenant && a != ranked[len(ranked)-1] {
			ranked = append(ranked, a)
		}
	}
	n := slices.Index(ranked, id)
	if n < 0 {
		return 0, false
	}
	return spread * time.Duration(n) / time.Duration(len(ranked)), true
}

// spreadOfTenant is the share of the spread tenant id's database waits, by its rank in the
// configuration in force (spreadRanked), else by its name (spreadOf). A database keeps the
// share it was opened with: a configuration reloaded later moves only those opened after
// it, and two servers giving one database different shares only fold it at other times.
func (t *Tenants) spreadOfTenant(id string) time.Duration {
	if d, ok := spreadRanked(id, t.config().Tenants.Allow, t.opts.Spread); ok {
		return d
	}
	return spreadOf(t.databaseOf(id), t.opts.Spread)
}

// spreadDB is opts (nil: the defaults) with the FoldDelay delay, unless opts set one.
func spreadDB(opts *tsdb.Options, delay time.Duration) *tsdb.Options {
	o := tsdb.Options{}
	if opts != nil {
		o = *opts
	}
	if o.FoldDelay == 0 {
		o.FoldDelay = delay
	}
	return &o
}

// databaseOf is the name of tenant id's database.
func (t *Tenants) databaseOf(id string) string { return tenantDatabase(t.base, id) }

// compactPhase is the phase of the compactions of a tenant whose share of spread is share:
// the same share of the interval every (0: DefaultCompactEvery), so that the tenants'
// compactions tick apart, in rank order, within one interval. They ticked together:
// each scans its raw table's keys (a request a 1,000 chunks), and in the soak the four
// tenants' scans at once held Azurite's thread for about 4.5 s every 2 minutes, and every
// query in flight waited for them (docs/soak.md, run 156).
func compactPhase(share, spread, every time.Duration) time.Duration {
	if every <= 0 {
		every = DefaultCompactEvery
	}
	if spread <= 0 || share <= 0 {
		return 0
	}
	return time.Duration(float64(every) * float64(share) / float64(spread))
}
