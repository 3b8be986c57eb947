package staging

import (
	"maps"
	"slices"
	"testing"
	"unique"
)

// A read of some series numbers them once (a key asked twice has one slot), gives no slot
// to a series it did not ask for, and finds each by its interned key too; a read of every
// series numbers them as they come. What it found are the series with points.
func TestSeriesSlots(t *testing.T) {
	s := newSeriesSlots([]string{"a", "b", "a", "c"})
	if !slices.Equal(s.keys, []string{"a", "b", "c"}) {
		t.Fatalf("keys %v", s.keys)
	}
	for i, key := range []string{"a", "b", "c"} {
		if got, ok := s.slot(key); !ok || got != int32(i) {
			t.Errorf("slot(%q) = %d, %v; want %d", key, got, ok, i)
		}
		if got, ok := s.byHandle()[unique.Make(key)]; !ok || got != int32(i) {
			t.Errorf("byHandle()[%q] = %d, %v; want %d", key, got, ok, i)
		}
	}
	if _, ok := s.slot("d"); ok || len(s.keys) != 3 || len(s.byHandle()) != 3 {
		t.Errorf("a series not asked for has a slot: %v", s.keys)
	}
	s.take(2, Point{MS: 5})
	if got := s.found(); len(got) != 1 || len(got["c"]) != 1 {
		t.Errorf("found %v", got)
	}

	all := newSeriesSlots(nil)
	if all.byHandle() != nil {
		t.Error("a read of every series looks series up by interned key")
	}
	for i, key := range []string{"x", "y", "x"} {
		got, ok := all.slot(key)
		if want := int32(min(i, 1)); !ok || got != want && key == "y" || key == "x" && got != 0 {
			t.Errorf("slot(%q) = %d, %v", key, got, ok)
		}
		all.take(got, Point{MS: int64(i)})
	}
	if got := all.found(); !slices.Equal(slices.Sorted(maps.Keys(got)), []string{"x", "y"}) ||
		!slices.Equal(got["x"], []Point{{MS: 0}, {MS: 2}}) || !slices.Equal(got["y"], []Point{{MS: 1}}) {
		t.Errorf("found %v", got)
	}
	all.release()
	if all.taken != nil {
		t.Error("released slots keep their points")
	}
}

// The points taken come out by slot, each slot's in the order taken, whatever the order
// of the slots and across blocks; pooled blocks reused by a later read start empty.
func TestTakenPointsBySlot(t *testing.T) {
	for round := range 2 {
		s := newSeriesSlots([]string{"a", "b", "c", "d"})
		if s.taken.len() != 0 || len(s.taken.sorted) != 0 {
			t.Fatalf("round %d: a new read's arena holds %d points", round, s.taken.len())
		}
		want := map[string][]Point{}
		const n = takenFirstPoints + takenBlockPoints + 50 // three blocks
		for i := range n {
			slot := int32((i * 7) % 3) // d gets none
			p := Point{MS: int64(100*round + i), Value: float64(i)}
			s.take(slot, p)
			key := s.keys[slot]
			want[key] = append(want[key], p)
		}
		if s.taken.len() != n {
			t.Errorf("round %d: %d points taken, want %d", round, s.taken.len(), n)
		}
		got := s.found()
		if len(got) != 3 {
			t.Errorf("round %d: %d series found, want 3", round, len(got))
		}
		for key, pts := range want {
			if !slices.Equal(got[key], pts) {
				t.Errorf("round %d: %s: %d points, want %d", round, key, len(got[key]), len(pts))
			}
			if cap(got[key]) != len(got[key]) {
				t.Errorf("round %d: %s's slice may grow into another's", round, key)
			}
		}
		s.release()
	}
}
