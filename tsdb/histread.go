package tsdb

import (
	"context"
	"fmt"
	"time"

	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/filter"
	"github.com/seed71701133/tablets/internal/histenc"
	"github.com/seed71701133/tablets/internal/pager"
	"github.com/seed71701133/tablets/internal/partkey"
)

// histUnits returns [from, to) in milliseconds: a millisecond is in the range iff its time is.
func histUnits(from, to time.Time) (uint64, uint64) {
	ceil := func(t time.Time) uint64 {
		u, err := histFormat.Units(t)
		if err != nil {
			return histFormat.Last + 1
		}
		if histFormat.Time(u).Before(t) {
			u++
		}
		return u
	}
	return ceil(from), ceil(to)
}

// histPlan packs the clauses of the series into sub-queries, in series then time order.
func histPlan(series []string, from, to uint64, sel string) ([]pager.SubQuery, error) {
	var clauses []filter.Expr
	for _, name := range series {
		clauses = append(clauses, histClauses(name, from, to)...)
	}
	filters, err := filter.Pack(clauses, histLimits)
	if err != nil {
		return nil, err
	}
	plan := make([]pager.SubQuery, len(filters))
	for i, f := range filters {
		plan[i] = pager.SubQuery{Filter: f.String(), Select: sel}
	}
	return plan, nil
}

// histOwner finds the series of a chunk among those a query asked for.
type histOwner struct {
	index map[string]int
	last  int
}

func newHistOwner(series []string) *histOwner {
	o := &histOwner{index: make(map[string]int, len(series))}
	for i, s := range series {
		o.index[s] = i
	}
	return o
}

func (o *histOwner) of(e *entity.Entity, series []string) (int, error) {
	// The service returns chunks in key order: the owner is most often the last one.
	if partkey.Owns(histFormat, e.PartitionKey, series[o.last]) {
		return o.last, nil
	}
	name, _, err := partkey.Split(histFormat, e.PartitionKey)
	i, ok := o.index[name]
	if err != nil || !ok {
		return 0, fmt.Errorf("chunk PartitionKey %q RowKey %q belongs to no series this query asked for", e.PartitionKey, e.RowKey)
	}
	o.last = i
	return i, nil
}

// readHistOne passes emit the samples of series in [from, to) of one table, oldest first,
// the latest write of a millisecond winning. Chunks come in order of their first
// millisecond, so the samples below the first millisecond of the latest chunk read are
// final. Each request is a fresh query from the first millisecond not yet final, never a
// continuation inside a partition: a query is a consistent snapshot only within one
// partition and one request, so a compaction that commits between two requests neither
// hides a sample nor shows it twice.
func readHistOne(ctx context.Context, client pager.Lister, series string, from, to uint64, emit func(histenc.Sample) bool) error {
	e := entity.Entity{AllowStrings: true}
	var m histMerger
	stopped := false
	keep := func(s histenc.Sample) bool {
		stopped = !emit(s)
		return !stopped
	}
	names := []string{series}
	owner := newHistOwner(names)
	for t := from; t < to; {
		plan, err := histPlan(names, t, to, histSelect)
		if err != nil {
			return err
		}
		restart := false
		for _, q := range plan {
			if restart || stopped {
				break
			}
			for cont := (pager.Continuation{}); ; {
				entities, next, err := pager.Fetch(ctx, client, q, 0, cont)
				if err != nil {
					return err
				}
				newest := t // first millisecond of the newest chunk read
				for _, raw := range entities {
					first, err := addHistChunk(&e, raw, owner, names, &m, t, to)
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
				if next.IsZero() {
					break
				}
				if newest > t {
					m.reset() // start again from the first millisecond not final
					t, restart = newest, true
					break
				}
				cont = next // no progress in this page: continue it
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

// addHistChunk decodes a chunk entity of one of names into m (its samples in [lo, hi)) and
// returns its first millisecond.
func addHistChunk(e *entity.Entity, raw []byte, owner *histOwner, names []string, m *histMerger, lo, hi uint64) (uint64, error) {
	if err := e.Decode(raw); err != nil {
		return 0, err
	}
	if _, err := owner.of(e, names); err != nil {
		return 0, err
	}
	c, err := decodeHistChunk(e, true)
	if err != nil {
		return 0, err
	}
	err = c.samples(lo, hi, func(s histenc.Sample) { m.add(s, c.prio) })
	return c.first, err
}

// histReadConcurrency is how many sub-queries of a packed read are in flight at once.
const histReadConcurrency = 8

// readHistMany passes emit the samples in [from, to) of every series of one table, each
// series oldest first, reading the packed plan of all of them (histReadConcurrency
// sub-queries at once, each a page ahead): one request per sub-query when no reply is cut
// short. Where one is (a page followed by a continuation), the series of its last chunk is
// read again from its first millisecond not final in fresh snapshots (readHistOne), and its
// chunks elsewhere are skipped. (Whether the cut fell between partitions cannot be told:
// continuations are opaque, Azurite's and Azure's encoded.)
func readHistMany(ctx context.Context, client pager.Lister, series []string, from, to uint64, emit func(i int, s histenc.Sample) bool) error {
	plan, err := histPlan(series, from, to, histSelect)
	if err != nil {
		return err
	}
	e := entity.Entity{AllowStrings: true}
	owner := newHistOwner(series)
	mergers := make([]histMerger, len(series))
	newest := make([]uint64, len(series))
	for i := range newest {
		newest[i] = from
	}
	done := make([]bool, len(series))
	// redo reads series o again from its first millisecond not final: the page that held its
	// last chunk read was cut.
	redo := func(o int) (bool, error) {
		mergers[o].reset()
		done[o] = true
		stopped := false
		err := readHistOne(ctx, client, series[o], newest[o], to, func(s histenc.Sample) bool {
			stopped = !emit(o, s)
			return !stopped
		})
		return !stopped, err
	}
	prevQuery, last := -1, -1
	for page, err := range pager.Pages(ctx, client, plan, 0, pager.Continuation{}, histReadConcurrency) {
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
			o, err := owner.of(&e, series)
			if err != nil {
				return err
			}
			if done[o] {
				continue
			}
			c, err := decodeHistChunk(&e, true)
			if err != nil {
				return err
			}
			if err := c.samples(newest[o], to, func(s histenc.Sample) { mergers[o].add(s, c.prio) }); err != nil {
				return err
			}
			if c.first > newest[o] {
				if !mergers[o].release(c.first, func(s histenc.Sample) bool { return emit(o, s) }) {
					return nil
				}
				newest[o] = c.first
			}
			last = o
		}
	}
	for o := range mergers {
		if !done[o] && !mergers[o].release(to, func(s histenc.Sample) bool { return emit(o, s) }) {
			return nil
		}
	}
	return nil
}

// pointOf is a stored sample as the API returns it.
func pointOf(s histenc.Sample) HistogramPoint {
	return HistogramPoint{Time: histFormat.Time(s.Unit), H: s.H, FH: s.FH}
}
