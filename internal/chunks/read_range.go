package chunks

import (
	"context"
	"slices"

	"github.com/seed71701133/tablets/filter"
	"github.com/seed71701133/tablets/internal/pager"
	"github.com/seed71701133/tablets/internal/partkey"
)

// MinKeyRange is the fewest series ReadMany reads by their range of keys (WithKeyRange):
// fewer fit in a request or two of their own clauses anyway.
const MinKeyRange = 16

// Most unselected chunks a read by key range takes for each selected one before it gives
// up the range for the series' own clauses: past keyRangeSkips per chunk kept, plus
// keyRangeSlack (a range of few series), the range costs more bytes than the clauses save
// requests. A page of the range is up to 1,000 chunks, of the clauses 13 to 15 series: at
// a quarter of the range's series selected the range still reads several times fewer
// requests, for at most four times the bytes.
const (
	keyRangeSkips = 3
	keyRangeSlack = 256
)

type keyRangeKey struct{}

// WithKeyRange returns a context in which ReadMany reads its series by the range of keys
// they span (byKeyRange): for a caller whose series are a dense run of a table's, in key
// order (tsdb's Select of many series, cut in key order). It changes what a read costs,
// never what it returns.
func WithKeyRange(ctx context.Context) context.Context {
	return context.WithValue(ctx, keyRangeKey{}, true)
}

func keyRangeHinted(ctx context.Context) bool {
	on, _ := ctx.Value(keyRangeKey{}).(bool)
	return on
}

// KeyRangeFilter selects the chunks holding times in [from, to) of every series whose
// PartitionKeys lie from those of first to those of last (escaped): all their partitions,
// and a chunk's first unit before to and its last at or after from (Clauses' narrowing,
// which selects exactly the chunks holding a time of the range in whichever partition).
// Four comparisons, whatever the number of series and partitions.
func (l Layout[V]) KeyRangeFilter(first, last string, from, to uint64) filter.Expr {
	return filter.And(
		filter.Ge("PartitionKey", partkey.Begin(first)),
		filter.Lt("PartitionKey", partkey.End(last)),
		filter.Ge(lastProperty, l.Key(from)),
		filter.Lt("RowKey", l.Key(to)),
	)
}

// byKeyRange reads the series by the range of PartitionKeys from the lowest series' to the
// highest's: one query of four comparisons, its pages up to 1,000 chunks, instead of a
// request per 13 to 15 series. The range holds the partitions of series not asked for too:
// their chunks are read and dropped. Where a cut page ends inside a series asked for, that
// series is read again from its first unit not final (Read), as ReadMany does; the pages
// across partitions are continuations, each partition still read in one snapshot or read
// again.
//
// When the range turns out sparse (more than keyRangeSkips chunks dropped for each kept, past
// keyRangeSlack; keyRangeSpillSkips when they are passed on, WithSpill), the read stops at
// the end of a page and the series it has not reached are read by their own clauses
// (byPlan): a sparse range costs at most a page.
func (r *manyRead[V]) byKeyRange(ctx context.Context) error {
	order := allIndexes(len(r.series))
	escaped := make([]string, len(r.series))
	for i, s := range r.series {
		escaped[i] = partkey.Escape(s)
	}
	slices.SortFunc(order, func(a, b int) int { return partkey.Compare(r.series[a], r.series[b]) })
	q := pager.SubQuery{
		Filter: r.t.Layout.KeyRangeFilter(escaped[order[0]], escaped[order[len(order)-1]], r.from, r.to).String(),
		Select: r.t.Layout.Select(),
		// The first page for about two chunks a series at a quarter selected; more after it.
		Top:  int32(min(pager.MaxTop, 8*len(r.series))),
		Grow: true,
	}
	kept, skipped := 0, 0
	skips := keyRangeSkips
	var spill *spiller[V]
	if to, ok := spillOf[V](ctx); ok && to.sink != nil {
		spill = &spiller[V]{spillTo: to, from: r.from, to: r.to}
		skips = keyRangeSpillSkips
	}
	last := -1 // the series asked for that owns the last chunk read, or -1
	var lastPK []byte
	top := q.Top
	for cont := (pager.Continuation{}); ; {
		entities, next, err := pager.Fetch(ctx, r.t.Client, q, top, cont)
		if err != nil {
			return err
		}
		last = -1
		for _, raw := range entities {
			if err := r.e.Decode(raw); err != nil {
				return err
			}
			lastPK = append(lastPK[:0], r.e.PartitionKey...)
			i, ok := find(r.o, r.t.Layout, &r.e)
			last = i
			if !ok {
				skipped++
				last = -1
				if spill != nil {
					if err := spill.add(r.t, &r.e); err != nil {
						return err
					}
				}
				continue
			}
			if spill != nil {
				spill.asked()
			}
			if r.done[i] {
				continue
			}
			kept++
			if more, err := r.add(i); err != nil || !more {
				return err
			}
		}
		if spill != nil {
			spill.pageEnd(!next.IsZero())
		}
		if next.IsZero() {
			break
		}
		if last >= 0 && !r.done[last] { // the page was cut inside series last
			if more, err := r.redo(ctx, last); err != nil || !more {
				return err
			}
		}
		if skipped > skips*kept+keyRangeSlack {
			// Sparse: what the range has not reached is read by its clauses.
			reached, rest := r.reached(order, escaped, lastPK)
			if !r.finish(reached) {
				return nil
			}
			return r.byPlan(ctx, rest)
		}
		cont, top = next, pager.NextTop(q, top, entities)
	}
	if spill != nil {
		spill.flush() // the range's last series, read to its end
	}
	r.finish(order)
	return nil
}

// reached splits the series (of order, by key) at pk, the PartitionKey of the last chunk a
// read by key range read: those whose partitions lie before it or hold it (all their
// chunks read, or a Read took them over), and those whose partitions all lie after it
// (none of their chunks read).
func (r *manyRead[V]) reached(order []int, escaped []string, pk []byte) (reached, rest []int) {
	for _, i := range order {
		if filter.CompareUTF16(partkey.Begin(escaped[i]), string(pk)) > 0 {
			rest = append(rest, i)
		} else {
			reached = append(reached, i)
		}
	}
	return reached, rest
}
