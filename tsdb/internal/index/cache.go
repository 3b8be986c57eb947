package index

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/seed71701133/tablets/tsdb/internal/cache"
	"github.com/seed71701133/tablets/tsdb/internal/changelog"
	"github.com/seed71701133/tablets/tsdb/internal/labels"
)

// Cache keeps the label sets Select read from a period's index, by index table and query,
// with the generation of the period's index change log they were read at, so that a
// Select of the same metric again (each query of a refreshed panel; a Grafana variable's
// label values) reads the log's entity (a few hundred bytes) instead of the label sets:
// Register records in the log, after its entries are written, every registration that
// wrote one; Retain records in it before dropping the index. A period's label sets are
// used only at the generation the log has when the Select reads it.
//
// A Cache may be shared by the indexes of many databases (a server's tenants); it is
// bounded by the bytes of the label sets it holds (cache.Gen). Safe for concurrent use.
type Cache struct {
	sets     *cache.Gen[setsKey, cachedSets]
	counts   cache.Counts
	maxBytes int
}

// NewCache returns a cache of at most about maxBytes of label sets (at least 1 MiB).
func NewCache(maxBytes int64) *Cache {
	n := int(max(maxBytes, 1<<20))
	return &Cache{sets: cache.New(n, setsCost), maxBytes: n}
}

// Stats returns the cache's counts: Hits are queries of a period's index answered from the
// cache, Misses those read.
func (c *Cache) Stats() cache.Stats { return cache.StatsOf(&c.counts, c.sets) }

type setsKey struct{ table, filter string }

// cachedSets are every entry one query of an index table read (matching or not), at
// generation gen of the period's log.
type cachedSets struct {
	gen     uint64
	entries []SeriesInfo
}

func setsCost(k setsKey, c cachedSets) int {
	n := 100 + len(k.table) + len(k.filter)
	for _, e := range c.entries {
		n += entryCost(e)
	}
	return n
}

// entryCost is about the memory of a series' entry in the cache.
func entryCost(e SeriesInfo) int {
	n := 64 + len(e.Series)
	for _, l := range e.Labels {
		n += 32 + len(l.Name) + len(l.Value)
	}
	return n
}

// LogKey is the RowKey of period p's entity of the index change log: "i" and the period's
// start in Unix seconds, 12 digits (docs/format.md, "The catalog").
func LogKey(p uint64) string { return fmt.Sprintf("i%012d", p) }

// ErrNotCached: a Select of a context of changelog.AnyKnown (a guess) asked for label sets
// the cache does not hold (or of an Index without a cache); it reads no index table.
var ErrNotCached = errors.New("tsdb: index: not cached")

// readCached appends to found the label sets of one query f of period p's index that match
// ms, from the cache when the log's generation is the one they were read at (of a context
// of changelog.AnyKnown: at any, and ErrNotCached when none). The cache keeps them in
// labels' order. at, if not nil, is the index in found of each series found
// before (by another query): those are not appended again (a histogram series' flag is
// kept), and those appended are added to it. Without at, found holds no series of f's.
func (x *Index) readCached(ctx context.Context, p uint64, state changelog.State, f string, ms []labels.Compiled, found *[]SeriesInfo, at map[string]int) error {
	key := setsKey{x.names.IndexTable(p), f}
	c, ok := x.cache.sets.Get(key)
	if changelog.IsAnyKnown(ctx) {
		// A guess (changelog.AnyKnown): the sets cached, however old, or none read.
		if !ok {
			return ErrNotCached
		}
	} else if !ok || c.gen != state.Gen() {
		x.cache.counts.Miss(1)
		all := map[string]*SeriesInfo{}
		if err := x.readIndex(ctx, p, f, nil, all); err != nil {
			return err
		}
		c = cachedSets{gen: state.Gen(), entries: make([]SeriesInfo, 0, len(all))}
		for _, s := range all {
			c.entries = append(c.entries, *s)
		}
		// Kept in labels' order: a Select of them alone is then sorted as found.
		slices.SortFunc(c.entries, func(a, b SeriesInfo) int { return labels.Compare(a.Labels, b.Labels) })
		x.cache.sets.Add(key, c)
	} else {
		x.cache.counts.Hit(1)
	}
	if len(*found) == 0 && namesOnly(ms) {
		// Every entry of the metric's partition matches: room for all at once, where the
		// copies grown a doubling at a time were 5% of a soak server's allocations (a
		// dashboard's selectors most often name a metric alone).
		*found = slices.Grow(*found, len(c.entries))
	}
	for _, e := range c.entries {
		if at != nil {
			if i, ok := at[e.Series]; ok {
				(*found)[i].Histograms = (*found)[i].Histograms || e.Histograms
				continue
			}
		}
		if labels.MatchSet(ms, e.Labels) {
			if at != nil {
				at[e.Series] = len(*found)
			}
			*found = append(*found, e) // a copy: the cache's entries are shared
		}
	}
	return nil
}

// namesOnly reports whether every matcher of ms is the metric name's equality: what the
// query of a metric's index partition already selects.
func namesOnly(ms []labels.Compiled) bool {
	for _, m := range ms {
		if m.Name != labels.MetricName || m.Type != labels.MatchEqual {
			return false
		}
	}
	return true
}
