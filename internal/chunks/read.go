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

// of returns the index of the series that owns an entity of layout l.
func of[V any](o *owner, l Layout[V], e *entity.Entity) (int, error) {
	// The service returns chunks in key order: the owner is most often the last one.
	if l.Owns(e.PartitionKey, o.series[o.last]) {
		return o.last, nil
	}
	name, _, err := partkey.Split(l.Format, e.PartitionKey)
	if i, ok := o.index[name]; ok && err == nil {
		o.last = i
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
func (t Table[V]) ReadMany(ctx context.Context, series []string, from, to uint64, emit func(i int, u uint64, v V) bool) error {
	plan, err := t.Plan(series, from, to, t.Layout.Select())
	if err != nil {
		return err
	}
	e := entity.Entity{AllowStrings: true}
	o := newOwner(series)
	mergers := make([]Merger[V], len(series))
	newest := make([]uint64, len(series))
	for i := range newest {
		newest[i] = from
	}
	done := make([]bool, len(series))
	// redo reads series i again from its first unit not final: the page that held its last
	// chunk read was cut.
	redo := func(i int) (bool, error) {
		mergers[i].Reset()
		done[i] = true
		stopped := false
		err := t.Read(ctx, series[i], newest[i], to, 0, false, func(u uint64, v V) bool {
			stopped = !emit(i, u, v)
			return !stopped
		})
		return !stopped, err
	}
	prevQuery, last := -1, -1
	for page, err := range pager.Pages(ctx, t.Client, plan, 0, pager.Continuation{}, t.Concurrency) {
		if err != nil {
			return err
		}
		if page.Query == prevQuery && last >= 0 && !done[last] { // the page before was cut
			if more, err := redo(last); err != nil || !more {
				return err
			}
		}
		prevQuery, last = page.Query, -1
		for _, raw := range page.Entities {
			if err := e.Decode(raw); err != nil {
				return err
			}
			i, err := of(o, t.Layout, &e)
			if err != nil {
				return err
			}
			if done[i] {
				continue
			}
			first, err := t.add(&e, &mergers[i], newest[i], to)
			if err != nil {
				return err
			}
			if first > newest[i] {
				if !mergers[i].Release(first, func(u uint64, v V) bool { return emit(i, u, v) }) {
					return nil
				}
				newest[i] = first
			}
			last = i
		}
	}
	for i := range mergers {
		if !done[i] && !mergers[i].Release(to, func(u uint64, v V) bool { return emit(i, u, v) }) {
			return nil
		}
	}
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
