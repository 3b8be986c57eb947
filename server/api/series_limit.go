package api

import (
	"context"
	"errors"
	"fmt"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
)

// ErrTooManySeries is wrapped by the error of a Select that yields more series than
// Options.MaxSeriesPerSelect. The API answers it as Prometheus answers a query over its
// sample limit: errorType execution, HTTP 422.
var ErrTooManySeries = errors.New("query processing would select too many series")

// seriesLimited is a Queryable whose Selects fail once they yield more than max series,
// before the engine holds them all (the storage's own work is not bounded by this).
type seriesLimited struct {
	storage.Queryable
	max int
}

func (q seriesLimited) Querier(mint, maxt int64) (storage.Querier, error) {
	qr, err := q.Queryable.Querier(mint, maxt)
	if err != nil {
		return nil, err
	}
	return seriesLimitedQuerier{Querier: qr, max: q.max}, nil
}

type seriesLimitedQuerier struct {
	storage.Querier
	max int
}

func (q seriesLimitedQuerier) Select(ctx context.Context, sortSeries bool, hints *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
	return &seriesLimitedSet{SeriesSet: q.Querier.Select(ctx, sortSeries, hints, ms...), max: q.max, matchers: ms}
}

// seriesLimitedSet stops with an error at the series past max.
type seriesLimitedSet struct {
	storage.SeriesSet
	max, n   int
	matchers []*labels.Matcher
	err      error
}

func (s *seriesLimitedSet) Next() bool {
	if s.err != nil || !s.SeriesSet.Next() {
		return false
	}
	s.n++
	if s.n > s.max {
		s.err = fmt.Errorf("%w: selector %s matches more than the limit of %d series in one selection",
			ErrTooManySeries, matchersString(s.matchers), s.max)
		return false
	}
	return true
}

func (s *seriesLimitedSet) Err() error {
	if s.err != nil {
		return s.err
	}
	return s.SeriesSet.Err()
}

// matchersString writes matchers as a selector, {a="b",c=~"d"}.
func matchersString(ms []*labels.Matcher) string {
	b := []byte{'{'}
	for i, m := range ms {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, m.String()...)
	}
	return string(append(b, '}'))
}
