package server

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets/internal/maintain"
	"github.com/seed71701133/tablets/internal/maintain/schedule"
	"github.com/seed71701133/tablets/tsdb"
)

// defaults are the server's options as New completes them.
func defaults(o Options) Options {
	o.RollupCatchUp = max(o.RollupCatchUp, DefaultRollupCatchUp)
	o.CompactCatchUp = max(o.CompactCatchUp, DefaultCompactCatchUp)
	o.Now = time.Now
	return o
}

// ranges records the calls of fake tasks, by task.
type ranges struct {
	mu    sync.Mutex
	calls map[string][]maintain.Run
}

func (r *ranges) task(name string, fail func(call int) bool) maintain.RangeTask {
	return func(_ context.Context, from, to time.Time) error {
		r.mu.Lock()
		defer r.mu.Unlock()
		var err error
		if fail != nil && fail(len(r.calls[name])) {
			err = errors.New("account down")
		}
		r.calls[name] = append(r.calls[name], maintain.Run{From: from, To: to, Err: err})
		return err
	}
}

// tick is a fake step of a task that is not ranged.
func tick(f func(ctx context.Context, now time.Time) error) func(context.Context, time.Time) (schedule.Step, error) {
	return func(ctx context.Context, now time.Time) (schedule.Step, error) { return schedule.Step{}, f(ctx, now) }
}

// Run's loops with a 3 h interval (longer than the 2 h the loops used to look back) cover
// every instant from their catch-up horizon on, once, in slices of a day; compaction failing
// at its first two ticks is caught up at the third; retention runs at its own interval with
// the server's clock; the server counts each call of a step, by result. Fake steps in a
// bubble: the schedule of the server's options, not Azure.
func TestRunLoopsCoverEverything(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now() // 2000-01-01 00:00 UTC: a day boundary
		o := defaults(Options{RollupEvery: 3 * time.Hour, CompactEvery: 3 * time.Hour, RetainEvery: 4 * time.Hour})
		loops, err := schedule.Plan(scheduleOptions(o), tsdb.Options{SealDelay: time.Hour, Tiers: tsdb.DefaultTiers})
		require.NoError(t, err)
		rec := &ranges{calls: map[string][]maintain.Run{}}
		var retained, flagged []time.Time
		require.Len(t, loops, 4)
		for i := range loops {
			switch loops[i].Name {
			case "rollup":
				loops[i].Ranges = rec.task("rollup", nil)
			case "compact":
				loops[i].Ranges = rec.task("compact", func(call int) bool { return call < 2 })
			case "flagged":
				loops[i].Tick = tick(func(_ context.Context, now time.Time) error { flagged = append(flagged, now); return nil })
			case "retain":
				loops[i].Tick = tick(func(_ context.Context, now time.Time) error { retained = append(retained, now); return nil })
			}
		}
		s := &Server{opts: o, log: slog.New(slog.DiscardHandler)}
		s.registerLoopMetrics()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { s.runLoops(ctx, loops); close(done) }()
		time.Sleep(9*time.Hour + time.Minute)
		synctest.Wait()
		cancel()
		<-done

		h := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Hour) }
		run := func(from, to int) maintain.Run { return maintain.Run{From: h(from), To: h(to)} }
		// Rollup: the first tick (3 h) from 72 h before it, up to the seal delay before it.
		assert.Equal(t, []maintain.Run{run(-69, -48), run(-48, -24), run(-24, 0), run(0, 2), run(2, 5), run(5, 8)}, rec.calls["rollup"])
		// Compaction: failed at 3 h and 6 h (from 24 h before the first tick each time); at 9 h
		// it covers all of it.
		down := errors.New("account down")
		assert.Equal(t, []maintain.Run{
			{From: h(-21), To: h(0), Err: down}, {From: h(-21), To: h(0), Err: down},
			run(-21, 0), run(0, 9),
		}, rec.calls["compact"])
		assert.Equal(t, []time.Time{h(4), h(8)}, retained)
		assert.Equal(t, []time.Time{h(3), h(6), h(9)}, flagged, "the dirty slices at the rollup's interval")

		assert.Equal(t, 6.0, testutil.ToFloat64(s.background.WithLabelValues("rollup", "ok")))
		assert.Equal(t, 2.0, testutil.ToFloat64(s.background.WithLabelValues("compact", "ok")))
		assert.Equal(t, 2.0, testutil.ToFloat64(s.background.WithLabelValues("compact", "error")))
		assert.Equal(t, 2.0, testutil.ToFloat64(s.background.WithLabelValues("retain", "ok")))
		assert.Equal(t, float64(h(9).Unix()), testutil.ToFloat64(s.covered.WithLabelValues("compact")))
	})
}

// The server's options are the scheduler's: a negative interval runs the task never, and
// New refuses a negative catch-up.
func TestScheduleOptions(t *testing.T) {
	o := defaults(Options{FoldEvery: -1, RollupEvery: time.Minute, CompactEvery: -1, RetainEvery: -1})
	loops, err := schedule.Plan(scheduleOptions(o), tsdb.Options{SealDelay: time.Hour})
	require.NoError(t, err)
	require.Len(t, loops, 1)
	assert.Equal(t, "rollup", loops[0].Name)
	assert.Equal(t, 72*time.Hour, loops[0].Opts.CatchUp)
}

// A server whose every loop is off (a backfill's) runs none until its context ends, and
// logs no stop of its background tasks: the scheduler with no task returns at once, which
// runLoops logged at ERROR with a nil error.
func TestRunLoopsNoneUntilDone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logged recordingHandler
		s := &Server{opts: defaults(Options{}), log: slog.New(&logged)}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { s.runLoops(ctx, nil); close(done) }()
		time.Sleep(time.Hour)
		synctest.Wait()
		select {
		case <-done:
			t.Fatal("runLoops returned before its context ended")
		default:
		}
		cancel()
		<-done
		assert.Zero(t, logged.n.Load(), "records logged")
	})
}

// recordingHandler is a slog.Handler that counts the records logged at any level.
type recordingHandler struct{ n atomic.Int64 }

func (h *recordingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordingHandler) Handle(context.Context, slog.Record) error {
	h.n.Add(1)
	return nil
}
func (h *recordingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordingHandler) WithGroup(string) slog.Handler      { return h }
