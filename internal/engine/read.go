package engine

import (
	"context"
	"fmt"
	"iter"
	"slices"
	"time"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/filter"
	"github.com/seed71701133/tablets/internal/pager"
)

// plan packs the clauses of several series into sub-queries, in series then time order.
func (s *Store) plan(series []string, from, to uint64, sel string) ([]pager.SubQuery, error) {
	var clauses []filter.Expr
	for _, name := range series {
		clauses = append(clauses, s.layout.Clauses(name, from, to)...)
	}
	filters, err := filter.Pack(clauses, s.limits)
	if err != nil {
		return nil, err
	}
	plan := make([]pager.SubQuery, len(filters))
	for i, f := range filters {
		plan[i] = pager.SubQuery{Filter: f.String(), Select: sel}
	}
	return plan, nil
}

// decoder turns the entities of pages into points of the series asked for.
type decoder struct {
	layout Layout
	series []string
	owner  int
	e      entity.Entity
}

// entity decodes raw and returns the index of the series that owns it.
func (d *decoder) decode(raw []byte) (int, error) {
	if err := d.e.Decode(raw); err != nil {
		return 0, err
	}
	// The service returns entities in key order: the owner is most often the last one.
	if !d.layout.Owns(d.e.PartitionKey, d.series[d.owner]) {
		d.owner = slices.IndexFunc(d.series, func(s string) bool { return d.layout.Owns(d.e.PartitionKey, s) })
		if d.owner < 0 {
			d.owner = 0
			return 0, fmt.Errorf("entity PartitionKey %q RowKey %q belongs to no series this query asked for",
				d.e.PartitionKey, d.e.RowKey)
		}
	}
	return d.owner, nil
}

// points calls fn with the points of raw in [from, to); fn returns false to stop, and
// points then returns false.
func (d *decoder) points(raw []byte, from, to uint64, fn func(series int, t uint64, v float64) bool) (bool, error) {
	owner, err := d.decode(raw)
	if err != nil {
		return false, err
	}
	stopped := false
	err = d.layout.Points(&d.e, func(t uint64, v float64) {
		if !stopped && t >= from && t < to {
			stopped = !fn(owner, t, v)
		}
	})
	return !stopped, err
}

// scan runs a plan with bounded concurrency and calls fn with every point in [from, to), in
// plan order. fn returns false to stop.
func (s *Store) scan(ctx context.Context, series []string, plan []pager.SubQuery, from, to uint64,
	fn func(series int, t uint64, v float64) bool) error {
	d := decoder{layout: s.layout, series: series}
	for page, err := range pager.Pages(ctx, s.client, plan, 0, pager.Continuation{}, s.concurrency) {
		if err != nil {
			return err
		}
		for _, raw := range page.Entities {
			more, err := d.points(raw, from, to, fn)
			if err != nil {
				return err
			}
			if !more {
				return nil
			}
		}
	}
	return nil
}

// Query yields the points of series in [from, to), oldest first.
func (s *Store) Query(ctx context.Context, series string, from, to time.Time) iter.Seq2[tablets.Point, error] {
	return func(yield func(tablets.Point, error) bool) {
		lo, hi, err := s.seriesRange(series, from, to)
		if err != nil {
			yield(tablets.Point{}, err)
			return
		}
		for p, err := range s.queryUnits(ctx, series, lo, hi) {
			if err != nil {
				yield(tablets.Point{}, s.errorf("query %q: %w", series, err))
				return
			}
			if !yield(p, nil) {
				return
			}
		}
	}
}

// queryUnits yields the points of series in [from, to) units.
func (s *Store) queryUnits(ctx context.Context, series string, from, to uint64) iter.Seq2[tablets.Point, error] {
	return func(yield func(tablets.Point, error) bool) {
		if from >= to {
			return
		}
		format := s.layout.Format()
		if _, ok := s.layout.(Overlapping); ok {
			err := s.overlapRead(ctx, series, from, to, 0, false, func(t uint64, v float64) bool {
				return yield(tablets.Point{Time: format.Time(t), Value: v}, nil)
			})
			if err != nil {
				yield(tablets.Point{}, err)
			}
			return
		}
		names := []string{series}
		plan, err := s.plan(names, from, to, s.layout.Select())
		if err != nil {
			yield(tablets.Point{}, err)
			return
		}
		err = s.scan(ctx, names, plan, from, to, func(_ int, t uint64, v float64) bool {
			return yield(tablets.Point{Time: format.Time(t), Value: v}, nil)
		})
		if err != nil {
			yield(tablets.Point{}, err)
		}
	}
}

// QueryMany yields the points of every series in [from, to), each series oldest first.
func (s *Store) QueryMany(ctx context.Context, series []string, from, to time.Time) iter.Seq2[tablets.SeriesPoint, error] {
	return func(yield func(tablets.SeriesPoint, error) bool) {
		var names []string
		seen := make(map[string]bool, len(series))
		for _, name := range series {
			if err := s.layout.ValidateSeries(name); err != nil {
				yield(tablets.SeriesPoint{}, err)
				return
			}
			if !seen[name] {
				seen[name] = true
				names = append(names, name)
			}
		}
		lo, hi, err := s.units(from, to)
		if err != nil {
			yield(tablets.SeriesPoint{}, err)
			return
		}
		if lo >= hi || len(names) == 0 {
			return
		}
		format := s.layout.Format()
		if _, ok := s.layout.(Overlapping); ok {
			err := s.overlapMany(ctx, names, lo, hi, func(i int, t uint64, v float64) bool {
				return yield(tablets.SeriesPoint{Series: names[i], Point: tablets.Point{Time: format.Time(t), Value: v}}, nil)
			})
			if err != nil {
				yield(tablets.SeriesPoint{}, s.errorf("query many: %w", err))
			}
			return
		}
		plan, err := s.plan(names, lo, hi, s.layout.Select())
		if err != nil {
			yield(tablets.SeriesPoint{}, err)
			return
		}
		err = s.scan(ctx, names, plan, lo, hi, func(i int, t uint64, v float64) bool {
			return yield(tablets.SeriesPoint{Series: names[i], Point: tablets.Point{Time: format.Time(t), Value: v}}, nil)
		})
		if err != nil {
			yield(tablets.SeriesPoint{}, s.errorf("query many: %w", err))
		}
	}
}

// QueryPage returns at most limit points of [from, to) from the position of token. A page
// is a fresh query from the token's time, asking the service for about as many entities as
// limit+1 points need when rows are full (and twice as many on each following page when
// they are not), read without look-ahead: a page costs about what its points cost.
func (s *Store) QueryPage(ctx context.Context, series string, from, to time.Time, limit int, token string) (tablets.Page, error) {
	lo, hi, err := s.seriesRange(series, from, to)
	if err != nil {
		return tablets.Page{}, err
	}
	if limit < 1 {
		return tablets.Page{}, s.errorf("query page %q: %w: limit %d must be at least 1", series, tablets.ErrInvalidLimit, limit)
	}
	binding := pager.Bind(s.layout.ID(), series, lo, hi)
	start := lo
	if token != "" {
		pos, err := pager.DecodeToken(token, binding, lo, hi)
		if err != nil {
			return tablets.Page{}, err
		}
		start = pos.After
	}
	if start >= hi {
		return tablets.Page{}, nil
	}
	format := s.layout.Format()
	var out tablets.Page
	var lastUnit uint64
	more := false
	take := func(_ int, t uint64, v float64) bool {
		if len(out.Points) == limit {
			more = true // one point past the page: there is a next page
			return false
		}
		out.Points = append(out.Points, tablets.Point{Time: format.Time(t), Value: v})
		lastUnit = t
		return true
	}
	wrap := func(err error) error { return s.errorf("query page %q: %w", series, err) }
	if err := s.readPage(ctx, series, start, hi, limit, take); err != nil {
		return tablets.Page{}, wrap(err)
	}
	if more {
		out.Next = pager.Token{Binding: binding, After: lastUnit + 1}.Encode()
	}
	return out, nil
}

// readPage passes take the points of series from start, asking the service for about as
// many entities as limit+1 points need when they are full.
func (s *Store) readPage(ctx context.Context, series string, start, hi uint64, limit int, take func(int, uint64, float64) bool) error {
	if _, ok := s.layout.(Overlapping); ok {
		// An entity holds many points: the one holding start and the next, whose first unit
		// makes the first one's points final.
		return s.overlapRead(ctx, series, start, hi, 2, true, func(t uint64, v float64) bool { return take(0, t, v) })
	}
	names := []string{series}
	plan, err := s.plan(names, start, hi, s.layout.Select())
	if err != nil {
		return err
	}
	d := decoder{layout: s.layout, series: names}
	g := s.layout.Granule()
read:
	for i, q := range plan {
		// Entities that hold the points still wanted, if every one is full.
		q.Top = int32(min(pager.MaxTop, (start%g+uint64(limit)+1+g-1)/g))
		q.Grow = true
		for page, err := range pager.Each(ctx, s.client, q, i) {
			if err != nil {
				return err
			}
			for _, raw := range page.Entities {
				goOn, err := d.points(raw, start, hi, take)
				if err != nil {
					return err
				}
				if !goOn {
					break read
				}
			}
		}
	}
	return nil
}
