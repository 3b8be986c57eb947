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
	"github.com/seed71701133/tablets/internal/testkit/azurite"
	"github.com/seed71701133/tablets/internal/testkit/clock"
	"github.com/seed71701133/tablets/tsdb/internal/staging"
)

// slowFolds advances a clock on every transaction to the raw table (a series written by a
// fold), counts the renewals of the fold lease, and calls onWrite (if set) before the n-th
// transaction.
type slowFolds struct {
	next  policy.Transporter
	clock *clock.Clock
	step  time.Duration

	mu       sync.Mutex
	writes   int
	renewals int
	onWrite  func(n int)
}

func (s *slowFolds) Do(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPut && strings.Contains(req.URL.Path, "PartitionKey='"+staging.FoldLeasePK+"'") {
		s.mu.Lock()
		s.renewals++
		s.mu.Unlock()
	}
	if req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "$batch") && s.step > 0 {
		s.mu.Lock()
		s.writes++
		n, on := s.writes, s.onWrite
		s.mu.Unlock()
		if on != nil {
			on(n)
		}
		s.clock.Add(s.step)
	}
	return s.next.Do(req)
}

// A fold whose writes take far longer than the lease's term renews it as it goes and folds
// everything: a round of a large staging table under load may take longer than a term
// (soak run 10: every fold of a backfilled hour lost its lease, again and again). A lease
// another process took meanwhile stops the fold before its next write, and the entities
// it did not delete are folded by the next Fold.
func TestFoldOutlastsItsLease(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	for _, taken := range []bool{false, true} {
		t.Run(fmt.Sprintf("taken=%v", taken), func(t *testing.T) {
			ctx := context.Background()
			clock := clock.New(time.Date(2025, 3, 10, 9, 0, 0, 0, time.UTC))
			checker := azurite.NewChecker(nil, func(v string) { t.Errorf("Azure limit violated: %s", v) })
			slow := &slowFolds{next: checker, clock: clock}
			svc, err := azurite.Shared(t).NewServiceClient(&aztables.ClientOptions{ClientOptions: policy.ClientOptions{Transport: slow}})
			if err != nil {
				t.Fatal(err)
			}
			name := fmt.Sprintf("flease%d", rand.Uint32())
			opts := &Options{Tiers: []Tier{}, Now: clock.Now,
				Layout: func(c *aztables.Client) (tablets.Store, error) { return chunked.New(c, nil) }}
			db, err := Open(ctx, svc, name, opts)
			if err != nil {
				t.Fatal(err)
			}
			start := clock.Now()
			t.Cleanup(func() {
				p := db.names.PeriodOf(start)
				for _, table := range []string{name + "m", name + "w", db.names.RawTable(p), db.names.IndexTable(p), db.names.HistTable(p)} {
					_, _ = svc.DeleteTable(context.Background(), table, nil)
				}
			})
			want := map[string][]tablets.Point{}
			for i := range 3 {
				var batch []SeriesPoints
				for s := range 600 {
					p := tablets.Point{Time: start.Add(time.Duration(i) * time.Minute), Value: float64(i*100 + s)}
					name := fmt.Sprintf("s%03d", s)
					batch = append(batch, SeriesPoints{Series: name, Points: []tablets.Point{p}})
					want[name] = append(want[name], p)
				}
				if err := db.WriteMany(ctx, batch); err != nil {
					t.Fatal(err)
				}
			}
			clock.Add(time.Hour)
			end := clock.Now()
			// 600 series written at 1.5 s each: 15 minutes, three terms of the lease. (The
			// writes are concurrent, 32 at once, and each advances the clock: the 48 s of a
			// wave stay within the minute between a renewal and the margin.)
			slow.mu.Lock()
			slow.step = 1500 * time.Millisecond
			if taken {
				slow.onWrite = func(n int) {
					if n == 300 { // another process takes the lease (as if it had ended)
						other := staging.FoldLeaseBody("other", clock.Now().Add(staging.FoldLeaseTerm))
						if _, err := db.catalog.Client.UpsertEntity(ctx, other, &aztables.UpsertEntityOptions{UpdateMode: aztables.UpdateModeReplace}); err != nil {
							t.Errorf("the other process's lease: %v", err)
						}
					}
				}
			}
			slow.mu.Unlock()
			rep, err := db.Fold(ctx)
			slow.mu.Lock()
			renewals, writes := slow.renewals, slow.writes
			slow.step, slow.onWrite = 0, nil
			slow.mu.Unlock()
			t.Logf("fold: %+v, %v; %d transactions, %d lease writes, %v passed", rep, err, writes, renewals, clock.Now().Sub(end))
			if taken {
				if !errors.Is(err, staging.ErrFoldLeaseLost) || strings.Count(err.Error(), staging.ErrFoldLeaseLost.Error()) != 1 {
					t.Fatalf("a fold whose lease another took: %+v, %v; want staging.ErrFoldLeaseLost, said once", rep, err)
				}
				// It learns at its next renewal (at most half a term, 100 writes, later), and
				// the writes already admitted end.
				if writes >= 500 {
					t.Errorf("%d transactions: the fold went on long after the lease was taken at the 300th", writes)
				}
				// The other process's lease ends; the next Fold folds what is left.
				clock.Add(staging.FoldLeaseTerm)
				if rep, err = db.Fold(ctx); err != nil {
					t.Fatal(err)
				}
			} else {
				if err != nil {
					t.Fatalf("a fold of 15 minutes: %+v, %v", rep, err)
				}
				if renewals < 4 {
					t.Errorf("the lease renewed %d times in 15 minutes of writes, want at least 4", renewals)
				}
			}
			if rep.Entities == 0 {
				t.Fatalf("the last fold folded nothing: %+v", rep)
			}
			staged, err := db.staging.Read(ctx, nil, tablets.MinTime, tablets.MaxTime)
			if err != nil {
				t.Fatal(err)
			}
			if len(staged) != 0 {
				t.Errorf("%d series still staged", len(staged))
			}
			for name, pts := range want {
				var got []tablets.Point
				for p, err := range db.floats.Points(ctx, name, start, end) {
					if err != nil {
						t.Fatal(err)
					}
					got = append(got, p)
				}
				if !equalPoints(got, pts) {
					t.Fatalf("%s: raw %v, want %v", name, got, pts)
				}
			}
		})
	}
}
