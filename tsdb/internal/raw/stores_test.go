package raw

import (
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets"
)

// Stores keeps at most maxStores stores, the least recently used going first.
func TestRawStoresBound(t *testing.T) {
	made := 0
	layout := func(*aztables.Client) (tablets.Store, error) { made++; return nil, nil }
	svc, err := aztables.NewServiceClientWithNoCredential("http://127.0.0.1:1/x", nil)
	if err != nil {
		t.Fatal(err)
	}
	r := NewStores(layout, svc, func(p uint64) string { return "t" + string(rune('a'+p%26)) })
	for p := range uint64(20) {
		_, _ = r.Get(0) // in use throughout
		_, _ = r.Get(p + 1)
	}
	if r.Len() != maxStores {
		t.Fatalf("%d stores kept, want %d", r.Len(), maxStores)
	}
	before := made
	_, _ = r.Get(0)
	if made != before {
		t.Fatal("the store in use was evicted")
	}
	_, _ = r.Get(1)
	if made != before+1 {
		t.Fatal("the least recently used store was kept")
	}
}
