package tsdb

import (
	"errors"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets"
)

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
