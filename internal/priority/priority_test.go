package priority

import (
	"sync"
	"testing"
	"time"
)

// Priorities are strictly increasing, across goroutines too, and follow the wall clock.
func TestNextIncreases(t *testing.T) {
	before := uint64(time.Now().UnixNano())
	const workers, each = 4, 10_000
	got := make([][]uint64, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for range each {
				got[w] = append(got[w], Next())
			}
		})
	}
	wg.Wait()
	seen := map[uint64]bool{}
	for _, ps := range got {
		for i, p := range ps {
			if p < before {
				t.Fatalf("priority %d before the clock %d", p, before)
			}
			if i > 0 && p <= ps[i-1] {
				t.Fatalf("priority %d after %d", p, ps[i-1])
			}
			if seen[p] {
				t.Fatalf("priority %d twice", p)
			}
			seen[p] = true
		}
	}
}
