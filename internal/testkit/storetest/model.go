package storetest

import (
	"math"
	"math/big"
	"slices"
	"time"

	"github.com/seed71701133/tablets"
)

// This file holds the brute-force in-memory model the suite computes every expected result
// with. It is deliberately naive (a map from truncated time to value, sorted on every read)
// and shares no code with any store.

// floorTime truncates t to a multiple of r counted from the Unix epoch, in UTC, without
// overflow for any year up to 9999 (int64 nanoseconds end in 2262, so it uses big integers).
func floorTime(t time.Time, r time.Duration) time.Time {
	t = t.UTC()
	if r <= 1 {
		return time.Unix(t.Unix(), int64(t.Nanosecond())).UTC()
	}
	total := new(big.Int).Mul(big.NewInt(t.Unix()), big.NewInt(int64(time.Second)))
	total.Add(total, big.NewInt(int64(t.Nanosecond())))
	rr := big.NewInt(int64(r))
	q := new(big.Int).Div(total, rr) // Euclidean division: a floor for a positive divisor
	q.Mul(q, rr)
	sec, nsec := new(big.Int).DivMod(q, big.NewInt(int64(time.Second)), new(big.Int))
	return time.Unix(sec.Int64(), nsec.Int64()).UTC()
}

// tkey is a time usable as a map key for every year (UnixNano would overflow after 2262).
type tkey struct{ sec, nsec int64 }

func keyOf(t time.Time) tkey { return tkey{t.Unix(), int64(t.Nanosecond())} }

func (k tkey) time() time.Time { return time.Unix(k.sec, k.nsec).UTC() }

// model is one series: stored time (truncated to r) -> value.
type model struct {
	r   time.Duration
	pts map[tkey]float64
}

func newModel(r time.Duration) *model { return &model{r: r, pts: map[tkey]float64{}} }

// write applies points in argument order: the later one wins.
func (m *model) write(pts ...tablets.Point) {
	for _, p := range pts {
		m.pts[keyOf(floorTime(p.Time, m.r))] = p.Value
	}
}

// delete removes every point whose stored time st has from <= st < to.
func (m *model) delete(from, to time.Time) {
	for k := range m.pts {
		if st := k.time(); !st.Before(from) && st.Before(to) {
			delete(m.pts, k)
		}
	}
}

// query returns the points whose stored time st has from <= st < to, oldest first.
func (m *model) query(from, to time.Time) []tablets.Point {
	var out []tablets.Point
	for k, v := range m.pts {
		if st := k.time(); !st.Before(from) && st.Before(to) {
			out = append(out, tablets.Point{Time: st, Value: v})
		}
	}
	slices.SortFunc(out, func(a, b tablets.Point) int { return a.Time.Compare(b.Time) })
	return out
}

// all returns every point, oldest first.
func (m *model) all() []tablets.Point {
	out := make([]tablets.Point, 0, len(m.pts))
	for k, v := range m.pts {
		out = append(out, tablets.Point{Time: k.time(), Value: v})
	}
	slices.SortFunc(out, func(a, b tablets.Point) int { return a.Time.Compare(b.Time) })
	return out
}

// latest returns the n newest points, newest first.
func (m *model) latest(n int) []tablets.Point {
	all := m.all()
	slices.Reverse(all)
	if len(all) > n {
		all = all[:n]
	}
	return all
}

// after returns the points of pts (oldest first) strictly after t.
func after(pts []tablets.Point, t time.Time) []tablets.Point {
	var out []tablets.Point
	for _, p := range pts {
		if p.Time.After(t) {
			out = append(out, p)
		}
	}
	return out
}

// world is a model of a whole store: one model per series.
type world struct {
	r      time.Duration
	series map[string]*model
}

func newWorld(r time.Duration) *world { return &world{r: r, series: map[string]*model{}} }

func (w *world) get(name string) *model {
	m, ok := w.series[name]
	if !ok {
		m = newModel(w.r)
		w.series[name] = m
	}
	return m
}

// sameValue reports whether two values are the same: bit for bit, or both NaN, or both
// zero. The sign of zero is not kept: Azurite (JavaScript) writes -0 as 0, whatever the
// encoding sent (checked with -0.0, "-0" and -0 typed as Edm.Double).
func sameValue(a, b float64) bool {
	if math.IsNaN(a) || math.IsNaN(b) {
		return math.IsNaN(a) && math.IsNaN(b)
	}
	if a == 0 && b == 0 {
		return true
	}
	return math.Float64bits(a) == math.Float64bits(b)
}
