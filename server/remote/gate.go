package remote

import (
	"container/list"
	"context"
	"sync"
)

// gate is a weighted semaphore whose waiters are served in arrival order: a large request
// is not starved by a stream of small ones, and a waiting request holds nothing.
type gate struct {
	mu      sync.Mutex
	size    int64
	used    int64
	waiters list.List // of *waiter
}

type waiter struct {
	n     int64
	ready chan struct{}
}

func newGate(size int64) *gate { return &gate{size: size} }

// acquire takes n (at most size) units, waiting for them until ctx ends.
func (g *gate) acquire(ctx context.Context, n int64) error {
	g.mu.Lock()
	if g.waiters.Len() == 0 && g.used+n <= g.size {
		g.used += n
		g.mu.Unlock()
		return nil
	}
	w := &waiter{n: n, ready: make(chan struct{})}
	elem := g.waiters.PushBack(w)
	g.mu.Unlock()

	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
		g.mu.Lock()
		select {
		case <-w.ready:
			// Granted meanwhile: give it back.
			g.used -= n
		default:
			g.waiters.Remove(elem)
		}
		g.grant()
		g.mu.Unlock()
		return ctx.Err()
	}
}

// release returns n units.
func (g *gate) release(n int64) {
	g.mu.Lock()
	g.used -= n
	if g.used < 0 {
		g.mu.Unlock()
		panic("remote: gate released more than acquired")
	}
	g.grant()
	g.mu.Unlock()
}

// grant wakes the waiters at the front that now fit. Called with mu held.
func (g *gate) grant() {
	for {
		front := g.waiters.Front()
		if front == nil {
			return
		}
		w := front.Value.(*waiter)
		if g.used+w.n > g.size {
			return
		}
		g.used += w.n
		g.waiters.Remove(front)
		close(w.ready)
	}
}

// state returns the units in use and the number of waiters.
func (g *gate) state() (used int64, waiting int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.used, g.waiters.Len()
}
