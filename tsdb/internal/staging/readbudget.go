package staging

import (
	"container/list"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/reqlimit"
)

// ReadBudget bounds the memory that reads of staging tables hold at once, in bytes: the
// pages' JSON being fetched and decoded, the decoded pages being yielded, and the staged
// points a read collects (a query's, or a fold round's).
//
// A page of a staging read is up to PageBytes (8 MiB) of JSON, held twice over (the
// body and its entities) while it is decoded. Each page takes that size from the budget
// before it is requested. A read through the cache asks for its next page while it decodes
// one (pagesAhead): it holds two pages' size at most. Once decoded, its read holds the size of its decoded series
// instead (16 bytes a point: they may be larger than the compressed JSON) until every
// entity of the page was yielded.
//
// A read of the staged points of many series (the group of a Select's batches, a fold's
// round) collects them all, as written, before it sorts them (32 bytes a point): with an
// hour staged and tens of queries in flight, they were the largest part of the soak's heap.
// The points a read collects hold their bytes until it ends. So that readers holding
// points and waiting for more cannot wait for each other forever, every staging read is a
// read of the budget, and the oldest never waits: it may take more than there is, and when
// it ends the next oldest goes on. The budget holds at most its size, and what the oldest
// read takes past it.
//
// Other waiters wait in arrival order. A page larger than the whole budget takes all of it.
// One budget may be shared by many DBs (tsdb's Options.StagingReadBudget): a server's tenants share
// one, so their queries together hold a bounded amount. It is safe for concurrent use.
type ReadBudget struct {
	mu      sync.Mutex
	size    int64
	used    int64
	most    int64     // of used: for tests
	reads   list.List // of *collectRead, oldest first
	waiters list.List // of *budgetWaiter, in arrival order
}

type budgetWaiter struct {
	n     int64
	read  *collectRead // nil: a page of a read that collects nothing
	ready chan struct{}
}

// collectRead is a read that collects points under a budget: what it holds, and its place
// among the budget's reads.
type collectRead struct {
	b    *ReadBudget
	held int64
	elem *list.Element
}

// NewReadBudget returns a budget of bytes, which must be positive (else the error wraps
// tablets.ErrInvalidOptions).
func NewReadBudget(bytes int64) (*ReadBudget, error) {
	if bytes <= 0 {
		return nil, fmt.Errorf("tsdb: %w: staging read budget of %d bytes: must be positive", tablets.ErrInvalidOptions, bytes)
	}
	return &ReadBudget{size: bytes}, nil
}

// InUse is the bytes taken now (pages and collected points) and the number of takers
// waiting for room.
func (b *ReadBudget) InUse() (bytes int64, waiting int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used, b.waiters.Len()
}

// MostUsed is the most bytes that were in use at once in b (for tests: not a method, so
// that tsdb.ReadBudget does not have it).
func MostUsed(b *ReadBudget) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.most
}

// ResetMostUsed forgets the most bytes in use so far (for tests, as MostUsed).
func ResetMostUsed(b *ReadBudget) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.most = b.used
}

// take takes n bytes (at most the whole budget) for a page of read (nil: of a read that
// collects nothing) until ctx ends, and returns the function that gives them back. A nil
// budget admits everything.
func (b *ReadBudget) take(ctx context.Context, read *collectRead, n int64) (func(), error) {
	if b == nil {
		return func() {}, nil
	}
	got, err := b.acquire(ctx, read, min(n, b.size))
	if err != nil {
		return nil, err
	}
	return func() { b.release(got) }, nil
}

// budgetOf is the budget of read's pages: read's own, or b for a read of none.
func (b *ReadBudget) budgetOf(read *collectRead) *ReadBudget {
	if read != nil {
		return read.b
	}
	return b
}

// beginRead starts a read that collects points: it holds what it collects until end. A
// nil budget gives a nil read, which holds nothing.
func (b *ReadBudget) beginRead() *collectRead {
	if b == nil {
		return nil
	}
	r := &collectRead{b: b}
	b.mu.Lock()
	r.elem = b.reads.PushBack(r)
	b.mu.Unlock()
	return r
}

// hold takes n more bytes for the points r collected, until r ends.
func (r *collectRead) hold(ctx context.Context, n int64) error {
	if r == nil || n <= 0 {
		return nil
	}
	got, err := r.b.acquire(ctx, r, n)
	if err != nil {
		return err
	}
	r.b.mu.Lock()
	r.held += got
	r.b.mu.Unlock()
	return nil
}

// give gives back n of the bytes r holds (at most all): a decoded page it has yielded.
func (r *collectRead) give(n int64) {
	if r == nil || n <= 0 {
		return
	}
	b := r.b
	b.mu.Lock()
	defer b.mu.Unlock()
	n = min(n, r.held)
	r.held -= n
	b.used -= n
	b.grantLocked()
}

// stepBack makes r the newest of the budget's reads: a read that waits for another's fetch
// (holding nothing) must not keep the oldest read's right to take past the budget, which
// the fetch it waits for may need.
func (r *collectRead) stepBack() {
	if r == nil {
		return
	}
	b := r.b
	b.mu.Lock()
	defer b.mu.Unlock()
	b.reads.MoveToBack(r.elem)
	b.grantLocked()
}

// unheld says whether r holds nothing (a nil read holds nothing).
func (r *collectRead) unheld() bool {
	if r == nil {
		return true
	}
	r.b.mu.Lock()
	defer r.b.mu.Unlock()
	return r.held == 0
}

// end gives back what r holds; the next oldest read no longer waits.
func (r *collectRead) end() {
	if r == nil {
		return
	}
	b := r.b
	b.mu.Lock()
	defer b.mu.Unlock()
	b.reads.Remove(r.elem)
	b.used -= r.held
	r.held = 0
	b.grantLocked()
}

func (b *ReadBudget) acquire(ctx context.Context, read *collectRead, n int64) (int64, error) {
	b.mu.Lock()
	if (b.waiters.Len() == 0 && b.used+n <= b.size) || b.oldestLocked(read) {
		b.used += n
		b.most = max(b.most, b.used)
		b.mu.Unlock()
		return n, nil
	}
	w := &budgetWaiter{n: n, read: read, ready: make(chan struct{})}
	elem := b.waiters.PushBack(w)
	b.mu.Unlock()

	defer reqlimit.TallyBudget(ctx, time.Now())
	select {
	case <-w.ready:
		return n, nil
	case <-ctx.Done():
		b.mu.Lock()
		defer b.mu.Unlock()
		select {
		case <-w.ready: // granted meanwhile: give it back
			b.used -= n
		default:
			b.waiters.Remove(elem)
		}
		b.grantLocked()
		return 0, ctx.Err()
	}
}

func (b *ReadBudget) release(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
	if b.used < 0 {
		panic("tsdb: staging read budget released more than taken")
	}
	b.grantLocked()
}

// oldestLocked reports whether read is the oldest of the reads collecting points.
func (b *ReadBudget) oldestLocked(read *collectRead) bool {
	return read != nil && b.reads.Front() != nil && b.reads.Front().Value == read
}

// grantLocked wakes the waiters at the front that now fit (one of the whole size fits once
// nothing is taken), and every waiter of the oldest read. Called with mu held.
func (b *ReadBudget) grantLocked() {
	blocked := false // a waiter before waits for room: the next wait their turn
	for e := b.waiters.Front(); e != nil; {
		w, next := e.Value.(*budgetWaiter), e.Next()
		if b.oldestLocked(w.read) || (!blocked && (b.used+w.n <= b.size || b.used == 0)) {
			b.used += w.n
			b.most = max(b.most, b.used)
			b.waiters.Remove(e)
			close(w.ready)
		} else {
			blocked = true
		}
		e = next
	}
}
