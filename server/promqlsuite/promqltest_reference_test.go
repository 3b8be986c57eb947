package promqlsuite_test

import (
	"cmp"
	"context"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/util/annotations"
	"github.com/prometheus/prometheus/util/testutil"

	"github.com/seed71701133/tablets/server/remote"
)

// TestPromQLSuiteReference runs the suite over an in-memory storage that keeps the samples
// exactly as the suite's remote writes send them and returns them as kept, counter reset
// hints included, and again with every hint but GaugeType made unknown: what tablets
// promises, with none of Prometheus' TSDB's re-coding (see TestPromQLSuite). When
// TestPromQLSuite fails and this passes, tablets is the cause; when this fails too, the
// suite (after a module upgrade) expects something of Prometheus' own TSDB, or the harness
// sends something wrong.
func TestPromQLSuiteReference(t *testing.T) {
	if testing.Short() {
		t.Skip("the suite's reference run is skipped under -short, as TestPromQLSuite is")
	}
	for _, unknownHints := range []bool{false, true} {
		name := "hints as written"
		if unknownHints {
			name = "hints unknown"
		}
		t.Run(name, func(t *testing.T) {
			engine := promqltest.NewTestEngine(t, false, 0, promqltest.DefaultMaxSamplesPerQuery)
			promqltest.RunBuiltinTestsWithStorage(t, engine, func(testutil.T) storage.Storage {
				return &referenceStorage{unknownHints: unknownHints, series: map[string]*referenceSeries{}}
			})
		})
	}
}

// referenceStorage keeps what remote write 2.0 requests send, in memory.
type referenceStorage struct {
	unknownHints bool

	mu     sync.Mutex
	series map[string]*referenceSeries // by labels' string
}

type referenceSeries struct {
	lset    labels.Labels
	samples []referenceSample // as written, in the order written
}

var _ storage.Storage = (*referenceStorage)(nil)

func (s *referenceStorage) Appender(context.Context) storage.Appender {
	return newRemoteWriteAppender(http.HandlerFunc(s.write), nil)
}

// write stores a remote write 2.0 request's samples.
func (s *referenceStorage) write(w http.ResponseWriter, r *http.Request) {
	compressed, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	body, err := snappy.Decode(nil, compressed)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req writev2.Request
	if err := req.Unmarshal(body); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var b labels.ScratchBuilder
	samples, histograms := 0, 0
	for _, ts := range req.Timeseries {
		lset := ts.ToLabels(&b, req.Symbols)
		rs := s.series[lset.String()]
		if rs == nil {
			rs = &referenceSeries{lset: lset}
			s.series[lset.String()] = rs
		}
		for _, x := range ts.Samples {
			rs.samples = append(rs.samples, referenceSample{t: x.Timestamp, f: x.Value})
		}
		for _, h := range ts.Histograms {
			x := referenceSample{t: h.Timestamp}
			if h.IsFloatHistogram() {
				x.fh = h.ToFloatHistogram()
				if s.unknownHints && x.fh.CounterResetHint != histogram.GaugeType {
					x.fh.CounterResetHint = histogram.UnknownCounterReset
				}
			} else {
				x.h = h.ToIntHistogram()
				if s.unknownHints && x.h.CounterResetHint != histogram.GaugeType {
					x.h.CounterResetHint = histogram.UnknownCounterReset
				}
			}
			rs.samples = append(rs.samples, x)
		}
		samples += len(ts.Samples)
		histograms += len(ts.Histograms)
	}
	w.Header().Set(remote.HeaderSamplesWritten, strconv.Itoa(samples))
	w.Header().Set(remote.HeaderHistogramsWritten, strconv.Itoa(histograms))
	w.WriteHeader(http.StatusNoContent)
}

func (s *referenceStorage) Querier(mint, maxt int64) (storage.Querier, error) {
	return &referenceQuerier{s: s, mint: mint, maxt: maxt}, nil
}

func (s *referenceStorage) ChunkQuerier(int64, int64) (storage.ChunkQuerier, error) {
	return nil, errChunkQuerier
}

func (s *referenceStorage) StartTime() (int64, error) { return 0, nil }
func (s *referenceStorage) Close() error              { return nil }

type referenceQuerier struct {
	s          *referenceStorage
	mint, maxt int64
}

// Select returns the matching series' samples in the range sorted by time: of samples of
// one time, the one written last, a histogram before a float (as promstore does).
func (q *referenceQuerier) Select(_ context.Context, _ bool, hints *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
	mint, maxt := q.mint, q.maxt
	if hints != nil {
		mint, maxt = hints.Start, hints.End
	}
	q.s.mu.Lock()
	defer q.s.mu.Unlock()
	var out []storage.Series
	for _, rs := range q.s.series {
		if !slices.ContainsFunc(ms, func(m *labels.Matcher) bool { return !m.Matches(rs.lset.Get(m.Name)) }) {
			if series := rs.between(mint, maxt); series != nil {
				out = append(out, series)
			}
		}
	}
	slices.SortFunc(out, func(a, b storage.Series) int { return labels.Compare(a.Labels(), b.Labels()) })
	return &referenceSet{series: out, i: -1}
}

func (rs *referenceSeries) between(mint, maxt int64) storage.Series {
	sorted := slices.Clone(rs.samples)
	slices.SortStableFunc(sorted, func(a, b referenceSample) int { return cmp.Compare(a.t, b.t) })
	var kept []chunks.Sample
	for i := range sorted {
		x := &sorted[i]
		if x.t < mint || x.t > maxt {
			continue
		}
		if n := len(kept); n > 0 && kept[n-1].T() == x.t {
			if kept[n-1].Type() != chunkenc.ValFloat && x.Type() == chunkenc.ValFloat {
				continue
			}
			kept[n-1] = x
			continue
		}
		kept = append(kept, x)
	}
	if len(kept) == 0 {
		return nil
	}
	return storage.NewListSeries(rs.lset, kept)
}

func (q *referenceQuerier) LabelValues(context.Context, string, *storage.LabelHints, ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	return nil, nil, nil
}

func (q *referenceQuerier) LabelNames(context.Context, *storage.LabelHints, ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	return nil, nil, nil
}

func (q *referenceQuerier) Close() error { return nil }

type referenceSet struct {
	series []storage.Series
	i      int
}

func (s *referenceSet) Next() bool                        { s.i++; return s.i < len(s.series) }
func (s *referenceSet) At() storage.Series                { return s.series[s.i] }
func (s *referenceSet) Err() error                        { return nil }
func (s *referenceSet) Warnings() annotations.Annotations { return nil }

// referenceSample is a float or a histogram sample. H and FH return copies, as
// Prometheus' chunk iterators do: the engine may change what it is given.
type referenceSample struct {
	t  int64
	f  float64
	h  *histogram.Histogram
	fh *histogram.FloatHistogram
}

func (x *referenceSample) T() int64   { return x.t }
func (x *referenceSample) F() float64 { return x.f }

func (x *referenceSample) H() *histogram.Histogram {
	if x.h == nil {
		return nil
	}
	return x.h.Copy()
}

func (x *referenceSample) FH() *histogram.FloatHistogram {
	switch {
	case x.h != nil:
		return x.h.ToFloat(nil)
	case x.fh != nil:
		return x.fh.Copy()
	}
	return nil
}

func (x *referenceSample) Type() chunkenc.ValueType {
	switch {
	case x.h != nil:
		return chunkenc.ValHistogram
	case x.fh != nil:
		return chunkenc.ValFloatHistogram
	}
	return chunkenc.ValFloat
}

func (x *referenceSample) Copy() chunks.Sample {
	c := *x
	c.h, c.fh = x.H(), nil
	if x.fh != nil {
		c.fh = x.fh.Copy()
	}
	return &c
}
