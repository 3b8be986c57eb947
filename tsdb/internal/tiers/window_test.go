package tiers

import (
	"bytes"
	"errors"
	"iter"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/internal/sketchenc"
)

// staleNaN is Prometheus' staleness marker.
var staleNaN = math.Float64frombits(0x7ff0000000000002)

var t0 = time.Date(2025, 1, 2, 3, 0, 0, 0, time.UTC)

// testQs are the quantiles the tests check.
var testQs = []float64{0, 0.01, 0.5, 0.9, 0.99, 1}

// distributions draw the values of the tests.
var distributions = []struct {
	name string
	draw func(r *rand.Rand) float64
}{
	{"uniform", func(r *rand.Rand) float64 { return r.Float64() }},
	{"normal", func(r *rand.Rand) float64 { return 100 + 15*r.NormFloat64() }},
	{"standard normal", func(r *rand.Rand) float64 { return r.NormFloat64() }},
	{"lognormal", func(r *rand.Rand) float64 { return math.Exp(2 * r.NormFloat64()) }},
	{"negative", func(r *rand.Rand) float64 { return -1000 * math.Exp(r.NormFloat64()) }},
	{"mixed signs", func(r *rand.Rand) float64 { return (2*r.Float64() - 1) * math.Pow(10, 20*r.Float64()-10) }},
	{"zeros", func(r *rand.Rand) float64 { return 0 }},
	{"half zeros", func(r *rand.Rand) float64 { return float64(r.IntN(2)) * r.NormFloat64() }},
	{"constant", func(r *rand.Rand) float64 { return 42.5 }},
	{"negative constant", func(r *rand.Rand) float64 { return -0.25 }},
	{"integers", func(r *rand.Rand) float64 { return float64(r.IntN(100) - 20) }},
	{"huge range", func(r *rand.Rand) float64 {
		return float64(2*r.IntN(2)-1) * math.Pow(10, 600*r.Float64()-300)
	}},
	{"near MaxFloat64", func(r *rand.Rand) float64 {
		return float64(2*r.IntN(2)-1) * math.MaxFloat64 * (1 - r.Float64()/4)
	}},
}

// point is a point of a test.
type point struct {
	t time.Time
	v float64
}

// drawPoints returns n points of distinct times, in time order.
func drawPoints(r *rand.Rand, n int, draw func(*rand.Rand) float64) []point {
	ps := make([]point, n)
	for i := range ps {
		ps[i] = point{t0.Add(time.Duration(i) * time.Second), draw(r)}
	}
	return ps
}

func build(accuracy float64, ps []point) *Window {
	w := newWindow(t0, accuracy)
	for _, p := range ps {
		w.add(p.t, p.v)
	}
	return w
}

// exactQuantile is the value of rank floor(q*(n-1)) of the sorted values.
func exactQuantile(sorted []float64, q float64) float64 {
	return sorted[int(math.Floor(q*float64(len(sorted)-1)))]
}

// withinAccuracy reports whether got is within relative accuracy a of want (with some room
// for the rounding of math.Log and math.Exp).
func withinAccuracy(got, want, a float64) bool {
	if got == want {
		return true
	}
	return math.Abs(got-want) <= a*math.Abs(want)*(1+1e-9)
}

func sortedValues(ps []point) []float64 {
	vs := make([]float64, 0, len(ps))
	for _, p := range ps {
		if !math.IsNaN(p.v) {
			vs = append(vs, p.v)
		}
	}
	slices.Sort(vs)
	return vs
}

func TestWindowQuantileAccuracy(t *testing.T) {
	for _, accuracy := range []float64{0, 0.001, 0.01, 0.05} {
		a := accuracy
		if a == 0 {
			a = DefaultAccuracy
		}
		for di, d := range distributions {
			for _, n := range []int{1, 2, 3, 10, 10000} {
				r := rand.New(rand.NewPCG(uint64(di), uint64(n)))
				ps := drawPoints(r, n, d.draw)
				r.Shuffle(len(ps), func(i, j int) { ps[i], ps[j] = ps[j], ps[i] })
				w := build(accuracy, ps)
				sorted := sortedValues(ps)
				if w.Count != uint64(n) || w.Min != sorted[0] || w.Max != sorted[n-1] {
					t.Fatalf("%s, %d points: Count %d Min %g Max %g, want %d %g %g", d.name, n, w.Count, w.Min, w.Max, n, sorted[0], sorted[n-1])
				}
				for _, q := range testQs {
					want := exactQuantile(sorted, q)
					if got := w.Quantile(q); !withinAccuracy(got, want, a) {
						t.Errorf("accuracy %g, %s, %d points: Quantile(%g) = %g, want %g within %g", a, d.name, n, q, got, want, a)
					}
				}
				// Every rank, on the smaller windows.
				if n <= 10 {
					for i := range n {
						q := float64(i) / float64(n-1)
						if n == 1 {
							q = 0.5
						}
						if got, want := w.Quantile(q), exactQuantile(sorted, q); !withinAccuracy(got, want, a) {
							t.Errorf("accuracy %g, %s, %d points: Quantile(%g) = %g, want %g", a, d.name, n, q, got, want)
						}
					}
				}
			}
		}
	}
}

// TestWindowQuantileMonotone checks that quantiles do not decrease with q.
func TestWindowQuantileMonotone(t *testing.T) {
	for di, d := range distributions {
		r := rand.New(rand.NewPCG(7, uint64(di)))
		w := build(0, drawPoints(r, 1000, d.draw))
		prev := math.Inf(-1)
		for i := range 1001 {
			q := float64(i) / 1000
			v := w.Quantile(q)
			if v < prev || math.IsNaN(v) {
				t.Fatalf("%s: Quantile(%g) = %g after %g", d.name, q, v, prev)
			}
			prev = v
		}
	}
}

func TestWindowQuantileOutOfRange(t *testing.T) {
	w := build(0, []point{{t0, 1}, {t0.Add(time.Second), 2}})
	for _, q := range []float64{-0.01, 1.01, math.NaN(), math.Inf(1), math.Inf(-1), -1} {
		if got := w.Quantile(q); !math.IsNaN(got) {
			t.Errorf("Quantile(%g) = %g, want NaN", q, got)
		}
	}
}

func TestWindowEmpty(t *testing.T) {
	for name, w := range map[string]*Window{
		"zero":       {},
		"new":        newWindow(t0, 0),
		"NaNs only":  build(0, []point{{t0, math.NaN()}, {t0, staleNaN}}),
		"new 5%":     newWindow(t0, 0.05),
		"merged":     func() *Window { w := newWindow(t0, 0); _ = w.merge(Window{}); _ = w.merge(*newWindow(t0, 0)); return w }(),
		"zero, merg": func() *Window { w := &Window{}; _ = w.merge(*newWindow(t0, 0.05)); return w }(),
	} {
		if w.Count != 0 || w.Sum != 0 || w.Min != 0 || w.Max != 0 || w.First != 0 || w.Last != 0 {
			t.Errorf("%s: %+v, want all 0", name, *w)
		}
		if m := w.Mean(); !math.IsNaN(m) {
			t.Errorf("%s: Mean() = %g, want NaN", name, m)
		}
		for _, q := range testQs {
			if v := w.Quantile(q); !math.IsNaN(v) {
				t.Errorf("%s: Quantile(%g) = %g, want NaN", name, q, v)
			}
		}
		s, err := sketchenc.Decode(w.appendSketch(nil), w.accuracy())
		if err != nil || s.Count() != 0 {
			t.Errorf("%s: decoding its sketch: %v, count %v", name, err, s)
		}
	}
	// A merge of an empty window of another accuracy fails all the same.
	w := newWindow(t0, 0.01)
	if err := w.merge(*newWindow(t0, 0.02)); !errors.Is(err, errAccuracy) {
		t.Errorf("merging an empty window of another accuracy: %v", err)
	}
}

func TestWindowMean(t *testing.T) {
	for _, tc := range []struct {
		vs   []float64
		want float64
	}{
		{[]float64{1}, 1},
		{[]float64{1, 2, 3, 4}, 2.5},
		{[]float64{-1, 1}, 0},
		{[]float64{0.5, math.NaN(), 1.5, staleNaN}, 1},
		{[]float64{1, math.Inf(1)}, math.Inf(1)},
		{[]float64{1, math.Inf(-1)}, math.Inf(-1)},
		{[]float64{math.Inf(1), math.Inf(-1)}, math.NaN()},
	} {
		w := newWindow(t0, 0)
		for i, v := range tc.vs {
			w.add(t0.Add(time.Duration(i)), v)
		}
		if got := w.Mean(); got != tc.want && !(math.IsNaN(got) && math.IsNaN(tc.want)) {
			t.Errorf("Mean of %v = %g, want %g", tc.vs, got, tc.want)
		}
	}
}

func TestWindowFirstLast(t *testing.T) {
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	for _, tc := range []struct {
		name        string
		ps          []point
		first, last float64
	}{
		{"one", []point{{at(5), 1}}, 1, 1},
		{"in order", []point{{at(1), 1}, {at(2), 2}, {at(3), 3}}, 1, 3},
		{"reversed", []point{{at(3), 3}, {at(2), 2}, {at(1), 1}}, 1, 3},
		{"shuffled", []point{{at(2), 2}, {at(3), 3}, {at(1), 1}, {at(0), -7}, {at(9), 4}, {at(4), 5}}, -7, 4},
		{"same time: the later add", []point{{at(1), 1}, {at(1), 2}, {at(1), 3}}, 3, 3},
		{"ties at both ends", []point{{at(5), 1}, {at(1), 2}, {at(9), 3}, {at(1), 4}, {at(9), 5}, {at(5), 6}}, 4, 5},
		{"NaN ignored", []point{{at(1), 1}, {at(0), math.NaN()}, {at(2), 2}, {at(3), staleNaN}}, 1, 2},
		{"infinities", []point{{at(2), 0}, {at(1), math.Inf(-1)}, {at(3), math.Inf(1)}}, math.Inf(-1), math.Inf(1)},
	} {
		w := build(0, tc.ps)
		if w.First != tc.first || w.Last != tc.last {
			t.Errorf("%s: First, Last = %g, %g, want %g, %g", tc.name, w.First, w.Last, tc.first, tc.last)
		}
	}
}

// equalWindows reports how got differs from want: Count, Min, Max, First, Last, their times
// and the sketch exactly, Sum within sumTol.
func windowDiff(got, want *Window, sumTol float64) string {
	switch {
	case got.Count != want.Count:
		return "Count"
	case got.Min != want.Min || got.Max != want.Max:
		return "Min/Max"
	case got.First != want.First || got.Last != want.Last:
		return "First/Last"
	case !got.firstT.Equal(want.firstT) || !got.lastT.Equal(want.lastT):
		return "times of First/Last"
	case math.Abs(got.Sum-want.Sum) > sumTol:
		return "Sum"
	case !bytes.Equal(got.appendSketch(nil), want.appendSketch(nil)): // the encoding of the bins is canonical
		return "bins"
	case got.sk.Count() != got.Count:
		return "the sketch's count"
	}
	return ""
}

func TestWindowMergeExact(t *testing.T) {
	for di, d := range distributions {
		for trial := range 10 {
			r := rand.New(rand.NewPCG(uint64(di), uint64(trial)))
			n := 1 + r.IntN(3000)
			ps := drawPoints(r, n, d.draw)
			if trial%3 == 0 { // some NaNs and infinities too
				for range 1 + r.IntN(5) {
					ps[r.IntN(n)].v = []float64{math.NaN(), staleNaN, math.Inf(1), math.Inf(-1)}[r.IntN(4)]
				}
			}
			r.Shuffle(n, func(i, j int) { ps[i], ps[j] = ps[j], ps[i] })
			whole := build(0, ps)

			// A random split, parts of random sizes (some empty).
			parts := make([]*Window, 1+r.IntN(6))
			for i := range parts {
				parts[i] = newWindow(t0, 0)
			}
			for _, p := range ps {
				parts[r.IntN(len(parts))].add(p.t, p.v)
			}
			var sumTol float64
			for _, p := range ps {
				if !math.IsNaN(p.v) && !math.IsInf(p.v, 0) {
					sumTol += math.Abs(p.v) * 1e-12
				}
			}

			var quantiles []float64
			for range 3 { // merged in three orders
				merged := newWindow(t0, 0)
				for _, i := range r.Perm(len(parts)) {
					if err := merged.merge(*parts[i]); err != nil {
						t.Fatal(err)
					}
				}
				if diff := windowDiff(merged, whole, sumTol); diff != "" {
					t.Fatalf("%s, trial %d: the merge of %d parts differs in %s", d.name, trial, len(parts), diff)
				}
				var qs []float64
				for i := range 101 {
					qs = append(qs, merged.Quantile(float64(i)/100))
				}
				if quantiles == nil {
					quantiles = qs
				} else if !slices.EqualFunc(qs, quantiles, func(a, b float64) bool { return a == b || math.IsNaN(a) && math.IsNaN(b) }) {
					t.Fatalf("%s, trial %d: quantiles depend on the order of merges", d.name, trial)
				}
				for i, q := range qs {
					if want := whole.Quantile(float64(i) / 100); q != want && !(math.IsNaN(q) && math.IsNaN(want)) {
						t.Fatalf("%s, trial %d: merged Quantile(%g) = %g, whole %g", d.name, trial, float64(i)/100, q, want)
					}
				}
			}
		}
	}
}

// TestWindowMergeTies: with points of equal times, merging the parts of a split in the order of
// the adds gives the First and Last that adding all gives.
func TestWindowMergeTies(t *testing.T) {
	for trial := range 50 {
		r := rand.New(rand.NewPCG(99, uint64(trial)))
		ps := make([]point, 1+r.IntN(40))
		for i := range ps {
			ps[i] = point{t0.Add(time.Duration(r.IntN(4)) * time.Second), float64(i)}
		}
		whole := build(0, ps)
		merged := &Window{}
		for i := 0; i < len(ps); {
			j := i + r.IntN(len(ps)-i+1)
			if err := merged.merge(*build(0, ps[i:j])); err != nil {
				t.Fatal(err)
			}
			i = j
		}
		if diff := windowDiff(merged, whole, 0); diff != "" {
			t.Fatalf("trial %d: differs in %s", trial, diff)
		}
	}
}

func TestWindowMergeAccuracy(t *testing.T) {
	w := build(0.01, []point{{t0, 1}, {t0.Add(time.Second), 2}})
	before := *w
	before.sk = w.sk.Clone()
	o := build(0.02, []point{{t0.Add(2 * time.Second), 3}})
	if err := w.merge(*o); !errors.Is(err, errAccuracy) {
		t.Fatalf("merging accuracies 1%% and 2%%: %v", err)
	}
	if diff := windowDiff(w, &before, 0); diff != "" {
		t.Errorf("a failed merge changed the window's %s", diff)
	}
	// The zero window takes the accuracy of what it merges.
	z := &Window{}
	if err := z.merge(*o); err != nil || z.accuracy() != o.accuracy() || z.Quantile(0.5) != 3 {
		t.Errorf("merging into the zero window: %v, accuracy %g", err, z.accuracy())
	}
	if err := z.merge(*w); !errors.Is(err, errAccuracy) {
		t.Errorf("merging 1%% into 2%%: %v", err)
	}
	// A window merged into itself counts its points twice.
	w.merge(*w)
	if w.Count != 4 || w.sk.Count() != 4 || w.Sum != 6 {
		t.Errorf("self merge: Count %d, sketch %d, Sum %g", w.Count, w.sk.Count(), w.Sum)
	}
}

func TestWindowNaNInf(t *testing.T) {
	inf := math.Inf(1)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	w := newWindow(t0, 0)
	for i, v := range []float64{staleNaN, 1, 2, math.NaN(), 3, inf, -inf, inf, 4, staleNaN} {
		w.add(at(i), v)
	}
	if w.Count != 7 || w.Min != -inf || w.Max != inf || w.First != 1 || w.Last != 4 || !math.IsNaN(w.Sum) {
		t.Errorf("Count %d, Min %g, Max %g, First %g, Last %g, Sum %g", w.Count, w.Min, w.Max, w.First, w.Last, w.Sum)
	}
	// Sorted: -Inf 1 2 3 4 +Inf +Inf.
	for _, tc := range []struct{ q, want float64 }{
		{0, -inf}, {0.1, -inf}, {1.0 / 6, 1}, {0.5, 3}, {4.0 / 6, 4}, {5.0 / 6, inf}, {1, inf},
	} {
		if got := w.Quantile(tc.q); !withinAccuracy(got, tc.want, DefaultAccuracy) {
			t.Errorf("Quantile(%g) = %g, want %g", tc.q, got, tc.want)
		}
	}
	// Infinities survive the encoding.
	s, err := sketchenc.Decode(w.appendSketch(nil), 0)
	if err != nil {
		t.Fatal(err)
	}
	d := *w
	d.sk = s
	for _, q := range testQs {
		if d.Quantile(q) != w.Quantile(q) {
			t.Errorf("decoded: Quantile(%g) = %g, want %g", q, d.Quantile(q), w.Quantile(q))
		}
	}

	// Huge and subnormal finite magnitudes.
	big := math.MaxFloat64
	w = build(0, []point{{at(0), big}, {at(1), big / 1.005}, {at(2), -big}, {at(3), 1}})
	if got := w.Quantile(2.0 / 3); !withinAccuracy(got, big/1.005, DefaultAccuracy) {
		t.Errorf("huge: Quantile(2/3) = %g, want %g", got, big/1.005)
	}
	if w.Quantile(0) != -big || w.Quantile(1) != big {
		t.Errorf("huge: Min %g, Max %g", w.Quantile(0), w.Quantile(1))
	}
	tiny := 5e-324
	w = build(0, []point{{at(0), tiny}, {at(1), 2 * tiny}, {at(2), 3 * tiny}})
	if w.Quantile(0.5) != tiny || w.Quantile(1) != 3*tiny { // zeros in the sketch (sketchenc tests it), clamped to Min
		t.Errorf("subnormals: Quantile(0.5) %g", w.Quantile(0.5))
	}
}

func TestNewWindowAccuracy(t *testing.T) {
	for _, a := range []float64{0, 1e-6, 0.01, 0.5, 0.999} {
		if err := CheckAccuracy(a); err != nil {
			t.Errorf("CheckAccuracy(%g): %v", a, err)
		}
		w := newWindow(t0, a)
		if a == 0 {
			a = DefaultAccuracy
		}
		if math.Abs(w.accuracy()-a) > 1e-12 {
			t.Errorf("newWindow(%g): accuracy %g", a, w.accuracy())
		}
	}
	for _, a := range []float64{-0.01, 1e-7, 1, 2, math.NaN(), math.Inf(1)} {
		if CheckAccuracy(a) == nil {
			t.Errorf("CheckAccuracy(%g) accepts it", a)
		}
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("newWindow(%g) did not panic", a)
				}
			}()
			newWindow(t0, a)
		}()
	}
}

// The NaN rule is one (see tablets.Aggregation, "NaN"): a window and tablets.Downsample over
// the same points, NaNs and staleness markers among them, skip the same points and agree on
// Count, Sum, Min, Max, First and Last; a window of NaNs only is empty, and Downsample
// yields no bucket for it.
func TestWindowNaNRuleIsDownsamples(t *testing.T) {
	step := time.Minute
	for trial := range 50 {
		r := rand.New(rand.NewPCG(123, uint64(trial)))
		var pts []tablets.Point
		at := t0
		for range 1 + r.IntN(200) {
			at = at.Add(time.Duration(1+r.IntN(250)) * time.Millisecond) // distinct, ascending, under a minute
			v := r.NormFloat64()
			switch r.IntN(8) {
			case 0:
				v = math.NaN()
			case 1:
				v = staleNaN
			case 2:
				if trial%5 == 0 {
					v = math.Inf(2*r.IntN(2) - 1)
				}
			}
			if trial%7 == 0 { // some windows of NaNs only
				v = staleNaN
			}
			pts = append(pts, tablets.Point{Time: at, Value: v})
		}
		w := newWindow(t0, 0)
		for _, p := range pts {
			w.add(p.Time, p.Value)
		}
		for _, tc := range []struct {
			agg  tablets.Aggregation
			want float64
		}{
			{tablets.Count, float64(w.Count)}, {tablets.Sum, w.Sum}, {tablets.Min, w.Min}, {tablets.Max, w.Max},
			{tablets.First, w.First}, {tablets.Last, w.Last},
		} {
			var got []tablets.Point
			for p, err := range tablets.Downsample(seqOf(pts), step, tc.agg) {
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, p)
			}
			if w.Count == 0 {
				if len(got) != 0 {
					t.Fatalf("trial %d: NaNs only: Downsample yields %v", trial, got)
				}
				continue
			}
			if len(got) != 1 || math.Float64bits(got[0].Value) != math.Float64bits(tc.want) && !(math.IsNaN(got[0].Value) && math.IsNaN(tc.want)) {
				t.Fatalf("trial %d: Downsample %v gives %v, the window %g", trial, tc.agg, got, tc.want)
			}
		}
		// A window of NaNs only is not stored: its block has no window.
		b := &block{start: uint64(t0.Unix())}
		b.windows[0] = w
		e := entity.Entity{AllowStrings: true}
		if err := e.Decode(appendBlock(nil, "s", step, b)); err != nil {
			t.Fatal(err)
		}
		back, err := decodeBlock(&e, step, 0)
		if err != nil {
			t.Fatal(err)
		}
		if (back.windows[0] == nil) != (w.Count == 0) {
			t.Fatalf("trial %d: a window of %d points stored as %v", trial, w.Count, back.windows[0])
		}
	}
}

func seqOf(pts []tablets.Point) iter.Seq2[tablets.Point, error] {
	return func(yield func(tablets.Point, error) bool) {
		for _, p := range pts {
			if !yield(p, nil) {
				return
			}
		}
	}
}

// A window counts the NaN samples apart (not the staleness marker) and sums the values a
// smaller one follows, as PromQL's counter reset correction does; merged windows that
// follow each other add the reset between them; points out of order make it unknown.
func TestWindowResetsAndNaNs(t *testing.T) {
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	w := newWindow(t0, 0)
	for i, v := range []float64{5, 7, 2, math.NaN(), staleNaN, 3, 1, 1} {
		w.add(at(i), v)
	}
	if w.Count != 6 || w.NaNs != 1 || w.Resets != 7+3 || !w.ResetsKnown() {
		t.Fatalf("count %d, NaNs %d, resets %v (known %v); want 6, 1, 10", w.Count, w.NaNs, w.Resets, w.ResetsKnown())
	}
	if inc := w.Last - w.First + w.Resets; inc != 6 {
		t.Errorf("increase %v, want 6 (5→7, 0→2, 2→3, 0→1)", inc)
	}

	a, b := newWindow(t0, 0), newWindow(t0.Add(time.Minute), 0)
	a.add(at(0), 10)
	a.add(at(30), 4) // reset: 10
	b.add(at(60), 3) // reset from a's last: 4
	b.add(at(90), 8)
	b.add(at(91), math.NaN())
	m := newWindow(t0, 0)
	for _, x := range []*Window{a, b} {
		if err := m.merge(*x); err != nil {
			t.Fatal(err)
		}
	}
	if m.Resets != 14 || !m.ResetsKnown() || m.NaNs != 1 || m.Count != 4 {
		t.Errorf("merged: resets %v (known %v), NaNs %d, count %d; want 14, 1, 4", m.Resets, m.ResetsKnown(), m.NaNs, m.Count)
	}
	back := newWindow(t0, 0)
	for _, x := range []*Window{b, a} { // out of time order
		if err := back.merge(*x); err != nil {
			t.Fatal(err)
		}
	}
	if back.ResetsKnown() {
		t.Error("windows merged out of time order know their resets")
	}
	late := newWindow(t0, 0)
	late.add(at(10), 1)
	late.add(at(5), 2)
	if late.ResetsKnown() {
		t.Error("points added out of time order know their resets")
	}
}
