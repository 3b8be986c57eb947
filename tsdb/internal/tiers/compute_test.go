package tiers

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
)

// A ComputeLimit runs at most its number of computations at once, the others waiting
// until one ends; a wait its context ends returns the cause without running.
func TestComputeLimit(t *testing.T) { synctest.Test(t, testComputeLimit) }

func testComputeLimit(t *testing.T) {
	l := NewComputeLimit(2)
	release := make(chan struct{})
	started := make(chan int, 10)
	var wg sync.WaitGroup
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = l.do(context.Background(), func() error {
				started <- i
				<-release
				return nil
			})
		}()
	}
	synctest.Wait() // every goroutine running or blocked
	if len(started) != 2 {
		t.Fatalf("%d computations ran at once, want 2", len(started))
	}
	<-started
	<-started
	cause := errors.New("gone")
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(cause)
	if err := l.do(ctx, func() error { t.Error("ran once its context ended"); return nil }); !errors.Is(err, cause) {
		t.Errorf("a wait whose context ended: %v, want %v", err, cause)
	}
	close(release)
	wg.Wait()
	if len(started) != 8 {
		t.Errorf("%d computations ran after the first two, want 8", len(started))
	}
	if l.Peak() != 2 {
		t.Errorf("peak %d, want 2", l.Peak())
	}
	if l.PeakCallers() != 11 { // the ten, and the wait whose context ended among them
		t.Errorf("peak of callers %d, want 11", l.PeakCallers())
	}
	if l.Slots() != 2 {
		t.Errorf("%d slots, want 2", l.Slots())
	}
	if NewComputeLimit(0).Peak() != 0 || cap(NewComputeLimit(0).slots) != 1 {
		t.Error("a limit of 0 is not a limit of 1")
	}
}
