package staging

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/seed71701133/tablets/internal/stageenc"
)

// A pack gives back the series it packed, shares the keys of equal series across packs,
// and costs about 28 bytes a point for the one-point series of a scrape's write (the
// Series of each cost 113).
func TestSeriesPack(t *testing.T) {
	var series []stageenc.Series
	for i := range 1000 {
		s := stageenc.Series{Key: fmt.Sprintf("l%032x", i), Times: []int64{int64(i)}, Values: []float64{float64(i) / 3}}
		if i%100 == 0 {
			s.Times, s.Values = append(s.Times, int64(i)+5), append(s.Values, 7)
		}
		series = append(series, s)
	}
	p := packSeries(series)
	if p.len() != len(series) {
		t.Fatalf("%d series, want %d", p.len(), len(series))
	}
	for i, s := range series {
		if got := p.at(i); !reflect.DeepEqual(got, s) {
			t.Fatalf("series %d: %+v, want %+v", i, got, s)
		}
	}
	// An append to a series given does not write into the next one's points.
	first := p.at(0)
	_ = append(first.Times, -1)
	if p.at(1).Times[0] != 1 {
		t.Error("an append wrote into the pack")
	}
	q := packSeries(series[:10])
	if p.keys[3] != q.keys[3] {
		t.Error("the keys of two packs are not shared")
	}
	if perPoint := float64(p.cost()) / 1010; perPoint > 30 {
		t.Errorf("%.1f bytes a point", perPoint)
	}
	if empty := packSeries(nil); empty.len() != 0 {
		t.Errorf("empty: %d series", empty.len())
	}
}
