package tablets_test

import (
	"errors"
	"fmt"
	"iter"
	"math"
	"math/big"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
)

// source yields points (and, at index errAt if >= 0, the error err) and counts how many
// elements were pulled. It stops as soon as its yield returns false, as a well-behaved
// iterator must.
type source struct {
	points []tablets.Point
	errAt  int
	err    error
	pulled int
}

func (s *source) seq() iter.Seq2[tablets.Point, error] {
	return func(yield func(tablets.Point, error) bool) {
		for i, p := range s.points {
			s.pulled++
			if i == s.errAt {
				if !yield(tablets.Point{}, s.err) {
					return
				}
				continue
			}
			if !yield(p, nil) {
				return
			}
		}
	}
}

func newSource(points []tablets.Point) *source { return &source{points: points, errAt: -1} }

// collect drains seq: the points before the first error, and that error. It fails the test
// if anything follows an error.
func collect(t *testing.T, seq iter.Seq2[tablets.Point, error]) ([]tablets.Point, error) {
	t.Helper()
	var out []tablets.Point
	var firstErr error
	for p, err := range seq {
		require.NoError(t, firstErr, "an element followed an error")
		if err != nil {
			require.Equal(t, tablets.Point{}, p, "an error comes with a zero Point")
			firstErr = err
			continue
		}
		out = append(out, p)
	}
	return out, firstErr
}

var epoch = time.Unix(0, 0)

// bruteBucketStart computes floor((t - epoch)/step)*step + epoch with big integers.
func bruteBucketStart(t time.Time, step time.Duration) time.Time {
	billion := big.NewInt(1e9)
	ns := new(big.Int).Mul(big.NewInt(t.Unix()), billion)
	ns.Add(ns, big.NewInt(int64(t.Nanosecond())))
	s := big.NewInt(int64(step))
	k := new(big.Int).Div(ns, s) // Euclidean division: floor for a positive divisor
	start := k.Mul(k, s)
	sec, nsec := new(big.Int).DivMod(start, billion, new(big.Int))
	return time.Unix(sec.Int64(), nsec.Int64())
}

// bruteAggregate aggregates vals (and their times, for First and Last) the slow, obvious way;
// vals holds no NaN and is not empty.
func bruteAggregate(agg tablets.Aggregation, times []time.Time, vals []float64) float64 {
	sum := 0.0
	for _, v := range vals {
		sum += v
	}
	switch agg {
	case tablets.Avg:
		return sum / float64(len(vals))
	case tablets.Sum:
		return sum
	case tablets.Count:
		return float64(len(vals))
	case tablets.Min, tablets.Max:
		sorted := append([]float64(nil), vals...)
		sort.Float64s(sorted)
		if agg == tablets.Min {
			return sorted[0]
		}
		return sorted[len(sorted)-1]
	case tablets.First:
		best := 0
		for i := range times {
			if times[i].Before(times[best]) {
				best = i
			}
		}
		return vals[best]
	case tablets.Last:
		best := 0
		for i := range times {
			if !times[i].Before(times[best]) {
				best = i
			}
		}
		return vals[best]
	}
	// A percentile: recover q from its name.
	q := percentileQ(agg)
	x := append([]float64(nil), vals...)
	sort.Float64s(x)
	h := float64(len(x)-1) * q
	lo := math.Floor(h)
	i := int(lo)
	if i == len(x)-1 {
		return x[i]
	}
	return x[i] + (h-lo)*(x[i+1]-x[i])
}

func percentileQ(agg tablets.Aggregation) float64 {
	for _, q := range []float64{0, 0.25, 0.5, 0.9, 0.99, 0.999, 1} {
		if agg == tablets.Percentile(q) {
			return q
		}
	}
	panic("unexpected aggregation " + agg.String())
}

// bruteDownsample groups sorted points by bucket and aggregates each group's points that are
// not NaN: a group of NaNs only is no bucket.
func bruteDownsample(points []tablets.Point, step time.Duration, agg tablets.Aggregation) []tablets.Point {
	var out []tablets.Point
	for i := 0; i < len(points); {
		start := bruteBucketStart(points[i].Time, step)
		var times []time.Time
		var vals []float64
		for ; i < len(points) && bruteBucketStart(points[i].Time, step).Equal(start); i++ {
			if !math.IsNaN(points[i].Value) {
				times = append(times, points[i].Time)
				vals = append(vals, points[i].Value)
			}
		}
		if len(vals) > 0 {
			out = append(out, tablets.Point{Time: start, Value: bruteAggregate(agg, times, vals)})
		}
	}
	return out
}

// randomSeries makes n points, oldest first, a few per bucket of width step on average,
// with equal times, repeated values and occasional gaps of several empty buckets.
func randomSeries(seed uint64, n int, step time.Duration) []tablets.Point {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	t := time.Date(2024, 2, 29, 23, 0, 0, 0, time.UTC).Add(time.Duration(rng.Int64N(int64(time.Hour))))
	points := make([]tablets.Point, n)
	for i := range points {
		if rng.IntN(40) == 0 {
			t = t.Add(time.Duration(rng.Int64N(5*int64(step) + 1)))
		} else {
			t = t.Add(time.Duration(rng.Int64N(max(2*int64(step)/5, 2))))
		}
		v := rng.NormFloat64() * 100
		switch rng.IntN(20) {
		case 0, 1, 2, 3, 4:
			v = math.Round(v / 10) // repeated values
		case 5:
			v = []float64{math.NaN(), staleNaN}[rng.IntN(2)] // not samples
		}
		points[i] = tablets.Point{Time: t, Value: v}
	}
	return points
}

var allAggregations = []tablets.Aggregation{
	tablets.Avg, tablets.Min, tablets.Max, tablets.Sum, tablets.Count, tablets.First, tablets.Last,
	tablets.P50, tablets.P90, tablets.P99,
	tablets.Percentile(0), tablets.Percentile(0.25), tablets.Percentile(0.999), tablets.Percentile(1),
}

func requireSameValue(t *testing.T, want, got float64, msgAndArgs ...any) {
	t.Helper()
	if math.IsNaN(want) {
		require.True(t, math.IsNaN(got), msgAndArgs...)
		return
	}
	require.Equal(t, want, got, msgAndArgs...)
}

func requireSamePoints(t *testing.T, want, got []tablets.Point) {
	t.Helper()
	require.Len(t, got, len(want))
	for i := range want {
		require.True(t, want[i].Time.Equal(got[i].Time), "point %d: time %s, want %s", i, got[i].Time, want[i].Time)
		requireSameValue(t, want[i].Value, got[i].Value, "point %d at %s", i, want[i].Time)
	}
}

func TestDownsampleMatchesBruteForce(t *testing.T) {
	steps := []time.Duration{
		time.Nanosecond,
		7 * time.Nanosecond,
		7 * time.Millisecond,
		333333333 * time.Nanosecond, // does not divide a second
		1500 * time.Millisecond,     // does not divide a second either
		17*time.Second + 1,
		time.Minute,
		time.Hour,
		24 * time.Hour,
	}
	for _, seed := range []uint64{1, 2, 3} {
		for _, step := range steps {
			points := randomSeries(seed, 3000, step)
			for _, agg := range allAggregations {
				t.Run(fmt.Sprintf("%v/%v/seed%d", agg, step, seed), func(t *testing.T) {
					want := bruteDownsample(points, step, agg)
					require.Greater(t, len(want), 10)
					src := newSource(points)
					got, err := collect(t, tablets.Downsample(src.seq(), step, agg))
					require.NoError(t, err)
					requireSamePoints(t, want, got)
					require.Equal(t, len(points), src.pulled)
					for _, p := range got {
						require.Equal(t, time.UTC, p.Time.Location())
						require.Equal(t, p.Time, p.Time.Round(0), "no monotonic reading")
					}
				})
			}
		}
	}
}

func TestDownsampleEpochAlignment(t *testing.T) {
	times := []time.Time{
		time.Date(2024, 5, 6, 7, 8, 9, 123456789, time.UTC),
		time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(1969, 12, 31, 23, 59, 59, 500000000, time.UTC),
		time.Date(1969, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(1900, 1, 1, 0, 0, 0, 1, time.UTC),
		time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), // the zero Time
		tablets.MaxTime,                          // its nanoseconds since 1970 overflow an int64
		time.Date(2262, 4, 11, 23, 47, 16, 854775807, time.UTC),
		time.Date(2024, 5, 6, 7, 8, 9, 0, time.FixedZone("IST", 5*3600+1800)),
	}
	steps := []time.Duration{
		time.Nanosecond, 7 * time.Nanosecond, 333333333 * time.Nanosecond, 1500 * time.Millisecond,
		time.Minute, time.Hour, 24 * time.Hour, 7 * 24 * time.Hour, math.MaxInt64,
	}
	for _, tm := range times {
		for _, step := range steps {
			want := bruteBucketStart(tm, step)
			require.False(t, want.After(tm))
			got, err := collect(t, tablets.Downsample(newSource([]tablets.Point{{Time: tm, Value: 1}}).seq(), step, tablets.Count))
			require.NoError(t, err)
			require.Len(t, got, 1)
			require.True(t, want.Equal(got[0].Time), "%s step %s: got %s, want %s", tm, step, got[0].Time, want)
			require.Equal(t, tm.Location(), got[0].Time.Location())
		}
	}
	// Minute buckets start on whole minutes, hour buckets of a +05:30 zone on half hours.
	ist := time.FixedZone("IST", 5*3600+1800)
	got, err := collect(t, tablets.Downsample(newSource([]tablets.Point{
		{Time: time.Date(1969, 12, 31, 23, 59, 30, 0, time.UTC), Value: 1},
		{Time: time.Date(2024, 5, 6, 10, 15, 0, 0, ist), Value: 1},
	}).seq(), time.Hour, tablets.Count))
	require.NoError(t, err)
	require.Equal(t, "1969-12-31T23:00:00Z", got[0].Time.Format(time.RFC3339))
	require.Equal(t, "2024-05-06T09:30:00+05:30", got[1].Time.Format(time.RFC3339))
}

// series builds points at base + offsets (seconds) with the given values.
func series(base time.Time, offsets []float64, values []float64) []tablets.Point {
	points := make([]tablets.Point, len(offsets))
	for i := range offsets {
		points[i] = tablets.Point{Time: base.Add(time.Duration(offsets[i] * float64(time.Second))), Value: values[i]}
	}
	return points
}

var base = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// staleNaN is Prometheus' staleness marker.
var staleNaN = math.Float64frombits(0x7ff0000000000002)

func TestDownsampleSmallCases(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	tests := []struct {
		name    string
		offsets []float64 // seconds after base; step is 10s
		values  []float64
		agg     tablets.Aggregation
		want    []float64 // one per non-empty bucket
	}{
		{"empty input", nil, nil, tablets.Avg, nil},
		{"single-point buckets avg", []float64{0, 15, 47}, []float64{1, 2, 3}, tablets.Avg, []float64{1, 2, 3}},
		{"single-point buckets min", []float64{0, 15, 47}, []float64{1, 2, 3}, tablets.Min, []float64{1, 2, 3}},
		{"single-point buckets max", []float64{0, 15, 47}, []float64{1, 2, 3}, tablets.Max, []float64{1, 2, 3}},
		{"single-point buckets sum", []float64{0, 15, 47}, []float64{1, 2, 3}, tablets.Sum, []float64{1, 2, 3}},
		{"single-point buckets count", []float64{0, 15, 47}, []float64{1, 2, 3}, tablets.Count, []float64{1, 1, 1}},
		{"single-point buckets first", []float64{0, 15, 47}, []float64{1, 2, 3}, tablets.First, []float64{1, 2, 3}},
		{"single-point buckets last", []float64{0, 15, 47}, []float64{1, 2, 3}, tablets.Last, []float64{1, 2, 3}},
		{"single-point buckets p0", []float64{0, 15, 47}, []float64{1, 2, 3}, tablets.Percentile(0), []float64{1, 2, 3}},
		{"single-point buckets p50", []float64{0, 15, 47}, []float64{1, 2, 3}, tablets.P50, []float64{1, 2, 3}},
		{"single-point buckets p99", []float64{0, 15, 47}, []float64{1, 2, 3}, tablets.P99, []float64{1, 2, 3}},
		{"single-point buckets p100", []float64{0, 15, 47}, []float64{1, 2, 3}, tablets.Percentile(1), []float64{1, 2, 3}},
		{"single NaN point", []float64{0}, []float64{nan}, tablets.Count, nil},
		{"bucket edges", []float64{0, 9.999999999, 10, 19.999999999, 20}, []float64{1, 2, 3, 4, 5}, tablets.Sum, []float64{3, 7, 5}},
		{"p50 interpolates", []float64{0, 1, 2, 3}, []float64{4, 1, 3, 2}, tablets.P50, []float64{2.5}},
		{"p90 interpolates", []float64{0, 1, 2, 3, 4}, []float64{10, 20, 30, 40, 50}, tablets.P90, []float64{46}},
		{"p25 on a rank", []float64{0, 1, 2, 3, 4}, []float64{50, 40, 30, 20, 10}, tablets.Percentile(0.25), []float64{20}},
		{"count equal times", []float64{1, 1, 1}, []float64{1, 2, 3}, tablets.Count, []float64{3}},
		{"first of equal times is first in input", []float64{1, 1, 2}, []float64{7, 8, 9}, tablets.First, []float64{7}},
		{"last of equal times is last in input", []float64{1, 2, 2}, []float64{7, 8, 9}, tablets.Last, []float64{9}},
		{"first by time within a bucket", []float64{5, 1, 3}, []float64{7, 8, 9}, tablets.First, []float64{8}},
		{"last by time within a bucket", []float64{5, 9, 3}, []float64{7, 8, 9}, tablets.Last, []float64{8}},
		// NaN rule: a NaN is not a sample; every aggregation skips it.
		{"NaN avg", []float64{0, 1, 2}, []float64{1, nan, 3}, tablets.Avg, []float64{2}},
		{"NaN sum", []float64{0, 1, 2}, []float64{1, nan, 3}, tablets.Sum, []float64{4}},
		{"NaN min", []float64{0, 1, 2}, []float64{1, nan, 3}, tablets.Min, []float64{1}},
		{"NaN min first", []float64{0, 1, 2}, []float64{nan, 1, 3}, tablets.Min, []float64{1}},
		{"NaN max", []float64{0, 1, 2}, []float64{1, 3, nan}, tablets.Max, []float64{3}},
		{"NaN max first", []float64{0, 1, 2}, []float64{nan, 3, 1}, tablets.Max, []float64{3}},
		{"NaN p0", []float64{0, 1, 2}, []float64{1, nan, 3}, tablets.Percentile(0), []float64{1}},
		{"NaN p50", []float64{0, 1, 2}, []float64{1, nan, 3}, tablets.P50, []float64{2}},
		{"NaN p100", []float64{0, 1, 2}, []float64{1, nan, 3}, tablets.Percentile(1), []float64{3}},
		{"NaN not counted", []float64{0, 1, 2}, []float64{1, nan, 3}, tablets.Count, []float64{2}},
		{"stale marker not counted", []float64{0, 1, 2}, []float64{1, staleNaN, 3}, tablets.Count, []float64{2}},
		{"NaN first", []float64{0, 1, 2}, []float64{nan, 2, 3}, tablets.First, []float64{2}},
		{"NaN last", []float64{0, 1, 2}, []float64{1, 2, nan}, tablets.Last, []float64{2}},
		{"NaN between", []float64{0, 1, 2}, []float64{1, nan, 3}, tablets.First, []float64{1}},
		{"NaN only bucket skipped", []float64{0, 1, 12, 13, 25}, []float64{nan, staleNaN, 2, 4, 5}, tablets.Avg, []float64{3, 5}},
		{"NaN only last bucket skipped", []float64{2, 13, 14}, []float64{1, nan, nan}, tablets.Count, []float64{1}},
		{"NaN only middle bucket, percentile", []float64{0, 1, 12, 25}, []float64{1, 3, nan, 5}, tablets.P50, []float64{2, 5}},
		// Infinities.
		{"Inf p100", []float64{0, 1, 2}, []float64{1, inf, inf}, tablets.Percentile(1), []float64{inf}},
		{"Inf between equal neighbours", []float64{0, 1, 2}, []float64{1, inf, inf}, tablets.Percentile(0.75), []float64{inf}},
		{"Inf p0", []float64{0, 1}, []float64{-inf, inf}, tablets.Percentile(0), []float64{-inf}},
		{"Inf sum", []float64{0, 1}, []float64{-inf, inf}, tablets.Sum, []float64{nan}},
		{"Inf max", []float64{0, 1}, []float64{-inf, inf}, tablets.Max, []float64{inf}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := collect(t, tablets.Downsample(newSource(series(base, tc.offsets, tc.values)).seq(), 10*time.Second, tc.agg))
			require.NoError(t, err)
			require.Len(t, got, len(tc.want))
			for i := range tc.want {
				requireSameValue(t, tc.want[i], got[i].Value, "bucket %d", i)
			}
		})
	}
}

func TestDownsampleBreak(t *testing.T) {
	// Three buckets of three points each.
	points := series(base, []float64{0, 1, 2, 10, 11, 12, 20, 21, 22}, []float64{1, 2, 3, 4, 5, 6, 7, 8, 9})
	tests := []struct {
		name       string
		after      int // break after this many points
		wantPulled int
	}{
		// The first bucket is complete when the first point of the second arrives.
		{"after first bucket", 1, 4},
		{"after second bucket", 2, 7},
		// The last bucket is yielded after the input ended.
		{"after last bucket", 3, 9},
	}
	for _, agg := range allAggregations {
		for _, tc := range tests {
			t.Run(agg.String()+"/"+tc.name, func(t *testing.T) {
				src := newSource(points)
				n := 0
				for p, err := range tablets.Downsample(src.seq(), 10*time.Second, agg) {
					require.NoError(t, err)
					require.False(t, p.Time.IsZero())
					n++
					if n == tc.after {
						break
					}
				}
				require.Equal(t, tc.after, n)
				require.Equal(t, tc.wantPulled, src.pulled)
			})
		}
	}
}

func TestDownsampleInputError(t *testing.T) {
	boom := errors.New("boom")
	points := series(base, []float64{0, 1, 2, 10, 11, 12, 20}, []float64{1, 2, 3, 4, 5, 6, 7})
	tests := []struct {
		name      string
		errAt     int
		wantCount []float64 // the Count of each bucket yielded before the error
	}{
		{"first element", 0, nil},
		{"in first bucket", 1, nil},
		// The first bucket is complete, but nothing says so yet: it is dropped.
		{"after first bucket", 3, nil},
		{"second of second bucket", 4, []float64{3}},
		{"last element", 6, []float64{3}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := &source{points: points, errAt: tc.errAt, err: boom}
			got, err := collect(t, tablets.Downsample(src.seq(), 10*time.Second, tablets.Count))
			require.ErrorIs(t, err, boom)
			require.Equal(t, tc.errAt+1, src.pulled, "stops pulling the input after its error")
			require.Len(t, got, len(tc.wantCount))
			for i := range tc.wantCount {
				require.Equal(t, tc.wantCount[i], got[i].Value)
			}
		})
	}
	t.Run("consumer breaks on the error", func(t *testing.T) {
		src := &source{points: points, errAt: 1, err: boom}
		for _, err := range tablets.Downsample(src.seq(), 10*time.Second, tablets.P99) {
			require.ErrorIs(t, err, boom)
			break
		}
		require.Equal(t, 2, src.pulled)
	})
}

func TestDownsampleInvalidOptions(t *testing.T) {
	tests := []struct {
		name string
		step time.Duration
		agg  tablets.Aggregation
	}{
		{"zero step", 0, tablets.Avg},
		{"negative step", -time.Second, tablets.Avg},
		{"min step", math.MinInt64, tablets.P99},
		{"zero aggregation", time.Second, tablets.Aggregation{}},
		{"percentile below 0", time.Second, tablets.Percentile(-0.01)},
		{"percentile above 1", time.Second, tablets.Percentile(1.0001)},
		{"percentile 100", time.Second, tablets.Percentile(100)},
		{"percentile NaN", time.Second, tablets.Percentile(math.NaN())},
		{"percentile +Inf", time.Second, tablets.Percentile(math.Inf(1))},
		{"percentile -Inf", time.Second, tablets.Percentile(math.Inf(-1))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := newSource(series(base, []float64{0, 1}, []float64{1, 2}))
			n := 0
			for p, err := range tablets.Downsample(src.seq(), tc.step, tc.agg) {
				n++
				require.Equal(t, tablets.Point{}, p)
				require.ErrorIs(t, err, tablets.ErrInvalidOptions)
				require.Contains(t, err.Error(), "downsample")
			}
			require.Equal(t, 1, n, "the error is yielded once")
			require.Zero(t, src.pulled, "the input is not pulled")
		})
	}
}

func TestDownsampleOutOfOrder(t *testing.T) {
	for _, agg := range allAggregations {
		t.Run(agg.String(), func(t *testing.T) {
			// Buckets at 0s and 10s, then a point back in the 0s bucket, then more.
			points := series(base, []float64{0, 1, 10, 11, 9.5, 30}, []float64{1, 2, 3, 4, 5, 6})
			src := newSource(points)
			got, err := collect(t, tablets.Downsample(src.seq(), 10*time.Second, agg))
			require.ErrorIs(t, err, tablets.ErrInvalidTime)
			require.Contains(t, err.Error(), points[4].Time.Format(time.RFC3339Nano), "names the point's time")
			require.Equal(t, 5, src.pulled)
			require.Len(t, got, 1, "the bucket before is yielded, the bucket in progress is not")
			require.True(t, base.Equal(got[0].Time))
		})
	}
	t.Run("disorder within a bucket is fine", func(t *testing.T) {
		points := series(base, []float64{5, 1, 9, 0, 12, 11}, []float64{1, 2, 3, 4, 5, 6})
		got, err := collect(t, tablets.Downsample(newSource(points).seq(), 10*time.Second, tablets.Sum))
		require.NoError(t, err)
		requireSamePoints(t, []tablets.Point{{Time: base, Value: 10}, {Time: base.Add(10 * time.Second), Value: 11}}, got)
	})
}

func TestAggregationParseString(t *testing.T) {
	roundTrip := []struct {
		agg  tablets.Aggregation
		name string
	}{
		{tablets.Avg, "avg"},
		{tablets.Min, "min"},
		{tablets.Max, "max"},
		{tablets.Sum, "sum"},
		{tablets.Count, "count"},
		{tablets.First, "first"},
		{tablets.Last, "last"},
		{tablets.P50, "p50"},
		{tablets.P90, "p90"},
		{tablets.P99, "p99"},
		{tablets.Percentile(0.999), "p99.9"},
		{tablets.Percentile(0.9999), "p99.99"},
		{tablets.Percentile(0.25), "p25"},
		{tablets.Percentile(0), "p0"},
		{tablets.Percentile(1), "p100"},
		{tablets.Percentile(0.001), "p0.1"},
		{tablets.Percentile(1e-5), "p0.001"},
		{tablets.Percentile(0.123456789), "p12.3456789"},
		{tablets.Percentile(0.30000000000000004), "p30.000000000000004"},
		{tablets.Percentile(5e-324), "p" + "0." + strings.Repeat("0", 321) + "5"},
	}
	for _, tc := range roundTrip {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.name, tc.agg.String())
			got, err := tablets.ParseAggregation(tc.agg.String())
			require.NoError(t, err)
			require.Equal(t, tc.agg, got)
			got, err = tablets.ParseAggregation(strings.ToUpper(tc.name))
			require.NoError(t, err)
			require.Equal(t, tc.agg, got)
		})
	}
	t.Run("random quantiles", func(t *testing.T) {
		rng := rand.New(rand.NewPCG(7, 7))
		for range 10000 {
			q := rng.Float64()
			if rng.IntN(3) == 0 {
				q = math.Round(q*1000) / 1000
			}
			a := tablets.Percentile(q)
			got, err := tablets.ParseAggregation(a.String())
			require.NoError(t, err, a.String())
			require.Equal(t, a, got, a.String())
		}
	})
	aliases := []struct {
		name string
		want tablets.Aggregation
	}{
		{"mean", tablets.Avg},
		{"MEAN", tablets.Avg},
		{"Avg", tablets.Avg},
		{"median", tablets.P50},
		{"q0.5", tablets.P50},
		{"q.5", tablets.P50},
		{"q0.25", tablets.Percentile(0.25)},
		{"q0.999", tablets.Percentile(0.999)},
		{"p99.90", tablets.Percentile(0.999)},
		{"p099", tablets.P99},
		{"p50.", tablets.P50},
		{"q1", tablets.Percentile(1)},
		{"q0", tablets.Percentile(0)},
		{"Q1.000", tablets.Percentile(1)},
	}
	for _, tc := range aliases {
		t.Run("alias "+tc.name, func(t *testing.T) {
			got, err := tablets.ParseAggregation(tc.name)
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
	for _, bad := range []string{
		"", "p", "q", "average", "p101", "p100.0001", "q1.01", "q2", "p-1", "q-0.5", "p+5",
		"pNaN", "qInf", "q1e-3", "p1/2", "p5..", "p.", "p 50", " avg", "p50%", "percentile(0.5)", "invalid",
	} {
		t.Run("bad "+bad, func(t *testing.T) {
			_, err := tablets.ParseAggregation(bad)
			require.ErrorIs(t, err, tablets.ErrInvalidOptions)
		})
	}
	t.Run("invalid aggregations print", func(t *testing.T) {
		require.Equal(t, "invalid", tablets.Aggregation{}.String())
		require.Equal(t, "percentile(1.5)", tablets.Percentile(1.5).String())
		require.Equal(t, "percentile(NaN)", tablets.Percentile(math.NaN()).String())
	})
	t.Run("comparable", func(t *testing.T) {
		require.True(t, tablets.P90 == tablets.Percentile(0.9))
		require.False(t, tablets.P90 == tablets.P99)
		require.False(t, tablets.Percentile(0) == tablets.Min, "p0 is computed as a percentile")
		set := map[tablets.Aggregation]bool{tablets.Avg: true, tablets.P99: true}
		require.True(t, set[tablets.Percentile(0.99)])
	})
}

func benchmarkDownsample(b *testing.B, agg tablets.Aggregation) {
	const n = 100_000
	rng := rand.New(rand.NewPCG(1, 2))
	points := make([]tablets.Point, n)
	for i := range points {
		points[i] = tablets.Point{Time: base.Add(time.Duration(i) * time.Second), Value: rng.NormFloat64()}
	}
	input := func(yield func(tablets.Point, error) bool) {
		for _, p := range points {
			if !yield(p, nil) {
				return
			}
		}
	}
	b.ReportAllocs()
	iterations := 0
	for b.Loop() {
		buckets := 0
		for _, err := range tablets.Downsample(input, time.Minute, agg) {
			if err != nil {
				b.Fatal(err)
			}
			buckets++
		}
		if buckets != (n+59)/60 {
			b.Fatalf("%d buckets", buckets)
		}
		iterations++
	}
	b.ReportMetric(float64(iterations)*n/b.Elapsed().Seconds(), "points/s")
}

func BenchmarkDownsample(b *testing.B) {
	b.Run("Avg", func(b *testing.B) { benchmarkDownsample(b, tablets.Avg) })
	b.Run("P99", func(b *testing.B) { benchmarkDownsample(b, tablets.P99) })
}
