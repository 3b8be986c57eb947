package tsdb

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/chunked"
	"github.com/seed71701133/tablets/internal/pager"
	"github.com/seed71701133/tablets/internal/testkit/azurite"
	"github.com/seed71701133/tablets/tsdb/internal/staging"
)

// heldRequests holds each request match selects for hold before sending it on, so that
// concurrent senders overlap, and counts the most in flight at once.
type heldRequests struct {
	next  policy.Transporter
	match func(*http.Request) bool
	hold  time.Duration

	mu        sync.Mutex
	now, most int
}

func (h *heldRequests) Do(req *http.Request) (*http.Response, error) {
	if !h.match(req) {
		return h.next.Do(req)
	}
	h.mu.Lock()
	h.now++
	h.most = max(h.most, h.now)
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		h.now--
		h.mu.Unlock()
	}()
	time.Sleep(h.hold)
	return h.next.Do(req)
}

// Readers of the staging table that share a budget of two pages have at most three pages in
// flight together (two, and one of the oldest read, which goes on past the budget), and
// read every point; without the budget the same readers have more. What they collect is
// held in the budget: it held at most its size, one read's points and a page.
func TestStagingReadBudgetBoundsPagesInFlight(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	ctx := context.Background()
	now := time.Date(2025, 3, 10, 9, 0, 0, 0, time.UTC)
	name := fmt.Sprintf("stbud%d", rand.Uint32())
	checker := azurite.NewChecker(nil, func(v string) { t.Errorf("Azure limit violated: %s", v) })
	// The staging table's queries.
	rec := &heldRequests{next: checker, hold: 30 * time.Millisecond, match: func(req *http.Request) bool {
		return req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, "/"+name+"w()")
	}}
	svc, err := azurite.Shared(t).NewServiceClient(&aztables.ClientOptions{ClientOptions: policy.ClientOptions{Transport: rec}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = svc.DeleteTable(context.Background(), name+"w", nil) })
	const pageBytes = 32 << 10
	open := func(budget *ReadBudget) *DB {
		db, err := Open(ctx, svc, name, &Options{Tiers: []Tier{}, StagingPartitions: 1, Now: func() time.Time { return now },
			StagingReadBudget: budget, Layout: func(c *aztables.Client) (tablets.Store, error) { return chunked.New(c, nil) }})
		if err != nil {
			t.Fatal(err)
		}
		db.staging.Page = pager.SubQuery{Top: 2, PageBytes: pageBytes}
		return db
	}
	start := now
	names, want := stageWrites(t, open(nil), 200, 12, &now)

	// readAll runs 6 readers of every series at once, on DBs of one budget, and checks
	// what each read; it returns the most staging pages that were in flight together.
	readAll := func(budget *ReadBudget) int {
		rec.mu.Lock()
		rec.most = 0
		rec.mu.Unlock()
		var wg sync.WaitGroup
		for range 6 {
			reader := open(budget)
			wg.Go(func() {
				got, err := reader.staging.Read(ctx, names, start, now)
				if err != nil {
					t.Error(err)
					return
				}
				for _, n := range names {
					if !equalPoints(got[n], want[n]) {
						t.Errorf("series %s: read %v, wrote %v", n, got[n], want[n])
						return
					}
				}
			})
		}
		wg.Wait()
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return rec.most
	}
	if most := readAll(nil); most <= 2 {
		t.Fatalf("without a budget, %d staging pages in flight at most: the readers did not overlap, so the test shows nothing", most)
	}
	budget, err := NewReadBudget(2 * pageBytes)
	if err != nil {
		t.Fatal(err)
	}
	if most := readAll(budget); most > 3 {
		t.Errorf("with a budget of two pages, %d staging pages were in flight at once", most)
	}
	collected := int64(0) // by one read
	for _, n := range names {
		collected += int64(len(want[n])) * staging.PointBytes
	}
	if most := staging.MostUsed(budget); most < collected || most > 3*pageBytes+collected {
		t.Errorf("the budget held at most %d bytes; want from one read's points (%d) to them, the budget and a page (%d)",
			most, collected, 3*pageBytes+collected)
	}
	if used, waiting := budget.InUse(); used != 0 || waiting != 0 {
		t.Errorf("after the reads the budget has %d bytes in use and %d waiting", used, waiting)
	}
}

// A page's decoded series (16 bytes a point, more than the compressed JSON) are held in
// the budget until its last entity was yielded, and given back after the last page, or
// when the consumer stops early.
func TestStagingReadBudgetHoldsDecodedPages(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	ctx := context.Background()
	now := time.Date(2025, 3, 10, 9, 0, 0, 0, time.UTC)
	db, _, _ := stagingDB(t, "stdec", &now)
	budget, err := NewReadBudget(64 << 20)
	if err != nil {
		t.Fatal(err)
	}
	db.staging.Budget = budget
	db.staging.Page = pager.SubQuery{Top: 2, PageBytes: 32 << 10}
	start := now
	stageWrites(t, db, 200, 6, &now)
	q := staging.Query(nil, start, now, staging.Floats)
	entities := 0
	for se, err := range db.staging.Entities(ctx, q, nil) {
		if err != nil {
			t.Fatal(err)
		}
		used, _ := budget.InUse()
		if d := se.DecodedBytes(); d < 200*16 || used < d {
			t.Fatalf("entity %d: decoded %d bytes (200 series of a point at least %d), the budget holds %d", entities, d, 200*16, used)
		}
		entities++
	}
	if entities < 6 {
		t.Fatalf("read %d staging entities, want at least 6 (a write each)", entities)
	}
	if used, waiting := budget.InUse(); used != 0 || waiting != 0 {
		t.Errorf("after the read: %d bytes in use, %d waiting", used, waiting)
	}
	for range db.staging.Entities(ctx, q, nil) {
		break
	}
	if used, _ := budget.InUse(); used != 0 {
		t.Errorf("after a read stopped at its first entity: %d bytes in use", used)
	}
}

// A read through the staging cache holds the columns it fetched and decoded in the budget
// until it ends (the cache may keep them or not, the read has them): cold queries of one
// staging table at once each decode all of it, and without the hold their copies were
// bounded by nothing (the soak: 80 queries, 2.2 GB).
func TestStagingReadBudgetHoldsCachedFetches(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	ctx := context.Background()
	now := time.Date(2025, 3, 10, 9, 0, 0, 0, time.UTC)
	writer, svc, _ := stagingDB(t, "stcfb", &now)
	start := now
	names, want := stageWrites(t, writer, 200, 12, &now)
	budget, err := NewReadBudget(64 << 20)
	if err != nil {
		t.Fatal(err)
	}
	db, err := Open(ctx, svc, writer.Name(), &Options{Tiers: []Tier{}, Now: func() time.Time { return now }, StagingReadBudget: budget,
		StagingCache: NewStagingCache(64 << 20), Layout: func(c *aztables.Client) (tablets.Store, error) { return chunked.New(c, nil) }})
	if err != nil {
		t.Fatal(err)
	}
	points := 0
	for _, n := range names {
		points += len(want[n])
	}
	collected := int64(points) * staging.PointBytes
	for i, what := range []string{"the first read (the query of every entity)", "a read after the cache was dropped (listed, then fetched)"} {
		if i == 1 { // another reader, with a cache of its own
			db, err = Open(ctx, svc, writer.Name(), &Options{Tiers: []Tier{}, Now: func() time.Time { return now }, StagingReadBudget: budget,
				StagingCache: NewStagingCache(64 << 20), Layout: func(c *aztables.Client) (tablets.Store, error) { return chunked.New(c, nil) }})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := db.staging.Read(ctx, names[:1], start, now); err != nil { // warms the Table: later reads list first
				t.Fatal(err)
			}
		}
		db.staging.Page = pager.SubQuery{Top: 2, PageBytes: 32 << 10} // what a page takes is small beside the columns
		staging.ResetMostUsed(budget)
		got, err := db.staging.Read(ctx, names, start, now)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			if !equalPoints(got[n], want[n]) {
				t.Fatalf("%s: series %s: read %v, wrote %v", what, n, got[n], want[n])
			}
		}
		// The decoded columns take more than 16 bytes a point (times, values, a series
		// header and its key each): held with the collected points, the budget held more
		// than both.
		if most := staging.MostUsed(budget); most < collected+int64(points)*16 {
			t.Errorf("%s: the budget held at most %d bytes; the points collected take %d, and the columns decoded more than %d",
				what, most, collected, points*16)
		}
		if used, waiting := budget.InUse(); used != 0 || waiting != 0 {
			t.Errorf("%s: after the read the budget has %d bytes in use and %d waiting", what, used, waiting)
		}
	}
}
