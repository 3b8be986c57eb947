package promstore

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/testkit/dbtest"
	"github.com/seed71701133/tablets/tsdb"
)

// exactDB writes three hours of series that exercise the exact answers from tiers, rolls
// them up into the minute and hour tiers, then writes a late point into a rolled-up window
// (its slice marked dirty, not rolled up again):
//   - exact_total: counters every 15 s at an offset within the minute, with resets;
//   - aligned_total: counters every 15 s on the minute (a window's first millisecond holds
//     one of its four samples: computed from raw samples);
//   - minute_gauge: a sample a minute, on the minute (one a window: from the tier);
//   - nan_gauge: a gauge with a NaN sample and a staleness marker (from raw samples).
func exactDB(t *testing.T) (*tsdb.DB, []labels.Labels) {
	t.Helper()
	ctx := context.Background()
	db, _, _ := dbtest.NewDB(t, &tsdb.Options{Layout: chunkedLayout, Tiers: []tsdb.Tier{{Step: time.Minute}, {Step: time.Hour}}})
	rng := rand.New(rand.NewPCG(7, 7))
	end := base.Add(3 * time.Hour)
	var sets []labels.Labels
	var pts [][]tablets.Point
	add := func(ls labels.Labels, every, offset time.Duration, value func(i int) float64) {
		var ps []tablets.Point
		i := 0
		for at := base.Add(offset); at.Before(end); at = at.Add(every) {
			ps = append(ps, tablets.Point{Time: at, Value: value(i)})
			i++
		}
		sets, pts = append(sets, ls), append(pts, ps)
	}
	for i := range 4 {
		v := float64(rng.IntN(1000))
		add(labels.FromStrings("__name__", "exact_total", "job", fmt.Sprint("j", i%2), "instance", fmt.Sprint("i", i)), 15*time.Second,
			time.Duration(1000+rng.IntN(14000))*time.Millisecond+time.Duration(i)*time.Millisecond, func(int) float64 {
				if rng.IntN(150) == 0 {
					v = float64(rng.IntN(10)) // a restart
				}
				v += float64(rng.IntN(50)) + 0.25*float64(rng.IntN(4))
				return v
			})
	}
	for i := range 2 {
		v := 0.0
		add(labels.FromStrings("__name__", "aligned_total", "instance", fmt.Sprint("a", i)), 15*time.Second, 0, func(int) float64 {
			v += float64(rng.IntN(30))
			return v
		})
	}
	for i := range 2 {
		add(labels.FromStrings("__name__", "minute_gauge", "instance", fmt.Sprint("m", i)), time.Minute, 0, func(int) float64 {
			return math.Round(1000*rng.NormFloat64()) / 100
		})
	}
	add(labels.FromStrings("__name__", "nan_gauge", "instance", "n"), 20*time.Second, 3*time.Second, func(i int) float64 {
		switch i {
		case 200:
			return math.NaN()
		case 300:
			return math.Float64frombits(staleNaN)
		}
		return 50 + rng.NormFloat64()
	})
	write(t, db, sets, pts)
	require.NoError(t, db.Rollup(ctx, base, end))
	_, err := db.RollupFlagged(ctx)
	require.NoError(t, err)
	require.NoError(t, db.Tasks().SetCovered(ctx, tsdb.TaskRollup, end))
	// A late point between two of exact_total i0's, in a rolled-up window: its slice is
	// marked dirty, so the windows there are computed from the raw points.
	late := pts[0][len(pts[0])/2]
	write(t, db, sets[:1], [][]tablets.Point{{{Time: late.Time.Add(time.Millisecond), Value: late.Value + 0.5}}})
	return db, sets
}

// A range query whose functions are answered from the tiers' windows (promstore's Exact)
// answers what the engine does over every raw sample: the same series, at the same steps,
// values within 1e-9 relative. Queries Exact cannot serve (a start off the tiers' grid, a
// subquery) run as they are.
func TestExactTierAnswers(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	db, _ := exactDB(t)
	ctx := context.Background()
	engine := promql.NewEngine(promql.EngineOpts{MaxSamples: 5e7, Timeout: time.Minute, LookbackDelta: 5 * time.Minute})
	raw, err := New(db, &Options{DisableTiers: true})
	require.NoError(t, err)
	exact, err := New(db, &Options{PreferExactTiers: true})
	require.NoError(t, err)

	run := func(q storage.Queryable, expr string, start, end time.Time, step time.Duration) promql.Matrix {
		t.Helper()
		return rangeMatrix(t, engine, q, expr, start, end, step)
	}
	equal := func(expr string, want, got promql.Matrix) {
		t.Helper()
		require.Equal(t, len(want), len(got), "%s: series", expr)
		for i := range want {
			require.True(t, labels.Equal(want[i].Metric, got[i].Metric), "%s: %s, want %s", expr, got[i].Metric, want[i].Metric)
			require.Equal(t, len(want[i].Floats), len(got[i].Floats), "%s %s: steps", expr, want[i].Metric)
			for j, p := range want[i].Floats {
				g := got[i].Floats[j]
				require.Equal(t, p.T, g.T, "%s %s", expr, want[i].Metric)
				if math.IsNaN(p.F) || p.F == g.F {
					require.Equal(t, math.IsNaN(p.F), math.IsNaN(g.F), "%s %s at %d: %v, want %v", expr, want[i].Metric, p.T, g.F, p.F)
					continue
				}
				require.InEpsilon(t, p.F, g.F, 1e-9, "%s %s at %d", expr, want[i].Metric, p.T)
			}
		}
	}
	start, end := base.Add(time.Hour), base.Add(2*time.Hour+50*time.Minute)
	rewritten := 0
	for _, fn := range []string{"rate", "increase", "delta", "sum_over_time", "count_over_time", "avg_over_time",
		"min_over_time", "max_over_time", "last_over_time", "present_over_time"} {
		for _, metric := range []string{"exact_total", "aligned_total", "minute_gauge", "nan_gauge"} {
			for _, c := range []struct {
				rng, step string
			}{{"5m", "10m"}, {"1h", "10m"}, {"10m", "1m"}, {"2h", "1h"}} {
				expr := fmt.Sprintf("%s(%s[%s])", fn, metric, c.rng)
				step, err := time.ParseDuration(c.step)
				require.NoError(t, err)
				qs, q, ok, err := exact.Exact(ctx, expr, start, end, step)
				require.NoError(t, err)
				require.True(t, ok, "%s at %s", expr, c.step)
				rewritten++
				equal(expr, run(raw, expr, start, end, step), run(q, qs, start, end, step))
			}
		}
	}
	for _, expr := range []string{
		`sum by (job) (rate(exact_total[5m]))`,
		`rate(exact_total[5m] offset 10m) / ignoring(job) group_left sum by (instance) (increase(exact_total{job="j0"}[1h]))`,
		`max_over_time(minute_gauge[30m]) - min_over_time(minute_gauge[30m])`,
		`avg_over_time(rate(exact_total[5m])[30m:5m]) + rate(exact_total[10m])`,
		`topk(2, last_over_time(exact_total[15m]))`,
	} {
		qs, q, ok, err := exact.Exact(ctx, expr, start, end, 10*time.Minute)
		require.NoError(t, err)
		require.True(t, ok, expr)
		equal(expr, run(raw, expr, start, end, 10*time.Minute), run(q, qs, start, end, 10*time.Minute))
		rewritten++
	}
	st := exact.Stats()
	require.Equal(t, uint64(rewritten+2), st.ExactEvaluations, "every call: two queries have two")
	// aligned_total's two series and nan_gauge's come from raw samples in each of the 40
	// evaluations of their names, and minute_gauge's two in the 10 of the hour tier (an
	// hour's window holds 60 samples, the first on its first millisecond); every other
	// series from the windows.
	require.Equal(t, uint64(40*3+10*2), st.ExactRawSeries)

	// Off the grid of the tiers (a start within a minute), or only inside a subquery:
	// nothing to rewrite.
	for _, c := range []struct {
		expr  string
		start time.Time
	}{{`rate(exact_total[5m])`, start.Add(30 * time.Second)}, {`max_over_time(rate(exact_total[5m])[1h:1m])`, start}} {
		_, _, ok, err := exact.Exact(ctx, c.expr, c.start, end, 10*time.Minute)
		require.NoError(t, err)
		require.False(t, ok, c.expr)
	}
	// A Queryable without tiers never rewrites.
	_, _, ok, err := raw.Exact(ctx, `rate(exact_total[5m])`, start, end, 10*time.Minute)
	require.NoError(t, err)
	require.False(t, ok)
}
