package tsdb

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
	"github.com/seed71701133/tablets/tsdb/internal/naming"
	"github.com/seed71701133/tablets/tsdb/internal/tables"
)

// histogramsProperty, in a series' index entry of a period, says the series has histogram
// samples there (Edm.Double 1). Entries are written with insert-or-merge, so that listing a
// series for its points never erases it.
const histogramsProperty = "H"

// registeredPeriods is how many periods' registrations the cache keeps: the newest ones,
// where writes go (the current period, the last one's late points, the next one's early).
const registeredPeriods = 3

// seriesIndex is the series index part of a DB: a table per raw period (name + "i" + p)
// listing each series a Write gave points or histogram samples there, with its label set
// (docs/format.md, "The series index"). It writes the entries (register, before the
// series' points), and reads them (series: Series and a rollup's names; selectSets:
// Select, LabelNames, LabelValues).
//
// It is given what it uses, not the DB: the service client, the table names, the catalog
// (the label sets it lists) and the period tables (which index tables exist). Its own state
// is the cache of the series known listed in the newest periods, one for every series and
// one for those flagged with histograms, each with its own lock.
type seriesIndex struct {
	service *aztables.ServiceClient
	names   naming.Names     // the database's table names and raw periods
	catalog *catalog.Catalog // the label sets of the series it lists
	tables  *tables.Periods  // which index tables exist

	listed     *registrations // the series known listed in each of the newest periods
	listedHist *registrations // those known flagged with histograms there
}

func newSeriesIndex(service *aztables.ServiceClient, names naming.Names, c *catalog.Catalog, tables *tables.Periods, cachedSeries int) *seriesIndex {
	return &seriesIndex{service: service, names: names, catalog: c, tables: tables,
		listed: newRegistrations(cachedSeries), listedHist: newRegistrations(cachedSeries)}
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

// register lists series in period p's index (the keys of series), those this process does
// not know are there, flagging those whose value is true as having histogram samples there
// (histogramsProperty): an entity each, in a transaction per index partition and 100
// series. A series costs a registry read (if the catalog's cache does not hold its labels)
// and its share of a transaction, the first time a process writes it (or its first
// histograms) in a period; nothing after while cached. A flagged registration is cached
// apart, and once done stands for the plain one too (the entry lists the series).
func (x *seriesIndex) register(ctx context.Context, p uint64, series map[string]bool) error {
	byPart := map[string][]aztables.TransactionAction{}
	var added, addedHist []seriesID
	for _, s := range slices.Sorted(maps.Keys(series)) {
		id, histograms := idOf(s), series[s]
		if histograms && x.listedHist.known(p, id) || !histograms && x.listed.known(p, id) {
			continue
		}
		e, isSet, err := x.catalog.LabelsOf(ctx, s)
		if err != nil {
			return err
		}
		pk, body := indexEntity(s, e, isSet, histograms)
		// Insert or merge: a plain registration never erases another's flag.
		byPart[pk] = append(byPart[pk], aztables.TransactionAction{ActionType: aztables.TransactionTypeInsertMerge, Entity: body})
		added = append(added, id)
		if histograms {
			addedHist = append(addedHist, id)
		}
	}
	if err := batch.SubmitPartitions(ctx, x.service.NewClient(x.names.IndexTable(p)), byPart); err != nil {
		if azerr.IsTableGone(err) {
			x.tables.Gone(indexKind, p)
		}
		return fmt.Errorf("tsdb: index: %w", err)
	}
	x.listed.remember(p, added)
	x.listedHist.remember(p, addedHist)
	return nil
}

// indexEntity is the index entry of series: its partition and body (docs/format.md, "The
// series index"). e is its label set's entry when isSet.
func indexEntity(series string, e catalog.Entry, isSet, histograms bool) (string, []byte) {
	pk := indexPartition
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
