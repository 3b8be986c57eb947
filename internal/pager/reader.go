package pager

import (
	"context"
	"fmt"
	"iter"
	"slices"
	"time"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/filter"
	"github.com/seed71701133/tablets/rounding"
)

// Layout is what a store is: how keys and slots map to times.
type Layout interface {
	// ID names the layout and its parameters; page tokens are bound to it.
	ID() string
	// Format is the store's time resolution and key format.
	Format() rounding.KeyFormat
	// ValidateSeries checks a series name for this layout's keys.
	ValidateSeries(series string) error
	// Clauses returns filter clauses, in time order, that select the entities of series that
	// hold times in [from, to) (resolution units). Each is a conjunction of a few comparisons.
	Clauses(series string, from, to uint64) []filter.Expr
	// Select is the $select of a read ("" for every property).
	Select() string
	// Owns reports whether an entity's PartitionKey belongs to series.
	Owns(partitionKey []byte, series string) bool
	// Points calls yield with each point of a decoded entity of series, in time order.
	Points(e *entity.Entity, yield func(t uint64, v float64)) error
	// Granule is the number of resolution units one entity spans (1 for one point each).
	Granule() uint64
	// AtOrAfter returns a clause that selects the entities of series whose first unit is
	// at or after unit u (u a multiple of Granule); the service returns them in time order.
	AtOrAfter(series string, u uint64) filter.Expr
}

// Reader implements the read methods of tablets.Store for a layout.
type Reader struct {
	Client      Lister
	Layout      Layout
	Concurrency int           // sub-queries in flight at once
	Limits      filter.Limits // per-filter limits; zero means Azure's
}

// Units validates a range and returns it in resolution units: [from, to) of times becomes
// [ceil(from), ceil(to)) of units, so that a unit is in the range iff its time is.
func (r *Reader) Units(from, to time.Time) (uint64, uint64, error) {
	if err := rounding.CheckRange(from, to); err != nil {
		return 0, 0, err
	}
	f := r.Layout.Format()
	return ceilUnits(f, from), ceilUnits(f, to), nil
}

// SeriesRange validates a series and a range together, as every single-series call does,
// and returns the range in units.
func (r *Reader) SeriesRange(series string, from, to time.Time) (uint64, uint64, error) {
	if err := r.Layout.ValidateSeries(series); err != nil {
		return 0, 0, err
	}
	return r.Units(from, to)
}

func ceilUnits(f rounding.KeyFormat, t time.Time) uint64 {
	u, _ := f.Units(t)
	if f.Time(u).Before(t) {
		u++
	}
	return u
}

// plan packs the clauses of several series into sub-queries, in series then time order.
func (r *Reader) plan(series []string, from, to uint64) ([]SubQuery, error) {
	var clauses []filter.Expr
	for _, s := range series {
		clauses = append(clauses, r.Layout.Clauses(s, from, to)...)
	}
	filters, err := filter.Pack(clauses, r.Limits)
	if err != nil {
		return nil, err
	}
	plan := make([]SubQuery, len(filters))
	for i, f := range filters {
		plan[i] = SubQuery{Filter: f.String(), Select: r.Layout.Select()}
	}
	return plan, nil
}

// scan runs a plan and calls fn with every point in [from, to), in plan order, together with
// the page it came from. fn returns false to stop.
func (r *Reader) scan(ctx context.Context, series []string, plan []SubQuery, first int, start Continuation,
	from, to uint64, fn func(page *Page, series int, t uint64, v float64) bool) error {
	var e entity.Entity
	stopped := false
	owner := 0
	for page, err := range Pages(ctx, r.Client, plan, first, start, r.Concurrency) {
		if err != nil {
			return err
		}
		for _, raw := range page.Entities {
			if err := e.Decode(raw); err != nil {
				return fmt.Errorf("read: %w", err)
			}
			// The service returns entities in key order: the owner is most often the last one.
			if !r.Layout.Owns(e.PartitionKey, series[owner]) {
				owner = slices.IndexFunc(series, func(s string) bool { return r.Layout.Owns(e.PartitionKey, s) })
			}
			if owner < 0 {
				return fmt.Errorf("read: entity PartitionKey %q RowKey %q belongs to no series this query asked for",
					e.PartitionKey, e.RowKey)
			}
			err := r.Layout.Points(&e, func(t uint64, v float64) {
				if !stopped && t >= from && t < to {
					stopped = !fn(&page, owner, t, v)
				}
			})
			if err != nil {
				return fmt.Errorf("read: %w", err)
			}
			if stopped {
				return nil
			}
		}
	}
	return nil
}

// Query yields the points of series in [from, to), oldest first.
func (r *Reader) Query(ctx context.Context, series string, from, to time.Time) iter.Seq2[tablets.Point, error] {
	return func(yield func(tablets.Point, error) bool) {
		lo, hi, err := r.SeriesRange(series, from, to)
		if err != nil {
			yield(tablets.Point{}, err)
			return
		}
		if lo >= hi {
			return
		}
		names := []string{series}
		plan, err := r.plan(names, lo, hi)
		if err != nil {
			yield(tablets.Point{}, err)
			return
		}
		format := r.Layout.Format()
		err = r.scan(ctx, names, plan, 0, Continuation{}, lo, hi, func(_ *Page, _ int, t uint64, v float64) bool {
			return yield(tablets.Point{Time: format.Time(t), Value: v}, nil)
		})
		if err != nil {
			yield(tablets.Point{}, fmt.Errorf("query %q: %w", series, err))
		}
	}
}

// QueryMany yields the points of every series in [from, to), each series oldest first.
func (r *Reader) QueryMany(ctx context.Context, series []string, from, to time.Time) iter.Seq2[tablets.SeriesPoint, error] {
	return func(yield func(tablets.SeriesPoint, error) bool) {
		var names []string
		seen := make(map[string]bool, len(series))
		for _, s := range series {
			if err := r.Layout.ValidateSeries(s); err != nil {
				yield(tablets.SeriesPoint{}, err)
				return
			}
			if !seen[s] {
				seen[s] = true
				names = append(names, s)
			}
		}
		lo, hi, err := r.Units(from, to)
		if err != nil {
			yield(tablets.SeriesPoint{}, err)
			return
		}
		if lo >= hi || len(names) == 0 {
			return
		}
		plan, err := r.plan(names, lo, hi)
		if err != nil {
			yield(tablets.SeriesPoint{}, err)
			return
		}
		format := r.Layout.Format()
		err = r.scan(ctx, names, plan, 0, Continuation{}, lo, hi, func(_ *Page, s int, t uint64, v float64) bool {
			return yield(tablets.SeriesPoint{Series: names[s], Point: tablets.Point{Time: format.Time(t), Value: v}}, nil)
		})
		if err != nil {
			yield(tablets.SeriesPoint{}, fmt.Errorf("query many: %w", err))
		}
	}
}

// QueryPage returns at most limit points of [from, to) from the position of token.
func (r *Reader) QueryPage(ctx context.Context, series string, from, to time.Time, limit int, token string) (tablets.Page, error) {
	lo, hi, err := r.SeriesRange(series, from, to)
	if err != nil {
		return tablets.Page{}, err
	}
	if limit < 1 {
		return tablets.Page{}, fmt.Errorf("%w: limit %d must be at least 1", tablets.ErrInvalidOptions, limit)
	}
	names := []string{series}
	var plan []SubQuery
	if lo < hi {
		if plan, err = r.plan(names, lo, hi); err != nil {
			return tablets.Page{}, err
		}
	}
	binding := Bind(r.Layout.ID(), series, lo, hi)
	pos := Token{Binding: binding}
	if token != "" {
		if pos, err = DecodeToken(token, binding, max(len(plan), 1)); err != nil {
			return tablets.Page{}, err
		}
	}
	if len(plan) == 0 {
		return tablets.Page{}, nil
	}
	format := r.Layout.Format()
	var out tablets.Page
	var last Token
	more := false
	err = r.scan(ctx, names, plan, pos.Query, Continuation{pos.NextPartitionKey, pos.NextRowKey}, max(lo, pos.After), hi,
		func(page *Page, _ int, t uint64, v float64) bool {
			if len(out.Points) == limit {
				more = true // one point past the page: there is a next page
				return false
			}
			out.Points = append(out.Points, tablets.Point{Time: format.Time(t), Value: v})
			last = Token{Binding: binding, Query: page.Query, NextPartitionKey: page.Start.PartitionKey,
				NextRowKey: page.Start.RowKey, After: t + 1}
			return true
		})
	if err != nil {
		return tablets.Page{}, fmt.Errorf("query page %q: %w", series, err)
	}
	if more {
		out.Next = last.Encode()
	}
	return out, nil
}

// Latest returns the n newest points of series, newest first, without reading the whole
// series: it finds the newest entity by a galloping then binary search of single-entity
// probes, then reads backwards in growing windows until it has n points.
func (r *Reader) Latest(ctx context.Context, series string, n int) ([]tablets.Point, error) {
	if err := r.Layout.ValidateSeries(series); err != nil {
		return nil, err
	}
	if n < 1 {
		return nil, fmt.Errorf("%w: n %d must be at least 1", tablets.ErrInvalidOptions, n)
	}
	format := r.Layout.Format()
	g := r.Layout.Granule()
	end := ceilUnits(format, tablets.MaxTime) // exclusive bound of every unit
	// probe returns the first entity index (unit / granule) at or after index k.
	probe := func(k uint64) (uint64, bool, error) {
		plan := []SubQuery{{Filter: r.Layout.AtOrAfter(series, k*g).String(), Select: "PartitionKey,RowKey", Top: 1}}
		var e entity.Entity
		for page, err := range Pages(ctx, r.Client, plan, 0, Continuation{}, 1) {
			if err != nil {
				return 0, false, err
			}
			for _, raw := range page.Entities {
				if err := e.Decode(raw); err != nil {
					return 0, false, err
				}
				if !r.Layout.Owns(e.PartitionKey, series) {
					return 0, false, fmt.Errorf("entity PartitionKey %q is not of series %q", e.PartitionKey, series)
				}
				u, err := format.ParseUnitsBytes(e.RowKey)
				if err != nil {
					return 0, false, fmt.Errorf("entity PartitionKey %q RowKey %q: %w", e.PartitionKey, e.RowKey, err)
				}
				if u/g < k {
					// Only an entity whose keys disagree (a row filed under another partition)
					// can answer a probe with an earlier time.
					return 0, false, &entity.DecodeError{PartitionKey: string(e.PartitionKey), RowKey: string(e.RowKey),
						Reason: "keys out of order for this layout (a row of another layout?)"}
				}
				return u / g, true, nil
			}
		}
		return 0, false, nil
	}
	wrap := func(err error) error { return fmt.Errorf("latest %q: %w", series, err) }
	lo, found, err := probe(0)
	if err != nil {
		return nil, wrap(err)
	}
	if !found {
		return []tablets.Point{}, nil
	}
	// Invariant: an entity exists at index lo and none at or after hi.
	hi := (end + g - 1) / g
	const window = entity.MaxPageEntities // entities one read may cover
	for step := uint64(window); hi-lo > window; {
		mid := lo + step
		if step >= (hi-lo)/2 {
			mid = lo + (hi-lo)/2
		}
		k, ok, err := probe(mid)
		if err != nil {
			return nil, wrap(err)
		}
		switch {
		case ok && k >= hi:
			// Written since hi was found empty: the series goes on further.
			lo, hi = k, (end+g-1)/g
		case ok:
			lo = k
			step *= 8 // gallop while the series goes on
		default:
			hi = mid
		}
	}
	// Read backwards from hi in windows that double, until n points are found.
	var newest []tablets.Point // newest first
	top := min(hi*g, end)
	for size := uint64(window) * g; top > 0 && len(newest) < n; size *= 2 {
		bottom := uint64(0)
		if top > size {
			bottom = top - size
		}
		var chunk []tablets.Point
		for p, err := range r.queryUnits(ctx, series, bottom, top) {
			if err != nil {
				return nil, wrap(err)
			}
			chunk = append(chunk, p)
		}
		slices.Reverse(chunk)
		newest = append(newest, chunk[:min(len(chunk), n-len(newest))]...)
		top = bottom
	}
	return newest, nil
}

// queryUnits yields the points in [from, to) units.
func (r *Reader) queryUnits(ctx context.Context, series string, from, to uint64) iter.Seq2[tablets.Point, error] {
	return func(yield func(tablets.Point, error) bool) {
		names := []string{series}
		plan, err := r.plan(names, from, to)
		if err != nil {
			yield(tablets.Point{}, err)
			return
		}
		format := r.Layout.Format()
		err = r.scan(ctx, names, plan, 0, Continuation{}, from, to, func(_ *Page, _ int, t uint64, v float64) bool {
			return yield(tablets.Point{Time: format.Time(t), Value: v}, nil)
		})
		if err != nil {
			yield(tablets.Point{}, err)
		}
	}
}
