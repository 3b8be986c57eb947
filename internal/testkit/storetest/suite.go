package storetest

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
)

// RunConformanceTests runs the whole conformance suite against the stores h makes. Every
// case starts from a fresh table (h.NewStore). Expected results always come from the
// brute-force model in model.go, never from constants.
//
// The semantics asserted, where the API leaves a choice open:
//   - A written time is stored truncated to R = h.Resolution(), floored from the Unix epoch
//     (not from time.Time's zero), and read back in UTC.
//   - Query, QueryPage, QueryMany and Delete select the points whose STORED time st has
//     from <= st < to, comparing the given from and to exactly (they are not truncated):
//     with from in the middle of a resolution step, the point stored at the start of that
//     step is not selected; with to in the middle of a step, the point stored at its start
//     is. A point is deleted iff from <= its stored time < to.
//   - Latest of a series with no points returns no points (a nil or empty slice) and nil.
//   - Paging: every page holds at most limit points, no page is empty unless the whole range
//     is, the last page has Next == "", and a token resumes strictly after the last point
//     returned (points written since, before it, are not returned; those after it are). A
//     token only works for the series and range (from, to) it was issued for; it is not
//     bound to the limit.
//   - Bad input (series name, time, range, limit, count, token) is rejected with an error
//     wrapping the sentinel, before any request is sent. Iterators report it by yielding
//     (zero value, err) exactly once.
func RunConformanceTests(t *testing.T, h Harness) {
	cases := []struct {
		name string
		run  func(*testing.T, Harness)
	}{
		{"01_RoundTripRandom", testRoundTripRandom},
		{"02_UnorderedInput", testUnordered},
		{"03_DuplicatesLastWriteWins", testDuplicates},
		{"04_HalfOpenRanges", testHalfOpen},
		{"05_TruncationToResolution", testTruncation},
		{"06_EmptyAndMissing", testEmpty},
		{"07_Pages", testPages},
		{"08_Latest", testLatest},
		{"09_Delete", testDelete},
		{"10_SpecialValues", testSpecialValues},
		{"11_SeriesIsolation", testSeriesIsolation},
		{"12_Quotes", testQuotes},
		{"13_UnicodeAndLongNames", testUnicode},
		{"14_QueryMany", testQueryMany},
		{"15_BadInput", testBadInput},
		{"16_AbandonedIterator", testAbandoned},
		{"17_Context", testContext},
		{"18_TimeBounds", testTimeBounds},
	}
	t.Run(h.Name(), func(t *testing.T) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) { c.run(t, h) })
		}
	})
}

// sub returns the fixture bound to a subtest.
func (f *fixture) sub(t *testing.T) *fixture {
	g := *f
	g.t = t
	g.ctx = t.Context()
	return &g
}

func pt(t time.Time, v float64) tablets.Point { return tablets.Point{Time: t, Value: v} }

var negZero = math.Copysign(0, -1)

// 1. A few thousand random points round-trip exactly.
func testRoundTripRandom(t *testing.T, h Harness) {
	f := newFixture(t, h, 1)
	m := newModel(f.r)
	// Half the points spread over about three days (or 20,000 steps), half crowded into
	// 1,000 steps, where random times collide (duplicates within one call: the later wins).
	span := max(int64(20000), int64(3*24*time.Hour/f.r))
	dense := span / 3
	pts := make([]tablets.Point, 0, 3000)
	for i := range 3000 {
		k := f.rng.Int64N(span)
		if i%2 == 1 {
			k = dense + f.rng.Int64N(1000)
		}
		pts = append(pts, pt(f.inRandomZone(f.noisy(k)), randValue(f.rng)))
	}
	// Two calls; the second overlaps the first.
	f.write("rt", pts[:2000]...)
	m.write(pts[:2000]...)
	f.write("rt", pts[2000:]...)
	m.write(pts[2000:]...)

	t.Run("whole range", func(t *testing.T) {
		g := f.sub(t)
		from, to := g.at(0), g.at(span)
		requirePoints(t, m.query(from, to), g.query("rt", from, to), "Query(rt, whole range)")
	})
	for i := range 6 {
		a, b := f.rng.Int64N(span), f.rng.Int64N(span)
		if i%3 == 0 {
			a, b = dense+f.rng.Int64N(1000), dense+f.rng.Int64N(1000)
		}
		from, to := f.noisy(min(a, b)), f.noisy(max(a, b))
		if to.Before(from) {
			from, to = to, from
		}
		t.Run(fmt.Sprintf("subrange %d", i), func(t *testing.T) {
			g := f.sub(t)
			requirePoints(t, m.query(from, to), g.query("rt", from, to), "Query(rt, %s, %s)", ts(from), ts(to))
		})
	}
}

// 2. The order of the input does not matter.
func testUnordered(t *testing.T, h Harness) {
	f := newFixture(t, h, 2)
	m := newModel(f.r)
	slots := f.rng.Perm(5000)[:1000] // distinct steps: no duplicates, so order cannot matter
	pts := make([]tablets.Point, 0, len(slots))
	for _, k := range slots {
		pts = append(pts, pt(f.noisy(int64(k)), randValue(f.rng)))
	}
	m.write(pts...)
	sorted := slices.Clone(pts)
	slices.SortFunc(sorted, func(a, b tablets.Point) int { return a.Time.Compare(b.Time) })
	shuffled := slices.Clone(pts)
	f.rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })

	cases := []struct {
		name  string
		write func(g *fixture, series string)
	}{
		{"sorted", func(g *fixture, s string) { g.write(s, sorted...) }},
		{"shuffled", func(g *fixture, s string) { g.write(s, shuffled...) }},
		{"reversed", func(g *fixture, s string) { g.write(s, reversed(sorted)...) }},
		{"shuffled in chunks of 137", func(g *fixture, s string) { g.writeChunks(s, shuffled, 137) }},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := f.sub(t)
			series := fmt.Sprintf("order%d", i)
			c.write(g, series)
			requirePoints(t, m.all(), g.query(series, g.at(0), g.at(5000)), "Query(%s)", series)
			requirePoints(t, m.latest(5), g.latest(series, 5), "Latest(%s, 5)", series)
		})
	}
}

// 3. Duplicates: the last write wins, within a call and across calls; points that differ
// only below the resolution are duplicates.
func testDuplicates(t *testing.T, h Harness) {
	f := newFixture(t, h, 3)
	r, half := f.r, f.half()
	gen := func(n int, slots int64) []tablets.Point {
		out := make([]tablets.Point, n)
		for i := range out {
			out[i] = pt(f.inRandomZone(f.noisy(f.rng.Int64N(slots))), randValue(f.rng))
		}
		return out
	}
	crossBoundary := gen(250, 250)
	for i := 150; i < 250; i++ { // each of these repeats the step of a point 150 places earlier
		crossBoundary[i].Time = f.noisy(int64(floorTime(crossBoundary[i-150].Time, r).Sub(f.base) / r))
	}
	cases := []struct {
		name  string
		calls [][]tablets.Point
	}{
		{"same time in one call", [][]tablets.Point{{pt(f.at(1), 1), pt(f.at(1), 2)}}},
		{"same time in one call among others", [][]tablets.Point{{pt(f.at(0), 1), pt(f.at(1), 2), pt(f.at(2), 3), pt(f.at(1), 4), pt(f.at(3), 5), pt(f.at(1), 6)}}},
		{"sub-resolution in one call", [][]tablets.Point{{pt(f.at(1).Add(r-1), 1), pt(f.at(1), 2), pt(f.at(1).Add(half), 3)}}},
		{"same instant in another zone in one call", [][]tablets.Point{{pt(f.at(1), 1), pt(f.at(1).In(zones[0]), 2)}}},
		{"same time across calls", [][]tablets.Point{{pt(f.at(1), 1)}, {pt(f.at(1), 2)}}},
		{"sub-resolution across calls", [][]tablets.Point{{pt(f.at(1).Add(r-1), 1)}, {pt(f.at(1).Add(half), 2)}}},
		{"negative zero replaces zero", [][]tablets.Point{{pt(f.at(1), 0)}, {pt(f.at(1), negZero)}}},
		{"zero replaces negative zero in one call", [][]tablets.Point{{pt(f.at(1), negZero), pt(f.at(1), 0)}}},
		{"1000 points over 150 steps in one call", [][]tablets.Point{gen(1000, 150)}},
		{"repeats across a batch boundary", [][]tablets.Point{crossBoundary}},
		{"5 calls of 300 points over 200 steps", [][]tablets.Point{gen(300, 200), gen(300, 200), gen(300, 200), gen(300, 200), gen(300, 200)}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := f.sub(t)
			series := fmt.Sprintf("dup%02d", i)
			m := newModel(r)
			for _, call := range c.calls {
				g.write(series, call...)
				m.write(call...)
			}
			requirePoints(t, m.query(g.at(-1), g.at(300)), g.query(series, g.at(-1), g.at(300)), "Query(%s)", series)
			requirePoints(t, m.latest(1), g.latest(series, 1), "Latest(%s, 1)", series)
		})
	}
}

// 4. Ranges are half-open on the stored times: from included, to excluded, from == to empty,
// and edges in the middle of a step compare against the stored (truncated) times.
func testHalfOpen(t *testing.T, h Harness) {
	f := newFixture(t, h, 4)
	m := newModel(f.r)
	var pts []tablets.Point
	for k := range int64(20) { // a point at every step 0..19
		pts = append(pts, pt(f.at(k), float64(k)+0.5))
	}
	f.write("edges", pts...)
	m.write(pts...)
	// A neighbour whose points must never show up.
	f.write("edges2", pt(f.at(3), -1), pt(f.at(7), -2))

	half := f.half()
	at := f.at
	cases := []struct {
		name     string
		from, to time.Time
	}{
		{"exact edges", at(3), at(7)},
		{"from == to on a point", at(3), at(3)},
		{"from == to mid-step", at(3).Add(half), at(3).Add(half)},
		{"mid-step edges", at(3).Add(half), at(7).Add(half)},
		{"edges 1ns after points", at(3).Add(1), at(7).Add(1)},
		{"edges 1ns before points", at(3).Add(-1), at(7).Add(-1)},
		{"inside one step after its point", at(3).Add(1), at(4)},
		{"one step", at(3), at(4)},
		{"one nanosecond on a point", at(3), at(3).Add(1)},
		{"one nanosecond before a point", at(3).Add(-1), at(3)},
		{"straddling one point by 1ns", at(3).Add(-1), at(3).Add(1)},
		{"all", at(0), at(20)},
		{"all but the last", at(0), at(19)},
		{"covering", at(-5), at(25)},
		{"before the data", at(-10), at(0)},
		{"after the data", at(20), at(30)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := f.sub(t)
			want := m.query(c.from, c.to)
			requirePoints(t, want, g.query("edges", c.from, c.to), "Query(edges, %s, %s)", ts(c.from), ts(c.to))
			requirePoints(t, want, g.pages("edges", c.from, c.to, 3), "QueryPage(edges, %s, %s, 3)", ts(c.from), ts(c.to))
			many := g.queryMany([]string{"edges"}, c.from, c.to)
			requirePoints(t, want, many["edges"], "QueryMany([edges], %s, %s)", ts(c.from), ts(c.to))
			require.LessOrEqual(t, len(many), 1, "QueryMany returned series not asked for: %v", keys(many))
		})
	}
}

func keys(m map[string][]tablets.Point) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// 5. A written time is truncated to the resolution, floored from the Unix epoch, for every
// year the store accepts.
func testTruncation(t *testing.T, h Harness) {
	f := newFixture(t, h, 5)
	r := f.r
	anchors := []struct {
		name string
		t    time.Time
	}{
		{"base", baseTime},
		{"1971", time.Date(1971, 3, 4, 5, 6, 7, 891000000, time.UTC)},
		{"2200", time.Date(2200, 7, 1, 0, 0, 0, 500000000, time.UTC)},
		{"3000 (past int64 nanoseconds)", time.Date(3000, 6, 15, 12, 34, 56, 789123456, time.UTC)},
		{"MaxTime", tablets.MaxTime},
		{"the store's last time", f.last},
	}
	offsets := []struct {
		name string
		d    time.Duration
	}{
		{"aligned", 0},
		{"+1ns", 1},
		{"+R/2", r / 2},
		{"+R-1ns", r - 1},
	}
	for i, a := range anchors {
		aligned := floorTime(a.t, r)
		for j, o := range offsets {
			written := aligned.Add(o.d)
			if o.d >= r || (j > 0 && o.d == 0) || written.After(f.last) {
				continue
			}
			t.Run(a.name+" "+o.name, func(t *testing.T) {
				g := f.sub(t)
				series := fmt.Sprintf("trunc%d-%d", i, j)
				m := newModel(r)
				p := pt(written.In(zones[j%len(zones)]), float64(i*10+j)+0.25)
				g.write(series, p)
				m.write(p)
				require.True(t, floorTime(written, r).Equal(aligned), "model: floor of %s", ts(written))
				requirePoints(t, []tablets.Point{pt(aligned, p.Value)}, g.latest(series, 2), "Latest(%s) of a point written at %s", series, ts(written))
				to := aligned.Add(r)
				if to.After(tablets.MaxTime) || to.Before(aligned) {
					to = tablets.MaxTime
				}
				requirePoints(t, m.query(aligned, to), g.query(series, aligned, to), "Query(%s, %s, %s)", series, ts(aligned), ts(to))
				if written.After(aligned) {
					// The stored time is before the written one: a range starting at the
					// written time does not contain it.
					requirePoints(t, m.query(written, to), g.query(series, written, to), "Query(%s, %s, %s)", series, ts(written), ts(to))
				}
			})
		}
	}
	t.Run("200 writes in one step collapse to the last", func(t *testing.T) {
		g := f.sub(t)
		m := newModel(r)
		var pts []tablets.Point
		for i := range 200 {
			pts = append(pts, pt(g.noisy(7), float64(i)))
		}
		g.write("collapse", pts...)
		m.write(pts...)
		requirePoints(t, m.all(), g.query("collapse", g.at(0), g.at(20)), "Query(collapse)")
	})
}

// 6. Empty ranges and series that do not exist read as nothing, without error.
func testEmpty(t *testing.T, h Harness) {
	f := newFixture(t, h, 6)
	check := func(t *testing.T, g *fixture, series string, from, to time.Time) {
		t.Helper()
		requirePoints(t, nil, g.query(series, from, to), "Query(%q)", series)
		page, err := g.s.QueryPage(g.ctx, series, from, to, 10, "")
		require.NoError(t, err, "QueryPage(%q)", series)
		require.Empty(t, page.Points, "QueryPage(%q)", series)
		require.Empty(t, page.Next, "QueryPage(%q) of an empty range must have Next == \"\"", series)
		require.Empty(t, g.queryMany([]string{series}, from, to), "QueryMany([%q])", series)
	}
	t.Run("fresh table", func(t *testing.T) {
		g := f.sub(t)
		check(t, g, "nothing", g.at(0), g.at(1000))
		require.Empty(t, g.queryMany([]string{"nothing", "nope"}, g.at(0), g.at(1000)))
		for _, n := range []int{1, 10} {
			pts := g.latest("nothing", n)
			require.Empty(t, pts, "Latest(nothing, %d)", n)
		}
		g.del("nothing", g.at(0), g.at(1000))
		g.write("nothing") // a write of no points succeeds and stores nothing
		require.Empty(t, g.latest("nothing", 1), "Latest(nothing) after a write of no points")
	})
	t.Run("written series, empty range", func(t *testing.T) {
		g := f.sub(t)
		var pts []tablets.Point
		for k := int64(100); k < 110; k++ {
			pts = append(pts, pt(g.at(k), float64(k)))
		}
		g.write("some", pts...)
		check(t, g, "some", g.at(0), g.at(50))
		check(t, g, "some", g.at(110), g.at(200))
		check(t, g, "some", g.at(100), g.at(100))
		g.del("some", g.at(0), g.at(50))
		require.Len(t, g.query("some", g.at(0), g.at(200)), 10, "Delete of an empty range removed points")
	})
	t.Run("neighbours of a written series", func(t *testing.T) {
		g := f.sub(t)
		g.write("some", pt(g.at(105), 1))
		for _, name := range []string{"som", "some2", "somf", "Some", "some "} {
			check(t, g, name, g.at(0), g.at(200))
			require.Empty(t, g.latest(name, 5), "Latest(%q)", name)
		}
	})
}

// 7. QueryPage: pages of every size resume exactly.
func testPages(t *testing.T, h Harness) {
	t.Run("small", func(t *testing.T) {
		f := newFixture(t, h, 71)
		m := newModel(f.r)
		var pts []tablets.Point
		for i := range int64(40) { // every third step: room for later writes in between
			pts = append(pts, pt(f.noisy(3*i), randValue(f.rng)))
		}
		f.write("small", pts...)
		m.write(pts...)
		from, to := f.at(0), f.at(120)
		requirePoints(t, m.all(), f.query("small", from, to), "Query(small)")
		for limit := 1; limit <= 12; limit++ {
			t.Run(fmt.Sprintf("limit %d", limit), func(t *testing.T) {
				g := f.sub(t)
				requirePoints(t, m.all(), g.pages("small", from, to, limit), "QueryPage(small, limit %d)", limit)
			})
		}
		t.Run("limits changing between pages", func(t *testing.T) {
			g := f.sub(t)
			requirePoints(t, m.all(), g.pages("small", from, to, 1, 3, 2, 7, 12, 5), "QueryPage(small, mixed limits)")
		})
		t.Run("mid-step edges", func(t *testing.T) {
			g := f.sub(t)
			a, b := g.at(30).Add(g.half()), g.at(90).Add(g.half())
			requirePoints(t, m.query(a, b), g.pages("small", a, b, 4), "QueryPage(small, %s, %s, 4)", ts(a), ts(b))
		})
		t.Run("a token can be used twice", func(t *testing.T) {
			g := f.sub(t)
			p1, err := g.s.QueryPage(g.ctx, "small", from, to, 7, "")
			require.NoError(t, err)
			require.NotEmpty(t, p1.Next)
			p2a, err := g.s.QueryPage(g.ctx, "small", from, to, 7, p1.Next)
			require.NoError(t, err)
			p2b, err := g.s.QueryPage(g.ctx, "small", from, to, 7, p1.Next)
			require.NoError(t, err)
			requirePoints(t, p2a.Points, p2b.Points, "the same token read twice")
			requirePoints(t, m.all()[7:14], p2a.Points, "second page of 7")
		})
		t.Run("empty range", func(t *testing.T) {
			g := f.sub(t)
			page, err := g.s.QueryPage(g.ctx, "small", g.at(200), g.at(300), 5, "")
			require.NoError(t, err)
			require.Empty(t, page.Points)
			require.Empty(t, page.Next, "an empty range's only page must have Next == \"\"")
		})
	})

	t.Run("resume after writes", func(t *testing.T) {
		f := newFixture(t, h, 72)
		m := newModel(f.r)
		var pts []tablets.Point
		for i := range int64(40) {
			pts = append(pts, pt(f.at(3*i), float64(i)))
		}
		f.write("resume", pts...)
		m.write(pts...)
		from, to := f.at(0), f.at(120)
		p1, err := f.s.QueryPage(f.ctx, "resume", from, to, 10, "")
		require.NoError(t, err)
		requirePoints(t, m.all()[:10], p1.Points, "first page")
		require.NotEmpty(t, p1.Next)
		last := p1.Points[len(p1.Points)-1].Time // step 27

		var later []tablets.Point
		for i := range int64(9) { // new points in the part already read
			later = append(later, pt(f.at(3*i+1), -float64(i)))
		}
		later = append(later,
			pt(f.at(0), 1000),  // overwrite of a point already read
			pt(f.at(27), 1001), // overwrite of the last point returned: not returned again
			pt(f.at(28), 1002), // new, just after the last point returned: returned
			pt(f.at(61), 1003), // new, in the unread part
			pt(f.at(90), 1004), // overwrite in the unread part
		)
		f.write("resume", later...)
		m.write(later...)

		var rest []tablets.Point
		token := p1.Next
		for token != "" {
			page, err := f.s.QueryPage(f.ctx, "resume", from, to, 10, token)
			require.NoError(t, err)
			require.LessOrEqual(t, len(page.Points), 10)
			require.True(t, len(page.Points) > 0 || page.Next == "", "empty page with a Next token")
			rest = append(rest, page.Points...)
			token = page.Next
		}
		requirePoints(t, after(m.query(from, to), last), rest, "pages after the first, resumed after writes")
	})

	t.Run("large", func(t *testing.T) {
		f := newFixture(t, h, 73)
		m := newModel(f.r)
		// 2,600 points one to 200 steps apart: one entity each in the basic layout (three
		// service pages), spread over many rows and partitions in the advanced one.
		var pts []tablets.Point
		k := int64(0)
		for range 2600 {
			k += 1 + f.rng.Int64N(200)
			pts = append(pts, pt(f.noisy(k), randValue(f.rng)))
		}
		f.write("large", pts...)
		m.write(pts...)
		from, to := f.at(0), f.at(k+1)
		require.Len(t, m.all(), 2600)
		requirePoints(t, m.all(), f.query("large", from, to), "Query(large)")
		for _, limit := range []int{999, 1000, 1001, 2600, 5000} {
			t.Run(fmt.Sprintf("limit %d", limit), func(t *testing.T) {
				g := f.sub(t)
				requirePoints(t, m.all(), g.pages("large", from, to, limit), "QueryPage(large, limit %d)", limit)
			})
		}
		t.Run("subrange with mid-step edges, limit 1000", func(t *testing.T) {
			g := f.sub(t)
			a := floorTime(pts[300].Time, g.r).Add(g.half())
			b := floorTime(pts[2100].Time, g.r).Add(g.half())
			requirePoints(t, m.query(a, b), g.pages("large", a, b, 1000), "QueryPage(large, %s, %s, 1000)", ts(a), ts(b))
		})
	})
}

// 8. Latest: newest first, across a long time span, and only the series asked for.
func testLatest(t *testing.T, h Harness) {
	f := newFixture(t, h, 8)
	w := newWorld(f.r)
	day := int64(24 * time.Hour)
	cluster := func(series string, anchor time.Time, n int) {
		var pts []tablets.Point
		for range n {
			if p := pt(anchor.Add(time.Duration(f.rng.Int64N(day))), randValue(f.rng)); !p.Time.After(f.last) {
				pts = append(pts, p)
			}
		}
		f.write(series, pts...)
		w.get(series).write(pts...)
	}
	y1971 := time.Date(1971, 2, 3, 4, 5, 6, 0, time.UTC)
	y2020 := time.Date(2020, 6, 7, 8, 9, 10, 0, time.UTC)
	y2090 := time.Date(2090, 11, 12, 13, 14, 15, 0, time.UTC)
	cluster("cpu", y1971, 5)
	cluster("cpu", y2020, 5)
	cluster("cpu", y2090, 5)
	// Neighbours with newer and older points, which Latest(cpu) must not see.
	cluster("cpu2", time.Date(2095, 1, 1, 0, 0, 0, 0, time.UTC), 3)
	cluster("cpu2", time.Date(1970, 1, 2, 0, 0, 0, 0, time.UTC), 2)
	cluster("cp", time.Date(2091, 1, 1, 0, 0, 0, 0, time.UTC), 2)
	cluster("CPU", time.Date(2096, 1, 1, 0, 0, 0, 0, time.UTC), 2)
	cluster("cpu_1", time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC), 2)
	cluster("cpu|1", time.Date(2097, 1, 1, 0, 0, 0, 0, time.UTC), 2)
	cluster("old", y1971, 1)
	cluster("future", y2090, 1)
	cluster("far future", time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC), 1)

	cases := []struct {
		series string
		n      int
	}{
		{"cpu", 1}, {"cpu", 5}, {"cpu", 6}, {"cpu", 15}, {"cpu", 16}, {"cpu", 100}, {"cpu", 1 << 20},
		{"cpu2", 1}, {"cpu2", 10}, {"cp", 3}, {"CPU", 1}, {"cpu_1", 1}, {"cpu|1", 5},
		{"old", 1}, {"old", 5}, {"future", 1}, {"far future", 2},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s n=%d", c.series, c.n), func(t *testing.T) {
			g := f.sub(t)
			requirePoints(t, w.get(c.series).latest(c.n), g.latest(c.series, c.n), "Latest(%q, %d)", c.series, c.n)
		})
	}
	t.Run("after an overwrite of the newest", func(t *testing.T) {
		g := f.sub(t)
		newest := w.get("cpu").latest(1)[0]
		p := pt(newest.Time, 42.5)
		g.write("cpu", p)
		w.get("cpu").write(p)
		requirePoints(t, w.get("cpu").latest(2), g.latest("cpu", 2), "Latest(cpu, 2)")
	})
	t.Run("after a write of older points", func(t *testing.T) {
		// The latest Write is not the newest data (a store may keep hints of the newest time
		// written: a stale one must not hide newer points).
		g := f.sub(t)
		p := pt(y1971.Add(-time.Hour), 7.25)
		g.write("cpu", p)
		w.get("cpu").write(p)
		requirePoints(t, w.get("cpu").latest(4), g.latest("cpu", 4), "Latest(cpu, 4)")
		requirePoints(t, w.get("cpu").latest(100), g.latest("cpu", 100), "Latest(cpu, 100)")
	})
	t.Run("after deleting the newest cluster", func(t *testing.T) {
		g := f.sub(t)
		a, b := time.Date(2090, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2091, 1, 1, 0, 0, 0, 0, time.UTC)
		g.del("cpu", a, b)
		w.get("cpu").delete(a, b)
		requirePoints(t, w.get("cpu").latest(3), g.latest("cpu", 3), "Latest(cpu, 3)")
	})
}

// 9. Delete removes exactly the points with from <= stored time < to.
func testDelete(t *testing.T, h Harness) {
	f := newFixture(t, h, 9)
	w := newWorld(f.r)
	for _, series := range []string{"d", "d2", "other"} {
		var pts []tablets.Point
		for i := range int64(2400) { // even steps 0..4798
			pts = append(pts, pt(f.noisy(2*i), randValue(f.rng)))
		}
		if series != "d" {
			pts = pts[:300]
		}
		f.write(series, pts...)
		w.get(series).write(pts...)
	}
	verify := func(t *testing.T, g *fixture) {
		t.Helper()
		from, to := g.at(-10), g.at(6000)
		for _, series := range []string{"d", "d2", "other"} {
			requirePoints(t, w.get(series).query(from, to), g.query(series, from, to), "Query(%s)", series)
		}
	}
	del := func(g *fixture, series string, from, to time.Time) {
		g.del(series, from, to)
		w.get(series).delete(from, to)
	}
	steps := []struct {
		name string
		run  func(g *fixture)
	}{
		{"middle [400, 4400): 2000 points, several pages and batches", func(g *fixture) { del(g, "d", g.at(400), g.at(4400)) }},
		{"empty ranges", func(g *fixture) {
			del(g, "d", g.at(400), g.at(4400))     // already empty
			del(g, "d", g.at(4500), g.at(4500))    // from == to on a point: deletes nothing
			del(g, "d", g.at(5000), g.at(6000))    // after the data
			del(g, "d", g.at(-100), g.at(-10))     // before the data
			del(g, "nothing", g.at(0), g.at(6000)) // a series that does not exist
		}},
		{"mid-step edges", func(g *fixture) {
			a, b := g.at(100).Add(g.half()), g.at(300).Add(g.half())
			del(g, "d", a, b)
			stored := func(k int64) bool { return len(g.query("d", g.at(k), g.at(k+1))) == 1 }
			if g.half() > 0 {
				require.True(g.t, stored(100), "the point stored at step 100 is before from = step 100 + R/2: it must stay")
				require.False(g.t, stored(300), "the point stored at step 300 is before to = step 300 + R/2: it must be deleted")
			}
		}},
		{"1ns around one point", func(g *fixture) { del(g, "d", g.at(350).Add(-1), g.at(350).Add(1)) }},
		{"one step", func(g *fixture) { del(g, "d", g.at(360), g.at(361)) }},
		{"rewrite the deleted ranges", func(g *fixture) {
			var pts []tablets.Point
			for k := int64(400); k < 4400; k += 5 {
				pts = append(pts, pt(g.noisy(k), randValue(g.rng)))
			}
			pts = append(pts, pt(g.at(300), 3.5), pt(g.at(350), 4.5), pt(g.at(360), 5.5))
			g.write("d", pts...)
			w.get("d").write(pts...)
		}},
		{"the newest points, then Latest", func(g *fixture) {
			del(g, "d", g.at(4600), g.at(4800))
			requirePoints(g.t, w.get("d").latest(5), g.latest("d", 5), "Latest(d, 5)")
		}},
		{"the neighbour d2 entirely", func(g *fixture) { del(g, "d2", g.at(-10), g.at(6000)) }},
		{"everything [MinTime, MaxTime), then write again", func(g *fixture) {
			del(g, "d", tablets.MinTime, tablets.MaxTime)
			require.Empty(g.t, g.latest("d", 5), "Latest(d) after deleting everything")
			pts := []tablets.Point{pt(g.at(1), 1), pt(g.at(2), 2), pt(g.at(3), 3)}
			g.write("d", pts...)
			w.get("d").write(pts...)
		}},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			g := f.sub(t)
			s.run(g)
			verify(t, g)
		})
	}
}

// 10. Special values round-trip: NaN, infinities, extremes, denormals, signed zero.
func testSpecialValues(t *testing.T, h Harness) {
	f := newFixture(t, h, 10)
	values := []struct {
		name string
		v    float64
	}{
		{"NaN", math.NaN()},
		{"+Inf", math.Inf(1)},
		{"-Inf", math.Inf(-1)},
		{"MaxFloat64", math.MaxFloat64},
		{"-MaxFloat64", -math.MaxFloat64},
		{"smallest denormal", math.SmallestNonzeroFloat64},
		{"-smallest denormal", -math.SmallestNonzeroFloat64},
		{"largest denormal", math.Float64frombits(0x000fffffffffffff)},
		{"smallest normal", math.Float64frombits(0x0010000000000000)},
		{"-0.0", negZero},
		{"+0.0", 0},
		{"1", 1},
		{"-1", -1},
		{"2 (integral)", 2},
		{"2^31", 1 << 31},
		{"2^31-1", 1<<31 - 1},
		{"-2^31-1", -(1 << 31) - 1},
		{"2^53", 1 << 53},
		{"2^53+2", 1<<53 + 2},
		{"2^63", 1 << 63},
		{"-2^63", -(1 << 63)},
		{"2^64", 1 << 64},
		{"1e20", 1e20},
		{"1e21", 1e21},
		{"0.1", 0.1},
		{"1/3", 1.0 / 3},
		{"pi", math.Pi},
		{"1e-7", 1e-7},
		{"1e-310", 1e-310},
		{"next after 1", math.Nextafter(1, 2)},
		{"123456789012345680", 123456789012345680},
	}
	batch := make([]tablets.Point, len(values))
	for i, v := range values {
		batch[i] = pt(f.at(int64(i)), v.v)
		f.write("single", batch[i]) // one point per call: a store may take another path
	}
	f.write("batch", batch...)
	from, to := f.at(0), f.at(int64(len(values)))
	for _, series := range []string{"batch", "single"} {
		t.Run(series, func(t *testing.T) {
			g := f.sub(t)
			got := g.query(series, from, to)
			require.Len(t, got, len(values), "Query(%s)", series)
			for i, v := range values {
				t.Run(v.name, func(t *testing.T) {
					require.True(t, got[i].Time.Equal(batch[i].Time), "time of %s", v.name)
					require.True(t, sameValue(v.v, got[i].Value), "%s: wrote %v (bits %#016x), read %v (bits %#016x)",
						v.name, v.v, math.Float64bits(v.v), got[i].Value, math.Float64bits(got[i].Value))
				})
			}
			requirePoints(t, batch, g.pages(series, from, to, 7), "QueryPage(%s, limit 7)", series)
			requirePoints(t, reversed(batch), g.latest(series, len(values)), "Latest(%s)", series)
			many := g.queryMany([]string{series}, from, to)
			requirePoints(t, batch, many[series], "QueryMany([%s])", series)
		})
	}
}

// isolationNames returns separator-ish neighbours of "cpu", including ones shaped like a
// series name followed by a partition key (the base time in seconds and milliseconds).
func isolationNames() []string {
	hour := floorTime(baseTime, time.Hour)
	sec, ms := hour.Unix(), hour.UnixMilli()
	return []string{
		"cpu", "cpu2", "cp", "CPU", "cpu_00000000000", "cpu|0000000001",
		"cpu~1", "cpu-1", "cpu_1", "cpu 1", "cpu.1", "cpu:1", "cpu!", "cpu|", "cpu~", "cpu ", "cpu\u00a0",
		fmt.Sprintf("cpu|%d", sec), fmt.Sprintf("cpu_%d", sec), fmt.Sprintf("cpu~%d", sec),
		fmt.Sprintf("cpu-%d", ms), fmt.Sprintf("cpu|%019d", sec), fmt.Sprintf("cpu_%020d", ms),
	}
}

// 11. Series with neighbouring names are isolated.
func testSeriesIsolation(t *testing.T, h Harness) { runIsolation(t, h, 11, isolationNames()) }

// 12. Single quotes in names are data, never filter syntax.
func testQuotes(t *testing.T, h Harness) {
	runIsolation(t, h, 12, []string{
		"O'Brien", "O''Brien", "O", "Brien", "O'Brien'", "'", "''", "'''",
		"a' or PartitionKey ne 'x", "x') or (PartitionKey ne '", "' or '1' eq '1",
		"a", "x", "O%27Brien", `a" or "b`, "a' and RowKey ge '",
	})
}

// 13. Unicode, spaces and long names are valid and round-trip.
func testUnicode(t *testing.T, h Harness) {
	runIsolation(t, h, 13, []string{
		"températion", "tempe\u0301ration", "温度", "📈", "🌡️ sensor", "with space", " leading", "trailing ",
		"two  spaces", "Ω", "\u00a0nbsp",
		// Long names: a key is at most 1 KiB counted as UTF-16 (512 code units), and the
		// advanced layout adds its partition start to the series; a query filter names the
		// series up to three times, URL-encoded, within 4,000 bytes.
		repeatTo("x", 480), repeatTo("x", 479) + "y", repeatTo("é", 300), repeatTo("温", 300),
	})
}

// repeatTo repeats s to at most n bytes.
func repeatTo(s string, n int) string {
	out := ""
	for len(out)+len(s) <= n {
		out += s
	}
	return out
}

// runIsolation writes overlapping points to every name and checks that each reads back
// only its own points through every read method, and that deleting one touches no other.
func runIsolation(t *testing.T, h Harness, seed uint64, names []string) {
	f := newFixture(t, h, seed)
	w := newWorld(f.r)
	written := names[:0:0]
	for i, name := range names {
		var pts []tablets.Point
		for j := range int64(20) { // shared steps: every series has a point at 0, 5, 10, ...
			pts = append(pts, pt(f.noisy(5*j), float64(i*1000)+float64(j)))
		}
		for j := range 5 { // and a few of its own
			pts = append(pts, pt(f.noisy(f.rng.Int64N(100)), float64(i*1000+500+j)))
		}
		// A failed write is reported and the name left out, so the other names still run.
		if err := f.s.Write(f.ctx, name, pts...); err != nil {
			t.Errorf("Write(%s, %d points): %v", displayName(name), len(pts), err)
			continue
		}
		w.get(name).write(pts...)
		written = append(written, name)
	}
	names = written
	require.GreaterOrEqual(t, len(names), 2, "too few names could be written")
	from, to := f.at(0), f.at(100)
	for i, name := range names {
		t.Run(fmt.Sprintf("%02d %s", i, displayName(name)), func(t *testing.T) {
			g := f.sub(t)
			m := w.get(name)
			requirePoints(t, m.all(), g.query(name, from, to), "Query(%q)", name)
			requirePoints(t, m.all(), g.pages(name, from, to, 7), "QueryPage(%q, limit 7)", name)
			many := g.queryMany([]string{name}, from, to)
			require.Equal(t, []string{name}, keys(many), "QueryMany([%q]) series", name)
			requirePoints(t, m.all(), many[name], "QueryMany([%q])", name)
			requirePoints(t, m.latest(3), g.latest(name, 3), "Latest(%q, 3)", name)
		})
	}
	t.Run("QueryMany of all", func(t *testing.T) {
		g := f.sub(t)
		many := g.queryMany(names, from, to)
		require.Equal(t, sortedCopy(names), keys(many), "QueryMany series")
		for _, name := range names {
			requirePoints(t, w.get(name).all(), many[name], "QueryMany(all)[%q]", name)
		}
	})
	t.Run("Delete one", func(t *testing.T) {
		g := f.sub(t)
		g.del(names[0], from, to)
		w.get(names[0]).delete(from, to)
		g.del(names[1], g.at(20), g.at(60))
		w.get(names[1]).delete(g.at(20), g.at(60))
		for _, name := range names {
			requirePoints(t, w.get(name).all(), g.query(name, from, to), "Query(%q) after deleting %q and part of %q", name, names[0], names[1])
		}
		require.Empty(t, g.latest(names[0], 5), "Latest(%q) after deleting it", names[0])
	})
}

// displayName quotes a series name for a subtest name, shortening long ones.
func displayName(name string) string {
	if len(name) > 40 {
		return fmt.Sprintf("%q...(%d bytes)", name[:12], len(name))
	}
	return fmt.Sprintf("%q", name)
}

func sortedCopy(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return slices.Compact(out)
}

// 14. QueryMany reads several series at once, each as Query would.
func testQueryMany(t *testing.T, h Harness) {
	f := newFixture(t, h, 14)
	w := newWorld(f.r)
	names := []string{"m", "m1", "m10", "m100", "m1000", "cpu", "cpu2", "cp", "O'Brien", "'", "''",
		"a' or PartitionKey ne 'x", "温度", "cpu|1", "cpu_1"}
	for i := len(names); i < 40; i++ {
		names = append(names, fmt.Sprintf("s%02d", i))
	}
	span := max(int64(2*time.Hour/f.r), 200)
	// The short range: 30 resolution steps in the middle, where every series has 3 points.
	// Short relative to the store's own granularity, so that any layout reads it from one
	// or two partitions per series.
	shortStart, shortSteps := span*5/12, int64(30)
	write := func(name string) {
		var pts []tablets.Point
		for range 24 + f.rng.IntN(37) {
			pts = append(pts, pt(f.noisy(f.rng.Int64N(span)), randValue(f.rng)))
		}
		for range 3 {
			pts = append(pts, pt(f.noisy(shortStart+f.rng.Int64N(shortSteps)), randValue(f.rng)))
		}
		f.write(name, pts...)
		w.get(name).write(pts...)
	}
	for _, name := range names {
		write(name)
	}
	for _, name := range []string{"m10000", "outsider", "x", "cpu3"} { // written, never asked for
		write(name)
	}
	from, to := f.at(0), f.at(span)
	compare := func(t *testing.T, many map[string][]tablets.Point, ask []string, from, to time.Time) {
		t.Helper()
		var want []string
		for _, name := range sortedCopy(ask) {
			if len(w.get(name).query(from, to)) > 0 {
				want = append(want, name)
			}
		}
		require.Equal(t, want, nilIfEmpty(keys(many)), "series yielded by QueryMany")
		for _, name := range want {
			requirePoints(t, w.get(name).query(from, to), many[name], "QueryMany(...)[%q]", name)
		}
	}
	check := func(t *testing.T, g *fixture, ask []string, from, to time.Time) {
		t.Helper()
		compare(t, g.queryMany(ask, from, to), ask, from, to)
	}
	cases := []struct {
		name     string
		ask      []string
		from, to time.Time
	}{
		{"one series", names[:1], from, to},
		{"two series", []string{"m", "m1"}, from, to},
		{"forty series", names, from, to},
		{"duplicate name read once", []string{"m1", "cpu", "m1", "'", "'"}, from, to},
		{"unknown series", []string{"nope"}, from, to},
		{"known and unknown", []string{"m", "nope", "m1000"}, from, to},
		{"empty list", []string{}, from, to},
		{"nil list", nil, from, to},
		{"from == to", names, f.at(span / 2), f.at(span / 2)},
		{"mid-step edges", names, f.at(span / 4).Add(f.half()), f.at(span / 2).Add(f.half())},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { check(t, f.sub(t), c.ask, c.from, c.to) })
	}
	t.Run("each series equals Query", func(t *testing.T) {
		g := f.sub(t)
		many := g.queryMany(names, from, to)
		for _, name := range names {
			requirePoints(t, g.query(name, from, to), many[name], "QueryMany(all)[%q] vs Query(%q)", name, name)
		}
	})
	t.Run("forty series over 30 steps take at most 10 requests", func(t *testing.T) {
		g := f.sub(t)
		a, b := g.at(shortStart), g.at(shortStart+shortSteps)
		before := g.count()
		many := g.queryMany(names, a, b)
		used := g.count() - before
		t.Logf("QueryMany of %d series over %s: %d requests", len(names), b.Sub(a), used)
		require.LessOrEqual(t, used, int64(10), "QueryMany of %d series over a short range sent %d requests", len(names), used)
		compare(t, many, names, a, b)
	})
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}
