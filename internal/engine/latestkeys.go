package engine

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/filter"
	"github.com/seed71701133/tablets/internal/pager"
)

// sparseFirstRead is the most entities readNewest reads at first where the series is sparse.
const sparseFirstRead = 16

// span is the first and last unit of an entity, as its keys tell (Layout.Span).
type span struct{ first, last uint64 }

// keysWindow lists the spans of the entities of series that hold times in [lo, hi), in order
// of their first unit, reading their keys only and at most top of them. complete is false
// when there were top of them (there may be more): then last is the first unit of the newest
// entity listed, and no span is returned.
func (s *Store) keysWindow(ctx context.Context, series string, lo, hi uint64, top int) (spans []span, last uint64, complete bool, err error) {
	filters, err := filter.Pack(s.layout.Clauses(series, lo, hi), s.limits)
	if err != nil {
		return nil, 0, false, err
	}
	var e entity.Entity
	for _, f := range filters {
		q := pager.SubQuery{Filter: f.String(), Select: s.layout.KeySelect()}
		for cont := (pager.Continuation{}); ; {
			// A page may be empty and still carry a token: follow it.
			entities, next, err := pager.Fetch(ctx, s.client, q, int32(min(top-len(spans), pager.MaxTop)), cont)
			if err != nil {
				return nil, 0, false, err
			}
			for _, raw := range entities {
				if err := s.decodeKeys(&e, raw); err != nil {
					return nil, 0, false, err
				}
				if !s.layout.Owns(e.PartitionKey, series) {
					return nil, 0, false, fmt.Errorf("entity PartitionKey %q is not of series %q", e.PartitionKey, series)
				}
				first, last, err := s.layout.Span(&e)
				if err != nil {
					return nil, 0, false, err
				}
				if spans = append(spans, span{first, last}); len(spans) == top {
					return nil, first, false, nil
				}
			}
			if next.IsZero() {
				break
			}
			cont = next
		}
	}
	// Filters come in time order and the service returns each one's entities in key order;
	// sorting anyway costs nothing and makes "the k newest" true whatever a layout's keys.
	slices.SortStableFunc(spans, func(a, b span) int {
		switch {
		case a.first < b.first:
			return -1
		case a.first > b.first:
			return 1
		}
		return 0
	})
	return spans, 0, true, nil
}

// readNewest reads whole the newest of the entities listed in [lo, hi) (spans, by keysWindow)
// until it holds need points or has read them all, as few at a time as the points per entity
// seen so far say: first those that hold need points at full density (a layout's newest
// entity is often partly filled: one more), up to 16 where the newest are apart, or two
// chunks of an overlapping layout. It returns
// the points newest first, all those in [below, hi): below is lo when every listed entity was
// read, and above it when need was met or an entity appeared since the listing (then the rest
// must be listed again).
func (s *Store) readNewest(ctx context.Context, series string, spans []span, lo, hi uint64, need int) (pts []unitPoint, below uint64, err error) {
	if len(spans) == 0 {
		return nil, lo, nil
	}
	g := s.layout.Granule()
	_, overlapping := s.layout.(Overlapping)
	k := int(min(ceilDiv(uint64(need), g), uint64(len(spans)))) + 1
	switch n := len(spans); {
	case overlapping:
		k = 2
	case n >= 2 && spans[n-1].first-spans[n-2].first > g:
		// The newest rows are apart: the series is sparse here, likely a point or a few a
		// row. Read more of them at first, but few enough that full rows would cost little.
		k = max(k, min(need+1, sparseFirstRead))
	}
	below = hi
	read := 0 // entities read
	for i := len(spans); len(pts) < need && i > 0; {
		j := max(i-k, 0)
		for j > 0 && spans[j].first >= below { // chunks of one first unit: read them together
			j--
		}
		x := max(spans[j].first, lo) // a chunk may start below the window
		if j == 0 || x == lo {
			j, x = 0, lo
		}
		if x >= below {
			break
		}
		// $top: the entities [x, below) selects, and one more, so that the reply is complete
		// only if no entity was added since the listing.
		top := 1
		for _, sp := range spans {
			if sp.first < below && sp.last >= x {
				top++
			}
		}
		got, _, complete, err := s.window(ctx, series, x, below, top, nil)
		if err != nil {
			return nil, 0, err
		}
		if !complete {
			return pts, below, nil
		}
		for p := len(got) - 1; p >= 0; p-- {
			pts = append(pts, got[p])
		}
		read += i - j
		below, i = x, j
		if len(pts) == 0 {
			k *= 2
			continue
		}
		perEntity := float64(len(pts)) / float64(read)
		k = max(1, int(math.Ceil(float64(need-len(pts))/perEntity*1.5)))
	}
	return pts, below, nil
}
