package api

import (
	"context"
	"math"
	"slices"
	"sync"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/util/annotations"
)

// memStore is a tiny in-memory storage.Queryable for the tests: float samples, or float and
// histogram samples (addMixed), series sorted by labels, and hooks to record hints, fail,
// or block.
type memStore struct {
	series []memSeries

	mu        sync.Mutex
	hints     []storage.SelectHints // every Select's hints, in call order
	selects   int
	selectErr error         // returned by every Select when set (but see failFor)
	failFor   int           // when > 0, only the first failFor Selects return selectErr
	warning   error         // a warning of every Select when set
	block     chan struct{} // when set, Select waits for it to close or ctx to end
	entered   chan struct{} // when set, Select sends on it before blocking
	stubborn  bool          // when set, a blocked Select ignores its ctx
}

type memSeries struct {
	lset labels.Labels
	ts   []int64 // milliseconds, ascending
	vs   []float64
	// mixed: float and histogram samples, times ascending (ts holds their times too).
	mixed []tSample
}

// addMixed adds a series of float and histogram samples, times ascending.
func (m *memStore) addMixed(lset labels.Labels, samples []tSample) {
	s := memSeries{lset: lset, mixed: samples}
	for _, x := range samples {
		s.ts = append(s.ts, x.t)
		s.vs = append(s.vs, x.f)
	}
	m.series = append(m.series, s)
	slices.SortFunc(m.series, func(a, b memSeries) int { return labels.Compare(a.lset, b.lset) })
}

func (m *memStore) add(lset labels.Labels, ts []int64, vs []float64) {
	m.series = append(m.series, memSeries{lset: lset, ts: ts, vs: vs})
	slices.SortFunc(m.series, func(a, b memSeries) int { return labels.Compare(a.lset, b.lset) })
}

func (m *memStore) Querier(mint, maxt int64) (storage.Querier, error) {
	return &memQuerier{m: m, mint: mint, maxt: maxt}, nil
}

type memQuerier struct {
	m          *memStore
	mint, maxt int64
}

func matchesAll(lset labels.Labels, ms []*labels.Matcher) bool {
	for _, m := range ms {
		if !m.Matches(lset.Get(m.Name)) {
			return false
		}
	}
	return true
}

// inRange returns the samples of s within [mint, maxt].
func (s memSeries) inRange(mint, maxt int64) ([]int64, []float64) {
	lo, _ := slices.BinarySearch(s.ts, mint)
	hi, found := slices.BinarySearch(s.ts, maxt)
	if found {
		hi++
	}
	return s.ts[lo:hi], s.vs[lo:hi]
}

func (q *memQuerier) Select(ctx context.Context, _ bool, hints *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
	m := q.m
	m.mu.Lock()
	m.selects++
	if hints != nil {
		m.hints = append(m.hints, *hints)
	}
	err := m.selectErr
	if m.failFor > 0 && m.selects > m.failFor {
		err = nil
	}
	m.mu.Unlock()
	if err != nil {
		return storage.ErrSeriesSet(err)
	}
	if err := m.wait(ctx); err != nil {
		return storage.ErrSeriesSet(err)
	}
	mint, maxt := q.mint, q.maxt
	if hints != nil {
		mint, maxt = hints.Start, hints.End
	}
	var out []storage.Series
	for _, s := range m.series {
		if !matchesAll(s.lset, ms) {
			continue
		}
		ts, vs := s.inRange(mint, maxt)
		if len(ts) == 0 {
			continue
		}
		v := &memSeriesView{lset: s.lset, ts: ts, vs: vs}
		if s.mixed != nil {
			lo, _ := slices.BinarySearch(s.ts, ts[0])
			v.mixed = s.mixed[lo : lo+len(ts)]
		}
		out = append(out, v)
	}
	set := &sliceSet{series: out, i: -1}
	if m.warning != nil {
		set.ws = set.ws.Add(m.warning)
	}
	return set
}

// matching returns the series matching ms with samples in the querier's range.
func (q *memQuerier) matching(ms []*labels.Matcher) []memSeries {
	var out []memSeries
	for _, s := range q.m.series {
		if ts, _ := s.inRange(q.mint, q.maxt); len(ts) > 0 && matchesAll(s.lset, ms) {
			out = append(out, s)
		}
	}
	return out
}

// wait blocks while m.block is set and open, until ctx ends (unless m is stubborn).
func (m *memStore) wait(ctx context.Context) error {
	m.mu.Lock()
	block, entered, stubborn := m.block, m.entered, m.stubborn
	m.mu.Unlock()
	if block == nil {
		return nil
	}
	if entered != nil {
		entered <- struct{}{}
	}
	var done <-chan struct{}
	if !stubborn {
		done = ctx.Done()
	}
	select {
	case <-block:
		return nil
	case <-done:
		return ctx.Err()
	}
}

func (q *memQuerier) LabelValues(ctx context.Context, name string, _ *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	if err := q.m.wait(ctx); err != nil {
		return nil, nil, err
	}
	var vals []string
	for _, s := range q.matching(ms) {
		if v := s.lset.Get(name); v != "" && !slices.Contains(vals, v) {
			vals = append(vals, v)
		}
	}
	slices.Sort(vals)
	return vals, nil, nil
}

func (q *memQuerier) LabelNames(ctx context.Context, _ *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	if err := q.m.wait(ctx); err != nil {
		return nil, nil, err
	}
	var names []string
	for _, s := range q.matching(ms) {
		s.lset.Range(func(l labels.Label) {
			if !slices.Contains(names, l.Name) {
				names = append(names, l.Name)
			}
		})
	}
	slices.Sort(names)
	return names, nil, nil
}

func (q *memQuerier) Close() error { return nil }

type sliceSet struct {
	series []storage.Series
	i      int
	ws     annotations.Annotations
}

func (s *sliceSet) Next() bool                        { s.i++; return s.i < len(s.series) }
func (s *sliceSet) At() storage.Series                { return s.series[s.i] }
func (s *sliceSet) Err() error                        { return nil }
func (s *sliceSet) Warnings() annotations.Annotations { return s.ws }

type memSeriesView struct {
	lset  labels.Labels
	ts    []int64
	vs    []float64
	mixed []tSample
}

func (s *memSeriesView) Labels() labels.Labels { return s.lset }
func (s *memSeriesView) Iterator(chunkenc.Iterator) chunkenc.Iterator {
	if s.mixed != nil {
		return storage.NewListSeriesIteratorWithCopy(tSamples(s.mixed))
	}
	return storage.NewListSeriesIterator(floatSamples{s.ts, s.vs})
}

// tSample is a float or a histogram sample (h or fh set).
type tSample struct {
	t  int64
	f  float64
	h  *histogram.Histogram
	fh *histogram.FloatHistogram
}

func (s tSample) T() int64   { return s.t }
func (s tSample) F() float64 { return s.f }

// H and FH are copies: the engine may change what an iterator gives it.
func (s tSample) H() *histogram.Histogram {
	if s.h == nil {
		return nil
	}
	return s.h.Copy()
}

func (s tSample) FH() *histogram.FloatHistogram {
	switch {
	case s.h != nil:
		return s.h.ToFloat(nil)
	case s.fh != nil:
		return s.fh.Copy()
	}
	return nil
}

func (s tSample) Type() chunkenc.ValueType {
	switch {
	case s.h != nil:
		return chunkenc.ValHistogram
	case s.fh != nil:
		return chunkenc.ValFloatHistogram
	}
	return chunkenc.ValFloat
}

func (s tSample) Copy() chunks.Sample {
	c := tSample{t: s.t, f: s.f, h: s.H()}
	if s.fh != nil {
		c.fh = s.fh.Copy()
	}
	return c
}

type tSamples []tSample

func (s tSamples) Get(i int) chunks.Sample { return s[i] }
func (s tSamples) Len() int                { return len(s) }

// floatSamples adapts parallel slices to storage.Samples.
type floatSamples struct {
	ts []int64
	vs []float64
}

func (f floatSamples) Get(i int) chunks.Sample { return fSample{f.ts[i], f.vs[i]} }
func (f floatSamples) Len() int                { return len(f.ts) }

type fSample struct {
	t int64
	f float64
}

func (s fSample) T() int64                      { return s.t }
func (s fSample) F() float64                    { return s.f }
func (s fSample) H() *histogram.Histogram       { return nil }
func (s fSample) FH() *histogram.FloatHistogram { return nil }
func (s fSample) Type() chunkenc.ValueType      { return chunkenc.ValFloat }
func (s fSample) Copy() chunks.Sample           { return s }

// staleNaN is Prometheus' staleness marker (model/value.StaleNaN).
var staleNaN = math.Float64frombits(0x7ff0000000000002)
