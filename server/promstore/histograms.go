package promstore

import (
	"errors"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/server/promconv"
)

// A series with histogram samples keeps all its samples in one list by time, iterated by
// Prometheus' own list iterator: Prometheus' histogram chunks would re-code them (a
// counter reset hint per chunk, spans widened to a chunk's layout) and its chain iterator
// forgets the counter reset hints where it switches between float and histogram samples;
// the samples must come back as stored (but for the hints resolveResets resolves).

// mixedSample is a float or histogram sample: h or fh set for a histogram.
type mixedSample struct {
	t  int64
	f  float64
	h  *histogram.Histogram
	fh *histogram.FloatHistogram
}

var _ chunks.Sample = (*mixedSample)(nil)

func (s *mixedSample) T() int64   { return s.t }
func (s *mixedSample) F() float64 { return s.f }

// H is the integer histogram itself (nil for another sample): copyingIterator copies it.
func (s *mixedSample) H() *histogram.Histogram { return s.h }

// FH is the float histogram itself, or the integer one converted (nil for a float).
func (s *mixedSample) FH() *histogram.FloatHistogram {
	if s.h != nil {
		return s.h.ToFloat(nil)
	}
	return s.fh
}

func (s *mixedSample) Type() chunkenc.ValueType {
	switch {
	case s.h != nil:
		return chunkenc.ValHistogram
	case s.fh != nil:
		return chunkenc.ValFloatHistogram
	}
	return chunkenc.ValFloat
}

func (s *mixedSample) Copy() chunks.Sample {
	c := &mixedSample{t: s.t, f: s.f}
	if s.h != nil {
		c.h = s.h.Copy()
	}
	if s.fh != nil {
		c.fh = s.fh.Copy()
	}
	return c
}

// mixedSamples are a series' samples for storage.NewListSeriesIterator.
type mixedSamples []mixedSample

func (m mixedSamples) Get(i int) chunks.Sample { return &m[i] }
func (m mixedSamples) Len() int                { return len(m) }

// copyingIterator is Prometheus' list iterator over mixedSamples, whose AtHistogram and
// AtFloatHistogram copy the sample into the histogram they are given (or a new one), as
// Prometheus' chunk iterators do: the caller may change it, the series stays as read.
type copyingIterator struct{ chunkenc.Iterator }

func newMixedIterator(m []mixedSample) chunkenc.Iterator {
	return copyingIterator{storage.NewListSeriesIterator(mixedSamples(m))}
}

func (c copyingIterator) AtHistogram(h *histogram.Histogram) (int64, *histogram.Histogram) {
	t, stored := c.Iterator.AtHistogram(nil)
	switch {
	case stored == nil:
		return t, nil
	case h == nil:
		return t, stored.Copy()
	}
	stored.CopyTo(h)
	return t, h
}

func (c copyingIterator) AtFloatHistogram(fh *histogram.FloatHistogram) (int64, *histogram.FloatHistogram) {
	if t, h := c.Iterator.AtHistogram(nil); h != nil {
		return t, h.ToFloat(fh) // a new histogram, or fh
	}
	t, stored := c.Iterator.AtFloatHistogram(nil)
	switch {
	case stored == nil:
		return t, nil
	case fh == nil:
		return t, stored.Copy()
	}
	stored.CopyTo(fh)
	return t, fh
}

// resolvesResets are the functions whose Selects, in the engine's evaluation, have their
// histogram samples' unknown counter reset hints resolved (resolveResets): those that
// compare each histogram sample of a window with the one before it (DetectReset) and give
// no sample's hint in their result (a gauge histogram, or a float). Another function's
// result may carry a hint on (sum_over_time adds the samples, last_over_time is one), and
// what a recording rule writes must be what it wrote before.
var resolvesResets = map[string]bool{"rate": true, "increase": true, "irate": true, "resets": true}

// resolvingPays says whether a Select of the engine's with hints has its histogram samples'
// hints resolved: of a function of resolvesResets whose windows overlap, each sample in
// two or more of them. Where each sample is in one window (an instant query's, a rule's,
// a step as long as the range) the engine compares each sample once, and resolving would
// compare it once more, and convert it.
func resolvingPays(hints *storage.SelectHints) bool {
	return hints != nil && resolvesResets[hints.Func] && hints.Step > 0 && hints.Range >= 2*hints.Step
}

// resolveResets sets the counter reset hint of each histogram sample stored as unknown to
// what comparing it with the histogram sample before it finds (FloatHistogram.DetectReset):
// CounterReset or NotCounterReset. A series' first sample, staleness markers, and hints
// stored otherwise (a gauge's) are left as they are. The engine evaluates rate over a 5m
// range at a 15s step by comparing each sample with the one before it in every window that
// holds both, twenty times, and half of a native histogram panel's CPU went into it; with
// the hint set, each comparison is a look at the hint, as over Prometheus' own chunks,
// whose iterators give NotCounterReset for every sample after a chunk's first. The
// engine's windows hold the series' histogram samples in order, staleness markers and
// floats left out, so each compares a sample with the one this compared it with: the
// answers are those of the stored hints.
func (s *memSeries) resolveResets() {
	var prev, cur *histogram.FloatHistogram
	havePrev := false
	for i := range s.mixed {
		m := &s.mixed[i]
		var hint *histogram.CounterResetHint
		switch {
		case m.h != nil:
			if value.IsStaleNaN(m.h.Sum) {
				continue
			}
			cur, hint = m.h.ToFloat(cur), &m.h.CounterResetHint
		case m.fh != nil:
			if value.IsStaleNaN(m.fh.Sum) {
				continue
			}
			if cur == nil {
				cur = &histogram.FloatHistogram{}
			}
			m.fh.CopyTo(cur) // a copy: cur is written over by the samples after
			hint = &m.fh.CounterResetHint
		default:
			continue // a float
		}
		if havePrev && *hint == histogram.UnknownCounterReset {
			if cur.DetectReset(prev) {
				*hint = histogram.CounterReset
			} else {
				*hint = histogram.NotCounterReset
			}
		}
		prev, cur, havePrev = cur, prev, true
	}
}

var errNoHistogram = errors.New("a histogram sample with neither an integer nor a float histogram")

// appendHistogram adds a histogram sample, times ascending, before finish. Two in one
// millisecond give one sample, the later; an earlier one is left out.
func (s *memSeries) appendHistogram(t int64, p tablets.HistogramPoint) error {
	hs := mixedSample{t: t}
	switch {
	case p.H != nil:
		hs.h = promconv.ToProm(p.H)
	case p.FH != nil:
		hs.fh = promconv.FloatToProm(p.FH)
	default:
		return errNoHistogram
	}
	if n := len(s.hists); n > 0 && t <= s.hists[n-1].t {
		if t == s.hists[n-1].t {
			s.hists[n-1] = hs
		}
		return nil
	}
	s.hists = append(s.hists, hs)
	return nil
}

// finish flushes the floats and, if the series has histogram samples, merges them with the
// floats into one list by time. Where a float and a histogram share a millisecond, the
// histogram is kept: the series is a histogram series at that time (Prometheus itself
// writes a staleness marker of a histogram series as a histogram).
func (s *memSeries) finish() {
	s.flush()
	if len(s.hists) == 0 {
		return
	}
	out := make([]mixedSample, 0, s.n+len(s.hists))
	hists := s.hists
	it := s.floatIterator(nil)
	for vt := it.Next(); vt == chunkenc.ValFloat; vt = it.Next() {
		t, v := it.At()
		for len(hists) > 0 && hists[0].t < t {
			out, hists = append(out, hists[0]), hists[1:]
		}
		if len(hists) > 0 && hists[0].t == t {
			continue // the histogram wins
		}
		out = append(out, mixedSample{t: t, f: v})
	}
	out = append(out, hists...)
	s.nh = len(s.hists)
	s.n = len(out) - s.nh // the floats kept
	s.mixed, s.hists, s.chunks, s.app = out, nil, nil, nil
}

// samples is the number of samples of the series.
func (s *memSeries) samples() int {
	if s.mixed != nil {
		return len(s.mixed)
	}
	return s.n + len(s.hists)
}
