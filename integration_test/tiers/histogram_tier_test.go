package tiers

import (
	"context"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser/posrange"

	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/testkit/itest"
	"github.com/seed71701133/tablets/server/promconv"
	"github.com/seed71701133/tablets/tsdb"
)

// randomFloatHistogram returns a valid float histogram: exponential (schemas -4..8, zero
// bucket, both sides) or of custom bounds, sparse, with empty buckets here and there.
func randomFloatHistogram(r *rand.Rand) *tablets.FloatHistogram {
	h := &tablets.FloatHistogram{CounterResetHint: tablets.GaugeType}
	spans := func(n int, firstOffset int32) ([]tablets.HistogramSpan, []float64) {
		var sp []tablets.HistogramSpan
		var bs []float64
		for i := 0; i < n; {
			l := 1 + r.IntN(4)
			off := int32(r.IntN(3))
			if i == 0 {
				off = firstOffset
			}
			sp = append(sp, tablets.HistogramSpan{Offset: off, Length: uint32(l)})
			for range l {
				c := float64(r.IntN(20))
				if r.IntN(5) == 0 {
					c = 0
				}
				bs = append(bs, c)
				h.Count += c
			}
			i += l
		}
		return sp, bs
	}
	if r.IntN(4) == 0 {
		h.Schema = tablets.CustomBucketsSchema
		b := 0.0
		for range 3 + r.IntN(6) {
			b += 0.5 + r.Float64()*3
			h.CustomValues = append(h.CustomValues, b)
		}
		n := 1 + r.IntN(len(h.CustomValues)+1) // the last bucket is (last bound, +Inf]
		off := r.IntN(len(h.CustomValues) + 2 - n)
		h.PositiveSpans = []tablets.HistogramSpan{{Offset: int32(off), Length: uint32(n)}}
		for range n {
			c := float64(r.IntN(20))
			h.PositiveBuckets = append(h.PositiveBuckets, c)
			h.Count += c
		}
		h.Sum = h.Count * 2
		return h
	}
	h.Schema = int32(r.IntN(13)) - 4
	if r.IntN(2) == 0 {
		h.ZeroThreshold = []float64{1e-128, 0.001, 0.5}[r.IntN(3)]
		h.ZeroCount = float64(r.IntN(5))
		h.Count += h.ZeroCount
	}
	h.PositiveSpans, h.PositiveBuckets = spans(r.IntN(12), int32(r.IntN(20))-10)
	if r.IntN(2) == 0 {
		h.NegativeSpans, h.NegativeBuckets = spans(r.IntN(8), int32(r.IntN(20))-10)
	}
	h.Sum = h.Count
	return h
}

// tsdb.HistogramQuantile answers as Prometheus' histogram_quantile does, on every kind of
// native histogram.
func TestHistogramQuantileMatchesPrometheus(t *testing.T) {
	r := rand.New(rand.NewPCG(20, 26))
	qs := []float64{0, 0.001, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 1, -0.5, 1.5, math.NaN()}
	for range 3000 {
		h := randomFloatHistogram(r)
		if err := h.Validate(); err != nil {
			t.Fatalf("the test made a bad histogram: %v", err)
		}
		// Not a NaN Sum (NaN observations): there, at the pinned module, Prometheus'
		// HistogramQuantile interpolates in the last bucket instead of the one the rank falls
		// in (its loop looking for NaN observations overwrites the bucket); the unit tests
		// check tsdb's answer in that case.
		ph := promconv.FloatToProm(h)
		if err := ph.Validate(); err != nil {
			t.Fatalf("Prometheus rejects %+v: %v", ph, err)
		}
		mine := promconv.FloatFromProm(ph)
		for _, q := range qs {
			want, _ := promql.HistogramQuantile(q, ph, "h", posrange.PositionRange{})
			got := tsdb.HistogramQuantile(q, mine)
			if !(got == want || math.IsNaN(got) && math.IsNaN(want) || math.Abs(got-want) <= 1e-12*math.Abs(want)) {
				t.Fatalf("q %v of %v (%+v): %v, Prometheus %v", q, ph, *ph, got, want)
			}
		}
	}
}

// histSeries are the histogram samples written per series, as written.
type histSeries map[string][]tablets.HistogramPoint

var staleSum = math.Float64frombits(0x7ff0000000000002)

// counterGen makes the samples of a counter histogram: counts by bucket index that grow,
// reset, and change schema.
type counterGen struct {
	schema int32
	counts map[int32]int64
	zero   int64
	sum    float64
}

func (g *counterGen) next(r *rand.Rand) *tablets.Histogram {
	for range 1 + r.IntN(4) {
		g.counts[int32(r.IntN(16)-3)] += int64(1 + r.IntN(5))
	}
	g.zero += int64(r.IntN(2))
	g.sum += float64(r.IntN(50))
	return intHistogram(g.schema, g.zero, g.counts, g.sum)
}

// intHistogram is an integer histogram of the counts by index: one span from the lowest
// index to the highest, deltas.
func intHistogram(schema int32, zero int64, counts map[int32]int64, sum float64) *tablets.Histogram {
	h := &tablets.Histogram{Schema: schema, ZeroThreshold: 2.938735877055719e-39, ZeroCount: uint64(zero), Count: uint64(zero), Sum: sum}
	if len(counts) == 0 {
		return h
	}
	lo, hi := int32(math.MaxInt32), int32(math.MinInt32)
	for i := range counts {
		lo, hi = min(lo, i), max(hi, i)
	}
	h.PositiveSpans = []tablets.HistogramSpan{{Offset: lo, Length: uint32(hi - lo + 1)}}
	var prev int64
	for i := lo; i <= hi; i++ {
		h.PositiveBuckets = append(h.PositiveBuckets, counts[i]-prev)
		prev = counts[i]
		h.Count += uint64(counts[i])
	}
	return h
}

// customHistogram is a float histogram of custom bounds and counts, one a bucket.
func customHistogram(hint tablets.CounterResetHint, bounds, counts []float64, sum float64) *tablets.FloatHistogram {
	h := &tablets.FloatHistogram{CounterResetHint: hint, Schema: tablets.CustomBucketsSchema, CustomValues: bounds, Sum: sum,
		PositiveSpans: []tablets.HistogramSpan{{Length: uint32(len(counts))}}, PositiveBuckets: counts}
	for _, c := range counts {
		h.Count += c
	}
	return h
}

// makeHistSeries writes two days of samples every 30 s: h_exp (integer counters with a
// reset, a schema change and staleness markers), h_custom (float counters of custom
// bounds), h_bounds (custom bounds that change), h_gauge (gauge histograms), and mixed
// (float points the first day, histograms the second, both in one hour).
func makeHistSeries(r *rand.Rand, base time.Time) (histSeries, []tablets.Point) {
	out := histSeries{}
	n := 2 * 86400 / 30
	tm := func(i int) time.Time { return base.Add(time.Duration(i) * 30 * time.Second) }
	exp := &counterGen{schema: 3, counts: map[int32]int64{}}
	var custom, bounds []float64
	customBounds := []float64{0.1, 0.5, 1, 5}
	var gsum float64
	var mixed []tablets.Point
	mixedGen := &counterGen{schema: 0, counts: map[int32]int64{}}
	for i := range n {
		switch {
		case i == 1500: // a reset
			exp.counts, exp.zero, exp.sum = map[int32]int64{}, 0, 0
		case i == 3000: // a smaller schema: buckets merge pairwise
			merged := map[int32]int64{}
			for idx, c := range exp.counts {
				merged[((idx-1)>>1)+1] += c
			}
			exp.schema, exp.counts = 2, merged
		}
		h := exp.next(r)
		if i%97 == 50 {
			stale := *h
			stale.Sum = staleSum
			h = &stale
		}
		out["h_exp"] = append(out["h_exp"], tablets.HistogramPoint{Time: tm(i), H: h})

		if len(custom) == 0 {
			custom = make([]float64, len(customBounds)+1)
		}
		custom[r.IntN(len(custom))] += float64(1 + r.IntN(3))
		out["h_custom"] = append(out["h_custom"], tablets.HistogramPoint{Time: tm(i), FH: customHistogram(0, customBounds, slices.Clone(custom), float64(i))})

		bs := []float64{1, 2}
		if i >= 3000 {
			bs = []float64{1, 3}
		}
		if i == 0 || i == 3000 {
			bounds = make([]float64, 3)
		}
		bounds[r.IntN(3)]++
		out["h_bounds"] = append(out["h_bounds"], tablets.HistogramPoint{Time: tm(i), FH: customHistogram(0, bs, slices.Clone(bounds), float64(2*i))})

		g := []float64{float64(r.IntN(4)), float64(r.IntN(4)), float64(r.IntN(4))}
		gsum = float64(r.IntN(100))
		out["h_gauge"] = append(out["h_gauge"], tablets.HistogramPoint{Time: tm(i), FH: customHistogram(tablets.GaugeType, []float64{1, 2}, g, gsum)})

		if i < n/2+120 {
			mixed = append(mixed, tablets.Point{Time: tm(i), Value: float64(r.IntN(1000))})
		}
		if i >= n/2 {
			out["mixed"] = append(out["mixed"], tablets.HistogramPoint{Time: tm(i).Add(15 * time.Second), H: mixedGen.next(r)})
		}
	}
	return out, mixed
}

// modelHistWindow is a window computed from the raw samples with Prometheus' own histogram
// arithmetic.
type modelHistWindow struct {
	count       uint64
	obs         *histogram.FloatHistogram // nil: nothing observed
	conflict    bool
	first, last time.Time
	kind        int // 1 counter, 2 gauge
}

func promFloat(p tablets.HistogramPoint) *histogram.FloatHistogram {
	if p.H != nil {
		return promconv.ToProm(p.H).ToFloat(nil)
	}
	return promconv.FloatToProm(p.FH)
}

func isStale(p tablets.HistogramPoint) bool {
	if p.H != nil {
		return math.Float64bits(p.H.Sum) == math.Float64bits(staleSum)
	}
	return math.Float64bits(p.FH.Sum) == math.Float64bits(staleSum)
}

// modelHistWindows computes the windows of the named series in [from, to) at step: per
// series the increase of counters (Prometheus' DetectReset and Sub between consecutive
// samples) or the sum of gauges, then the series added up (Prometheus' Add).
func modelHistWindows(t *testing.T, all histSeries, names []string, from, to time.Time, step time.Duration) map[time.Time]*modelHistWindow {
	out := map[time.Time]*modelHistWindow{}
	for _, s := range names {
		mine := map[time.Time]*modelHistWindow{}
		prev := map[time.Time]*histogram.FloatHistogram{}
		for _, p := range all[s] {
			if p.Time.Before(from) || !p.Time.Before(to) || isStale(p) {
				continue
			}
			ws := time.Unix(0, 0).UTC().Add(p.Time.Sub(time.Unix(0, 0)) / step * step)
			w := mine[ws]
			kind := 1
			if (p.H != nil && p.H.CounterResetHint == tablets.GaugeType) || (p.FH != nil && p.FH.CounterResetHint == tablets.GaugeType) {
				kind = 2
			}
			if w == nil {
				w = &modelHistWindow{first: p.Time, kind: kind}
				mine[ws] = w
			}
			w.count++
			w.last = p.Time
			cur := promFloat(p)
			var add *histogram.FloatHistogram
			switch {
			case w.kind != kind:
				w.conflict = true
			case kind == 2:
				add = cur
			case prev[ws] != nil:
				if cur.DetectReset(prev[ws]) {
					add = cur
				} else {
					d, err := cur.Copy().Sub(prev[ws])
					require.NoError(t, err)
					add = d
				}
			}
			prev[ws] = cur
			modelAdd(w, add)
		}
		for ws, w := range mine {
			o := out[ws]
			if o == nil {
				out[ws] = w
				continue
			}
			o.count += w.count
			if w.first.Before(o.first) {
				o.first = w.first
			}
			if w.last.After(o.last) {
				o.last = w.last
			}
			if o.kind != w.kind || w.conflict {
				o.conflict = true
			}
			modelAdd(o, w.obs)
		}
	}
	return out
}

func modelAdd(w *modelHistWindow, h *histogram.FloatHistogram) {
	switch {
	case h == nil || w.conflict:
	case w.obs == nil:
		w.obs = h.Copy()
	default:
		sum, err := w.obs.Add(h)
		if err != nil {
			w.conflict, w.obs = true, nil
		} else {
			w.obs = sum
		}
	}
}

// nonZeroBuckets lists a histogram's buckets that hold a count, by side and index.
func nonZeroBuckets(h *histogram.FloatHistogram) map[[2]int32]float64 {
	out := map[[2]int32]float64{}
	for side, it := range []histogram.BucketIterator[float64]{h.PositiveBucketIterator(), h.NegativeBucketIterator()} {
		for it.Next() {
			if b := it.At(); b.Count != 0 {
				out[[2]int32{int32(side), b.Index}] = b.Count
			}
		}
	}
	return out
}

// requireHistWindows compares Aggregate's windows with the model's, exactly (the counts and
// sums are integers): the samples, the conflicts, the observations bucket for bucket, and
// quantiles as Prometheus' histogram_quantile gives them.
func requireHistWindows(t *testing.T, want map[time.Time]*modelHistWindow, floats []*itest.ModelWindow, got []tsdb.Window, what string) {
	t.Helper()
	floatCount := map[time.Time]uint64{}
	for _, w := range floats {
		floatCount[w.Start] = w.Count
	}
	require.Equal(t, len(want)+countMissing(floatCount, want), len(got), "%s: windows", what)
	for _, g := range got {
		m := want[g.Start]
		require.Equal(t, floatCount[g.Start], g.Count, "%s %v: points", what, g.Start)
		if m == nil {
			require.Zero(t, g.HistogramCount, "%s %v", what, g.Start)
			continue
		}
		require.Equal(t, m.count, g.HistogramCount, "%s %v: samples", what, g.Start)
		require.True(t, m.first.Equal(g.FirstHistogram.Time) && m.last.Equal(g.LastHistogram.Time), "%s %v: first and last", what, g.Start)
		require.Equal(t, m.conflict, g.HistogramConflict, "%s %v: conflict", what, g.Start)
		if m.conflict {
			require.Nil(t, g.Histogram)
			continue
		}
		require.NotNil(t, g.Histogram, "%s %v", what, g.Start)
		if m.obs == nil {
			require.Zero(t, g.Histogram.Count, "%s %v: nothing observed", what, g.Start)
			continue
		}
		ph := promconv.FloatToProm(g.Histogram)
		require.Equal(t, m.obs.Schema, ph.Schema, "%s %v: schema", what, g.Start)
		require.Equal(t, m.obs.Count, ph.Count, "%s %v: count", what, g.Start)
		require.Equal(t, m.obs.Sum, ph.Sum, "%s %v: sum", what, g.Start)
		require.Equal(t, m.obs.ZeroCount, ph.ZeroCount, "%s %v: zero count", what, g.Start)
		require.Equal(t, nonZeroBuckets(m.obs), nonZeroBuckets(ph), "%s %v: buckets", what, g.Start)
		for _, q := range []float64{0.1, 0.5, 0.9, 0.99} {
			wq, _ := promql.HistogramQuantile(q, m.obs, "h", posrange.PositionRange{})
			gq := tsdb.HistogramQuantile(q, g.Histogram)
			// tsdb computes bucket bounds where Prometheus reads them from a table: they may
			// differ in the last bit.
			require.True(t, math.Abs(wq-gq) <= 1e-12*math.Abs(wq) || math.IsNaN(wq) && math.IsNaN(gq), "%s %v: q%v %v, Prometheus %v", what, g.Start, q, gq, wq)
			if g.Count == 0 {
				require.True(t, g.Quantile(q) == gq || math.IsNaN(gq), "%s %v: Quantile", what, g.Start)
			} else {
				require.True(t, math.IsNaN(g.Quantile(q)), "%s %v: a mixed window has no quantile", what, g.Start)
			}
		}
	}
}

func countMissing(floats map[time.Time]uint64, hists map[time.Time]*modelHistWindow) int {
	n := 0
	for ws := range floats {
		if hists[ws] == nil {
			n++
		}
	}
	return n
}

// Aggregate over histogram series answers as Prometheus' arithmetic over the raw samples,
// exactly, before a Rollup (raw samples) and after (tier windows), for steps a tier divides
// and steps none does, aligned ranges and cut ones; a sample written late into rolled-up
// windows shows at once; reading a histogram series from the tier costs what a float
// series' does.
func TestTSDBHistogramTiers(t *testing.T) {
	ctx := context.Background()
	db, _, checker := newDB(t, &tsdb.Options{RawPeriod: 24 * time.Hour})
	all, mixed := makeHistSeries(rand.New(rand.NewPCG(5, 6)), itest.RollupBase)
	var batch []tablets.SeriesHistograms
	for _, s := range slices.Sorted(maps.Keys(all)) {
		batch = append(batch, tablets.SeriesHistograms{Series: s, Histograms: all[s]})
	}
	require.NoError(t, db.WriteSamples(ctx, nil, batch))
	require.NoError(t, db.Write(ctx, "mixed", mixed...))
	end := itest.RollupBase.Add(48 * time.Hour)
	sets := [][]string{{"h_exp"}, {"h_custom"}, {"h_custom", "h_bounds"}, {"h_gauge"}, {"mixed"}, {"h_exp", "h_gauge"}, {"h_exp", "h_custom"}}
	cases := []struct {
		from, to time.Time
		step     time.Duration
	}{
		{itest.RollupBase, end, time.Hour},
		{itest.RollupBase, end, 24 * time.Hour},
		{itest.RollupBase, end, time.Minute},
		{itest.RollupBase, end, 7 * time.Minute},
		{itest.RollupBase, end, 90 * time.Second}, // no tier divides it: raw
		{itest.RollupBase.Add(17*time.Minute + 3*time.Second), end.Add(-5*time.Hour - 11*time.Second), time.Hour}, // cut edges
		{itest.RollupBase.Add(17*time.Minute + 3*time.Second), end.Add(-5*time.Hour - 11*time.Second), 24 * time.Hour},
	}
	check := func(what string) {
		for _, names := range sets {
			for _, c := range cases {
				var floats []*itest.ModelWindow
				if slices.Contains(names, "mixed") {
					floats = itest.ModelWindows(mixed, c.from, c.to, c.step)
				}
				got := itest.CollectWindows(t, db.Aggregate(ctx, names, c.from, c.to, c.step, nil))
				requireHistWindows(t, modelHistWindows(t, all, names, c.from, c.to, c.step), floats, got,
					fmt.Sprintf("%s %v %v", what, names, c.step))
			}
		}
	}
	check("before Rollup")
	before := checker.Stats()
	rollupLate(t, db, itest.RollupBase, end)
	after := checker.Stats()
	t.Logf("Rollup of 2 days of 5 histogram series (%d samples): %d requests, %d bytes of blocks written", 5*5760-2880,
		after.Requests-before.Requests, after.EntityBytes-before.EntityBytes)
	check("after Rollup")

	before = checker.Stats()
	got := itest.CollectWindows(t, db.Aggregate(ctx, []string{"h_exp"}, itest.RollupBase, end, time.Hour, nil))
	require.Len(t, got, 48)
	after = checker.Stats()
	tierRequests, tierBytes := after.Requests-before.Requests, after.ResponseBytes-before.ResponseBytes
	before = checker.Stats()
	itest.CollectWindows(t, db.Aggregate(ctx, []string{"h_exp"}, itest.RollupBase, end, 90*time.Second, nil))
	after = checker.Stats()
	rawRequests, rawBytes := after.Requests-before.Requests, after.ResponseBytes-before.ResponseBytes
	t.Logf("Aggregate of 2 days of a histogram series: at 1 h from the tier %d requests, %d bytes read; at 90 s raw %d requests, %d bytes",
		tierRequests, tierBytes, rawRequests, rawBytes)
	require.LessOrEqual(t, tierRequests, int64(3), "read from the tier (the dirty markers and the staged samples too), not the raw samples")
	require.Less(t, 3*tierBytes, rawBytes, "the hour windows are a fraction of the raw samples (compressed 10 bytes a sample)")

	// A late sample into a rolled-up window (a reset of h_custom): the tier window is
	// flagged, the answer has it; and again after a Rollup.
	late := tablets.HistogramPoint{Time: itest.RollupBase.Add(90*time.Minute + 10*time.Second),
		FH: customHistogram(0, []float64{0.1, 0.5, 1, 5}, []float64{1, 0, 0, 0, 0}, 0.05)}
	require.NoError(t, db.WriteSamples(ctx, nil, []tablets.SeriesHistograms{{Series: "h_custom", Histograms: []tablets.HistogramPoint{late}}}))
	all["h_custom"] = insertSample(all["h_custom"], late)
	check("after a late sample")
	require.NoError(t, db.Rollup(ctx, itest.RollupBase, end))
	check("after Rollup again")
}

// insertSample inserts p into samples (by time).
func insertSample(samples []tablets.HistogramPoint, p tablets.HistogramPoint) []tablets.HistogramPoint {
	i, _ := slices.BinarySearchFunc(samples, p.Time, func(s tablets.HistogramPoint, t time.Time) int { return s.Time.Compare(t) })
	return slices.Insert(samples, i, p)
}

// A series of histogram samples only (no raw table in its period) is rolled up; a window
// whose histograms are too large to store is kept as such and read raw: Aggregate answers
// the same before and after Rollup.
func TestTSDBHistogramTierTooLarge(t *testing.T) {
	ctx := context.Background()
	db, svc, _ := newDB(t, &tsdb.Options{RawPeriod: 24 * time.Hour})
	base := itest.RollupBase.Add(48 * time.Minute) // a block of the minute tier
	wide := func(n int32, c float64) *tablets.FloatHistogram {
		h := &tablets.FloatHistogram{CounterResetHint: tablets.GaugeType, Sum: c}
		for i := range n { // spans of one bucket: a large encoding
			h.PositiveSpans = append(h.PositiveSpans, tablets.HistogramSpan{Offset: min(i, 1), Length: 1})
			v := c + float64(i*7919%13)
			h.PositiveBuckets = append(h.PositiveBuckets, v)
			h.Count += v
		}
		return h
	}
	var samples []tablets.HistogramPoint
	for i := range 6 {
		n := int32(8) // small in the first minute, far more buckets in the second
		if i >= 3 {
			n = 7000
		}
		samples = append(samples, tablets.HistogramPoint{Time: base.Add(time.Duration(20*i) * time.Second), FH: wide(n, float64(i+1))})
	}
	require.NoError(t, db.WriteSamples(ctx, nil, []tablets.SeriesHistograms{{Series: "wide", Histograms: samples}}))
	aggregate := func() []tsdb.Window {
		return itest.CollectWindows(t, db.Aggregate(ctx, []string{"wide"}, base, base.Add(time.Hour), time.Minute, nil))
	}
	before := aggregate()
	require.NoError(t, db.Rollup(ctx, base, base.Add(time.Hour)))

	blocks := tierEntities(t, svc, db, time.Minute, base, base.Add(time.Hour), "wide")
	require.Len(t, blocks, 1, "the block of a series of histogram samples only")
	c := blocks[0].columnar
	require.NotNil(t, c)
	i := int(base.Sub(time.Unix(blocks[0].start, 0)) / time.Minute)
	require.Equal(t, []byte{1, 1, 3}, c.Histograms[i][:3], "the first minute: gauge histograms, 3 samples, stored")
	require.Equal(t, []byte{1, 3, 3}, c.Histograms[i+1], "the second: too large, only its count")

	after := aggregate()
	require.Len(t, before, 2)
	require.Len(t, after, 2)
	for i := range before {
		require.Equal(t, uint64(3), after[i].HistogramCount)
		require.Equal(t, before[i].Histogram, after[i].Histogram, "window %d", i)
	}
	require.Equal(t, 4.0+5+6, after[1].Histogram.Sum)
	require.Len(t, after[1].Histogram.PositiveBuckets, 7000)
}

// A Rollup that meets another's write of its block between its read of the block and its
// own write (a late histogram sample written and rolled up by another process) fails that
// write and starts the series again: the block stored in the end holds the sample.
func TestTSDBHistogramRollupRace(t *testing.T) {
	ctx := context.Background()
	h := &itest.Hooked{}
	db, svc, _ := newDB(t, &tsdb.Options{RawPeriod: 24 * time.Hour})
	gauge := func(c float64) *tablets.FloatHistogram {
		return customHistogram(tablets.GaugeType, []float64{1, 2}, []float64{c, 0, 1}, c)
	}
	var samples []tablets.HistogramPoint
	for i := range 120 {
		samples = append(samples, tablets.HistogramPoint{Time: itest.RollupBase.Add(time.Duration(i) * time.Minute), FH: gauge(float64(i))})
	}
	require.NoError(t, db.WriteSamples(ctx, nil, []tablets.SeriesHistograms{{Series: "r", Histograms: samples}}))
	require.NoError(t, db.Rollup(ctx, itest.RollupBase, itest.RollupBase.Add(2*time.Hour)))
	// A sample more, so that the next Rollup has a block to write.
	more := tablets.HistogramPoint{Time: itest.RollupBase.Add(90*time.Minute + 20*time.Second), FH: gauge(0.5)}
	require.NoError(t, db.WriteSamples(ctx, nil, []tablets.SeriesHistograms{{Series: "r", Histograms: []tablets.HistogramPoint{more}}}))

	// Through a hooked client, the second Rollup meets a write and a Rollup before its first
	// block write.
	hdb, _ := newHookedDB(t, db.Name(), h)
	late := tablets.HistogramPoint{Time: itest.RollupBase.Add(30*time.Minute + 15*time.Second), FH: gauge(1000)}
	injected := false
	h.Arm(func(r *http.Request) bool {
		return itest.IsBatch(r) && strings.Contains(string(itest.PeekBody(r)), "t60p")
	}, func() {
		injected = true
		require.NoError(t, db.WriteSamples(ctx, nil, []tablets.SeriesHistograms{{Series: "r", Histograms: []tablets.HistogramPoint{late}}}))
		require.NoError(t, db.Rollup(ctx, itest.RollupBase, itest.RollupBase.Add(2*time.Hour)))
	}, nil)
	require.NoError(t, hdb.Rollup(ctx, itest.RollupBase, itest.RollupBase.Add(2*time.Hour)))
	require.True(t, injected)

	blocks := tierEntities(t, svc, db, time.Minute, itest.RollupBase, itest.RollupBase.Add(time.Hour), "r")
	require.Len(t, blocks, 1)
	require.NotNil(t, blocks[0].columnar)
	require.Equal(t, byte(2), blocks[0].columnar.Histograms[30][2], "window 30m holds 2 samples")
	w := itest.CollectWindows(t, hdb.Aggregate(ctx, []string{"r"}, itest.RollupBase.Add(30*time.Minute), itest.RollupBase.Add(31*time.Minute), time.Minute, nil))
	require.Len(t, w, 1)
	require.Equal(t, uint64(2), w[0].HistogramCount, "window 30m holds the sample written and the late one")
	require.Equal(t, 30.0+1000, w[0].Histogram.Sum)
}
