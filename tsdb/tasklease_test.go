package tsdb

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/chunked"
	"github.com/seed71701133/tablets/internal/testkit/azurite"
	"github.com/seed71701133/tablets/internal/testkit/clock"
	"github.com/seed71701133/tablets/tsdb/internal/lease"
)

// counted counts the requests it sends on.
type counted struct {
	next policy.Transporter
	n    atomic.Int64
}

func (c *counted) Do(req *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.next.Do(req)
}

// The scheduler's compaction, rollup and rollup of dirty slices run in one process at a
// time (Exclusive): while another holds the task's lease, Exclusive returns ErrTaskBusy
// having sent one request (the lease's read) and not run the work; once it is released, the
// work runs (a series' chunks of three writes merged into one; its minute windows rolled
// up; its dirty slice rolled up) and the lease is released. A task Exclusive does not know
// is an error before any request.
func TestExclusiveTasks(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	ctx := context.Background()
	clk := clock.New(time.Date(2025, 3, 10, 9, 0, 0, 0, time.UTC))
	checker := azurite.NewChecker(nil, func(v string) { t.Errorf("Azure limit violated: %s", v) })
	requests := &counted{next: checker}
	svc, err := azurite.Shared(t).NewServiceClient(&aztables.ClientOptions{ClientOptions: policy.ClientOptions{Transport: requests}})
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("tlease%d", rand.Uint32())
	db, err := Open(ctx, svc, name, &Options{Now: clk.Now, DirectWrites: true, Layout: func(c *aztables.Client) (tablets.Store, error) { return chunked.New(c, nil) }})
	if err != nil {
		t.Fatal(err)
	}
	start := clk.Now().Add(-2 * time.Hour)
	t.Cleanup(func() {
		p := db.names.PeriodOf(start)
		for _, table := range []string{name + "m", name + "w", db.names.RawTable(p), db.names.IndexTable(p), db.names.HistTable(p)} {
			_, _ = svc.DeleteTable(context.Background(), table, nil)
		}
		for _, tier := range db.opts.Tiers {
			_, _ = svc.DeleteTable(context.Background(), db.names.TierTable(tier.Step, db.names.PeriodOf(start)), nil)
		}
	})
	// Eight chunks of the series in its day's partition: one still being written (it holds
	// now) is compacted once it holds 4 to 7 (chunked.CompactOptions).
	for i := range 8 {
		if err := db.Write(ctx, "s", tablets.Point{Time: start.Add(time.Duration(i) * time.Minute), Value: float64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	raw := svc.NewClient(db.names.RawTable(db.names.PeriodOf(start)))
	chunks := func() int {
		n := 0
		for p := raw.NewListEntitiesPager(nil); p.More(); {
			page, err := p.NextPage(ctx)
			if err != nil {
				t.Fatal(err)
			}
			n += len(page.Entities)
		}
		return n
	}
	if n := chunks(); n != 8 {
		t.Fatalf("%d chunks written, want 8", n)
	}

	for _, task := range []struct {
		name string
		work func(context.Context) error
	}{
		{TaskCompact, func(ctx context.Context) error { return db.Compact(ctx, start, clk.Now()) }},
		{TaskRollup, func(ctx context.Context) error {
			return db.Rollup(ctx, start.Truncate(time.Hour), clk.Now().Truncate(time.Hour))
		}},
		// The writes, older than the seal delay, marked their slice dirty; the rollup
		// above covered only part of it.
		{TaskFlagged, func(ctx context.Context) error {
			n, err := db.RollupFlagged(ctx)
			if err == nil && n != 1 {
				err = fmt.Errorf("%d dirty markers cleared, want 1", n)
			}
			return err
		}},
	} {
		other, err := lease.Take(ctx, db.catalog.Client, taskLeases[task.name], "another process", clk.Now)
		if err != nil {
			t.Fatal(err)
		}
		before, ran := requests.n.Load(), false
		err = db.Tasks().Exclusive(ctx, task.name, func(context.Context) error { ran = true; return nil }, nil)
		if !errors.Is(err, ErrTaskBusy) || ran {
			t.Fatalf("%s while another holds the lease: %v, work run %v; want ErrTaskBusy, not run", task.name, err, ran)
		}
		if n := requests.n.Load() - before; n != 1 {
			t.Errorf("%s while another holds the lease sent %d requests, want 1 (the lease's read)", task.name, n)
		}
		other.Release(ctx)
		if err := db.Tasks().Exclusive(ctx, task.name, task.work, nil); err != nil {
			t.Fatalf("%s once released: %v", task.name, err)
		}
		if _, err := db.catalog.Client.GetEntity(ctx, task.name, lease.RowKey, nil); err == nil {
			t.Errorf("%s left its lease", task.name)
		}
	}
	before := requests.n.Load()
	if err := db.Tasks().Exclusive(ctx, "fold", func(context.Context) error { return nil }, nil); !errors.Is(err, tablets.ErrInvalidOptions) || requests.n.Load() != before {
		t.Errorf("Exclusive of the fold: %v, %d requests; want ErrInvalidOptions, none", err, requests.n.Load()-before)
	}
	if n := chunks(); n != 1 {
		t.Errorf("%d chunks after the compaction, want 1", n)
	}
	// The rollup wrote the minute tier's block of the series (the hour's window has not
	// sealed: an hour after its end).
	minute := svc.NewClient(db.names.TierTable(db.opts.Tiers[0].Step, db.names.PeriodOf(start)))
	if page, err := minute.NewListEntitiesPager(nil).NextPage(ctx); err != nil || len(page.Entities) != 1 {
		t.Errorf("the minute tier after the rollup: %d blocks, %v; want 1", len(page.Entities), err)
	}
}

// The slots of the background lease are tasks of their own, each a lease of a minute in the
// catalog's partition of its name; other names are not Exclusive's.
func TestBackgroundTask(t *testing.T) {
	for slot, want := range []string{"background", "background1", "background2"} {
		task := BackgroundTask(slot)
		kind, ok := backgroundLease(task)
		if task != want || !ok || kind.PartitionKey != want || kind.Term != time.Minute {
			t.Errorf("slot %d: task %q (%v), lease %+v; want %q of a minute", slot, task, ok, kind, want)
		}
	}
	for _, task := range []string{"background01", "backgroundx", "background-1", "backgroun", "fold"} {
		if _, ok := backgroundLease(task); ok {
			t.Errorf("%q taken for a slot of the background lease", task)
		}
	}
}

// paths records the paths of the requests it sends on.
type paths struct {
	next policy.Transporter
	mu   sync.Mutex
	seen []string
}

func (p *paths) Do(req *http.Request) (*http.Response, error) {
	p.mu.Lock()
	p.seen = append(p.seen, req.URL.Path)
	p.mu.Unlock()
	return p.next.Do(req)
}

// since returns how many requests since mark (an earlier len) went to table, and the
// new mark.
func (p *paths) since(mark int, table string) (n, now int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.seen[mark:] {
		if strings.HasPrefix(strings.TrimPrefix(s, "/"+azurite.AccountName), "/"+table) {
			n++
		}
	}
	return n, len(p.seen)
}

// A compaction's lease kept after its run (ExclusiveOptions.KeepFor) makes the next run
// its process's again: another process's finds it busy, with one request, until KeepFor
// has passed since the keeper's last run; the keeper's next compaction of the table it
// left with nothing to merge reads the change log, not the table, where the other
// process, once it takes the task over, scans the table (it cannot know). A second run of
// the task in the keeper at once is busy with no request; a negative KeepFor is an error
// before any request. A keeper's ReleaseKept (its stop) hands the task over at once.
func TestExclusiveKeepFor(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	ctx := context.Background()
	clk := clock.New(time.Date(2025, 3, 10, 9, 0, 0, 0, time.UTC))
	checker := azurite.NewChecker(nil, func(v string) { t.Errorf("Azure limit violated: %s", v) })
	sent := &paths{next: checker}
	svc, err := azurite.Shared(t).NewServiceClient(&aztables.ClientOptions{ClientOptions: policy.ClientOptions{Transport: sent}})
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("tkeep%d", rand.Uint32())
	open := func() *DB {
		db, err := Open(ctx, svc, name, &Options{Now: clk.Now, DirectWrites: true, Layout: func(c *aztables.Client) (tablets.Store, error) { return chunked.New(c, nil) }})
		if err != nil {
			t.Fatal(err)
		}
		return db
	}
	keeper, other := open(), open() // two processes
	start := clk.Now().Add(-2 * time.Hour)
	rawTable := keeper.names.RawTable(keeper.names.PeriodOf(start))
	t.Cleanup(func() {
		p := keeper.names.PeriodOf(start)
		for _, table := range []string{name + "m", name + "w", rawTable, keeper.names.IndexTable(p), keeper.names.HistTable(p)} {
			_, _ = svc.DeleteTable(context.Background(), table, nil)
		}
	})
	for i := range 8 {
		if err := keeper.Write(ctx, "s", tablets.Point{Time: start.Add(time.Duration(i) * time.Minute), Value: float64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	keep := &ExclusiveOptions{KeepFor: 3 * time.Minute}
	// compact runs db's compaction under the kept lease: whether it ran, and the requests
	// it sent in all and to the raw table.
	compact := func(db *DB) (ran bool, requests, scans int, err error) {
		_, mark := sent.since(0, "")
		err = db.Tasks().Exclusive(ctx, TaskCompact, func(ctx context.Context) error {
			ran = true
			return db.Compact(ctx, start, clk.Now())
		}, keep)
		scans, _ = sent.since(mark, rawTable)
		_, end := sent.since(0, "")
		return ran, end - mark, scans, err
	}

	if ran, _, scans, err := compact(keeper); err != nil || !ran || scans == 0 {
		t.Fatalf("the keeper's first compaction: ran %v, %d raw requests, %v; want it run, the table scanned", ran, scans, err)
	}
	clk.Add(2 * time.Minute) // the next tick
	if ran, requests, _, err := compact(other); !errors.Is(err, ErrTaskBusy) || ran || requests != 1 {
		t.Fatalf("another process's compaction within KeepFor: ran %v, %d requests, %v; want ErrTaskBusy, not run, 1 request", ran, requests, err)
	}
	if ran, _, scans, err := compact(keeper); err != nil || !ran || scans != 0 {
		t.Fatalf("the keeper's next compaction: ran %v, %d raw requests, %v; want it run, no scan of the table it compacted", ran, scans, err)
	}

	// One run of the task at a time in the keeper: a second at once is busy, no request.
	holding, release, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		_ = keeper.Tasks().Exclusive(ctx, TaskCompact, func(context.Context) error {
			close(holding)
			<-release
			return nil
		}, keep)
	}()
	<-holding
	_, mark := sent.since(0, "")
	err = keeper.Tasks().Exclusive(ctx, TaskCompact, func(context.Context) error { return nil }, keep)
	if _, end := sent.since(0, ""); !errors.Is(err, ErrTaskBusy) || end != mark {
		t.Errorf("a second run in the keeper at once: %v, %d requests; want ErrTaskBusy, none", err, end-mark)
	}
	close(release)
	<-done
	_, mark = sent.since(0, "")
	err = keeper.Tasks().Exclusive(ctx, TaskCompact, func(context.Context) error { return nil }, &ExclusiveOptions{KeepFor: -time.Second})
	if _, end := sent.since(0, ""); !errors.Is(err, tablets.ErrInvalidOptions) || end != mark {
		t.Errorf("a negative KeepFor: %v, %d requests; want ErrInvalidOptions, none", err, end-mark)
	}

	// The keeper stopped: KeepFor after its last run, the other takes the task over, and
	// scans the table, which it never compacted.
	clk.Add(keep.KeepFor + time.Second)
	if ran, _, scans, err := compact(other); err != nil || !ran || scans == 0 {
		t.Fatalf("the other's compaction once the keeping ended: ran %v, %d raw requests, %v; want it run, the table scanned", ran, scans, err)
	}

	// The other, which keeps it now, stops: ReleaseKept ends its lease (a read and a
	// delete), and the keeper takes the task at its next tick, not KeepFor later; a second
	// ReleaseKept sends nothing.
	for i, want := range []int{2, 0} {
		_, mark := sent.since(0, "")
		err := other.Tasks().ReleaseKept(ctx)
		if _, end := sent.since(0, ""); err != nil || end-mark != want {
			t.Fatalf("ReleaseKept %d: %v, %d requests; want none, %d requests", i+1, err, end-mark, want)
		}
	}
	clk.Add(2 * time.Minute)
	if ran, _, _, err := compact(keeper); err != nil || !ran {
		t.Fatalf("the keeper's compaction once the other released: ran %v, %v; want it run", ran, err)
	}
}
