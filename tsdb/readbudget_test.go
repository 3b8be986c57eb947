package tsdb

import (
	"context"
	"errors"
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
	"github.com/seed71701133/tablets/internal/azurite"
	"github.com/seed71701133/tablets/internal/pager"
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
	done, err := b.take(context.Background(), 25) // more than the budget: all of it
	if err != nil {
		t.Fatal(err)
	}
	if used, _ := b.InUse(); used != 10 {
		t.Fatalf("in use %d, want the whole budget 10", used)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := b.take(ctx, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("take on a full budget, cancelled: %v", err)
	}
	done()
	if used, waiting := b.InUse(); used != 0 || waiting != 0 {
		t.Fatalf("after the release: %d in use, %d waiting", used, waiting)
	}
	var none *ReadBudget
	if done, err := none.take(ctx, 1<<40); err != nil {
		t.Fatal(err)
	} else {
		done()
	}
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

// Readers of the staging table that share a budget of two pages have at most two pages in
// flight together, and read every point; without the budget the same readers have more.
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
		db.stagePage = pager.SubQuery{Top: 2, PageBytes: pageBytes}
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
				got, err := reader.readStaged(ctx, names, start, now)
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
	if most := readAll(budget); most > 2 {
		t.Errorf("with a budget of two pages, %d staging pages were in flight at once", most)
	}
	if used, waiting := budget.InUse(); used != 0 || waiting != 0 {
		t.Errorf("after the reads the budget has %d bytes in use and %d waiting", used, waiting)
	}
}
