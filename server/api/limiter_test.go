package api

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/seed71701133/tablets/internal/reqlimit"
)

// A query that waits for a slot of the engine's concurrency counts the wait in its Tally
// (its slow-query line's engine_queue); one that finds a slot free counts none.
func TestLimiterTalliesTheQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(1)
		ctx, tally := reqlimit.WithTally(context.Background())
		if _, err := l.Insert(ctx, "up"); err != nil {
			t.Fatal(err)
		}
		if got := tally.Counts().Queued; got != 0 {
			t.Fatalf("a free slot taken: %v queued, want 0", got)
		}
		done := make(chan error)
		go func() {
			_, err := l.Insert(ctx, "up")
			done <- err
		}()
		synctest.Wait()
		time.Sleep(4 * time.Second)
		l.Delete(0)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if got := tally.Counts().Queued; got != 4*time.Second {
			t.Fatalf("%v queued, want 4s", got)
		}
	})
}
