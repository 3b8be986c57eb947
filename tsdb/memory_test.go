package tsdb

import (
	"context"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/advanced"
	"github.com/seed71701133/tablets/internal/testkit/clock"
	"github.com/seed71701133/tablets/internal/testkit/tablefake"
	"github.com/seed71701133/tablets/tsdb/internal/catalog"
)

func heapAfterGC() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// A million distinct series pass through the write path (SeriesOfMany, then WriteMany), 50,000
// new ones a period over 20 periods, as a server with series churn sees them: the heap after
// them all stays within a few MiB of the heap after the first 100,000, because every cache is
// bounded.
func TestMemoryFlatUnderSeriesChurn(t *testing.T) {
	if testing.Short() {
		t.Skip("a million series through the write path: about a minute")
	}
	const (
		total     = 1_000_000
		perPeriod = 50_000
		batchSize = 1000
		cached    = 20_000
	)
	// aztables allocates 32 KiB an operation of a transaction: collect garbage less often
	// (the heap is measured after a forced collection, which this does not change).
	defer debug.SetGCPercent(debug.SetGCPercent(1000))
	ctx := context.Background()
	fake := tablefake.New()
	clock := clock.New(time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC))
	// The raw points go to a store that validates with advanced's rules and counts them: a
	// layout's own write (a transaction a series here) keeps nothing between calls, and a
	// million transactions through aztables cost minutes of CPU. Everything the DB itself
	// sends (the catalog, the index, the tables) goes to the fake account.
	var stored atomic.Int64
	layout := func(c *aztables.Client) (tablets.Store, error) {
		s, err := advanced.New(c, nil)
		return countingStore{s, &stored}, err
	}
	db := openFake(t, fake, &Options{RawPeriod: time.Hour, Tiers: []Tier{}, Now: clock.Now, CachedSeries: cached, Layout: layout})
	var at100k uint64
	sets := make([]Labels, batchSize)
	batch := make([]SeriesPoints, batchSize)
	for done := 0; done < total; done += batchSize {
		if done%perPeriod == 0 && done > 0 {
			clock.Add(time.Hour)
		}
		now := clock.Now()
		for i := range sets {
			n := strconv.Itoa(done + i)
			sets[i] = LabelsFromStrings(MetricName, "http_requests_total", "instance", "pod-"+n+".example.com:9100", "job", "api")
		}
		keys, err := db.SeriesOfMany(ctx, sets)
		if err != nil {
			t.Fatal(err)
		}
		for i, k := range keys {
			batch[i] = SeriesPoints{Series: k, Points: []tablets.Point{{Time: now.Add(-time.Duration(i) * time.Millisecond), Value: float64(i)}}}
		}
		if err := db.WriteMany(ctx, batch); err != nil {
			t.Fatal(err)
		}
		if done+batchSize == 100_000 {
			at100k = heapAfterGC()
		}
	}
	at1M := heapAfterGC()
	st := fake.Stats()
	t.Logf("heap after 100k series %.1f MiB, after 1M %.1f MiB; %d requests (%d transactions, %d entity reads)",
		float64(at100k)/(1<<20), float64(at1M)/(1<<20), st.Requests, st.Batches, st.EntityGets)
	if stored.Load() != total {
		t.Errorf("%d points stored, want %d", stored.Load(), total)
	}
	t.Logf("caches: %d label sets, %d stores, registrations of %d periods", db.catalog.LabelsCache().Len(), db.stores.Len(), len(db.index.Cached()))
	if at1M > at100k+8<<20 {
		t.Errorf("the heap grew from %d to %d bytes between 100k and 1M series", at100k, at1M)
	}
	if n := db.catalog.LabelsCache().Size(); n > 2*cached*catalog.EntryBytes+1000 {
		t.Errorf("the label cache holds %d bytes, over its bound", n)
	}
	for p, n := range db.index.Cached() {
		if n > 2*cached {
			t.Errorf("period %d: %d registrations cached, over twice CachedSeries", p, n)
		}
	}
}

// countingStore validates series with its layout's rules and counts the points written.
type countingStore struct {
	tablets.Store
	points *atomic.Int64
}

func (s countingStore) Write(ctx context.Context, series string, points ...tablets.Point) error {
	if err := s.Store.Write(ctx, series); err != nil {
		return err
	}
	s.points.Add(int64(len(points)))
	return nil
}
