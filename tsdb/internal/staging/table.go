package staging

import (
	"cmp"
	"context"
	"fmt"
	"iter"
	"maps"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/chunked"
	"github.com/seed71701133/tablets/internal/batch"
	"github.com/seed71701133/tablets/internal/pager"
	"github.com/seed71701133/tablets/internal/priority"
	"github.com/seed71701133/tablets/tsdb/internal/azerr"
	"github.com/seed71701133/tablets/tsdb/internal/changelog"
	"github.com/seed71701133/tablets/tsdb/internal/naming"
)

// Table is the part of a tsdb DB that owns the staging table (its base name + "w"):
// creating it, the transactions of a write's staged samples (table.go), the reads of staged
// points (table_read.go) and their deletion (table_delete.go). The Folder (fold.go) reads
// and empties it through it. It is given what it needs by tsdb's newDB, and no other part of
// the DB: it depends on none. Its only state that changes is made, an atomic: it needs no
// mutex.
type Table struct {
	client     *aztables.Client // of the table: names.Staging()
	now        func() time.Time // Options.Now: the arrival bucket of a write
	partitions int              // Options.StagingPartitions
	// foldWriters is how many series a Fold writes at once (Options.FoldWriters).
	foldWriters int
	reads       bool   // reads read the staging table (the layout allows staging)
	writer      uint32 // random: tells this handle's staging entities apart
	// Writes says whether small writes go to the staging table (the layout allows staging,
	// and not Options.DirectWrites): the write path stages them.
	Writes bool
	// Budget bounds the memory of the reads (Options.StagingReadBudget; nil: no bound),
	// and FoldBudget that of the folds' rounds (Options.FoldReadBudget; nil: Budget).
	// Tests replace them before any read.
	Budget, FoldBudget *ReadBudget
	// Page is the first $top and the PageBytes of staging reads (tests shrink them).
	Page pager.SubQuery
	// cache keeps the columns queries decoded (Config.Cache; nil: none).
	cache *Cache
	// index is where each series is among the cache's whole float entities of the table
	// (seriesindex.go; nil without a cache).
	index *seriesIndex
	// folds keeps what this process's last Folds wrote (Config.KeepFolds; nil: none).
	folds *foldMemo
	warm  atomic.Bool // a query filled the cache (later ones list the keys first)
	// cold is the read filling the cache while it does (flights.go), which the reads
	// meanwhile wait for.
	cold atomic.Pointer[fetchFlight]
	// listing is what the Table knows of its entities' keys, kept up to date against the
	// staging log (listing.go): a read lists only the entities written since.
	listing entityListing
	log     *changelog.Log // the staging log (listing.go), in the staging table
	begun   *changelog.Log // the folds' log (listing.go, FoldsPartition), in the staging table
	// vouched are the logs the listings vouch for while they find the logs' mark as it
	// was (VouchFor).
	vouched []*changelog.Log
	// marks writes the staging mark after each change (stagingmark.go), joining the
	// changes made at once.
	marks markWrites
	made  atomic.Bool // the staging table is known to exist
	// readsDone counts the reads of staged samples completed (ReadsDone).
	readsDone atomic.Uint64
	// listed are the starts (Unix seconds, sorted) of the arrival buckets the last listing
	// found entities of, nil while none is known: the Cache keeps their entities
	// (keepUnfolded), which no Fold has moved yet.
	listed *atomic.Pointer[[]uint64]
	// dropped reports a raw period known dropped by Retain: reads leave out its staged
	// samples, as the Fold does (nil: none is).
	dropped func(period uint64) bool
	names   naming.Names
}

// Config is what a Table is given of tsdb's Options.
type Config struct {
	Now          func() time.Time // Options.Now
	Partitions   int              // Options.StagingPartitions
	FoldWriters  int              // Options.FoldWriters (0: writeConcurrency)
	Budget       *ReadBudget      // Options.StagingReadBudget (nil: no bound)
	FoldBudget   *ReadBudget      // Options.FoldReadBudget (nil: Budget)
	DirectWrites bool             // Options.DirectWrites: no write is staged
	// Dropped reports a raw period known dropped (the period tables' KnownDropped; nil:
	// none is).
	Dropped func(period uint64) bool
	// Cache keeps the entities' columns that queries decoded, checked against their ETags
	// at every query (nil: none; see Cache). Many Tables may share one.
	Cache *Cache
	// KeepFolds says whether this process's Folds keep what they wrote for FoldedFloats
	// and FoldedHists (foldMemo): where a raw cache takes Folds in (Options.RawCache).
	KeepFolds bool
	// FoldDelay and FoldPace are Options.FoldDelay and Options.FoldPace: when a bucket's
	// Fold is due, and how long it may take. The Cache keeps the entities of a bucket
	// until then (Cache.keepUnfolded).
	FoldDelay, FoldPace time.Duration
}

// unfoldedSlack is how long after its Fold is due and paced a bucket's entities stay
// cached all the same: for the Fold's own work, and for the refreshes that take it in.
const unfoldedSlack = 2 * time.Minute

// NewTable makes the staging part of a DB of names whose raw layout is layout; it sends
// no request.
func NewTable(service *aztables.ServiceClient, names naming.Names, layout tablets.Store, c Config) *Table {
	reads := stagingOn(layout)
	var folds *foldMemo
	if c.KeepFolds {
		folds = &foldMemo{}
	}
	var index *seriesIndex
	listed := &atomic.Pointer[[]uint64]{}
	if c.Cache != nil {
		index = newSeriesIndex(c.Cache, names.Staging(), c.Now)
		now := c.Now
		if now == nil {
			now = time.Now
		}
		c.Cache.keepUnfolded(names.Staging(), foldMargin+c.FoldDelay+c.FoldPace+unfoldedSlack, now, listed)
	}
	st := &Table{
		listed:      listed,
		index:       index,
		folds:       folds,
		dropped:     c.Dropped,
		cache:       c.Cache,
		log:         newStagingLog(service.NewClient(names.Staging())),
		begun:       newFoldsLog(service.NewClient(names.Staging())),
		names:       names,
		client:      service.NewClient(names.Staging()),
		now:         c.Now,
		partitions:  c.Partitions,
		foldWriters: cmp.Or(c.FoldWriters, writeConcurrency),
		Budget:      c.Budget,
		FoldBudget:  c.FoldBudget,
		reads:       reads,
		Writes:      reads && !c.DirectWrites,
		writer:      rand.Uint32(),
		Page:        pager.SubQuery{Top: FirstTop, PageBytes: PageBytes},
	}
	st.marks.write = st.writeStagingMark
	return st
}

// stagingOn reports whether a DB of the raw layout layout stages small writes: the layout
// must keep exact millisecond times (chunked at a millisecond), which the staging table
// keeps.
func stagingOn(layout tablets.Store) bool {
	c, ok := layout.(*chunked.Store)
	return ok && c.Options().Resolution == time.Millisecond
}

// writeConcurrency is how many transactions a write of staged samples, and by default how
// many series a Fold, has in flight at once (tsdb's Commit writes as many series at once).
const writeConcurrency = 32

// build packs the records of writes into entities, by partition, in the arrival bucket of
// now under one stamp (see Build).
func (st *Table) build(writes []Write) map[string][]*Entity {
	return Build(writes, BucketOf(st.now()), priority.Next(), st.writer, st.partitions)
}

// Stage writes the records of writes into the staging table, the entities of a partition
// (of both kinds) in transactions of EntitiesPerTx, and returns the samples of each
// write (its records' Args) whose transaction failed, with the first error of each.
func (st *Table) Stage(ctx context.Context, writes []Write) (failed [][]int, errs []error) {
	failed = make([][]int, len(writes))
	errs = make([]error, len(writes))
	for e, err := range st.submit(ctx, st.build(writes)) {
		for _, p := range e.Pieces {
			failed[p.Write] = append(failed[p.Write], p.Args...)
			if errs[p.Write] == nil {
				errs[p.Write] = fmt.Errorf("tsdb: stage: %w", err)
			}
		}
	}
	return failed, errs
}

// submit writes the entities of byPartition, those of a partition in transactions of
// EntitiesPerTx, and yields each entity not written with its error.
func (st *Table) submit(ctx context.Context, byPartition map[string][]*Entity) iter.Seq2[*Entity, error] {
	return func(yield func(*Entity, error) bool) {
		if len(byPartition) == 0 {
			return
		}
		if err := st.ensure(ctx); err != nil {
			for _, pk := range slices.Sorted(maps.Keys(byPartition)) {
				for _, e := range byPartition[pk] {
					if !yield(e, err) {
						return
					}
				}
			}
			return
		}
		for e, err := range st.submitTxs(ctx, byPartition) {
			if !yield(e, err) {
				return
			}
		}
	}
}

// submitTxs runs the transactions of byPartition (the table exists) and yields the
// entities of each failed one with its error.
func (st *Table) submitTxs(ctx context.Context, byPartition map[string][]*Entity) iter.Seq2[*Entity, error] {
	type tx struct {
		pk       string
		entities []*Entity
	}
	var txs []tx
	for _, pk := range slices.Sorted(maps.Keys(byPartition)) {
		es := byPartition[pk]
		for len(es) > 0 {
			n := min(len(es), EntitiesPerTx)
			txs = append(txs, tx{pk, es[:n]})
			es = es[n:]
		}
	}
	txErrs := batch.Run(ctx, writeConcurrency, len(txs), func(ctx context.Context, i int) error {
		actions := make([]aztables.TransactionAction, len(txs[i].entities))
		for j, e := range txs[i].entities {
			actions[j] = aztables.TransactionAction{ActionType: aztables.TransactionTypeInsertReplace, Entity: e.Body()}
		}
		if st.cache == nil {
			return batch.Submit(ctx, st.client, txs[i].pk, actions)
		}
		etags, err := batch.SubmitETags(ctx, st.client, txs[i].pk, actions)
		if err == nil && etags != nil {
			st.cacheWritten(txs[i].entities, etags)
		}
		return err
	})
	// The staging mark after the transactions, failed or not (a transaction whose reply
	// was lost may have been stored), before any write returns: a listing that reads it
	// as before knows these entities were not written since (stagingmark.go). Stored but
	// not marked, they are not acknowledged: a retry writes them again.
	var markErr error
	if len(txErrs) > 0 {
		markErr = st.markStaged(ctx)
	}
	return func(yield func(*Entity, error) bool) {
		for i, err := range txErrs {
			if err == nil {
				err = markErr
			}
			if err == nil {
				continue
			}
			if azerr.IsTableGone(err) {
				st.made.Store(false)
			}
			for _, e := range txs[i].entities {
				if !yield(e, err) {
					return
				}
			}
		}
	}
}

// ensure creates the staging table, once a process while it is known to exist.
func (st *Table) ensure(ctx context.Context) error {
	if st.made.Load() {
		return nil
	}
	if err := tablets.EnsureTable(ctx, st.client); err != nil {
		return fmt.Errorf("tsdb: staging table: %w", err)
	}
	st.made.Store(true)
	return nil
}
