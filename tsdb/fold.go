package tsdb

import (
	"context"

	"github.com/seed71701133/tablets/tsdb/internal/sentinel"
	"github.com/seed71701133/tablets/tsdb/internal/staging"
)

// The staging table, the Fold and the staging read budget are package internal/staging's;
// these are their public names.

// FoldReport says what a Fold did: Entities, the number of staging entities folded (and
// then deleted); Points, the number of staged points written to the raw tables, and of
// staged histogram samples written to the histogram tables; Series, the number of series
// written; Rounds, the number of passes over the staging entities (each writes the series
// of a share of the columns, so that a round holds at most about 250,000 points); Through,
// the end of the arrival time folded: every point staged before it (by the writers' clocks)
// is in the raw tables. Through is zero when the database does not stage.
type FoldReport = staging.FoldReport

// ErrFoldBusy is returned by Fold when another process is folding the database.
var ErrFoldBusy = sentinel.ErrFoldBusy

// Fold moves the staged points into the raw tables (and the staged histogram samples into
// the histogram tables), and deletes them from the staging table: every staging entity of
// an arrival bucket that ended at least 5 minutes ago (by Options.Now). It lists the
// entities first, then reads their columns in rounds of at most about 250,000 points (a
// histogram sample counting as 16), a share of the columns a round, so that each series is
// written once: a transaction per series and raw partition (chunked: a day), whatever the
// number of writes staged. Each series' points are written with the priority of their latest write,
// so a Fold that runs late, or again, never hides a later write. Only then are the listed
// entities deleted, a transaction per 100.
//
// One process folds a database at a time: Fold takes a lease in the catalog (conditionally
// on its ETag; it lasts 5 minutes by Options.Now, renewed as the fold goes) and returns
// ErrFoldBusy while another holds it. Fold is idempotent and safe to kill at any moment:
// points written twice are the same points (a read keeps one per time), an entity not
// deleted is folded again by the next Fold, and a lease not released ends by itself. Points
// of a period that Retain dropped meanwhile are left out. Before it deletes, a Fold records
// the entities it read at their ETags (docs/format.md, "The folds' entities"): the next Fold
// of the same buckets that finds only those, at those ETags (the first was cut off in its
// deletes), deletes them without writing their samples again, so that no second change
// makes every reader read the Fold's minutes back.
func (db *DB) Fold(ctx context.Context) (FoldReport, error) { return db.fold.Run(ctx) }

// FoldsKept returns how many of its last Folds this DB keeps what they wrote of, and the
// bytes they take: where the DB has a raw cache (Options.RawCache), it takes each Fold of
// this process in from them, without reading the folded range back, whenever the Fold ends
// (the staging cache may no longer hold the entities the Fold moved). The last 3 Folds
// at most, and 32 MiB, a DB; each series' points encoded as raw chunks are.
func (db *DB) FoldsKept() (folds int, bytes int64) { return db.staging.Kept() }

// ReadBudget bounds the memory that reads of staging tables hold at once, in bytes: the
// pages' JSON being fetched and decoded, the decoded pages being yielded, and the staged
// points a read collects (a query's, or a fold round's).
//
// A page of a staging read is up to 8 MiB of JSON, held twice over (the body and its
// entities) while it is decoded. Each page takes that size from the budget before it is
// requested. Once decoded, its read holds the size of its decoded series instead (16 bytes
// a point: they may be larger than the compressed JSON) until every entity of the page was
// yielded.
//
// A read of the staged points of many series (the group of a Select's batches, a fold's
// round) collects them all, as written, before it sorts them (32 bytes a point): with an
// hour staged and tens of queries in flight, they were the largest part of the soak's heap.
// The points a read collects hold their bytes until it ends. So that readers holding
// points and waiting for more cannot wait for each other forever, every staging read is a
// read of the budget, and the oldest never waits: it may take more than there is, and when
// it ends the next oldest goes on. The budget holds at most its size, and what the oldest
// read takes past it.
//
// Other waiters wait in arrival order. A page larger than the whole budget takes all of it.
// One budget may be shared by many DBs (Options.StagingReadBudget): a server's tenants share
// one, so their queries together hold a bounded amount. It is safe for concurrent use. Its
// method InUse is the bytes taken now (pages and collected points) and the number of takers
// waiting for room.
type ReadBudget = staging.ReadBudget

// NewReadBudget returns a budget of bytes, which must be positive (else the error wraps
// tablets.ErrInvalidOptions).
func NewReadBudget(bytes int64) (*ReadBudget, error) { return staging.NewReadBudget(bytes) }
