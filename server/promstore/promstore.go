package promstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/util/annotations"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/tsdb"
)

// Options configure a Queryable. The zero value of each field means its default.
type Options struct {
	// BatchSize is the number of series one raw read (tsdb.DB.QueryMany) asks for: larger
	// batches pack more series into each request, smaller ones hold fewer points in memory.
	// Default 64.
	BatchSize int
	// Concurrency is how many raw batches, or tier series, a Select reads at once ahead of
	// its consumer. Default 4.
	Concurrency int
	// LookbackDelta is the PromQL engine's lookback delta: an instant selector reads a tier
	// only if its Step is under it, so that every evaluation still finds a window's sample.
	// Default 5 minutes, the engine's default.
	LookbackDelta time.Duration
	// MinTierStep: tiers of a finer Step are read only for ranges that start before the
	// oldest raw table (where Retain dropped the raw points). 0: any tier, wherever the
	// estimate says it reads fewer bytes than raw (docs/tiers.md).
	MinTierStep time.Duration
	// RawBytesPerSample is what the cost estimate takes a raw sample to cost on the wire,
	// in bytes. 0: by the raw layout of the database: 1.5 for chunked's Gorilla chunks (a
	// 15 s counter; the default for a layout of another package), 27 for advanced's
	// slots (of integral values), 150 for basic's entity a point.
	RawBytesPerSample float64
	// PreferTiers makes a Select read a tier wherever one can serve it (see the package
	// documentation), whatever the estimates of the bytes each path reads.
	PreferTiers bool
	// DisableTiers makes every Select read raw points.
	DisableTiers bool
}

// Defaults of Options.
const (
	DefaultBatchSize     = 64
	DefaultConcurrency   = 4
	DefaultLookbackDelta = 5 * time.Minute
)

// Queryable is a storage.Queryable over a tsdb.DB. It is safe for concurrent use.
type Queryable struct {
	db   *tsdb.DB
	opts Options
	cost *costModel

	rollup struct { // the rollup progress last read (see rolledUp)
		mu            sync.Mutex
		covered, read time.Time
	}

	rawSelects, tierSelects, labelSelects atomic.Uint64
	rawCheaper, rawGone                   atomic.Uint64
	estRaw, estTier                       atomic.Uint64
	series, samples, histograms           atomic.Uint64
	histogramRawSeries                    atomic.Uint64
	sharedStaged                          atomic.Uint64
}

var _ storage.Queryable = (*Queryable)(nil)

// New returns a Queryable over db. nil options mean the defaults; invalid ones give an error
// wrapping tablets.ErrInvalidOptions.
func New(db *tsdb.DB, opts *Options) (*Queryable, error) {
	if db == nil {
		return nil, fmt.Errorf("promstore: %w: nil database", tablets.ErrInvalidOptions)
	}
	o, err := withDefaults(opts)
	if err != nil {
		return nil, err
	}
	raw := layoutOf(db.Options().Layout)
	if o.RawBytesPerSample > 0 {
		raw.bytesPerSample = o.RawBytesPerSample
	}
	return &Queryable{db: db, opts: o, cost: newCostModel(db.Options(), raw, o.BatchSize)}, nil
}

// withDefaults checks the options and fills in the defaults.
func withDefaults(opts *Options) (Options, error) {
	o := Options{}
	if opts != nil {
		o = *opts
	}
	if o.BatchSize == 0 {
		o.BatchSize = DefaultBatchSize
	}
	if o.Concurrency == 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.LookbackDelta == 0 {
		o.LookbackDelta = DefaultLookbackDelta
	}
	invalid := func(format string, args ...any) (Options, error) {
		return Options{}, fmt.Errorf("promstore: %w: "+format, append([]any{tablets.ErrInvalidOptions}, args...)...)
	}
	switch {
	case o.BatchSize < 1:
		return invalid("BatchSize %d must be positive", o.BatchSize)
	case o.Concurrency < 1:
		return invalid("Concurrency %d must be positive", o.Concurrency)
	case o.LookbackDelta < time.Millisecond:
		return invalid("LookbackDelta %v must be at least a millisecond", o.LookbackDelta)
	case o.MinTierStep < 0:
		return invalid("MinTierStep %v is negative", o.MinTierStep)
	case o.RawBytesPerSample < 0 || math.IsNaN(o.RawBytesPerSample) || math.IsInf(o.RawBytesPerSample, 0):
		return invalid("RawBytesPerSample %v must be a positive number, or 0", o.RawBytesPerSample)
	}
	return o, nil
}

// Stats counts what the Selects of a Queryable did, since New: for tests and /metrics.
type Stats struct {
	RawSelects   uint64 // Selects that read raw points
	TierSelects  uint64 // Selects that read a rollup tier
	LabelSelects uint64 // Selects of hints.Func "series": labels only, no points read
	Series       uint64 // series returned, with samples
	Samples      uint64 // samples returned (synthetic ones of tier reads included)
	Histograms   uint64 // of Samples, the histogram ones
	// HistogramRawSeries: series with histogram samples that a tier Select read raw (a
	// window of floats cannot stand for raw histograms).
	HistogramRawSeries uint64
	// SharedStagedReads: reads of the staged points (tsdb.DB.ReadStaged) shared by a group
	// of a Select's raw batches, instead of each batch reading the staging.
	SharedStagedReads uint64

	// The choice by cost (docs/tiers.md). A Select a tier can serve (by its step and its
	// function) reads it where the estimate of its bytes is under raw's, or where raw points
	// of its range are gone.
	RawCheaperSelects uint64 // of RawSelects: those a tier could serve, which raw costs less
	RawGoneSelects    uint64 // of TierSelects: those whose raw points are partly gone
	// EstimatedRawBytes and EstimatedTierBytes sum the estimates of the Selects a tier could
	// serve, of either path.
	EstimatedRawBytes, EstimatedTierBytes uint64
	// SamplesPerSecond is the current estimate of a series' float samples a second, which
	// the raw estimate scales with: a moving estimate from what reads returned, starting at
	// a sample every 15 s.
	SamplesPerSecond float64
}

// Stats returns the counters.
func (q *Queryable) Stats() Stats {
	st := Stats{
		RawSelects:   q.rawSelects.Load(),
		TierSelects:  q.tierSelects.Load(),
		LabelSelects: q.labelSelects.Load(),
		Series:       q.series.Load(),
		Samples:      q.samples.Load(),
		Histograms:   q.histograms.Load(),

		HistogramRawSeries: q.histogramRawSeries.Load(),
		SharedStagedReads:  q.sharedStaged.Load(),

		RawCheaperSelects:  q.rawCheaper.Load(),
		RawGoneSelects:     q.rawGone.Load(),
		EstimatedRawBytes:  q.estRaw.Load(),
		EstimatedTierBytes: q.estTier.Load(),
	}
	if q.cost != nil {
		st.SamplesPerSecond = q.cost.rate.perSecond()
	}
	return st
}

// Querier returns a Querier of [mint, maxt] (milliseconds, inclusive).
func (q *Queryable) Querier(mint, maxt int64) (storage.Querier, error) {
	ctx, cancel := context.WithCancel(context.Background())
	return &Querier{q: q, mint: mint, maxt: maxt, ctx: ctx, cancel: cancel}, nil
}

// Querier reads the range of its Queryable.Querier call. Close cancels the reads its Selects
// still have under way.
type Querier struct {
	q          *Queryable
	mint, maxt int64

	ctx    context.Context // done when Close is called
	cancel context.CancelFunc
	once   sync.Once
}

var _ storage.Querier = (*Querier)(nil)

// Close cancels what the Querier's Selects still read ahead. Series already returned stay
// readable.
func (qr *Querier) Close() error {
	qr.once.Do(qr.cancel)
	return nil
}

// LabelValues returns the sorted values of label name among the series with points in the
// Querier's range (at the index's granularity, the raw period) that match the matchers (all
// series with none), at most hints.Limit of them when it is positive.
func (qr *Querier) LabelValues(ctx context.Context, name string, hints *storage.LabelHints, matchers ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	ms, err := MatchersToTSDB(matchers)
	if err != nil {
		return nil, nil, err
	}
	from, to, ok := timeRange(qr.mint, qr.maxt)
	if !ok {
		return []string{}, nil, nil
	}
	vals, err := qr.q.db.LabelValues(ctx, name, from, to, ms...)
	if err != nil {
		return nil, nil, err
	}
	return limit(vals, hints), nil, nil
}

// LabelNames returns the sorted label names of the series LabelValues considers,
// __name__ included, at most hints.Limit of them when it is positive.
func (qr *Querier) LabelNames(ctx context.Context, hints *storage.LabelHints, matchers ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	ms, err := MatchersToTSDB(matchers)
	if err != nil {
		return nil, nil, err
	}
	from, to, ok := timeRange(qr.mint, qr.maxt)
	if !ok {
		return []string{}, nil, nil
	}
	names, err := qr.q.db.LabelNames(ctx, from, to, ms...)
	if err != nil {
		return nil, nil, err
	}
	return limit(names, hints), nil, nil
}

func limit(vals []string, hints *storage.LabelHints) []string {
	if vals == nil {
		vals = []string{}
	}
	if hints != nil && hints.Limit > 0 && len(vals) > hints.Limit {
		vals = vals[:hints.Limit]
	}
	return vals
}

// minMillis and maxMillis bound the milliseconds tablets stores.
var (
	minMillis = tablets.MinTime.UnixMilli()
	maxMillis = tablets.MaxTime.UnixMilli()
)

// timeRange converts Prometheus' inclusive [mint, maxt] (milliseconds) to tsdb's [from, to),
// clamped to the times tablets stores; ok is false when nothing of it is left. Prometheus
// asks for math.MinInt64 and math.MaxInt64 to mean "all time".
func timeRange(mint, maxt int64) (from, to time.Time, ok bool) {
	mint = max(mint, minMillis)
	if maxt < mint {
		return time.Time{}, time.Time{}, false
	}
	from = time.UnixMilli(mint).UTC()
	if maxt >= maxMillis {
		to = tablets.MaxTime
	} else {
		to = time.UnixMilli(maxt + 1).UTC()
	}
	return from, to, from.Before(to)
}

// millis is the Prometheus timestamp of t: its millisecond, rounded down.
func millis(t time.Time) int64 { return t.UnixMilli() }

// MatcherToTSDB converts a Prometheus matcher; both have the same semantics (a missing label
// is "", regexps anchored and RE2 with "." matching a newline).
func MatcherToTSDB(m *labels.Matcher) (tsdb.Matcher, error) {
	if m == nil {
		return tsdb.Matcher{}, fmt.Errorf("promstore: %w: nil matcher", tablets.ErrInvalidMatcher)
	}
	var t tsdb.MatchType
	switch m.Type {
	case labels.MatchEqual:
		t = tsdb.MatchEqual
	case labels.MatchNotEqual:
		t = tsdb.MatchNotEqual
	case labels.MatchRegexp:
		t = tsdb.MatchRegexp
	case labels.MatchNotRegexp:
		t = tsdb.MatchNotRegexp
	default:
		return tsdb.Matcher{}, fmt.Errorf("promstore: %w: matcher %s has unknown type %d", tablets.ErrInvalidMatcher, m, m.Type)
	}
	return tsdb.Matcher{Type: t, Name: m.Name, Value: m.Value}, nil
}

// MatchersToTSDB converts Prometheus matchers.
func MatchersToTSDB(ms []*labels.Matcher) ([]tsdb.Matcher, error) {
	out := make([]tsdb.Matcher, len(ms))
	for i, m := range ms {
		var err error
		if out[i], err = MatcherToTSDB(m); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// MatcherFromTSDB converts a tsdb matcher to Prometheus' (which compiles its regexp).
func MatcherFromTSDB(m tsdb.Matcher) (*labels.Matcher, error) {
	var t labels.MatchType
	switch m.Type {
	case tsdb.MatchEqual:
		t = labels.MatchEqual
	case tsdb.MatchNotEqual:
		t = labels.MatchNotEqual
	case tsdb.MatchRegexp:
		t = labels.MatchRegexp
	case tsdb.MatchNotRegexp:
		t = labels.MatchNotRegexp
	default:
		return nil, fmt.Errorf("promstore: %w: matcher %s has unknown type", tablets.ErrInvalidMatcher, m)
	}
	return labels.NewMatcher(t, m.Name, m.Value)
}

// LabelsFromTSDB converts a label set; both are sorted by name, so this is a copy.
func LabelsFromTSDB(ls tsdb.Labels) labels.Labels {
	b := labels.NewScratchBuilder(len(ls))
	for _, l := range ls {
		b.Add(l.Name, l.Value)
	}
	return b.Labels()
}

// LabelsToTSDB converts a label set, for tsdb.DB.SeriesOf (which drops empty values and
// checks the set).
func LabelsToTSDB(ls labels.Labels) tsdb.Labels {
	out := make(tsdb.Labels, 0, ls.Len())
	ls.Range(func(l labels.Label) { out = append(out, tsdb.Label{Name: l.Name, Value: l.Value}) })
	return out
}

// errNotSelective is wrapped by the error of a Select whose every matcher matches "".
var errNotSelective = errors.New("a selector needs at least one matcher that does not match the empty string")

// selective reports whether some matcher does not match "": Prometheus refuses selectors
// that would match every series, and so does tsdb.DB.Select.
func selective(ms []*labels.Matcher) bool {
	for _, m := range ms {
		if m != nil && !m.Matches("") {
			return true
		}
	}
	return false
}
