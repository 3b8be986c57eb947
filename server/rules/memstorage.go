package rules

import (
	"context"
	"slices"
	"sync"

	"github.com/prometheus/prometheus/model/exemplar"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/metadata"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/util/annotations"
)

// memStorage is the storage of the unit tests of rules: float and histogram samples by
// series, in memory, a sample of a timestamp already held replacing it. (promtool runs them
// over Prometheus' TSDB through promqltest, whose packages link the testing package, which
// the command must not; what a test observes is the same.)
type memStorage struct {
	mu     sync.Mutex
	series map[string]*memSeries
}

type memSeries struct {
	lset    labels.Labels
	samples map[int64]memSample
}

func newMemStorage() *memStorage { return &memStorage{series: map[string]*memSeries{}} }

func (m *memStorage) add(l labels.Labels, s memSample) {
	m.mu.Lock()
	defer m.mu.Unlock()
	key := string(l.Bytes(nil))
	ser := m.series[key]
	if ser == nil {
		ser = &memSeries{lset: l.Copy(), samples: map[int64]memSample{}}
		m.series[key] = ser
	}
	ser.samples[s.t] = s
}

func (m *memStorage) Appender(context.Context) storage.Appender { return &memAppender{m: m} }

// memAppender adds its samples on Commit.
type memAppender struct {
	m       *memStorage
	pending []pendingSample
}

type pendingSample struct {
	l labels.Labels
	s memSample
}

func (a *memAppender) Append(_ storage.SeriesRef, l labels.Labels, t int64, v float64) (storage.SeriesRef, error) {
	a.pending = append(a.pending, pendingSample{l: l.Copy(), s: memSample{t: t, f: v}})
	return 0, nil
}

func (a *memAppender) AppendHistogram(_ storage.SeriesRef, l labels.Labels, t int64, h *histogram.Histogram, fh *histogram.FloatHistogram) (storage.SeriesRef, error) {
	if h != nil {
		fh = h.ToFloat(nil)
	}
	if fh != nil {
		a.pending = append(a.pending, pendingSample{l: l.Copy(), s: memSample{t: t, fh: fh.Copy()}})
	}
	return 0, nil
}

func (a *memAppender) Commit() error {
	for _, p := range a.pending {
		a.m.add(p.l, p.s)
	}
	a.pending = nil
	return nil
}

func (a *memAppender) Rollback() error                   { a.pending = nil; return nil }
func (a *memAppender) SetOptions(*storage.AppendOptions) {}
func (a *memAppender) AppendExemplar(storage.SeriesRef, labels.Labels, exemplar.Exemplar) (storage.SeriesRef, error) {
	return 0, nil
}

func (a *memAppender) UpdateMetadata(storage.SeriesRef, labels.Labels, metadata.Metadata) (storage.SeriesRef, error) {
	return 0, nil
}

func (a *memAppender) AppendCTZeroSample(storage.SeriesRef, labels.Labels, int64, int64) (storage.SeriesRef, error) {
	return 0, nil
}

func (a *memAppender) AppendHistogramCTZeroSample(storage.SeriesRef, labels.Labels, int64, int64, *histogram.Histogram, *histogram.FloatHistogram) (storage.SeriesRef, error) {
	return 0, nil
}

func (m *memStorage) Querier(mint, maxt int64) (storage.Querier, error) {
	return &memQuerier{m: m, mint: mint, maxt: maxt}, nil
}

type memQuerier struct {
	m          *memStorage
	mint, maxt int64
}

func (q *memQuerier) Select(_ context.Context, _ bool, hints *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
	mint, maxt := q.mint, q.maxt
	if hints != nil {
		mint, maxt = hints.Start, hints.End
	}
	q.m.mu.Lock()
	var list []storage.Series
	for _, s := range q.m.series {
		if !matchesAll(s.lset, ms) {
			continue
		}
		var ss []chunks.Sample
		for t, smp := range s.samples {
			if t >= mint && t <= maxt {
				ss = append(ss, smp)
			}
		}
		if len(ss) == 0 {
			continue
		}
		slices.SortFunc(ss, func(a, b chunks.Sample) int { return compareInt64(a.T(), b.T()) })
		list = append(list, storage.NewListSeries(s.lset, ss))
	}
	q.m.mu.Unlock()
	slices.SortFunc(list, func(a, b storage.Series) int { return labels.Compare(a.Labels(), b.Labels()) })
	return &listSeriesSet{list: list, i: -1}
}

func compareInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func matchesAll(l labels.Labels, ms []*labels.Matcher) bool {
	for _, m := range ms {
		if !m.Matches(l.Get(m.Name)) {
			return false
		}
	}
	return true
}

func (q *memQuerier) LabelValues(context.Context, string, *storage.LabelHints, ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	return nil, nil, nil
}

func (q *memQuerier) LabelNames(context.Context, *storage.LabelHints, ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	return nil, nil, nil
}

func (q *memQuerier) Close() error { return nil }

type listSeriesSet struct {
	list []storage.Series
	i    int
}

func (s *listSeriesSet) Next() bool                        { s.i++; return s.i < len(s.list) }
func (s *listSeriesSet) At() storage.Series                { return s.list[s.i] }
func (s *listSeriesSet) Err() error                        { return nil }
func (s *listSeriesSet) Warnings() annotations.Annotations { return nil }

// memSample is a float sample, or a float histogram sample when fh is set.
type memSample struct {
	t  int64
	f  float64
	fh *histogram.FloatHistogram
}

func (s memSample) T() int64                      { return s.t }
func (s memSample) F() float64                    { return s.f }
func (s memSample) H() *histogram.Histogram       { return nil }
func (s memSample) FH() *histogram.FloatHistogram { return s.fh }
func (s memSample) Type() chunkenc.ValueType {
	if s.fh != nil {
		return chunkenc.ValFloatHistogram
	}
	return chunkenc.ValFloat
}
func (s memSample) Copy() chunks.Sample {
	if s.fh != nil {
		s.fh = s.fh.Copy()
	}
	return s
}
