package staging

import (
	"iter"
	"slices"
	"time"

	"github.com/seed71701133/tablets"
)

// A read of raw samples merges the staged samples of its series into them (the read path:
// read.go, querier_read.go, querier_select.go, aggregate_raw.go, rollupscan.go, and the
// histogram tables' read, internal/raw's hists.go): a staged sample is the later write of its
// millisecond. The merge is one code for both kinds: a Merge holds the little it
// needs of a kind.

// Merge is the merge of a kind's staged samples S into its raw ones: what it needs of
// the kind is a sample's time, and how a sample pairs with its series as P (the reads of
// many series yield tablets.SeriesPoint and tablets.SeriesHistogram).
type Merge[S, P any] struct {
	time func(S) time.Time
	pair func(series string, s S) P
}

// PointsMerge merges float points, HistsMerge histogram samples.
var (
	PointsMerge = Merge[tablets.Point, tablets.SeriesPoint]{
		time: func(p tablets.Point) time.Time { return p.Time },
		pair: func(series string, p tablets.Point) tablets.SeriesPoint {
			return tablets.SeriesPoint{Series: series, Point: p}
		},
	}
	HistsMerge = Merge[tablets.HistogramPoint, tablets.SeriesHistogram]{
		time: func(p tablets.HistogramPoint) time.Time { return p.Time },
		pair: func(series string, p tablets.HistogramPoint) tablets.SeriesHistogram {
			return tablets.SeriesHistogram{Series: series, HistogramPoint: p}
		},
	}
)

// UpTo passes emit the staged samples of rest (sorted, one per time) at or before the raw
// sample s, then s unless one of them holds its time (the staged sample is the later
// write). It returns what is left of rest, and false once emit returned false.
func (m Merge[S, P]) UpTo(rest []S, s S, emit func(S) bool) ([]S, bool) {
	at := m.time(s)
	replaced := false
	for len(rest) > 0 && !m.time(rest[0]).After(at) {
		replaced = m.time(rest[0]).Equal(at)
		if !emit(rest[0]) {
			return rest, false
		}
		rest = rest[1:]
	}
	return rest, replaced || emit(s)
}

// One merges staged samples (sorted, One per time) into a series' raw samples (oldest
// first): where both hold a time, the staged sample is the later write.
func (m Merge[S, P]) One(raw iter.Seq2[S, error], staged []S) iter.Seq2[S, error] {
	if len(staged) == 0 {
		return raw
	}
	return func(yield func(S, error) bool) {
		emit := func(s S) bool { return yield(s, nil) }
		for s, err := range raw {
			if err != nil {
				yield(s, err)
				return
			}
			var ok bool
			if staged, ok = m.UpTo(staged, s, emit); !ok {
				return
			}
		}
		for _, s := range staged {
			if !emit(s) {
				return
			}
		}
	}
}

// In is the part of ss (sorted) In [from, to).
// Pair is the sample s of series as a sample of many series' read.
func (m Merge[S, P]) Pair(series string, s S) P { return m.pair(series, s) }

// Time is the sample's time.
func (m Merge[S, P]) Time(s S) time.Time { return m.time(s) }

func (m Merge[S, P]) In(ss []S, from, to time.Time) []S {
	lo, _ := slices.BinarySearchFunc(ss, from, func(s S, t time.Time) int { return m.time(s).Compare(t) })
	hi, _ := slices.BinarySearchFunc(ss, to, func(s S, t time.Time) int { return m.time(s).Compare(t) })
	return ss[lo:max(lo, hi)]
}

// PointsOfSlice yields pts.
func PointsOfSlice(pts []tablets.Point) iter.Seq2[tablets.Point, error] {
	return func(yield func(tablets.Point, error) bool) {
		for _, p := range pts {
			if !yield(p, nil) {
				return
			}
		}
	}
}

// NewestWithStaged merges raw points (newest first) with staged ones (oldest first, one per
// time), the staged winning a time both hold, and returns the n newest, newest first.
func NewestWithStaged(raw, staged []tablets.Point, n int) []tablets.Point {
	if len(staged) == 0 {
		return raw
	}
	oldestFirst := slices.Clone(raw)
	slices.Reverse(oldestFirst)
	var all []tablets.Point
	for p, _ := range PointsMerge.One(PointsOfSlice(oldestFirst), staged) {
		all = append(all, p)
	}
	all = all[max(0, len(all)-n):]
	slices.Reverse(all)
	return all
}
