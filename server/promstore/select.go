package promstore

import (
	"context"
	"fmt"
	"iter"
	"sync"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/util/annotations"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/server/internal/engineselect"
	"github.com/seed71701133/tablets/server/internal/resolution"
	"github.com/seed71701133/tablets/tsdb"
)

// Select returns the series matching every matcher with their samples in the range (see
// the package documentation), sorted by labels whatever sortSeries says: tsdb's Querier
// reads them (tsdb.Querier.Select), and this converts matchers, hints, labels and samples.
// hints.Limit bounds the series returned; hints.ShardCount and ShardIndex select a shard
// by labels.StableHash; hints.Func "series" returns labels only, reading no sample. In a
// context of the engine's evaluation (engineselect), hints of Step and Range 0 return each
// series' latest sample only (tsdb.SelectHints.Latest).
// Matchers that all match "" (a selector of every series) give an error wrapping
// tablets.ErrInvalidMatcher, before any request. Reading goes on in the background ahead
// of Next: read the set to its end, or cancel ctx or Close the Querier.
func (qr *Querier) Select(ctx context.Context, _ bool, hints *storage.SelectHints, matchers ...*labels.Matcher) storage.SeriesSet {
	if !selective(matchers) {
		return storage.ErrSeriesSet(fmt.Errorf("promstore: %w: %w", tablets.ErrInvalidMatcher, errNotSelective))
	}
	ms, err := MatchersToTSDB(matchers)
	if err != nil {
		return storage.ErrSeriesSet(err)
	}
	mint, maxt := qr.mint, qr.maxt
	if hints != nil {
		mint, maxt = hints.Start, hints.End
	}
	from, to, ok := timeRange(mint, maxt)
	if !ok {
		return storage.EmptySeriesSet()
	}
	th := &tsdb.SelectHints{LookbackDelta: qr.q.opts.LookbackDelta, MaxResolution: resolution.From(ctx)}
	if hints != nil {
		th.Step = time.Duration(hints.Step) * time.Millisecond
		th.Range = time.Duration(hints.Range) * time.Millisecond
		th.Func = hints.Func
		th.Limit = hints.Limit
		// The engine evaluates an instant selector of an instant query once, at End: each
		// series' latest sample is all it reads (engineselect).
		th.Latest = engineselect.Is(ctx) && hints.Step == 0 && hints.Range == 0 && hints.Func != "series"
		if hints.ShardCount > 0 {
			count, index := hints.ShardCount, hints.ShardIndex
			th.Keep = func(ls tsdb.Labels) bool { return labels.StableHash(LabelsFromTSDB(ls))%count == index }
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(qr.ctx, cancel)
	done := func() { stop(); cancel() }
	next, end := iter.Pull2(qr.q.q.Querier(from, to).Select(ctx, th, ms...))
	set := &seriesSet{next: next, done: func() { end(); done() }, resolveResets: engineselect.Is(ctx) && resolvingPays(hints)}
	qr.mu.Lock()
	defer qr.mu.Unlock()
	if qr.ctx.Err() != nil { // closed already
		set.stop()
		return storage.ErrSeriesSet(qr.ctx.Err())
	}
	qr.sets = append(qr.sets, set)
	return set
}

// seriesSet hands out the series tsdb's Select yields, each converted as it is taken.
// Reading it to its end, or Closing its Querier, stops the Select (a pulled iterator not
// stopped would stay suspended for good).
type seriesSet struct {
	mu   sync.Mutex
	next func() (*tsdb.Series, error, bool)
	done func() // stops what is still being read
	at   storage.Series
	err  error
	over bool
	// resolveResets: the engine's Select of a function resolvesResets has (memSeries.resolveResets).
	resolveResets bool
}

// stop ends the Select, unless it ended.
func (s *seriesSet) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.over {
		s.over = true
		s.done()
	}
}

func (s *seriesSet) Next() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.over {
		return false
	}
	ts, err, ok := s.next()
	if !ok || err != nil {
		s.err, s.over = err, true
		s.done()
		return false
	}
	if _, hists := ts.Len(); hists == 0 {
		// Floats only: the engine iterates tsdb's own encoding, instead of this encoding them
		// again into Prometheus' chunks (a third of the CPU of a refreshed instant query
		// over 1,000 series of an hour, from the caches).
		s.at = floatSeries{lset: LabelsFromTSDB(ts.Labels), ts: ts}
		return true
	}
	m, err := fromTSDB(ts)
	if err != nil {
		s.err, s.over = err, true
		s.done()
		return false
	}
	if s.resolveResets {
		m.resolveResets()
	}
	s.at = m
	return true
}

// floatSeries is a series of floats only as tsdb read it: its samples stay in tsdb's
// encoding (internal/chunkenc: float bits unchanged, times strictly ascending, one a
// millisecond) until the engine iterates them, one series at a time.
type floatSeries struct {
	lset labels.Labels
	ts   *tsdb.Series
}

func (s floatSeries) Labels() labels.Labels { return s.lset }

// Iterator decodes the samples into a list, into the one of it when it is a floatIterator
// (the engine hands back the iterator of the series before: one list for all).
func (s floatSeries) Iterator(it chunkenc.Iterator) chunkenc.Iterator {
	f, ok := it.(*floatIterator)
	if !ok {
		f = &floatIterator{}
	}
	f.list = f.list[:0]
	samples := s.ts.Iterator()
	for samples.Next() {
		at := samples.At()
		f.list = append(f.list, floatSample{t: at.T, f: at.F})
	}
	if err := samples.Err(); err != nil { // chunks tsdb encoded: a bug
		return errIterator{chunkenc.NewNopIterator(), err}
	}
	f.Iterator = storage.NewListSeriesIterator(f.list)
	return f
}

// floatIterator is Prometheus' iterator over a list of samples (its Seek and the rest),
// over a list it keeps for the next series.
type floatIterator struct {
	chunkenc.Iterator
	list floatList
}

// errIterator is an iterator with no sample that reports an error.
type errIterator struct {
	chunkenc.Iterator // a NopIterator
	err               error
}

func (e errIterator) Err() error { return e.err }

// floatList is a list of float samples as storage.Samples.
type floatList []floatSample

// Get hands out a pointer into the list (exact.go's floatSample), which allocates nothing.
func (l floatList) Get(i int) chunks.Sample { return &l[i] }
func (l floatList) Len() int                { return len(l) }

func (s *seriesSet) At() storage.Series                { return s.at }
func (s *seriesSet) Err() error                        { return s.err }
func (s *seriesSet) Warnings() annotations.Annotations { return nil }

// fromTSDB converts a series tsdb read: its labels, and its samples into Prometheus' XOR
// chunks (floats) or one list (a series with histograms).
func fromTSDB(ts *tsdb.Series) (*memSeries, error) {
	m := &memSeries{lset: LabelsFromTSDB(ts.Labels)}
	it := ts.Iterator()
	for it.Next() {
		s := it.At()
		if !s.IsHistogram() {
			m.append(s.T, s.F)
			continue
		}
		if err := m.appendHistogram(s.T, tablets.HistogramPoint{H: s.H, FH: s.FH}); err != nil {
			return nil, fmt.Errorf("promstore: series %s: %w", ts.Series, err)
		}
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("promstore: series %s: %w", ts.Series, err)
	}
	m.finish()
	return m, nil
}

// memSeries is a series and its samples, read whole. Floats are in Prometheus' XOR
// (Gorilla) chunks: lossless (float bits unchanged), a few bytes a sample, and their
// iterator is Prometheus' own. A series with histogram samples has them, and its floats,
// in one list by time instead (see histograms.go).
type memSeries struct {
	lset   labels.Labels
	chunks []*chunkenc.XORChunk
	app    chunkenc.Appender
	n      int // float samples, the pending one included

	pending bool // a sample waits for the next: a later one in its millisecond replaces it
	pendT   int64
	pendV   float64

	hists []mixedSample // histogram samples as read, times strictly ascending
	mixed []mixedSample // after finish, for a series with histograms: all its samples
	nh    int           // histogram samples, of mixed
}

// maxChunkSamples keeps a chunk's count (16 bits) from overflowing.
const maxChunkSamples = 1 << 15

// append adds a float sample, times ascending. Two points in one millisecond (a layout
// finer than Prometheus' milliseconds) give one sample, the later's value: Prometheus needs
// times strictly ascending. Call flush after the last (finish, if the series may have
// histograms).
func (s *memSeries) append(t int64, v float64) {
	if s.pending {
		if t <= s.pendT {
			if t == s.pendT {
				s.pendV = v
			}
			return
		}
		s.flush()
	}
	s.pending, s.pendT, s.pendV = true, t, v
	s.n++
}

// flush appends the pending sample to the chunks.
func (s *memSeries) flush() {
	if !s.pending {
		return
	}
	s.pending = false
	if len(s.chunks) == 0 || s.chunks[len(s.chunks)-1].NumSamples() >= maxChunkSamples {
		c := chunkenc.NewXORChunk()
		app, err := c.Appender()
		if err != nil {
			panic(err) // a new chunk always has an appender
		}
		s.chunks, s.app = append(s.chunks, c), app
	}
	s.app.Append(s.pendT, s.pendV)
}

func (s *memSeries) Labels() labels.Labels { return s.lset }

func (s *memSeries) Iterator(it chunkenc.Iterator) chunkenc.Iterator {
	if s.mixed != nil {
		return newMixedIterator(s.mixed)
	}
	return s.floatIterator(it)
}

// floatIterator iterates over the float samples.
func (s *memSeries) floatIterator(it chunkenc.Iterator) chunkenc.Iterator {
	switch len(s.chunks) {
	case 0:
		return chunkenc.NewNopIterator()
	case 1:
		return s.chunks[0].Iterator(it)
	}
	its := make([]chunkenc.Iterator, len(s.chunks))
	for i, c := range s.chunks {
		its[i] = c.Iterator(nil)
	}
	return storage.ChainSampleIteratorFromIterators(it, its)
}
