package engine

import (
	"context"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/entity"
)

// overlapRead passes emit the points of series in [from, to), oldest first, for a layout
// whose entities overlap (see Overlapping.ReadRange).
func (s *Store) overlapRead(ctx context.Context, series string, from, to uint64, top int32, grow bool,
	emit func(t uint64, v float64) bool) error {
	return s.layout.(Overlapping).ReadRange(ctx, s.client, series, from, to, top, grow, emit)
}

// overlapMany passes emit the points of every series in [from, to) for a layout whose
// entities overlap, each series oldest first (see Overlapping.ReadMany).
func (s *Store) overlapMany(ctx context.Context, series []string, from, to uint64, emit func(series int, t uint64, v float64) bool) error {
	return s.layout.(Overlapping).ReadMany(ctx, s.client, series, from, to, s.concurrency, emit)
}

// overlapWindow reads [lo, hi) of series in one request of at most top entities, for
// Latest (see Overlapping.ReadWindow).
func (s *Store) overlapWindow(ctx context.Context, series string, lo, hi uint64, top int) ([]unitPoint, uint64, bool, error) {
	units, values, last, complete, err := s.layout.(Overlapping).ReadWindow(ctx, s.client, series, lo, hi, top)
	if err != nil || !complete {
		return nil, last, false, err
	}
	format := s.layout.Format()
	pts := make([]unitPoint, len(units))
	for i, u := range units {
		pts[i] = unitPoint{u, tablets.Point{Time: format.Time(u), Value: values[i]}}
	}
	return pts, 0, true, nil
}

// decodeKeys decodes an entity read with KeySelect.
func (s *Store) decodeKeys(e *entity.Entity, raw []byte) error {
	_, overlapping := s.layout.(Overlapping)
	e.AllowStrings = overlapping
	return e.Decode(raw)
}
