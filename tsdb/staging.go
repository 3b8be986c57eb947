package tsdb

import (
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
	"github.com/seed71701133/tablets/tsdb/internal/naming"
	"github.com/seed71701133/tablets/tsdb/internal/staging"
)

// The staging table (name + "w") holds the points of the series a write gives few points:
// an entity holds many series, in columns, so a remote write costs a few transactions. Fold
// moves them into the raw tables later. Its layout (keys, columns, the entities' bytes) is
// internal/staging's; docs/format.md, "Staging", has every byte.

// directPoints: a series with at least this many points in a period of one write is
// written into the raw table directly, a transaction of its own being cheaper than staging
// its points and folding them later.
const directPoints = 100

// stagingTable is a DB's part that owns the staging table: creating it, the transactions
// of a write's staged samples (staging.go), the reads of staged points (staging_read.go)
// and their deletion (staging_delete.go). The Fold (fold.go) reads and empties it through
// this part. It is given what it needs at newDB, and no other part of the DB: it depends on
// no other. Its only state that changes is made, an atomic: it needs no mutex.
type stagingTable struct {
	client     *aztables.Client // of the table: names.Staging()
	now        func() time.Time // Options.Now: the arrival bucket of a write
	partitions int              // Options.StagingPartitions
	budget     *ReadBudget      // Options.StagingReadBudget (nil: no bound)
	reads      bool             // reads read the staging table (the layout allows staging)
	writes     bool             // small writes go to the staging table (reads, unless DirectWrites)
	writer     uint32           // random: tells this handle's staging entities apart
	// page is the first $top and the PageBytes of staging reads (tests shrink them).
	page pager.SubQuery
	made atomic.Bool // the staging table is known to exist
	// dropped reports a raw period known dropped by Retain: reads leave out its staged
	// samples, as the Fold does (nil: none is).
	dropped func(period uint64) bool
	names   naming.Names
}

// newStagingTable makes the staging part of a DB of options o, whose raw layout is layout;
// it sends no request.
func newStagingTable(service *aztables.ServiceClient, names naming.Names, layout tablets.Store, o Options, dropped func(period uint64) bool) *stagingTable {
	reads := stagingOn(layout, Options{})
	return &stagingTable{
		dropped:    dropped,
		names:      names,
		client:     service.NewClient(names.Staging()),
		now:        o.Now,
		partitions: o.StagingPartitions,
		budget:     o.StagingReadBudget,
		reads:      reads,
		writes:     reads && !o.DirectWrites,
		writer:     rand.Uint32(),
		page:       pager.SubQuery{Top: staging.FirstTop, PageBytes: staging.PageBytes},
	}
}

// stagingOn reports whether a DB of these options stages small writes: the raw layout must
// keep exact millisecond times (chunked at a millisecond), which the staging table keeps.
func stagingOn(layout tablets.Store, o Options) bool {
	c, ok := layout.(*chunked.Store)
	return ok && !o.DirectWrites && c.Options().Resolution == time.Millisecond
}

// build packs the records of writes into entities, by partition, in the arrival bucket of
// now under one stamp (see staging.Build).
func (st *stagingTable) build(writes []staging.Write) map[string][]*staging.Entity {
	return staging.Build(writes, floorSec(unix(st.now()), staging.Bucket), priority.Next(), st.writer, st.partitions)
}

// stage writes the records of writes into the staging table, the entities of a partition
// (of both kinds) in transactions of staging.EntitiesPerTx, and returns the samples of each
// write (its records' Args) whose transaction failed, with the first error of each.
func (st *stagingTable) stage(ctx context.Context, writes []staging.Write) (failed [][]int, errs []error) {
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
// staging.EntitiesPerTx, and yields each entity not written with its error.
func (st *stagingTable) submit(ctx context.Context, byPartition map[string][]*staging.Entity) iter.Seq2[*staging.Entity, error] {
	return func(yield func(*staging.Entity, error) bool) {
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
func (st *stagingTable) submitTxs(ctx context.Context, byPartition map[string][]*staging.Entity) iter.Seq2[*staging.Entity, error] {
	type tx struct {
		pk       string
		entities []*staging.Entity
	}
	var txs []tx
	for _, pk := range slices.Sorted(maps.Keys(byPartition)) {
		es := byPartition[pk]
		for len(es) > 0 {
			n := min(len(es), staging.EntitiesPerTx)
			txs = append(txs, tx{pk, es[:n]})
			es = es[n:]
		}
	}
	txErrs := batch.Run(ctx, writeConcurrency, len(txs), func(ctx context.Context, i int) error {
		actions := make([]aztables.TransactionAction, len(txs[i].entities))
		for j, e := range txs[i].entities {
			actions[j] = aztables.TransactionAction{ActionType: aztables.TransactionTypeInsertReplace, Entity: e.Body()}
		}
		return batch.Submit(ctx, st.client, txs[i].pk, actions)
	})
	return func(yield func(*staging.Entity, error) bool) {
		for i, err := range txErrs {
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
func (st *stagingTable) ensure(ctx context.Context) error {
	if st.made.Load() {
		return nil
	}
	if err := tablets.EnsureTable(ctx, st.client); err != nil {
		return fmt.Errorf("tsdb: staging table: %w", err)
	}
	st.made.Store(true)
	return nil
}
