package tsdb

import (
	"context"
	"fmt"
	"iter"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/histenc"
	"github.com/seed71701133/tablets/tsdb/internal/answers"
	"github.com/seed71701133/tablets/tsdb/internal/cache"
	"github.com/seed71701133/tablets/tsdb/internal/catalog"
	"github.com/seed71701133/tablets/tsdb/internal/changelog"
	"github.com/seed71701133/tablets/tsdb/internal/index"
	"github.com/seed71701133/tablets/tsdb/internal/naming"
	"github.com/seed71701133/tablets/tsdb/internal/raw"
	"github.com/seed71701133/tablets/tsdb/internal/retention"
	"github.com/seed71701133/tablets/tsdb/internal/sentinel"
	"github.com/seed71701133/tablets/tsdb/internal/staging"
	"github.com/seed71701133/tablets/tsdb/internal/tables"
	"github.com/seed71701133/tablets/tsdb/internal/tiers"
)

// ErrExpired is wrapped by the error of a Write holding a point older than the raw
// retention, or in a period whose table was dropped. Such a Write sends nothing.
var ErrExpired = sentinel.ErrExpired

// Options configure a DB. The zero value of each field means its default.
type Options struct {
	// Layout makes the raw store of one table of a database made before tsdb recorded its
	// raw format. nil: the database's own format. A database made
	// now stores its raw points in the chunked layout at a millisecond, with its defaults,
	// and records it in its catalog; a database without the record keeps the layout it was
	// written with: Layout, else the advanced layout (those versions' default). A Layout
	// other than chunked at a millisecond with the defaults for a database that records
	// its format is an error wrapping tablets.ErrInvalidOptions (its Concurrency is free).
	// A Layout other than that format for a database without the record makes (or keeps) a
	// database of that layout, unrecorded, as before: every process opening it must name
	// it. Options() gives back the layout in use.
	Layout func(*aztables.Client) (tablets.Store, error)
	// RawPeriod is the span of one raw table: a whole number of seconds, epoch-aligned.
	// Default 7 days.
	RawPeriod time.Duration
	// RawRetention: Retain drops the raw tables whose whole span is older; and a Write of an
	// older point is ErrExpired. 0: keep forever.
	RawRetention time.Duration
	// Tiers are the rollup tiers, finest first. nil: DefaultTiers; an empty slice: none.
	Tiers []Tier
	// Accuracy is the relative accuracy of quantiles: 0 for 0.01, else in [1e-6, 1).
	Accuracy float64
	// SealDelay is how long after its end a tier window is sealed: Aggregate trusts a window
	// rolled up at least that long after its end, unless it was flagged since, or a staged
	// point lies in it. Points older than SealDelay, less 5 minutes of clock skew, flag their
	// windows once stored in the raw tables: by the Write that stores them, or for staged
	// points by the Fold that moves them (a transaction a series and tier table a Fold, not a
	// write); newer points cost nothing more. 0: DefaultSealDelay (an hour); at least 10
	// minutes.
	SealDelay time.Duration
	// Now is the clock: the raw retention of a Write, the windows a Write flags, the time a
	// Rollup stamps on its blocks, and the age of the cached list of tables are measured by
	// it, and so are the ranges the maintenance scheduler covers (the server's loops,
	// tablets maintain) unless it is given a clock of its own. nil: time.Now.
	Now func() time.Time
	// StagingPartitions is the number of partitions of the staging table that a write's
	// staged points spread over, in each arrival bucket: a power of two from 1 to 256.
	// Each costs a transaction a write, and divides what a read of one series' staged
	// points reads (see the package documentation, "Staging", for how to choose it). 0: 1.
	StagingPartitions int
	// FoldWriters is how many series a Fold writes at once (and how many groups of
	// partitions it deletes from at once). A Fold's writes mostly wait for the account:
	// more than the account's requests a process gives its Folds only wait longer, each in
	// a goroutine (tablets serve gives its Folds running at once the background's share of
	// --account.max-requests-in-flight together: 16 each by default). 0: 32.
	FoldWriters int
	// FoldDelay is how much longer than the 5 minutes after its end a Fold leaves an arrival
	// bucket (10 minutes of writes) staged. The databases of one account fold their buckets
	// at the same minutes otherwise, each at the account's pace: a server's tenants, or
	// any application's databases, share its time, and its queries wait behind all their
	// folds at once. tablets serve gives each tenant a share of --background.spread, by
	// its rank among the tenants its configuration names, else by its name. 0: none; at
	// most MaxFoldDelay.
	FoldDelay time.Duration
	// FoldPace is the least time a Fold's writes of an arrival bucket take: its series'
	// writes begin evenly over it, FoldWriters at most at once all the same. Unpaced, a
	// Fold writes a bucket as fast as the account lets it (the soak's, 18,700 series of a
	// tenant, in 40 s on Azurite, about 470 transactions a second), and the queries of
	// every database on the account wait behind it meanwhile. A Fold that catches up
	// (more buckets than the one that just became due) is not paced. tablets serve sets
	// it to --background.fold-pace. 0: none; at most MaxFoldPace.
	FoldPace time.Duration
	// RollupPace is the least time a Rollup of recent windows takes (those sealed in the
	// last hour, as the maintenance loop rolls them up): its groups of series (up to 2,000
	// each) begin evenly over it. Unpaced, a rollup of the soak's tenant (18,746 series)
	// read and wrote back 44 MB of blocks each way in 20 to 25 s, and Azurite's one thread
	// served nothing else meanwhile. A Rollup catching up on older windows is not paced.
	// tablets serve sets it to --background.rollup-pace. 0: none; at most MaxRollupPace.
	RollupPace time.Duration
	// DirectWrites writes every point into the raw tables at once, a transaction per
	// series, as versions before staging did. Staging is used only with the chunked layout
	// at a millisecond (its exact times); other layouts always write directly.
	DirectWrites bool
	// CachedSeries sizes the caches of the write path: a DB remembers at least the
	// CachedSeries series written last as listed in each of the three newest periods'
	// indexes, the label sets of at least the CachedSeries used last (when they average
	// under 300 bytes encoded), and as many series names found valid (when their keys
	// average under 128 bytes), up to twice as many of each: at most about 1.6 KB of heap
	// per unit (105 MB at the default). A series it forgot costs a request again, never a
	// wrong answer. 0: DefaultCachedSeries.
	CachedSeries int
	// StagingReadBudget bounds the memory that reads of the staging table (by queries,
	// Fold and deletes) hold at once: their pages, fetched and decoded, and the points
	// queries and fold rounds collect; DBs may share one (see ReadBudget). nil: no bound.
	StagingReadBudget *ReadBudget
	// FoldReadBudget bounds the points the Folds' rounds collect and hold while they write
	// them into the raw tables, and their pages, apart from StagingReadBudget: a round holds
	// its points for as long as its writes take (a transaction a series), and queries that
	// shared its budget waited for it. DBs may share one. nil: StagingReadBudget.
	FoldReadBudget *ReadBudget
	// StagingCache keeps the columns of staging entities that queries decoded, so that a
	// query reads again only the entities written (or changed) since: each query lists the
	// keys and ETags of the entities its range overlaps and fetches only what the cache
	// lacks (see StagingCache). DBs may share one (a server's tenants: tablets serve makes
	// one, --staging.cache-bytes). nil: none, each query reads the entities it needs whole
	// (a program that queries the same ranges again gives one: NewStagingCache(
	// DefaultStagingCacheBytes)).
	StagingCache *StagingCache
	// BlockCache keeps the tier blocks Aggregate read, so that a read of a range lists the
	// keys and ETags of its blocks and fetches only those rolled up (or rewritten) since:
	// a sealed block is read once while its ETag stands. DBs may share one (tablets serve
	// makes one, --tiers.cache-bytes). nil: none.
	BlockCache *BlockCache
	// RollupCompute bounds how many series a Rollup computes at once (decodes their
	// blocks, splices the new windows in, encodes them): nil, the process's limit, half its
	// cores (GOMAXPROCS), shared by every DB that names none, so that a rollup leaves the
	// other half to the queries (see ComputeLimit).
	RollupCompute *ComputeLimit
	// RawCache keeps the raw samples reads decoded, so that a read of the same series again
	// reads only the times another write, fold, delete or retention changed since (each
	// recorded in the catalog's change log: see RawCache). DBs may share one (tablets serve
	// makes one, --raw.cache-bytes). nil: none.
	RawCache *RawCache
	// IndexCache keeps the label sets Select read from each period's index, so that a
	// Select of the same metrics again (every query of a refreshed panel, a Grafana
	// variable's label values) reads the period's index change log (one small request)
	// instead of the label sets, while no series was registered there since (see
	// IndexCache). DBs may share one (tablets serve makes one, --index.cache-bytes). nil:
	// none.
	IndexCache *IndexCache
}

// IndexCache is the cache of label sets (Options.IndexCache): by index table and query,
// used only at the generation of the period's index change log it was read at.
type IndexCache = index.Cache

// IndexCacheStats are an IndexCache's counts.
type IndexCacheStats = CacheStats

// NewIndexCache returns an IndexCache of at most about maxBytes of label sets (at least 1
// MiB).
func NewIndexCache(maxBytes int64) *IndexCache { return index.NewCache(maxBytes) }

// DefaultIndexCacheBytes is an index cache's size for one database (a server makes one four
// times as large for all its tenants).
const DefaultIndexCacheBytes = 16 << 20

// RawCache is the cache of raw samples (Options.RawCache): by table and series, with the
// range read and the generation of the period's change log, used only while no change
// recorded since touched that range. Stats reports its hits, misses and size.
type RawCache = raw.Cache

// RawFoldMiss is why a RawCache entry that Folds changed read its table again instead of
// taking their samples in from the staging entities the process had cached
// (RawCache.FoldMisses).
type RawFoldMiss = raw.FoldMiss

// RawFoldMisses are the reasons of RawFoldMiss, each once: log, receipt, column, overlap.
var RawFoldMisses = []RawFoldMiss{raw.FoldMissLog, raw.FoldMissReceipt, raw.FoldMissColumn, raw.FoldMissOverlap}

// RawCacheStats are a RawCache's counts.
type RawCacheStats = CacheStats

// NewRawCache returns a RawCache of at most about maxBytes of samples (at least 1 MiB).
func NewRawCache(maxBytes int64) *RawCache { return raw.NewCache(maxBytes) }

// DefaultRawCacheBytes is a raw cache's size for one database (a server makes one four
// times as large for all its tenants).
const DefaultRawCacheBytes = 64 << 20

// BlockCache is the cache of tier blocks (Options.BlockCache): entities as read, by key and
// selection, used only at the ETag a listing of the account gives. Stats reports its hits,
// misses and size.
type BlockCache = cache.Entities

// BlockCacheStats are a BlockCache's counts.
type BlockCacheStats = CacheStats

// CacheStats are what a cache did and holds (each cache's Stats says what its hits and
// misses count): every cache of a DB reports them.
type CacheStats = cache.Stats

// ComputeLimit bounds the computing of rollups (Options.RollupCompute): a Rollup writes
// many series at once, each mostly waiting for the account, but decoding and encoding
// their blocks is CPU alone; bounded, it leaves the rest of the machine to the queries.
// Safe for concurrent use; its method Peak is the most computations that ran at once,
// PeakCallers the most goroutines it held (waiting or computing).
type ComputeLimit = tiers.ComputeLimit

// NewComputeLimit returns a limit of n computations at once (at least 1).
func NewComputeLimit(n int) *ComputeLimit { return tiers.NewComputeLimit(n) }

// NewBlockCache returns a BlockCache of at most about maxBytes of blocks (at least 1 MiB).
func NewBlockCache(maxBytes int64) *BlockCache { return cache.NewEntities(maxBytes) }

// DefaultBlockCacheBytes is a block cache's size for one database (a server makes one four
// times as large for all its tenants).
const DefaultBlockCacheBytes = 64 << 20

// StagingCache is the cache of staging entities' columns (Options.StagingCache): bounded by
// bytes, checked against each entity's ETag at every query, so that it never answers from
// an entity another process folded, deleted from or rewrote. Stats reports its hits, misses
// and size.
type StagingCache = staging.Cache

// StagingCacheStats are a StagingCache's counts.
type StagingCacheStats = CacheStats

// NewStagingCache returns a StagingCache of at most about maxBytes of decoded columns (at
// least 1 MiB). It drops an entry unused for 5 minutes, within 10, whatever it holds: the
// entities of a folded bucket are gone from the account, and their columns go from the
// cache soon after, not at its bound. (So does a BlockCache. The raw and index caches keep
// what the server's warm-up read until the first dashboards use it, however late.) The
// entities it keeps for a Fold not due yet are frozen, series by series, 2 minutes after
// they were cached (about 5 bytes a point where decoded they take 38), within an eighth of
// maxBytes: reads take their points from there. Within another eighth, and what the
// entities cached leave of maxBytes, a read of the staged points of many series keeps a
// memo of them, so that the next read of the same series (a refresh) takes only the
// entities staged since (Memos reports its counts).
func NewStagingCache(maxBytes int64) *StagingCache { return staging.NewCache(maxBytes) }

// DefaultStagingCacheBytes is a staging cache's size for one database (a server makes one
// four times as large for all its tenants). It was 64 MiB until the cache counted the
// series index's records (12 bytes each, where a staged point takes about 29): 96 MiB
// hold the same staged minutes.
const DefaultStagingCacheBytes = 96 << 20

// MaxFoldDelay bounds Options.FoldDelay: a bucket's fold may wait at most as long as the
// bucket lasts, so that a database holds at most three buckets staged.
const MaxFoldDelay = staging.Bucket

// MaxFoldPace bounds Options.FoldPace: a paced Fold ends well before the next bucket is
// due, 10 minutes after it began.
const MaxFoldPace = staging.Bucket / 2

// MaxRollupPace bounds Options.RollupPace: a paced Rollup ends well before the next quarter
// of an hour's windows are due.
const MaxRollupPace = 5 * time.Minute

// DefaultFoldWriters is the default of Options.FoldWriters.
const DefaultFoldWriters = 32

// DefaultCachedSeries is the default of Options.CachedSeries.
const DefaultCachedSeries = 1 << 16

// DefaultRawPeriod is the default span of a raw table.
const DefaultRawPeriod = 7 * 24 * time.Hour

// maxNameLength leaves room in Azure's 63 characters for what table names add to the name.
const maxNameLength = 40

// DB is a time-series database over many tables named from one base name. It is safe for
// concurrent use, and keeps no state another process cannot see: its caches are bounded and
// only save requests (see the package documentation, "State and caches").
type DB struct {
	service *aztables.ServiceClient
	name    string
	opts    Options
	names   naming.Names // the tables' names and the raw periods

	catalog   *catalog.Catalog     // the catalog table: dropped tables, label-set registry
	tables    *tables.Periods      // which raw and index tables exist, which periods are dropped
	index     *index.Index         // the series index: registering series, Select
	tiers     *tiers.Tiers         // rollup, dirty markers, tier tables, Aggregate
	retention *retention.Retention // Retain
	stores    *raw.Stores          // the raw store of each period
	floats    *raw.Floats          // the raw part: float points in the raw tables,
	hists     *raw.Hists           // histogram samples in the histogram tables
	changes   *changelog.Log       // their change log, which the read cache is checked against
	staging   *staging.Table       // the staging table: staged writes, their reads
	fold      *staging.Folder      // Fold: the staged points into the raw tables
	answers   *answers.Table       // the kept answers of queries (answers.go)
	kept      *keptTasks           // the task leases it keeps between runs (Exclusive's KeepFor)

	tierLayout tiers.Layout // how the tier tables key their blocks (the catalog's record)
}

var _ tablets.Store = (*DB)(nil)

// Open returns the database named name on service, creating its catalog table if needed.
// name is letters and digits, starting with a letter, at most 40 characters. nil options mean
// the defaults; invalid ones give an error wrapping tablets.ErrInvalidOptions, before any
// request. Build service with tablets.ClientOptions: its reads then decode each reply once
// (the answers are the same without).
func Open(ctx context.Context, service *aztables.ServiceClient, name string, opts *Options) (*DB, error) {
	if service == nil {
		return nil, fmt.Errorf("tsdb: %w: nil service client", tablets.ErrInvalidOptions)
	}
	if err := CheckOptions(name, opts); err != nil {
		return nil, err
	}
	o, err := withDefaults(name, opts)
	if err != nil {
		return nil, err
	}
	catalog := service.NewClient(naming.Names{Base: name}.Catalog())
	if err := tablets.EnsureTable(ctx, catalog); err != nil {
		return nil, fmt.Errorf("tsdb: catalog: %w", err)
	}
	formats, err := readFormats(ctx, catalog)
	if err != nil {
		return nil, err
	}
	if o.Layout, err = chooseLayout(ctx, service, name, catalog, formats, o.Layout); err != nil {
		return nil, err
	}
	tierLayout, err := chooseTierLayout(ctx, service, name, catalog, formats)
	if err != nil {
		return nil, err
	}
	return newDB(service, name, o, tierLayout)
}

// newDB makes the DB's parts; it sends no request.
func newDB(service *aztables.ServiceClient, name string, o Options, tierLayout tiers.Layout) (*DB, error) {
	db := &DB{service: service, name: name, opts: o, names: naming.Names{Base: name, Period: o.RawPeriod}, tierLayout: tierLayout,
		kept: newKeptTasks()}
	validator, err := o.Layout(service.NewClient(db.names.RawTable(0)))
	if err != nil {
		return nil, fmt.Errorf("tsdb: %w", err)
	}
	db.catalog = catalog.New(service.NewClient(db.names.Catalog()), o.CachedSeries)
	db.tables = tables.NewPeriods(service, db.names, db.catalog, o.Now)
	db.answers = answers.New(service.NewClient(db.names.Answers()))
	db.staging = staging.NewTable(service, db.names, validator, staging.Config{Now: o.Now, Partitions: o.StagingPartitions, FoldWriters: o.FoldWriters,
		Budget: o.StagingReadBudget, FoldBudget: o.FoldReadBudget, DirectWrites: o.DirectWrites, Dropped: db.tables.KnownDropped, Cache: o.StagingCache,
		KeepFolds: o.RawCache != nil, FoldDelay: o.FoldDelay, FoldPace: o.FoldPace})
	// The index checks the series its Selects read with the raw layout's rules, once an
	// entry read (db.floats is made below, before any read).
	checkSeries := func(series string) error { return db.floats.Validate(context.Background(), series) }
	db.index = index.New(service, db.names, db.catalog, db.tables, o.CachedSeries, o.IndexCache, checkSeries)
	// A registration of many sets the catalog does not know (a process just started) reads
	// the newest period's index first: the sets it lists are registered (index.Prime).
	db.catalog.Prime = func(ctx context.Context) { db.index.Prime(ctx, db.names.PeriodOf(db.opts.Now())) }
	db.stores = raw.NewStores(o.Layout, service, db.names.RawTable)
	db.floats, db.hists, db.changes = raw.New(service, db.names, db.tables, db.stores, validator, raw.Config{
		CachedSeries: o.CachedSeries, Cache: o.RawCache, StagingReads: db.staging.ReadsDone, Now: o.Now,
		Partition: layoutOf(o.Layout).partition, FoldedFloats: db.staging.FoldedFloats, FoldedHists: db.staging.FoldedHists})
	// Every change recorded in the catalog's change logs rewrites the staging table's
	// logs' mark, and the listings that find it as it was vouch for the logs' states read
	// before: a refreshed panel's read mark then reads no log (staging.Table.MarkLogs).
	db.changes.OnRecorded(db.staging.MarkLogs)
	db.index.Log.OnRecorded(db.staging.MarkLogs)
	db.staging.VouchFor(db.index.Log)
	db.tiers = newTiers(db)
	db.retention = retention.New(service, db.names, retention.Config{RawRetention: o.RawRetention, Tiers: o.Tiers,
		Dropping: func(ctx context.Context, p uint64) error {
			return raw.RecordSpans(ctx, db.changes, []raw.Span{{Period: p, From: db.names.Start(p), To: db.names.End(p)}})
		},
		DroppingIndex: db.index.Dropping},
		db.catalog, db.tables, db.tiers)
	// The Fold is given the raw writes and the tiers' flagging as functions: neither the raw
	// tables nor the staging table depend on it.
	db.fold = staging.NewFolder(db.staging, db.tables, db.names, db.catalog.Client,
		staging.FolderConfig{Now: o.Now, SealDelay: o.SealDelay, SealMargin: sealMargin, Delay: o.FoldDelay, Pace: o.FoldPace}, staging.FoldWrites{
			WritePoints: func(ctx context.Context, p uint64, series string, points []tablets.Point, priority uint64) error {
				_, err := db.floats.Write(ctx, p, series, points, priority)
				return err
			},
			WriteHists: func(ctx context.Context, p uint64, series string, samples []histenc.Sample, priority uint64) error {
				_, err := db.hists.Write(ctx, p, series, raw.HistPoints(samples), priority)
				return err
			},
			FlagLate: func(ctx context.Context, series string, late []tablets.Point) error {
				return db.tiers.FlagStaleAt(ctx, series, late, tablets.MaxTime)
			},
			Changed: db.changes.RecordFold,
		})
	return db, nil
}

// newTiers makes the tiers of db, whose other parts are made: they are given the options
// they use, the leaf layer, and what they read of the series index, the staging table and
// the raw part as functions, none of which calls them back.
func newTiers(db *DB) *tiers.Tiers {
	o := db.opts
	cfg := tiers.Config{Tiers: o.Tiers, Accuracy: o.Accuracy, SealDelay: o.SealDelay, RawRetention: o.RawRetention, Now: o.Now, Blocks: o.BlockCache, Layout: db.tierLayout, Compute: o.RollupCompute, Pace: o.RollupPace}
	return tiers.New(db.service, db.names, cfg, db.catalog, db.tables, tiers.Reads{
		Series: func(ctx context.Context, from, to time.Time) ([]string, error) {
			return db.index.Series(ctx, from, to)
		},
		ListedIn: func(ctx context.Context, p uint64) ([]string, error) { return db.index.ListedIn(ctx, p) },
		Staged: func(ctx context.Context, series []string, from, to time.Time, kinds staging.Kinds) (map[string][]tablets.Point, map[string][]HistogramPoint, error) {
			return db.staging.ReadKinds(ctx, series, from, to, kinds)
		},
		Points: func(ctx context.Context, series string, from, to time.Time) iter.Seq2[tablets.Point, error] {
			return queryPoints(ctx, db.floats, db.staging, series, from, to)
		},
		RawPoints:       db.floats.WithStaged,
		Histograms:      db.hists.WithStaged,
		Store:           db.floats.StoreOf,
		CheckSeries:     db.floats.Validate,
		CheckHistSeries: raw.ValidateHistSeries,
	})
}

// sealMargin is the clock skew between processes that sealing tolerates (tiers.SealMargin).
const sealMargin = tiers.SealMargin

// CheckOptions reports, without any request, the error Open would give for a bad name or
// options (wrapping tablets.ErrInvalidOptions), or nil.
func CheckOptions(name string, opts *Options) error {
	o, err := withDefaults(name, opts)
	if err != nil {
		return err
	}
	if o.Layout == nil {
		return nil // the recorded format, or the legacy default: both valid
	}
	if _, err := offlineStore(name, o.Layout); err != nil {
		return fmt.Errorf("tsdb: %w", err)
	}
	return nil
}

// withDefaults checks the name and the options and fills in the defaults.
func withDefaults(name string, opts *Options) (Options, error) {
	invalid := func(format string, args ...any) (Options, error) {
		return Options{}, fmt.Errorf("tsdb: %w: "+format, append([]any{tablets.ErrInvalidOptions}, args...)...)
	}
	if err := validName(name); err != nil {
		return invalid("%v", err)
	}
	o := Options{}
	if opts != nil {
		o = *opts
	}
	if o.RawPeriod == 0 {
		o.RawPeriod = DefaultRawPeriod
	}
	switch {
	case o.RawPeriod < time.Second || o.RawPeriod%time.Second != 0:
		return invalid("RawPeriod %v is not a whole number of seconds", o.RawPeriod)
	case o.RawRetention < 0:
		return invalid("RawRetention %v is negative", o.RawRetention)
	}
	if o.Tiers == nil {
		o.Tiers = DefaultTiers
	}
	checked, err := tiers.CheckTiers(o.Tiers)
	if err != nil {
		return invalid("%v", err)
	}
	o.Tiers = checked
	if err := tiers.CheckAccuracy(o.Accuracy); err != nil {
		return invalid("%v", err)
	}
	if o.Accuracy == 0 {
		o.Accuracy = tiers.DefaultAccuracy
	}
	if o.SealDelay == 0 {
		o.SealDelay = DefaultSealDelay
	}
	if o.SealDelay < 2*sealMargin {
		return invalid("SealDelay %v is under %v", o.SealDelay, 2*sealMargin)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.StagingPartitions == 0 {
		o.StagingPartitions = 1
	}
	if p := o.StagingPartitions; p < 1 || p > staging.Slots || p&(p-1) != 0 {
		return invalid("StagingPartitions %d is not a power of two from 1 to %d", p, staging.Slots)
	}
	if o.FoldDelay < 0 || o.FoldDelay > MaxFoldDelay {
		return invalid("FoldDelay %v is not from 0 to %v", o.FoldDelay, MaxFoldDelay)
	}
	if o.FoldPace < 0 || o.FoldPace > MaxFoldPace {
		return invalid("FoldPace %v is not from 0 to %v", o.FoldPace, MaxFoldPace)
	}
	if o.RollupPace < 0 || o.RollupPace > MaxRollupPace {
		return invalid("RollupPace %v is not from 0 to %v", o.RollupPace, MaxRollupPace)
	}
	switch {
	case o.FoldWriters < 0:
		return invalid("FoldWriters %d is negative", o.FoldWriters)
	case o.FoldWriters == 0:
		o.FoldWriters = DefaultFoldWriters
	}
	switch {
	case o.CachedSeries < 0:
		return invalid("CachedSeries %d is negative", o.CachedSeries)
	case o.CachedSeries == 0:
		o.CachedSeries = DefaultCachedSeries
	}
	return o, nil
}

func validName(name string) error {
	if len(name) < 3 || len(name) > maxNameLength {
		return fmt.Errorf("name %q must be 3 to %d characters", name, maxNameLength)
	}
	for i, c := range name {
		letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if !letter && (i == 0 || c < '0' || c > '9') {
			return fmt.Errorf("name %q must be letters and digits, starting with a letter", name)
		}
	}
	return nil
}

// Name returns the database's base name.
func (db *DB) Name() string { return db.name }

// Options returns the database's options with defaults filled in.
func (db *DB) Options() Options { return db.opts }

// tableKind is a kind of period table: the raw points, the series index or the histogram
// samples of a period.
type tableKind = naming.Kind

const (
	rawKind   = naming.Raw
	indexKind = naming.Index
	histKind  = naming.Hist
)

// TableRole says what a table of a database is for, from its name: "catalog", "staging",
// "raw", "index", "histograms", "tier" or "answers", or "" when no database's table is
// named so. It lets what counts the requests at the transport (a request names its table)
// say which part of the read and write paths the account's time went to.
func TableRole(name string) string { return naming.RoleOf(name) }
