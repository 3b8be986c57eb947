package staging

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/seed71701133/tablets/tsdb/internal/cache"
)

// The staging cache drops an entity's columns once unused for twice cache.Idle, whatever
// room is left (a folded bucket's entities are gone from the account), and keeps those a
// refresh reads.
func TestCacheDropsIdleEntities(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := NewCache(64 << 20)
		folded, open := entityKey{"t", "000000000600-00", "a"}, entityKey{"t", "000000001200-00", "b"}
		c.entities.Add(folded, &cachedEntity{etag: "e"})
		c.entities.Add(open, &cachedEntity{etag: "e"})
		for range 2 * cache.Idle / (10 * time.Second) {
			time.Sleep(10 * time.Second) // the soak's refresh
			if _, ok := c.entities.Get(open); !ok {
				t.Fatal("an entity read at every refresh went")
			}
		}
		if _, ok := c.entities.Peek(folded); ok {
			t.Fatalf("an entity unused for %s is still cached", 2*cache.Idle)
		}
		if s := c.Stats(); s.Entries != 1 {
			t.Fatalf("%d entities cached, want 1", s.Entries)
		}
	})
}
