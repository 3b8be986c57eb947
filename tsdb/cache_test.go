package tsdb

import (
	"errors"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets"
)

func TestGenCacheBound(t *testing.T) {
	c := newGenCache[int, string](100, func(_ int, v string) int { return len(v) })
	for i := range 1000 {
		c.add(i, "0123456789") // 10 each: a generation holds 5
	}
	if n, size := c.len(), c.size(); n > 10 || size != 10*n {
		t.Fatalf("%d entries of cost %d cached, want at most 10 (a cost of 100)", n, size)
	}
	if _, ok := c.get(999); !ok {
		t.Fatal("the newest entry is gone")
	}
	if _, ok := c.get(0); ok {
		t.Fatal("the oldest entry is still there")
	}
}

// An entry in use survives rotations; one not used does not.
func TestGenCacheKeepsWhatIsUsed(t *testing.T) {
	c := newGenCache[int, struct{}](10, nil) // 5 a generation
	c.add(-1, struct{}{})
	for i := range 100 {
		c.add(i, struct{}{})
		if _, ok := c.get(-1); !ok {
			t.Fatalf("the entry in use is gone after %d adds", i+1)
		}
	}
	c.add(-2, struct{}{})
	for i := 100; i < 110; i++ {
		c.add(i, struct{}{})
	}
	if _, ok := c.get(-2); ok {
		t.Fatal("an unused entry survived two generations")
	}
}

func TestGenCacheReplaceAndRemove(t *testing.T) {
	c := newGenCache[string, int](4, nil)
	c.add("a", 1)
	c.add("a", 2)
	if v, _ := c.get("a"); v != 2 || c.len() != 1 {
		t.Fatalf("got %d (%d entries), want 2 (1 entry)", v, c.len())
	}
	c.add("b", 3) // rotates: "a" moves to the previous generation
	c.add("c", 4)
	c.remove("a")
	if _, ok := c.get("a"); ok {
		t.Fatal("a removed entry is still cached")
	}
	if v, ok := c.get("b"); !ok || v != 3 {
		t.Fatal("b is gone")
	}
}

// rawStores keeps at most maxStores stores, the least recently used going first.
func TestRawStoresBound(t *testing.T) {
	made := 0
	layout := func(*aztables.Client) (tablets.Store, error) { made++; return nil, nil }
	svc, err := aztables.NewServiceClientWithNoCredential("http://127.0.0.1:1/x", nil)
	if err != nil {
		t.Fatal(err)
	}
	r := newRawStores(layout, svc, func(p uint64) string { return "t" + string(rune('a'+p%26)) })
	for p := range uint64(20) {
		_, _ = r.get(0) // in use throughout
		_, _ = r.get(p + 1)
	}
	if r.len() != maxStores {
		t.Fatalf("%d stores kept, want %d", r.len(), maxStores)
	}
	before := made
	_, _ = r.get(0)
	if made != before {
		t.Fatal("the store in use was evicted")
	}
	_, _ = r.get(1)
	if made != before+1 {
		t.Fatal("the least recently used store was kept")
	}
}

func TestCachedSeriesOption(t *testing.T) {
	if err := CheckOptions("abc", &Options{CachedSeries: -1}); !errors.Is(err, tablets.ErrInvalidOptions) {
		t.Fatalf("a negative CachedSeries: %v", err)
	}
	o, err := withDefaults("abc", nil)
	if err != nil || o.CachedSeries != DefaultCachedSeries || o.Now == nil {
		t.Fatalf("defaults: %+v, %v", o, err)
	}
}
