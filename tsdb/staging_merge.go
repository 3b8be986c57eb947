package tsdb

import (
	"iter"
	"maps"
	"slices"
	"time"

	"github.com/seed71701133/tablets"
)

// A read of raw points merges the staged points of its series into them (the read path:
// read.go, querier_select.go, aggregate_raw.go, rollupscan.go): a staged point is the later
// write of its time.

// withStaged merges staged points (sorted, one per time) into a series' raw points (oldest
// first): where both hold a time, the staged point is the later write.
func withStaged(raw iter.Seq2[tablets.Point, error], staged []tablets.Point) iter.Seq2[tablets.Point, error] {
	if len(staged) == 0 {
		return raw
	}
	return func(yield func(tablets.Point, error) bool) {
		for p, err := range raw {
			if err != nil {
				yield(p, err)
				return
			}
			replaced := false
			for len(staged) > 0 && !staged[0].Time.After(p.Time) {
				replaced = staged[0].Time.Equal(p.Time)
				if !yield(staged[0], nil) {
					return
				}
				staged = staged[1:]
			}
			if !replaced && !yield(p, nil) {
				return
			}
		}
		for _, p := range staged {
			if !yield(p, nil) {
				return
			}
		}
	}
}

// withStagedMany merges staged points (by series, each sorted, one per time) into the raw
// points of many series (each series' oldest first): a series' staged points come just
// before its first raw point after them, and those left at the end, series by series in
// the order of their names.
func withStagedMany(raw iter.Seq2[tablets.SeriesPoint, error], staged map[string][]tablets.Point) iter.Seq2[tablets.SeriesPoint, error] {
	if len(staged) == 0 {
		return raw
	}
	return func(yield func(tablets.SeriesPoint, error) bool) {
		for p, err := range raw {
			if err != nil {
				yield(p, err)
				return
			}
			rest := staged[p.Series]
			replaced := false
			for len(rest) > 0 && !rest[0].Time.After(p.Time) {
				replaced = rest[0].Time.Equal(p.Time)
				if !yield(tablets.SeriesPoint{Series: p.Series, Point: rest[0]}, nil) {
					return
				}
				rest = rest[1:]
			}
			staged[p.Series] = rest
			if !replaced && !yield(p, nil) {
				return
			}
		}
		for _, name := range slices.Sorted(maps.Keys(staged)) {
			for _, p := range staged[name] {
				if !yield(tablets.SeriesPoint{Series: name, Point: p}, nil) {
					return
				}
			}
		}
	}
}

// pointsOfSlice yields pts.
func pointsOfSlice(pts []tablets.Point) iter.Seq2[tablets.Point, error] {
	return func(yield func(tablets.Point, error) bool) {
		for _, p := range pts {
			if !yield(p, nil) {
				return
			}
		}
	}
}

// newestWithStaged merges raw points (newest first) with staged ones (oldest first, one per
// time), the staged winning a time both hold, and returns the n newest, newest first.
func newestWithStaged(raw, staged []tablets.Point, n int) []tablets.Point {
	if len(staged) == 0 {
		return raw
	}
	oldestFirst := slices.Clone(raw)
	slices.Reverse(oldestFirst)
	var all []tablets.Point
	for p, _ := range withStaged(pointsOfSlice(oldestFirst), staged) {
		all = append(all, p)
	}
	all = all[max(0, len(all)-n):]
	slices.Reverse(all)
	return all
}

// pointsIn is the part of pts (sorted) in [from, to).
func pointsIn(pts []tablets.Point, from, to time.Time) []tablets.Point {
	lo, _ := slices.BinarySearchFunc(pts, from, func(p tablets.Point, t time.Time) int { return p.Time.Compare(t) })
	hi, _ := slices.BinarySearchFunc(pts, to, func(p tablets.Point, t time.Time) int { return p.Time.Compare(t) })
	return pts[lo:max(lo, hi)]
}
