package tsdb

import (
	"context"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/testkit/clock"
	"github.com/seed71701133/tablets/internal/testkit/dbtest"
	"github.com/seed71701133/tablets/tsdb"
)

// The sample conformance suite: floats and native histograms (integer, float, custom
// buckets, stale), written through the Appender and read through the Querier, against a
// brute-force model that shares no code with tsdb. It runs over every way samples are
// stored: written into the raw and histogram tables directly, staged, staged and folded,
// and half folded with later writes of the same times staged over folded ones.
//
// The semantics asserted:
//   - A sample is stored at its millisecond (the time floored to it), read back in the
//     Querier's [from, to) and the hints' [Start, End) clamped to it.
//   - Of samples of one series, kind and millisecond, the last written wins, across Commits,
//     the staging table and the raw tables.
//   - Of a float and a histogram at one millisecond of one series, the histogram is read.
//   - Select gives the series matching every matcher, sorted by labels, samples ascending,
//     values bit for bit (NaN sums and staleness markers too).

// sampleModel is the brute-force model: series -> millisecond -> the last sample written.
type sampleModel struct {
	labels map[string]tsdb.Labels
	floats map[string]map[int64]float64
	hists  map[string]map[int64]tsdb.HistogramPoint
}

func newSampleModel() *sampleModel {
	return &sampleModel{labels: map[string]tsdb.Labels{}, floats: map[string]map[int64]float64{}, hists: map[string]map[int64]tsdb.HistogramPoint{}}
}

func (m *sampleModel) float(series string, at time.Time, v float64) {
	if m.floats[series] == nil {
		m.floats[series] = map[int64]float64{}
	}
	m.floats[series][at.UnixMilli()] = v
}

func (m *sampleModel) hist(series string, h tsdb.HistogramPoint) {
	if m.hists[series] == nil {
		m.hists[series] = map[int64]tsdb.HistogramPoint{}
	}
	m.hists[series][h.Time.UnixMilli()] = h
}

// want is what Select over [from, to) with the matchers gives, series in label order.
func (m *sampleModel) want(from, to time.Time, match func(tsdb.Labels) bool) []modelSeries {
	var out []modelSeries
	for series, ls := range m.labels {
		if !match(ls) {
			continue
		}
		var ss []tsdb.Sample
		for ms, v := range m.floats[series] {
			if _, h := m.hists[series][ms]; !h && ms >= from.UnixMilli() && ms < to.UnixMilli() {
				ss = append(ss, tsdb.Sample{T: ms, F: v})
			}
		}
		for ms, h := range m.hists[series] {
			if ms >= from.UnixMilli() && ms < to.UnixMilli() {
				ss = append(ss, tsdb.Sample{T: ms, H: h.H, FH: h.FH})
			}
		}
		if len(ss) == 0 {
			continue
		}
		slices.SortFunc(ss, func(a, b tsdb.Sample) int { return int(a.T - b.T) })
		out = append(out, modelSeries{series, ls, ss})
	}
	slices.SortFunc(out, func(a, b modelSeries) int { return compareLabels(a.labels, b.labels) })
	return out
}

type modelSeries struct {
	series  string
	labels  tsdb.Labels
	samples []tsdb.Sample
}

// selectAll reads a Select whole: the series with samples, in the order given.
func selectAll(t *testing.T, q *tsdb.Querier, hints *tsdb.SelectHints, ms ...tsdb.Matcher) []modelSeries {
	t.Helper()
	var out []modelSeries
	for s, err := range q.Select(context.Background(), hints, ms...) {
		require.NoError(t, err)
		var ss []tsdb.Sample
		it := s.Iterator()
		for it.Next() {
			ss = append(ss, it.At())
		}
		require.NoError(t, it.Err())
		n, nh := s.Len()
		hists := 0
		for _, x := range ss {
			if x.IsHistogram() {
				hists++
			}
		}
		require.Equal(t, [2]int{len(ss), hists}, [2]int{n, nh}, "%s: Len against its iterator", s.Series)
		if len(ss) == 0 {
			continue // a series of the index without a sample in the range
		}
		out = append(out, modelSeries{s.Series, s.Labels, ss})
	}
	return out
}

// requireSameSeries compares a Select with the model, samples bit for bit.
func requireSameSeries(t *testing.T, want, got []modelSeries, what string) {
	t.Helper()
	names := func(ss []modelSeries) []string {
		var out []string
		for _, s := range ss {
			out = append(out, s.series)
		}
		return out
	}
	require.Equal(t, names(want), names(got), "%s: the series, in label order", what)
	for i := range want {
		w, g := want[i], got[i]
		require.True(t, compareLabels(w.labels, g.labels) == 0, "%s: %s's labels %v, want %v", what, w.series, g.labels, w.labels)
		require.Len(t, g.samples, len(w.samples), "%s: %s's samples", what, w.series)
		for j := range w.samples {
			ws, gs := w.samples[j], g.samples[j]
			require.Equal(t, ws.T, gs.T, "%s: %s sample %d's time", what, w.series, j)
			require.Equal(t, ws.IsHistogram(), gs.IsHistogram(), "%s: %s sample %d's kind", what, w.series, j)
			if !ws.IsHistogram() {
				require.Equal(t, math.Float64bits(ws.F), math.Float64bits(gs.F), "%s: %s sample %d (%v, want %v)", what, w.series, j, gs.F, ws.F)
				continue
			}
			requireSamples(t, []tsdb.HistogramPoint{{Time: time.UnixMilli(ws.T), H: ws.H, FH: ws.FH}},
				[]tsdb.HistogramPoint{{Time: time.UnixMilli(gs.T), H: gs.H, FH: gs.FH}})
		}
	}
}

// sampleStorage is a way the suite's samples are stored.
type sampleStorage struct {
	name   string
	direct bool // Options.DirectWrites
	// fold: after which of the suite's writes (1-based) a Fold moves the staged samples;
	// none: never.
	fold []int
}

var sampleStorages = []sampleStorage{
	{name: "direct", direct: true},
	{name: "staged"},
	{name: "folded", fold: []int{1, 2}},
	{name: "half folded", fold: []int{1}}, // the rewrites staged over folded samples
}

// conformanceDB is a database of an hour's periods over a chunked layout at a millisecond,
// its clock an hour past the suite's data (so that staged samples may be folded).
func conformanceDB(t *testing.T, st sampleStorage, base time.Time) (*tsdb.DB, *clock.Clock) {
	clk := clock.New(base.Add(3*time.Hour + time.Minute))
	opts := stagingOptions(clk)
	opts.RawPeriod = time.Hour
	opts.DirectWrites = st.direct
	db, _, _ := dbtest.NewDB(t, opts)
	return db, clk
}

// conformanceLoad writes, through the Appender, 3 hours (three periods) of 36 series of
// six kinds (floats, integer histograms, float histograms, custom buckets, a series
// switching between floats and histograms, and one of floats and histograms at the same
// milliseconds), in Commits of mixed kinds and random order; then rewrites a third of the
// samples with other values. The model records both writes.
func conformanceLoad(t *testing.T, db *tsdb.DB, clk *clock.Clock, st sampleStorage, base time.Time, m *sampleModel) {
	ctx := context.Background()
	sets := make([]tsdb.Labels, 36)
	for i := range sets {
		sets[i] = tsdb.LabelsFromStrings("__name__", fmt.Sprintf("conf_kind%d", i%6), "job", fmt.Sprintf("job%d", i%3),
			"instance", fmt.Sprintf("host-%d", i/6))
	}
	keys, err := db.SeriesOfMany(ctx, sets)
	require.NoError(t, err)
	for i, k := range keys {
		m.labels[k] = sets[i]
	}
	rng := rand.New(rand.NewPCG(35, 2))
	type write struct {
		series string
		f      *tablets.Point
		h      *tsdb.HistogramPoint
	}
	sampleOf := func(i, j int, rewrite bool) []write {
		series := keys[i]
		// Sub-millisecond times: stored at their millisecond.
		at := base.Add(time.Duration(j)*97*time.Second + time.Duration(rng.IntN(1e9)))
		if rewrite {
			at = time.UnixMilli(at.UnixMilli()) // the millisecond of the first write
		}
		x := uint64(j + 1)
		if rewrite {
			x += 1000
		}
		f := func(v float64) []write { return []write{{series: series, f: &tablets.Point{Time: at, Value: v}}} }
		h := func(p tsdb.HistogramPoint) []write { return []write{{series: series, h: &p}} }
		switch i % 6 {
		case 0:
			switch {
			case j%17 == 0:
				return f(staleMarker)
			case j%13 == 0:
				return f(math.Copysign(0, -1))
			}
			return f(float64(x) * 1.25)
		case 1:
			p := hp(at, intHist(x))
			if j%11 == 0 {
				p.H.Sum = math.Float64frombits(0x7ff0000000000002) // a stale histogram
			}
			return h(p)
		case 2:
			return h(fhp(at, floatHist(float64(x)/4)))
		case 3:
			return h(hp(at, customHist(x)))
		case 4:
			if j/20%2 == 0 {
				return f(float64(x))
			}
			return h(hp(at, intHist(x)))
		default:
			return append(f(float64(x)), h(hp(at, intHist(x)))...) // the histogram is read
		}
	}
	var firsts, rewrites []write
	for i := range keys {
		for j := range 110 { // 97 s apart: 110 samples span 3 hours
			firsts = append(firsts, sampleOf(i, j, false)...)
		}
	}
	rng.Shuffle(len(firsts), func(a, b int) { firsts[a], firsts[b] = firsts[b], firsts[a] })
	for _, w := range firsts {
		if rng.IntN(3) == 0 {
			r := w
			if w.f != nil {
				p := *w.f
				p.Time = time.UnixMilli(p.Time.UnixMilli())
				p.Value = p.Value*3 + 1
				r.f = &p
			} else {
				p := *w.h
				p.Time = time.UnixMilli(p.Time.UnixMilli())
				if p.H != nil {
					p.H = intHist(p.H.Count + 7)
					if p.H.Count%2 == 0 {
						p.H = customHist(p.H.Count)
					}
				} else {
					p.FH = floatHist(3 - p.FH.Sum) // Sum is -x: a float histogram of x + 3
				}
				r.h = &p
			}
			rewrites = append(rewrites, r)
		}
	}
	commit := func(ws []write, n int) {
		for lo := 0; lo < len(ws); lo += 500 {
			a := db.Appender()
			for _, w := range ws[lo:min(lo+500, len(ws))] {
				if w.f != nil {
					a.AppendPoints(w.series, *w.f)
					m.float(w.series, w.f.Time, w.f.Value)
				} else {
					a.AppendHistograms(w.series, *w.h)
					m.hist(w.series, *w.h)
				}
			}
			require.NoError(t, a.Commit(ctx))
		}
		if slices.Contains(st.fold, n) {
			clk.Add(20 * time.Minute) // staged samples older than the fold's horizon
			_, err := db.Fold(ctx)
			require.NoError(t, err)
		}
	}
	commit(firsts, 1)
	commit(rewrites, 2)
}

func TestTSDBSampleConformance(t *testing.T) {
	base := time.Date(2025, 6, 2, 9, 0, 0, 0, time.UTC)
	for _, st := range sampleStorages {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			db, clk := conformanceDB(t, st, base)
			m := newSampleModel()
			conformanceLoad(t, db, clk, st, base, m)
			qa, err := db.Queryable(nil)
			require.NoError(t, err)
			all := tsdb.Matcher{Type: tsdb.MatchRegexp, Name: "__name__", Value: "conf_.*"}
			every := func(tsdb.Labels) bool { return true }

			t.Run("the whole range", func(t *testing.T) {
				from, to := base.Add(-time.Hour), base.Add(4*time.Hour)
				requireSameSeries(t, m.want(from, to, every), selectAll(t, qa.Querier(from, to), nil, all), "whole")
			})
			t.Run("half-open ranges across periods", func(t *testing.T) {
				rng := rand.New(rand.NewPCG(7, 7))
				for range 6 {
					from := base.Add(time.Duration(rng.Int64N(int64(3 * time.Hour))))
					if rng.IntN(2) == 0 { // an edge at a sample's millisecond
						ms := slices.Collect(maps.Keys(m.hists[slices.Sorted(maps.Keys(m.hists))[0]]))
						from = time.UnixMilli(ms[rng.IntN(len(ms))])
					}
					to := from.Add(time.Duration(rng.Int64N(int64(90 * time.Minute))))
					what := fmt.Sprintf("[%s, %s)", from.Format(time.TimeOnly+".000"), to.Format(time.TimeOnly+".000"))
					requireSameSeries(t, m.want(from, to, every), selectAll(t, qa.Querier(from, to), nil, all), what)
					// Hints' Start and End are the range read, in place of the Querier's.
					hints := &tsdb.SelectHints{Start: from.Add(10 * time.Minute), End: to.Add(time.Hour)}
					requireSameSeries(t, m.want(from.Add(10*time.Minute), to.Add(time.Hour), every), selectAll(t, qa.Querier(from, to), hints, all), what+" hinted")
					hints = &tsdb.SelectHints{End: to.Add(-time.Minute)} // and only End
					requireSameSeries(t, m.want(from, to.Add(-time.Minute), every), selectAll(t, qa.Querier(from, to), hints, all), what+" hinted End")
				}
			})
			t.Run("matchers", func(t *testing.T) {
				from, to := base, base.Add(3*time.Hour)
				for _, c := range []struct {
					ms    []tsdb.Matcher
					match func(tsdb.Labels) bool
				}{
					{[]tsdb.Matcher{tsdb.Matcher{Type: tsdb.MatchEqual, Name: "__name__", Value: "conf_kind1"}},
						func(ls tsdb.Labels) bool { return ls.Get("__name__") == "conf_kind1" }},
					{[]tsdb.Matcher{all, tsdb.Matcher{Type: tsdb.MatchEqual, Name: "job", Value: "job2"}, tsdb.Matcher{Type: tsdb.MatchNotRegexp, Name: "instance", Value: "host-[0-2]"}},
						func(ls tsdb.Labels) bool { return ls.Get("job") == "job2" && ls.Get("instance") >= "host-3" }},
					{[]tsdb.Matcher{tsdb.Matcher{Type: tsdb.MatchRegexp, Name: "__name__", Value: "conf_kind[45]"}, tsdb.Matcher{Type: tsdb.MatchNotEqual, Name: "instance", Value: "host-0"}},
						func(ls tsdb.Labels) bool {
							return (ls.Get("__name__") == "conf_kind4" || ls.Get("__name__") == "conf_kind5") && ls.Get("instance") != "host-0"
						}},
				} {
					want := m.want(from, to, c.match)
					require.NotEmpty(t, want)
					requireSameSeries(t, want, selectAll(t, qa.Querier(from, to), nil, c.ms...), fmt.Sprint(c.ms))
				}
			})
			t.Run("an abandoned Select, then another", func(t *testing.T) {
				from, to := base, base.Add(3*time.Hour)
				for s, err := range qa.Querier(from, to).Select(context.Background(), nil, all) {
					require.NoError(t, err)
					require.NotNil(t, s)
					break
				}
				requireSameSeries(t, m.want(from, to, every), selectAll(t, qa.Querier(from, to), nil, all), "after an abandoned Select")
			})
			if len(st.fold) == 0 && !st.direct {
				// Then fold it all: the same answer from the raw tables.
				clk.Add(time.Hour)
				_, err := db.Fold(context.Background())
				require.NoError(t, err)
				from, to := base.Add(-time.Hour), base.Add(4*time.Hour)
				requireSameSeries(t, m.want(from, to, every), selectAll(t, qa.Querier(from, to), nil, all), "folded at last")
			}
		})
	}
}

// compareLabels orders label sets as Prometheus' labels.Compare does: by the first pair
// that differs, name then value; a prefix first.
func compareLabels(a, b tsdb.Labels) int {
	for i := range min(len(a), len(b)) {
		if a[i].Name != b[i].Name {
			return cmpString(a[i].Name, b[i].Name)
		}
		if a[i].Value != b[i].Value {
			return cmpString(a[i].Value, b[i].Value)
		}
	}
	return len(a) - len(b)
}

func cmpString(a, b string) int {
	if a < b {
		return -1
	}
	return 1
}
