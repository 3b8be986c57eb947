package tsdb

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets/rounding"
)

// A tier Select and an Evaluate of many series (160 of a database's 200) read them in key
// order, each run by the range of keys it spans: the raw points of the windows the tier
// cannot give (the last half hour, not rolled up) one query of the raw table a unit, and
// the tier blocks one scan of the unit's partitions, where runs in labels' order, spread
// over the whole table, take a request per 13 series of each. Every answer is the tier's
// windows' and the raw samples', and the series come in labels' order.
func TestTierReadsByKeyRange(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	ctx := context.Background()
	base := querierBase.Add(26 * time.Hour) // a raw period begins the day before
	now := base.Add(2 * time.Hour)
	k := newKeyRangeDB(t, "kt", now, base)
	k.opts.Tiers = []Tier{{Step: time.Minute}}
	// The rollup computes one series at a time (its writers take turns in the one slot):
	// the windows the reads below check are what it computed.
	k.opts.RollupCompute = NewComputeLimit(1)
	db := k.open(t, false)
	all, _, _ := denseSeries(t, db, 200, 160, base, 480, 15*time.Second) // two hours
	require.NoError(t, db.WriteMany(ctx, all))
	_, err := db.Fold(ctx)
	require.NoError(t, err)
	rolledUp := now.Add(-30 * time.Minute)
	require.NoError(t, db.Rollup(ctx, base, rolledUp))
	require.Equal(t, 1, k.opts.RollupCompute.Peak(), "the rollup's computations at once")
	// A packed rollup has a worker for the slot and 4 to send: no more wait for the slot.
	require.LessOrEqual(t, k.opts.RollupCompute.PeakCallers(), 5, "the rollup's workers in the limit at once")
	k.reads.table = k.names.RawTable(k.names.PeriodOf(base))
	k.reads.second = k.names.TierTable(time.Minute, 0)[:len(k.name)+len("t60p")] // the minute tier's tables
	dense := Matcher{Type: MatchEqual, Name: "__name__", Value: "dense_total"}
	reset := func() {
		k.reads.n.Store(0)
		k.reads.nSecond.Store(0)
	}

	// A 10-minute step of sum(dense_total): the minute tier's last value of each whole
	// window, at its last millisecond.
	from, to := base.Add(10*time.Minute), now.Add(5*time.Minute)
	want := map[string][]string{}
	for i, sp := range all[:160] {
		label := fmt.Sprintf("%03d", i)
		last := map[time.Time]string{}
		var windows []time.Time
		for _, p := range sp.Points {
			ws := rounding.Floor(p.Time, time.Minute)
			if ws.Before(from) || !ws.Before(rounding.Floor(to, time.Minute)) {
				continue
			}
			if _, ok := last[ws]; !ok {
				windows = append(windows, ws)
			}
			last[ws] = fmt.Sprintf("%d:%v", ws.Add(time.Minute).UnixMilli()-1, p.Value)
		}
		for _, ws := range windows {
			want[label] = append(want[label], last[ws])
		}
	}
	q, err := k.open(t, false).Queryable(&QueryOptions{PreferTiers: true})
	require.NoError(t, err)
	reset()
	got, order, _ := k.selectHinted(t, q, &SelectHints{Step: 10 * time.Minute, Func: "sum"}, "dense_total", from, to)
	t.Logf("tier Select: %d queries of the raw table, %d of the tier's", k.reads.n.Load(), k.reads.nSecond.Load())
	require.Equal(t, want, got, "the minute windows' last values")
	require.True(t, slices.IsSortedFunc(order, CompareLabels), "series in labels' order")
	require.Equal(t, uint64(1), q.Stats().TierSelects)
	// Three units of 64 series at most: a query of the raw table each (their raw points
	// after the rollup) and one of the tier table (in labels' order they took 13 and 6).
	require.LessOrEqual(t, k.reads.n.Load(), int64(3), "raw table queries")
	require.LessOrEqual(t, k.reads.nSecond.Load(), int64(3), "tier table queries")
	require.Positive(t, k.reads.nSecond.Load(), "tier table queries")

	// rate(dense_total[10m]) every 10 minutes, from the minute tier exactly: what the same
	// function gives over every raw sample.
	e := &Evaluation{Function: FuncRate, Range: 10 * time.Minute, Start: base.Add(30 * time.Minute), End: now, Step: 10 * time.Minute}
	raw, err := k.open(t, false).Queryable(&QueryOptions{DisableTiers: true})
	require.NoError(t, err)
	wantRate := map[string][]float64{}
	for rs, err := range raw.Querier(e.Start.Add(-e.Range), e.End.Add(time.Millisecond)).Select(ctx, nil, dense) {
		require.NoError(t, err)
		s := &Series{Series: rs.Series, Labels: rs.Labels}
		evalSamples(e, rs, s)
		s.finish()
		it := s.Iterator()
		for it.Next() {
			wantRate[s.Labels.Get("i")] = append(wantRate[s.Labels.Get("i")], it.At().F)
		}
	}
	require.Len(t, wantRate, 160)
	q, err = k.open(t, false).Queryable(&QueryOptions{PreferExactTiers: true})
	require.NoError(t, err)
	reset()
	gotRate, order := evaluateRates(t, q, e, dense)
	t.Logf("Evaluate: %d queries of the raw table, %d of the tier's", k.reads.n.Load(), k.reads.nSecond.Load())
	require.True(t, slices.IsSortedFunc(order, CompareLabels), "series in labels' order")
	equalRates(t, wantRate, gotRate)
	st := q.Stats()
	require.Equal(t, uint64(1), st.ExactEvaluations)
	// One batch (160 series): one query of the raw table for their raw points after the
	// rollup, and one for the series whose windows cannot answer exactly (a sample on a
	// window's first millisecond: those of i a multiple of 15), where labels' order took
	// 13 and one.
	require.Equal(t, uint64(11), st.ExactRawSeries)
	require.LessOrEqual(t, k.reads.n.Load(), int64(2), "raw table queries")
	require.LessOrEqual(t, k.reads.nSecond.Load(), int64(2), "tier table queries")
	require.Positive(t, k.reads.nSecond.Load(), "tier table queries")

	// Smaller reads, several at once (10 batches of 16 series, 2 at a time): the same
	// answers, in labels' order.
	q, err = k.open(t, false).Queryable(&QueryOptions{PreferExactTiers: true})
	require.NoError(t, err)
	q.exactLimit = exactLimit{windows: 4000, series: 16}
	size, atOnce := exactBatches(e, Tier{Step: time.Minute}, q.opts.Concurrency, q.exactLimit)
	require.Equal(t, []int{16, 2}, []int{size, atOnce})
	gotRate, order = evaluateRates(t, q, e, dense)
	require.True(t, slices.IsSortedFunc(order, CompareLabels), "series in labels' order")
	equalRates(t, wantRate, gotRate)
}

// evaluateRates evaluates e over the series of m with q: their values by label i, and
// their labels in the order given.
func evaluateRates(t *testing.T, q *Queryable, e *Evaluation, m Matcher) (map[string][]float64, []Labels) {
	t.Helper()
	seq, err := q.Querier(e.Start.Add(-e.Range), e.End.Add(time.Millisecond)).Evaluate(context.Background(), e, m)
	require.NoError(t, err)
	got := map[string][]float64{}
	var order []Labels
	for s, err := range seq {
		require.NoError(t, err)
		order = append(order, s.Labels)
		it := s.Iterator()
		for it.Next() {
			got[s.Labels.Get("i")] = append(got[s.Labels.Get("i")], it.At().F)
		}
	}
	return got, order
}

// equalRates requires got to hold want's series and values, within 1e-9 relative.
func equalRates(t *testing.T, want, got map[string][]float64) {
	t.Helper()
	require.Equal(t, len(want), len(got))
	for label, ws := range want {
		require.Len(t, got[label], len(ws), label)
		for j, w := range ws {
			require.LessOrEqual(t, math.Abs(got[label][j]-w), 1e-9*math.Abs(w), "%s step %d: %v, want %v", label, j, got[label][j], w)
		}
	}
}

// An Evaluate's reads: at most 256 series each, and the windows of those under way at
// most defaultExactLimit's; several at once only where whole reads fit.
func TestExactBatches(t *testing.T) {
	at := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
	ev := func(span, rng time.Duration) *Evaluation {
		return &Evaluation{Function: FuncRate, Range: rng, Start: at, End: at.Add(span), Step: 10 * time.Minute}
	}
	for _, c := range []struct {
		e            *Evaluation
		tier         time.Duration
		size, atOnce int
	}{
		{ev(7*24*time.Hour, 10*time.Minute), time.Minute, 24, 1}, // 10,091 windows a series
		{ev(time.Hour, 5*time.Minute), time.Minute, 256, 4},      // 66
		{ev(6*time.Hour, 5*time.Minute), time.Minute, 256, 2},    // 366
		{ev(7*24*time.Hour, time.Hour), time.Hour, 256, 4},       // 170
		{ev(400*24*time.Hour, time.Hour), time.Minute, 1, 1},     // more windows than the bound
	} {
		size, atOnce := exactBatches(c.e, Tier{Step: c.tier}, 4, defaultExactLimit)
		require.Equal(t, []int{c.size, c.atOnce}, []int{size, atOnce}, "%v of %v", c.e.End.Sub(c.e.Start), c.tier)
		n := int(c.e.End.Sub(c.e.Start.Add(-c.e.Range))/c.tier) + 1
		if size > 1 { // else one series holds more
			require.LessOrEqual(t, size*atOnce*n, defaultExactLimit.windows, "windows held at once")
		}
	}
	size, atOnce := exactBatches(ev(time.Hour, 5*time.Minute), Tier{Step: time.Minute}, 1, defaultExactLimit)
	require.Equal(t, []int{256, 1}, []int{size, atOnce}, "Concurrency 1")
}
