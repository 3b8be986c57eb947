package rules

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/rules"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/util/annotations"
)

// SharedReads lets the rules of one evaluation of a group share their reads: the rules of a
// group often select the same series over the same range (several aggregations of one
// metric, an alert over a recorded rate), and each Select of the database costs requests
// and decoding (issue 37's scale: ten rules of a group, one metric, ten reads of it). Within
// one evaluation of a group, a Select of the same matchers and range is answered from the
// first one's series (selectKey).
//
// What a rule of the evaluation writes is seen by the rules after it, as in Prometheus
// (each rule's samples are committed before the next rule runs): a write drops the shared
// Selects whose matchers match any series written. Apart from that, the rules of one
// evaluation see the database as of the evaluation's first read of each selection, as if
// they had been evaluated at once: a sample written meanwhile by a remote write (at most
// the evaluation's seconds) shows at the next evaluation. Nothing is kept between
// evaluations.
//
// Only the Selects of instant queries (a rule's: no step) are shared, and at most
// sharedSamplesMax samples an evaluation (beyond, Selects read on their own). Safe for
// concurrent use.
type SharedReads struct {
	shared, read prometheus.Counter
}

// sharedSamplesMax bounds the samples an evaluation keeps for its rules to share (about 16
// bytes a float sample as held: 64 MiB).
const sharedSamplesMax = 4 << 20

// NewSharedReads returns the SharedReads of a Manager: pass it as Options.SharedReads, and
// its Queryable to the engine of Options.QueryFunc.
func NewSharedReads() *SharedReads {
	return &SharedReads{
		shared: prometheus.NewCounter(prometheus.CounterOpts{Name: "tablets_rule_selects_shared_total",
			Help: "Selects of rule evaluations answered from another rule's Select of the same evaluation of its group."}),
		read: prometheus.NewCounter(prometheus.CounterOpts{Name: "tablets_rule_selects_read_total",
			Help: "Selects of rule evaluations read from the database (the first of their kind in an evaluation of a group, or not shareable)."}),
	}
}

func (s *SharedReads) register(r prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{s.shared, s.read} {
		if err := r.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// evaluation is the shared Selects of one evaluation of a group.
type evaluation struct {
	mu      sync.Mutex
	selects map[string]*sharedSelect
	samples int // held by selects
}

// sharedSelect is a Select's series, read once; ready is closed when they are.
type sharedSelect struct {
	matchers []*labels.Matcher
	ready    chan struct{}
	series   []storage.Series
	warnings annotations.Annotations
	err      error
}

type evaluationKey struct{}

// sharing is iterate with each evaluation of a group sharing its reads.
func sharing(iterate rules.GroupEvalIterationFunc) rules.GroupEvalIterationFunc {
	return func(ctx context.Context, g *rules.Group, ts time.Time) {
		iterate(withEvaluation(ctx), g, ts)
	}
}

// withEvaluation returns ctx carrying a new evaluation's shared Selects.
func withEvaluation(ctx context.Context) context.Context {
	return context.WithValue(ctx, evaluationKey{}, &evaluation{selects: map[string]*sharedSelect{}})
}

func evaluationOf(ctx context.Context) *evaluation {
	e, _ := ctx.Value(evaluationKey{}).(*evaluation)
	return e
}

// wrote drops the shared Selects that would select a series of written: the rules after
// the write read it again.
func (e *evaluation) wrote(written []labels.Labels) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for k, sel := range e.selects {
		for _, l := range written {
			if matchesAll(l, sel.matchers) {
				delete(e.selects, k)
				break
			}
		}
	}
}

// Queryable returns q with its Selects shared within an evaluation of a group (those of a
// context of a Manager's evaluation: others go to q).
func (s *SharedReads) Queryable(q storage.Queryable) storage.Queryable {
	return storage.QueryableFunc(func(mint, maxt int64) (storage.Querier, error) {
		inner, err := q.Querier(mint, maxt)
		if err != nil {
			return nil, err
		}
		return &sharingQuerier{Querier: inner, shared: s, mint: mint, maxt: maxt}, nil
	})
}

type sharingQuerier struct {
	storage.Querier
	shared     *SharedReads
	mint, maxt int64
}

func (q *sharingQuerier) Select(ctx context.Context, sortSeries bool, hints *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
	e := evaluationOf(ctx)
	if e == nil || (hints != nil && hints.Step != 0) {
		q.shared.read.Inc()
		return q.Querier.Select(ctx, sortSeries, hints, ms...)
	}
	key := selectKey(q.mint, q.maxt, hints, ms)
	e.mu.Lock()
	if sel, ok := e.selects[key]; ok {
		e.mu.Unlock()
		<-sel.ready
		if sel.err == nil {
			q.shared.shared.Inc()
			return &listSet{series: sel.series, warnings: sel.warnings}
		}
		// The first reader failed (its context, perhaps): this one reads on its own.
		q.shared.read.Inc()
		return q.Querier.Select(ctx, sortSeries, hints, ms...)
	}
	if e.samples >= sharedSamplesMax {
		e.mu.Unlock()
		q.shared.read.Inc()
		return q.Querier.Select(ctx, sortSeries, hints, ms...)
	}
	sel := &sharedSelect{matchers: ms, ready: make(chan struct{})}
	e.selects[key] = sel
	e.mu.Unlock()

	q.shared.read.Inc()
	samples := 0
	sel.series, sel.warnings, samples, sel.err = expand(q.Querier.Select(ctx, true, hints, ms...))
	e.mu.Lock()
	if sel.err != nil {
		if e.selects[key] == sel {
			delete(e.selects, key)
		}
	} else {
		e.samples += samples
	}
	e.mu.Unlock()
	close(sel.ready)
	if sel.err != nil {
		return storage.ErrSeriesSet(sel.err)
	}
	return &listSet{series: sel.series, warnings: sel.warnings}
}

// selectKey names a Select by what its series and samples depend on: the Querier's range,
// the hints' range, limit and shard, whether it asks for labels only (Func "series"),
// whether it is of an instant selector (Range 0: the storage may then give each series'
// latest sample only, promstore's engineselect), and the matchers. The function around
// the selector and the aggregation's grouping are left out: they choose what to read only
// for the Selects of range queries (a tier, tsdb.SelectHints), which are not shared; so
// "max(x)" and "count(x)" at one timestamp read x once, as do "rate(x[5m])" and
// "increase(x[5m])".
func selectKey(mint, maxt int64, h *storage.SelectHints, ms []*labels.Matcher) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d %d", mint, maxt)
	if h != nil {
		fmt.Fprintf(&b, " %d %d %d %d %d %v %v %v", h.Start, h.End, h.Limit, h.ShardCount, h.ShardIndex, h.Func == "series", h.DisableTrimming, h.Range == 0)
	}
	names := make([]string, len(ms))
	for i, m := range ms {
		names[i] = m.String()
	}
	slices.Sort(names)
	for _, n := range names {
		b.WriteString(" ")
		b.WriteString(n)
	}
	return b.String()
}

// expand reads set whole, copying each series' samples (a series of a Querier may be
// valid only until it is closed: these outlive it).
func expand(set storage.SeriesSet) (series []storage.Series, warnings annotations.Annotations, samples int, err error) {
	for set.Next() {
		s := set.At()
		got, err := storage.ExpandSamples(s.Iterator(nil), nil)
		if err != nil {
			return nil, nil, 0, err
		}
		samples += len(got)
		series = append(series, storage.NewListSeries(s.Labels(), got))
	}
	if err := set.Err(); err != nil {
		return nil, nil, 0, err
	}
	return series, set.Warnings(), samples, nil
}

// listSet is a SeriesSet over series read already. Many Selects may iterate the same
// series: each iterator is its own.
type listSet struct {
	series   []storage.Series
	at       int
	warnings annotations.Annotations
}

func (l *listSet) Next() bool {
	if l.at >= len(l.series) {
		return false
	}
	l.at++
	return true
}

func (l *listSet) At() storage.Series                { return l.series[l.at-1] }
func (l *listSet) Err() error                        { return nil }
func (l *listSet) Warnings() annotations.Annotations { return l.warnings }
