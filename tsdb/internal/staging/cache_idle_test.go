package staging

import (
	"sync/atomic"
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

// The entities of a bucket whose Fold is not due yet stay cached unused (every process's
// raw cache takes the Fold in from them, a refreshed panel reading only its newest
// minutes), until the hold its Table registered has passed since the bucket's end; then
// they go as any unused entity. Those of a bucket long due, and of a table that
// registered none, go after twice cache.Idle unused as before.
func TestCacheKeepsUnfoldedEntities(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := NewCache(64 << 20)
		hold := 12 * time.Minute
		c.keepUnfolded("t", hold, time.Now, nil)
		bucket := BucketOf(time.Now()) - uint64(Bucket/time.Second) // the bucket that just ended
		due := bucket - 3*uint64(Bucket/time.Second)
		unfolded := entityKey{"t", PartitionKey(bucket, 0), "a"}
		folded := entityKey{"t", PartitionKey(due, 0), "b"}
		unregistered := entityKey{"u", PartitionKey(bucket, 0), "c"}
		for _, k := range []entityKey{unfolded, folded, unregistered} {
			c.entities.Add(k, &cachedEntity{etag: "e"})
		}
		ended := BucketEnd(unfolded.pk)
		for time.Since(ended) < hold {
			time.Sleep(10 * time.Second)
			c.Stats() // the metrics' reads: the rotations
			if _, ok := c.entities.Peek(unfolded); !ok {
				t.Fatalf("the entity of a bucket not yet due went %v after its end, unused", time.Since(ended))
			}
		}
		for _, k := range []entityKey{folded, unregistered} {
			if _, ok := c.entities.Peek(k); ok {
				t.Errorf("%v stayed unused for %v", k, hold)
			}
		}
		for range 2*cache.Idle/(10*time.Second) + 1 {
			time.Sleep(10 * time.Second)
			c.Stats()
		}
		if s := c.Stats(); s.Entries != 0 {
			t.Fatalf("%d entities cached twice cache.Idle after the hold, want none", s.Entries)
		}
	})
}

// A bucket the table's last listing still found stays cached past its hold, unused (a Fold
// late: cut off by an outage and done again, or paced out by a busy account), until a
// listing no longer finds it; a table that registered no listing's bucket holds nothing
// past the hold.
func TestCacheKeepsListedEntities(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := NewCache(64 << 20)
		hold := 12 * time.Minute
		listed := &atomic.Pointer[[]uint64]{} // no listing yet
		c.keepUnfolded("t", hold, time.Now, listed)
		c.keepUnfolded("u", hold, time.Now, nil)
		bucket := BucketOf(time.Now()) - uint64(Bucket/time.Second) // the bucket that just ended
		late := entityKey{"t", PartitionKey(bucket, 0), "a"}
		unlisted := entityKey{"u", PartitionKey(bucket, 0), "b"}
		for _, k := range []entityKey{late, unlisted} {
			c.entities.Add(k, &cachedEntity{etag: "e"})
		}
		// The bucket's frozen points (its entities frozen a while after they were cached).
		frozen := frozenKey{"t", late.pk}
		c.frozen.replace(frozen, nil, &frozenBucket{})
		isFrozen := func() bool {
			c.freezeHeld()
			c.frozen.mu.Lock()
			defer c.frozen.mu.Unlock()
			_, ok := c.frozen.buckets[frozen]
			return ok
		}
		listed.Store(&[]uint64{bucket - uint64(Bucket/time.Second), bucket}) // a listing finds the bucket's entities
		ended := BucketEnd(late.pk)
		for time.Since(ended) < hold+2*cache.Idle+time.Minute {
			time.Sleep(10 * time.Second)
			c.Stats() // the metrics' reads: the rotations
			if _, ok := c.entities.Peek(late); !ok {
				t.Fatalf("the entity of a bucket a listing still finds went %v after its end, unused", time.Since(ended))
			}
		}
		if _, ok := c.entities.Peek(unlisted); ok {
			t.Errorf("an entity of a table without a listing's bucket stayed unused %v past its hold", time.Since(ended)-hold)
		}
		if !isFrozen() {
			t.Error("the frozen points of a bucket a listing still finds went after its hold")
		}
		listed.Store(&[]uint64{bucket + uint64(Bucket/time.Second)}) // the Fold moved it: listed no more
		if isFrozen() {
			t.Error("the frozen points of a bucket past its hold stayed once a listing no longer found it")
		}
		for range 2*cache.Idle/(10*time.Second) + 1 {
			time.Sleep(10 * time.Second)
			c.Stats()
		}
		if _, ok := c.entities.Peek(late); ok {
			t.Fatal("the entity stayed twice cache.Idle after a listing no longer found its bucket")
		}
	})
}
