package tsdb

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/chunked"
	"github.com/seed71701133/tablets/internal/pager"
	"github.com/seed71701133/tablets/internal/testkit/azurite"
	"github.com/seed71701133/tablets/tsdb/internal/staging"
)

func TestReadBudgetChecked(t *testing.T) {
	for _, n := range []int64{0, -1} {
		if _, err := NewReadBudget(n); !errors.Is(err, tablets.ErrInvalidOptions) {
			t.Errorf("NewReadBudget(%d): %v, want ErrInvalidOptions", n, err)
		}
	}
	b, err := NewReadBudget(10)
	if err != nil {
		t.Fatal(err)
	}
	done, err := b.take(context.Background(), nil, 25) // more than the budget: all of it
	if err != nil {
		t.Fatal(err)
	}
	if used, _ := b.InUse(); used != 10 {
		t.Fatalf("in use %d, want the whole budget 10", used)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := b.take(ctx, nil, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("take on a full budget, cancelled: %v", err)
	}
	done()
	if used, waiting := b.InUse(); used != 0 || waiting != 0 {
		t.Fatalf("after the release: %d in use, %d waiting", used, waiting)
	}
	var none *ReadBudget
	if done, err := none.take(ctx, nil, 1<<40); err != nil {
		t.Fatal(err)
	} else {
		done()
	}
	read := none.beginRead()
	if err := read.hold(ctx, 1<<40); err != nil {
		t.Fatal(err)
	}
	read.end()
}

// Reads that collect points hold them until they end, and the oldest never waits: reads
// that each hold some and want more cannot wait for each other forever. The others, and
// pages, wait in arrival order for room; the oldest read's waiters go first.
func TestReadBudgetOldestReadGoesOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		b, err := NewReadBudget(100)
		if err != nil {
			t.Fatal(err)
		}
		oldest, other := b.beginRead(), b.beginRead()
		if err := other.hold(ctx, 60); err != nil {
			t.Fatal(err)
		}
		if err := oldest.hold(ctx, 60); err != nil { // past the size: it never waits
			t.Fatal(err)
		}
		if used, waiting := b.InUse(); used != 120 || waiting != 0 {
			t.Fatalf("in use %d, %d waiting; want 120 and 0", used, waiting)
		}
		var order []string
		var mu sync.Mutex
		note := func(s string) { mu.Lock(); order = append(order, s); mu.Unlock() }
		go func() {
			if err := other.hold(ctx, 10); err != nil {
				t.Error(err)
			}
			note("other")
		}()
		synctest.Wait()
		go func() {
			done, err := b.take(ctx, nil, 40)
			if err != nil {
				t.Error(err)
				return
			}
			note("page")
			time.Sleep(time.Second)
			done()
		}()
		synctest.Wait()
		if used, waiting := b.InUse(); len(order) != 0 || used != 120 || waiting != 2 {
			t.Fatalf("before the oldest ends: %v went on, %d in use, %d waiting", order, used, waiting)
		}
		// The oldest's page goes past the two waiting.
		done, err := b.take(ctx, oldest, 8)
		if err != nil {
			t.Fatal(err)
		}
		done()
		oldest.end()
		synctest.Wait()
		// other is the oldest now: it goes on; the page (40) waits for room (70 of 100 in use).
		if used, waiting := b.InUse(); !slices.Equal(order, []string{"other"}) || used != 70 || waiting != 1 {
			t.Fatalf("after the oldest ended: %v went on, %d in use, %d waiting", order, used, waiting)
		}
		other.end()
		synctest.Wait()
		time.Sleep(2 * time.Second)
		if used, waiting := b.InUse(); !slices.Equal(order, []string{"other", "page"}) || used != 0 || waiting != 0 {
			t.Fatalf("at the end: %v went on, %d in use, %d waiting", order, used, waiting)
		}
	})
}

// Many reads sharing a small budget, each collecting in steps far more than the budget,
// all end; the budget never held more than its size and the oldest read's points; a read
// whose context ends while it waits gives back what it held.
func TestReadBudgetReadsAllEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, err := NewReadBudget(1000)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		most := int64(0)
		for i := range 12 {
			wg.Go(func() {
				read := b.beginRead()
				defer read.end()
				for range 20 {
					done, err := b.take(context.Background(), read, 300) // a page
					if err != nil {
						t.Error(err)
						return
					}
					time.Sleep(time.Duration(1+i%3) * time.Millisecond)
					done()
					if err := read.hold(context.Background(), 100); err != nil {
						t.Error(err)
						return
					}
					used, _ := b.InUse()
					mu.Lock()
					most = max(most, used)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		// At most the size, what the oldest read holds (2,000), and its page in flight.
		if used, waiting := b.InUse(); used != 0 || waiting != 0 || most > 1000+2000+300 {
			t.Fatalf("after all reads: %d in use, %d waiting; at most %d in use", used, waiting, most)
		}

		read, blocker := b.beginRead(), b.beginRead()
		if err := blocker.hold(context.Background(), 50); err != nil {
			t.Fatal(err)
		}
		if err := read.hold(context.Background(), 2000); err != nil { // the oldest
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := blocker.hold(ctx, 50); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a hold past its context: %v", err)
		}
		blocker.end()
		read.end()
		if used, waiting := b.InUse(); used != 0 || waiting != 0 {
			t.Fatalf("after a cancelled hold: %d in use, %d waiting", used, waiting)
		}
	})
}

// stagingInFlight counts the staging table's queries in flight, holding each a moment so
// that concurrent readers overlap.
type stagingInFlight struct {
	next  policy.Transporter
	table string

	mu        sync.Mutex
	now, most int
}

func (s *stagingInFlight) Do(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet || !strings.HasSuffix(req.URL.Path, "/"+s.table+"()") {
		return s.next.Do(req)
	}
	s.mu.Lock()
	s.now++
	s.most = max(s.most, s.now)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.now--
		s.mu.Unlock()
	}()
	time.Sleep(30 * time.Millisecond)
	return s.next.Do(req)
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
	rec := &stagingInFlight{next: checker, table: name + "w"}
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
		db.staging.page = pager.SubQuery{Top: 2, PageBytes: pageBytes}
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
				got, err := reader.staging.read(ctx, names, start, now)
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
	if most := budget.mostUsed(); most < collected || most > 3*pageBytes+collected {
		t.Errorf("the budget held at most %d bytes; want from one read's points (%d) to them, the budget and a page (%d)",
			most, collected, 3*pageBytes+collected)
	}
	if used, waiting := budget.InUse(); used != 0 || waiting != 0 {
		t.Errorf("after the reads the budget has %d bytes in use and %d waiting", used, waiting)
	}
}

// give hands back part of what a read holds (a decoded page it yielded): the waiters that
// now fit go on, and end gives back only the rest.
func TestReadBudgetGive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		b, err := NewReadBudget(100)
		if err != nil {
			t.Fatal(err)
		}
		read := b.beginRead()
		if err := read.hold(ctx, 80); err != nil {
			t.Fatal(err)
		}
		granted := false
		go func() {
			done, err := b.take(ctx, nil, 40)
			if err != nil {
				t.Error(err)
				return
			}
			granted = true
			done()
		}()
		synctest.Wait()
		if granted {
			t.Fatal("a page of 40 went on with 80 of 100 in use")
		}
		read.give(50)
		synctest.Wait()
		if used, waiting := b.InUse(); !granted || used != 30 || waiting != 0 {
			t.Fatalf("after giving back 50: page granted %v, %d in use, %d waiting; want true, 30, 0", granted, used, waiting)
		}
		read.give(1000) // at most what it holds
		if used, _ := b.InUse(); used != 0 {
			t.Fatalf("after giving back more than it held: %d in use", used)
		}
		read.end()
		if used, _ := b.InUse(); used != 0 {
			t.Fatalf("after the read ended: %d in use", used)
		}
	})
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
	db.staging.budget = budget
	db.staging.page = pager.SubQuery{Top: 2, PageBytes: 32 << 10}
	start := now
	stageWrites(t, db, 200, 6, &now)
	q := staging.Query(nil, start, now, staging.Floats)
	entities := 0
	for se, err := range db.staging.entities(ctx, q, nil) {
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
	for range db.staging.entities(ctx, q, nil) {
		break
	}
	if used, _ := budget.InUse(); used != 0 {
		t.Errorf("after a read stopped at its first entity: %d bytes in use", used)
	}
}
