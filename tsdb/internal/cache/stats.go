package cache

import "sync/atomic"

// Stats are what a cache of a part did and holds: its hits and misses (each cache says what
// it counts), and the entries and bytes it holds.
type Stats struct {
	Hits, Misses uint64
	Entries      int
	Bytes        int64 // about their memory
}

// Counts are a cache's hits and misses. Safe for concurrent use.
type Counts struct {
	hits, misses atomic.Uint64
}

// Hit counts n hits, Miss n misses.
func (c *Counts) Hit(n int)  { c.hits.Add(uint64(n)) }
func (c *Counts) Miss(n int) { c.misses.Add(uint64(n)) }

// StatsOf are the Stats of a cache that counts with c and holds g.
func StatsOf[K comparable, V any](c *Counts, g *Gen[K, V]) Stats {
	return Stats{Hits: c.hits.Load(), Misses: c.misses.Load(), Entries: g.Len(), Bytes: int64(g.Size())}
}
