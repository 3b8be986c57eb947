package promstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/util/annotations"

	"github.com/seed71701133/tablets/tsdb"
)

// exactLabel names the selector a rewritten query reads an evaluation through: its value
// is the evaluation's index in the Queryable the rewrite returns. No stored series has it
// (the label names of the stores cannot start with "__tablets").
const exactLabel = "__tablets_exact__"

// Exact rewrites a range query (qs over start..end at step) so that each call of a
// function tsdb.Querier.Evaluate computes from a tier's windows (rate, increase, delta, and
// the sum, count, avg, min, max, last and present _over_time functions of a plain range
// selector, outside subqueries, without @) is read precomputed: it runs Evaluate for each,
// and where a tier serves it, replaces the call by a selector of its values at the query's
// steps. It returns the query to run and the Queryable to run it over, or ok false where
// nothing was replaced (run qs over q). Answers equal the engine's over the raw samples,
// up to floating-point rounding (docs/tiers.md, "Exact answers"); the engine's info
// annotations of the replaced calls (a rate of a name that does not look like a counter's)
// are not given.
func (q *Queryable) Exact(ctx context.Context, qs string, start, end time.Time, step time.Duration) (string, storage.Queryable, bool, error) {
	if q.opts.DisableTiers || step <= 0 {
		return "", nil, false, nil
	}
	expr, err := parser.ParseExpr(qs)
	if err != nil {
		return "", nil, false, nil // the engine says what is wrong
	}
	r := &exactRewrite{q: q, ctx: ctx, start: start, end: end, step: step}
	if err := r.walk(&expr, false); err != nil {
		return "", nil, false, err
	}
	if len(r.sets) == 0 {
		return "", nil, false, nil
	}
	return expr.String(), &exactQueryable{q: q, sets: r.sets}, true, nil
}

// exactRewrite is one rewrite: the evaluations it made, by index.
type exactRewrite struct {
	q          *Queryable
	ctx        context.Context
	start, end time.Time
	step       time.Duration
	sets       [][]storage.Series // by index: each replaced call's series, sorted by labels
}

// walk rewrites the calls under *e it can; inSub: under a subquery, whose steps are not the
// query's (left alone).
func (r *exactRewrite) walk(e *parser.Expr, inSub bool) error {
	switch n := (*e).(type) {
	case *parser.Call:
		if !inSub {
			if rep, err := r.call(n); err != nil || rep != nil {
				if rep != nil {
					*e = rep
				}
				return err
			}
		}
		for i := range n.Args {
			if err := r.walk(&n.Args[i], inSub); err != nil {
				return err
			}
		}
	case *parser.AggregateExpr:
		if err := r.walk(&n.Expr, inSub); err != nil {
			return err
		}
		if n.Param != nil {
			return r.walk(&n.Param, inSub)
		}
	case *parser.BinaryExpr:
		if err := r.walk(&n.LHS, inSub); err != nil {
			return err
		}
		return r.walk(&n.RHS, inSub)
	case *parser.ParenExpr:
		return r.walk(&n.Expr, inSub)
	case *parser.UnaryExpr:
		return r.walk(&n.Expr, inSub)
	case *parser.StepInvariantExpr:
		return r.walk(&n.Expr, inSub)
	case *parser.SubqueryExpr:
		return r.walk(&n.Expr, true)
	}
	return nil
}

// call returns the selector that replaces c, or nil where c is not one Evaluate serves.
func (r *exactRewrite) call(c *parser.Call) (parser.Expr, error) {
	fn := tsdb.RangeFunction(c.Func.Name) // tsdb's functions are named as PromQL's
	if !fn.Evaluable() || len(c.Args) != 1 {
		return nil, nil
	}
	ms, ok := c.Args[0].(*parser.MatrixSelector)
	if !ok {
		return nil, nil
	}
	vs, ok := ms.VectorSelector.(*parser.VectorSelector)
	if !ok || vs.Timestamp != nil || vs.StartOrEnd != 0 {
		return nil, nil
	}
	matchers, err := MatchersToTSDB(vs.LabelMatchers)
	if err != nil || !selective(vs.LabelMatchers) {
		return nil, nil
	}
	offset := vs.OriginalOffset
	ev := &tsdb.Evaluation{Function: fn, Range: ms.Range, Start: r.start.Add(-offset), End: r.end.Add(-offset), Step: r.step}
	from, to := ev.Start.Add(-ev.Range), ev.End.Add(time.Millisecond)
	seq, err := r.q.q.Querier(from, to).Evaluate(r.ctx, ev, matchers...)
	switch {
	case errors.Is(err, tsdb.ErrNoExactTier):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("promstore: evaluate %s: %w", c.Func.Name, err)
	}
	keepName := fn == tsdb.FuncLastOverTime
	var set []storage.Series
	seen := map[uint64][]labels.Labels{}
	for s, err := range seq {
		if err != nil {
			return nil, fmt.Errorf("promstore: evaluate %s: %w", c.Func.Name, err)
		}
		ls := LabelsFromTSDB(s.Labels)
		if !keepName {
			ls = ls.DropMetricName()
		}
		h := ls.Hash()
		for _, o := range seen[h] {
			if labels.Equal(o, ls) {
				return nil, nil // the engine says these collide: let it
			}
		}
		seen[h] = append(seen[h], ls)
		set = append(set, exactSeries(ls, s, offset, r.start, r.end, r.step))
	}
	slices.SortFunc(set, func(a, b storage.Series) int { return labels.Compare(a.Labels(), b.Labels()) })
	id := len(r.sets)
	r.sets = append(r.sets, set)
	return &parser.VectorSelector{LabelMatchers: []*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, exactLabel, strconv.Itoa(id))}}, nil
}

// exactSeries is a series of an evaluation's values at the query's steps (its times moved
// by offset back to the steps'), with a staleness marker at each step without one, so
// that the engine's lookback never carries a value to the next step.
func exactSeries(ls labels.Labels, s *tsdb.Series, offset time.Duration, start, end time.Time, step time.Duration) storage.Series {
	vals := map[int64]float64{}
	it := s.Iterator()
	for it.Next() {
		smp := it.At()
		vals[smp.T+offset.Milliseconds()] = smp.F
	}
	var samples []chunks.Sample
	for t := start; !t.After(end); t = t.Add(step) {
		ms := t.UnixMilli()
		v, ok := vals[ms]
		if !ok {
			v = math.Float64frombits(value.StaleNaN)
		}
		samples = append(samples, floatSample{ms, v})
	}
	return storage.NewListSeries(ls, samples)
}

// floatSample is a chunks.Sample of a float.
type floatSample struct {
	t int64
	f float64
}

func (s floatSample) T() int64                      { return s.t }
func (s floatSample) F() float64                    { return s.f }
func (s floatSample) H() *histogram.Histogram       { return nil }
func (s floatSample) FH() *histogram.FloatHistogram { return nil }
func (s floatSample) Type() chunkenc.ValueType      { return chunkenc.ValFloat }
func (s floatSample) Copy() chunks.Sample           { return s }

// exactQueryable answers the selectors of a rewrite's evaluations from them, and every
// other from its Queryable.
type exactQueryable struct {
	q    *Queryable
	sets [][]storage.Series
}

func (e *exactQueryable) Querier(mint, maxt int64) (storage.Querier, error) {
	inner, err := e.q.Querier(mint, maxt)
	if err != nil {
		return nil, err
	}
	return &exactQuerier{Querier: inner, sets: e.sets}, nil
}

type exactQuerier struct {
	storage.Querier
	sets [][]storage.Series
}

func (e *exactQuerier) Select(ctx context.Context, sortSeries bool, hints *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
	for _, m := range ms {
		if m.Name != exactLabel {
			continue
		}
		id, err := strconv.Atoi(m.Value)
		if err != nil || id < 0 || id >= len(e.sets) || len(ms) != 1 {
			return storage.ErrSeriesSet(fmt.Errorf("promstore: no evaluation %q", m.Value))
		}
		return &listSet{list: e.sets[id], i: -1}
	}
	return e.Querier.Select(ctx, sortSeries, hints, ms...)
}

// listSet is a storage.SeriesSet of a list.
type listSet struct {
	list []storage.Series
	i    int
}

func (s *listSet) Next() bool                        { s.i++; return s.i < len(s.list) }
func (s *listSet) At() storage.Series                { return s.list[s.i] }
func (s *listSet) Err() error                        { return nil }
func (s *listSet) Warnings() annotations.Annotations { return nil }
