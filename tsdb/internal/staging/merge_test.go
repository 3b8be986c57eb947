package staging

import (
	"iter"
	"reflect"
	"testing"
	"time"

	"github.com/seed71701133/tablets"
)

func samplesOf[P any](ps []P) iter.Seq2[P, error] {
	return func(yield func(P, error) bool) {
		for _, p := range ps {
			if !yield(p, nil) {
				return
			}
		}
	}
}

func collectSeq[P any](t *testing.T, s iter.Seq2[P, error]) []P {
	t.Helper()
	var out []P
	for p, err := range s {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

// The merge of staged samples into raw ones is one code for both kinds: a staged sample
// wins a millisecond both hold, comes before the first raw sample after it, and those after
// the last raw sample come at the end, series by series in the order of their names.
func TestStagedMergeBothKinds(t *testing.T) {
	at := func(ms int64) time.Time { return time.UnixMilli(ms).UTC() }
	pt := func(ms int64, v float64) tablets.Point { return tablets.Point{Time: at(ms), Value: v} }
	h := func(ms int64, count uint64) tablets.HistogramPoint {
		return tablets.HistogramPoint{Time: at(ms), H: &tablets.Histogram{Count: count}}
	}

	// One series.
	raw := []tablets.Point{pt(1, 1), pt(3, 1), pt(5, 1)}
	staged := []tablets.Point{pt(0, 2), pt(3, 2), pt(4, 2), pt(9, 2)}
	want := []tablets.Point{pt(0, 2), pt(1, 1), pt(3, 2), pt(4, 2), pt(5, 1), pt(9, 2)}
	if got := collectSeq(t, PointsMerge.One(samplesOf(raw), staged)); !reflect.DeepEqual(got, want) {
		t.Errorf("points merged: %v, want %v", got, want)
	}
	rawH := []tablets.HistogramPoint{h(1, 1), h(3, 1)}
	stagedH := []tablets.HistogramPoint{h(3, 2), h(7, 2)}
	wantH := []tablets.HistogramPoint{h(1, 1), h(3, 2), h(7, 2)}
	if got := collectSeq(t, HistsMerge.One(samplesOf(rawH), stagedH)); !reflect.DeepEqual(got, wantH) {
		t.Errorf("histograms merged: %v, want %v", got, wantH)
	}

	// Many series: the staged left after the raw ones come by name.
	sp := func(s string, ms int64, v float64) tablets.SeriesPoint {
		return tablets.SeriesPoint{Series: s, Point: pt(ms, v)}
	}
	rawMany := []tablets.SeriesPoint{sp("b", 1, 1), sp("a", 2, 1), sp("b", 4, 1)}
	stagedMany := map[string][]tablets.Point{"c": {pt(0, 2)}, "a": {pt(2, 2), pt(3, 2)}, "b": {pt(1, 2)}}
	wantMany := []tablets.SeriesPoint{sp("b", 1, 2), sp("a", 2, 2), sp("b", 4, 1), sp("a", 3, 2), sp("c", 0, 2)}
	if got := collectSeq(t, PointsMerge.Many(samplesOf(rawMany), stagedMany)); !reflect.DeepEqual(got, wantMany) {
		t.Errorf("points of many series merged: %v, want %v", got, wantMany)
	}
	sh := func(s string, ms int64, count uint64) tablets.SeriesHistogram {
		return tablets.SeriesHistogram{Series: s, HistogramPoint: h(ms, count)}
	}
	rawManyH := []tablets.SeriesHistogram{sh("b", 1, 1), sh("a", 5, 1)}
	stagedManyH := map[string][]tablets.HistogramPoint{"a": {h(2, 2), h(6, 2)}, "b": {h(1, 2)}}
	wantManyH := []tablets.SeriesHistogram{sh("b", 1, 2), sh("a", 2, 2), sh("a", 5, 1), sh("a", 6, 2)}
	if got := collectSeq(t, HistsMerge.Many(samplesOf(rawManyH), stagedManyH)); !reflect.DeepEqual(got, wantManyH) {
		t.Errorf("histograms of many series merged: %v, want %v", got, wantManyH)
	}

	// A consumer that stops is not yielded to again (range over a func panics if it is).
	n := 0
	for range PointsMerge.One(samplesOf(raw), staged) {
		if n++; n == 2 {
			break
		}
	}

	// in trims to [from, to).
	if got := HistsMerge.In(stagedH, at(3), at(7)); !reflect.DeepEqual(got, stagedH[:1]) {
		t.Errorf("in [3, 7): %v", got)
	}
}
