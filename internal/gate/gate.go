// Package gate is a weighted semaphore whose waiters are served in arrival order: a large
// request is not starved by a stream of small ones, and a waiting request holds nothing.
// The server bounds with it the samples of remote writes in flight, the remote reads served
// at once, and the request body bytes of all tenants together; package reqlimit, the
// requests in flight to the account.
package gate

import (
	"container/list"
	"context"
	"sync"
)

// Gate is the semaphore. Its zero value has size 0; make one with New.
type Gate struct {
	mu      sync.Mutex
	size    int64
	used    int64
	waiters list.List // of *waiter
}

type waiter struct {
	n     int64
	first bool // of AcquireFirst
	ready chan struct{}
}

// New returns a gate of size units.
func New(size int64) *Gate { return &Gate{size: size} }

// Acquire takes n units, or the whole size if n is more, waiting for them until ctx ends.
// It returns what it took, for Release.
func (g *Gate) Acquire(ctx context.Context, n int64) (int64, error) {
	return g.acquire(ctx, n, false)
}

// AcquireFirst is Acquire ahead of every waiter of Acquire: it waits behind the waiters of
// AcquireFirst that came before it only.
func (g *Gate) AcquireFirst(ctx context.Context, n int64) (int64, error) {
	return g.acquire(ctx, n, true)
}

func (g *Gate) acquire(ctx context.Context, n int64, first bool) (int64, error) {
	g.mu.Lock()
	n = min(n, g.size)
	// The last waiter this one goes behind: the last of all, or the last first one.
	var behind *list.Element
	if first {
		for e := g.waiters.Front(); e != nil && e.Value.(*waiter).first; e = e.Next() {
			behind = e
		}
	} else {
		behind = g.waiters.Back()
	}
	if behind == nil && g.used+n <= g.size {
		g.used += n
		g.mu.Unlock()
		return n, nil
	}
	w := &waiter{n: n, first: first, ready: make(chan struct{})}
	var elem *list.Element
	if behind == nil {
		elem = g.waiters.PushFront(w)
	} else {
		elem = g.waiters.InsertAfter(w, behind)
	}
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

// Release returns n units taken by Acquire. Returning more than was taken is a bug: it
// panics.
func (g *Gate) Release(n int64) {
	g.mu.Lock()
	g.used -= n
	if g.used < 0 {
		g.mu.Unlock()
		panic("gate: released more than acquired")
	}
	g.grantLocked()
	g.mu.Unlock()
}

// Resize sets the size (a configuration reloaded). Units taken stay taken: a smaller size
// admits no one until enough are released.
func (g *Gate) Resize(size int64) {
	g.mu.Lock()
	if size != g.size {
		g.size = size
		g.grantLocked()
	}
	g.mu.Unlock()
}

// State returns the units taken and the number of waiters.
func (g *Gate) State() (used int64, waiting int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.used, g.waiters.Len()
}

// grantLocked wakes the waiters at the front that now fit (one larger than the size, after
// a Resize, fits once nothing is taken). Called with mu held.
func (g *Gate) grantLocked() {
	for {
		front := g.waiters.Front()
		if front == nil {
			return
		}
		w := front.Value.(*waiter)
		if g.used+w.n > g.size && g.used > 0 {
			return
		}
		g.used += w.n
		g.waiters.Remove(front)
		close(w.ready)
	}
}
