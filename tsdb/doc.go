// Package tsdb is a time-series database over many tables of one storage account: raw points
// in one table per period, retention by dropping whole tables.
//
// # Tables
//
// A database has a base name (letters and digits, starting with a letter, 3 to 40
// characters). Its tables are named from it, and it owns every table so named: a catalog
// (the tables dropped, and the label sets registered), and per period (RawPeriod, default 7
// days, epoch-aligned) a table of raw points and a series index (an entity per series with
// points there). The names, keys and properties of every table are specified, with
// examples, in docs/format.md.
//
// Each raw table holds a store of the chunked layout at a millisecond, which the catalog
// records for a database made now (see rawformat.go and docs/format.md: a database made
// before the record keeps the layout it was written with, Options.Layout or advanced, its
// one compatibility path). A period's tables
// are created on its first write, with the next period's, so that a new table (which Azure
// may throttle at first) is not new when its time comes. A Write lists its series in the
// period's index before it writes the points, once a period and process while remembered
// (see State and caches); Series reads the indexes of a range.
//
// # Parts
//
// A DB is the public face of parts that each own their code, their lock and their caches,
// each an internal package (its package documentation says what it owns, what it is given
// and what it keeps):
//
//   - the leaf layer, which depends on no part: tsdb/internal/naming (the tables' names,
//     the raw periods: part of the stored format), internal/labels (label sets, their one
//     encoding and series key, matchers; Labels and Matcher here are its types),
//     internal/cache (the bounded cache every part's caches are), internal/catalog (the
//     catalog table: dropped tables, the label-set registry and its cache, the progress
//     records), internal/tables (which period tables exist and which periods Retain
//     dropped; the spans of a range), internal/changelog (the change logs of a period in
//     the catalog, which the read caches are checked against: the raw part's and the
//     index's), internal/lease (the catalog's leases of the fold, the compaction and the
//     rollup), internal/azerr (the account's error replies) and internal/sentinel
//     (ErrExpired, ErrFoldBusy, ErrTaskBusy); batching is the module's internal/batch;
//   - the series index, internal/index: registering each period's series before their
//     samples, listing the series of a range, selecting label sets by matchers (Select,
//     LabelNames, LabelValues delegate to it);
//   - staging and the Fold, internal/staging: the staging table (Table: a write's staged
//     samples of both kinds in one set of transactions, their reads under the ReadBudget,
//     their deletion), its entities' layout, codec and query, the merge of staged into raw
//     samples (one code for both kinds), and the Fold (Folder), which moves them into the raw
//     part under the fold lease. The Fold is given the raw part's writes and the tiers'
//     flagging of late points as functions by newDB, so that it imports neither;
//   - the raw part, internal/raw: the float points in the raw tables (a store of the layout
//     each) and the histogram samples in the histogram tables (package internal/chunks with
//     the histenc codec), one Store[S, T] for both kinds: the kinds fork only in their table
//     of a period (the codec). A read of many series merged with its staged samples, a write
//     at a priority, Compact and Delete are one code;
//   - the tiers, internal/tiers: the rollup of raw samples into tier windows, the dirty
//     markers late writes leave in the catalog, the tier tables, the blocks' geometry and
//     codec, Aggregate and its planner. The tiers read the index, the staging table and the
//     raw part through the functions of tiers.Reads, which newDB wires (tsdb.go), so that
//     none of those parts and the tiers import each other;
//   - retention, internal/retention: every step of Retain. It uses the tiers (the rollup that
//     seals a period before its tables go), and nothing uses it.
//
// Package tsdb itself holds the DB (tsdb.go: Open, Options, newDB, which makes the parts
// and wires them), the raw format's record (rawformat.go), the write path (appender.go,
// appender_kinds.go, write.go: an Appender's Commit plans, registers, stages and writes both
// kinds of samples at once), the read path (querier*.go: a Queryable's Querier selects
// series of both kinds and plans each Select between staging, raw and a tier by a cost
// model; read.go: tablets.Store's reads), and the public names of the parts' types
// (labels.go, index.go, fold.go, histogram.go, tierapi.go, retain.go).
//
// The dependencies go one way: tsdb uses every part; retention the tiers; the raw part and
// the tiers the staging package's pure code (the staged kinds, the merge of staged into raw
// samples), never its Table or Folder; every part the leaf layer; and the staging package
// and the index no other part. TestPartsDependOneWay (parts_test.go) holds the table of
// what each package may import.
//
// # Maintenance
//
// A DB offers single passes only: Fold; Compact and Rollup of a range; RollupFlagged;
// Retain. Nothing in the package loops. The one scheduler that runs them on timers, over the
// ranges not yet covered (their progress in the catalog), is the server's
// (internal/maintain/schedule: `tablets serve` keeps running it, `tablets maintain` runs
// each task once, now); a program of its own calls the passes itself, or runs either
// command beside it. One process folds at a time (Fold takes a lease in the catalog,
// internal/lease: two folds at once could be wrong); the scheduler's compactions and
// rollups take one too (Exclusive: two at once are right, but the servers of one database
// tick together, and each did all the work).
//
// # State and caches
//
// The account is the only state: any number of processes may open one database. A DB's
// caches only save requests; each is bounded, and a miss is answered from the account:
//
//   - label sets registered, by series key: at least the Options.CachedSeries used last,
//     up to twice as many (two generations: what is not used for a generation goes). A
//     miss costs SeriesOf a share of a registry transaction, and a Write in a new period a
//     registry read.
//   - series listed in a period's index: at least the Options.CachedSeries written last in
//     each of the three newest periods written, up to twice as many. A miss costs a share
//     of an index transaction (and a backfill into an older period always pays it). The
//     series flagged there as having histograms are cached the same way, apart. A
//     registration that misses 100 series or more at once (a process just started, writing
//     what the last one did) first reads the period's index once (its first page, and a
//     larger index again in 17 ranges of keys at once: a request per 1,000 entries and
//     range), waiting for it at most 5 s, and both caches learn what it lists: only the
//     series it does not list are written (the newest period's, for the label sets).
//   - tables that exist, and periods dropped: the tables of the last listing, plus those
//     this process made or found, less those it dropped or found gone; at most 4,096
//     periods known dropped and 4,096 tier tables known to exist.
//   - raw stores: the 8 periods used last (a store costs no request to make).
//   - the staging table's listing: the keys, ETags and time spans of its entities, as
//     last listed. A read brings it up to date with one query of the staging log (an
//     entity of the staging table that the Fold and Delete update after changing entities)
//     and of the entities written since the last listing (their Timestamp, from the
//     service's time of that listing less 10 s); when the log moved (or a minute passed), it
//     lists the table whole again (TestTSDBStagingListing).
//   - staging entities' columns that queries decoded (Options.StagingCache, none by
//     default; a server shares one among its tenants, --staging.cache-bytes): a query takes
//     the staging entities its range overlaps from the listing and fetches only those the
//     cache lacks at their ETag, one query a partition holding any: a refreshed panel reads
//     the entities written since, not the whole bucket again (TestTSDBStagingCache: 300
//     series, five writes: 108 KB, then 7 KB). Another process's write, Delete and Fold
//     show in the next query. An entity three reads fetched columns of is fetched whole and
//     kept as read, its columns decoded when asked (TestTSDBStagingWholeAfterColumns).
//   - read marks (ReadMark) keep nothing: a mark is a listing of the staging entities of a
//     range and the raw change logs of its periods, which a cache of answers (the server's
//     results cache) keeps with what it computed and checks with a later mark (Holds).
//   - speculative reads (Speculate) keep nothing either: a read that takes the listing and
//     the logs' states as they stand runs beside the PrepareRead that brings them up to
//     date, and its answer stands when that found nothing changed (counted as the listing's
//     refreshes and the logs' states read find them: TestSpeculateHoldsUntilAChange). The
//     server's instant queries read so: their engine works while the listing's request is
//     under way.
//   - tier blocks Aggregate read (Options.BlockCache, none by default; --tiers.cache-bytes
//     in a server): the first read of a tier table reads
//     its blocks as ever and keeps them; a later one lists the keys and ETags of the blocks
//     of its range and fetches only those the cache lacks at their ETag, in one query from
//     the smallest such key (a rollup rewrites the newest blocks, a backfill's the block it
//     lands in): TestTSDBBlockCache, 20 series over a week at an hour: 32 KB, then 4.9 KB.
//   - raw samples reads decoded (Options.RawCache, none by default; --raw.cache-bytes in a
//     server), by table and series, with the range read and the generation of the period's
//     change log (raw.Changes, in the catalog) they were read at. Every change of what a
//     raw or histogram table answers is recorded there with the range of times it touched
//     (the Fold before deleting what it moved, a direct write, Delete, Retain before it
//     drops): a read asks the log after its staging read and reads again only the times a
//     change touched since (and the series the cache lacks); a read of the present reads to the period's end,
//     so that its refresh finds the newest minutes too. The series it holds nothing of
//     are read into it while the staging read is under way (raw.Floats.Prefetch, at the
//     log's last known state), which that read after the staging read then checks as any
//     other entry (TestSelectRawPrefetchThenAFold). TestTSDBRawCache (40 series, two
//     days at a minute): 59 KB, then 844 bytes; another server's late point, fold,
//     backfill, delete and retention each show in the next read. The log holds ranges, not
//     series: a late point of one series re-reads every series' samples from its time on.
//     Warm fills it from a time to the present with one scan of the raw tables by
//     ranges of keys (a server's start: TestWarmAnswersTheFirstSelects, 200 series
//     in one query, then two Selects of them without a query of the raw table), and the
//     index cache below with the present period's label sets, metric by metric.
//   - label sets Select read from a period's index (Options.IndexCache, none by default;
//     --index.cache-bytes in a server), by index table and query, at the generation of the
//     period's index change log: Register records there after writing new entries, Retain
//     before dropping an index. A Select reads the log (one request a period) and the label
//     sets only when it changed: TestTSDBIndexCache, a Grafana variable over 600 series,
//     170 KB, then 1 request and 327 bytes.
//   - series names the layout found valid: at least the Options.CachedSeries used last
//     (a miss costs CPU, not a request).
//
// Memory stays flat whatever the churn of series: with CachedSeries 20,000, a million
// distinct series written over twenty periods leave the heap where it was after the first
// 100,000 (measured after a collection: 25.8 MiB, then 23.8 MiB; the caches take at most
// about 1.6 KB per unit of CachedSeries).
//
// A read does not list the tables: it reads the periods of its range that the cache holds.
// Another process may create a table at any time (a new database's first write, a
// backfill), so for the periods of a range the cache does not hold, a read queries their
// tables directly when there are one or two (a table that does not exist is an empty
// period: a table made a moment ago is seen at once), and else trusts the last listing
// while it is younger than a minute, listing again (one request) when it is older: such a
// table is hidden for at most a minute from a read of a wide range. A request that finds a
// table gone (dropped by another process) drops it from the cache. Latest and RawFrom use
// the cached list while it is younger than a minute; Retain always lists.
//
// So a warm read of one series (Select by metric name, then its points in one period)
// costs the index query and one data query; a cold process pays the same for a range of
// one or two periods.
//
// # Labels
//
// A series is a string key; SeriesOf makes one from a label set (up{job="api"}): "l" and
// the first 128 bits of the SHA-256 of the set's canonical encoding (Labels.MarshalBinary;
// docs/format.md, "Label sets and series keys"), in hex. It fits every layout's keys whatever the labels hold, is the same in every process
// and version, and does not collide in practice (a chance under 1e-14 among a trillion
// sets). SeriesOf records the set in the catalog's registry, once a process.
//
// The index of a period has an entity per series with points there, a label set's in the
// partition of its metric name, a plain series' (a key SeriesOf never returned) in a
// partition of their own (docs/format.md, "The series index"). A Write that first gives a series points in a period
// writes its entry, reading the catalog if this process never saw the key: nothing depends
// on one process's memory. Select reads only the periods of its range, and only the
// partitions of the metric names its matchers allow when they allow few (`__name__="up"`,
// `__name__=~"a|b"`); it matches with Prometheus' semantics. Retain drops a period's index
// once no tier keeps windows of the period either: until then Select finds the series a tier
// holds after their raw points are gone.
//
// # Staging
//
// With the chunked layout (at a millisecond), an Appender's Commit (WriteMany, WriteSamples)
// does not give each series a transaction of its own. The series with fewer than 100 points
// in a raw period of the write (a remote write holds about one sample of each of thousands
// of series) go into the staging table (name + "w") instead: entities that hold many
// series, each series' points in one of 240 binary columns chosen by a hash of its key, a
// transaction holding up to three entities of up to 768 KiB. A write is acknowledged once
// its transactions are: a staged point is in the account, and any DB of any process reads
// it at once. The series with more points are written into their raw tables directly, as
// before. Native histogram samples are staged by the same rule, in staging entities of their
// own (see Histograms), and a Commit of both kinds puts the float and histogram entities of
// a partition in the same transactions: a remote write of floats and histograms costs the
// transactions of one staging write (TestTSDBAppenderMixedCost: 1,200 float and 1,200
// histogram series of one sample, their series listed, one transaction where a write of
// each kind costs two; new to the period, 21 transactions where they cost 42, a series of
// both kinds listed once).
//
// A read of series reads the staging table first, then the raw tables: one query whose filter
// keeps the entities whose points overlap the range (and whose partition holds the series'
// slot), selecting only the columns of the series asked for. Where both hold a time, the
// staged point is the later write.
//
// Fold moves the staged points of the arrival buckets (10 minutes of the writers' clocks)
// that ended at least 5 minutes ago (and Options.FoldDelay more: tablets serve spreads its
// tenants' folds apart) into the raw tables, and deletes them: one transaction per
// series and raw partition (a day), whatever the number of writes, with the priority of the
// series' latest write (chunked's WriteAt), so that the later write wins a time in the raw
// tables too. Options.FoldPace spreads a Fold's writes of the bucket just due over at least
// that long (tablets serve: a minute), so that the account's queries are not served behind
// all of them at once; a Fold catching up on older buckets writes as fast as it can. One
// process folds at a time (a lease in the catalog); a Fold killed anywhere is finished by
// the next. Run it on a timer (tablets serve does, hourly) or with tablets
// maintain. Points staged but never folded are still read: folding only makes reads and
// retention cheaper.
//
// Partitions. An arrival bucket's entities are in StagingPartitions partitions (default 1):
// a series' slot, the top byte of its hash, names its partition. Each partition costs a
// transaction a write, and divides the bytes a read of one series reads. Azure's targets are
// 2,000 entities/s a partition and 20,000 transactions/s an account: at 2,000 samples a
// request, one partition takes about a request every millisecond before its entity target,
// 4 million samples/s, so the account's transaction target binds long before a partition's.
// What grows with the rate is the read of a series' unfolded points: the staged bytes of an
// hour divided by 240 columns and the partitions. Choose StagingPartitions so that
//
//	samples/s x 3,600 x 26 bytes / (240 x StagingPartitions) <= 512 KB
//
// (as base64, with the entities' keys, under 1 MB a read of an hour),
// that is 1 partition up to about 1,300 samples/s (80,000 series at 60 s, 20,000 at 15 s),
// and twice as many each time the rate doubles; fold more often than hourly when the rate is
// higher still.
//
// Cost model, measured (BenchmarkTSDBStagedIngest: Azurite, requests and bytes counted at
// the transport; 10,000 series at a 15 s scrape, 2,000 samples a request, as Prometheus
// sends them):
//
//	ingest      1 transaction a request: 0.00055 requests a sample (index and tables
//	            included), 41 bytes a sample on the wire, 26 of them column bytes
//	fold        a transaction per series and raw day, plus the reads (1,000 entities a
//	            page) and deletes (100 entities a transaction): 0.0042 a sample for an
//	            hour folded at once (10,000 series, 2.4 million samples)
//	recent read one series' unfolded hour: 3 requests (2 pages of the staging query, the
//	            raw table), 557 KB
//	everything  two hours of that load, then one maintenance run (tablets maintain: fold,
//	            compact, roll up the default tiers, retain): 0.0068 requests a sample,
//	            0.0005 of them ingest (BenchmarkTSDBIngestAndMaintain); most of the rest is
//	            a transaction per series for the fold and one per series and tier table
//	            for the rollup, so the cost a sample falls as a series' points a run grow
//
// Before staging, the same load cost 0.63 requests and about 600 bytes a sample.
//
// # Compaction
//
// With the chunked layout a writer of few points (directly, or a fold run often) makes a
// chunk a write; Compact merges them in every raw table of a range (the scheduler's
// compaction runs it over the time since the last one). Compact
// scans each table once for the partitions (series and day) that hold several chunks, and
// compacts only those: a table with nothing to merge costs a request per 1,000 chunks of
// the range.
//
// # Retention
//
// Azure Table Storage has no TTL. Retain deletes whole raw tables, one request each, once
// their whole span is older than RawRetention: the design guide's high-volume delete
// pattern. A dropped period is recorded in the catalog first: a Write of a point in it, or of
// any point older than the retention by Options.Now, is rejected with ErrExpired before any
// request, and the table is never created again (Azure answers 409 to a deleted table's name
// for 40 seconds and more). Reads over dropped periods return what remains. A Querier's
// Select whose read found a raw table gone that it planned on (another process's Retain)
// learns from the catalog which periods were dropped and plans again before it gives a
// series (their tier windows, where tiers keep them), or fails rather than answer short.
// Raw samples are gone before the oldest raw table only where Retain dropped a period:
// before a database's first table (a 7-day range of a database of a day), raw answers.
//
// # Reads
//
// *DB implements tablets.Store over the raw tables: a read reads the tables its range
// overlaps (see State and caches), oldest first (Latest: newest first). Page tokens hold the
// time the next page starts at, bound to the series and range.
//
// # The Querier
//
// A Queryable (DB.Queryable, with QueryOptions) reads the database as a query engine
// wants it, and learns from its reads; its Querier of a time range selects series by
// matchers (Select: series of floats and native histograms together, times ascending),
// reads named series raw, of the kinds asked for (Read: series keys, SeriesOf's or plain
// names, as the CLI reads them), lists label names and values, and aggregates windows
// (Aggregate). tablets serve's PromQL
// engine and remote read go through it (server/promstore converts labels, matchers, hints
// and samples, and nothing else). Where the samples come from is decided here:
//
//   - Raw reads: Select reads the series index once (label sets sorted as Prometheus
//     sorts them), then the samples of BatchSize series a unit (a series with histograms
//     counting as 4), Concurrency units at a time ahead of the consumer: memory holds at
//     most Concurrency+1 units beyond what the caller keeps. A unit reads the staging table
//     once for both kinds (a group of up to 16 units shares one read of it), then the
//     histogram tables for the series with histograms, then the raw tables (QueryMany:
//     many series a request). A Select of at least two units cuts them in the order of
//     the series' keys instead, and each unit reads the tables by the range of keys its
//     series span (one query of four comparisons, pages of up to 1,000 chunks, the series
//     not asked for dropped; a range that turns out sparse gives itself up within a page
//     for the series' own filters, internal/chunks): series keys are hashes, so a unit of a
//     large Select is most of its range's series, and the filters of the series' own
//     partitions took a request per 13 to 15 series. With BatchSize left to its default,
//     such a unit of float series holds up to 8 batches, as many as keep it within about
//     500 chunks and 512k samples by the estimate below, counted from where the raw
//     samples of the range begin as far as the process knows: the oldest raw table it
//     knows of, or the first sample of the changes of the range's first period, from its
//     change log as last read (the hull of every change its entity keeps) (an hour of a
//     scrape every 15 s: 448 series a query, where 64 took a query each; seven days of a
//     database of an hour, the same). Such a Select holds all its series
//     before it gives the first, in labels' order (a PromQL engine holds them all anyway).
//     Samples come back exactly: the millisecond of each sample and
//     the float64 bits unchanged, staleness markers included. Where a float and a histogram
//     share a millisecond, the histogram is kept (the series is a histogram series at that
//     time). Series without a sample in the range are left out. A Series holds its floats
//     plain (16 bytes a sample) for the first million floats of its Select, encoded
//     beyond (internal/chunkenc, a few bytes a sample), its histograms as read.
//   - Tier reads: as Thanos' auto-downsampling, a Select whose hints say the step is at
//     least five times a tier's Step, and whose function a window's Min, Max or Last
//     answers (min_over_time, max_over_time, last_over_time, rate, increase, irate, delta,
//     idelta, resets, changes, deriv, a plain selector, an aggregation of an instant one),
//     may read that tier and return one synthetic sample per whole window, at its last
//     millisecond: the coarsest tier of at least MinTierStep (any, where the raw samples
//     are gone) whose Step is at most a fifth of the step and, for a range function, of
//     its Range; for an instant selector, under the lookback delta. The answer is
//     approximate (rate over window-end samples instead of every sample), and staleness
//     markers are lost. Series with histogram samples read raw even then, in their place.
//   - The choice by cost: where a tier can serve a Select, it reads the tier if the raw
//     samples of the start of its range are gone; and, only where the Select may read
//     approximate answers (QueryOptions.MaxResolution or SelectHints.MaxResolution:
//     AnyResolution, or a tier Step at most a duration; by default RawResolution, none),
//     if that is estimated to cost fewer bytes than the raw samples; PreferTiers always,
//     DisableTiers never. The estimate
//     (docs/tiers.md has its figures and their measurements) counts, for the float series:
//     raw, the samples at the bytes a sample of the raw layout (1.5 in chunked's chunks,
//     27 in advanced's slots, 150 in basic's entities, or QueryOptions.RawBytesPerSample),
//     chunked's chunks whole (a day of a series, or 16 KiB), 300 bytes an entity, a
//     request per BatchSize series and raw table; tier, its columnar blocks whole, a byte
//     or two a window for the column read, 200 an entity, a request per 13 series and tier
//     table, and the raw read of the windows Aggregate reads raw (within SealDelay of now,
//     and after the rollup loops' progress, TaskRollup, read at most once a minute). Both
//     scale with the sample rate, a moving estimate of the Queryable (the float samples
//     its reads returned over the series-seconds they covered, starting at a sample every
//     15 s). QueryStats tell which path each Select took and why.
//
// # Writes
//
// Write fails whole, before any request, for a bad series name, a bad time or an expired
// point. An Appender's Commit (WriteMany, WriteSamples), the ingest path,
// rejects per series instead, as Prometheus' appender does: every series and sample is
// checked before any request, the bad ones are reported (a *tablets.WriteError per series,
// kind and cause, wrapping tablets.ErrInvalidSeries, tablets.ErrInvalidHistogram,
// tablets.ErrInvalidTime or ErrExpired), and the rest is written; see Appender.Commit.
//
// # Histograms
//
// Native histogram samples (written by an Appender's AppendHistograms or WriteSamples, read
// by a Querier's Select and Read) live in a histogram table per raw period (name + "h" +
// start), always at the millisecond, beside the raw table: a series may switch between float
// points and histogram samples, a read returning both. The table holds chunks of a series'
// samples (an internal/histenc chunk, up to 16 KiB), in a partition per series and day: it
// is a table of package internal/chunks, as the chunked layout's are, the two differing only
// in their codec (docs/format.md, "Histogram tables"), so that they are keyed, written, read,
// compacted and deleted by the same code: where chunks hold the same millisecond the later
// write wins, and a retried write lands on the same entity.
//
// Histograms are staged as points are (see Staging), with the chunked layout at a
// millisecond: the series with fewer than 100 samples in a period of a write go into
// histogram staging entities of the staging table (version 2: each column holds, per series,
// an internal/histenc chunk of its samples; docs/format.md, "Histogram staging columns"), all
// the series of a write together, a transaction of up to three entities of 768 KiB, shared
// with the float entities of the same partition when a Commit holds both kinds. A read
// of histograms reads the staging table first (one query, its series' columns, matching no
// entity of float points: the two kinds' time keys never interleave), then the histogram
// tables; the staged sample wins a millisecond both hold. Fold moves staged samples into the
// histogram tables, a transaction per series and day, with the priority of the series' latest
// write, and marks dirty the slices of late ones, as it does points; Delete, Rollup and
// Aggregate read staged samples where they read staged points (one query for both kinds).
// Measured (TestTSDBStagedHistogramsCost; server's BenchmarkRemoteWrite/histograms, 2,000
// series of a 20-bucket histogram, 500 a request): a write of 2,000 series of one sample
// each, their index entries made, is one transaction of 158 KB (79 bytes a sample); the
// benchmark's remote write costs 0.002 requests a sample (a transaction a request), 147 bytes
// a sample on the wire, about 71,000 samples/s on 2 cores against Azurite, where writing
// each series directly cost 1.0 request a sample and 1,500 samples/s. A Fold of them is a
// transaction per series, as for points.
//
// Without staging (other layouts, DirectWrites, or 100 samples and more of a series in a
// period) the cost of a write is, for each series, a transaction per day it touches (per 100
// chunks). The first write of a series in a period also costs its share of an index
// transaction (an index partition and 100 series), which flags its entry as having
// histograms there (before its samples are staged or written; a Commit of both kinds of a
// series writes its entry once, flagged); Select reports it in
// SeriesInfo.Histograms. Each direct write and each Fold makes a chunk, and a chunk of one
// sample is mostly keys: Compact merges a partition's chunks into chunks of
// up to 16 KiB, in one transaction a run of up to 90, so that an hour at 5 s, 720 entities
// before, is one after. Measured on Azurite with a 20-bucket latency histogram: 267 bytes
// billed a sample in chunks of one, 16 once compacted (4 queries and 9 transactions for the
// hour). A read packs many series into each request (filters of at most 15
// comparisons: 13 to 15 series a request over a range inside a day, whose keys share the
// range's comparisons, two or three across days) and reads a request per 1,000 chunks; Delete removes samples as it removes points,
// and Retain drops a period's histogram table with its raw table.
//
// # Time
//
// Options.Now is the clock of everything time-dependent in a DB: the raw retention of a
// write, the slices a write marks dirty, the time Rollup stamps on its blocks (which
// decides when Aggregate trusts them), the age of the cached list of tables, a staged
// write's arrival bucket, what Fold folds and its lease. Tests set it; the maintenance
// scheduler covers its ranges by it, but ticks by the wall clock. Staging RowKeys and chunked priorities, which order
// the writes of one time, are the wall clock's, from one counter strictly increasing in a
// process (a staged write and a direct one of a process keep their order).
//
// # Rollup tiers
//
// Each tier (default: a minute kept 400 days, an hour kept forever) keeps windows of its Step
// in tables of its Period. A window holds Count, Sum, Min, Max, First, Last and a DDSketch of
// its points (quantiles within Accuracy, relative; sketches merge exactly). A columnar block
// (docs/format.md, "Columnar tier blocks" and "Sketches") holds one series' windows of a day
// of minutes or 14 days of hours, a compressed column per aggregate: a read selects only the
// columns its fields need, and the sketches only for quantiles. A regular counter or gauge
// costs about 8 bytes a window on the wire for all the columns but the sketch, 2 for one
// column; the row blocks older versions wrote (24 windows an entity, about 185 bytes a
// window) stay readable, and a Rollup of their span converts them.
//
// Rollup(from, to) recomputes whole slices (24 windows of the coarsest tier, a day by
// default) from the raw points and splices them into their blocks, conditionally on the
// ETags of the entities it read before the raw points; a block computed equal to the one
// stored (sealed bits included) is not written, so rollers running at once never fail each
// other, and a Rollup of a range already rolled up and sealed sends no transaction. Over
// chunked raw tables it reads many series at once, a slice and a few thousand series at a
// time: the blocks a query per tier table, the staged points and histogram samples one, the
// raw points a query per raw table (a request per 1,000 chunks), then a transaction per
// series and tier table. Measured on Azurite (2,000 series, an hour at 15 s, the default
// tiers): 4,018 requests, where reads per series cost 12,006. Aggregate(series, from, to,
// step, opts) merges the windows of all the series (AggregateSeries keeps them apart): it
// reads the coarsest tier whose Step divides step (a 5-minute step reads the minute tier's
// windows merged) where its windows are sealed (computed at least SealDelay after their end),
// in no dirty slice and holding no staged point or histogram sample, and the raw points and
// samples elsewhere: many series a request (filters of 13 series, or a scan of the key range
// between the first and the last name while its pages hold mostly asked series). Points older than SealDelay mark their
// slice (24 windows of the coarsest tier, a day by default) of their series dirty once in
// the raw tables, a marker in the catalog (docs/format.md, "The catalog"): written directly,
// by the Write, after storing them; staged, by the Fold that moves them (a Prometheus
// catching up after an outage sends thousands of series' late samples a request: marking
// them at once would cost a transaction per series and request). Until then Aggregate reads
// such a point from the staging table, and after, the raw points of its slice instead of the
// windows, until RollupFlagged (or a Rollup of the slice) recomputes them and clears the
// marker: a late point is never hidden by a stale window, and recent writes cost nothing
// more.
//
// No window is lost: Rollup's progress is in the catalog (the server's rollup loop and
// tablets maintain go on from it after any downtime), and Retain rolls up a raw period (past that progress,
// and its dirty slices) before it drops it. Over a dropped period, Aggregate serves the tier
// windows there are, and Rollup leaves them alone.
//
// A window keeps the histogram samples of its series apart from its points: their count,
// the first and the last, and the observations made in the window as one float histogram
// (the increase of counter histograms between the window's samples, the sum of gauge
// histograms; see Window), in the block's histogram column (docs/format.md, "Histogram
// windows"): 150 to 200 bytes for a 20-bucket histogram. Coarser windows and several series
// merge exactly: bucket for bucket, at the smaller schema. Rollup reads the histogram
// samples after the ETags, as it reads the points, 64 series at a time (a few a request); a
// late histogram sample marks its slice dirty as a late point does. Aggregate's quantiles over
// histogram series come from their buckets, as Prometheus' histogram_quantile computes them
// (HistogramQuantile).
package tsdb
