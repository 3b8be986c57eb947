package server

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/maintain"
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

// Run's loops with a 3 h interval (longer than the 2 h the loops used to look back) cover
// every instant from their catch-up horizon on, once, in slices of a day; compaction failing
// at its first two ticks is caught up at the third; retention runs at its own interval with
// the server's clock. Fake tasks in a bubble: the schedule, not Azure.
func TestRunLoopsCoverEverything(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now() // 2000-01-01 00:00 UTC: a day boundary
		o := defaults(Options{RollupEvery: 3 * time.Hour, CompactEvery: 3 * time.Hour, RetainEvery: 4 * time.Hour})
		loops := schedule(o, tsdb.Options{SealDelay: time.Hour, Tiers: tsdb.DefaultTiers})
		rec := &ranges{calls: map[string][]maintain.Run{}}
		var retained, flagged []time.Time
		require.Len(t, loops, 4)
		for i := range loops {
			switch loops[i].name {
			case "rollup":
				loops[i].ranges = rec.task("rollup", nil)
			case "compact":
				loops[i].ranges = rec.task("compact", func(call int) bool { return call < 2 })
			case "flagged":
				loops[i].tick = func(_ context.Context, now time.Time) error { flagged = append(flagged, now); return nil }
			case "retain":
				loops[i].tick = func(_ context.Context, now time.Time) error { retained = append(retained, now); return nil }
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

// The schedule follows the database: the seal delay is the rollup's lag, its coarsest tier's
// block its slice, and its raw retention bounds how far back a rollup reaches.
func TestSchedule(t *testing.T) {
	day := 24 * time.Hour
	byName := func(loops []loop) map[string]maintain.Options {
		out := map[string]maintain.Options{}
		for _, l := range loops {
			l.opts.Now = nil
			out[l.name] = l.opts
		}
		return out
	}
	o := defaults(Options{RollupEvery: time.Minute, CompactEvery: 2 * time.Minute, RetainEvery: time.Hour})
	got := byName(schedule(o, tsdb.Options{SealDelay: time.Hour, Tiers: tsdb.DefaultTiers}))
	assert.Equal(t, map[string]maintain.Options{
		"rollup":  {Every: time.Minute, Lag: time.Hour, CatchUp: 3 * day, Slice: day},
		"flagged": {Every: time.Minute},
		"compact": {Every: 2 * time.Minute, CatchUp: day, Slice: day},
		"retain":  {Every: time.Hour},
	}, got)

	got = byName(schedule(o, tsdb.Options{SealDelay: 10 * time.Minute, RawRetention: 2 * day,
		Tiers: []tsdb.Tier{{Step: time.Minute}, {Step: 10 * time.Minute}}}))
	assert.Equal(t, maintain.Options{Every: time.Minute, Lag: 10 * time.Minute, CatchUp: 2 * day, Limit: 2 * day, Slice: 240 * time.Minute}, got["rollup"])

	o.FoldEvery = 2 * time.Hour
	loops := schedule(o, tsdb.Options{SealDelay: time.Hour, Tiers: tsdb.DefaultTiers})
	var names []string
	for _, l := range loops {
		names = append(names, l.name)
	}
	assert.Equal(t, []string{"fold", "compact", "rollup", "flagged", "retain"}, names, "in the order of a run of them all")
	got = byName(loops)
	assert.Equal(t, maintain.Options{Every: 2 * time.Hour}, got["fold"])
	assert.Equal(t, maintain.Options{Every: 2 * time.Minute, CatchUp: day, Slice: day}, got["compact"])

	o.FoldEvery, o.RollupEvery, o.RetainEvery = -1, -1, -1
	assert.Equal(t, []string{"compact"}, func() (names []string) {
		for _, l := range schedule(o, tsdb.Options{SealDelay: time.Hour}) {
			names = append(names, l.name)
		}
		return names
	}())
}

// A compaction also covers the fold interval before its range, and the time a point may wait
// to be foldable: the days a fold may still have written into since the last compaction.
func TestRefolded(t *testing.T) {
	at := time.Date(2030, 1, 2, 0, 30, 0, 0, time.UTC)
	assert.Equal(t, time.Date(2030, 1, 1, 23, 15, 0, 0, time.UTC), refolded(at, time.Hour))
	assert.Equal(t, time.Date(2030, 1, 2, 0, 15, 0, 0, time.UTC), refolded(at, 0), "a fold just before (Maintain's)")
	assert.Equal(t, time.Date(2030, 1, 2, 0, 15, 0, 0, time.UTC), refolded(at, -1), "no fold loop: another process's may have run")
	assert.Equal(t, tablets.MinTime, refolded(tablets.MinTime.Add(time.Minute), time.Hour), "never before MinTime")
}

// memProgress is a task's progress kept in memory, as the catalog keeps it: never backward.
type memProgress struct {
	mu      sync.Mutex
	covered time.Time
}

func (p *memProgress) Load(context.Context) (time.Time, bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.covered, !p.covered.IsZero(), nil
}

func (p *memProgress) Save(_ context.Context, t time.Time) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if t.After(p.covered) {
		p.covered = t
	}
	return nil
}

// A server down 6 hours catches up from the rollup's progress, whatever its interval and
// catch-up: its first tick covers every instant since the last rollup of any server, in
// slices, up to the seal delay ago; none is covered twice, none skipped.
func TestRollupCatchesUpAfterOutage(t *testing.T) {
	for _, c := range []struct {
		every, catchUp time.Duration
	}{{time.Minute, time.Hour}, {5 * time.Minute, DefaultRollupCatchUp}, {3 * time.Hour, 2 * time.Hour}} {
		synctest.Test(t, func(t *testing.T) {
			t0 := time.Now() // 2000-01-01 00:00 UTC
			o := defaults(Options{RollupEvery: c.every, CompactEvery: -1, RetainEvery: -1, FoldEvery: -1})
			o.RollupCatchUp = c.catchUp
			loops := schedule(o, tsdb.Options{SealDelay: time.Hour, Tiers: tsdb.DefaultTiers, RawRetention: 7 * 24 * time.Hour})
			rec := &ranges{calls: map[string][]maintain.Run{}}
			// The last server rolled up to 10:00 on day 2, then every server was down.
			stored := &memProgress{covered: t0.Add(34 * time.Hour)}
			var rollup loop
			for _, l := range loops {
				if l.name == "rollup" {
					rollup = l
				}
			}
			rollup.ranges, rollup.opts.Progress = rec.task("rollup", nil), stored
			time.Sleep(41 * time.Hour) // the server starts 6 hours after the seal of 10:00
			s := &Server{opts: o, log: slog.New(slog.DiscardHandler)}
			s.registerLoopMetrics()
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { s.runLoops(ctx, []loop{rollup}); close(done) }()
			// The first tick is at the next multiple of the interval (each divides a day, so
			// Truncate's multiples are the epoch's).
			first := time.Now().Truncate(c.every).Add(c.every)
			time.Sleep(time.Until(first) + time.Second)
			synctest.Wait()
			cancel()
			<-done

			calls := rec.calls["rollup"]
			require.NotEmpty(t, calls, "every %v", c.every)
			assert.Equal(t, t0.Add(34*time.Hour), calls[0].From, "every %v: from the stored progress", c.every)
			for i := 1; i < len(calls); i++ {
				assert.Equal(t, calls[i-1].To, calls[i].From, "every %v: contiguous", c.every)
			}
			end := first.Add(-time.Hour)
			assert.Equal(t, end, calls[len(calls)-1].To, "every %v: up to the seal", c.every)
			assert.Equal(t, end, stored.covered)
		})
	}
}
