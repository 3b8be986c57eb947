package tiers

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// Only a Rollup of recent windows is paced: with a pace, whose range ended at most the seal
// delay and pacedLag ago, its last work begins the pace after the first; a catch-up of
// older windows goes as fast as it can.
func TestRollupPacer(t *testing.T) {
	synctest.Test(t, testRollupPacer)
}

func testRollupPacer(t *testing.T) {
	now := time.Date(2025, 3, 10, 12, 0, 0, 0, time.UTC)
	tr := &Tiers{cfg: Config{Now: func() time.Time { return now }, SealDelay: 10 * time.Minute, Pace: time.Minute}}
	for _, c := range []struct {
		to    time.Time
		works int
		paced bool
	}{
		{now.Add(-10 * time.Minute), 100, true},              // the windows just sealed
		{now.Add(-70 * time.Minute), 100, true},              // the seal delay and an hour ago
		{now.Add(-70*time.Minute - time.Second), 100, false}, // a catch-up's older slice
		{now.Add(-10 * time.Minute), 0, false},               // nothing to do
	} {
		p, began := tr.rollupPacer(c.to, c.works), time.Now()
		if err := p.Wait(context.Background(), c.works); err != nil {
			t.Fatal(err)
		}
		want := time.Duration(0)
		if c.paced {
			want = time.Minute
		}
		if p.Paced() != c.paced || time.Since(began) != want {
			t.Errorf("range to %v, %d works: paced %v, the last began %v after the first; want paced %v, %v", now.Sub(c.to), c.works, p.Paced(), time.Since(began), c.paced, want)
		}
	}
	tr.cfg.Pace = 0
	if p := tr.rollupPacer(now, 100); p.Paced() {
		t.Errorf("without a pace: paced")
	}
}
