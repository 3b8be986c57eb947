package storetest

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
)

// baseTime is where most cases put their data; it is deliberately not aligned to anything.
var baseTime = time.Date(2024, 5, 17, 9, 37, 13, 123456789, time.UTC)

// fixture is one store on a fresh table plus what a case needs around it.
type fixture struct {
	t     *testing.T
	ctx   context.Context
	s     tablets.Store
	count func() int64
	r     time.Duration
	base  time.Time // baseTime truncated to r
	last  time.Time // the last time the store holds (tablets.MaxTime unless Bounded)
	rng   *rand.Rand
}

// newFixture makes a store on a fresh table and a random source with fixed seeds.
func newFixture(t *testing.T, h Harness, seed uint64) *fixture {
	t.Helper()
	s, count := h.NewStore(t)
	require.NotNil(t, s, "Harness.NewStore returned a nil store")
	require.NotNil(t, count, "Harness.NewStore returned a nil request counter")
	r := h.Resolution()
	require.Positive(t, int64(r), "Harness.Resolution must be positive")
	return &fixture{
		t:     t,
		ctx:   t.Context(),
		s:     s,
		count: count,
		r:     r,
		base:  floorTime(baseTime, r),
		last:  lastTime(h),
		rng:   rand.New(rand.NewPCG(seed, 0x7ab1e75)),
	}
}

// at returns the aligned time k resolution steps after base.
func (f *fixture) at(k int64) time.Time { return f.base.Add(time.Duration(k) * f.r) }

// noisy returns a time in slot k with a random offset below the resolution.
func (f *fixture) noisy(k int64) time.Time {
	return f.at(k).Add(time.Duration(f.rng.Int64N(int64(f.r))))
}

// half is half a resolution step (0 when the resolution is 1ns).
func (f *fixture) half() time.Duration { return f.r / 2 }

// zones are the locations some written times are expressed in: the store must read every
// time back in UTC.
var zones = []*time.Location{
	time.FixedZone("UTC+05:30", 5*3600+1800),
	time.FixedZone("UTC-08:00", -8*3600),
	time.FixedZone("UTC+14:00", 14*3600),
}

// inRandomZone sometimes re-expresses t in another location (the same instant).
func (f *fixture) inRandomZone(t time.Time) time.Time {
	if f.rng.IntN(5) == 0 {
		return t.In(zones[f.rng.IntN(len(zones))])
	}
	return t
}

// randValue draws values that exercise the encoding: negative, tiny, huge, integral (which
// JSON writes without a fraction), denormal, signed zero and arbitrary bit patterns. Never NaN.
func randValue(rng *rand.Rand) float64 {
	sign := 1.0
	if rng.IntN(2) == 0 {
		sign = -1
	}
	switch rng.IntN(12) {
	case 0:
		return rng.NormFloat64() * 1e3
	case 1:
		return sign * rng.Float64() * 1e-300
	case 2:
		return sign * rng.Float64() * 1e300
	case 3:
		return float64(rng.IntN(2001) - 1000) // integral
	case 4:
		return float64(rng.Int64()) * sign // integral beyond 2^53
	case 5:
		return sign * math.Float64frombits(1+rng.Uint64N(1<<52-1)) // denormal
	case 6:
		return math.Copysign(0, sign) // 0 or -0
	case 7, 8:
		for {
			v := math.Float64frombits(rng.Uint64())
			if !math.IsNaN(v) && !math.IsInf(v, 0) {
				return v
			}
		}
	case 9:
		return sign * float64(rng.IntN(1<<20)) / 1024 // short binary fraction
	default:
		return rng.Float64()*200 - 100
	}
}

// write writes and requires success.
func (f *fixture) write(series string, pts ...tablets.Point) {
	f.t.Helper()
	require.NoError(f.t, f.s.Write(f.ctx, series, pts...), "Write(%q, %d points)", series, len(pts))
}

// writeChunks writes pts in calls of at most n points.
func (f *fixture) writeChunks(series string, pts []tablets.Point, n int) {
	f.t.Helper()
	for len(pts) > 0 {
		k := min(n, len(pts))
		f.write(series, pts[:k]...)
		pts = pts[k:]
	}
}

// query reads a range and requires success.
func (f *fixture) query(series string, from, to time.Time) []tablets.Point {
	f.t.Helper()
	pts, err := collectPoints(f.s.Query(f.ctx, series, from, to))
	require.NoError(f.t, err, "Query(%q, %s, %s)", series, ts(from), ts(to))
	return pts
}

func (f *fixture) latest(series string, n int) []tablets.Point {
	f.t.Helper()
	pts, err := f.s.Latest(f.ctx, series, n)
	require.NoError(f.t, err, "Latest(%q, %d)", series, n)
	return pts
}

func (f *fixture) del(series string, from, to time.Time) {
	f.t.Helper()
	require.NoError(f.t, f.s.Delete(f.ctx, series, from, to), "Delete(%q, %s, %s)", series, ts(from), ts(to))
}

// queryMany reads several series and groups the result by series, checking that each
// series' points come oldest first.
func (f *fixture) queryMany(names []string, from, to time.Time) map[string][]tablets.Point {
	f.t.Helper()
	out := map[string][]tablets.Point{}
	var err error
	for sp, e := range f.s.QueryMany(f.ctx, names, from, to) {
		if e != nil {
			err = e
			break
		}
		out[sp.Series] = append(out[sp.Series], sp.Point)
	}
	require.NoError(f.t, err, "QueryMany(%d names, %s, %s)", len(names), ts(from), ts(to))
	return out
}

// pages reads [from, to) with QueryPage in pages of limit points (limits cycles when it has
// several), checking the page rules: no page holds more than limit points, only the last
// page has Next == "", and no page is empty unless the whole range is.
func (f *fixture) pages(series string, from, to time.Time, limits ...int) []tablets.Point {
	f.t.Helper()
	var out []tablets.Point
	token := ""
	for i := 0; ; i++ {
		limit := limits[i%len(limits)]
		page, err := f.s.QueryPage(f.ctx, series, from, to, limit, token)
		require.NoError(f.t, err, "QueryPage(%q, %s, %s, limit %d) page %d", series, ts(from), ts(to), limit, i)
		require.LessOrEqual(f.t, len(page.Points), limit, "page %d holds more than limit %d points", i, limit)
		if len(page.Points) == 0 {
			require.Zero(f.t, i, "page %d is empty, but an earlier page's Next promised more (points so far %d)", i, len(out))
			require.Empty(f.t, page.Next, "an empty page must be the last one: Next must be \"\"")
		}
		if len(out) > 0 && len(page.Points) > 0 && !page.Points[0].Time.After(out[len(out)-1].Time) {
			require.Failf(f.t, "pages do not advance", "page %d (limit %d) starts at %s, not after the previous page's last point %s",
				i, limit, ts(page.Points[0].Time), ts(out[len(out)-1].Time))
		}
		out = append(out, page.Points...)
		if page.Next == "" {
			return out
		}
		require.NotEqual(f.t, token, page.Next, "page %d returned the token it was given", i)
		require.Less(f.t, i, 20000, "QueryPage never ends")
		token = page.Next
	}
}

// collectPoints drains a Query iterator, stopping at the first error.
func collectPoints(seq iter.Seq2[tablets.Point, error]) ([]tablets.Point, error) {
	var out []tablets.Point
	for p, err := range seq {
		if err != nil {
			return out, err
		}
		out = append(out, p)
	}
	return out, nil
}

// iterFailure drains an iterator that must fail: it must yield exactly once, the zero value
// with a non-nil error, and stop by itself. It returns that error (nil, with the test
// failed, if the iterator misbehaved).
func iterFailure[V comparable](t *testing.T, seq iter.Seq2[V, error], what string) error {
	t.Helper()
	var zero V
	var errs []error
	yields, nonZero := 0, 0
	for v, err := range seq {
		yields++
		if err != nil {
			errs = append(errs, err)
		}
		if v != zero {
			nonZero++
		}
		if yields > 3 {
			break
		}
	}
	require.Len(t, errs, 1, "%s: want exactly one error yielded (got %d yields, errors %v)", what, yields, errs)
	require.Equal(t, 1, yields, "%s: the error must be the only thing yielded and the iterator must stop (got %d yields)", what, yields)
	require.Zero(t, nonZero, "%s: the error must come with the zero value", what)
	return errs[0]
}

// requireNoRequest runs call, requires its error to wrap want and no request to be sent.
func (f *fixture) requireRejected(t *testing.T, want error, what string, call func() error) {
	t.Helper()
	before := f.count()
	var err error
	require.NotPanics(t, func() { err = call() }, "%s panicked", what)
	require.Error(t, err, "%s: want an error wrapping %v, got success", what, want)
	require.True(t, errors.Is(err, want), "%s: want an error wrapping %q, got %v", what, want, err)
	require.Equal(t, before, f.count(), "%s: bad input must be rejected before any request is sent", what)
}

// requirePoints compares a read with the model: same length, same times (and in UTC),
// values bit for bit (NaN as NaN). It reports the first difference.
func requirePoints(t *testing.T, want, got []tablets.Point, format string, args ...any) {
	t.Helper()
	what := fmt.Sprintf(format, args...)
	for i, p := range got {
		if p.Time.Location() != time.UTC {
			require.Failf(t, "time not in UTC", "%s: point %d %s has location %q; times must come back in UTC",
				what, i, fmtPoint(p), p.Time.Location())
		}
	}
	n := min(len(want), len(got))
	for i := range n {
		if !want[i].Time.Equal(got[i].Time) || !sameValue(want[i].Value, got[i].Value) {
			require.Failf(t, "points differ", "%s: first difference at index %d of %d wanted (%d got):\n want %s\n got  %s\n%s%s",
				what, i, len(want), len(got), fmtPoint(want[i]), fmtPoint(got[i]), context3(want, got, i), diffSummary(want, got))
		}
	}
	if len(want) != len(got) {
		var extra string
		if len(got) > n {
			extra = "first unexpected point: " + fmtPoint(got[n])
		} else {
			extra = "first missing point: " + fmtPoint(want[n])
		}
		require.Failf(t, "point counts differ", "%s: want %d points, got %d (the first %d agree); %s\n%s", what, len(want), len(got), n, extra, diffSummary(want, got))
	}
}

// diffSummary counts every kind of difference between two reads, to tell one root cause
// (say, -0 read back as +0) from several.
func diffSummary(want, got []tablets.Point) string {
	w := map[tkey]float64{}
	for _, p := range want {
		w[keyOf(p.Time)] = p.Value
	}
	seen := map[tkey]bool{}
	var missing, extra, dupes, unordered, values, signedZero int
	for i, p := range got {
		k := keyOf(p.Time)
		if seen[k] {
			dupes++
		}
		seen[k] = true
		if i > 0 && !p.Time.After(got[i-1].Time) {
			unordered++
		}
		v, ok := w[k]
		switch {
		case !ok:
			extra++
		case !sameValue(v, p.Value):
			values++
			if v == 0 && p.Value == 0 {
				signedZero++
			}
		}
	}
	for k := range w {
		if !seen[k] {
			missing++
		}
	}
	return fmt.Sprintf("summary: %d missing times, %d unexpected times, %d times repeated, %d out of order, %d wrong values (%d of them only the sign of zero)",
		missing, extra, dupes, unordered, values, signedZero)
}

func context3(want, got []tablets.Point, i int) string {
	var b strings.Builder
	for j := max(0, i-2); j <= i+2; j++ {
		w, g := "-", "-"
		if j < len(want) {
			w = fmtPoint(want[j])
		}
		if j < len(got) {
			g = fmtPoint(got[j])
		}
		fmt.Fprintf(&b, "  [%d] want %s | got %s\n", j, w, g)
	}
	return b.String()
}

func fmtPoint(p tablets.Point) string {
	return fmt.Sprintf("{%s %v (bits %#016x)}", ts(p.Time), p.Value, math.Float64bits(p.Value))
}

func ts(t time.Time) string { return t.Format(time.RFC3339Nano) }

// reversed returns a reversed copy.
func reversed(pts []tablets.Point) []tablets.Point {
	out := make([]tablets.Point, len(pts))
	for i, p := range pts {
		out[len(pts)-1-i] = p
	}
	return out
}
