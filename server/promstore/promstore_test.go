package promstore

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/tsdb"
)

// staleNaN is Prometheus' staleness marker.
const staleNaN = 0x7ff0000000000002

func TestNewValidates(t *testing.T) {
	_, err := New(nil, nil)
	require.ErrorIs(t, err, tablets.ErrInvalidOptions)
	for _, o := range []Options{{BatchSize: -1}, {Concurrency: -1}, {LookbackDelta: -1}, {MinTierStep: -1}, {RawBytesPerSample: -1}, {RawBytesPerSample: math.NaN()}, {RawBytesPerSample: math.Inf(1)}} {
		_, err := withDefaults(&o)
		require.ErrorIs(t, err, tablets.ErrInvalidOptions, "%+v", o)
	}
	o, err := withDefaults(nil)
	require.NoError(t, err)
	require.Equal(t, Options{BatchSize: DefaultBatchSize, Concurrency: DefaultConcurrency, LookbackDelta: DefaultLookbackDelta}, o)
	o, err = withDefaults(&Options{BatchSize: 3, MinTierStep: time.Hour})
	require.NoError(t, err)
	require.Equal(t, 3, o.BatchSize)
	require.Equal(t, time.Hour, o.MinTierStep)
}

func TestTimeRange(t *testing.T) {
	from, to, ok := timeRange(1000, 1999)
	require.True(t, ok)
	require.Equal(t, time.UnixMilli(1000).UTC(), from)
	require.Equal(t, time.UnixMilli(2000).UTC(), to, "maxt is inclusive: to is maxt+1ms")

	from, to, ok = timeRange(5, 5)
	require.True(t, ok)
	require.Equal(t, time.Millisecond, to.Sub(from))

	_, _, ok = timeRange(6, 5)
	require.False(t, ok)

	// Prometheus' "all time": clamped to what tablets stores.
	from, to, ok = timeRange(math.MinInt64, math.MaxInt64)
	require.True(t, ok)
	require.Equal(t, tablets.MinTime, from)
	require.Equal(t, tablets.MaxTime, to)

	_, _, ok = timeRange(math.MinInt64, -1)
	require.False(t, ok, "before the epoch nothing is stored")
}

func TestMatcherConversion(t *testing.T) {
	for _, typ := range []labels.MatchType{labels.MatchEqual, labels.MatchNotEqual, labels.MatchRegexp, labels.MatchNotRegexp} {
		m := labels.MustNewMatcher(typ, "job", "a|b")
		tm, err := MatcherToTSDB(m)
		require.NoError(t, err)
		require.Equal(t, "job", tm.Name)
		require.Equal(t, "a|b", tm.Value)
		require.Equal(t, m.Type.String(), tm.Type.String(), "same operator")
		back, err := MatcherFromTSDB(tm)
		require.NoError(t, err)
		require.Equal(t, m.String(), back.String())
	}
	_, err := MatcherToTSDB(&labels.Matcher{Type: labels.MatchType(9), Name: "a"})
	require.ErrorIs(t, err, tablets.ErrInvalidMatcher)
	_, err = MatcherFromTSDB(tsdb.Matcher{Type: tsdb.MatchType(9), Name: "a"})
	require.ErrorIs(t, err, tablets.ErrInvalidMatcher)
}

func TestLabelsConversion(t *testing.T) {
	ls := labels.FromStrings("__name__", "up", "job", "a", "zone", "z\n\"1\"")
	tl := LabelsToTSDB(ls)
	require.Equal(t, tsdb.LabelsFromStrings("__name__", "up", "job", "a", "zone", "z\n\"1\""), tl)
	require.NoError(t, tl.Validate())
	require.True(t, labels.Equal(ls, LabelsFromTSDB(tl)))
}

func TestSelective(t *testing.T) {
	require.False(t, selective(nil))
	require.False(t, selective([]*labels.Matcher{labels.MustNewMatcher(labels.MatchRegexp, "a", ".*"), labels.MustNewMatcher(labels.MatchEqual, "b", "")}))
	require.True(t, selective([]*labels.Matcher{labels.MustNewMatcher(labels.MatchRegexp, "a", ".*"), labels.MustNewMatcher(labels.MatchRegexp, "b", ".+")}))
	require.True(t, selective([]*labels.Matcher{labels.MustNewMatcher(labels.MatchNotEqual, "a", "")}))
}

func TestTierPlan(t *testing.T) {
	tiers := []tsdb.Tier{{Step: time.Minute}, {Step: time.Hour}}
	o := Options{LookbackDelta: 5 * time.Minute}
	h := func(fn string, step, rng time.Duration) *storage.SelectHints {
		return &storage.SelectHints{Func: fn, Step: step.Milliseconds(), Range: rng.Milliseconds()}
	}
	for _, c := range []struct {
		hints *storage.SelectHints
		step  time.Duration // 0: raw
		pick  pick
	}{
		{nil, 0, 0},
		{h("rate", 0, 5*time.Minute), 0, 0}, // instant query
		{h("rate", time.Hour, 5*time.Minute), time.Minute, pickLast},
		{h("rate", 4*time.Minute, 5*time.Minute), 0, 0},              // step under 5 windows
		{h("rate", time.Hour, 4*time.Minute), 0, 0},                  // range under 5 windows
		{h("rate", 24*time.Hour, 24*time.Hour), time.Hour, pickLast}, // the coarsest that fits
		{h("increase", 5*time.Minute, 5*time.Minute), time.Minute, pickLast},
		{h("min_over_time", time.Hour, time.Hour), time.Minute, pickMin},
		{h("max_over_time", 5*time.Hour, 5*time.Hour), time.Hour, pickMax},
		{h("last_over_time", time.Hour, 10*time.Minute), time.Minute, pickLast},
		{h("count_over_time", time.Hour, time.Hour), 0, 0},
		{h("sum_over_time", time.Hour, time.Hour), 0, 0},
		{h("avg_over_time", time.Hour, time.Hour), 0, 0},
		{h("quantile_over_time", time.Hour, time.Hour), 0, 0},
		{h("absent_over_time", time.Hour, time.Hour), 0, 0},
		{h("", time.Hour, 0), time.Minute, pickLast},       // the hour tier is over the lookback
		{h("sum", 24*time.Hour, 0), time.Minute, pickLast}, // an aggregation of an instant selector
		{h("timestamp", time.Hour, 0), 0, 0},
		{h("", 4*time.Minute, 0), 0, 0},
	} {
		tier, p, ok := tierPlan(tiers, c.hints, o, false)
		require.Equal(t, c.step != 0, ok, "%+v", c.hints)
		if ok {
			require.Equal(t, c.step, tier.Step, "%+v", c.hints)
			require.Equal(t, c.pick, p, "%+v", c.hints)
		}
	}
	_, _, ok := tierPlan(nil, h("rate", time.Hour, time.Hour), o, false)
	require.False(t, ok, "no tier")
	o.MinTierStep = time.Hour
	_, _, ok = tierPlan(tiers, h("rate", time.Hour, time.Hour), o, false)
	require.False(t, ok, "the minute tier is under MinTierStep")
	tier, _, ok := tierPlan(tiers, h("rate", 5*time.Hour, 5*time.Hour), o, false)
	require.True(t, ok)
	require.Equal(t, time.Hour, tier.Step)
}

// samplesOf reads an iterator's samples as (time, float bits) pairs.
func samplesOf(t *testing.T, it chunkenc.Iterator) [][2]int64 {
	t.Helper()
	var out [][2]int64
	for it.Next() == chunkenc.ValFloat {
		ts, v := it.At()
		require.Equal(t, ts, it.AtT())
		out = append(out, [2]int64{ts, int64(math.Float64bits(v))})
	}
	require.NoError(t, it.Err())
	return out
}

func TestMemSeries(t *testing.T) {
	s := &memSeries{}
	s.append(1, 1)
	s.append(2, math.Float64frombits(staleNaN))
	s.append(2, 5) // same millisecond: the later point wins
	s.append(3, math.Float64frombits(staleNaN))
	s.append(3, math.Inf(-1))
	s.append(3, math.Float64frombits(staleNaN))
	s.append(1, 9) // out of order: dropped
	s.flush()
	require.Equal(t, 3, s.n)
	require.Equal(t, [][2]int64{
		{1, int64(math.Float64bits(1))},
		{2, int64(math.Float64bits(5))},
		{3, staleNaN},
	}, samplesOf(t, s.Iterator(nil)))
}

func TestMemSeriesManyChunks(t *testing.T) {
	s := &memSeries{}
	n := 2*maxChunkSamples + 10
	for i := range n {
		s.append(int64(i)*10, float64(i)*0.5)
	}
	s.flush()
	require.Len(t, s.chunks, 3)
	got := samplesOf(t, s.Iterator(nil))
	require.Len(t, got, n)
	for i, g := range got {
		require.Equal(t, [2]int64{int64(i) * 10, int64(math.Float64bits(float64(i) * 0.5))}, g)
	}
	it := s.Iterator(nil)
	require.Equal(t, chunkenc.ValFloat, it.Seek(int64(maxChunkSamples)*10+5))
	ts, v := it.At()
	require.Equal(t, int64(maxChunkSamples+1)*10, ts)
	require.Equal(t, float64(maxChunkSamples+1)*0.5, v)
	require.Equal(t, chunkenc.ValNone, it.Seek(int64(n)*10))
}

// The pipeline hands out units in order, whatever order they finish in, and stops at the
// limit or the first error.
func TestPipeline(t *testing.T) {
	q := &Queryable{}
	series := func(i int) []*memSeries {
		s := &memSeries{lset: labels.FromStrings("i", string(rune('a'+i)))}
		s.append(int64(i), 1)
		s.flush()
		return []*memSeries{s}
	}
	fetch := func(ctx context.Context, i int) ([]*memSeries, error) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		time.Sleep(time.Duration(5-i) * time.Millisecond) // the later finish first
		return series(i), nil
	}
	collect := func(ss storage.SeriesSet) []string {
		var out []string
		for ss.Next() {
			out = append(out, ss.At().Labels().Get("i"))
		}
		return out
	}
	ctx := context.Background()
	ss := newPipeline(ctx, func() {}, q, 5, 2, fetch, 0)
	require.Equal(t, []string{"a", "b", "c", "d", "e"}, collect(ss))
	require.NoError(t, ss.Err())
	require.Equal(t, uint64(5), q.Stats().Series)

	ss = newPipeline(ctx, func() {}, q, 5, 2, fetch, 2)
	require.Equal(t, []string{"a", "b"}, collect(ss))
	require.NoError(t, ss.Err())

	boom := errors.New("boom")
	failing := func(ctx context.Context, i int) ([]*memSeries, error) {
		if i == 2 {
			return nil, boom
		}
		return fetch(ctx, i)
	}
	ss = newPipeline(ctx, func() {}, q, 5, 2, failing, 0)
	require.Equal(t, []string{"a", "b"}, collect(ss))
	require.ErrorIs(t, ss.Err(), boom)

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	ss = newPipeline(cctx, func() {}, q, 5, 2, fetch, 0)
	collect(ss)
	require.ErrorIs(t, ss.Err(), context.Canceled)
}
