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
	s.points[2] = append(s.points[2], Point{MS: 5})
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
		all.points[got] = append(all.points[got], Point{MS: int64(i)})
	}
	if got := all.found(); !slices.Equal(slices.Sorted(maps.Keys(got)), []string{"x", "y"}) || len(got["x"]) != 2 {
		t.Errorf("found %v", got)
	}
}
