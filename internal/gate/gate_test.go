package gate

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
)

// Waiters are served in arrival order, but those of AcquireFirst before those of Acquire,
// in their own arrival order; a cancelled one leaves its place to the next.
func TestAcquireFirstGoesAhead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := New(1)
		if _, err := g.Acquire(context.Background(), 1); err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var order []string
		wait := func(name string, first bool, ctx context.Context) {
			go func() {
				var err error
				if first {
					_, err = g.AcquireFirst(ctx, 1)
				} else {
					_, err = g.Acquire(ctx, 1)
				}
				if err != nil {
					return
				}
				mu.Lock()
				order = append(order, name)
				mu.Unlock()
				g.Release(1)
			}()
			synctest.Wait() // queued before the next
		}
		cancelled, cancel := context.WithCancel(context.Background())
		wait("a", false, context.Background())
		wait("b", false, context.Background())
		wait("x", true, context.Background())
		wait("gone", true, cancelled)
		wait("y", true, context.Background())
		wait("c", false, context.Background())
		if _, waiting := g.State(); waiting != 6 {
			t.Fatalf("%d waiting, want 6", waiting)
		}
		cancel()
		synctest.Wait()
		g.Release(1)
		synctest.Wait()
		want := []string{"x", "y", "a", "b", "c"}
		if len(order) != len(want) {
			t.Fatalf("served %v, want %v", order, want)
		}
		for i := range want {
			if order[i] != want[i] {
				t.Fatalf("served %v, want %v", order, want)
			}
		}
		if used, waiting := g.State(); used != 0 || waiting != 0 {
			t.Fatalf("after all: %d used, %d waiting", used, waiting)
		}
	})
}

// A first waiter that fits goes at once, though a larger waiter of Acquire waits.
func TestAcquireFirstPassesAWaitingLargeOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := New(3)
		if _, err := g.Acquire(context.Background(), 2); err != nil {
			t.Fatal(err)
		}
		go func() { _, _ = g.Acquire(context.Background(), 3) }()
		synctest.Wait()
		if n, err := g.AcquireFirst(context.Background(), 1); err != nil || n != 1 {
			t.Fatalf("AcquireFirst: %d, %v", n, err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := g.Acquire(ctx, 1); err == nil {
			t.Fatal("Acquire went ahead of the waiting large one")
		}
		g.Release(3)
		synctest.Wait()
		if used, waiting := g.State(); used != 3 || waiting != 0 {
			t.Fatalf("the large one: %d used, %d waiting", used, waiting)
		}
	})
}
