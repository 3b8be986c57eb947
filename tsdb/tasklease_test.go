package tsdb

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
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
		err = db.Tasks().Exclusive(ctx, task.name, func(context.Context) error { ran = true; return nil })
		if !errors.Is(err, ErrTaskBusy) || ran {
			t.Fatalf("%s while another holds the lease: %v, work run %v; want ErrTaskBusy, not run", task.name, err, ran)
		}
		if n := requests.n.Load() - before; n != 1 {
			t.Errorf("%s while another holds the lease sent %d requests, want 1 (the lease's read)", task.name, n)
		}
		other.Release(ctx)
		if err := db.Tasks().Exclusive(ctx, task.name, task.work); err != nil {
			t.Fatalf("%s once released: %v", task.name, err)
		}
		if _, err := db.catalog.Client.GetEntity(ctx, task.name, lease.RowKey, nil); err == nil {
			t.Errorf("%s left its lease", task.name)
		}
	}
	before := requests.n.Load()
	if err := db.Tasks().Exclusive(ctx, "fold", func(context.Context) error { return nil }); !errors.Is(err, tablets.ErrInvalidOptions) || requests.n.Load() != before {
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
