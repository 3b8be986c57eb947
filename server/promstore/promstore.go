package promstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/util/annotations"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/tsdb"
)

// Options configure a Queryable. The zero value of each field means its default. Those
// but LookbackDelta are tsdb.QueryOptions' (the choice between raw samples and tiers is
// tsdb's).
type Options struct {
	// BatchSize is the number of series one raw read asks for (tsdb.QueryOptions).
	// Default 64.
	BatchSize int
	// Concurrency is how many batches a Select reads at once ahead of its consumer.
	// Default 4.
	Concurrency int
	// LookbackDelta is the PromQL engine's lookback delta: an instant selector reads a tier
	// only if its Step is under it, so that every evaluation still finds a window's sample.
	// Default 5 minutes, the engine's default.
	LookbackDelta time.Duration
	// MinTierStep: tiers of a finer Step are read only for ranges that start before the
	// oldest raw table (tsdb.QueryOptions).
	MinTierStep time.Duration
	// RawBytesPerSample is what the cost estimate takes a raw sample to cost on the wire
	// (tsdb.QueryOptions; 0: by the raw layout).
	RawBytesPerSample float64
	// MaxResolution is the coarsest tier Step a Select may read where raw samples exist
	// (tsdb.QueryOptions.MaxResolution: 0 or tsdb.RawResolution, raw samples, exact
	// answers; tsdb.AnyResolution, any tier estimated cheaper; a duration). A query's
	// max_source_resolution, in its context, takes its place.
	MaxResolution time.Duration
	// PreferTiers makes a Select read a tier wherever one can serve it.
	PreferTiers bool
	// DisableTiers makes every Select read raw samples, and Exact rewrite nothing.
	DisableTiers bool
	// PreferExactTiers makes Exact read a tier wherever one serves a call, whatever the
	// estimates (tsdb.QueryOptions.PreferExactTiers).
	PreferExactTiers bool
}

// Defaults of Options.
const (
	DefaultBatchSize     = tsdb.DefaultQueryBatchSize
	DefaultConcurrency   = tsdb.DefaultQueryConcurrency
	DefaultLookbackDelta = 5 * time.Minute
)

// Queryable is a storage.Queryable over a tsdb.DB: a tsdb.Queryable, and the conversions.
// It is safe for concurrent use.
type Queryable struct {
	db   *tsdb.DB
	q    *tsdb.Queryable
	opts Options
}

var _ storage.Queryable = (*Queryable)(nil)

// New returns a Queryable over db. nil options mean the defaults; invalid ones give an error
// wrapping tablets.ErrInvalidOptions.
func New(db *tsdb.DB, opts *Options) (*Queryable, error) {
	if db == nil {
		return nil, fmt.Errorf("promstore: %w: nil database", tablets.ErrInvalidOptions)
	}
	o := Options{}
	if opts != nil {
		o = *opts
	}
	if o.LookbackDelta == 0 {
		o.LookbackDelta = DefaultLookbackDelta
	}
	if o.LookbackDelta < time.Millisecond {
		return nil, fmt.Errorf("promstore: %w: LookbackDelta %v must be at least a millisecond", tablets.ErrInvalidOptions, o.LookbackDelta)
	}
	q, err := db.Queryable(&tsdb.QueryOptions{BatchSize: o.BatchSize, Concurrency: o.Concurrency, MinTierStep: o.MinTierStep,
		RawBytesPerSample: o.RawBytesPerSample, PreferTiers: o.PreferTiers, DisableTiers: o.DisableTiers, MaxResolution: o.MaxResolution,
		PreferExactTiers: o.PreferExactTiers})
	if err != nil {
		return nil, err
	}
	return &Queryable{db: db, q: q, opts: o}, nil
}

// Stats counts what the Selects of a Queryable did, since New: for tests and /metrics.
type Stats = tsdb.QueryStats

// Stats returns the counters.
func (q *Queryable) Stats() Stats { return q.q.Stats() }

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

	mu   sync.Mutex
	sets []*seriesSet // of its Selects: Close stops those not read to their end
}

var _ storage.Querier = (*Querier)(nil)

// Close cancels what the Querier's Selects still read ahead. Series already returned stay
// readable.
func (qr *Querier) Close() error {
	qr.once.Do(func() {
		qr.cancel()
		qr.mu.Lock()
		sets := qr.sets
		qr.sets = nil
		qr.mu.Unlock()
		for _, s := range sets {
			s.stop()
		}
	})
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
	vals, err := qr.q.q.Querier(from, to).LabelValues(ctx, name, ms...)
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
	names, err := qr.q.q.Querier(from, to).LabelNames(ctx, ms...)
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
