package chunks

import (
	"context"
	"fmt"

	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/internal/pager"
	"github.com/seed71701133/tablets/internal/partkey"
)

// owner finds the series of a chunk among those a read asked for.
type owner struct {
	series []string
	index  map[string]int
	last   int
}

func newOwner(series []string) *owner {
	o := &owner{series: series, index: make(map[string]int, len(series))}
	for i, s := range series {
		if _, ok := o.index[s]; !ok {
			o.index[s] = i
		}
	}
	return o
}

// find returns the index of the series asked for that owns an entity of layout l, if any.
func find[V any](o *owner, l Layout[V], e *entity.Entity) (int, bool) {
	// The service returns chunks in key order: the owner is most often the last one.
	if l.Owns(e.PartitionKey, o.series[o.last]) {
		return o.last, true
	}
	name, _, err := partkey.Split(l.Format, e.PartitionKey)
	if i, ok := o.index[name]; ok && err == nil {
		o.last = i
		return i, true
	}
	return 0, false
}

// of is find for a read whose every entity belongs to a series it asked for.
func of[V any](o *owner, l Layout[V], e *entity.Entity) (int, error) {
	if i, ok := find(o, l, e); ok {
		return i, nil
	}
	return 0, fmt.Errorf("entity PartitionKey %q RowKey %q belongs to no series this query asked for", e.PartitionKey, e.RowKey)
}

// add decodes a chunk entity into m (its values in [lo, hi), at its priority) and returns
// its first unit.
func (t Table[V]) add(e *entity.Entity, m *Merger[V], lo, hi uint64) (uint64, error) {
	c, err := t.Layout.Decode(e, true)
	if err != nil {
		return 0, err
	}
	err = t.Layout.Values(c, lo, hi, func(u uint64, v V) { m.Add(u, v, c.Prio) })
	return c.First, err
}

// Read passes emit the values of series in [from, to), oldest first, the latest write of a
// time winning. Chunks come in order of their first unit, so the values below the first
// unit of the latest chunk read are final. Each request is a fresh query from the first
// unit not yet final, never a continuation inside a partition: a query is a consistent
// snapshot only within one partition and one request, so a compaction that commits between
// two requests neither hides a value nor shows it twice. top is the $top of the first
// request (0: the service's page size); with grow, each request after it asks for twice as
// many.
func (t Table[V]) Read(ctx context.Context, series string, from, to uint64, top int32, grow bool, emit func(u uint64, v V) bool) error {
	names := []string{series}
	o := newOwner(names)
	e := entity.Entity{AllowStrings: true}
	var m Merger[V]
	stopped := false
	keep := func(u uint64, v V) bool {
		stopped = !emit(u, v)
		return !stopped
	}
	for at := from; at < to; {
		plan, err := t.Plan(names, at, to, t.Layout.Select())
		if err != nil {
			return err
		}
		restart := false
		for _, q := range plan {
			if restart || stopped {
				break
			}
			for cont := (pager.Continuation{}); ; {
				entities, next, err := pager.Fetch(ctx, t.Client, q, top, cont)
				if err != nil {
					return err
				}
				newest := at // first unit of the newest chunk read
				for _, raw := range entities {
					if err := e.Decode(raw); err != nil {
						return err
					}
					if _, err := of(o, t.Layout, &e); err != nil {
						return err
					}
					first, err := t.add(&e, &m, at, to)
					if err != nil {
						return err
					}
					if first > newest {
						if !m.Release(first, keep) {
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
				if newest > at {
					// Start again from the first unit not final, in a fresh snapshot.
					m.Reset()
					at, restart = newest, true
					break
				}
				cont = next // no progress in this page: continue it (a page of one chunk's time)
			}
		}
		if !restart {
			if !stopped {
				m.Release(to, keep)
			}
			return nil
		}
	}
	return nil
}

// ReadMany passes emit the values in [from, to) of every series (distinct), each series
// oldest first, reading the packed plan of all of them (Concurrency sub-queries at once,
// each a page ahead): one request per sub-query when no reply is cut short. Where one is (a
// page followed by a continuation), the series of its last chunk is read again from its
// first unit not final in fresh snapshots (Read), and its chunks elsewhere are skipped.
// (Whether the cut fell between partitions cannot be told: continuations are opaque,
// Azurite's and Azure's encoded.)
//
// With a context from WithKeyRange, and at least MinKeyRange series, it reads them by the
// range of keys they span instead (byKeyRange).
func (t Table[V]) ReadMany(ctx context.Context, series []string, from, to uint64, emit func(i int, u uint64, v V) bool) error {
	r := newManyRead(t, series, from, to, emit)
	if keyRangeHinted(ctx) && len(series) >= MinKeyRange {
		return r.byKeyRange(ctx)
	}
	return r.byPlan(ctx, allIndexes(len(series)))
}

func allIndexes(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// manyRead is the state of a ReadMany: each series' merger of the chunks read, the first
// unit not final, and whether a Read of its own took it over.
type manyRead[V any] struct {
	t        Table[V]
	series   []string
	from, to uint64
	emit     func(i int, u uint64, v V) bool
	o        *owner
	e        entity.Entity
	mergers  []Merger[V]
	newest   []uint64
	done     []bool
}

func newManyRead[V any](t Table[V], series []string, from, to uint64, emit func(i int, u uint64, v V) bool) *manyRead[V] {
	r := &manyRead[V]{t: t, series: series, from: from, to: to, emit: emit, o: newOwner(series),
		e: entity.Entity{AllowStrings: true}, mergers: make([]Merger[V], len(series)),
		newest: make([]uint64, len(series)), done: make([]bool, len(series))}
	for i := range r.newest {
		r.newest[i] = from
	}
	return r
}

// redo reads series i again from its first unit not final: the page that held its last
// chunk read was cut. It returns false when emit stopped the read.
func (r *manyRead[V]) redo(ctx context.Context, i int) (bool, error) {
	r.mergers[i].Reset()
	r.done[i] = true
	stopped := false
	err := r.t.Read(ctx, r.series[i], r.newest[i], r.to, 0, false, func(u uint64, v V) bool {
		stopped = !r.emit(i, u, v)
		return !stopped
	})
	return !stopped, err
}

// add takes chunk entity e of series i in: the values before its first unit are final.
// It returns false when emit stopped the read.
func (r *manyRead[V]) add(i int) (bool, error) {
	first, err := r.t.add(&r.e, &r.mergers[i], r.newest[i], r.to)
	if err != nil {
		return false, err
	}
	if first > r.newest[i] {
		if !r.mergers[i].Release(first, func(u uint64, v V) bool { return r.emit(i, u, v) }) {
			return false, nil
		}
		r.newest[i] = first
	}
	return true, nil
}

// finish passes emit what the mergers of the series in which hold, all final. It returns
// false when emit stopped the read.
func (r *manyRead[V]) finish(which []int) bool {
	for _, i := range which {
		if !r.done[i] && !r.mergers[i].Release(r.to, func(u uint64, v V) bool { return r.emit(i, u, v) }) {
			return false
		}
	}
	return true
}

// byPlan reads the series in which (none read yet) by their packed plan.
func (r *manyRead[V]) byPlan(ctx context.Context, which []int) error {
	names := make([]string, len(which))
	for k, i := range which {
		names[k] = r.series[i]
	}
	plan, err := r.t.Plan(names, r.from, r.to, r.t.Layout.Select())
	if err != nil {
		return err
	}
	prevQuery, last := -1, -1
	for page, err := range pager.Pages(ctx, r.t.Client, plan, 0, pager.Continuation{}, r.t.Concurrency) {
		if err != nil {
			return err
		}
		if page.Query == prevQuery && last >= 0 && !r.done[last] { // the page before was cut
			if more, err := r.redo(ctx, last); err != nil || !more {
				return err
			}
		}
		prevQuery, last = page.Query, -1
		for _, raw := range page.Entities {
			if err := r.e.Decode(raw); err != nil {
				return err
			}
			i, err := of(r.o, r.t.Layout, &r.e)
			if err != nil {
				return err
			}
			if r.done[i] {
				continue
			}
			if more, err := r.add(i); err != nil || !more {
				return err
			}
			last = i
		}
	}
	r.finish(which)
	return nil
}

// Window reads [lo, hi) of series in one request of at most top entities (a database's
// Latest reads windows backwards): complete when the reply holds fewer than top entities and
// nothing after them, and then units and values are its values in time order; otherwise
// last is the first unit of the newest entity read (at least lo).
func (t Table[V]) Window(ctx context.Context, series string, lo, hi uint64, top int) (units []uint64, values []V, last uint64, complete bool, err error) {
	plan, err := t.Plan([]string{series}, lo, hi, t.Layout.Select())
	if err != nil {
		return nil, nil, 0, false, err
	}
	if len(plan) != 1 {
		return nil, nil, 0, false, fmt.Errorf("a window's plan has %d sub-queries, want one", len(plan))
	}
	entities, next, err := pager.Fetch(ctx, t.Client, plan[0], int32(top), pager.Continuation{})
	if err != nil {
		return nil, nil, 0, false, err
	}
	o := newOwner([]string{series})
	e := entity.Entity{AllowStrings: true}
	var m Merger[V]
	for _, raw := range entities {
		if err := e.Decode(raw); err != nil {
			return nil, nil, 0, false, err
		}
		if _, err := of(o, t.Layout, &e); err != nil {
			return nil, nil, 0, false, err
		}
		if last, err = t.add(&e, &m, lo, hi); err != nil {
			return nil, nil, 0, false, err
		}
	}
	if len(entities) >= top || !next.IsZero() {
		return nil, nil, max(last, lo), false, nil
	}
	m.Release(hi, func(u uint64, v V) bool {
		units, values = append(units, u), append(values, v)
		return true
	})
	return units, values, 0, true, nil
}
