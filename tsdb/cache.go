package tsdb

import "sync"

// genCache is a map bounded by a cost: two generations, as VictoriaMetrics' workingsetcache
// keeps them. Entries go into the current generation; once its cost reaches half the bound,
// it becomes the previous one and the old previous is dropped whole. A hit in the previous
// generation moves the entry back into the current one, so what is in use survives a
// rotation: least-recently-used eviction, approximately, without a list per entry. It holds
// at most the bound's cost (plus one entry). Safe for concurrent use.
//
// The caches of a DB only save requests: a miss is always answered correctly from the
// account, at a request's cost.
type genCache[K comparable, V any] struct {
	mu       sync.Mutex
	half     int            // a generation's cost bound
	cost     func(K, V) int // nil: 1 an entry
	curr     map[K]V
	prev     map[K]V
	currCost int
	prevCost int
}

func newGenCache[K comparable, V any](maxCost int, cost func(K, V) int) *genCache[K, V] {
	return &genCache[K, V]{half: max(1, maxCost/2), cost: cost, curr: map[K]V{}}
}

func (c *genCache[K, V]) costOf(k K, v V) int {
	if c.cost == nil {
		return 1
	}
	return c.cost(k, v)
}

// get returns the value of k, if cached.
func (c *genCache[K, V]) get(k K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
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

// add caches v for k (replacing a value cached before).
func (c *genCache[K, V]) add(k K, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.curr[k]; ok {
		c.currCost -= c.costOf(k, old)
		delete(c.curr, k)
	}
	c.addLocked(k, v)
}

func (c *genCache[K, V]) addLocked(k K, v V) {
	n := c.costOf(k, v)
	if c.currCost+n > c.half && len(c.curr) > 0 {
		c.prev, c.curr, c.prevCost, c.currCost = c.curr, make(map[K]V, len(c.curr)), c.currCost, 0
	}
	c.curr[k] = v
	c.currCost += n
}

// remove forgets k.
func (c *genCache[K, V]) remove(k K) {
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

// len is the number of entries cached.
func (c *genCache[K, V]) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.curr) + len(c.prev)
}

// size is the cost of the entries cached: at most the bound, plus one entry.
func (c *genCache[K, V]) size() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.currCost + c.prevCost
}
