// Package tiers is the tiers part of a tsdb database: the rollup of raw points and
// histogram samples into tier windows (Rollup, RollupFlagged: rollup.go, rollupscan.go,
// rollupsplice.go), the dirty markers late writes leave in the catalog (dirty.go; FlagStale
// and FlagStaleAt, which the write path and the Fold call), the tier tables known to exist
// (tiertables.go), the tier tables' names and the blocks' geometry and codec (tier.go,
// tiergeom.go, tierblock.go), the windows and their histograms (window.go, histwindow*.go),
// and Aggregate with its planner (aggregate.go, aggregate_plan.go, aggregate_blocks.go,
// aggregate_raw.go, histwindow_read.go).
//
// It owns the public types of the tiers, which package tsdb re-exports: Tier, DefaultTiers,
// DefaultSealDelay, Window, Fields, AggregateOptions, SeriesWindow, HistogramQuantile.
//
// A Tiers is given the options it uses (Config), the service client, the table names, the
// catalog (dropped tables, the dirty markers, the rollup's progress) and the period tables
// (which raw and histogram tables exist, which periods are dropped), all of the leaf layer;
// and what it reads of the other parts as functions (Reads): the series index, the staging
// table and the raw part. None of those calls it back, and it imports none of them: newDB
// (package tsdb) wires them.
//
// Its one cache is the tier tables known to exist (at most 4,096, a cache.Gen with its own
// lock); the rest of its state is the account's. It is safe for concurrent use.
package tiers

import (
	"cmp"
	"context"
	"iter"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/tsdb/internal/cache"
	"github.com/seed71701133/tablets/tsdb/internal/catalog"
	"github.com/seed71701133/tablets/tsdb/internal/naming"
	"github.com/seed71701133/tablets/tsdb/internal/staging"
	"github.com/seed71701133/tablets/tsdb/internal/tables"
)

// Config holds the options of a database that the tiers use, as Open checked them.
type Config struct {
	Tiers        []Tier           // finest first, as CheckTiers returns them (periods filled in)
	Accuracy     float64          // the relative accuracy of the windows' sketches (not 0)
	SealDelay    time.Duration    // how long after its end a window is sealed
	RawRetention time.Duration    // the raw tables' retention: 0 keeps them forever
	Now          func() time.Time // the clock
	// Blocks keeps the tier blocks Aggregate read, checked against their ETags at every
	// read (nil: none; see readCached).
	Blocks *cache.Entities
	// Layout is how the tier tables key their blocks (0: LayoutSeries).
	Layout Layout
	// Compute bounds the rollup's computing (nil: the process's default, half its cores,
	// shared by every Tiers that names none).
	Compute *ComputeLimit
	// Pace is the least time a batched Rollup of recent windows takes (Options.RollupPace;
	// 0: none): see rollupPacer.
	Pace time.Duration
}

// Reads are what the tiers read of the other parts of the database, given as functions:
// the series index, the staging table and the raw part.
type Reads struct {
	// Series returns the series with points or histogram samples in the raw periods that
	// [from, to) overlaps, sorted (the series index).
	Series func(ctx context.Context, from, to time.Time) ([]string, error)
	// ListedIn returns the series raw period p's index lists.
	ListedIn func(ctx context.Context, p uint64) ([]string, error)
	// Staged reads the staged points and histogram samples of series (nil: of every series)
	// in [from, to), of the kinds asked for, in one query (the staging table).
	Staged func(ctx context.Context, series []string, from, to time.Time, kinds staging.Kinds) (map[string][]tablets.Point, map[string][]tablets.HistogramPoint, error)
	// Points yields the points of one series in [from, to), oldest first, its staged ones
	// merged in (DB.Query's read); it checks the series.
	Points func(ctx context.Context, series string, from, to time.Time) iter.Seq2[tablets.Point, error]
	// RawPoints yields the points of every named series (valid, distinct) in [from, to)
	// from the raw tables, table by table, merged with staged (read before, by series),
	// each series' oldest first (the raw part; one code with Histograms).
	RawPoints func(ctx context.Context, series []string, from, to time.Time, staged map[string][]tablets.Point) iter.Seq2[tablets.SeriesPoint, error]
	// Histograms yields the histogram samples of series (valid for the histogram tables,
	// distinct) in [from, to) from the histogram tables, table by table, merged with
	// staged (read before, by series) (the raw part).
	Histograms func(ctx context.Context, series []string, from, to time.Time, staged map[string][]tablets.HistogramPoint) iter.Seq2[tablets.SeriesHistogram, error]
	// Store is raw period p's store of the raw layout (no request): a batched Rollup scans
	// a chunked one.
	Store func(p uint64) (tablets.Store, error)
	// CheckSeries checks a series name for the raw tables, before any request.
	CheckSeries func(ctx context.Context, series string) error
	// CheckHistSeries checks a series name for the keys and filters of the histogram tables.
	CheckHistSeries func(series string) error
}

// Tiers is the tiers part of a DB: the rollup of raw points into tier windows (Rollup,
// RollupFlagged), the dirty markers late writes leave, the tier tables and their block
// geometry and decoding, and Aggregate with its planner. It owns the cache of the tier
// tables known to exist (tables).
//
// It is given the parts it reads, not the DB: what a rollup and an Aggregate read besides
// the tier tables are the series index (the series of a range), the staging table (the
// staged points and histogram samples), the raw part (the raw points and histogram
// samples, the stores of a range), the period tables (which tables exist, which periods are
// dropped) and the catalog (dropped tables, the dirty markers). None of them calls it back:
// the Fold is given its flagging of late points as a function.
type Tiers struct {
	service *aztables.ServiceClient
	names   naming.Names // the database's table names and raw periods
	cfg     Config
	catalog *catalog.Catalog
	periods *tables.Periods // which raw and histogram tables exist, which periods are dropped
	tables  *tierTables     // which tier tables exist
	reads   Reads           // the series index, the staging table, the raw part
	// warm are the reads of tier tables (table, columns, series: readShape) that filled the
	// block cache: the next such read lists the keys first (one never made pays no listing).
	// At most maxWarmShapes are remembered (a shape forgotten pays no listing once).
	warm *cache.Gen[string, struct{}]
	keys tierKeys // the keys and filters of the blocks (Config.Layout)
}

// New returns the tiers of the database whose tables names names; it sends no request.
func New(service *aztables.ServiceClient, names naming.Names, cfg Config, c *catalog.Catalog, periods *tables.Periods, reads Reads) *Tiers {
	return &Tiers{
		service: service,
		names:   names,
		cfg:     cfg,
		catalog: c,
		periods: periods,
		tables:  newTierTables(service, c),
		reads:   reads,
		warm:    cache.New[string, struct{}](maxWarmShapes, nil),
		keys:    tierKeys{layout: cmp.Or(cfg.Layout, LayoutSeries)},
	}
}

// maxWarmShapes bounds the reads of tier tables the tiers remember having cached.
const maxWarmShapes = 4096

// now reads the clock (Config.Now).
func (tr *Tiers) now() time.Time { return tr.cfg.Now() }

// compute is the limit of the rollup's computing: the Config's, or the process's.
func (tr *Tiers) compute() *ComputeLimit {
	if tr.cfg.Compute != nil {
		return tr.cfg.Compute
	}
	return defaultCompute()
}

// TaskRollup is the task whose progress the catalog keeps for Rollup (tsdb.TaskRollup): the
// tier windows before it are rolled up.
const TaskRollup = "rollup"
