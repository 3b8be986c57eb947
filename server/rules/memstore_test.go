package rules

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/util/annotations"

	"github.com/seed71701133/tablets/server/remote"
)

// memStore is a Writer and a Queryable in memory: float samples by series, a later write
// of a timestamp replacing the earlier.
type memStore struct {
	mu     sync.Mutex
	series map[string]*memSeries
	writes int
}

type memSeries struct {
	lset    labels.Labels
	samples map[int64]float64
}

func newMemStore() *memStore { return &memStore{series: map[string]*memSeries{}} }

func (m *memStore) add(l labels.Labels, t int64, v float64) {
	key := l.String()
	s := m.series[key]
	if s == nil {
		s = &memSeries{lset: l, samples: map[int64]float64{}}
		m.series[key] = s
	}
	s.samples[t] = v
}

func (m *memStore) WriteTimeSeries(_ context.Context, tss []prompb.TimeSeries) (remote.Written, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.writes++
	n := 0
	for _, ts := range tss {
		b := labels.NewScratchBuilder(len(ts.Labels))
		for _, l := range ts.Labels {
			b.Add(l.Name, l.Value)
		}
		b.Sort()
		l := b.Labels()
		for _, s := range ts.Samples {
			m.add(l, s.Timestamp, s.Value)
			n++
		}
	}
	return remote.Written{Samples: n}, nil
}

// samples returns the samples of the series matching ms, by series string, in time order.
func (m *memStore) samples(ms ...*labels.Matcher) map[string][]memSample {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string][]memSample{}
	for key, s := range m.series {
		if !matchAll(s.lset, ms) {
			continue
		}
		for t, v := range s.samples {
			out[key] = append(out[key], memSample{t: t, f: v})
		}
		slices.SortFunc(out[key], func(a, b memSample) int { return int(a.t - b.t) })
	}
	return out
}

func matchAll(l labels.Labels, ms []*labels.Matcher) bool {
	for _, m := range ms {
		if !m.Matches(l.Get(m.Name)) {
			return false
		}
	}
	return true
}

func (m *memStore) Querier(mint, maxt int64) (storage.Querier, error) {
	return &memQuerier{m: m, mint: mint, maxt: maxt}, nil
}

type memQuerier struct {
	m          *memStore
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
		if !matchAll(s.lset, ms) {
			continue
		}
		var ss []chunks.Sample
		for t, v := range s.samples {
			if t >= mint && t <= maxt {
				ss = append(ss, memSample{t: t, f: v})
			}
		}
		if len(ss) == 0 {
			continue
		}
		slices.SortFunc(ss, func(a, b chunks.Sample) int { return int(a.T() - b.T()) })
		list = append(list, storage.NewListSeries(s.lset, ss))
	}
	q.m.mu.Unlock()
	slices.SortFunc(list, func(a, b storage.Series) int { return labels.Compare(a.Labels(), b.Labels()) })
	return &listSet{list: list, i: -1}
}

type listSet struct {
	list []storage.Series
	i    int
}

func (s *listSet) Next() bool                        { s.i++; return s.i < len(s.list) }
func (s *listSet) At() storage.Series                { return s.list[s.i] }
func (s *listSet) Err() error                        { return nil }
func (s *listSet) Warnings() annotations.Annotations { return nil }

func (q *memQuerier) LabelValues(context.Context, string, *storage.LabelHints, ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	return nil, nil, nil
}

func (q *memQuerier) LabelNames(context.Context, *storage.LabelHints, ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	return nil, nil, nil
}

func (q *memQuerier) Close() error { return nil }

type memSample struct {
	t int64
	f float64
}

func (s memSample) T() int64                      { return s.t }
func (s memSample) F() float64                    { return s.f }
func (s memSample) H() *histogram.Histogram       { return nil }
func (s memSample) FH() *histogram.FloatHistogram { return nil }
func (s memSample) Type() chunkenc.ValueType      { return chunkenc.ValFloat }
func (s memSample) Copy() chunks.Sample           { return s }

// postedAlert is an alert of Alertmanager's v2 API, as the notifier posts it.
type postedAlert struct {
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations"`
	StartsAt     time.Time         `json:"startsAt"`
	EndsAt       time.Time         `json:"endsAt"`
	GeneratorURL string            `json:"generatorURL"`
	// Path and Tenant are the request's path and X-Scope-OrgID; At when it was sent.
	Path, Tenant string
	At           time.Time
}

// fakeAlertmanager records what the notifier posts, without a network.
type fakeAlertmanager struct {
	mu     sync.Mutex
	alerts []postedAlert
}

func (f *fakeAlertmanager) do(_ context.Context, _ *http.Client, req *http.Request) (*http.Response, error) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, err
	}
	var as []postedAlert
	if err := json.Unmarshal(body, &as); err != nil {
		return nil, err
	}
	f.mu.Lock()
	for _, a := range as {
		a.Path, a.Tenant, a.At = req.URL.Path, req.Header.Get(TenantHeader), time.Now()
		f.alerts = append(f.alerts, a)
	}
	f.mu.Unlock()
	return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(bytes.NewReader(nil)), Request: req}, nil
}

func (f *fakeAlertmanager) posted() []postedAlert {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.alerts)
}
