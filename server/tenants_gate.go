package server

import (
	"container/list"
	"context"
	"sync"
)

// bodyGate bounds the body bytes of the requests being served, all tenants together: a
// weighted semaphore whose waiters are served in arrival order (a large request is not
// starved by a stream of small ones; a waiting request holds nothing). Its size follows the
// configuration (resize).
type bodyGate struct {
	mu      sync.Mutex
	size    int64
	used    int64
	waiters list.List // of *bodyWaiter
}

type bodyWaiter struct {
	n     int64
	ready chan struct{}
}

func newBodyGate(size int64) *bodyGate { return &bodyGate{size: size} }

// acquire takes n units, or the whole size if n is more, waiting for them until ctx ends.
// It returns what it took, for release.
func (g *bodyGate) acquire(ctx context.Context, n int64) (int64, error) {
	g.mu.Lock()
	n = min(n, g.size)
	if g.waiters.Len() == 0 && g.used+n <= g.size {
		g.used += n
		g.mu.Unlock()
		return n, nil
	}
	w := &bodyWaiter{n: n, ready: make(chan struct{})}
	elem := g.waiters.PushBack(w)
	g.mu.Unlock()

	select {
	case <-w.ready:
		return n, nil
	case <-ctx.Done():
		g.mu.Lock()
		select {
		case <-w.ready: // granted meanwhile: give it back
			g.used -= n
		default:
			g.waiters.Remove(elem)
		}
		g.grantLocked()
		g.mu.Unlock()
		return 0, ctx.Err()
	}
}

// release returns n units taken by acquire.
func (g *bodyGate) release(n int64) {
	g.mu.Lock()
	g.used -= n
	g.grantLocked()
	g.mu.Unlock()
}

// resize sets the size (a configuration reloaded). Units taken stay taken: a smaller size
// admits no one until enough are released.
func (g *bodyGate) resize(size int64) {
	g.mu.Lock()
	if size != g.size {
		g.size = size
		g.grantLocked()
	}
	g.mu.Unlock()
}

// grantLocked wakes the waiters at the front that now fit (one larger than the size fits
// once nothing is taken). Called with mu held.
func (g *bodyGate) grantLocked() {
	for {
		front := g.waiters.Front()
		if front == nil {
			return
		}
		w := front.Value.(*bodyWaiter)
		if g.used+w.n > g.size && g.used > 0 {
			return
		}
		g.used += w.n
		g.waiters.Remove(front)
		close(w.ready)
	}
}

// state returns the units taken and the number of waiters.
func (g *bodyGate) state() (used int64, waiting int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.used, g.waiters.Len()
}
