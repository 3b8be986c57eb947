package storetest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
)

// badNames are series names every store rejects with ErrInvalidSeries.
var badNames = []struct{ name, series string }{
	{"empty", ""},
	{"slash", "a/b"},
	{"only a slash", "/"},
	{"backslash", `a\b`},
	{"hash", "a#b"},
	{"question mark", "a?b"},
	{"NUL", "a\x00b"},
	{"tab", "a\tb"},
	{"newline", "a\nb"},
	{"U+001F", "a\x1fb"},
	{"DEL U+007F", "a\x7fb"},
	{"U+0085", "a\u0085b"},
	{"U+009F", "a\u009fb"},
	{"1100 bytes", strings.Repeat("x", 1100)},
}

// badTimes are times outside [MinTime, MaxTime].
var badTimes = []struct {
	name string
	t    time.Time
}{
	{"1969-12-31T23:59:59Z", time.Date(1969, 12, 31, 23, 59, 59, 0, time.UTC)},
	{"1ns before the epoch", tablets.MinTime.Add(-1)},
	{"zero time.Time", time.Time{}},
	{"year 10000", time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
	{"1ns after MaxTime", tablets.MaxTime.Add(1)},
	{"year 20000", time.Date(20000, 6, 1, 0, 0, 0, 0, time.UTC)},
}

const base64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

// 15. Bad input gets its sentinel error and sends no request.
func testBadInput(t *testing.T, h Harness) {
	f := newFixture(t, h, 15)
	good := make([]tablets.Point, 10)
	for i := range good {
		good[i] = pt(f.at(int64(i)), float64(i))
	}
	f.write("good", good...)
	f.write("good2", good...)
	from, to := f.at(0), f.at(10)

	// The checks for one method call each: the store, series, range are varied by the cases.
	rejectAll := func(t *testing.T, g *fixture, want error, series string, from, to time.Time, desc string) {
		t.Helper()
		g.requireRejected(t, want, "Query "+desc, func() error {
			return iterFailure(t, g.s.Query(g.ctx, series, from, to), "Query "+desc)
		})
		g.requireRejected(t, want, "QueryPage "+desc, func() error {
			_, err := g.s.QueryPage(g.ctx, series, from, to, 10, "")
			return err
		})
		g.requireRejected(t, want, "QueryMany "+desc, func() error {
			return iterFailure(t, g.s.QueryMany(g.ctx, []string{series}, from, to), "QueryMany "+desc)
		})
		g.requireRejected(t, want, "Delete "+desc, func() error { return g.s.Delete(g.ctx, series, from, to) })
	}

	t.Run("series names", func(t *testing.T) {
		for _, b := range badNames {
			t.Run(b.name, func(t *testing.T) {
				g := f.sub(t)
				want := tablets.ErrInvalidSeries
				g.requireRejected(t, want, "Write", func() error { return g.s.Write(g.ctx, b.series, good[0]) })
				rejectAll(t, g, want, b.series, from, to, fmt.Sprintf("(%q)", b.series))
				g.requireRejected(t, want, "Latest", func() error { _, err := g.s.Latest(g.ctx, b.series, 1); return err })
				g.requireRejected(t, want, "QueryMany with one bad name among good ones", func() error {
					return iterFailure(t, g.s.QueryMany(g.ctx, []string{"good", b.series, "good2"}, from, to), "QueryMany")
				})
			})
		}
	})

	t.Run("times", func(t *testing.T) {
		for _, b := range badTimes {
			t.Run(b.name, func(t *testing.T) {
				g := f.sub(t)
				want := tablets.ErrInvalidTime
				g.requireRejected(t, want, "Write", func() error { return g.s.Write(g.ctx, "good", pt(b.t, 1)) })
				rejectAll(t, g, want, "good", b.t, to, "with a bad from")
				rejectAll(t, g, want, "good", from, b.t, "with a bad to")
				rejectAll(t, g, want, "good", b.t, b.t, "with bad from and to")
			})
		}
		t.Run("from after to", func(t *testing.T) {
			g := f.sub(t)
			rejectAll(t, g, tablets.ErrInvalidTime, "good", g.at(5), g.at(4), "from one step after to")
			rejectAll(t, g, tablets.ErrInvalidTime, "good", g.at(5).Add(2), g.at(5).Add(1), "from 1ns after to")
		})
	})

	t.Run("a write with one bad point stores nothing", func(t *testing.T) {
		many := make([]tablets.Point, 250)
		for i := range many {
			many[i] = pt(f.at(int64(i)), float64(i))
		}
		cases := []struct {
			name   string
			points []tablets.Point
			want   error
		}{
			{"bad first", []tablets.Point{pt(badTimes[0].t, 0), good[1], good[2]}, tablets.ErrInvalidTime},
			{"bad in the middle", []tablets.Point{good[1], pt(badTimes[3].t, 0), good[2]}, tablets.ErrInvalidTime},
			{"bad last", []tablets.Point{good[1], good[2], pt(time.Time{}, 0)}, tablets.ErrInvalidTime},
			{"bad at 200 of 251", append(append(append([]tablets.Point{}, many[:200]...), pt(badTimes[0].t, 0)), many[200:]...), tablets.ErrInvalidTime},
		}
		for i, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				g := f.sub(t)
				series := fmt.Sprintf("atomic%d", i)
				g.requireRejected(t, c.want, "Write", func() error { return g.s.Write(g.ctx, series, c.points...) })
				requirePoints(t, nil, g.query(series, tablets.MinTime, tablets.MaxTime), "Query(%s) after a rejected write", series)
			})
		}
	})

	t.Run("QueryPage limit", func(t *testing.T) {
		g := f.sub(t)
		for _, limit := range []int{0, -1, math.MinInt} {
			g.requireRejected(t, tablets.ErrInvalidLimit, fmt.Sprintf("QueryPage limit %d", limit), func() error {
				_, err := g.s.QueryPage(g.ctx, "good", from, to, limit, "")
				return err
			})
		}
	})
	t.Run("Latest n", func(t *testing.T) {
		g := f.sub(t)
		for _, n := range []int{0, -1, math.MinInt} {
			g.requireRejected(t, tablets.ErrInvalidLimit, fmt.Sprintf("Latest n %d", n), func() error {
				_, err := g.s.Latest(g.ctx, "good", n)
				return err
			})
		}
	})

	t.Run("tokens", func(t *testing.T) {
		g := f.sub(t)
		first, err := g.s.QueryPage(g.ctx, "good", from, to, 3, "")
		require.NoError(t, err)
		tok := first.Next
		require.NotEmpty(t, tok, "QueryPage of 10 points with limit 3 must return a token")
		second, err := g.s.QueryPage(g.ctx, "good", from, to, 3, tok)
		require.NoError(t, err, "the valid token itself")
		requirePoints(t, good[3:6], second.Points, "the page after the valid token")

		reject := func(t *testing.T, what, series string, from, to time.Time, token string) {
			t.Helper()
			g.requireRejected(t, tablets.ErrInvalidToken, what, func() error {
				_, err := g.s.QueryPage(g.ctx, series, from, to, 3, token)
				return err
			})
		}
		t.Run("garbage", func(t *testing.T) {
			for _, bad := range []string{"xyz", "A", "====", "%", "\x00", " ", strings.Repeat("A", len(tok)), tok + "A", tok + tok} {
				reject(t, fmt.Sprintf("token %q", bad), "good", from, to, bad)
			}
		})
		t.Run("truncated", func(t *testing.T) {
			reject(t, "last char removed", "good", from, to, tok[:len(tok)-1])
			reject(t, "first char removed", "good", from, to, tok[1:])
		})
		t.Run("one char changed at every position", func(t *testing.T) {
			for i := range len(tok) {
				j := strings.IndexByte(base64URL, tok[i])
				for _, step := range []int{1, 32, 63} {
					c := base64URL[(max(j, 0)+step)%64]
					if c == tok[i] {
						continue
					}
					bad := tok[:i] + string(c) + tok[i+1:]
					reject(t, fmt.Sprintf("position %d: %q -> %q (token %q)", i, tok[i], c, bad), "good", from, to, bad)
				}
			}
		})
		t.Run("another series", func(t *testing.T) {
			reject(t, "token of good used on good2", "good2", from, to, tok)
		})
		t.Run("another range", func(t *testing.T) {
			reject(t, "different from", "good", g.at(1), to, tok)
			reject(t, "earlier from", "good", g.at(-100), to, tok)
			reject(t, "different to", "good", from, g.at(9), tok)
			reject(t, "later to", "good", from, g.at(20), tok)
		})
		t.Run("still valid afterwards", func(t *testing.T) {
			page, err := g.s.QueryPage(g.ctx, "good", from, to, 3, tok)
			require.NoError(t, err)
			requirePoints(t, good[3:6], page.Points, "the page after the valid token")
		})
	})
}

// 16. Breaking out of an iterator leaves the store usable.
func testAbandoned(t *testing.T, h Harness) {
	f := newFixture(t, h, 16)
	w := newWorld(f.r)
	for _, series := range []string{"a", "b"} {
		var pts []tablets.Point
		for i := range int64(1500) {
			pts = append(pts, pt(f.noisy(i), randValue(f.rng)))
		}
		f.write(series, pts...)
		w.get(series).write(pts...)
	}
	from, to := f.at(0), f.at(1500)
	usable := func(t *testing.T, g *fixture) {
		t.Helper()
		p := pt(g.at(1499), 7.25)
		g.write("a", p)
		w.get("a").write(p)
		requirePoints(t, w.get("a").all(), g.query("a", from, to), "Query(a) after an abandoned iterator")
		requirePoints(t, w.get("a").latest(2), g.latest("a", 2), "Latest(a) after an abandoned iterator")
	}
	for _, stop := range []int{1, 3, 1200} {
		t.Run(fmt.Sprintf("Query, break after %d", stop), func(t *testing.T) {
			g := f.sub(t)
			var got []tablets.Point
			for p, err := range g.s.Query(g.ctx, "a", from, to) {
				require.NoError(t, err)
				got = append(got, p)
				if len(got) == stop {
					break
				}
			}
			requirePoints(t, w.get("a").all()[:stop], got, "the points before the break")
			usable(t, g)
		})
	}
	t.Run("QueryMany, break after 3", func(t *testing.T) {
		g := f.sub(t)
		n := 0
		for _, err := range g.s.QueryMany(g.ctx, []string{"a", "b"}, from, to) {
			require.NoError(t, err)
			if n++; n == 3 {
				break
			}
		}
		require.Equal(t, 3, n)
		usable(t, g)
	})
	t.Run("20 abandoned queries", func(t *testing.T) {
		g := f.sub(t)
		for range 20 {
			for _, err := range g.s.Query(g.ctx, "b", from, to) {
				require.NoError(t, err)
				break
			}
		}
		usable(t, g)
	})
}

// 17. A canceled context fails the call with an error wrapping context.Canceled.
func testContext(t *testing.T, h Harness) {
	f := newFixture(t, h, 17)
	f.write("c", pt(f.at(1), 1), pt(f.at(2), 2))
	from, to := f.at(0), f.at(10)

	canceled, cancel := context.WithCancel(t.Context())
	cancel()
	expired, cancel2 := context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
	defer cancel2()

	for _, c := range []struct {
		name string
		ctx  context.Context
		want error
	}{
		{"canceled", canceled, context.Canceled},
		{"deadline exceeded", expired, context.DeadlineExceeded},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := f.sub(t)
			calls := []struct {
				name string
				call func() error
			}{
				{"Write", func() error { return g.s.Write(c.ctx, "c", pt(g.at(3), 3)) }},
				{"Query", func() error { return iterFailure(t, g.s.Query(c.ctx, "c", from, to), "Query") }},
				{"QueryPage", func() error { _, err := g.s.QueryPage(c.ctx, "c", from, to, 5, ""); return err }},
				{"QueryMany", func() error {
					return iterFailure(t, g.s.QueryMany(c.ctx, []string{"c"}, from, to), "QueryMany")
				}},
				{"Latest", func() error { _, err := g.s.Latest(c.ctx, "c", 1); return err }},
				{"Delete", func() error { return g.s.Delete(c.ctx, "c", from, to) }},
			}
			for _, call := range calls {
				var err error
				require.NotPanics(t, func() { err = call.call() }, "%s panicked", call.name)
				require.Error(t, err, "%s with a %s context", call.name, c.name)
				require.True(t, errors.Is(err, c.want), "%s with a %s context: want an error wrapping %v, got %v", call.name, c.name, c.want, err)
			}
		})
	}
	t.Run("store still usable", func(t *testing.T) {
		g := f.sub(t)
		require.Len(t, g.query("c", from, to), 2)
	})
}

// 18. The extremes of the accepted range, [MinTime, MaxTime], round-trip.
func testTimeBounds(t *testing.T, h Harness) {
	f := newFixture(t, h, 18)
	m := newModel(f.r)
	maxFloor := floorTime(f.last, f.r)
	var pts []tablets.Point
	for _, p := range []tablets.Point{
		pt(tablets.MinTime, 1),
		pt(tablets.MinTime.Add(f.r), 2),
		pt(time.Unix(0, math.MaxInt64).UTC(), 3), // the last int64 nanosecond (2262)
		pt(time.Date(2262, 4, 12, 0, 0, 0, 0, time.UTC), 4),
		pt(time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC), 5),
		pt(maxFloor.Add(-f.r), 6),
		pt(maxFloor, 7),
		pt(f.last, 8), // the same step as maxFloor: replaces 7
	} {
		if !p.Time.After(f.last) {
			pts = append(pts, p)
		}
	}
	if f.last.Before(tablets.MaxTime) {
		t.Run("a write after the store's last time is rejected", func(t *testing.T) {
			g := f.sub(t)
			g.requireRejected(t, tablets.ErrInvalidTime, "Write after the last time", func() error {
				return g.s.Write(g.ctx, "bounds", pt(f.last.Add(f.r), 1))
			})
		})
	}
	f.write("bounds", pts...)
	m.write(pts...)
	lo, hi := tablets.MinTime, tablets.MaxTime
	t.Run("Query everything", func(t *testing.T) {
		g := f.sub(t)
		requirePoints(t, m.query(lo, hi), g.query("bounds", lo, hi), "Query(bounds, MinTime, MaxTime)")
	})
	t.Run("QueryPage everything", func(t *testing.T) {
		g := f.sub(t)
		requirePoints(t, m.query(lo, hi), g.pages("bounds", lo, hi, 2), "QueryPage(bounds, MinTime, MaxTime, 2)")
	})
	t.Run("QueryMany everything", func(t *testing.T) {
		g := f.sub(t)
		requirePoints(t, m.query(lo, hi), g.queryMany([]string{"bounds"}, lo, hi)["bounds"], "QueryMany(bounds)")
	})
	t.Run("around 2262", func(t *testing.T) {
		g := f.sub(t)
		a, b := time.Date(2262, 4, 11, 0, 0, 0, 0, time.UTC), time.Date(2262, 4, 13, 0, 0, 0, 0, time.UTC)
		requirePoints(t, m.query(a, b), g.query("bounds", a, b), "Query(bounds, %s, %s)", ts(a), ts(b))
	})
	t.Run("Latest", func(t *testing.T) {
		g := f.sub(t)
		requirePoints(t, m.latest(3), g.latest("bounds", 3), "Latest(bounds, 3)")
	})
	t.Run("Delete everything", func(t *testing.T) {
		g := f.sub(t)
		g.del("bounds", lo, hi)
		m.delete(lo, hi)
		requirePoints(t, m.latest(10), g.latest("bounds", 10), "Latest(bounds) after Delete(MinTime, MaxTime)")
	})
}
