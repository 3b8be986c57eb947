package promstore

import (
	"math"
	"testing"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
)

// intHist is an integer histogram of schema 0 with two positive buckets (deltas).
func intHist(hint tablets.CounterResetHint, count uint64) *tablets.Histogram {
	return &tablets.Histogram{
		CounterResetHint: hint,
		Schema:           0,
		ZeroThreshold:    0.001,
		ZeroCount:        1,
		Count:            count,
		Sum:              float64(count) * 1.5,
		PositiveSpans:    []tablets.HistogramSpan{{Offset: 1, Length: 2}},
		PositiveBuckets:  []int64{int64(count - 1), -int64(count - 1)},
	}
}

// customHist is a float histogram of custom buckets (NHCB).
func customHist(hint tablets.CounterResetHint) *tablets.FloatHistogram {
	return &tablets.FloatHistogram{
		CounterResetHint: hint,
		Schema:           tablets.CustomBucketsSchema,
		Count:            7.5,
		Sum:              3.25,
		PositiveSpans:    []tablets.HistogramSpan{{Offset: 0, Length: 2}, {Offset: 1, Length: 1}},
		PositiveBuckets:  []float64{1, 2.5, 4},
		CustomValues:     []float64{0.1, 0.5, 1},
	}
}

// got is a sample as an iterator gives it.
type got struct {
	t  int64
	vt chunkenc.ValueType
	f  uint64 // float bits
	h  *histogram.Histogram
	fh *histogram.FloatHistogram
}

// readAll reads an iterator with Next, taking each sample with the accessor of its type
// and, for histograms, AtFloatHistogram too (which must agree).
func readAll(t *testing.T, it chunkenc.Iterator) []got {
	t.Helper()
	var out []got
	for vt := it.Next(); vt != chunkenc.ValNone; vt = it.Next() {
		out = append(out, at(t, it, vt))
	}
	require.NoError(t, it.Err())
	return out
}

func at(t *testing.T, it chunkenc.Iterator, vt chunkenc.ValueType) got {
	t.Helper()
	g := got{t: it.AtT(), vt: vt}
	switch vt {
	case chunkenc.ValFloat:
		ts, v := it.At()
		require.Equal(t, g.t, ts)
		g.f = math.Float64bits(v)
	case chunkenc.ValHistogram:
		ts, h := it.AtHistogram(nil)
		require.Equal(t, g.t, ts)
		g.h = h
		_, fh := it.AtFloatHistogram(nil)
		want := h.ToFloat(nil)
		require.Equal(t, math.Float64bits(want.Sum), math.Float64bits(fh.Sum))
		want.Sum, fh.Sum = 0, 0 // NaN (a staleness marker) is not equal to itself
		require.Equal(t, want, fh, "AtFloatHistogram of an integer histogram")
	case chunkenc.ValFloatHistogram:
		ts, fh := it.AtFloatHistogram(nil)
		require.Equal(t, g.t, ts)
		g.fh = fh
	}
	return g
}

func TestMemSeriesHistograms(t *testing.T) {
	stale := intHist(tablets.UnknownCounterReset, 0)
	stale.Sum = math.Float64frombits(staleNaN)
	stale.PositiveSpans, stale.PositiveBuckets, stale.ZeroCount = nil, nil, 0
	hists := []struct {
		t int64
		p tablets.HistogramPoint
	}{
		{10, tablets.HistogramPoint{H: intHist(tablets.CounterReset, 3)}},
		{20, tablets.HistogramPoint{H: intHist(tablets.NotCounterReset, 99)}}, // replaced below
		{20, tablets.HistogramPoint{H: intHist(tablets.NotCounterReset, 5)}},
		{15, tablets.HistogramPoint{H: intHist(tablets.GaugeType, 5)}}, // out of order: dropped
		{30, tablets.HistogramPoint{FH: customHist(tablets.GaugeType)}},
		{40, tablets.HistogramPoint{H: stale}},
		{60, tablets.HistogramPoint{FH: customHist(tablets.UnknownCounterReset)}},
	}
	s := &memSeries{}
	for _, h := range hists {
		require.NoError(t, s.appendHistogram(h.t, h.p))
	}
	require.Error(t, s.appendHistogram(70, tablets.HistogramPoint{}))
	for _, f := range []struct {
		t int64
		v float64
	}{{5, 1}, {20, 2}, {25, 3}, {25, 4}, {40, 5}, {50, math.Float64frombits(staleNaN)}, {80, 6}} {
		s.append(f.t, f.v)
	}
	s.finish()
	require.Equal(t, 9, s.samples())
	require.Equal(t, 5, s.nh)

	want := []got{
		{t: 5, vt: chunkenc.ValFloat, f: math.Float64bits(1)},
		{t: 10, vt: chunkenc.ValHistogram, h: &histogram.Histogram{CounterResetHint: histogram.CounterReset, ZeroThreshold: 0.001, ZeroCount: 1, Count: 3, Sum: 4.5,
			PositiveSpans: []histogram.Span{{Offset: 1, Length: 2}}, PositiveBuckets: []int64{2, -2}}},
		// The float of 20 ms loses to the histogram of 20 ms, the later of two.
		{t: 20, vt: chunkenc.ValHistogram, h: &histogram.Histogram{CounterResetHint: histogram.NotCounterReset, ZeroThreshold: 0.001, ZeroCount: 1, Count: 5, Sum: 7.5,
			PositiveSpans: []histogram.Span{{Offset: 1, Length: 2}}, PositiveBuckets: []int64{4, -4}}},
		{t: 25, vt: chunkenc.ValFloat, f: math.Float64bits(4)},
		{t: 30, vt: chunkenc.ValFloatHistogram, fh: &histogram.FloatHistogram{CounterResetHint: histogram.GaugeType, Schema: histogram.CustomBucketsSchema, Count: 7.5, Sum: 3.25,
			PositiveSpans: []histogram.Span{{Offset: 0, Length: 2}, {Offset: 1, Length: 1}}, PositiveBuckets: []float64{1, 2.5, 4}, CustomValues: []float64{0.1, 0.5, 1}}},
		{t: 40, vt: chunkenc.ValHistogram, h: &histogram.Histogram{ZeroThreshold: 0.001, Sum: math.Float64frombits(staleNaN)}},
		{t: 50, vt: chunkenc.ValFloat, f: staleNaN},
		{t: 60, vt: chunkenc.ValFloatHistogram, fh: &histogram.FloatHistogram{Schema: histogram.CustomBucketsSchema, Count: 7.5, Sum: 3.25,
			PositiveSpans: []histogram.Span{{Offset: 0, Length: 2}, {Offset: 1, Length: 1}}, PositiveBuckets: []float64{1, 2.5, 4}, CustomValues: []float64{0.1, 0.5, 1}}},
		{t: 80, vt: chunkenc.ValFloat, f: math.Float64bits(6)},
	}
	all := readAll(t, s.Iterator(nil))
	// NaN sums compare by bits: check the stale marker apart.
	require.Equal(t, uint64(staleNaN), math.Float64bits(all[5].h.Sum))
	all[5].h.Sum, want[5].h.Sum = 0, 0
	require.Equal(t, want, all)

	// The caller may change what it is given: a second pass still reads the series as read.
	again := readAll(t, s.Iterator(nil))
	again[5].h.Sum = 0
	require.Equal(t, want, again)

	// Histograms are copied into what the caller hands over.
	it := s.Iterator(nil)
	require.Equal(t, chunkenc.ValHistogram, it.Seek(6))
	var h histogram.Histogram
	ts, hp := it.AtHistogram(&h)
	require.Equal(t, int64(10), ts)
	require.Same(t, &h, hp)
	require.Equal(t, want[1].h, &h)
	var fh histogram.FloatHistogram
	_, fhp := it.AtFloatHistogram(&fh)
	require.Same(t, &fh, fhp)
	require.Equal(t, want[1].h.ToFloat(nil), &fh)

	// Seek: to the first sample at or after t, no move backwards, types as they come.
	require.Equal(t, chunkenc.ValHistogram, it.Seek(10), "already there")
	require.Equal(t, int64(10), it.AtT())
	require.Equal(t, chunkenc.ValFloat, it.Seek(21))
	require.Equal(t, int64(25), it.AtT())
	require.Equal(t, chunkenc.ValFloat, it.Seek(1), "never backwards")
	require.Equal(t, int64(25), it.AtT())
	require.Equal(t, chunkenc.ValFloatHistogram, it.Seek(26))
	require.Equal(t, want[4], at(t, it, chunkenc.ValFloatHistogram))
	require.Equal(t, chunkenc.ValFloatHistogram, it.Seek(60))
	require.Equal(t, chunkenc.ValFloat, it.Next())
	require.Equal(t, int64(80), it.AtT())
	require.Equal(t, chunkenc.ValNone, it.Next())
	require.Equal(t, chunkenc.ValNone, s.Iterator(nil).Seek(81))
}

// A series of histograms only, and one whose floats all come after them.
func TestMemSeriesHistogramsOnly(t *testing.T) {
	s := &memSeries{}
	require.NoError(t, s.appendHistogram(1, tablets.HistogramPoint{H: intHist(tablets.UnknownCounterReset, 2)}))
	s.finish()
	require.Equal(t, 1, s.samples())
	g := readAll(t, s.Iterator(nil))
	require.Len(t, g, 1)
	require.Equal(t, chunkenc.ValHistogram, g[0].vt)

	s = &memSeries{}
	require.NoError(t, s.appendHistogram(1, tablets.HistogramPoint{H: intHist(tablets.UnknownCounterReset, 2)}))
	s.append(2, 1)
	s.append(3, 2)
	s.finish()
	g = readAll(t, s.Iterator(nil))
	require.Equal(t, []int64{1, 2, 3}, []int64{g[0].t, g[1].t, g[2].t})
	require.Equal(t, []chunkenc.ValueType{chunkenc.ValHistogram, chunkenc.ValFloat, chunkenc.ValFloat}, []chunkenc.ValueType{g[0].vt, g[1].vt, g[2].vt})
}
