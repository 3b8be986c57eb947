// Package cache holds the bounded caches of a tsdb database: Gen, a map bounded by a cost in
// two generations. Its caches only save requests: a miss is answered from the account.
package cache

import (
	"sync"
	"time"
)

// Idle is how long an entry of a read cache (NewIdle) may go unused before it goes: it is
// dropped between Idle and twice Idle after its last use. A panel refreshed at least every
// 5 minutes (Grafana's refresh choices up to "5m") keeps what it reads; what nothing reads
// any more (a folded bucket's staging entities, a panel closed) goes within minutes instead
// of holding memory until the cache's bound, so that a server's memory is that of what it
// serves.
const Idle = 5 * time.Minute

// Gen is a map bounded by a cost: two generations, as VictoriaMetrics' workingsetcache
// keeps them. Entries go into the current generation; once its cost reaches half the bound,
// it becomes the previous one and the old previous is dropped whole. A hit in the previous
// generation moves the entry back into the current one, so what is in use survives a
// rotation: least-recently-used eviction, approximately, without a list per entry. It holds
// at most the bound's cost (plus one entry). Safe for concurrent use.
//
// A Gen of NewIdle also rotates once idle has passed since its last rotation (checked at
// each use, and at Len and Size, which a server's metrics read): an entry unused for
// between idle and twice idle goes, whatever the cost held.
//
// The caches of a DB only save requests: a miss is always answered correctly from the
// account, at a request's cost.
type Gen[K comparable, V any] struct {
	mu       sync.Mutex
	half     int            // a generation's cost bound
	cost     func(K, V) int // nil: 1 an entry
	curr     map[K]V
	prev     map[K]V
	currCost int
	prevCost int
	idle     time.Duration // 0: rotations by cost only
	rotated  time.Time     // the last rotation, or the first use (with idle)
	// keep, if set, holds the entries that an idle rotation keeps, however long unused
	// (KeepIdle).
	keep func(K, V) bool
}

func New[K comparable, V any](maxCost int, cost func(K, V) int) *Gen[K, V] {
	return &Gen[K, V]{half: max(1, maxCost/2), cost: cost, curr: map[K]V{}}
}

// NewIdle is New whose entries also go once unused for idle (between idle and twice idle).
func NewIdle[K comparable, V any](maxCost int, cost func(K, V) int, idle time.Duration) *Gen[K, V] {
	c := New(maxCost, cost)
	c.idle = idle
	return c
}

// KeepIdle makes the idle rotations of a Gen of NewIdle keep the entries keep holds, as if
// they had been used: what is unused but still needed (a staging entity whose bucket is not
// folded yet) goes only when keep no longer holds it, or by the bound of the cost, as any
// entry does. Called before any use; keep runs under the Gen's lock.
func (c *Gen[K, V]) KeepIdle(keep func(K, V) bool) { c.keep = keep }

// expireLocked rotates the generations once idle has passed since the last rotation: the
// previous generation's entries were last used before that one, idle ago at least (but
// those keep holds, carried into the new current one).
func (c *Gen[K, V]) expireLocked() {
	if c.idle <= 0 {
		return
	}
	now := time.Now()
	switch {
	case c.rotated.IsZero():
		c.rotated = now
	case now.Sub(c.rotated) >= c.idle:
		var kept map[K]V
		if c.keep != nil {
			for k, v := range c.prev {
				if c.keep(k, v) {
					if kept == nil {
						kept = map[K]V{}
					}
					kept[k] = v
				}
			}
		}
		c.rotateLocked()
		for k, v := range kept {
			c.addLocked(k, v)
		}
	}
}

// rotateLocked makes the current generation the previous one, dropping the previous.
func (c *Gen[K, V]) rotateLocked() {
	c.prev, c.curr, c.prevCost, c.currCost = c.curr, make(map[K]V, len(c.curr)), c.currCost, 0
	if c.idle > 0 {
		c.rotated = time.Now()
	}
}

func (c *Gen[K, V]) costOf(k K, v V) int {
	if c.cost == nil {
		return 1
	}
	return c.cost(k, v)
}

// Get returns the value of k, if cached.
func (c *Gen[K, V]) Get(k K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expireLocked()
	if v, ok := c.curr[k]; ok {
		return v, true
	}
	v, ok := c.prev[k]
	if ok {
		delete(c.prev, k)
		c.prevCost -= c.costOf(k, v)
		c.addLocked(k, v)
	}
	return v, ok
}

// Peek returns the value of k, if cached, as Get would, but without using it: an entry of
// the previous generation stays there.
func (c *Gen[K, V]) Peek(k K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok := c.curr[k]; ok {
		return v, true
	}
	v, ok := c.prev[k]
	return v, ok
}

// Add caches v for k (replacing a value cached before).
func (c *Gen[K, V]) Add(k K, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expireLocked()
	if old, ok := c.curr[k]; ok {
		c.currCost -= c.costOf(k, old)
		delete(c.curr, k)
	}
	c.addLocked(k, v)
}

func (c *Gen[K, V]) addLocked(k K, v V) {
	n := c.costOf(k, v)
	if c.currCost+n > c.half && len(c.curr) > 0 {
		c.rotateLocked()
	}
	c.curr[k] = v
	c.currCost += n
}

// Remove forgets k.
func (c *Gen[K, V]) Remove(k K) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.curr[k]; ok {
		c.currCost -= c.costOf(k, old)
		delete(c.curr, k)
	}
	if old, ok := c.prev[k]; ok {
		c.prevCost -= c.costOf(k, old)
		delete(c.prev, k)
	}
}

// Len is the number of entries cached.
func (c *Gen[K, V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expireLocked()
	return len(c.curr) + len(c.prev)
}

// Size is the cost of the entries cached: at most the bound, plus one entry.
func (c *Gen[K, V]) Size() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expireLocked()
	return c.currCost + c.prevCost
}

// Keys returns the keys cached, in no order (a copy: the cache may change meanwhile).
func (c *Gen[K, V]) Keys() []K {
	c.mu.Lock()
	defer c.mu.Unlock()
	keys := make([]K, 0, len(c.curr)+len(c.prev))
	for k := range c.curr {
		keys = append(keys, k)
	}
	for k := range c.prev {
		keys = append(keys, k)
	}
	return keys
}

// Update replaces k's value with f of the value cached (ok: there was one), in one step:
// two callers adding to an entry both count.
func (c *Gen[K, V]) Update(k K, f func(old V, ok bool) V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expireLocked()
	old, ok := c.curr[k]
	if ok {
		c.currCost -= c.costOf(k, old)
		delete(c.curr, k)
	} else if old, ok = c.prev[k]; ok {
		c.prevCost -= c.costOf(k, old)
		delete(c.prev, k)
	}
	c.addLocked(k, f(old, ok))
}

// RemoveIf forgets k if its value is one drop holds (a caller that looked at it before
// leaves alone what replaced it since).
func (c *Gen[K, V]) RemoveIf(k K, drop func(V) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.curr[k]; ok && drop(old) {
		c.currCost -= c.costOf(k, old)
		delete(c.curr, k)
	}
	if old, ok := c.prev[k]; ok && drop(old) {
		c.prevCost -= c.costOf(k, old)
		delete(c.prev, k)
	}
}
