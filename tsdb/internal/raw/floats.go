package raw

import (
	"context"
	"fmt"
	"iter"
	"time"

	"github.com/seed71701133/tablets"
)

// Points yields the points of series in the raw tables with from <= Time < to, oldest
// first: a read of one series, which only the float kind has (tablets.Store's Query).
func (floats *Floats) Points(ctx context.Context, series string, from, to time.Time) iter.Seq2[tablets.Point, error] {
	return func(yield func(tablets.Point, error) bool) {
		spans, err := floats.Spans(ctx, from, to)
		if err != nil {
			yield(tablets.Point{}, err)
			return
		}
		for _, sp := range spans {
			stopped := false
			_, err := floats.inTable(sp.Period, func(t pointTable) error {
				for p, err := range t.store.Query(ctx, series, sp.From, sp.To) {
					if err != nil {
						return err
					}
					if stopped = !yield(p, nil); stopped {
						return nil
					}
				}
				return nil
			})
			if stopped {
				return
			}
			if err != nil {
				yield(tablets.Point{}, fmt.Errorf("tsdb: %w", err))
				return
			}
		}
	}
}

// Newest returns the n newest points of series in the raw tables, newest first: the
// tables newest first, each asked for the points still wanted (a read only the float kind
// has: tablets.Store's Latest).
func (floats *Floats) Newest(ctx context.Context, series string, n int) ([]tablets.Point, error) {
	periods, err := floats.tables.All(ctx, floats.kind)
	if err != nil {
		return nil, err
	}
	out := []tablets.Point{}
	for i := len(periods) - 1; i >= 0 && len(out) < n; i-- {
		p := periods[i]
		_, err := floats.inTable(p, func(t pointTable) error {
			pts, err := latestOfPeriod(ctx, t.store, series, n-len(out), floats.names.Start(p), floats.names.End(p))
			out = append(out, pts...)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("tsdb: %w", err)
		}
	}
	return out, nil
}

// rangeLatest is implemented by the layouts' stores: the n newest points of a range (a to
// after tablets.MaxTime reaches through it).
type rangeLatest interface {
	LatestIn(ctx context.Context, series string, n int, from, to time.Time) ([]tablets.Point, error)
}

// latestOfPeriod returns the n newest points of a raw table, whose points are all in
// [start, end): bounded by them, a table that does not hold the series costs one request.
func latestOfPeriod(ctx context.Context, s tablets.Store, series string, n int, start, end time.Time) ([]tablets.Point, error) {
	if r, ok := s.(rangeLatest); ok {
		return r.LatestIn(ctx, series, n, start, end)
	}
	return s.Latest(ctx, series, n)
}

// Page returns at most limit points of the raw tables in [from, to), and whether there
// are more (a read only the float kind has: tablets.Store's QueryPage).
func (floats *Floats) Page(ctx context.Context, series string, from, to time.Time, limit int) ([]tablets.Point, bool, error) {
	spans, err := floats.Spans(ctx, from, to)
	if err != nil {
		return nil, false, err
	}
	var out []tablets.Point
	for _, sp := range spans {
		var page tablets.Page
		_, err := floats.inTable(sp.Period, func(t pointTable) (err error) {
			page, err = t.store.QueryPage(ctx, series, sp.From, sp.To, limit-len(out)+1, "")
			return err
		})
		if err != nil {
			return nil, false, fmt.Errorf("tsdb: %w", err)
		}
		take := min(len(page.Points), limit-len(out))
		out = append(out, page.Points[:take]...)
		if len(page.Points) > take || page.Next != "" && len(out) > 0 {
			return out, true, nil
		}
	}
	return out, false, nil
}
