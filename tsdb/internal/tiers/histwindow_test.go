package tiers

import (
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/testkit/formatdoc"
)

var h0 = time.Date(2024, 5, 23, 0, 0, 0, 0, time.UTC) // a window start

// fh is a float histogram of schema with positive buckets by index.
func fh(hint tablets.CounterResetHint, schema int32, count, sum float64, pos map[int32]float64) *tablets.FloatHistogram {
	d := &dense{schema: schema, count: count, sum: sum, pos: pos}
	return d.floatHistogram(hint)
}

func at0(sec int, h *tablets.FloatHistogram) tablets.HistogramPoint {
	return tablets.HistogramPoint{Time: h0.Add(time.Duration(sec) * time.Second), FH: h}
}

// obs returns the observations of the window of samples, as its Window shows them.
func obs(t *testing.T, samples ...tablets.HistogramPoint) Window {
	t.Helper()
	var w Window
	w.setHistograms(histWindowOf(samples))
	return w
}

func wantHist(t *testing.T, got *tablets.FloatHistogram, want *tablets.FloatHistogram) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("histogram\n got %+v\nwant %+v", got, want)
	}
}

func TestHistWindowCounterIncrease(t *testing.T) {
	s1 := fh(0, 0, 5, 10, map[int32]float64{1: 2, 2: 3})
	s2 := fh(0, 0, 9, 20, map[int32]float64{1: 4, 2: 5})
	reset := fh(0, 0, 1, 1.5, map[int32]float64{1: 1}) // the count went down
	w := obs(t, at0(0, s1), at0(15, s2), at0(30, reset))
	// (s2 - s1) + reset: buckets 2+1 and 2, count 4+1, sum 10+1.5.
	wantHist(t, w.Histogram, fh(tablets.GaugeType, 0, 5, 11.5, map[int32]float64{1: 3, 2: 2}))
	if w.HistogramCount != 3 || w.FirstHistogram.FH != s1 || w.LastHistogram.FH != reset || w.HistogramConflict {
		t.Errorf("count %d, first %v, last %v, conflict %v", w.HistogramCount, w.FirstHistogram, w.LastHistogram, w.HistogramConflict)
	}

	// A bucket going down is a reset even when the count grows.
	down := fh(0, 0, 10, 30, map[int32]float64{1: 1, 2: 9})
	wantHist(t, obs(t, at0(0, s1), at0(15, down)).Histogram, withHint(down, tablets.GaugeType))
	// The hint CounterReset says so whatever the counts.
	hinted := fh(tablets.CounterReset, 0, 9, 20, map[int32]float64{1: 4, 2: 5})
	wantHist(t, obs(t, at0(0, s1), at0(15, hinted)).Histogram, fh(tablets.GaugeType, 0, 9, 20, map[int32]float64{1: 4, 2: 5}))
	// NotCounterReset is trusted, as Prometheus does: a bucket may go down.
	trusted := fh(tablets.NotCounterReset, 0, 10, 30, map[int32]float64{1: 1, 2: 9})
	wantHist(t, obs(t, at0(0, s1), at0(15, trusted)).Histogram, fh(tablets.GaugeType, 0, 5, 20, map[int32]float64{1: -1, 2: 6}))

	// One sample observed nothing: an empty histogram in its layout.
	one := obs(t, at0(0, s1))
	wantHist(t, one.Histogram, fh(tablets.GaugeType, 0, 0, 0, nil))
	if one.HistogramCount != 1 || !math.IsNaN(one.Quantile(0.5)) {
		t.Errorf("one sample: count %d, median %v", one.HistogramCount, one.Quantile(0.5))
	}
}

func withHint(h *tablets.FloatHistogram, hint tablets.CounterResetHint) *tablets.FloatHistogram {
	c := *h
	c.CounterResetHint = hint
	return &c
}

func TestHistWindowIntegerSamples(t *testing.T) {
	// Integer histograms hold deltas: buckets 2, 3 then 4, 5 over two spans.
	h1 := &tablets.Histogram{Schema: 0, Count: 5, Sum: 10, PositiveSpans: []tablets.HistogramSpan{{Offset: 1, Length: 1}, {Offset: 1, Length: 1}}, PositiveBuckets: []int64{2, 1}}
	h2 := &tablets.Histogram{Schema: 0, Count: 9, Sum: 20, PositiveSpans: []tablets.HistogramSpan{{Offset: 1, Length: 1}, {Offset: 1, Length: 1}}, PositiveBuckets: []int64{4, 1}}
	w := obs(t, tablets.HistogramPoint{Time: h0, H: h1}, tablets.HistogramPoint{Time: h0.Add(time.Second), H: h2})
	wantHist(t, w.Histogram, fh(tablets.GaugeType, 0, 4, 10, map[int32]float64{1: 2, 3: 2}))
	if w.LastHistogram.H != h2 {
		t.Errorf("last %+v, want the integer sample as written", w.LastHistogram)
	}
}

func TestHistWindowSchemaReduction(t *testing.T) {
	// Schema 1 then schema 0 (a smaller schema is no reset): the increase is at schema 0,
	// where schema 1's buckets 1, 2 are bucket 1 and 3, 4 are bucket 2.
	s1 := fh(0, 1, 4, 8, map[int32]float64{1: 1, 2: 1, 3: 1, 4: 1})
	s2 := fh(0, 0, 10, 20, map[int32]float64{1: 5, 2: 5})
	wantHist(t, obs(t, at0(0, s1), at0(10, s2)).Histogram, fh(tablets.GaugeType, 0, 6, 12, map[int32]float64{1: 3, 2: 3}))
	// A larger schema is a reset: the sample counts for itself.
	s3 := fh(0, 2, 11, 21, map[int32]float64{1: 11})
	wantHist(t, obs(t, at0(0, s2), at0(10, s3)).Histogram, withHint(s3, tablets.GaugeType))

	// Two series of schemas 1 and 0 add at schema 0.
	g1 := fh(tablets.GaugeType, 1, 4, 8, map[int32]float64{1: 1, 2: 1, 3: 1, 4: 1})
	g2 := fh(tablets.GaugeType, 0, 10, 20, map[int32]float64{1: 5, 2: 5})
	a, b := histWindowOf([]tablets.HistogramPoint{at0(0, g1)}), histWindowOf([]tablets.HistogramPoint{at0(0, g2)})
	a.join(b)
	var w Window
	w.setHistograms(a)
	wantHist(t, w.Histogram, fh(tablets.GaugeType, 0, 14, 28, map[int32]float64{1: 7, 2: 7}))
}

func TestHistWindowZeroThreshold(t *testing.T) {
	// Gauges of zero thresholds 0 and 1.5 (schema 0: bucket 1 is (1, 2]): the threshold
	// falls in bucket 1, populated, so it widens to 2, and bucket 1 joins the zero bucket.
	a := &tablets.FloatHistogram{CounterResetHint: tablets.GaugeType, Count: 4, Sum: 6, ZeroCount: 1,
		PositiveSpans: []tablets.HistogramSpan{{Offset: 1, Length: 2}}, PositiveBuckets: []float64{1, 2}}
	b := &tablets.FloatHistogram{CounterResetHint: tablets.GaugeType, Count: 3, Sum: 9, ZeroThreshold: 1.5, ZeroCount: 2,
		PositiveSpans: []tablets.HistogramSpan{{Offset: 3, Length: 1}}, PositiveBuckets: []float64{1}}
	w := obs(t, at0(0, a), at0(1, b))
	want := &tablets.FloatHistogram{CounterResetHint: tablets.GaugeType, Count: 7, Sum: 15, ZeroThreshold: 2, ZeroCount: 4,
		PositiveSpans: []tablets.HistogramSpan{{Offset: 2, Length: 2}}, PositiveBuckets: []float64{2, 1}}
	wantHist(t, w.Histogram, want)
}

func TestHistWindowCustomBuckets(t *testing.T) {
	bounds := []float64{1, 2, 4}
	c := func(hint tablets.CounterResetHint, count float64, bs []float64, pos map[int32]float64) *tablets.FloatHistogram {
		d := &dense{schema: tablets.CustomBucketsSchema, count: count, sum: count, pos: pos, custom: bs}
		return d.floatHistogram(hint)
	}
	s1 := c(0, 3, bounds, map[int32]float64{0: 1, 3: 2})
	s2 := c(0, 7, bounds, map[int32]float64{0: 2, 1: 1, 3: 4})
	wantHist(t, obs(t, at0(0, s1), at0(1, s2)).Histogram, c(tablets.GaugeType, 4, bounds, map[int32]float64{0: 1, 1: 1, 3: 2}))

	// New bounds are a reset; the window then holds increases of two layouts: a conflict.
	s3 := c(0, 8, []float64{1, 3}, map[int32]float64{0: 8})
	w := obs(t, at0(0, s1), at0(1, s2), at0(2, s3))
	if !w.HistogramConflict || w.Histogram != nil || w.HistogramCount != 3 || !math.IsNaN(w.Quantile(0.5)) {
		t.Errorf("conflict %v, histogram %v, count %d", w.HistogramConflict, w.Histogram, w.HistogramCount)
	}
	// The same bounds again after the change: the window of the new bounds alone is exact.
	s4 := c(0, 9, []float64{1, 3}, map[int32]float64{0: 8, 2: 1})
	wantHist(t, obs(t, at0(2, s3), at0(3, s4)).Histogram, c(tablets.GaugeType, 1, []float64{1, 3}, map[int32]float64{2: 1}))
	// Gauges of different bounds in two series conflict too; a counter with a gauge as well.
	g := histWindowOf([]tablets.HistogramPoint{at0(0, c(tablets.GaugeType, 1, bounds, map[int32]float64{0: 1}))})
	g.join(histWindowOf([]tablets.HistogramPoint{at0(0, c(tablets.GaugeType, 1, []float64{1, 3}, map[int32]float64{0: 1}))}))
	if g.kind != histConflict {
		t.Errorf("gauges of different bounds: kind %d", g.kind)
	}
	mixed := histWindowOf([]tablets.HistogramPoint{at0(0, s1)})
	mixed.join(histWindowOf([]tablets.HistogramPoint{at0(0, c(tablets.GaugeType, 1, bounds, map[int32]float64{0: 1}))}))
	if mixed.kind != histConflict {
		t.Errorf("counter and gauge: kind %d", mixed.kind)
	}
}

func TestHistWindowGaugeAndStale(t *testing.T) {
	g1 := fh(tablets.GaugeType, 0, 3, 3, map[int32]float64{1: 3})
	g2 := fh(tablets.GaugeType, 0, 1, 1.5, map[int32]float64{1: 1})
	stale := fh(tablets.GaugeType, 0, 0, math.Float64frombits(StaleBits), nil)
	w := obs(t, at0(0, g1), at0(5, stale), at0(10, g2))
	wantHist(t, w.Histogram, fh(tablets.GaugeType, 0, 4, 4.5, map[int32]float64{1: 4}))
	if w.HistogramCount != 2 || w.LastHistogram.FH != g2 {
		t.Errorf("stale marker counted: count %d, last %+v", w.HistogramCount, w.LastHistogram)
	}
	// A counter across a staleness marker: the increase from the sample before it.
	c1 := fh(0, 0, 3, 3, map[int32]float64{1: 3})
	c2 := fh(0, 0, 5, 6, map[int32]float64{1: 5})
	staleC := &tablets.FloatHistogram{Sum: math.Float64frombits(StaleBits)}
	wantHist(t, obs(t, at0(0, c1), at0(5, staleC), at0(10, c2)).Histogram, fh(tablets.GaugeType, 0, 2, 3, map[int32]float64{1: 2}))
	if histWindowOf([]tablets.HistogramPoint{at0(5, staleC)}) != nil {
		t.Error("a window of a staleness marker alone")
	}
}

// randomCounter returns n samples of a counter histogram with random increments, resets,
// schema changes and a zero threshold that grows.
func randomCounter(r *rand.Rand, n int) []tablets.HistogramPoint {
	var out []tablets.HistogramPoint
	schema, thr := int32(3), 0.0
	cur := map[int32]float64{}
	var zero, sum float64
	for i := range n {
		switch r.IntN(10) {
		case 0: // reset
			cur, zero, sum = map[int32]float64{}, 0, 0
		case 1: // a smaller schema
			if schema > -1 {
				d := &dense{schema: schema, pos: cur, neg: map[int32]float64{}}
				d.reduce(schema - 1)
				cur, schema = d.pos, schema-1
			}
		}
		for range r.IntN(4) {
			cur[int32(r.IntN(12)-2)] += float64(r.IntN(5))
		}
		zero += float64(r.IntN(2))
		var count float64
		for _, c := range cur {
			count += c
		}
		sum += float64(r.IntN(100))
		d := &dense{schema: schema, zeroThreshold: thr, zeroCount: zero, count: count + zero, sum: sum, pos: cur}
		out = append(out, tablets.HistogramPoint{Time: h0.Add(time.Duration(i) * 7 * time.Second), FH: d.floatHistogram(0)})
	}
	return out
}

// Chaining windows of consecutive samples gives the window of all the samples: the merge of
// finer windows into coarser is exact.
func TestHistWindowChainIsExact(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		samples := randomCounter(r, 2+r.IntN(30))
		whole := histWindowOf(samples)
		var pieces []*histWindow
		for len(samples) > 0 {
			n := 1 + r.IntN(len(samples))
			pieces = append(pieces, histWindowOf(samples[:n]))
			samples = samples[n:]
		}
		r.Shuffle(len(pieces), func(i, j int) { pieces[i], pieces[j] = pieces[j], pieces[i] })
		var got, want Window
		got.setHistograms(histPieces(pieces))
		want.setHistograms(whole)
		if !reflect.DeepEqual(got.Histogram, want.Histogram) || got.HistogramCount != want.HistogramCount {
			t.Fatalf("chained %+v\n   whole %+v", got.Histogram, want.Histogram)
		}
	}
}

func TestHistogramQuantile(t *testing.T) {
	// Custom bounds 1, 2, 4: 10 observations in (1, 2], 10 in (2, 4].
	custom := &tablets.FloatHistogram{Schema: tablets.CustomBucketsSchema, Count: 20, Sum: 50, CustomValues: []float64{1, 2, 4},
		PositiveSpans: []tablets.HistogramSpan{{Offset: 1, Length: 2}}, PositiveBuckets: []float64{10, 10}}
	// Exponential schema 0: 4 observations in (1, 2], 4 in (2, 4]; 2 in the zero bucket of
	// threshold 0.5, and no negative bucket, so the zero bucket is [0, 0.5].
	exp := &tablets.FloatHistogram{Schema: 0, Count: 10, Sum: 25, ZeroThreshold: 0.5, ZeroCount: 2,
		PositiveSpans: []tablets.HistogramSpan{{Offset: 1, Length: 2}}, PositiveBuckets: []float64{4, 4}}
	// Two NaN observations (Sum NaN, Count past the buckets'): the rank counts from the
	// bottom whatever q, and a rank past the buckets is NaN.
	nan := &tablets.FloatHistogram{Schema: 0, Count: 12, Sum: math.NaN(), ZeroThreshold: 0.5, ZeroCount: 2,
		PositiveSpans: []tablets.HistogramSpan{{Offset: 1, Length: 2}}, PositiveBuckets: []float64{4, 4}}
	neg := &tablets.FloatHistogram{Schema: 0, Count: 4, Sum: -6,
		NegativeSpans: []tablets.HistogramSpan{{Offset: 1, Length: 2}}, NegativeBuckets: []float64{2, 2}}
	for _, tc := range []struct {
		q    float64
		h    *tablets.FloatHistogram
		want float64
	}{
		{0.25, custom, 1.5},                          // rank 5 of 10 in (1, 2]: linear
		{0.5, custom, 2},                             // from the top: rank 10 ends (2, 4] at its lower bound
		{0.75, custom, 3},                            // rank 5 from the top in (2, 4]
		{0.1, exp, 0.25},                             // rank 1 of 2 in the zero bucket [0, 0.5]
		{0.4, exp, math.Sqrt2},                       // rank 2 of 4 in (1, 2]: halfway on a log scale
		{0.8, exp, 2 * math.Sqrt2},                   // from the top: rank 2 of 4 in (2, 4]
		{1, exp, 4},                                  // the top bucket's upper bound
		{0.8, nan, math.Exp2(1.9)},                   // rank 9.6: 3.6 of 4 into (2, 4]
		{0.95, nan, math.NaN()},                      // rank 11.4 of 10 in buckets
		{0.25, neg, -2 * math.Sqrt2},                 // rank 1 of 2 in [-4, -2): mirrored
		{-0.1, exp, math.Inf(-1)},                    // out of range, as Prometheus
		{1.1, exp, math.Inf(1)},                      //
		{0.5, &tablets.FloatHistogram{}, math.NaN()}, // empty
	} {
		got := HistogramQuantile(tc.q, tc.h)
		if !(math.Abs(got-tc.want) < 1e-12 || math.IsNaN(got) && math.IsNaN(tc.want) || got == tc.want) {
			t.Errorf("HistogramQuantile(%v, %+v) = %v, want %v", tc.q, tc.h, got, tc.want)
		}
	}

	// A window of only histogram samples answers from its histogram, a mixed one not at all.
	w := Window{HistogramCount: 2, Histogram: custom}
	if got := w.Quantile(0.25); got != 1.5 {
		t.Errorf("histogram window's quantile %v", got)
	}
	w.add(h0, 3)
	if got := w.Quantile(0.25); !math.IsNaN(got) || w.FloatQuantile(0.5) != 3 || HistogramQuantile(0.25, w.Histogram) != 1.5 {
		t.Errorf("mixed window: Quantile %v, FloatQuantile %v", got, w.FloatQuantile(0.5))
	}
}

func TestHistWindowEncoding(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	step := time.Minute
	for range 50 {
		var samples []tablets.HistogramPoint
		for i, p := range randomCounter(r, 1+r.IntN(8)) {
			p.Time = h0.Add(time.Duration(i)*7*time.Second + time.Duration(r.IntN(1000))*time.Millisecond)
			samples = append(samples, p)
		}
		w := histWindowOf(samples)
		enc := appendHistWindow(nil, w, h0)
		got, err := decodeHistWindow(enc, h0, step)
		if err != nil {
			t.Fatal(err)
		}
		var a, b Window
		a.setHistograms(w)
		b.setHistograms(got)
		if !reflect.DeepEqual(a.Histogram, b.Histogram) || a.HistogramCount != b.HistogramCount ||
			!a.FirstHistogram.Time.Equal(b.FirstHistogram.Time) || !a.LastHistogram.Time.Equal(b.LastHistogram.Time) ||
			!reflect.DeepEqual(a.LastHistogram.FH, b.LastHistogram.FH) {
			t.Fatalf("decoded %+v\n  wrote %+v", b, a)
		}
		// Every strict prefix is an error, never a panic.
		for n := range len(enc) {
			if _, err := decodeHistWindow(enc[:n], h0, step); err == nil {
				t.Fatalf("prefix of %d of %d bytes decoded", n, len(enc))
			}
		}
		// A window outside the step is rejected.
		if len(samples) > 1 {
			if _, err := decodeHistWindow(enc, h0, time.Second); err == nil {
				t.Fatal("samples past the window's end decoded")
			}
		}
	}
}

func TestHistWindowTooLarge(t *testing.T) {
	pos := map[int32]float64{}
	for i := range int32(6000) { // far more buckets than a window stores
		pos[i*2] = float64(i + 1)
	}
	g := fh(tablets.GaugeType, 0, 1, 1, pos)
	w := histWindowOf([]tablets.HistogramPoint{at0(0, g), at0(1, g)})
	enc := appendHistWindow(nil, w, h0)
	got, err := decodeHistWindow(enc, h0, time.Minute)
	if err != nil || got.kind != histTooLarge || got.count != 2 || len(enc) != 3 {
		t.Fatalf("kind %d count %d (%d bytes), %v", got.kind, got.count, len(enc), err)
	}
}

func FuzzDecodeHistWindow(f *testing.F) {
	s1 := fh(0, 0, 5, 10, map[int32]float64{1: 2, 2: 3})
	s2 := fh(0, 0, 9, 20, map[int32]float64{1: 4, 2: 5})
	f.Add(appendHistWindow(nil, histWindowOf([]tablets.HistogramPoint{at0(0, s1), at0(15, s2)}), h0))
	f.Add(appendHistWindow(nil, histWindowOf([]tablets.HistogramPoint{at0(3, s1)}), h0))
	f.Add([]byte{1, 3, 2})
	f.Fuzz(func(t *testing.T, b []byte) {
		w, err := decodeHistWindow(b, h0, time.Minute)
		if err != nil {
			return
		}
		// What decodes re-encodes to what decodes, and merges and answers quantiles
		// without panicking.
		if _, err := decodeHistWindow(appendHistWindow(nil, w, h0), h0, time.Minute); err != nil {
			t.Fatalf("re-encoded: %v", err)
		}
		if w.kind != histTooLarge {
			c := *w
			c.follow(w)
			var out Window
			out.setHistograms(&c)
			out.Quantile(0.5)
		}
	})
}

// The worked example of docs/format.md, "Histogram windows".
func TestHistWindowFormatDoc(t *testing.T) {
	ws := time.Date(2024, 5, 23, 0, 2, 0, 0, time.UTC)
	h1 := &tablets.Histogram{Count: 2, Sum: 3, PositiveSpans: []tablets.HistogramSpan{{Offset: 1, Length: 1}}, PositiveBuckets: []int64{2}}
	h2 := &tablets.Histogram{Count: 4, Sum: 7.5, PositiveSpans: []tablets.HistogramSpan{{Offset: 1, Length: 2}}, PositiveBuckets: []int64{3, -2}}
	w := histWindowOf([]tablets.HistogramPoint{{Time: ws.Add(time.Second), H: h1}, {Time: ws.Add(31 * time.Second), H: h2}})
	enc := appendHistWindow(nil, w, ws)
	if want := formatdoc.Hex(t, "hist-window"); string(enc) != string(want) {
		t.Errorf("histogram window %x, the document %x", enc, want)
	}
	got, err := decodeHistWindow(enc, ws, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var out Window
	out.setHistograms(got)
	wantHist(t, out.Histogram, fh(tablets.GaugeType, 0, 2, 4.5, map[int32]float64{1: 1, 2: 1}))
}

// Histograms no write accepts (a NaN zero threshold, a schema out of range) still add up
// without a hang or a panic.
func TestHistWindowInvalidInputs(t *testing.T) {
	a := &tablets.FloatHistogram{CounterResetHint: tablets.GaugeType, ZeroThreshold: math.NaN(), Count: 1, ZeroCount: 1}
	b := fh(tablets.GaugeType, 0, 2, 2, map[int32]float64{1: 2})
	c := fh(tablets.GaugeType, 40, 2, 2, map[int32]float64{1 << 20: 2})
	var w Window
	w.setHistograms(histWindowOf([]tablets.HistogramPoint{at0(0, a), at0(1, b), at0(2, c)}))
	if w.HistogramCount != 3 {
		t.Errorf("count %d", w.HistogramCount)
	}
	_ = w.Quantile(0.5)
}
