package index

import "testing"

// The registrations of the newest registeredPeriods periods are kept; an older period's are
// not cached.
func TestRegistrationsRotatePerPeriod(t *testing.T) {
	x := newRegistrations(100)
	id := idOf("s")
	for p := uint64(1); p <= 5; p++ {
		x.remember(p*3600, []seriesID{id})
	}
	for p := uint64(1); p <= 5; p++ {
		if want := p >= 3; x.known(p*3600, id) != want {
			t.Errorf("period %d: known %v, want %v", p, !want, want)
		}
	}
	x.remember(3600, []seriesID{id}) // older than every period kept: not cached
	if x.known(3600, id) || len(x.registered) != registeredPeriods {
		t.Fatalf("an old period was cached (%d periods)", len(x.registered))
	}
	if idOf("s") != id || idOf("t") == id {
		t.Fatal("series ids are not a function of the key")
	}
}
