package schedule

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/maintain"
	"github.com/seed71701133/tablets/tsdb"
)

// The plan follows the database: the seal delay is the rollup's lag, its coarsest tier's
// block its slice, and its raw retention bounds how far back a rollup reaches; a task whose
// interval is not positive does not run.
func TestPlan(t *testing.T) {
	day := 24 * time.Hour
	byName := func(tasks []Task, err error) map[string]maintain.Options {
		require.NoError(t, err)
		out := map[string]maintain.Options{}
		for _, l := range tasks {
			l.Opts.Now = nil
			out[l.Name] = l.Opts
		}
		return out
	}
	o := Options{RollupEvery: time.Minute, CompactEvery: 2 * time.Minute, RetainEvery: time.Hour}
	got := byName(Plan(o, tsdb.Options{SealDelay: time.Hour, Tiers: tsdb.DefaultTiers}))
	assert.Equal(t, map[string]maintain.Options{
		"rollup":  {Every: time.Minute, Lag: time.Hour, CatchUp: 3 * day, Slice: day, Grain: 15 * time.Minute},
		"flagged": {Every: time.Minute},
		"compact": {Every: 2 * time.Minute, CatchUp: day, Slice: day},
		"retain":  {Every: time.Hour},
	}, got, "the default catch-ups and grain")

	got = byName(Plan(o, tsdb.Options{SealDelay: 10 * time.Minute, RawRetention: 2 * day,
		Tiers: []tsdb.Tier{{Step: time.Minute}, {Step: 10 * time.Minute}}}))
	assert.Equal(t, maintain.Options{Every: time.Minute, Lag: 10 * time.Minute, CatchUp: 2 * day, Limit: 2 * day, Slice: 240 * time.Minute, Grain: 15 * time.Minute}, got["rollup"])

	// A grain of its own, or none.
	o.RollupGrain = time.Hour
	assert.Equal(t, time.Hour, byName(Plan(o, tsdb.Options{SealDelay: time.Hour}))["rollup"].Grain)
	o.RollupGrain = -1
	assert.Zero(t, byName(Plan(o, tsdb.Options{SealDelay: time.Hour}))["rollup"].Grain)
	o.RollupGrain = 0

	// A rollup delay (a tenant's share of tablets serve's spread) ends the ranges further
	// behind, and a catch-up or a retention within it grows to it.
	o.RollupDelay = 4 * time.Minute
	assert.Equal(t, maintain.Options{Every: time.Minute, Lag: time.Hour + 4*time.Minute, CatchUp: 3 * day, Slice: day, Grain: 15 * time.Minute},
		byName(Plan(o, tsdb.Options{SealDelay: time.Hour, Tiers: tsdb.DefaultTiers}))["rollup"])
	assert.Equal(t, maintain.Options{Every: time.Minute, Lag: time.Hour + 4*time.Minute, CatchUp: time.Hour + 4*time.Minute, Limit: time.Hour + 4*time.Minute, Grain: 15 * time.Minute},
		byName(Plan(o, tsdb.Options{SealDelay: time.Hour, RawRetention: time.Hour}))["rollup"])
	o.RollupDelay = 0

	// A rollup's catch-up within the seal delay is the seal delay (its first tick covers
	// nothing: windows are trusted once sealed); a database without tiers has no dirty
	// slices to roll up.
	got = byName(Plan(Options{RollupEvery: time.Minute, RollupCatchUp: 10 * time.Minute}, tsdb.Options{SealDelay: time.Hour}))
	assert.Equal(t, map[string]maintain.Options{"rollup": {Every: time.Minute, Lag: time.Hour, CatchUp: time.Hour, Grain: 15 * time.Minute}}, got)

	o.FoldEvery, o.CompactCatchUp, o.RollupCatchUp = 2*time.Hour, 5*time.Hour, 7*time.Hour
	tasks, err := Plan(o, tsdb.Options{SealDelay: time.Hour, Tiers: tsdb.DefaultTiers})
	require.NoError(t, err)
	var names []string
	for _, l := range tasks {
		names = append(names, l.Name)
	}
	assert.Equal(t, []string{Fold, Compact, Rollup, Flagged, Retain}, names, "in the order of a run of them all")
	got = byName(tasks, nil)
	assert.Equal(t, maintain.Options{Every: 2 * time.Hour}, got["fold"])
	assert.Equal(t, maintain.Options{Every: 2 * time.Minute, CatchUp: 5 * time.Hour, Slice: day}, got["compact"])
	assert.Equal(t, 7*time.Hour, got["rollup"].CatchUp)

	o.FoldEvery, o.RollupEvery, o.RetainEvery = -1, -1, 0
	assert.Equal(t, map[string]maintain.Options{"compact": {Every: 2 * time.Minute, CatchUp: 5 * time.Hour, Slice: day}},
		byName(Plan(o, tsdb.Options{SealDelay: time.Hour})))

	// The clock: the options', else the database's.
	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	dbClock := func() time.Time { return at }
	tasks, err = Plan(Options{RetainEvery: time.Hour}, tsdb.Options{Now: dbClock})
	require.NoError(t, err)
	assert.Equal(t, at, tasks[0].Opts.Now())
	tasks, err = Plan(Options{RetainEvery: time.Hour, Now: func() time.Time { return at.Add(time.Hour) }}, tsdb.Options{Now: dbClock})
	require.NoError(t, err)
	assert.Equal(t, at.Add(time.Hour), tasks[0].Opts.Now())

	for _, bad := range []Options{{RollupEvery: time.Minute, RollupCatchUp: -time.Hour}, {CompactEvery: time.Minute, CompactCatchUp: -1}, {RollupEvery: time.Minute, RollupDelay: -1}} {
		_, err := Plan(bad, tsdb.Options{})
		assert.ErrorIs(t, err, tablets.ErrInvalidOptions, "%+v", bad)
	}
	_, err = Tasks(nil, o)
	assert.ErrorIs(t, err, tablets.ErrInvalidOptions, "no database")
}

// A compaction also covers the fold interval before its range, and the time a point may wait
// to be foldable: the days a fold may still have written into since the last compaction.
func TestRefolded(t *testing.T) {
	at := time.Date(2030, 1, 2, 0, 30, 0, 0, time.UTC)
	assert.Equal(t, time.Date(2030, 1, 1, 23, 15, 0, 0, time.UTC), refolded(at, time.Hour))
	assert.Equal(t, time.Date(2030, 1, 2, 0, 15, 0, 0, time.UTC), refolded(at, 0), "a fold just before (Once's)")
	assert.Equal(t, time.Date(2030, 1, 2, 0, 15, 0, 0, time.UTC), refolded(at, -1), "no fold loop: another process's may have run")
	assert.Equal(t, tablets.MinTime, refolded(tablets.MinTime.Add(time.Minute), time.Hour), "never before MinTime")
}

// recorder records the calls of fake steps, by task, and the steps reported.
type recorder struct {
	mu      sync.Mutex
	calls   map[string][]maintain.Run
	reports []reported
}

type reported struct {
	step Step
	err  error
}

func newRecorder() *recorder { return &recorder{calls: map[string][]maintain.Run{}} }

func (r *recorder) ranges(name string, fail func(call int) bool) maintain.RangeTask {
	return func(_ context.Context, from, to time.Time) error {
		r.mu.Lock()
		defer r.mu.Unlock()
		var err error
		if fail != nil && fail(len(r.calls[name])) {
			err = errDown
		}
		r.calls[name] = append(r.calls[name], maintain.Run{From: from, To: to, Err: err})
		return err
	}
}

func (r *recorder) tick(name string, step Step) func(context.Context, time.Time) (Step, error) {
	return func(_ context.Context, now time.Time) (Step, error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.calls[name] = append(r.calls[name], maintain.Run{To: now})
		return step, nil
	}
}

func (r *recorder) report(s Step, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reports = append(r.reports, reported{s, err})
}

var errDown = errors.New("account down")

// run runs tasks in the bubble until stop, which checks that Run returned ctx's error.
func run(t *testing.T, tasks []Task, h *Hooks) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, tasks, h) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			assert.ErrorIs(t, <-done, context.Canceled)
		})
	}
	t.Cleanup(stop) // a failed assertion must still end the loops before the bubble ends
	return stop
}

// Run's tasks with a 3 h interval cover every instant from their catch-up horizon on, once,
// in slices of a day; compaction failing at its first two ticks is caught up at the third;
// retention runs at its own interval with the clock's time. Each call goes through Do, with
// its task's name, and is reported with its step and its error. Fake steps in a bubble.
func TestRunCoversEverything(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now() // 2000-01-01 00:00 UTC: a day boundary
		tasks, err := Plan(Options{RollupEvery: 3 * time.Hour, CompactEvery: 3 * time.Hour, RetainEvery: 4 * time.Hour},
			tsdb.Options{SealDelay: time.Hour, Tiers: tsdb.DefaultTiers})
		require.NoError(t, err)
		rec := newRecorder()
		for i := range tasks {
			switch tasks[i].Name {
			case Rollup:
				tasks[i].Ranges = rec.ranges(Rollup, nil)
			case Compact:
				tasks[i].Ranges = rec.ranges(Compact, func(call int) bool { return call < 2 })
			case Flagged:
				tasks[i].Tick = rec.tick(Flagged, Step{Flagged: 3})
			case Retain:
				tasks[i].Tick = rec.tick(Retain, Step{Dropped: []string{"t"}})
			}
		}
		var mu sync.Mutex
		did := map[string]int{}
		stop := run(t, tasks, &Hooks{Report: rec.report, Do: func(ctx context.Context, task string, call func(context.Context) error) error {
			mu.Lock()
			did[task]++
			mu.Unlock()
			return call(ctx)
		}})
		time.Sleep(9*time.Hour + time.Minute)
		synctest.Wait()
		stop()

		h := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Hour) }
		span := func(from, to int) maintain.Run { return maintain.Run{From: h(from), To: h(to)} }
		// Rollup: the first tick (3 h) from 72 h before it, up to the seal delay before it.
		assert.Equal(t, []maintain.Run{span(-69, -48), span(-48, -24), span(-24, 0), span(0, 2), span(2, 5), span(5, 8)}, rec.calls[Rollup])
		// Compaction: failed at 3 h and 6 h (from 24 h before the first tick each time); at 9 h
		// it covers all of it.
		assert.Equal(t, []maintain.Run{
			{From: h(-21), To: h(0), Err: errDown}, {From: h(-21), To: h(0), Err: errDown},
			span(-21, 0), span(0, 9),
		}, rec.calls[Compact])
		assert.Equal(t, []maintain.Run{{To: h(4)}, {To: h(8)}}, rec.calls[Retain])
		assert.Equal(t, []maintain.Run{{To: h(3)}, {To: h(6)}, {To: h(9)}}, rec.calls[Flagged], "the dirty slices at the rollup's interval")
		assert.Equal(t, map[string]int{Rollup: 6, Compact: 4, Retain: 2, Flagged: 3}, did, "every call through Do")

		byTask := map[string][]reported{}
		for _, r := range rec.reports {
			byTask[r.step.Task] = append(byTask[r.step.Task], r)
		}
		require.Len(t, byTask[Compact], 4)
		assert.Equal(t, reported{Step{Task: Compact, From: h(-21), To: h(0)}, errDown}, byTask[Compact][0])
		assert.Equal(t, reported{Step{Task: Compact, From: h(0), To: h(9)}, nil}, byTask[Compact][3])
		require.Len(t, byTask[Rollup], 6)
		assert.Equal(t, reported{Step{Task: Rollup, From: h(-69), To: h(-48)}, nil}, byTask[Rollup][0])
		assert.Equal(t, []reported{{Step{Task: Retain, Dropped: []string{"t"}}, nil}, {Step{Task: Retain, Dropped: []string{"t"}}, nil}}, byTask[Retain])
		require.Len(t, byTask[Flagged], 3)
		assert.Equal(t, reported{Step{Task: Flagged, Flagged: 3}, nil}, byTask[Flagged][0])
	})
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

// A scheduler down 6 hours catches up from the rollup's progress, whatever its interval and
// catch-up: its first tick covers every instant since the last rollup of any process, in
// slices, up to the seal delay ago (cut down to the grain); none is covered twice, none
// skipped.
func TestRollupCatchesUpAfterOutage(t *testing.T) {
	for _, c := range []struct {
		every, catchUp time.Duration
	}{{time.Minute, time.Hour}, {5 * time.Minute, DefaultRollupCatchUp}, {3 * time.Hour, 2 * time.Hour}} {
		synctest.Test(t, func(t *testing.T) {
			t0 := time.Now() // 2000-01-01 00:00 UTC
			tasks, err := Plan(Options{RollupEvery: c.every, RollupCatchUp: c.catchUp},
				tsdb.Options{SealDelay: time.Hour, Tiers: tsdb.DefaultTiers, RawRetention: 7 * 24 * time.Hour})
			require.NoError(t, err)
			rec := newRecorder()
			// The last process rolled up to 10:00 on day 2, then every process was down.
			stored := &memProgress{covered: t0.Add(34 * time.Hour)}
			var rollup Task
			for _, l := range tasks {
				if l.Name == Rollup {
					rollup = l
				}
			}
			rollup.Ranges, rollup.Opts.Progress = rec.ranges(Rollup, nil), stored
			time.Sleep(41 * time.Hour) // the scheduler starts 6 hours after the seal of 10:00
			stop := run(t, []Task{rollup}, nil)
			// The first tick is at the next multiple of the interval (each divides a day, so
			// Truncate's multiples are the epoch's).
			first := time.Now().Truncate(c.every).Add(c.every)
			time.Sleep(time.Until(first) + time.Second)
			synctest.Wait()
			stop()

			calls := rec.calls[Rollup]
			require.NotEmpty(t, calls, "every %v", c.every)
			assert.Equal(t, t0.Add(34*time.Hour), calls[0].From, "every %v: from the stored progress", c.every)
			for i := 1; i < len(calls); i++ {
				assert.Equal(t, calls[i-1].To, calls[i].From, "every %v: contiguous", c.every)
			}
			end := first.Add(-time.Hour).Truncate(DefaultRollupGrain) // a multiple of the epoch's too
			assert.Equal(t, end, calls[len(calls)-1].To, "every %v: up to the last whole grain sealed", c.every)
			assert.Equal(t, end, stored.covered)
		})
	}
}

// A failure to read a ranged task's progress is reported with only the task and the error,
// and that tick does nothing; the next covers the range. A failure to save it after a call
// is reported with the range covered.
func TestRunReportsProgressFailures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		rec := newRecorder()
		p := &flakyProgress{failLoads: 1, failSaves: 1}
		tasks := []Task{{Name: Compact, Opts: maintain.Options{Every: time.Hour, CatchUp: time.Hour, Progress: p}, Ranges: rec.ranges(Compact, nil)}}
		stop := run(t, tasks, &Hooks{Report: rec.report})
		time.Sleep(2*time.Hour + time.Minute)
		synctest.Wait()
		stop()
		require.Len(t, rec.reports, 2)
		assert.Equal(t, Step{Task: Compact}, rec.reports[0].step)
		assert.ErrorIs(t, rec.reports[0].err, errDown)
		assert.NoError(t, rec.reports[1].err)
		assert.Equal(t, t0.Add(time.Hour), rec.reports[1].step.From, "from the catch-up horizon, an hour before the tick")
		assert.Equal(t, t0.Add(2*time.Hour), rec.reports[1].step.To)
		assert.ErrorIs(t, rec.reports[1].step.SaveErr, errDown)
	})
}

// flakyProgress fails its first Loads and Saves.
type flakyProgress struct {
	memProgress
	failLoads, failSaves int
}

func (p *flakyProgress) Load(ctx context.Context) (time.Time, bool, error) {
	p.mu.Lock()
	if p.failLoads > 0 {
		p.failLoads--
		p.mu.Unlock()
		return time.Time{}, false, errDown
	}
	p.mu.Unlock()
	return p.memProgress.Load(ctx)
}

func (p *flakyProgress) Save(ctx context.Context, t time.Time) error {
	p.mu.Lock()
	if p.failSaves > 0 {
		p.failSaves--
		p.mu.Unlock()
		return errDown
	}
	p.mu.Unlock()
	return p.memProgress.Save(ctx, t)
}

// Bad options, or a task without a step (or with both), are refused before any call.
func TestRunRefusesBadTasks(t *testing.T) {
	step := func(context.Context, time.Time, time.Time) error { t.Error("called"); return nil }
	tick := func(context.Context, time.Time) (Step, error) { t.Error("called"); return Step{}, nil }
	for name, tasks := range map[string][]Task{
		"no interval": {{Name: Rollup, Ranges: step}},
		"a negative lag": {{Name: Rollup, Opts: maintain.Options{Every: time.Minute, Lag: -time.Minute}, Ranges: step},
			{Name: Fold, Opts: maintain.Options{Every: time.Minute}, Tick: tick}},
		"no step":   {{Name: Fold, Opts: maintain.Options{Every: time.Minute}}},
		"two steps": {{Name: Fold, Opts: maintain.Options{Every: time.Minute}, Ranges: step, Tick: tick}},
	} {
		assert.ErrorIs(t, Run(context.Background(), tasks, nil), tablets.ErrInvalidOptions, name)
	}
}

// Run calls each task's Stop once, after every loop has stopped (no step runs after it),
// with a context that has not ended; a Stop's failure is reported with the task's name.
func TestRunStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var events []string
		note := func(e string) {
			mu.Lock()
			defer mu.Unlock()
			events = append(events, e)
		}
		tick := func(name string) func(context.Context, time.Time) (Step, error) {
			return func(context.Context, time.Time) (Step, error) { note(name); return Step{}, nil }
		}
		tasks := []Task{
			{Name: Fold, Opts: maintain.Options{Every: time.Minute}, Tick: tick(Fold)},
			{Name: Compact, Opts: maintain.Options{Every: time.Minute}, Tick: tick(Compact), Stop: func(ctx context.Context) error {
				note("stop " + Compact)
				if ctx.Err() != nil {
					t.Errorf("Stop's context ended: %v", ctx.Err())
				}
				return errDown
			}},
		}
		rec := newRecorder()
		stop := run(t, tasks, &Hooks{Report: rec.report})
		time.Sleep(2*time.Minute + time.Second)
		synctest.Wait()
		stop()
		require.NotEmpty(t, events)
		assert.Equal(t, "stop "+Compact, events[len(events)-1], "Stop last, once: %v", events)
		stops := 0
		for _, e := range events {
			if e == "stop "+Compact {
				stops++
			}
		}
		assert.Equal(t, 1, stops, "Stop once: %v", events)
		assert.Contains(t, events, Compact, "the compaction ticked before")
		var stopped []reported
		for _, r := range rec.reports {
			if r.err != nil {
				stopped = append(stopped, r)
			}
		}
		require.Len(t, stopped, 1)
		assert.Equal(t, Step{Task: Compact}, stopped[0].step)
		assert.ErrorIs(t, stopped[0].err, errDown)
	})
}
