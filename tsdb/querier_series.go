package tsdb

import (
	"errors"
	"slices"
	"sync/atomic"

	"github.com/seed71701133/tablets/internal/chunkenc"
)

// Sample is a sample of a Series: a float (H and FH nil), or a native histogram (H with
// integer counts, or FH).
type Sample struct {
	T  int64 // Unix milliseconds
	F  float64
	H  *Histogram
	FH *FloatHistogram
}

// IsHistogram reports whether the sample is a histogram.
func (s Sample) IsHistogram() bool { return s.H != nil || s.FH != nil }

// Series is a series a Select found, with its samples in the range, read whole.
//
// Floats are held plain (16 bytes a sample) while the Select's plainBudget lasts, encoded
// beyond it (the raw chunks' codec, internal/chunkenc: a few bytes a sample, float bits
// unchanged), chunkPoints at a time. A series with histogram samples holds all
// its samples in one list by time instead, as read: a decoded histogram weighs far more
// than a float anyway.
type Series struct {
	Series string // the series key
	Labels Labels
	rank   int // of its entry: a Select in key order sorts its series back by it

	chunks [][]byte // of floats: chunkPoints each, or what was plain when the budget ran out
	times  []uint64 // floats not in a chunk: the latest
	values []float64
	// plain, if not nil, lets floats stay out of chunks while it lasts: encoding them as
	// they come and decoding them as they are iterated was half the CPU of a refreshed
	// panel from the caches.
	plain *plainBudget
	n     int // floats, the pending one included

	pending bool // a float waits for the next: a later one in its millisecond replaces it
	pendT   int64
	pendV   float64

	hists []Sample // histogram samples as read, times strictly ascending
	mixed []Sample // after finish, of a series with histograms: all its samples
	nh    int      // histogram samples, of mixed
}

// chunkPoints is how many floats a chunk of a Series holds: a chunk is decoded whole as its
// samples are iterated.
const chunkPoints = 256

// appendFloat adds a float sample, times ascending. Two in one millisecond (a layout finer
// than a millisecond) give one sample, the later's value; an earlier one is left out. Call
// finish after the last.
func (s *Series) appendFloat(t int64, v float64) {
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

// appendRun adds n floats encoded as chunk (internal/chunkenc: a raw.FloatRun, shared with
// the raw cache and never changed), all after the floats appended before it and before
// those appended after it. The floats held plain go into a chunk first: the chunks hold
// the earlier floats.
func (s *Series) appendRun(chunk []byte, n int) {
	s.flush()
	s.cut()
	s.chunks = append(s.chunks, chunk)
	s.n += n
}

// reserve makes room for n more floats: a read about to add a series' staged points says
// how many (a refresh's are mostly staged), so that its slices grow once, not a doubling
// at a time (5% of the soak server's allocations).
func (s *Series) reserve(n int) {
	if s.plain == nil || s.plain.left.Load() < int64(n) {
		n = min(n, chunkPoints) // cut into chunks as they come: the slices hold one
	}
	if n > 0 {
		s.times = slices.Grow(s.times, n)
		s.values = slices.Grow(s.values, n)
	}
}

// flush moves the pending float into the chunks.
func (s *Series) flush() {
	if !s.pending {
		return
	}
	s.pending = false
	s.times = append(s.times, uint64(s.pendT))
	s.values = append(s.values, s.pendV)
	if len(s.times)%chunkPoints == 0 && !s.plain.take(chunkPoints) {
		s.cut()
	}
}

// plainBudget is how many float samples the Series of one Select may hold plain (16 bytes
// each) rather than encoded: the first come keep theirs plain, the others are encoded
// chunkPoints at a time. Safe for concurrent use (a Select's units read at once).
type plainBudget struct{ left atomic.Int64 }

// plainSelectSamples is the plain budget of a Select: 1M samples, 16 MB. A refreshed
// dashboard panel of a thousand series over an hour is a third of it.
const plainSelectSamples = 1 << 20

func newPlainBudget(samples int64) *plainBudget {
	b := &plainBudget{}
	b.left.Store(samples)
	return b
}

// take takes n samples of the budget, reporting whether it had them (a nil budget never
// has).
func (b *plainBudget) take(n int) bool {
	if b == nil {
		return false
	}
	if b.left.Add(-int64(n)) >= 0 {
		return true
	}
	b.left.Add(int64(n))
	return false
}

// cut encodes the floats not yet in a chunk.
func (s *Series) cut() {
	if len(s.times) == 0 {
		return
	}
	s.chunks = append(s.chunks, chunkenc.Append(nil, s.times, s.values))
	s.times, s.values = s.times[:0], s.values[:0]
}

var errNoHistogram = errors.New("a histogram sample with neither an integer nor a float histogram")

// appendHistogram adds a histogram sample, times ascending, before finish. Two in one
// millisecond give one sample, the later; an earlier one is left out.
func (s *Series) appendHistogram(t int64, p HistogramPoint) error {
	if p.H == nil && p.FH == nil {
		return errNoHistogram
	}
	hs := Sample{T: t, H: p.H, FH: p.FH}
	if n := len(s.hists); n > 0 && t <= s.hists[n-1].T {
		if t == s.hists[n-1].T {
			s.hists[n-1] = hs
		}
		return nil
	}
	s.hists = append(s.hists, hs)
	return nil
}

// finish ends the appends: it encodes the last floats and, if the series has histogram
// samples, merges them with the floats into one list by time. Where a float and a
// histogram share a millisecond, the histogram is kept: the series is a histogram series at
// that time (Prometheus itself writes a staleness marker of a histogram series as a
// histogram).
func (s *Series) finish() {
	s.flush()
	// The last floats stay plain if the budget has them; else all go into a chunk (the
	// plain ones are always the latest).
	if tail := len(s.times) % chunkPoints; tail > 0 && !s.plain.take(tail) {
		s.cut()
	}
	if len(s.times) == 0 {
		s.times, s.values = nil, nil
	}
	if len(s.hists) == 0 {
		return
	}
	out := make([]Sample, 0, s.n+len(s.hists))
	hists := s.hists
	it := s.floatIterator()
	for it.Next() {
		f := it.At()
		for len(hists) > 0 && hists[0].T < f.T {
			out, hists = append(out, hists[0]), hists[1:]
		}
		if len(hists) > 0 && hists[0].T == f.T {
			continue // the histogram wins
		}
		out = append(out, f)
	}
	out = append(out, hists...)
	s.nh = len(s.hists)
	s.n = len(out) - s.nh // the floats kept
	s.mixed, s.hists, s.chunks = out, nil, nil
	s.times, s.values = nil, nil
}

// keepLast drops every sample but the last, after finish (SelectHints.Latest). A series
// whose last chunk does not decode keeps its samples: its iterator gives the error.
func (s *Series) keepLast() {
	switch {
	case s.mixed != nil:
		if n := len(s.mixed); n > 1 {
			last := s.mixed[n-1]
			s.mixed, s.n, s.nh = []Sample{last}, 1, 0
			if last.IsHistogram() {
				s.n, s.nh = 0, 1
			}
		}
	case len(s.times) > 0: // the plain floats are the latest
		n := len(s.times)
		s.chunks, s.times, s.values, s.n = nil, s.times[n-1:], s.values[n-1:], 1
	case len(s.chunks) > 0:
		it := &SampleIterator{chunks: s.chunks[len(s.chunks)-1:], i: -1}
		var last Sample
		for it.Next() {
			last = it.At()
		}
		if it.Err() != nil {
			return
		}
		s.chunks, s.times, s.values, s.n = nil, []uint64{uint64(last.T)}, []float64{last.F}, 1
	}
}

// Len is the number of samples of the series, and of them the histogram ones.
func (s *Series) Len() (samples, histograms int) {
	if s.mixed != nil {
		return len(s.mixed), s.nh
	}
	return s.n + len(s.hists), len(s.hists)
}

// Iterator returns an iterator over the samples, times ascending. Histograms are the
// series' own: a caller that changes one copies it first.
func (s *Series) Iterator() *SampleIterator {
	if s.mixed != nil {
		return &SampleIterator{list: s.mixed, i: -1}
	}
	return s.floatIterator()
}

func (s *Series) floatIterator() *SampleIterator {
	return &SampleIterator{chunks: s.chunks, times: s.times, values: s.values, i: -1}
}

// SampleIterator iterates over a Series' samples. Call Next before the first At.
type SampleIterator struct {
	list []Sample // of a series with histograms

	chunks [][]byte // of a series of floats: decoded one at a time into curT and curF
	times  []uint64 // of a series of floats: its plain ones, after the chunks
	values []float64
	plain  bool // At reads times and values at i
	// curT and curF are the decoded chunk: floats only, so that the garbage collector
	// does not scan them, made once an iterator at its largest chunk's size (grown a
	// doubling at a time, they were 4% of a soak's first minute, its first loads' series in
	// chunks).
	curT []int64
	curF []float64
	i    int // of the sample At returns, in list or curT and curF
	err  error
}

// Next moves to the next sample, reporting whether there is one.
func (it *SampleIterator) Next() bool {
	if it.err != nil {
		return false
	}
	if it.list != nil {
		if it.i+1 >= len(it.list) {
			it.i = len(it.list)
			return false
		}
		it.i++
		return true
	}
	if it.plain {
		if it.i+1 >= len(it.times) {
			it.i = len(it.times)
			return false
		}
		it.i++
		return true
	}
	if it.i+1 < len(it.curT) {
		it.i++
		return true
	}
	for len(it.chunks) > 0 {
		if it.curT == nil {
			// As large as the largest chunk: chunkPoints for the Series' own, a raw cache
			// segment (128) for the runs it took whole.
			n := 0
			for _, c := range it.chunks {
				if k, _, _, err := chunkenc.Header(c); err == nil {
					n = max(n, k)
				}
			}
			it.curT, it.curF = make([]int64, 0, n), make([]float64, 0, n)
		}
		it.curT, it.curF, it.i = it.curT[:0], it.curF[:0], 0
		err := chunkenc.Decode(it.chunks[0], func(t uint64, v float64) {
			it.curT = append(it.curT, int64(t))
			it.curF = append(it.curF, v)
		})
		it.chunks = it.chunks[1:]
		if err != nil {
			it.err = err // chunks this process encoded: a bug
			return false
		}
		if len(it.curT) > 0 {
			return true
		}
	}
	it.curT, it.curF = nil, nil
	if len(it.times) > 0 {
		it.plain, it.i = true, 0
		return true
	}
	it.i = 0
	return false
}

// At is the current sample.
func (it *SampleIterator) At() Sample {
	if it.list != nil {
		return it.list[it.i]
	}
	if it.plain {
		return Sample{T: int64(it.times[it.i]), F: it.values[it.i]}
	}
	return Sample{T: it.curT[it.i], F: it.curF[it.i]}
}

// Err is the error that stopped the iteration, if any.
func (it *SampleIterator) Err() error { return it.err }
