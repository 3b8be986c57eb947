package cache

import (
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

func TestGenCacheBound(t *testing.T) {
	c := New[int, string](100, func(_ int, v string) int { return len(v) })
	for i := range 1000 {
		c.Add(i, "0123456789") // 10 each: a generation holds 5
	}
	if n, size := c.Len(), c.Size(); n > 10 || size != 10*n {
		t.Fatalf("%d entries of cost %d cached, want at most 10 (a cost of 100)", n, size)
	}
	if _, ok := c.Get(999); !ok {
		t.Fatal("the newest entry is gone")
	}
	if _, ok := c.Get(0); ok {
		t.Fatal("the oldest entry is still there")
	}
}

// Peek finds an entry of either generation without using it: one only peeked at does not
// survive two rotations.
func TestGenCachePeekDoesNotUse(t *testing.T) {
	c := New[int, string](10, nil) // 5 a generation
	c.Add(-1, "x")
	for i := range 12 {
		c.Add(i, "")
		if v, ok := c.Peek(-1); i < 5 && (!ok || v != "x") {
			t.Fatalf("after %d adds: Peek gave %q, %v", i+1, v, ok)
		}
	}
	if _, ok := c.Peek(-1); ok {
		t.Fatal("an entry only peeked at survived two generations")
	}
}

// An entry in use survives rotations; one not used does not.
func TestGenCacheKeepsWhatIsUsed(t *testing.T) {
	c := New[int, struct{}](10, nil) // 5 a generation
	c.Add(-1, struct{}{})
	for i := range 100 {
		c.Add(i, struct{}{})
		if _, ok := c.Get(-1); !ok {
			t.Fatalf("the entry in use is gone after %d adds", i+1)
		}
	}
	c.Add(-2, struct{}{})
	for i := 100; i < 110; i++ {
		c.Add(i, struct{}{})
	}
	if _, ok := c.Get(-2); ok {
		t.Fatal("an unused entry survived two generations")
	}
}

func TestGenCacheReplaceAndRemove(t *testing.T) {
	c := New[string, int](4, nil)
	c.Add("a", 1)
	c.Add("a", 2)
	if v, _ := c.Get("a"); v != 2 || c.Len() != 1 {
		t.Fatalf("got %d (%d entries), want 2 (1 entry)", v, c.Len())
	}
	c.Add("b", 3) // rotates: "a" moves to the previous generation
	c.Add("c", 4)
	c.Remove("a")
	if _, ok := c.Get("a"); ok {
		t.Fatal("a removed entry is still cached")
	}
	if v, ok := c.Get("b"); !ok || v != 3 {
		t.Fatal("b is gone")
	}
}

func TestGenCacheKeys(t *testing.T) {
	c := New[int, struct{}](4, nil) // 2 a generation
	for i := range 5 {
		c.Add(i, struct{}{})
	}
	keys := c.Keys()
	slices.Sort(keys)
	if !slices.Equal(keys, []int{2, 3, 4}) {
		t.Fatalf("keys %v, want [2 3 4] (a generation of 2 and the newest)", keys)
	}
}

// An entity is given back only at the ETag it was held at, as a copy of what was added.
func TestEntities(t *testing.T) {
	c := NewEntities(1 << 20)
	k := EntityKey{Table: "t", PartitionKey: "p", RowKey: "r", Select: "A"}
	raw := []byte(`{"A":1}`)
	c.Add(k, `W/"1"`, raw)
	raw[0] = 'x' // the caller's buffer is not the cache's
	if got, ok := c.Get(k, `W/"1"`); !ok || string(got) != `{"A":1}` {
		t.Fatalf("held: %q %v", got, ok)
	}
	if _, ok := c.Get(k, `W/"2"`); ok {
		t.Fatal("given back at another ETag")
	}
	if _, ok := c.Get(EntityKey{Table: "t", PartitionKey: "p", RowKey: "r", Select: "B"}, `W/"1"`); ok {
		t.Fatal("given back for another selection")
	}
	if st := c.Stats(); st.Hits != 1 || st.Misses != 2 || st.Entries != 1 || st.Bytes == 0 {
		t.Fatalf("stats %+v", st)
	}
}

// Update sees the value cached (in either generation) and replaces it, its cost counted once.
func TestGenCacheUpdate(t *testing.T) {
	c := New[string, string](20, func(_ string, v string) int { return len(v) }) // 10 a generation
	c.Update("a", func(old string, ok bool) string {
		if ok {
			t.Fatalf("found %q in an empty cache", old)
		}
		return "x"
	})
	c.Add("b", "123456789") // rotates: "a" in the previous generation
	c.Update("a", func(old string, ok bool) string {
		if !ok || old != "x" {
			t.Fatalf("got %q %v, want the previous generation's x", old, ok)
		}
		return old + "y"
	})
	if v, ok := c.Get("a"); !ok || v != "xy" || c.Len() != 2 || c.Size() != 11 {
		t.Fatalf("got %q %v, %d entries of cost %d; want xy, 2 entries of 11", v, ok, c.Len(), c.Size())
	}
}

// A Gen of NewIdle drops what went unused for between idle and twice idle, whatever the
// cost it holds, and keeps what is used at least every idle; a Gen of New rotates by cost
// only.
func TestGenCacheIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := NewIdle[string, int](1000, nil, time.Minute)
		plain := New[string, int](1000, nil)
		c.Add("a", 1)
		c.Add("b", 2)
		plain.Add("a", 1)
		time.Sleep(61 * time.Second)
		c.Add("c", 3) // a rotation: a and b in the previous generation
		if c.Len() != 3 {
			t.Fatalf("%d entries a minute after, want 3 (nothing unused for two minutes)", c.Len())
		}
		time.Sleep(29 * time.Second)
		if _, ok := c.Get("a"); !ok {
			t.Fatal("a went after 90s")
		}
		time.Sleep(32 * time.Second) // 122s: Size rotates, b goes (unused for 122s)
		if n, size := c.Len(), c.Size(); n != 2 || size != 2 {
			t.Fatalf("%d entries of cost %d, want a and c", n, size)
		}
		if _, ok := c.Peek("b"); ok {
			t.Fatal("b, unused for two minutes, is still cached")
		}
		for range 10 { // used every 50s: kept
			time.Sleep(50 * time.Second)
			if _, ok := c.Get("c"); !ok {
				t.Fatal("c, used every 50s, went")
			}
		}
		if _, ok := c.Peek("a"); ok {
			t.Fatal("a, unused for more than two minutes, is still cached")
		}
		time.Sleep(time.Hour)
		if c.Len() != 1 || c.Size() != 1 { // the first rotation after the hour: c in the previous
			t.Fatalf("after an hour: %d entries, cost %d", c.Len(), c.Size())
		}
		time.Sleep(time.Minute)
		if c.Len() != 0 {
			t.Fatal("c, unused for an hour, survived a second rotation")
		}
		if _, ok := plain.Get("a"); !ok || plain.Len() != 1 {
			t.Fatal("a Gen of New dropped an entry by time")
		}
	})
}

// A Gen with KeepIdle keeps, unused, the entries keep holds through its idle rotations,
// and drops them at the first rotation after keep stops holding them; the others go as
// without it, and the bound of the cost drops kept entries too.
func TestGenCacheKeepIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		until := time.Now().Add(10 * time.Minute) // "pinned" is kept until then
		c := NewIdle[string, int](1000, nil, time.Minute)
		c.KeepIdle(func(k string, _ int) bool { return k == "pinned" && time.Now().Before(until) })
		c.Add("pinned", 1)
		c.Add("other", 2)
		for range 9 {
			time.Sleep(time.Minute)
			c.Len() // a rotation a minute
		}
		if _, ok := c.Peek("pinned"); !ok {
			t.Fatal("the kept entry went, unused for 9 minutes")
		}
		if _, ok := c.Peek("other"); ok {
			t.Fatal("an entry keep does not hold stayed unused for 9 minutes")
		}
		for range 3 {
			time.Sleep(time.Minute)
			c.Len()
		}
		if c.Len() != 0 {
			t.Fatal("the kept entry stayed two rotations after keep let it go")
		}

		bounded := NewIdle[string, int](4, nil, time.Minute) // generations of 2
		bounded.KeepIdle(func(string, int) bool { return true })
		for _, k := range []string{"a", "b", "c", "d", "e"} {
			bounded.Add(k, 1)
		}
		if _, ok := bounded.Peek("a"); ok {
			t.Fatal("keep held an entry past the bound of the cost")
		}
	})
}

// The tier blocks' cache (NewEntities) drops a block no read asked for in twice Idle,
// and keeps one read at every refresh.
func TestEntitiesIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := NewEntities(1 << 20)
		used, unused := EntityKey{Table: "t", RowKey: "used"}, EntityKey{Table: "t", RowKey: "unused"}
		c.Add(used, "e1", []byte("x"))
		c.Add(unused, "e1", []byte("y"))
		for range 2 * Idle / time.Minute {
			time.Sleep(time.Minute)
			if _, ok := c.Get(used, "e1"); !ok {
				t.Fatal("a block read every minute went")
			}
		}
		if s := c.Stats(); s.Entries != 1 {
			t.Fatalf("%d blocks held after %s, want the one in use", s.Entries, 2*Idle)
		}
	})
}
