// Package staging is tsdb's staging part: the staging table (its base name + "w"), the
// Fold that empties it into the raw tables, and the read budget of its reads.
//
// The staging table holds the samples of the series a write gives few: an entity holds
// many series, in columns, so that a remote write costs a few transactions; the Fold moves
// them into the raw (and histogram) tables later. docs/format.md, "Staging", has every
// byte.
//
// It owns:
//
//   - the entities' layout, as pure code that sends no request: their keys and properties
//     (layout.go), building the entities of a write (records.go, entity.go), decoding one
//     as read (decode.go), the query of the entities that may hold some series' samples
//     (query.go), the order of staged writes (writes.go), the packed form a read keeps
//     staged points in (packed.go), and the merge of staged samples into raw ones, one code
//     for both kinds (merge.go), which tsdb's read path and the tiers use;
//   - the Table (table.go, table_read.go, table_delete.go): creating the staging table, the
//     transactions of a write's staged samples (Stage), the reads of staged samples (Read,
//     ReadKinds, ReadPacked, Entities) and their deletion (Delete). It is given the service
//     client, the table names, the raw layout (which says whether the database stages at
//     all) and a Config of the options it reads (the clock, StagingPartitions,
//     StagingReadBudget, DirectWrites) with the period tables' KnownDropped as a function,
//     and depends on no other part. Its own state that changes (whether the table is
//     known to exist) is an atomic; its caches have their own locks (below);
//   - the Folder (fold.go, foldlease.go): Run is tsdb's DB.Fold. It reads and empties the
//     Table under the fold lease, an entity of the catalog table (taken and renewed
//     conditionally on its ETag: one process folds at a time). It is given the period
//     tables (tables.Periods: which periods were dropped, tables found gone), the catalog
//     table's client, a FolderConfig (the clock, SealDelay, the tiers' seal margin) and, as
//     functions (FoldWrites), the raw part's writes of both kinds and the tiers' flagging
//     of late points, so that neither the Table nor the raw tables depend on it. It keeps
//     no state between Folds but what they wrote, in the Table's foldMemo (foldmemo.go:
//     the last few Folds' points, encoded, by receipt; its own mutex); a held lease has its
//     own mutex (its renewals by a round's writers);
//   - the ReadBudget (readbudget.go), which tsdb re-exports: it bounds the memory that reads
//     of staging tables hold at once, shared by the DBs of a server. It has its own mutex.
//
// An entity holds the points of many series, in columns (stageenc columns, or histogram
// columns of stageenc.AppendHist): a series' points go in column hash % Columns, and a read
// of one series selects that column only. A write's entities go to the partition of its
// arrival bucket (Bucket of the writer's clock) and of the series' slot range (the hash's
// top byte, Options.StagingPartitions ranges), a transaction of EntitiesPerTx.
//
// A Fold records a receipt with its change of the raw change log (receiptOf: the entities its
// rounds read, at the ETags read); FoldedFloats (folded.go) gives a raw cache the points of
// the Folds this process made (the foldMemo, Config.KeepFolds), or else of those whose
// receipts match entities this Table's listings knew (those listed now, and those a whole
// listing found gone, kept a while) and the Cache holds, so that it takes a Fold in without
// reading the raw tables.
//
// Its caches: the Cache (cache.go) of the columns queries decoded, and the Table's listing
// of its entities' keys and ETags (listing.go). A query takes the entities of its range
// from the listing, brought up to date by one query of the entities written since and the
// staging log (an entity of the table: a Fold and a Delete record their changes in it, and
// a listing whose log moved is made whole again), and fetches only the columns the Cache
// lacks at those ETags (the first query of a Table reads them whole, and fills it). A
// Table's series index (seriesindex.go) says where each series is among the whole float
// entities its reads got from the Cache, so that a read takes the points of its own series
// of them rather than looking at every series of every entity; it is derived from the
// Cache, prunes what the Cache dropped, and has its own lock. The Fold and Delete read the
// table itself. List is the listing of a range (tsdb's ReadMark).
//
// A Fold also records in the folds' log (another entity of the table, which sorts last)
// after its change of the raw change log and before it deletes: a listing that finds it
// where a listing before a read began found it goes with a raw change log read after that
// one (Listing.LogAfter), so a query reads the raw log beside its listing, not after it.
package staging
