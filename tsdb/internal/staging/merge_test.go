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
