package engine

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/filter"
	"github.com/seed71701133/tablets/internal/pager"
)

const (
	// growth is how much wider the next window is after an empty one.
	growth = 16
	// firstWindow is the least span of the first window: the interval at which metrics are
	// commonly written is well under it, so a series written up to now is found at once.
	firstWindow = time.Minute
	// minWindowPoints is the least a window's $top allows, in points of full entities: small
	// entities are cheap, and a wider window saves requests.
	minWindowPoints = 128
)

// Latest returns the n newest points of series, newest first, paying for about what it
// returns. The service lists only oldest first, so Latest reads windows of time backwards
// from now, each with a $top a little over what the points still wanted need:
//
//   - The first window is [now - the span of n points at full density, end of time): it also
//     holds any points in the future. For a series written up to now it is the only request.
//   - A window that comes back complete is kept whole; the next one below it is sized from
//     the density seen so far, or 16 times wider after an empty one.
//   - Below the first window, a layout whose entities hold many points (advanced rows,
//     chunks) lists each window's keys first, and then reads whole only the newest entities,
//     as many as the points still wanted need: old history costs its keys, not its rows.
//   - A window that holds more entities than its $top (a dense past, or points in the future)
//     is narrowed by keys-only probes ($top=1, galloping then bisecting from the newest
//     entity it returned) until it is small enough to be read complete.
func (s *Store) Latest(ctx context.Context, series string, n int) ([]tablets.Point, error) {
	if err := s.layout.ValidateSeries(series); err != nil {
		return nil, err
	}
	if n < 1 {
		return nil, s.errorf("latest %q: %w: n %d must be at least 1", series, tablets.ErrInvalidLimit, n)
	}
	return s.latest(ctx, series, n, 0, s.endUnit(), false)
}

// LatestIn returns the n newest points of series with from <= Time < to, newest first, as
// Latest does; a to after tablets.MaxTime means every time from on. A range wholly in the past is listed by its keys at once rather than in
// windows from its end: a database reads each of its tables this way, and a table that does
// not hold the series costs one request.
func (s *Store) LatestIn(ctx context.Context, series string, n int, from, to time.Time) ([]tablets.Point, error) {
	through := to.After(tablets.MaxTime) // the range holds tablets.MaxTime itself
	if through {
		to = tablets.MaxTime
	}
	lo, hi, err := s.seriesRange(series, from, to)
	if err != nil {
		return nil, err
	}
	if through {
		hi = s.endUnit()
	}
	if n < 1 {
		return nil, fmt.Errorf("%w: n %d must be at least 1", tablets.ErrInvalidOptions, n)
	}
	if lo >= hi {
		return []tablets.Point{}, nil
	}
	return s.latest(ctx, series, n, lo, hi, true)
}

// latestWalk is the state of one Latest: the points found, newest first, are every point in
// [hi, ceiling); the next window is [lo, hi).
type latestWalk struct {
	n              int
	floor, ceiling uint64 // the range read
	now            uint64 // the clock, in units, a multiple of the granule
	newest         []tablets.Point
	newestUnit     uint64 // of newest[0]
	lo, hi         uint64
	width          uint64 // of the window just read
	firstWidth     uint64
	bounded        bool // a range: each window below the first reaches down to floor
}

// latest returns the n newest points of series in [floor, ceiling) units (see Latest).
func (s *Store) latest(ctx context.Context, series string, n int, floor, ceiling uint64, bounded bool) ([]tablets.Point, error) {
	wrap := func(err error) error { return s.errorf("latest %q: %w", series, err) }
	g := s.layout.Granule()
	clock := s.now()
	if clock.Before(tablets.MinTime) {
		clock = tablets.MinTime
	} else if clock.After(tablets.MaxTime) {
		clock = tablets.MaxTime
	}
	w := latestWalk{n: n, floor: floor, ceiling: ceiling, bounded: bounded, hi: ceiling}
	w.now = min(ceilUnits(s.layout.Format(), clock), s.endUnit()-1) / g * g
	w.newest = make([]tablets.Point, 0, min(n, 1024))
	// n points at full density, or a minute.
	w.width = max(ceilDiv(uint64(n), g), ceilDiv(uint64(firstWindow/s.layout.Format().Resolution), g)) * g
	w.firstWidth = w.width
	top := min(w.now, (ceiling-1)/g*g)
	w.lo = max(floor, top-min(top, w.width))
	var h *hint // read with the first window only
	if hinter, ok := s.layout.(Hinter); ok {
		h = &hint{layout: hinter}
	}
	// Beyond the first window, a layout whose entities hold many points lists a window's keys
	// before it reads any entity whole: a wide window of old history then costs its keys, not
	// its rows (a day at 1 Hz is 360 advanced rows of up to 7 KB each).
	_, overlapping := s.layout.(Overlapping)
	keysFirst := g > 1 || overlapping
	first := true
	if bounded && keysFirst && (ceiling <= w.now || floor > w.now) {
		first, w.lo = false, floor // a range in the past or the future: its keys at once
	}
	for ; len(w.newest) < n && w.hi > floor; first = false {
		var err error
		if first || !keysFirst {
			err = s.latestWhole(ctx, series, &w, h)
			h = nil
		} else {
			err = s.latestKeysFirst(ctx, series, &w)
		}
		if err != nil {
			return nil, wrap(err)
		}
	}
	return w.newest, nil
}

// latestWhole reads the window [w.lo, w.hi) whole, with the hint entity if h is not nil, and
// moves w to the next window.
func (s *Store) latestWhole(ctx context.Context, series string, w *latestWalk, h *hint) error {
	g := s.layout.Granule()
	top := windowTop(w.lo, min(w.hi, w.now+g), g, w.n-len(w.newest))
	points, last, complete, err := s.window(ctx, series, w.lo, w.hi, top, h)
	if err != nil {
		return err
	}
	if !complete {
		if h != nil && h.found && h.unit >= w.lo && h.unit < w.hi {
			// Too many entities (points in the future): try first just under the hint.
			w.lo = max(w.lo, h.unit+1-min(h.unit+1, w.firstWidth))
			return nil
		}
		w.lo, w.hi, err = s.narrow(ctx, series, w.lo, last, w.hi, top)
		return err
	}
	slices.Reverse(points)
	hintUnit := noHint
	if h != nil && h.found {
		hintUnit = h.unit
	}
	w.next(s, points, hintUnit)
	return nil
}

// latestKeysFirst lists the keys of the window [w.lo, w.hi), reads whole the newest of its
// entities that the points still wanted need, and moves w to what is left of it or to the
// next window.
func (s *Store) latestKeysFirst(ctx context.Context, series string, w *latestWalk) error {
	spans, last, complete, err := s.keysWindow(ctx, series, w.lo, w.hi, pager.MaxTop)
	if err != nil {
		return err
	}
	if !complete {
		w.lo, w.hi, err = s.narrow(ctx, series, w.lo, last, w.hi, pager.MaxTop)
		return err
	}
	points, below, err := s.readNewest(ctx, series, spans, w.lo, w.hi, w.n-len(w.newest))
	if err != nil {
		return err
	}
	if below > w.lo {
		// Enough points, or the window changed since its keys were listed (a concurrent
		// write): list what is left of it again.
		w.newest = appendNewest(w.newest, points, w.n, &w.newestUnit)
		w.hi = below
		return nil
	}
	w.next(s, points, noHint)
	return nil
}

// next takes the points of the window [w.lo, w.hi), newest first, and sizes the window below
// it: from the density seen so far, 16 times wider after an empty one, down to just under a
// hint below it, and down to the floor of a range.
func (w *latestWalk) next(s *Store, got []unitPoint, hintUnit uint64) {
	g := s.layout.Granule()
	w.newest = appendNewest(w.newest, got, w.n, &w.newestUnit)
	if len(got) == 0 {
		w.width = satMul(w.width, growth)
	} else if len(w.newest) < w.n {
		// Units per point so far, times the points still wanted, with a margin.
		perPoint := float64(w.newestUnit+1-w.lo) / float64(len(w.newest))
		w.width = uint64(min(math.Ceil(perPoint*float64(w.n-len(w.newest))*1.5), float64(s.endUnit())))
	}
	w.width = max(ceilDiv(w.width, g), 1) * g
	w.hi = w.lo
	w.lo = w.hi - min(w.hi, w.width)
	if hintUnit != noHint && hintUnit < w.hi {
		// The newest time the latest Write held is below: the next window reaches down to
		// just under it, however far that is. It is read complete before it counts, so a
		// stale hint costs requests, never points.
		w.lo = min(w.lo, hintUnit+1-min(hintUnit+1, w.firstWidth))
	}
	if w.bounded {
		_, overlapping := s.layout.(Overlapping)
		if g > 1 || overlapping {
			w.lo = 0 // keys first: the rest of the range at once
		}
	}
	w.lo = max(w.lo, w.floor)
}

// noHint is a hint unit that no hint holds.
const noHint uint64 = math.MaxUint64

// appendNewest appends to newest the points of got (newest first) until it holds n, and sets
// *newestUnit to the unit of the first point it holds.
func appendNewest(newest []tablets.Point, got []unitPoint, n int, newestUnit *uint64) []tablets.Point {
	if len(newest) == 0 && len(got) > 0 {
		*newestUnit = got[0].unit
	}
	for _, p := range got {
		if len(newest) == n {
			break
		}
		newest = append(newest, p.Point)
	}
	return newest
}

// windowTop is the $top of a window [lo, hi) that should hold need points: twice the
// entities they fill at the density guessed, capped by the entities the window can hold.
func windowTop(lo, hi, g uint64, need int) int {
	slots := uint64(1)
	if hi > lo {
		slots = ceilDiv(hi-lo, g) + 1
	}
	want := min(slots, uint64(need)+uint64(need)/2)
	return int(min(max(2*want+2, ceilDiv(minWindowPoints, g)+1), pager.MaxTop))
}

type unitPoint struct {
	unit uint64
	tablets.Point
}

// window reads the points of series in [lo, hi), asking for at most top entities. complete
// is false when there were top of them (there may be more): then last is the first unit of
// the newest entity read, and the points are not returned.
func (s *Store) window(ctx context.Context, series string, lo, hi uint64, top int, h *hint) (pts []unitPoint, last uint64, complete bool, err error) {
	if _, ok := s.layout.(Overlapping); ok {
		return s.overlapWindow(ctx, series, lo, hi, top)
	}
	names := []string{series}
	clauses := s.layout.Clauses(series, lo, hi)
	if h != nil {
		clauses = append(clauses, h.layout.HintClause(series))
	}
	filters, err := filter.Pack(clauses, s.limits)
	if err != nil {
		return nil, 0, false, err
	}
	format := s.layout.Format()
	d := decoder{layout: s.layout, series: names}
	collect := func(_ int, t uint64, v float64) bool {
		pts = append(pts, unitPoint{t, tablets.Point{Time: format.Time(t), Value: v}})
		return true
	}
	count, room := 0, 0
	if h != nil {
		room = 1 // for the hint entity
	}
	for _, f := range filters {
		q := pager.SubQuery{Filter: f.String(), Select: s.layout.Select()}
		for cont := (pager.Continuation{}); ; {
			entities, next, err := pager.Fetch(ctx, s.client, q, int32(min(top+room-count, pager.MaxTop)), cont)
			if err != nil {
				return nil, 0, false, err
			}
			for _, raw := range entities {
				if h != nil {
					if err := d.e.Decode(raw); err != nil {
						return nil, 0, false, err
					}
					if u, ok := h.layout.Hint(&d.e); ok {
						h.unit, h.found = u, true
						continue // not a point, and not counted: the $top has room for it
					}
				}
				if _, err := d.points(raw, lo, hi, collect); err != nil {
					return nil, 0, false, err
				}
				if last, _, err = s.layout.Span(&d.e); err != nil {
					return nil, 0, false, err
				}
				if count++; count == top {
					return nil, last, false, nil
				}
			}
			if next.IsZero() {
				break
			}
			cont = next
		}
	}
	return pts, 0, true, nil
}

// hint is what the first window of Latest learns of a Hinter's hint entity.
type hint struct {
	layout Hinter
	unit   uint64
	found  bool
}

// narrow shrinks a window [lo, hi) that held top entities or more, the newest of those read
// starting at a: it returns lo' <= hi' <= hi such that [lo', hi') should hold fewer than top
// entities (by the density of those read) and nothing is in [hi', hi). It gallops up from
// a (the series' end is usually close to it) and then bisects, by keys-only probes.
func (s *Store) narrow(ctx context.Context, series string, lo, a, hi uint64, top int) (uint64, uint64, error) {
	g := s.layout.Granule()
	perEntity := max(g, (a-lo)/uint64(top-1)) // units an entity took among those read
	step := max(g, (a-lo)/g*g)
	galloping := true
	for (hi-a)/g >= uint64(top) && (hi-a)/perEntity >= uint64(top/2) {
		m := a + step
		if !galloping || m >= hi || m < a {
			galloping = false
			m = a + (hi-a)/2/g*g
		}
		k, ok, err := s.probe(ctx, series, m)
		if err != nil {
			return 0, 0, err
		}
		if ok && k < hi {
			a = k
			if galloping {
				step = satMul(step, 8)
			}
			continue
		}
		hi, galloping = m, false // nothing in [m, hi)
	}
	return a, hi, nil
}

// probe reports whether series has an entity holding times at or after unit u, and
// returns the later of u and that entity's first unit, reading its keys only.
func (s *Store) probe(ctx context.Context, series string, u uint64) (uint64, bool, error) {
	q := pager.SubQuery{Filter: s.layout.AtOrAfter(series, u).String(), Select: s.layout.KeySelect()}
	var e entity.Entity
	for cont := (pager.Continuation{}); ; {
		entities, next, err := pager.Fetch(ctx, s.client, q, 1, cont)
		if err != nil {
			return 0, false, err
		}
		for _, raw := range entities {
			if err := s.decodeKeys(&e, raw); err != nil {
				return 0, false, err
			}
			if !s.layout.Owns(e.PartitionKey, series) {
				return 0, false, fmt.Errorf("entity PartitionKey %q is not of series %q", e.PartitionKey, series)
			}
			first, last, err := s.layout.Span(&e)
			if err != nil {
				return 0, false, err
			}
			if last < u {
				// Only an entity whose keys disagree (a row filed under another partition)
				// can answer a probe with an earlier time.
				return 0, false, &entity.DecodeError{PartitionKey: string(e.PartitionKey), RowKey: string(e.RowKey),
					Reason: "keys out of order for this layout (a row of another layout?)"}
			}
			return max(first, u), true, nil
		}
		if next.IsZero() {
			return 0, false, nil
		}
		cont = next
	}
}

func ceilDiv(a, b uint64) uint64 { return a/b + min(a%b, 1) }

// satMul is a*b, or the largest uint64 on overflow.
func satMul(a, b uint64) uint64 {
	if a != 0 && a*b/a != b {
		return math.MaxUint64
	}
	return a * b
}
