// Package results is the query API's results cache: the answers of range queries, by step,
// kept while the samples they were computed from stand. It holds the cache's memory (a
// least-recently-used list bounded by bytes, shared by the APIs of every tenant of a
// process), what a cached answer is checked against, a Mark of the samples of its data
// range (tsdb's ReadMark), and what keeps answers in the database for every server (a
// Keeper). What a query answers and how answers are split and merged is the API's (package
// api): this package evaluates no PromQL.
package results

import (
	"container/list"
	"context"
	"sync"
	"time"

	"github.com/prometheus/prometheus/promql"
)

// A Mark is what the samples of a range of a database were when it was taken (tsdb's
// ReadMark): a cache keeps an answer computed from the range with the mark, and uses it
// again only while a later mark holds it.
type Mark interface {
	// Holds reports whether what a read of since's range found when since was taken still
	// stands when this mark was taken (this one later, of a range holding since's). Marks
	// of another database, or of another kind, never hold.
	Holds(since Mark) bool
	// Sub is the mark of [from, to), a range within this one's, as if taken when it was.
	Sub(from, to time.Time) Mark
}

// A Marker takes marks of its database.
type Marker interface {
	// ReadMark takes a mark of the samples of [from, to).
	ReadMark(ctx context.Context, from, to time.Time) (Mark, error)
}

// Stats are what a Cache did and holds: the fields of tsdb.CacheStats, in its order (a
// Stats converts to one).
type Stats struct {
	Hits, Misses uint64
	Entries      int
	Bytes        int64 // about their memory
}

// Cache keeps values by key, at most MaxBytes of them (as their Put said), dropping the
// least recently used first. It is safe for concurrent use. Its values are shared by
// whoever Gets them: they must not be changed once Put.
type Cache struct {
	max int64

	mu           sync.Mutex
	bytes        int64
	lru          list.List // of *entry, the most recently used first
	byKey        map[any]*list.Element
	hits, misses uint64
	shared       SharedStats
}

type entry struct {
	key   any
	value any
	bytes int64
}

// New returns a cache of at most maxBytes; maxBytes < 1 gives a cache that keeps nothing.
func New(maxBytes int64) *Cache {
	return &Cache{max: maxBytes, byKey: map[any]*list.Element{}}
}

// MaxBytes is the size New was given.
func (c *Cache) MaxBytes() int64 { return c.max }

// Get returns the value of key and makes it the most recently used; ok is false when
// there is none. It counts nothing: whether a value found is of use (its mark holds) is
// the caller's to say, with Hit or Miss.
func (c *Cache) Get(key any) (value any, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byKey[key]
	if !ok {
		return nil, false
	}
	c.lru.MoveToFront(e)
	return e.Value.(*entry).value, true
}

// Hit counts a lookup that found a value of use, Miss one that did not.
func (c *Cache) Hit() {
	c.mu.Lock()
	c.hits++
	c.mu.Unlock()
}

// Miss counts a lookup that found no value of use (none, or one no longer valid).
func (c *Cache) Miss() {
	c.mu.Lock()
	c.misses++
	c.mu.Unlock()
}

// Put keeps value under key, in place of any value it had, counting bytes for it, then
// drops the least recently used entries while the cache holds more than its size. A value
// of more bytes than an eighth of the size is not kept (and key's value is dropped): one
// answer must not empty the cache of every other.
func (c *Cache) Put(key, value any, bytes int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byKey[key]; ok {
		c.remove(e)
	}
	if bytes > c.max/8 {
		return
	}
	c.byKey[key] = c.lru.PushFront(&entry{key: key, value: value, bytes: bytes})
	c.bytes += bytes
	for c.bytes > c.max {
		c.remove(c.lru.Back())
	}
}

// Remove drops key's value, if any.
func (c *Cache) Remove(key any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byKey[key]; ok {
		c.remove(e)
	}
}

func (c *Cache) remove(e *list.Element) {
	en := c.lru.Remove(e).(*entry)
	delete(c.byKey, en.key)
	c.bytes -= en.bytes
}

// Stats returns the Hits and Misses counted since New and what the cache holds now.
func (c *Cache) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Stats{Hits: c.hits, Misses: c.misses, Entries: len(c.byKey), Bytes: c.bytes}
}

// A Kept is an answer kept in the database for every server sharing it (a Keeper's): the
// steps First..Last of a range query (Unix milliseconds), the mark of the samples they read,
// and, when LastSettled is before Last, Settled, the mark of the samples of the steps
// First..LastSettled (nil: none).
type Kept struct {
	First, Last, LastSettled int64
	Mark, Settled            Mark
	Series                   promql.Matrix // floats only
}

// A Keeper keeps answers in the database of its Marker, for every server sharing it
// (promstore.Queryable is both: tsdb's Answers.Keep and Answers.Kept). A kept answer
// serves, as an answer of the process's own cache does, only while a mark taken at the
// request holds its marks.
type Keeper interface {
	// KeepAnswer keeps k under key, in place of what the key kept: one request.
	KeepAnswer(ctx context.Context, key string, k Kept) error
	// KeptAnswer reads the answer kept under key: one request; ok false: none.
	KeptAnswer(ctx context.Context, key string) (k Kept, ok bool, err error)
}

// SharedStats count what the query API did with its Keeper's answers, all tenants
// together: the lookups that found one that served (Hits), those that found none or one
// that no longer held (Misses), the answers kept (Kept), and the keeps that failed, or
// that were not tried because as many were already under way as may be (Failed).
type SharedStats struct {
	Hits, Misses, Kept, Failed uint64
}

// CountShared adds to the counts of the Keeper's answers (SharedStats).
func (c *Cache) CountShared(d SharedStats) {
	c.mu.Lock()
	c.shared.Hits += d.Hits
	c.shared.Misses += d.Misses
	c.shared.Kept += d.Kept
	c.shared.Failed += d.Failed
	c.mu.Unlock()
}

// SharedStats returns the counts of the Keeper's answers since New.
func (c *Cache) SharedStats() SharedStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.shared
}
