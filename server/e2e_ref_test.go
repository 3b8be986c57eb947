package server_test

import (
	"context"
	"sort"
	"time"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/util/annotations"

	"github.com/seed71701133/tablets/internal/testkit/promrun"
)

// refEngine is Prometheus 3's PromQL engine (the library version tablets' query API runs)
// over P1's own raw samples, read through P1's remote read: the reference for functions
// whose semantics changed between Prometheus 2.42 and 3 (rate's extrapolation of a counter
// that starts within the range, the left-open ranges of 3.0). Comparing tablets with it
// checks tablets' storage and API; comparing P2 (2.42 over tablets' remote read) with P1
// checks the same data against 2.42's engine.
type refEngine struct {
	engine *promql.Engine
	q      refQueryable
}

func newRefEngine(raw *rawSeries) *refEngine {
	var q refQueryable
	for k, ss := range raw.samples {
		samples := make([]chunks.Sample, len(ss))
		for i, s := range ss {
			samples[i] = refSample{t: s.Timestamp, f: s.Value}
		}
		q = append(q, storage.NewListSeries(raw.labels[k], samples))
	}
	sort.Slice(q, func(i, j int) bool { return labels.Compare(q[i].Labels(), q[j].Labels()) < 0 })
	return &refEngine{
		engine: promql.NewEngine(promql.EngineOpts{MaxSamples: 50_000_000, Timeout: time.Minute,
			EnableAtModifier: true, EnableNegativeOffset: true,
			NoStepSubqueryIntervalFn: func(int64) int64 { return time.Minute.Milliseconds() }}),
		q: q,
	}
}

func (r *refEngine) queryRange(ctx context.Context, qs string, start, end time.Time, step time.Duration) (promrun.Matrix, error) {
	qry, err := r.engine.NewRangeQuery(ctx, r.q, nil, qs, start, end, step)
	if err != nil {
		return nil, err
	}
	defer qry.Close()
	res := qry.Exec(ctx)
	if res.Err != nil {
		return nil, res.Err
	}
	m, err := res.Matrix()
	if err != nil {
		return nil, err
	}
	out := make(promrun.Matrix, 0, len(m))
	for _, s := range m {
		st := promrun.Stream{Metric: promrun.Labels(s.Metric.Map())}
		for _, p := range s.Floats {
			st.Values = append(st.Values, promrun.Point{T: p.T, V: p.F})
		}
		out = append(out, st)
	}
	return out, nil
}

// promLabels converts remote-read labels.
func promLabels(ls []prompb.Label) labels.Labels {
	b := labels.NewScratchBuilder(len(ls))
	for _, l := range ls {
		b.Add(l.Name, l.Value)
	}
	b.Sort()
	return b.Labels()
}

type refSample struct {
	t int64
	f float64
}

func (s refSample) T() int64                      { return s.t }
func (s refSample) F() float64                    { return s.f }
func (s refSample) H() *histogram.Histogram       { return nil }
func (s refSample) FH() *histogram.FloatHistogram { return nil }
func (s refSample) Type() chunkenc.ValueType      { return chunkenc.ValFloat }
func (s refSample) Copy() chunks.Sample           { return s }

// refQueryable holds series sorted by labels; a Select returns those that match.
type refQueryable []storage.Series

func (q refQueryable) Querier(int64, int64) (storage.Querier, error) { return q, nil }

func (q refQueryable) Select(_ context.Context, _ bool, _ *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
	var out []storage.Series
next:
	for _, s := range q {
		for _, m := range ms {
			if !m.Matches(s.Labels().Get(m.Name)) {
				continue next
			}
		}
		out = append(out, s)
	}
	return &refSet{series: out, i: -1}
}

func (q refQueryable) LabelValues(context.Context, string, *storage.LabelHints, ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	return nil, nil, nil
}

func (q refQueryable) LabelNames(context.Context, *storage.LabelHints, ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	return nil, nil, nil
}

func (q refQueryable) Close() error { return nil }

type refSet struct {
	series []storage.Series
	i      int
}

func (s *refSet) Next() bool                        { s.i++; return s.i < len(s.series) }
func (s *refSet) At() storage.Series                { return s.series[s.i] }
func (s *refSet) Err() error                        { return nil }
func (s *refSet) Warnings() annotations.Annotations { return nil }
