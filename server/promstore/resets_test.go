package promstore

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/util/annotations"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
)

// hintsOf are the counter reset hints of a series' histogram samples, in order.
func hintsOf(s *memSeries) []histogram.CounterResetHint {
	var out []histogram.CounterResetHint
	for _, m := range s.mixed {
		switch {
		case m.h != nil:
			out = append(out, m.h.CounterResetHint)
		case m.fh != nil:
			out = append(out, m.fh.CounterResetHint)
		}
	}
	return out
}

// The unknown hints become what the sample says against the histogram sample before it;
// the first, staleness markers, gauges and hints stored otherwise stay as stored.
func TestResolveResets(t *testing.T) {
	stale := intHist(tablets.UnknownCounterReset, 0)
	stale.Sum = math.Float64frombits(staleNaN)
	s := &memSeries{}
	for _, h := range []struct {
		t int64
		p tablets.HistogramPoint
	}{
		{1, tablets.HistogramPoint{H: intHist(tablets.UnknownCounterReset, 10)}},             // the first: unknown still
		{3, tablets.HistogramPoint{H: intHist(tablets.UnknownCounterReset, 20)}},             // grew
		{4, tablets.HistogramPoint{H: stale}},                                                // left out
		{5, tablets.HistogramPoint{H: intHist(tablets.UnknownCounterReset, 5)}},              // fell: against 20, not the marker
		{6, tablets.HistogramPoint{FH: floatHist(intHist(tablets.UnknownCounterReset, 15))}}, // a float histogram after an integer one
		{7, tablets.HistogramPoint{H: intHist(tablets.GaugeType, 3)}},                        // a gauge's hint stays
		{8, tablets.HistogramPoint{H: intHist(tablets.UnknownCounterReset, 30)}},             // grew from the gauge's 3
		{9, tablets.HistogramPoint{H: intHist(tablets.CounterReset, 40)}},                    // stored: stays
		{10, tablets.HistogramPoint{FH: floatHist(intHist(tablets.NotCounterReset, 2))}},     // stored: stays
		{11, tablets.HistogramPoint{FH: floatHist(intHist(tablets.UnknownCounterReset, 1))}}, // fell
	} {
		require.NoError(t, s.appendHistogram(h.t, h.p))
	}
	s.append(2, 100) // floats between are left out
	s.append(12, 1)
	s.finish()
	s.resolveResets()
	require.Equal(t, []histogram.CounterResetHint{
		histogram.UnknownCounterReset, histogram.NotCounterReset, histogram.UnknownCounterReset, histogram.CounterReset,
		histogram.NotCounterReset, histogram.GaugeType, histogram.NotCounterReset, histogram.CounterReset,
		histogram.NotCounterReset, histogram.CounterReset,
	}, hintsOf(s))
	require.Equal(t, 12, s.samples())
}

// floatHist is h as a float histogram.
func floatHist(h *tablets.Histogram) *tablets.FloatHistogram {
	fh := &tablets.FloatHistogram{CounterResetHint: h.CounterResetHint, Schema: h.Schema, ZeroThreshold: h.ZeroThreshold,
		ZeroCount: float64(h.ZeroCount), Count: float64(h.Count), Sum: h.Sum, PositiveSpans: h.PositiveSpans}
	abs := int64(0)
	for _, d := range h.PositiveBuckets {
		abs += d
		fh.PositiveBuckets = append(fh.PositiveBuckets, float64(abs))
	}
	return fh
}

// seriesQueryable serves the same series to every Select, resolved (resolveResets) where
// asked for with the hints of a function that resolves them, as promstore's Select does.
type seriesQueryable struct {
	series  func() []*memSeries
	resolve bool
}

func (q seriesQueryable) Querier(int64, int64) (storage.Querier, error) { return q, nil }
func (q seriesQueryable) Close() error                                  { return nil }
func (q seriesQueryable) LabelValues(context.Context, string, *storage.LabelHints, ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	return nil, nil, nil
}
func (q seriesQueryable) LabelNames(context.Context, *storage.LabelHints, ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	return nil, nil, nil
}
func (q seriesQueryable) Select(_ context.Context, _ bool, hints *storage.SelectHints, _ ...*labels.Matcher) storage.SeriesSet {
	var out []storage.Series
	for _, s := range q.series() {
		if q.resolve && resolvingPays(hints) {
			s.resolveResets()
		}
		out = append(out, s)
	}
	return &listSet{list: out, i: -1}
}

// Hints are resolved for the engine's functions that compare each histogram sample with
// the one before it, where their windows overlap: where each sample is in one window (an
// instant query, a rule, a step as long as the range) the engine compares it once anyway.
func TestResolvingPays(t *testing.T) {
	minute := time.Minute.Milliseconds()
	for _, c := range []struct {
		hints *storage.SelectHints
		want  bool
	}{
		{nil, false},
		{&storage.SelectHints{Func: "rate", Range: 5 * minute, Step: minute / 4}, true},
		{&storage.SelectHints{Func: "increase", Range: 2 * minute, Step: minute}, true},
		{&storage.SelectHints{Func: "irate", Range: 5 * minute, Step: minute}, true},
		{&storage.SelectHints{Func: "resets", Range: 10 * minute, Step: minute}, true},
		{&storage.SelectHints{Func: "rate", Range: 5 * minute}, false},                         // an instant query's, a rule's
		{&storage.SelectHints{Func: "rate", Range: 5 * minute, Step: 5 * minute}, false},       // a window a step
		{&storage.SelectHints{Func: "rate", Range: 5 * minute, Step: 3 * minute}, false},       // a sample in one or two
		{&storage.SelectHints{Func: "sum_over_time", Range: 5 * minute, Step: minute}, false},  // its result carries a hint on
		{&storage.SelectHints{Func: "last_over_time", Range: 5 * minute, Step: minute}, false}, // so does this one's
		{&storage.SelectHints{Func: "", Range: 0, Step: minute}, false},                        // a selector alone
	} {
		require.Equal(t, c.want, resolvingPays(c.hints), "%+v", c.hints)
	}
}

// The engine answers the functions that take resolved hints as it does over the hints as
// stored: counter histograms that restart, fall partly (a bucket emptied), change schema,
// go stale and come back, with float samples between, integer and float, every 15 s, their
// rates at a 15 s step over windows from 15 s to 10 m.
func TestResolvedResetsAnswerAsStored(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 36))
	makeSeries := func() []*memSeries {
		r := rand.New(rand.NewPCG(rng.Uint64(), 1)) // the same series for both sides
		var out []*memSeries
		for i := range 6 {
			s := &memSeries{lset: labels.FromStrings("__name__", "h", "i", fmt.Sprint(i))}
			count := uint64(1)
			for step := range 400 {
				at := int64(step) * 15_000
				switch x := r.IntN(100); {
				case x < 3:
					count = uint64(r.IntN(3)) + 1 // a restart
				case x < 5:
					h := intHist(tablets.UnknownCounterReset, 0)
					h.Sum = math.Float64frombits(staleNaN)
					require.NoError(t, s.appendHistogram(at, tablets.HistogramPoint{H: h}))
					continue
				case x < 7:
					s.append(at, float64(count))
					continue
				default:
					count += uint64(r.IntN(5))
				}
				h := intHist(tablets.UnknownCounterReset, count)
				if r.IntN(20) == 0 {
					h.Schema = 1 // finer buckets: a reset where the layout does not follow
					h.PositiveSpans = []tablets.HistogramSpan{{Offset: 2, Length: 2}}
				}
				if i%2 == 1 {
					require.NoError(t, s.appendHistogram(at, tablets.HistogramPoint{FH: floatHist(h)}))
				} else {
					require.NoError(t, s.appendHistogram(at, tablets.HistogramPoint{H: h}))
				}
			}
			s.finish()
			out = append(out, s)
		}
		return out
	}
	seed := rng.Uint64()
	series := func() []*memSeries { rng = rand.New(rand.NewPCG(seed, 2)); return makeSeries() }
	engine := promql.NewEngine(promql.EngineOpts{MaxSamples: 1e8, Timeout: time.Minute, LookbackDelta: 5 * time.Minute,
		EnableAtModifier: true, EnableNegativeOffset: true, NoStepSubqueryIntervalFn: func(int64) int64 { return 15_000 }})
	eval := func(q storage.Queryable, query string) (string, []string) {
		qry, err := engine.NewRangeQuery(context.Background(), q, nil, query, time.UnixMilli(0), time.UnixMilli(400*15_000), 15*time.Second)
		require.NoError(t, err)
		defer qry.Close()
		res := qry.Exec(context.Background())
		require.NoError(t, res.Err)
		w, i := res.Warnings.AsStrings(query, 0, 0)
		return res.Value.String(), append(w, i...)
	}
	resolved := 0
	for _, window := range []string{"15s", "1m", "5m", "10m"} {
		for _, query := range []string{
			`rate(h[%s])`, `increase(h[%s])`, `irate(h[%s])`, `resets(h[%s])`,
			`histogram_count(rate(h[%s]))`, `sum(rate(h[%s]))`, `rate(h[%s:30s])`,
		} {
			query = fmt.Sprintf(query, window)
			want, wantNotes := eval(seriesQueryable{series: series}, query)
			got, gotNotes := eval(seriesQueryable{series: series, resolve: true}, query)
			require.Equal(t, want, got, query)
			require.Equal(t, wantNotes, gotNotes, query)
			resolved++
		}
	}
	// And the series did change: most hints were resolved.
	s := series()[0]
	s.resolveResets()
	known := 0
	for _, h := range hintsOf(s) {
		if h != histogram.UnknownCounterReset {
			known++
		}
	}
	require.Greater(t, known, len(hintsOf(s))*3/4)
	t.Logf("%d queries answered alike", resolved)
}
