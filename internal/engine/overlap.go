package engine

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/internal/pager"
)

// Merger holds the points of overlapping entities until they are final, and keeps for each
// time the value of the entity with the highest priority. The zero value is ready to use.
type Merger = merger

type merger struct {
	pts []prioPoint
}

type prioPoint struct {
	t    uint64
	v    float64
	prio uint64
	seq  int // arrival order: among equal priorities (the same chunk read twice) the last
}

// Add holds a point of an entity of priority prio.
func (m *merger) Add(t uint64, v float64, prio uint64) { m.add(t, v, prio) }

// Release passes emit the points below bound in time order, the highest priority's value of
// each time, and forgets them. It returns false when emit does.
func (m *merger) Release(bound uint64, emit func(t uint64, v float64) bool) bool {
	return m.release(bound, emit)
}

func (m *merger) add(t uint64, v float64, prio uint64) {
	m.pts = append(m.pts, prioPoint{t, v, prio, len(m.pts)})
}

// release passes emit the points below bound in time order, one per time, and forgets
// them. It returns false when emit does.
func (m *merger) release(bound uint64, emit func(t uint64, v float64) bool) bool {
	slices.SortFunc(m.pts, func(a, b prioPoint) int {
		return cmp.Or(cmp.Compare(a.t, b.t), cmp.Compare(b.prio, a.prio), cmp.Compare(b.seq, a.seq))
	})
	i := 0
	for ; i < len(m.pts) && m.pts[i].t < bound; i++ {
		if i > 0 && m.pts[i].t == m.pts[i-1].t {
			continue
		}
		if !emit(m.pts[i].t, m.pts[i].v) {
			return false
		}
	}
	m.pts = append(m.pts[:0], m.pts[i:]...)
	for j := range m.pts {
		m.pts[j].seq = j
	}
	return true
}

func (m *merger) reset() { m.pts = m.pts[:0] }

// overlapRead passes emit the points of series in [from, to), oldest first, for a layout
// whose entities overlap. Entities come in order of their first unit, so the points below
// the first unit of the latest entity read are final. Each request is a fresh query from
// the first time not yet final, never a continuation inside a partition: a query is a
// consistent snapshot only within one partition and one request, and so a compaction that
// commits between two requests neither hides a point nor shows it twice. top is the $top
// of the first request (0: the service's page size); with grow, each request after it asks
// for twice as many.
func (s *Store) overlapRead(ctx context.Context, series string, from, to uint64, top int32, grow bool,
	emit func(t uint64, v float64) bool) error {
	d := decoder{layout: s.layout, series: []string{series}}
	d.e.AllowStrings = true
	var m merger
	stopped := false
	keep := func(t uint64, v float64) bool {
		if !emit(t, v) {
			stopped = true
		}
		return !stopped
	}
	for t := from; t < to; {
		plan, err := s.plan([]string{series}, t, to, s.layout.Select())
		if err != nil {
			return err
		}
		restart := false
		for _, q := range plan {
			if restart || stopped {
				break
			}
			for cont := (pager.Continuation{}); ; {
				entities, next, err := pager.Fetch(ctx, s.client, q, top, cont)
				if err != nil {
					return err
				}
				newest := t // first unit of the newest entity read
				for _, raw := range entities {
					if _, err := d.decode(raw); err != nil {
						return err
					}
					first, err := s.addOverlapping(&d.e, &m, t, to)
					if err != nil {
						return err
					}
					if first > newest {
						if !m.release(first, keep) {
							return nil
						}
						newest = first
					}
				}
				if grow && top > 0 {
					top = min(2*top, pager.MaxTop)
				}
				if next.IsZero() {
					break
				}
				if newest > t {
					// Start again from the first time not final, in a fresh snapshot.
					m.reset()
					t, restart = newest, true
					break
				}
				cont = next // no progress in this page: continue it (a page of one entity's time)
			}
		}
		if !restart {
			if !stopped {
				m.release(to, keep)
			}
			return nil
		}
	}
	return nil
}

// addOverlapping holds in m the points of a decoded entity in [lo, hi), at its priority, and
// returns its first unit.
func (s *Store) addOverlapping(e *entity.Entity, m *merger, lo, hi uint64) (uint64, error) {
	first, _, err := s.layout.Span(e)
	if err != nil {
		return 0, err
	}
	prio, err := s.layout.(Overlapping).Priority(e)
	if err != nil {
		return 0, err
	}
	err = s.layout.Points(e, func(u uint64, v float64) {
		if u >= lo && u < hi {
			m.add(u, v, prio)
		}
	})
	return first, err
}

// overlapWindow reads [lo, hi) of series in one request of at most top entities, for
// Latest: complete when the reply holds fewer than top entities and nothing after them;
// otherwise last is the first unit of the newest entity read.
func (s *Store) overlapWindow(ctx context.Context, series string, lo, hi uint64, top int) (pts []unitPoint, last uint64, complete bool, err error) {
	plan, err := s.plan([]string{series}, lo, hi, s.layout.Select())
	if err != nil {
		return nil, 0, false, err
	}
	if len(plan) != 1 {
		return nil, 0, false, fmt.Errorf("a window's plan has %d sub-queries, want one", len(plan))
	}
	entities, next, err := pager.Fetch(ctx, s.client, plan[0], int32(top), pager.Continuation{})
	if err != nil {
		return nil, 0, false, err
	}
	d := decoder{layout: s.layout, series: []string{series}}
	d.e.AllowStrings = true
	var m merger
	for _, raw := range entities {
		if _, err := d.decode(raw); err != nil {
			return nil, 0, false, err
		}
		if last, err = s.addOverlapping(&d.e, &m, lo, hi); err != nil {
			return nil, 0, false, err
		}
	}
	if len(entities) >= top || !next.IsZero() {
		return nil, max(last, lo), false, nil
	}
	format := s.layout.Format()
	m.release(hi, func(t uint64, v float64) bool {
		pts = append(pts, unitPoint{t, tablets.Point{Time: format.Time(t), Value: v}})
		return true
	})
	return pts, 0, true, nil
}

// decodeKeys decodes an entity read with KeySelect.
func (s *Store) decodeKeys(e *entity.Entity, raw []byte) error {
	_, overlapping := s.layout.(Overlapping)
	e.AllowStrings = overlapping
	return e.Decode(raw)
}

// overlapMany passes emit the points of every series in [from, to) for a layout whose
// entities overlap, each series oldest first, reading the packed plan of all of them: one
// request per sub-query when no reply is cut short. Where one is (a continuation), the
// series of its last entity is read again from its first time not final in fresh snapshots
// (overlapRead), and its entities elsewhere are skipped.
func (s *Store) overlapMany(ctx context.Context, series []string, from, to uint64, emit func(series int, t uint64, v float64) bool) error {
	plan, err := s.plan(series, from, to, s.layout.Select())
	if err != nil {
		return err
	}
	d := decoder{layout: s.layout, series: series}
	d.e.AllowStrings = true
	mergers := make([]merger, len(series))
	newest := make([]uint64, len(series))
	for i := range newest {
		newest[i] = from
	}
	done := make([]bool, len(series))
	for _, q := range plan {
		for cont := (pager.Continuation{}); ; {
			entities, next, err := pager.Fetch(ctx, s.client, q, 0, cont)
			if err != nil {
				return err
			}
			last := -1
			for _, raw := range entities {
				o, err := d.decode(raw)
				if err != nil {
					return err
				}
				if done[o] {
					continue
				}
				first, err := s.addOverlapping(&d.e, &mergers[o], newest[o], to)
				if err != nil {
					return err
				}
				if first > newest[o] {
					if !mergers[o].release(first, func(t uint64, v float64) bool { return emit(o, t, v) }) {
						return nil
					}
					newest[o] = first
				}
				last = o
			}
			if next.IsZero() {
				break
			}
			if last >= 0 {
				mergers[last].reset()
				done[last] = true
				stopped := false
				err := s.overlapRead(ctx, series[last], newest[last], to, 0, false, func(t uint64, v float64) bool {
					stopped = !emit(last, t, v)
					return !stopped
				})
				if err != nil || stopped {
					return err
				}
			}
			cont = next
		}
	}
	for o := range mergers {
		if !done[o] && !mergers[o].release(to, func(t uint64, v float64) bool { return emit(o, t, v) }) {
			return nil
		}
	}
	return nil
}
