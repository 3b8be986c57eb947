package tsdb

import (
	"context"
	"fmt"
	"iter"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed71701133/tablets"
)

// QueryOptions configure a Queryable. The zero value of each field means its default.
type QueryOptions struct {
	// BatchSize is the number of series one raw read (QueryMany) asks for: larger batches
	// pack more series into each request, smaller ones hold fewer points in memory. A
	// series with histogram samples counts as 4. Default 64, and a Select of float series
	// read by ranges of keys (chunked's tables, two batches or more) then reads up to 8
	// batches at once, as many as keep a read within about half a page of chunks and 512k
	// samples by the cost model's estimate; a BatchSize set is kept exactly.
	BatchSize int
	// Concurrency is how many batches a Select reads at once ahead of its consumer.
	// Default 4.
	Concurrency int
	// MinTierStep: tiers of a finer Step are read only for ranges that start where Retain
	// dropped the raw points (before the oldest raw table; a database that never had a
	// table there reads raw). 0: any tier, wherever the estimate says it reads fewer bytes
	// than raw (docs/tiers.md).
	MinTierStep time.Duration
	// RawBytesPerSample is what the cost estimate takes a raw sample to cost on the wire,
	// in bytes. 0: by the raw layout of the database: 1.5 for chunked's chunks (a 15 s
	// counter; the default for a layout of another package), 27 for advanced's slots (of
	// integral values), 150 for basic's entity a point.
	RawBytesPerSample float64
	// MaxResolution is the coarsest tier Step a Select may read where raw samples of its
	// range exist, as Thanos' max_source_resolution (a Select's hints may say another):
	// tier answers are approximate (docs/tiers.md), so that by default (0, RawResolution)
	// every Select reads raw samples wherever they exist, and a tier only for a range whose
	// raw samples Retain dropped. AnyResolution: any tier that can serve the Select, where
	// the estimate of its bytes is under raw's; a duration: the tiers of at most that Step.
	MaxResolution time.Duration
	// PreferTiers makes a Select read a tier wherever one can serve it (see SelectHints),
	// whatever the estimates of the bytes each path reads and MaxResolution: answers are
	// approximate.
	PreferTiers bool
	// DisableTiers makes every Select read raw samples, and Evaluate answer
	// ErrNoExactTier.
	DisableTiers bool
	// PreferExactTiers makes Evaluate read a tier wherever one serves it, whatever the
	// estimates (Selects are unaffected: their answers stay exact).
	PreferExactTiers bool
}

// Resolutions of QueryOptions.MaxResolution and SelectHints.MaxResolution.
const (
	// RawResolution reads raw samples wherever they exist: a tier only where Retain dropped
	// them. The default.
	RawResolution time.Duration = -1
	// AnyResolution reads any tier that can serve a Select, where the estimate of its bytes
	// is under raw's: approximate answers.
	AnyResolution time.Duration = math.MaxInt64
)

// Defaults of QueryOptions.
const (
	DefaultQueryBatchSize   = 64
	DefaultQueryConcurrency = 4
)

// withDefaults checks the options and fills in the defaults.
func (opts *QueryOptions) withDefaults() (QueryOptions, error) {
	o := QueryOptions{}
	if opts != nil {
		o = *opts
	}
	if o.BatchSize == 0 {
		o.BatchSize = DefaultQueryBatchSize
	}
	if o.Concurrency == 0 {
		o.Concurrency = DefaultQueryConcurrency
	}
	if o.MaxResolution == 0 {
		o.MaxResolution = RawResolution
	}
	invalid := func(format string, args ...any) (QueryOptions, error) {
		return QueryOptions{}, fmt.Errorf("tsdb: %w: "+format, append([]any{tablets.ErrInvalidOptions}, args...)...)
	}
	switch {
	case o.BatchSize < 1:
		return invalid("BatchSize %d must be positive", o.BatchSize)
	case o.Concurrency < 1:
		return invalid("Concurrency %d must be positive", o.Concurrency)
	case o.MaxResolution < 0 && o.MaxResolution != RawResolution:
		return invalid("MaxResolution %v is negative (RawResolution: raw samples)", o.MaxResolution)
	case o.MinTierStep < 0:
		return invalid("MinTierStep %v is negative", o.MinTierStep)
	case o.RawBytesPerSample < 0 || math.IsNaN(o.RawBytesPerSample) || math.IsInf(o.RawBytesPerSample, 0):
		return invalid("RawBytesPerSample %v must be a positive number, or 0", o.RawBytesPerSample)
	}
	return o, nil
}

// SelectHints say what a Select's series are for, as Prometheus' engine says it: they let
// a Select read a rollup tier instead of the raw samples, or no sample at all. nil: raw
// samples of the Querier's range.
type SelectHints struct {
	// Start and End, where set, are the range of the samples read, [Start, End), in place
	// of the Querier's (as Prometheus' TSDB reads a hinted Select: the engine moved Start back
	// by a range selector's range or the lookback delta). Zero: the Querier's bound.
	Start, End time.Time
	// Step is the evaluation step of a range query (0: an instant query, or none).
	Step time.Duration
	// Func is the PromQL function around the selector ("rate", "max_over_time", ...; "" a
	// plain selector; an aggregation operator such as "sum" for an instant selector right
	// inside one; "series" for labels only: no sample is read).
	Func string
	// Range is the range of a range selector (0: an instant selector).
	Range time.Duration
	// LookbackDelta is the engine's lookback delta: an instant selector reads a tier only if
	// its Step is under it, so that every evaluation still finds a window's sample. 0: 5
	// minutes, the engine's default.
	LookbackDelta time.Duration
	// Limit bounds the series returned (0: none).
	Limit int
	// MaxResolution, if set, is the coarsest tier Step the Select may read where raw
	// samples exist, in place of QueryOptions.MaxResolution (RawResolution, AnyResolution
	// or a duration): a request's max_source_resolution.
	MaxResolution time.Duration
	// Keep, if set, selects the series to return by their labels (Prometheus' sharding):
	// the others are not read.
	Keep func(Labels) bool
	// Latest says that only each series' latest sample in the range counts: the PromQL
	// engine evaluates the selector once, at End (an instant selector of an instant query,
	// not in a subquery). The Select returns that one sample a series, and of the staged
	// points reads no more than it needs to find it.
	Latest bool
}

// defaultLookbackDelta is SelectHints.LookbackDelta's default.
const defaultLookbackDelta = 5 * time.Minute

// QueryStats count what the Selects of a Queryable did: for tests and /metrics.
type QueryStats struct {
	RawSelects   uint64 // Selects that read raw samples
	TierSelects  uint64 // Selects that read a rollup tier
	LabelSelects uint64 // Selects of Func "series": labels only, no sample read
	Series       uint64 // series returned, with samples
	Samples      uint64 // samples returned (synthetic ones of tier reads included)
	Histograms   uint64 // of Samples, the histogram ones
	// HistogramRawSeries: series with histogram samples that a tier Select read raw (a
	// window of floats cannot stand for raw histograms).
	HistogramRawSeries uint64
	// SharedStagedReads: reads of the staged samples shared by a group of a Select's
	// batches, instead of each batch reading the staging table.
	SharedStagedReads uint64
	// RawPrefetches: batches whose raw points (of series the raw cache held nothing of) were
	// read into the raw cache beside their staged points' read, for the read of the tables
	// after it to take them from the cache.
	RawPrefetches uint64

	// The choice by cost (docs/tiers.md). A Select a tier can serve (by its step and its
	// function) reads it where the estimate of its bytes is under raw's, or where raw
	// samples of its range are gone.
	RawCheaperSelects uint64 // of RawSelects: those a tier could serve, which raw costs less
	RawGoneSelects    uint64 // of TierSelects: those whose raw samples are partly gone
	// EstimatedRawBytes and EstimatedTierBytes sum the estimates of the Selects a tier could
	// serve, of either path.
	EstimatedRawBytes, EstimatedTierBytes uint64
	// Evaluate (exact answers from tiers, docs/tiers.md): ExactEvaluations read a tier;
	// ExactRawCheaper were refused (ErrNoExactTier) for the estimate; ExactRawSeries are
	// the series of the former computed from raw samples (their windows could not be).
	ExactEvaluations, ExactRawCheaper, ExactRawSeries uint64
	// SamplesPerSecond is the current estimate of a series' float samples a second, which
	// the raw estimate scales with: a moving estimate from what reads returned, starting at
	// a sample every 15 s.
	SamplesPerSecond float64
}

// Queryable reads a database with one set of QueryOptions, and learns from its reads (the
// sample rate of its cost model). It is safe for concurrent use; a server keeps one.
type Queryable struct {
	db   *DB
	opts QueryOptions
	cost *costModel
	// growKeyRange: BatchSize was left to its default, and a read by ranges of keys may
	// take several batches at once (rawPlan).
	growKeyRange bool
	// exactLimit bounds Evaluate's reads (defaultExactLimit; tests' smaller).
	exactLimit exactLimit

	rollup struct { // the rollup progress last read (see rolledUp)
		mu            sync.Mutex
		covered, read time.Time
	}
	dropped struct { // the latest raw period recorded dropped, as last read (see rawKeptFrom)
		mu       sync.Mutex
		period   uint64
		ok       bool
		read     time.Time
		rawFrom  time.Time // the oldest raw table's start when read
		vanished uint64    // tables.Periods.Vanished when read
	}

	rawSelects, tierSelects, labelSelects atomic.Uint64
	rawCheaper, rawGone                   atomic.Uint64
	estRaw, estTier                       atomic.Uint64
	series, samples, histograms           atomic.Uint64
	histogramRawSeries                    atomic.Uint64
	sharedStaged, rawPrefetches           atomic.Uint64
	exactEvaluations, exactRawCheaper     atomic.Uint64
	exactRawSeries                        atomic.Uint64
}

// Queryable returns a Queryable of the database. nil options mean the defaults; invalid
// ones give an error wrapping tablets.ErrInvalidOptions.
func (db *DB) Queryable(opts *QueryOptions) (*Queryable, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	raw := layoutOf(db.opts.Layout)
	if o.RawBytesPerSample > 0 {
		raw.bytesPerSample = o.RawBytesPerSample
	}
	grow := opts == nil || opts.BatchSize == 0
	return &Queryable{db: db, opts: o, growKeyRange: grow, cost: newCostModel(db.opts, raw, o.BatchSize), exactLimit: defaultExactLimit}, nil
}

// Stats returns the counters.
func (q *Queryable) Stats() QueryStats {
	return QueryStats{
		RawSelects:   q.rawSelects.Load(),
		TierSelects:  q.tierSelects.Load(),
		LabelSelects: q.labelSelects.Load(),
		Series:       q.series.Load(),
		Samples:      q.samples.Load(),
		Histograms:   q.histograms.Load(),

		HistogramRawSeries: q.histogramRawSeries.Load(),
		SharedStagedReads:  q.sharedStaged.Load(),
		RawPrefetches:      q.rawPrefetches.Load(),

		RawCheaperSelects:  q.rawCheaper.Load(),
		RawGoneSelects:     q.rawGone.Load(),
		EstimatedRawBytes:  q.estRaw.Load(),
		EstimatedTierBytes: q.estTier.Load(),
		ExactEvaluations:   q.exactEvaluations.Load(),
		ExactRawCheaper:    q.exactRawCheaper.Load(),
		ExactRawSeries:     q.exactRawSeries.Load(),
		SamplesPerSecond:   q.cost.rate.perSecond(),
	}
}

// Querier returns a Querier of [from, to).
func (q *Queryable) Querier(from, to time.Time) *Querier {
	return &Querier{q: q, from: from, to: to}
}

// Querier reads a database over a time range [from, to): the series of matchers with their
// samples (Select), their label names and values, and windows of their samples
// (Aggregate). Where the samples come from (the staging table, the raw tables, a rollup
// tier) it decides itself.
type Querier struct {
	q        *Queryable
	from, to time.Time
}

// Range is the Querier's range.
func (qr *Querier) Range() (from, to time.Time) { return qr.from, qr.to }

// LabelValues returns the sorted values of label name among the series with samples in the
// Querier's range (at the index's granularity, the raw period) that match the matchers (all
// series with none).
func (qr *Querier) LabelValues(ctx context.Context, name string, ms ...Matcher) ([]string, error) {
	return qr.q.db.LabelValues(ctx, name, qr.from, qr.to, ms...)
}

// LabelNames returns the sorted label names of the series LabelValues considers, __name__
// included.
func (qr *Querier) LabelNames(ctx context.Context, ms ...Matcher) ([]string, error) {
	return qr.q.db.LabelNames(ctx, qr.from, qr.to, ms...)
}

// Aggregate is DB.Aggregate over the Querier's range.
func (qr *Querier) Aggregate(ctx context.Context, series []string, step time.Duration, opts *AggregateOptions) iter.Seq2[Window, error] {
	return qr.q.db.Aggregate(ctx, series, qr.from, qr.to, step, opts)
}

// Select yields the series matching every matcher with their samples in the range (see
// SelectHints), sorted by labels, floats and histogram samples together, times ascending.
// Matchers that all match "" (a selector of every series) give an error wrapping
// tablets.ErrInvalidMatcher, before any request.
//
// It reads the series index once, then plans: a rollup tier (one synthetic sample per whole
// window, at its last millisecond, of the value the hints' function needs) where the hints
// allow one and it is estimated to cost fewer bytes than the raw samples, or where raw
// samples of the range are gone; the raw samples else (docs/tiers.md). Series with
// histogram samples are always read raw. It reads BatchSize series a unit, Concurrency
// units at once ahead of the consumer, and the staged samples of up to 16 units in one
// read of the staging table, both kinds together. Stopping the iteration, or cancelling
// ctx, stops what is still being read.
func (qr *Querier) Select(ctx context.Context, hints *SelectHints, ms ...Matcher) iter.Seq2[*Series, error] {
	return qr.q.selectSeries(ctx, qr.from, qr.to, hints, ms)
}
