package staging

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/histenc"
)

// LastWrites keeps, of each millisecond, the write of the highest stamp, then of the
// highest record, whatever the kind.
func TestLastWritesBothKinds(t *testing.T) {
	pts := []Point{
		{MS: 5, Value: 1, Stamp: 2, Record: 0},
		{MS: 1, Value: 2, Stamp: 1, Record: 3},
		{MS: 5, Value: 3, Stamp: 1, Record: 9},
		{MS: 1, Value: 4, Stamp: 1, Record: 4},
	}
	at := func(ms int64) time.Time { return time.UnixMilli(ms).UTC() }
	want := []tablets.Point{{Time: at(1), Value: 4}, {Time: at(5), Value: 1}}
	if got := LastWrites[tablets.Point](pts); !reflect.DeepEqual(got, want) {
		t.Errorf("points: %v, want %v", got, want)
	}
	hs := []Hist{
		{Sample: histenc.Sample{Unit: 7, H: &tablets.Histogram{Count: 1}}, Stamp: 1, Record: 2},
		{Sample: histenc.Sample{Unit: 7, H: &tablets.Histogram{Count: 2}}, Stamp: 1, Record: 1},
		{Sample: histenc.Sample{Unit: 3, H: &tablets.Histogram{Count: 3}}, Stamp: 4, Record: 0},
		{Sample: histenc.Sample{Unit: 3, H: &tablets.Histogram{Count: 4}}, Stamp: 2, Record: 5},
	}
	wantH := []histenc.Sample{{Unit: 3, H: &tablets.Histogram{Count: 3}}, {Unit: 7, H: &tablets.Histogram{Count: 1}}}
	if got := LastWrites[histenc.Sample](hs); !reflect.DeepEqual(got, wantH) {
		t.Errorf("histograms: %v, want %v", got, wantH)
	}
}

// appendLastPoints is LastWrites of points, appended: points in time order copied as they
// are, others sorted with the last write of a millisecond kept.
func TestAppendLastPoints(t *testing.T) {
	for _, ws := range [][]Point{
		nil,
		{{MS: 1, Value: 1}, {MS: 2, Value: 2}, {MS: 5, Value: 3}},
		{{MS: 5, Value: 1}, {MS: 2, Value: 2}, {MS: 9, Value: 3}},
		{{MS: 1, Value: 1, Stamp: 2}, {MS: 1, Value: 2, Stamp: 1}, {MS: 3, Value: 3}},
		{{MS: 4, Value: 1, Stamp: 1, Record: 1}, {MS: 4, Value: 2, Stamp: 1, Record: 0}},
	} {
		want := LastWrites[tablets.Point](slices.Clone(ws))
		dst := []tablets.Point{{Value: -1}}
		got := appendLastPoints(dst, slices.Clone(ws))
		if len(got) != len(want)+1 || got[0].Value != -1 || !reflect.DeepEqual(got[1:], want) {
			t.Errorf("appendLastPoints(%v) = %v, want %v after the first", ws, got, want)
		}
	}
}
