package cache

import (
	"bytes"
)

// Entities keeps entities as the account answered them (their JSON, as a query selected
// them), by table, keys and selection, each with its ETag: a reader lists the keys and
// ETags its query selects, takes from here what is still at the ETag listed, and fetches
// the rest. An entity another process rewrote has another ETag, one it deleted is not
// listed: what Entities holds is never the last word, the listing is. Bounded by the bytes
// it holds (a Gen), safe for concurrent use, and shareable by the databases of a server.
type Entities struct {
	held   *Gen[EntityKey, heldEntity]
	counts Counts
}

// EntityKey names an entity of a table as a query selected it.
type EntityKey struct {
	Table, PartitionKey, RowKey string
	Select                      string // the query's $select ("" every property)
}

type heldEntity struct {
	etag string
	raw  []byte
}

// NewEntities returns a cache of at most about maxBytes of entities (at least 1 MiB).
func NewEntities(maxBytes int64) *Entities {
	return &Entities{held: NewIdle(int(max(maxBytes, 1<<20)), func(k EntityKey, e heldEntity) int {
		return len(k.Table) + len(k.PartitionKey) + len(k.RowKey) + len(k.Select) + len(e.etag) + len(e.raw) + 96
	}, Idle)}
}

// Get returns the entity of k if it is held at etag, counting a hit or a miss.
func (c *Entities) Get(k EntityKey, etag string) ([]byte, bool) {
	e, ok := c.held.Get(k)
	if ok && e.etag == etag {
		c.counts.Hit(1)
		return e.raw, true
	}
	c.counts.Miss(1)
	return nil, false
}

// Add holds a copy of raw, the entity of k at etag.
func (c *Entities) Add(k EntityKey, etag string, raw []byte) {
	c.held.Add(k, heldEntity{etag: etag, raw: bytes.Clone(raw)})
}

// Stats returns the cache's counts.
func (c *Entities) Stats() Stats { return StatsOf(&c.counts, c.held) }
