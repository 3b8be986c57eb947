package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/maintain"
	"github.com/seed71701133/tablets/internal/maintain/schedule"
	"github.com/seed71701133/tablets/internal/reqlimit"
)

// jobCounter counts the jobs running, and the most that ran at once.
type jobCounter struct {
	mu            sync.Mutex
	running, most int
	ran           map[string]int
}

func (c *jobCounter) job(name string) func() {
	c.mu.Lock()
	c.running++
	c.most = max(c.most, c.running)
	c.ran[name]++
	c.mu.Unlock()
	time.Sleep(3 * time.Minute) // a job's requests
	return func() {
		c.mu.Lock()
		c.running--
		c.mu.Unlock()
	}
}

// The loops of three servers sharing a bound of 3 jobs run at most 3 jobs at once, and
// every loop still runs at each of its ticks (in its turn); without the bound, all 6 loops
// run their jobs together at each boundary.
func TestJobsBoundServersLoops(t *testing.T) {
	for _, tc := range []struct {
		bound, most int
	}{{3, 3}, {0, 6}} {
		synctest.Test(t, func(t *testing.T) {
			var jobs *Jobs
			if tc.bound > 0 {
				var err error
				if jobs, err = NewJobs(tc.bound); err != nil {
					t.Fatal(err)
				}
			}
			c := &jobCounter{ran: map[string]int{}}
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			for _, tenant := range []string{"a", "b", "c"} {
				s := &Server{opts: Options{Jobs: jobs}, log: slog.New(slog.DiscardHandler)}
				s.registerLoopMetrics()
				loops := []schedule.Task{
					{Name: "fold", Opts: maintain.Options{Every: 10 * time.Minute},
						Tick: tick(func(context.Context, time.Time) error { c.job(tenant + " fold")(); return nil })},
					{Name: "rollup", Opts: maintain.Options{Every: 10 * time.Minute, Slice: 10 * time.Minute, CatchUp: 10 * time.Minute},
						Ranges: func(context.Context, time.Time, time.Time) error { c.job(tenant + " rollup")(); return nil }},
				}
				wg.Go(func() { s.runLoops(ctx, loops) })
			}
			// Ticks every 10 minutes: 3 folds at once, then the rollups, 2 at once (a slot is
			// the folds'): the 6 jobs of a tick take 9 minutes, so every tick's job ran before
			// the next tick.
			time.Sleep(time.Hour - time.Second)
			synctest.Wait()
			c.mu.Lock()
			for _, name := range []string{"a fold", "a rollup", "b fold", "b rollup", "c fold", "c rollup"} {
				if c.ran[name] != 5 {
					t.Errorf("bound %d: %s ran %d times in the 5 ticks before the hour, want 5", tc.bound, name, c.ran[name])
				}
			}
			c.mu.Unlock()
			time.Sleep(2 * time.Second)
			synctest.Wait()
			if running, waiting := jobs.State(); tc.bound > 0 && (running != 3 || waiting != 3) {
				t.Errorf("at the hour's tick: %d jobs running, %d waiting; want 3 and 3", running, waiting)
			}
			cancel()
			wg.Wait()
			if c.most != tc.most {
				t.Errorf("bound %d: %d jobs ran at once, want %d", tc.bound, c.most, tc.most)
			}
		})
	}
}

// A job waiting for its turn whose context ends returns the context's error, and never runs.
func TestJobsWaitEndsWithContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		jobs, err := NewJobs(1)
		if err != nil {
			t.Fatal(err)
		}
		release := make(chan struct{})
		go jobs.do(context.Background(), func() error { <-release; return nil })
		synctest.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		ran := false
		err = jobs.do(ctx, func() error { ran = true; return nil })
		if !errors.Is(err, context.DeadlineExceeded) || ran {
			t.Fatalf("waited past its context: error %v, ran %v", err, ran)
		}
		if running, waiting := jobs.State(); running != 1 || waiting != 0 {
			t.Fatalf("%d running, %d waiting; want 1 and 0", running, waiting)
		}
		close(release)
		synctest.Wait()
		if err := jobs.do(context.Background(), func() error { return errors.New("job failed") }); err == nil || err.Error() != "job failed" {
			t.Fatalf("a job's error: %v", err)
		}
	})
	if _, err := NewJobs(0); !errors.Is(err, tablets.ErrInvalidOptions) {
		t.Fatalf("NewJobs(0): %v, want ErrInvalidOptions", err)
	}
}

// Every loop's task runs with a context marked as background work, so that its requests to
// the account take only the background share of them (reqlimit), and named with its task,
// which the account's metrics count them by; the context a server serves requests with is
// not.
func TestLoopsAreBackground(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		seen := map[string]bool{}
		record := func(name string, ctx context.Context) {
			mu.Lock()
			seen[name] = reqlimit.IsBackground(ctx) && reqlimit.TaskOf(ctx) == name
			mu.Unlock()
		}
		ctx, cancel := context.WithCancel(context.Background())
		s := &Server{log: slog.New(slog.DiscardHandler)}
		s.registerLoopMetrics()
		loops := []schedule.Task{
			{Name: "fold", Opts: maintain.Options{Every: time.Minute},
				Tick: tick(func(ctx context.Context, _ time.Time) error { record("fold", ctx); return nil })},
			{Name: "rollup", Opts: maintain.Options{Every: time.Minute, Slice: time.Minute, CatchUp: time.Minute},
				Ranges: func(ctx context.Context, _, _ time.Time) error { record("rollup", ctx); return nil }},
		}
		done := make(chan struct{})
		go func() { s.runLoops(ctx, loops); close(done) }()
		time.Sleep(2 * time.Minute)
		cancel()
		<-done
		if !seen["fold"] || !seen["rollup"] || len(seen) != 2 {
			t.Errorf("background marks of the loops' contexts: %v", seen)
		}
		if reqlimit.IsBackground(ctx) || reqlimit.TaskOf(ctx) != "" {
			t.Error("runLoops marked its caller's context")
		}
	})
}

// A fold goes ahead of the jobs waiting: behind rollups that keep the queue full, it starts
// when the job running ends.
func TestFoldsGoFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		jobs, err := NewJobs(1)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		var mu sync.Mutex
		var foldWaits []time.Duration
		for i := range 4 {
			s := &Server{opts: Options{Jobs: jobs}, log: slog.New(slog.DiscardHandler)}
			s.registerLoopMetrics()
			// Every tenant's rollup ticks every 10 minutes and takes 4: 16 minutes of jobs
			// every 10, so rollups always wait.
			loops := []schedule.Task{{Name: "rollup", Opts: maintain.Options{Every: 10 * time.Minute, Slice: 10 * time.Minute, CatchUp: 10 * time.Minute},
				Ranges: func(context.Context, time.Time, time.Time) error { time.Sleep(4 * time.Minute); return nil }}}
			if i == 0 {
				loops = append(loops, schedule.Task{Name: "fold", Opts: maintain.Options{Every: 15 * time.Minute},
					Tick: tick(func(_ context.Context, now time.Time) error {
						mu.Lock()
						foldWaits = append(foldWaits, time.Since(now.Truncate(15*time.Minute)))
						mu.Unlock()
						return nil
					})})
			}
			wg.Go(func() { s.runLoops(ctx, loops) })
		}
		time.Sleep(2*time.Hour + 5*time.Minute)
		synctest.Wait()
		if _, waiting := jobs.State(); waiting == 0 {
			t.Error("no rollup waiting: the test shows nothing")
		}
		cancel()
		wg.Wait()
		if len(foldWaits) != 8 {
			t.Fatalf("%d folds in 2 hours and 5 minutes, want 8", len(foldWaits))
		}
		for i, w := range foldWaits {
			if w > 4*time.Minute {
				t.Errorf("fold %d (at %v) waited %v for its turn: more than the one job running", i, start.Add(time.Duration(i+1)*15*time.Minute).Sub(start), w)
			}
		}
	})
}

// Of n slots, the other jobs take at most n-1: behind rollup slices that run longer than
// the fold interval and keep the queue full, every fold starts at its tick. With the
// queue's order alone, each fold would wait for a slice to end. With 1 slot there is
// nothing to reserve: a fold waits for the job running.
func TestFoldsHaveASlot(t *testing.T) {
	for _, tc := range []struct {
		slots, folds int
		mostWait     time.Duration
	}{{2, 12, 0}, {4, 12, 0}, {1, 4, 40 * time.Minute}} {
		synctest.Test(t, func(t *testing.T) {
			jobs, err := NewJobs(tc.slots)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			var mu sync.Mutex
			var foldWaits []time.Duration
			rollupsAtOnce, rollupsMost := 0, 0
			for i := range 4 {
				s := &Server{opts: Options{Jobs: jobs}, log: slog.New(slog.DiscardHandler)}
				s.registerLoopMetrics()
				// Slices of 40 minutes, ticking every 10: the rollups always wait.
				loops := []schedule.Task{{Name: "rollup", Opts: maintain.Options{Every: 10 * time.Minute, Slice: 10 * time.Minute, CatchUp: 10 * time.Minute},
					Ranges: func(context.Context, time.Time, time.Time) error {
						mu.Lock()
						rollupsAtOnce++
						rollupsMost = max(rollupsMost, rollupsAtOnce)
						mu.Unlock()
						time.Sleep(40 * time.Minute)
						mu.Lock()
						rollupsAtOnce--
						mu.Unlock()
						return nil
					}}}
				if i == 0 {
					loops = append(loops, schedule.Task{Name: "fold", Opts: maintain.Options{Every: 15 * time.Minute},
						Tick: tick(func(_ context.Context, now time.Time) error {
							mu.Lock()
							foldWaits = append(foldWaits, time.Since(now.Truncate(15*time.Minute)))
							mu.Unlock()
							time.Sleep(time.Minute)
							return nil
						})})
				}
				wg.Go(func() { s.runLoops(ctx, loops) })
			}
			time.Sleep(3*time.Hour + 5*time.Minute)
			synctest.Wait()
			if _, waiting := jobs.State(); waiting == 0 {
				t.Error("no rollup waiting: the test shows nothing")
			}
			cancel()
			wg.Wait()
			if want := max(tc.slots-1, 1); rollupsMost != want {
				t.Errorf("%d slots: %d rollup slices ran at once, want %d", tc.slots, rollupsMost, want)
			}
			if len(foldWaits) != tc.folds {
				t.Fatalf("%d slots: %d folds in 3 hours and 5 minutes, want %d", tc.slots, len(foldWaits), tc.folds)
			}
			most := slices.Max(foldWaits)
			if tc.mostWait == 0 && most != 0 {
				t.Errorf("%d slots: a fold waited %v for its turn (waits %v), want none", tc.slots, most, foldWaits)
			}
			if tc.mostWait > 0 && (most == 0 || most > tc.mostWait) {
				t.Errorf("%d slot: folds waited at most %v (waits %v), want some and at most a slice's %v", tc.slots, most, foldWaits, tc.mostWait)
			}
		})
	}
}

// TestFoldsTakeAtMostHalf: the folds of 6 tenants tick together; of n slots they run at
// most n/2 (rounded up) at once, and all of them run, one after the other.
func TestFoldsTakeAtMostHalf(t *testing.T) {
	for _, tc := range []struct{ slots, most int }{{1, 1}, {2, 1}, {3, 2}, {4, 2}, {5, 3}} {
		t.Run(fmt.Sprint(tc.slots, " slots"), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				jobs, err := NewJobs(tc.slots)
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				var wg sync.WaitGroup
				var mu sync.Mutex
				atOnce, most, folds := 0, 0, 0
				for range 6 {
					s := &Server{opts: Options{Jobs: jobs}, log: slog.New(slog.DiscardHandler)}
					s.registerLoopMetrics()
					loops := []schedule.Task{{Name: "fold", Opts: maintain.Options{Every: time.Hour},
						Tick: tick(func(context.Context, time.Time) error {
							mu.Lock()
							atOnce++
							most = max(most, atOnce)
							folds++
							mu.Unlock()
							time.Sleep(5 * time.Minute)
							mu.Lock()
							atOnce--
							mu.Unlock()
							return nil
						})}}
					wg.Go(func() { s.runLoops(ctx, loops) })
				}
				time.Sleep(2*time.Hour + 45*time.Minute) // ticks at 1h and 2h: 6 folds of 5 min each
				synctest.Wait()
				cancel()
				wg.Wait()
				if most != tc.most {
					t.Errorf("%d slots: %d folds ran at once, want %d", tc.slots, most, tc.most)
				}
				if folds != 12 {
					t.Errorf("%d slots: %d folds ran, want 12 (6 tenants, 2 ticks)", tc.slots, folds)
				}
			})
		})
	}
}
