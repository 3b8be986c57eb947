package tiers

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// A paced Rollup's groups begin evenly over its pace: the wait for the k-th of n works ends
// pace*k/n after the first began, at once where that is past, and early with the context's
// cause.
func TestRollupPaceWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		p := rollupPace{began: time.Now(), span: 60 * time.Second, works: 12}
		for _, c := range []struct {
			done int
			at   time.Duration // since began, after the wait
		}{{0, 0}, {3, 15 * time.Second}, {6, 30 * time.Second}, {4, 30 * time.Second}, {12, 60 * time.Second}} {
			if err := p.wait(ctx, c.done); err != nil {
				t.Fatal(err)
			}
			if got := time.Since(p.began); got != c.at {
				t.Errorf("after the wait for %d of 12: %v since the first, want %v", c.done, got, c.at)
			}
		}
		unpaced := rollupPace{}
		began := time.Now()
		if err := unpaced.wait(ctx, 5); err != nil || time.Since(began) != 0 {
			t.Errorf("unpaced: waited %v, %v", time.Since(began), err)
		}
		cause := errors.New("the server stops")
		ctx, cancel := context.WithCancelCause(ctx)
		time.AfterFunc(time.Second, func() { cancel(cause) })
		p = rollupPace{began: time.Now(), span: time.Minute, works: 2}
		if err := p.wait(ctx, 1); !errors.Is(err, cause) || time.Since(p.began) != time.Second {
			t.Errorf("a cancelled wait: %v after %v, want the cause after 1s", err, time.Since(p.began))
		}
	})
}

// Only a Rollup of recent windows is paced: with a pace, whose range ended at most the seal
// delay and pacedLag ago; a catch-up of older windows goes as fast as it can.
func TestRollupPacer(t *testing.T) {
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
		p := tr.rollupPacer(c.to, c.works)
		if paced := p.span > 0; paced != c.paced || paced && (p.span != time.Minute || p.works != c.works) {
			t.Errorf("range to %v, %d works: %+v, want paced %v", now.Sub(c.to), c.works, p, c.paced)
		}
	}
	tr.cfg.Pace = 0
	if p := tr.rollupPacer(now, 100); p.span != 0 {
		t.Errorf("without a pace: %+v", p)
	}
}
