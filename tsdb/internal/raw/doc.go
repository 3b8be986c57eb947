// Package raw is the raw part of a tsdb database: the tables of both kinds of samples, one
// table of each kind a raw period, and everything that reads and writes them.
//
// It owns:
//
//   - the float points in the raw tables (name + "r" + period), a store of the raw layout
//     each (chunked, advanced or basic: docs/format.md). Floats reads and writes them; Stores
//     makes a period's store (no request) and keeps those of the 8 periods used last;
//   - the native histogram samples in the histogram tables (name + "h" + period): tables of
//     package internal/chunks with the histenc codec (HistLayout, HistFormat; docs/format.md,
//     "Histogram tables"), the same code as the chunked layout's keying, writing, reading,
//     compacting and deleting them. Hists reads and writes them;
//   - the check of series names for both kinds' tables, before any request (the layout's
//     rules; for histograms, the histogram tables' keys too), and of a histogram sample's
//     size (ValidHistSample).
//
// Store[S, T] is the one implementation of what both kinds do (the spans of a range, a read
// of many series a span, the write of a series' samples into a period at a priority,
// Compact and Delete); the kinds fork only in T, their table of a period. Floats adds the
// reads of one series only floats have (tablets.Store's Query, QueryPage and Latest: Points,
// Page, Newest); Hists adds the read of histogram samples merged with staged ones
// (WithStaged, with staging.HistsMerge).
//
// It is given, by tsdb's newDB (New, NewStores): the service client, the table names
// (naming.Names), the period tables (tables.Periods: which tables exist; a request that
// finds a table gone or there tells them), the raw layout (a constructor of its stores, and
// a store of it for the checks of series names) and Options.CachedSeries. It does not read
// the staging table, nor call any other part: the staged samples a read merges in are given
// by its caller (tsdb's read path, the tiers), read before the raw ones; the Fold writes
// into it through Store.Write, which newDB gives the Fold as functions.
//
// It owns the raw change log too (Changes, changes.go: an entity of the catalog a period,
// docs/format.md), which every change of what its tables answer is recorded in, and the
// read Cache checked against it (cache.go): the writers outside it (the Fold, tsdb's
// direct writes, Delete and Retain) record through Changes, which newDB gives them. A Fold
// records a receipt with its change, naming the staging entities it moved: the Cache takes
// a Fold in from the points this process already holds (Config.FoldedFloats, the staging
// table's, which newDB gives it as a function: what its own Folds wrote, or the staged
// entities it listed and cached) instead of reading the folded range again. A table found
// gone while its period's log has no change was never made: its read
// is cached empty at generation 0, as an empty table's, so that ranges reaching into a
// period before the database's first (a 7-day panel of a young database) do not ask for
// it again until a change is recorded there.
//
// Locks and caches: Stores holds its stores under a mutex of its own; the series names found
// valid are a cache.Gen (at least CachedSeries of them, up to twice as many), with its own
// lock. The read Cache (given, shared by
// databases) and the log's last state read a period (Changes, under its mutex) save
// requests; neither answers without the log read after the staging read of the same query.
// Both only save work (a store costs no request to make; a miss of the names costs
// CPU): the account is the only state. Everything is safe for concurrent use.
package raw
