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
)

// heldBatches holds every transaction (a Fold's writes into the raw table) once active,
// until released.
type heldBatches struct {
	next    policy.Transporter
	active  atomic.Bool
	once    sync.Once
	held    chan struct{} // closed at the first transaction held
	release chan struct{}
}

func (h *heldBatches) Do(req *http.Request) (*http.Response, error) {
	if h.active.Load() && req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/$batch") {
		h.once.Do(func() { close(h.held) })
		select {
		case <-h.release:
		case <-req.Context().Done():
			return nil, req.Context().Err()
		}
	}
	return h.next.Do(req)
}

// A Fold's round holds the points it collected until it has written them, a transaction a
// series: under a budget of their own (FoldReadBudget), a query's staging read goes on
// while the round's writes wait; sharing the queries' budget, the read waits for the
// round to end.
func TestFoldRoundsHoldTheirOwnBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	for _, own := range []bool{true, false} {
		t.Run(fmt.Sprintf("own budget %v", own), func(t *testing.T) {
			ctx := context.Background()
			now := time.Date(2025, 3, 10, 9, 0, 0, 0, time.UTC)
			name := fmt.Sprintf("fbud%d", rand.Uint32())
			checker := azurite.NewChecker(nil, func(v string) { t.Errorf("Azure limit violated: %s", v) })
			hold := &heldBatches{next: checker, held: make(chan struct{}), release: make(chan struct{})}
			svc, err := azurite.Shared(t).NewServiceClient(&aztables.ClientOptions{ClientOptions: policy.ClientOptions{Transport: hold}})
			if err != nil {
				t.Fatal(err)
			}
			queries, err := NewReadBudget(64 << 10) // less than the round's points
			if err != nil {
				t.Fatal(err)
			}
			folds := queries
			if own {
				if folds, err = NewReadBudget(64 << 10); err != nil {
					t.Fatal(err)
				}
			}
			opts := &Options{Tiers: []Tier{}, StagingPartitions: 1, Now: func() time.Time { return now },
				StagingReadBudget: queries, FoldReadBudget: folds,
				Layout: func(c *aztables.Client) (tablets.Store, error) { return chunked.New(c, nil) }}
			db, err := Open(ctx, svc, name, opts)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				for _, tb := range []string{name + "m", name + "w", db.names.RawTable(db.names.PeriodOf(now)), db.names.IndexTable(db.names.PeriodOf(now))} {
					_, _ = svc.DeleteTable(context.Background(), tb, nil)
				}
			})
			start := now
			names, want := stageWrites(t, db, 300, 12, &now)
			now = now.Add(20 * time.Minute) // the writes' buckets old enough to fold
			hold.active.Store(true)
			released := false
			releaseOnce := func() {
				if !released {
					released = true
					close(hold.release)
				}
			}
			defer releaseOnce()
			end := now

			folded := make(chan error, 1)
			go func() { _, err := db.Fold(ctx); folded <- err }()
			select {
			case <-hold.held: // the round collected its points and writes them
			case err := <-folded:
				t.Fatalf("the Fold ended before writing: %v", err)
			}
			if used, _ := folds.InUse(); used < 300*12*16 {
				t.Fatalf("the fold round holds %d bytes of its budget while it writes", used)
			}
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			reader, err := Open(ctx, svc, name, opts)
			if err != nil {
				t.Fatal(err)
			}
			got, err := reader.staging.Read(rctx, names, start, end)
			if !own {
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("sharing the round's budget, the read did not wait for it: %v", err)
				}
				releaseOnce()
				if err := <-folded; err != nil {
					t.Fatal(err)
				}
				return
			}
			if err != nil {
				t.Fatalf("the query's read while the round writes: %v", err)
			}
			for _, n := range names {
				if !equalPoints(got[n], want[n]) {
					t.Fatalf("series %s: read %v, wrote %v", n, got[n], want[n])
				}
			}
			releaseOnce()
			if err := <-folded; err != nil {
				t.Fatal(err)
			}
		})
	}
}
