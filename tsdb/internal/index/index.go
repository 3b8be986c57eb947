// Package index owns the series index of a tsdb database: a table per raw period (its base
// name + "i" + the period) listing each series a Write gave points or histogram samples there,
// with its label set, flagged when they are histograms (docs/format.md, "The series index").
//
// An Index writes the entries (Register, before the series' samples there) and reads them:
// Series lists the series of a range (DB.Series, a rollup's names), ListedIn those of one
// period's index, and SelectSets selects label sets by matchers over a range (DB.Select;
// LabelNames and LabelValues are built on it).
//
// It is given what it uses, not the DB: the service client, the table names, the catalog
// (the label sets it lists: Catalog.LabelsOf) and the period tables (which index tables
// exist, and those found gone). It depends on no other part. Its own state is the caches of
// the series known listed in each of the three newest periods (where writes go), one for
// every series and one for those flagged with histograms, each with its own lock and
// bounded by the CachedSeries it is given (at least that many of a period's series used
// last, up to twice as many); and the label sets Select read (Cache, given, shared by
// databases), checked against the index change log (package changelog) that Register
// records in after writing new entries.
package index

import (
	"context"
	"fmt"
	"hash/maphash"
	"maps"
	"slices"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/internal/batch"
	"github.com/seed71701133/tablets/tsdb/internal/azerr"
	"github.com/seed71701133/tablets/tsdb/internal/cache"
	"github.com/seed71701133/tablets/tsdb/internal/catalog"
	"github.com/seed71701133/tablets/tsdb/internal/changelog"
	"github.com/seed71701133/tablets/tsdb/internal/naming"
	"github.com/seed71701133/tablets/tsdb/internal/tables"
)

// PlainPartition is the index partition of plain series (not label sets): RowKey the series.
const PlainPartition = "s"

// histogramsProperty, in a series' index entry of a period, says the series has histogram
// samples there (Edm.Double 1). Entries are written with insert-or-merge, so that listing a
// series for its points never erases it.
const histogramsProperty = "H"

// registeredPeriods is how many periods' registrations the cache keeps: the newest ones,
// where writes go (the current period, the last one's late points, the next one's early).
const registeredPeriods = 3

// Index is the series index part of a DB (see the package documentation). Its methods are
// safe for concurrent use.
type Index struct {
	service *aztables.ServiceClient
	names   naming.Names     // the database's table names and raw periods
	catalog *catalog.Catalog // the label sets of the series it lists
	tables  *tables.Periods  // which index tables exist

	listed     *registrations // the series known listed in each of the newest periods
	listedHist *registrations // those known flagged with histograms there

	// Log is the index change log (LogKey): Register records there, and so must whatever
	// drops an index table (Retain). cache (nil: none) keeps the label sets Select read.
	Log   *changelog.Log
	cache *Cache
	// check checks the series key of an entry read from an index table (the raw layout's
	// rules), once as the entry is read (SeriesInfo.Invalid), not by each read of its
	// samples, which then sends it as it is. Nil: none.
	check func(series string) error

	primeMu sync.Mutex
	primed  map[uint64]*primeFlight // the periods read into the registrations (Prime)
}

// New returns the index of the database names names, on service; cachedSeries bounds its
// caches (see the package documentation); sets (nil: none) keeps the label sets Select
// reads (see Cache); check (nil: none) checks the series key of each entry Select reads
// (an index table is network input): SeriesInfo.Invalid says what it refused.
func New(service *aztables.ServiceClient, names naming.Names, c *catalog.Catalog, tables *tables.Periods, cachedSeries int, sets *Cache, check func(series string) error) *Index {
	return &Index{service: service, names: names, catalog: c, tables: tables,
		listed: newRegistrations(cachedSeries), listedHist: newRegistrations(cachedSeries),
		Log: changelog.New(c.Client, LogKey, nil), cache: sets, check: check}
}

// Cached returns how many series the cache of every series' registrations holds for each
// period it keeps (at most registeredPeriods): what a test of the memory bound measures.
func (x *Index) Cached() map[uint64]int {
	x.listed.mu.Lock()
	defer x.listed.mu.Unlock()
	out := make(map[uint64]int, len(x.listed.registered))
	for p, c := range x.listed.registered {
		out[p] = c.Len()
	}
	return out
}

// registrations knows which series are listed in the newest periods' indexes: an index
// entry per series and period, written before the series' points there.
type registrations struct {
	perPeriod int // a period's cache bound, in series

	mu         sync.Mutex
	registered map[uint64]*cache.Gen[seriesID, struct{}] // by period: the newest registeredPeriods
}

// seriesID stands for a series key in the registration cache: 128 bits of two seeded hashes,
// 16 bytes whatever the key's length. A collision would skip a registration; its chance
// among a million series is under 1e-26.
type seriesID [2]uint64

var seriesSeeds = [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}

func idOf(series string) seriesID {
	return seriesID{maphash.String(seriesSeeds[0], series), maphash.String(seriesSeeds[1], series)}
}

func newRegistrations(cachedSeries int) *registrations {
	return &registrations{perPeriod: cachedSeries, registered: map[uint64]*cache.Gen[seriesID, struct{}]{}}
}

// known reports whether series is known listed in period p's index.
func (x *registrations) known(p uint64, id seriesID) bool {
	x.mu.Lock()
	c := x.registered[p]
	x.mu.Unlock()
	if c == nil {
		return false
	}
	_, ok := c.Get(id)
	return ok
}

// remember records series listed in period p's index. Only the newest registeredPeriods
// periods are kept: an older period's registrations are not cached (a backfill lists its
// series again, harmlessly).
func (x *registrations) remember(p uint64, ids []seriesID) {
	x.mu.Lock()
	c := x.registered[p]
	if c == nil {
		if len(x.registered) >= registeredPeriods {
			oldest := p
			for q := range x.registered {
				oldest = min(oldest, q)
			}
			if oldest == p {
				x.mu.Unlock()
				return
			}
			delete(x.registered, oldest)
		}
		c = cache.New[seriesID, struct{}](2*x.perPeriod, nil) // the last perPeriod at least
		x.registered[p] = c
	}
	x.mu.Unlock()
	for _, id := range ids {
		c.Add(id, struct{}{})
	}
}

// Register lists series in period p's index (the keys of series), those this process does
// not know are there, flagging those whose value is true as having histogram samples there
// (histogramsProperty): an entity each, in a transaction per index partition and 100
// series. A series costs a registry read (if the catalog's cache does not hold its labels)
// and its share of a transaction, the first time a process writes it (or its first
// histograms) in a period; nothing after while cached. A flagged registration is cached
// apart, and once done stands for the plain one too (the entry lists the series). When
// catalog.PrimeAt or more series are not known listed, the period's index is read first
// (Prime: a process just started): only the series it does not list are written.
func (x *Index) Register(ctx context.Context, p uint64, series map[string]bool) error {
	unknown := x.unknown(p, series, slices.Sorted(maps.Keys(series)))
	if len(unknown) >= catalog.PrimeAt {
		x.Prime(ctx, p)
		unknown = x.unknown(p, series, unknown)
	}
	byPart := map[string][]aztables.TransactionAction{}
	var added, addedHist []seriesID
	for _, s := range unknown {
		id, histograms := idOf(s), series[s]
		e, isSet, err := x.catalog.LabelsOf(ctx, s)
		if err != nil {
			return err
		}
		pk, body := Entity(s, e, isSet, histograms)
		// Insert or merge: a plain registration never erases another's flag.
		byPart[pk] = append(byPart[pk], aztables.TransactionAction{ActionType: aztables.TransactionTypeInsertMerge, Entity: body})
		added = append(added, id)
		if histograms {
			addedHist = append(addedHist, id)
		}
	}
	if err := batch.SubmitPartitions(ctx, x.service.NewClient(x.names.IndexTable(p)), byPart); err != nil {
		if azerr.IsTableGone(err) {
			x.tables.Gone(naming.Index, p)
		}
		return fmt.Errorf("tsdb: index: %w", err)
	}
	// Announced after the entries are written, before the samples: no cached Select of
	// another process misses the series once they have samples.
	if len(added) > 0 {
		if err := x.Log.Record(ctx, map[uint64]changelog.Range{p: x.periodRange(p)}); err != nil {
			return err
		}
	}
	x.listed.remember(p, added)
	x.listedHist.remember(p, addedHist)
	return nil
}

// unknown are those of names (keys of series, in order) not known listed in period p's
// index as series says (flagged with histograms, or not).
func (x *Index) unknown(p uint64, series map[string]bool, names []string) []string {
	var out []string
	for _, s := range names {
		id, histograms := idOf(s), series[s]
		if histograms && x.listedHist.known(p, id) || !histograms && x.listed.known(p, id) {
			continue
		}
		out = append(out, s)
	}
	return out
}

// periodRange is period p's range: what an index change touches (a series is listed for the
// whole period).
func (x *Index) periodRange(p uint64) changelog.Range {
	return changelog.Range{From: x.names.Start(p).UnixMilli(), To: x.names.End(p).UnixMilli()}
}

// Dropping records that period p's index goes (Retain, before it drops the table).
func (x *Index) Dropping(ctx context.Context, p uint64) error {
	return x.Log.Record(ctx, map[uint64]changelog.Range{p: x.periodRange(p)})
}

// Entity is the index entry of series: its partition and body (docs/format.md, "The
// series index"). e is its label set's entry when isSet.
func Entity(series string, e catalog.Entry, isSet, histograms bool) (string, []byte) {
	pk := PlainPartition
	if isSet {
		pk = e.Partition
	}
	b := entity.AppendKeys(nil, pk, series)
	if isSet {
		b = entity.AppendBinary(b, catalog.LabelsProperty, e.Encoded)
	}
	if histograms {
		b = entity.AppendDouble(b, histogramsProperty, 1)
	}
	return pk, entity.AppendEnd(b)
}
