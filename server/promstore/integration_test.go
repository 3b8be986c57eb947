package promstore

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/chunked"
	"github.com/seed71701133/tablets/internal/testkit/azurite"
	"github.com/seed71701133/tablets/internal/testkit/dbtest"
	"github.com/seed71701133/tablets/tsdb"
)

// chunkedLayout keeps times to the millisecond and float bits exactly.
func chunkedLayout(c *aztables.Client) (tablets.Store, error) { return chunked.New(c, nil) }

// base is an old time (tier windows there are sealed) in the middle of a raw period.
var base = time.Date(2024, 3, 4, 0, 0, 0, 0, time.UTC)

func ms(t time.Time) int64 { return t.UnixMilli() }

// write registers the label sets and writes their points.
func write(t *testing.T, db *tsdb.DB, sets []labels.Labels, points [][]tablets.Point) {
	t.Helper()
	ctx := context.Background()
	tls := make([]tsdb.Labels, len(sets))
	for i, ls := range sets {
		tls[i] = LabelsToTSDB(ls)
	}
	keys, err := db.SeriesOfMany(ctx, tls)
	require.NoError(t, err)
	batch := make([]tsdb.SeriesPoints, len(keys))
	for i, k := range keys {
		batch[i] = tsdb.SeriesPoints{Series: k, Points: points[i]}
	}
	require.NoError(t, db.WriteMany(ctx, batch))
}

// rangeMatrix runs expr over q as a range query of engine and returns a copy of its
// floats' matrix: closing the query gives the engine's points back to its pool.
func rangeMatrix(t *testing.T, engine *promql.Engine, q storage.Queryable, expr string, start, end time.Time, step time.Duration) promql.Matrix {
	t.Helper()
	ctx := context.Background()
	qry, err := engine.NewRangeQuery(ctx, q, nil, expr, start, end, step)
	require.NoError(t, err)
	defer qry.Close()
	res := qry.Exec(ctx)
	require.NoError(t, res.Err, expr)
	m, err := res.Matrix()
	require.NoError(t, err)
	out := make(promql.Matrix, len(m))
	for i, s := range m {
		out[i] = promql.Series{Metric: s.Metric, Floats: slices.Clone(s.Floats)}
	}
	return out
}

type sample struct {
	t    int64
	bits uint64
}

type gotSeries struct {
	lset    labels.Labels
	samples []sample
}

// collect reads a whole SeriesSet, checking it is sorted by labels.
func collect(t *testing.T, ss storage.SeriesSet) []gotSeries {
	t.Helper()
	var out []gotSeries
	for ss.Next() {
		s := ss.At()
		g := gotSeries{lset: s.Labels()}
		it := s.Iterator(nil)
		for it.Next() != 0 {
			ts, v := it.At()
			g.samples = append(g.samples, sample{ts, math.Float64bits(v)})
		}
		require.NoError(t, it.Err())
		if n := len(out); n > 0 {
			require.Negative(t, labels.Compare(out[n-1].lset, g.lset), "sorted by labels")
		}
		out = append(out, g)
	}
	require.NoError(t, ss.Err())
	return out
}

func TestSelectMatchers(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	db, _, checker := dbtest.NewDB(t, &tsdb.Options{Layout: chunkedLayout})
	var sets []labels.Labels
	for _, name := range []string{"http_requests_total", "up", "node_cpu"} {
		for _, job := range []string{"api", "web", "db"} {
			for _, inst := range []string{"1", "2"} {
				b := labels.NewBuilder(labels.FromStrings("__name__", name, "job", job, "instance", inst))
				switch {
				case inst == "1" && job != "db":
					b.Set("env", "prod")
				case inst == "2" && job == "db":
					b.Set("env", "dev")
				}
				if name == "up" && job == "web" {
					b.Set("path", "/a.b\n")
				}
				sets = append(sets, b.Labels())
			}
		}
	}
	points := make([][]tablets.Point, len(sets))
	for i := range sets {
		points[i] = []tablets.Point{{Time: base.Add(time.Duration(i) * time.Millisecond), Value: float64(i)}}
	}
	write(t, db, sets, points)

	q, err := New(db, nil)
	require.NoError(t, err)
	querier, err := q.Querier(ms(base), ms(base.Add(time.Hour)))
	require.NoError(t, err)
	defer querier.Close()
	ctx := context.Background()

	m := labels.MustNewMatcher
	for _, sel := range [][]*labels.Matcher{
		{m(labels.MatchEqual, "__name__", "up")},
		{m(labels.MatchEqual, "__name__", "up"), m(labels.MatchNotEqual, "job", "api")},
		{m(labels.MatchRegexp, "__name__", "up|node_cpu")},
		{m(labels.MatchRegexp, "__name__", "up|node_.*")},
		{m(labels.MatchNotRegexp, "__name__", "up"), m(labels.MatchEqual, "job", "db")},
		{m(labels.MatchRegexp, "job", "api|web"), m(labels.MatchEqual, "env", "")},
		{m(labels.MatchEqual, "__name__", "up"), m(labels.MatchNotEqual, "env", "prod")},
		{m(labels.MatchEqual, "job", "web"), m(labels.MatchRegexp, "env", "prod|")},
		{m(labels.MatchRegexp, "job", ".+"), m(labels.MatchNotRegexp, "env", "p.*")},
		{m(labels.MatchEqual, "instance", "1")},
		{m(labels.MatchRegexp, "path", "/a\\.b.")},
		{m(labels.MatchRegexp, "path", "/a\\.b")},
		{m(labels.MatchEqual, "__name__", "nope")},
		{m(labels.MatchRegexp, "job", "API")},
		{m(labels.MatchRegexp, "job", "(?i)API")},
		{m(labels.MatchNotEqual, "env", ""), m(labels.MatchRegexp, "missing", "|x")},
	} {
		// The expectation, computed independently with Prometheus' matchers.
		var want []labels.Labels
		var wantSamples [][]sample
		for i, ls := range sets {
			ok := true
			for _, mm := range sel {
				ok = ok && mm.Matches(ls.Get(mm.Name))
			}
			if ok {
				want = append(want, ls)
				wantSamples = append(wantSamples, []sample{{ms(points[i][0].Time), math.Float64bits(points[i][0].Value)}})
			}
		}
		order := make([]int, len(want))
		for i := range order {
			order[i] = i
		}
		slices.SortFunc(order, func(a, b int) int { return labels.Compare(want[a], want[b]) })

		got := collect(t, querier.Select(ctx, true, nil, sel...))
		require.Len(t, got, len(want), "%v", sel)
		for i, j := range order {
			require.True(t, labels.Equal(want[j], got[i].lset), "%v: %s, want %s", sel, got[i].lset, want[j])
			require.Equal(t, wantSamples[j], got[i].samples, "%v", sel)
		}
	}

	// A selector that matches every series is refused before any request.
	checker.Reset()
	ss := querier.Select(ctx, false, nil, m(labels.MatchEqual, "env", ""), m(labels.MatchRegexp, "job", ".*"))
	require.False(t, ss.Next())
	require.ErrorIs(t, ss.Err(), tablets.ErrInvalidMatcher)
	require.Zero(t, checker.Stats().Requests)

	// Limit, shards and labels-only selects.
	up := m(labels.MatchEqual, "__name__", "up")
	all := collect(t, querier.Select(ctx, false, nil, up))
	require.Len(t, all, 6)
	got := collect(t, querier.Select(ctx, false, &storage.SelectHints{Start: ms(base), End: ms(base.Add(time.Hour)), Limit: 2}, up))
	require.Equal(t, all[:2], got)
	var sharded []gotSeries
	for i := range uint64(3) {
		sharded = append(sharded, collect(t, querier.Select(ctx, true, &storage.SelectHints{Start: ms(base), End: ms(base.Add(time.Hour)), ShardCount: 3, ShardIndex: i}, up))...)
	}
	slices.SortFunc(sharded, func(a, b gotSeries) int { return labels.Compare(a.lset, b.lset) })
	require.Equal(t, all, sharded, "the shards partition the series")
	before := q.Stats()
	checker.Reset()
	got = collect(t, querier.Select(ctx, false, &storage.SelectHints{Start: ms(base), End: ms(base.Add(time.Hour)), Func: "series"}, up))
	require.Len(t, got, 6)
	for i := range got {
		require.True(t, labels.Equal(all[i].lset, got[i].lset))
		require.Empty(t, got[i].samples)
	}
	require.Equal(t, before.LabelSelects+1, q.Stats().LabelSelects)
	labelsOnly := checker.Stats().Requests
	checker.Reset()
	collect(t, querier.Select(ctx, false, nil, up))
	require.Less(t, labelsOnly, checker.Stats().Requests, "a labels-only select reads no point")
}

func TestSelectExactSamples(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	db, _, _ := dbtest.NewDB(t, &tsdb.Options{Layout: chunkedLayout})
	values := []float64{
		1.5,
		math.Float64frombits(staleNaN),
		math.Float64frombits(0x7ff8000000000001), // a NaN of another payload
		math.Inf(1), math.Inf(-1),
		math.Copysign(0, -1),
		5e-324, // the smallest subnormal
		math.MaxFloat64,
		0.1 + 0.2,
		math.Float64frombits(staleNaN),
	}
	offsets := []time.Duration{1, 2, 999, 1007, 60_000, 60_001, 3_599_999, 3_600_000, 7_200_003, 86_399_999} // ms
	var pts []tablets.Point
	var want []sample
	for i, v := range values {
		at := base.Add(offsets[i] * time.Millisecond)
		pts = append(pts, tablets.Point{Time: at, Value: v})
		want = append(want, sample{ms(at), math.Float64bits(v)})
	}
	lset := labels.FromStrings("__name__", "exact", "k", "v")
	write(t, db, []labels.Labels{lset}, [][]tablets.Point{pts})
	q, err := New(db, nil)
	require.NoError(t, err)
	ctx := context.Background()
	sel := labels.MustNewMatcher(labels.MatchEqual, "__name__", "exact")
	read := func(mint, maxt int64, hints *storage.SelectHints) []sample {
		querier, err := q.Querier(mint, maxt)
		require.NoError(t, err)
		defer querier.Close()
		got := collect(t, querier.Select(ctx, false, hints, sel))
		if len(got) == 0 {
			return nil
		}
		require.Len(t, got, 1)
		require.True(t, labels.Equal(lset, got[0].lset))
		return got[0].samples
	}
	first, last := want[0].t, want[len(want)-1].t
	require.Equal(t, want, read(first, last, nil), "bit for bit, both ends included")
	require.Equal(t, want[1:len(want)-1], read(first+1, last-1, nil), "ends excluded")
	require.Equal(t, want[2:4], read(want[2].t, want[3].t, nil))
	require.Equal(t, want[4:5], read(want[4].t, want[4].t, nil), "a single millisecond")
	require.Nil(t, read(want[3].t+1, want[4].t-1, nil), "no point: no series")
	require.Equal(t, want, read(math.MinInt64, math.MaxInt64, nil), "all time")
	// Hints narrow the querier's range, as in Prometheus' TSDB.
	require.Equal(t, want[3:6], read(math.MinInt64, math.MaxInt64, &storage.SelectHints{Start: want[3].t, End: want[5].t}))
	// A raw select at a step too fine for any tier.
	require.Equal(t, want, read(first, last, &storage.SelectHints{Start: first, End: last, Step: 15_000, Func: "rate", Range: 300_000}))
	require.Equal(t, Stats{RawSelects: 8, Series: 7, Samples: 10 + 8 + 2 + 1 + 10 + 3 + 10}, paths(q.Stats()))
}

func TestLabelNamesValues(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	db, _, _ := dbtest.NewDB(t, &tsdb.Options{Layout: chunkedLayout})
	sets := []labels.Labels{
		labels.FromStrings("__name__", "up", "job", "api", "env", "prod"),
		labels.FromStrings("__name__", "up", "job", "web"),
		labels.FromStrings("__name__", "cpu", "job", "db", "core", "0"),
	}
	pts := make([][]tablets.Point, len(sets))
	for i := range pts {
		pts[i] = []tablets.Point{{Time: base, Value: 1}}
	}
	write(t, db, sets, pts)
	q, err := New(db, nil)
	require.NoError(t, err)
	ctx := context.Background()
	querier, err := q.Querier(ms(base), ms(base))
	require.NoError(t, err)
	defer querier.Close()

	names, _, err := querier.LabelNames(ctx, nil)
	require.NoError(t, err)
	require.Equal(t, []string{"__name__", "core", "env", "job"}, names)
	names, _, err = querier.LabelNames(ctx, nil, labels.MustNewMatcher(labels.MatchEqual, "__name__", "up"))
	require.NoError(t, err)
	require.Equal(t, []string{"__name__", "env", "job"}, names)
	names, _, err = querier.LabelNames(ctx, &storage.LabelHints{Limit: 2})
	require.NoError(t, err)
	require.Equal(t, []string{"__name__", "core"}, names)

	vals, _, err := querier.LabelValues(ctx, "job", nil)
	require.NoError(t, err)
	require.Equal(t, []string{"api", "db", "web"}, vals)
	vals, _, err = querier.LabelValues(ctx, "job", nil, labels.MustNewMatcher(labels.MatchRegexp, "__name__", "up"), labels.MustNewMatcher(labels.MatchEqual, "env", ""))
	require.NoError(t, err)
	require.Equal(t, []string{"web"}, vals)
	vals, _, err = querier.LabelValues(ctx, "env", &storage.LabelHints{Limit: 1})
	require.NoError(t, err)
	require.Equal(t, []string{"prod"}, vals)
	vals, _, err = querier.LabelValues(ctx, "nope", nil)
	require.NoError(t, err)
	require.Empty(t, vals)

	// A range with no raw table (the index's granularity is the raw period).
	later, err := q.Querier(ms(base.Add(30*24*time.Hour)), ms(base.Add(31*24*time.Hour)))
	require.NoError(t, err)
	names, _, err = later.LabelNames(ctx, nil)
	require.NoError(t, err)
	require.Empty(t, names)
}

// tierDB writes n counters (or gauges, with some staleness markers) of a sample every
// interval over three hours and rolls them up into a minute tier.
func tierDB(t *testing.T, n int, interval time.Duration, gauges bool) (*tsdb.DB, *azurite.Checker, []labels.Labels, [][]tablets.Point) {
	t.Helper()
	db, _, checker := dbtest.NewDB(t, &tsdb.Options{Layout: chunkedLayout, Tiers: []tsdb.Tier{{Step: time.Minute}}})
	rng := rand.New(rand.NewPCG(1, 2))
	sets := make([]labels.Labels, n)
	pts := make([][]tablets.Point, n)
	for i := range n {
		sets[i] = labels.FromStrings("__name__", "requests_total", "instance", string(rune('a'+i)))
		perSecond := 0.5 + float64(i)
		c := 1000.0 * float64(i)
		for at := base; at.Before(base.Add(3 * time.Hour)); at = at.Add(interval) {
			switch {
			case !gauges:
				pts[i] = append(pts[i], tablets.Point{Time: at, Value: c})
				c += perSecond * interval.Seconds() * (0.95 + 0.1*rng.Float64())
			case len(pts[i])%37 == 5:
				pts[i] = append(pts[i], tablets.Point{Time: at, Value: math.Float64frombits(staleNaN)})
			default:
				pts[i] = append(pts[i], tablets.Point{Time: at, Value: 100*float64(i) + 10*rng.NormFloat64()})
			}
		}
	}
	write(t, db, sets, pts)
	require.NoError(t, db.Rollup(context.Background(), base, base.Add(3*time.Hour)))
	// As the rollup loops do: the slices the late points marked dirty are rolled up again,
	// and their progress recorded (the estimate counts on the tier before it).
	_, err := db.RollupFlagged(context.Background())
	require.NoError(t, err)
	require.NoError(t, db.Tasks().SetCovered(context.Background(), tsdb.TaskRollup, base.Add(3*time.Hour)))
	checker.Reset()
	return db, checker, sets, pts
}

// A tier Select returns a sample per whole window, from Start's window to End's (excluded):
// at its last millisecond, of the window's Min, Max or Last, exactly as computed from the
// points (NaNs, staleness markers included, are no samples in a window).
func TestTierSelectSamples(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	db, _, sets, pts := tierDB(t, 3, 15*time.Second, true)
	q, err := New(db, &Options{PreferTiers: true})
	require.NoError(t, err)
	ctx := context.Background()
	start := base.Add(17*time.Minute + 123*time.Millisecond)
	end := base.Add(2*time.Hour + 30*time.Minute + 7*time.Second + 500*time.Millisecond)
	querier, err := q.Querier(ms(start), ms(end))
	require.NoError(t, err)
	defer querier.Close()
	for _, c := range []struct {
		fn   string
		pick func(vs []float64) float64
	}{
		{"min_over_time", func(vs []float64) float64 { return slices.Min(vs) }},
		{"max_over_time", func(vs []float64) float64 { return slices.Max(vs) }},
		{"rate", func(vs []float64) float64 { return vs[len(vs)-1] }},
		{"", func(vs []float64) float64 { return vs[len(vs)-1] }},
	} {
		hints := &storage.SelectHints{Start: ms(start), End: ms(end), Step: ms(base.Add(time.Hour)) - ms(base), Func: c.fn}
		if c.fn != "" {
			hints.Range = (10 * time.Minute).Milliseconds()
		}
		before := q.Stats().TierSelects
		got := collect(t, querier.Select(ctx, false, hints, labels.MustNewMatcher(labels.MatchEqual, "__name__", "requests_total")))
		require.Equal(t, before+1, q.Stats().TierSelects, c.fn)
		require.Len(t, got, len(sets))
		for i := range sets {
			require.True(t, labels.Equal(sets[i], got[i].lset))
			// The model: the points of the whole windows from Start's window to End's.
			var want []sample
			for ws := start.Truncate(time.Minute); ws.Before(end.Truncate(time.Minute)); ws = ws.Add(time.Minute) {
				var vs []float64
				for _, p := range pts[i] {
					if !p.Time.Before(ws) && p.Time.Before(ws.Add(time.Minute)) && !math.IsNaN(p.Value) {
						vs = append(vs, p.Value)
					}
				}
				if len(vs) > 0 {
					want = append(want, sample{ms(ws.Add(time.Minute)) - 1, math.Float64bits(c.pick(vs))})
				}
			}
			require.Len(t, want, 133, "from 0:17 to 2:30")
			require.Equal(t, want, got[i].samples, "%q %s", c.fn, sets[i])
		}
	}
	// count_over_time needs every point: raw.
	before := q.Stats()
	got := collect(t, querier.Select(ctx, false, &storage.SelectHints{Start: ms(start), End: ms(end), Step: 3_600_000, Range: 600_000, Func: "count_over_time"},
		labels.MustNewMatcher(labels.MatchEqual, "__name__", "requests_total")))
	require.Equal(t, before.RawSelects+1, q.Stats().RawSelects)
	require.Equal(t, before.TierSelects, q.Stats().TierSelects)
	require.Len(t, got, len(sets))
	require.Equal(t, ms(start.Add(15*time.Second-123*time.Millisecond)), got[0].samples[0].t, "raw samples")
}

// rate over a tier agrees with rate over raw points, and the default Queryable reads the
// path that costs fewer bytes, as measured at the transport (or one within a quarter of it,
// where the two are close). At a sample every 15 s a minute window holds 4 points; at a
// sample a second, 60, and the tier costs fewer bytes.
func TestPromQLRateTierVsRaw(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	for _, c := range []struct {
		series      int
		interval    time.Duration
		tierCheaper bool // the tier must read fewer bytes
		tolerance   float64
		description string
	}{
		{12, 15 * time.Second, false, 0.02, "15 s"},
		{2, time.Second, true, 0.02, "1 s"},
	} {
		t.Run(c.description, func(t *testing.T) {
			db, checker, _, _ := tierDB(t, c.series, c.interval, false)
			engine := promql.NewEngine(promql.EngineOpts{MaxSamples: 5e7, Timeout: time.Minute, LookbackDelta: 5 * time.Minute})
			run := func(q storage.Queryable, expr string, step time.Duration) (promql.Matrix, azurite.Stats) {
				t.Helper()
				checker.Reset()
				out := rangeMatrix(t, engine, q, expr, base.Add(10*time.Minute), base.Add(2*time.Hour+50*time.Minute), step)
				return out, checker.Stats()
			}
			raw, err := New(db, &Options{DisableTiers: true})
			require.NoError(t, err)
			tier, err := New(db, &Options{PreferTiers: true})
			require.NoError(t, err)
			byCost, err := New(db, &Options{MaxResolution: tsdb.AnyResolution}) // approximate answers where cheaper
			require.NoError(t, err)

			const expr = `rate(requests_total[5m])`
			rawM, rawCost := run(raw, expr, time.Hour)
			tierM, tierCost := run(tier, expr, time.Hour)
			_, choiceCost := run(byCost, expr, time.Hour)
			require.Equal(t, Stats{RawSelects: 1, Series: uint64(c.series), Samples: uint64(c.series) * uint64((2*time.Hour+45*time.Minute)/c.interval)}, paths(raw.Stats()), "(0:05, 2:50]")
			require.Equal(t, Stats{TierSelects: 1, Series: uint64(c.series), Samples: uint64(c.series) * 165}, paths(tier.Stats()), "the tier path: a sample a minute")

			// A counter's last value per minute instead of every sample: the counters grow
			// at a rate that varies by ±5% a sample.
			require.Len(t, rawM, c.series)
			require.Len(t, tierM, c.series)
			worst := 0.0
			for i := range rawM {
				require.True(t, labels.Equal(rawM[i].Metric, tierM[i].Metric))
				require.Len(t, rawM[i].Floats, 3)
				require.Len(t, tierM[i].Floats, 3)
				for j, p := range rawM[i].Floats {
					tp := tierM[i].Floats[j]
					require.Equal(t, p.T, tp.T)
					require.Greater(t, p.F, 0.0)
					require.InEpsilon(t, p.F, tp.F, c.tolerance, "%s at %d", rawM[i].Metric, p.T)
					worst = max(worst, math.Abs(tp.F-p.F)/p.F)
				}
			}
			st := byCost.Stats()
			t.Logf("largest relative difference of tier and raw rates: %.4f", worst)
			t.Logf("rate(x[5m]) over 2 h 45 min of a sample every %v, %d series, step 1 h: raw %d requests %d response bytes; tier %d requests %d response bytes; estimates raw %d tier %d bytes",
				c.interval, c.series, rawCost.Requests, rawCost.ResponseBytes, tierCost.Requests, tierCost.ResponseBytes, st.EstimatedRawBytes, st.EstimatedTierBytes)
			if c.tierCheaper {
				require.Less(t, tierCost.ResponseBytes, rawCost.ResponseBytes, "the tier costs fewer bytes")
				require.Equal(t, uint64(1), st.TierSelects, "and the estimate knows it")
			}
			// The choice by cost: the path that reads fewer bytes, or one close to it.
			require.Equal(t, uint64(1), st.TierSelects+st.RawSelects)
			chosen, other := rawCost, tierCost
			if st.TierSelects == 1 {
				chosen, other = tierCost, rawCost
			}
			require.Equal(t, chosen.Requests+1, choiceCost.Requests, "the chosen path's reads, and the rollup progress")
			require.LessOrEqual(t, float64(chosen.ResponseBytes), 1.25*float64(other.ResponseBytes), "estimates raw %d, tier %d bytes", st.EstimatedRawBytes, st.EstimatedTierBytes)

			// At a 4 min step the tier is too coarse: raw, and the same answer.
			rawM, _ = run(raw, expr, 4*time.Minute)
			fineM, _ := run(tier, expr, 4*time.Minute)
			require.Equal(t, uint64(1), tier.Stats().RawSelects)
			require.Equal(t, rawM, fineM)
		})
	}
}

// A Select of several raw batches reads the staged points once a group of batches: the same
// answer as one batch, bit for bit, with fewer requests than a staging read a batch.
func TestSelectSharesStagedRead(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	db, _, checker := dbtest.NewDB(t, &tsdb.Options{Layout: chunkedLayout})
	var sets []labels.Labels
	var points [][]tablets.Point
	for i := range 30 {
		sets = append(sets, labels.FromStrings("__name__", "shared", "i", string(rune('a'+i%26))+string(rune('a'+i/26))))
		var pts []tablets.Point
		for j := range 5 {
			pts = append(pts, tablets.Point{Time: base.Add(time.Duration(j) * 15 * time.Second), Value: float64(i*10 + j)})
		}
		points = append(points, pts)
	}
	write(t, db, sets, points) // 5 points a series: staged, not folded
	sel := labels.MustNewMatcher(labels.MatchEqual, "__name__", "shared")
	read := func(batch int) ([]gotSeries, Stats, int64) {
		q, err := New(db, &Options{BatchSize: batch, DisableTiers: true})
		require.NoError(t, err)
		querier, err := q.Querier(ms(base), ms(base.Add(time.Hour)))
		require.NoError(t, err)
		defer querier.Close()
		checker.Reset()
		got := collect(t, querier.Select(context.Background(), false, nil, sel))
		return got, q.Stats(), checker.Stats().Requests
	}
	one, oneStats, oneRequests := read(64)
	require.Len(t, one, 30)
	for _, s := range one {
		require.Len(t, s.samples, 5, s.lset.String())
	}
	require.Zero(t, oneStats.SharedStagedReads, "one batch reads its own staged points")
	for _, batch := range []int{1, 4} {
		got, st, requests := read(batch)
		require.Equal(t, one, got, "BatchSize %d", batch)
		// Groups of 16 batches share a read: 30 batches of 1 series are two
		// groups, 8 batches of 4 one.
		units := (30 + batch - 1) / batch
		groups := (units + 16 - 1) / 16 // tsdb shares a staging read among 16 units
		require.Equal(t, uint64(groups), st.SharedStagedReads, "BatchSize %d", batch)
		// A batch's raw reads (a request per 5 series) and a staging read a group: with a
		// staging read a batch, a request more a batch but a group's.
		t.Logf("BatchSize %d: %d requests; one batch: %d", batch, requests, oneRequests)
		require.Less(t, requests, oneRequests+int64(units-groups+1), "BatchSize %d: a staging read a batch?", batch)
	}

	// Tier batches share it too: their windows hold the staged points, the same with one
	// batch reading its own.
	tierRead := func(batch int) ([]gotSeries, Stats) {
		q, err := New(db, &Options{BatchSize: batch, PreferTiers: true})
		require.NoError(t, err)
		start, end := base.Add(-time.Hour), base.Add(time.Hour)
		querier, err := q.Querier(ms(start), ms(end))
		require.NoError(t, err)
		defer querier.Close()
		hints := &storage.SelectHints{Start: ms(start), End: ms(end), Step: 3_600_000, Range: 600_000, Func: "max_over_time"}
		return collect(t, querier.Select(context.Background(), false, hints, sel)), q.Stats()
	}
	oneTier, st := tierRead(64)
	require.Equal(t, uint64(1), st.TierSelects)
	require.Zero(t, st.SharedStagedReads)
	require.Len(t, oneTier, 30)
	for _, s := range oneTier {
		// 5 points 15 s apart from base: windows of a minute, the max at each one's end.
		l := s.lset.Get("i")
		i := int(l[0]-'a') + 26*int(l[1]-'a')
		require.Equal(t, []sample{{ms(base.Add(time.Minute)) - 1, math.Float64bits(float64(i*10 + 3))},
			{ms(base.Add(2*time.Minute)) - 1, math.Float64bits(float64(i*10 + 4))}}, s.samples, s.lset.String())
	}
	shared, st := tierRead(4)
	require.Equal(t, uint64(1), st.TierSelects)
	require.Equal(t, uint64(1), st.SharedStagedReads, "8 tier batches, one group, one staging read")
	require.Equal(t, oneTier, shared)
}
