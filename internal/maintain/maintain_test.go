package maintain

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
)

// recorder is a fake task: it records the ranges it is called with, and fails while failing
// is set.
type recorder struct {
	mu      sync.Mutex
	calls   []Run // every call, with the time it was made at in To for TickTasks
	failing bool
	reports []Run
}

var errDown = errors.New("account down")

func (r *recorder) task(_ context.Context, from, to time.Time) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var err error
	if r.failing {
		err = errDown
	}
	r.calls = append(r.calls, Run{From: from, To: to, Err: err})
	return err
}

func (r *recorder) report(run Run) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reports = append(r.reports, run)
}

func (r *recorder) setFailing(f bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failing = f
}

func (r *recorder) takeCalls() []Run {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.calls
	r.calls = nil
	return c
}

// start runs Ranges in the bubble and returns its stop function, which checks that it
// returned ctx's error.
func start(t *testing.T, r *recorder, o Options) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	o.Report = r.report
	done := make(chan error, 1)
	go func() { done <- Ranges(ctx, r.task, &o) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			assert.ErrorIs(t, <-done, context.Canceled)
		})
	}
	t.Cleanup(stop) // a failed assertion must still end the loop before the bubble ends
	return stop
}

// An interval of 3 h (longer than any fixed lookback the loops used to have) covers every
// instant from the catch-up horizon on, once, in slices cut at the slice boundaries.
func TestRangesLongIntervalCoversEverything(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now() // the bubble's clock: 2000-01-01 00:00 UTC
		r := &recorder{}
		stop := start(t, r, Options{Every: 3 * time.Hour, Lag: time.Hour, CatchUp: 6 * time.Hour, Slice: 24 * time.Hour})
		time.Sleep(9*time.Hour + time.Minute) // three ticks, at 3 h, 6 h and 9 h
		synctest.Wait()
		stop()
		calls := r.takeCalls()
		// First tick at t0+3h: from t0+3h-6h to t0+3h-1h, cut at midnight (t0 is a midnight).
		require.Equal(t, []Run{
			{From: t0.Add(-3 * time.Hour), To: t0},
			{From: t0, To: t0.Add(2 * time.Hour)},
			{From: t0.Add(2 * time.Hour), To: t0.Add(5 * time.Hour)},
			{From: t0.Add(5 * time.Hour), To: t0.Add(8 * time.Hour)},
		}, calls)
		assert.Equal(t, calls, r.reports)
	})
}

// A grain of 15 minutes makes a loop that ticks every minute cover whole quarters of an
// hour, each once: the ticks between report that they wait, and call nothing. Once is not
// cut.
func TestRangesGrain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now() // a midnight
		m := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Minute) }
		r := &recorder{}
		o := Options{Every: time.Minute, Lag: time.Hour, Grain: 15 * time.Minute}
		stop := start(t, r, o)
		time.Sleep(31*time.Minute + time.Second) // ticks at 1 to 31 minutes
		synctest.Wait()
		stop()
		// The first tick (t0+1m) sets the start at t0-59m; the tick at t0+15m is the first
		// whose range reaches a quarter past its start (t0-45m), the one at t0+30m the next.
		assert.Equal(t, []Run{{From: m(-59), To: m(-45)}, {From: m(-45), To: m(-30)}}, r.takeCalls())
		var waits []Run
		for _, rep := range r.reports {
			if rep.From.Equal(rep.To) {
				waits = append(waits, rep)
			}
		}
		assert.Len(t, r.reports, 30, "the two calls, and every tick but the first")
		require.Len(t, waits, 28)
		assert.Equal(t, Run{From: m(-59), To: m(-59)}, waits[0])
		assert.Equal(t, Run{From: m(-30), To: m(-30)}, waits[len(waits)-1], "the tick at t0+31m")

		now := m(7)
		got, err := Once(context.Background(), r.task, &Options{Lag: time.Hour, CatchUp: 2 * time.Hour, Grain: 15 * time.Minute,
			Now: func() time.Time { return now }})
		require.NoError(t, err)
		assert.Equal(t, Run{From: m(-113), To: m(-53)}, got, "Once covers up to now less the lag")
	})
}

// The ticker runs at the configured interval: one call per tick, at the tick's time.
func TestRangesTicksAtInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		at, cancel, done := rangesTicks(&mu, Options{Every: 7 * time.Minute})
		// Ticks come at the multiples of 7 minutes since the epoch: the bubble's start
		// (2000-01-01, 946,684,800 s) is 3 minutes past one, so at 4, 11, 18 and 25 minutes.
		time.Sleep(7 * time.Minute)
		synctest.Wait()
		mu.Lock()
		require.Equal(t, []time.Duration(nil), *at, "no lag, no catch-up: the first tick only sets the start")
		mu.Unlock()
		time.Sleep(21 * time.Minute)
		synctest.Wait()
		cancel()
		require.ErrorIs(t, <-done, context.Canceled)
		assert.Equal(t, []time.Duration{11 * time.Minute, 18 * time.Minute, 25 * time.Minute}, *at)
	})
}

// After an outage (the task fails for a while) the first success covers everything missed,
// from where the last success ended; no range is covered twice after success.
func TestRangesCatchUpAfterOutage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		r := &recorder{}
		stop := start(t, r, Options{Every: 10 * time.Minute, Lag: time.Hour, CatchUp: 2 * time.Hour, Slice: time.Hour})
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		require.Equal(t, []Run{
			{From: t0.Add(-110 * time.Minute), To: t0.Add(-time.Hour)},
			{From: t0.Add(-time.Hour), To: t0.Add(-50 * time.Minute)},
		}, r.takeCalls())

		r.setFailing(true)
		time.Sleep(90 * time.Minute) // nine failed ticks, each retrying from the same start
		synctest.Wait()
		failed := r.takeCalls()
		require.Len(t, failed, 9)
		for i, c := range failed {
			end := t0.Add(time.Duration(i-4) * 10 * time.Minute) // now less the lag...
			if end.After(t0) {
				end = t0 // ...cut at the slice boundary
			}
			require.Equal(t, Run{From: t0.Add(-50 * time.Minute), To: end, Err: errDown}, c, "failed tick %d", i)
		}

		r.setFailing(false)
		time.Sleep(20 * time.Minute)
		synctest.Wait()
		stop()
		require.Equal(t, []Run{
			{From: t0.Add(-50 * time.Minute), To: t0},                      // the missed range, to the slice boundary
			{From: t0, To: t0.Add(50 * time.Minute)},                       // the rest of it
			{From: t0.Add(50 * time.Minute), To: t0.Add(60 * time.Minute)}, // the next tick: only what is new
		}, r.takeCalls())
		assert.Len(t, r.reports, 2+9+3, "every call is reported")
		assert.ErrorIs(t, r.reports[2].Err, errDown)
	})
}

// A failure part way through a long catch-up keeps the slices done before it.
func TestRangesSliceFailureKeepsProgress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		var mu sync.Mutex
		var calls []Run
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- Ranges(ctx, func(_ context.Context, from, to time.Time) error {
				mu.Lock()
				defer mu.Unlock()
				var err error
				if len(calls) == 1 {
					err = errDown // the second slice of the first tick
				}
				calls = append(calls, Run{From: from, To: to, Err: err})
				return err
			}, &Options{Every: time.Hour, CatchUp: 4 * time.Hour, Slice: time.Hour})
		}()
		time.Sleep(2 * time.Hour)
		synctest.Wait()
		cancel()
		require.ErrorIs(t, <-done, context.Canceled)
		h := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Hour) }
		assert.Equal(t, []Run{
			{From: h(-3), To: h(-2)},
			{From: h(-2), To: h(-1), Err: errDown},
			{From: h(-2), To: h(-1)}, {From: h(-1), To: h(0)}, {From: h(0), To: h(1)}, {From: h(1), To: h(2)},
		}, calls)
	})
}

// Limit keeps an outage longer than it from reaching further back than it.
func TestRangesLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		r := &recorder{failing: true}
		stop := start(t, r, Options{Every: time.Hour, Lag: time.Hour, CatchUp: 2 * time.Hour, Limit: 3 * time.Hour})
		time.Sleep(5 * time.Hour)
		synctest.Wait()
		r.takeCalls()
		r.setFailing(false)
		time.Sleep(time.Hour)
		synctest.Wait()
		stop()
		// Failing since the first tick (from t0-1h); at t0+6h the limit starts it at t0+3h.
		assert.Equal(t, []Run{{From: t0.Add(3 * time.Hour), To: t0.Add(5 * time.Hour)}}, r.takeCalls())
	})
}

// A call cut short by the end of ctx is neither reported nor progress, and Ranges returns.
func TestRangesStopsWithContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		reports := 0
		done := make(chan error, 1)
		go func() {
			done <- Ranges(ctx, func(ctx context.Context, _, _ time.Time) error {
				cancel()
				<-ctx.Done()
				return ctx.Err()
			}, &Options{Every: time.Minute, CatchUp: time.Hour, Report: func(Run) { reports++ }})
		}()
		require.ErrorIs(t, <-done, context.Canceled)
		assert.Zero(t, reports)
	})
}

// Ticks calls its task at every tick with the clock's time, and reports each call.
func TestTicks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clock := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC) // an injected clock, not the bubble's
		var got []time.Time
		var reports []Run
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- Ticks(ctx, func(_ context.Context, now time.Time) error {
				got = append(got, now)
				if len(got) == 2 {
					return errDown
				}
				return nil
			}, &Options{Every: time.Hour, Now: func() time.Time { clock = clock.Add(time.Minute); return clock },
				Report: func(r Run) { reports = append(reports, r) }})
		}()
		time.Sleep(3*time.Hour + time.Second)
		synctest.Wait()
		cancel()
		require.ErrorIs(t, <-done, context.Canceled)
		c := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
		assert.Equal(t, []time.Time{c.Add(time.Minute), c.Add(2 * time.Minute), c.Add(3 * time.Minute)}, got)
		assert.Equal(t, []Run{{}, {Err: errDown}, {}}, reports)
	})
}

// Ticks come on the interval's boundaries, not an interval after the start: a loop
// restarted more often than its interval still ticks.
func TestTicksOnBoundaries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now() // the bubble's midnight
		time.Sleep(35 * time.Minute)
		var got []time.Duration
		// Restarted every 40 minutes for 4 hours: from 00:35, 01:15, 01:55, ...
		for range 6 {
			ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
			err := Ticks(ctx, func(context.Context, time.Time) error {
				got = append(got, time.Since(start))
				return nil
			}, &Options{Every: time.Hour})
			cancel()
			require.ErrorIs(t, err, context.DeadlineExceeded)
		}
		// A ticker from each start would never have ticked.
		assert.Equal(t, []time.Duration{time.Hour, 2 * time.Hour, 3 * time.Hour, 4 * time.Hour}, got)
	})
}

// Bad options are an error wrapping tablets.ErrInvalidOptions, before any tick.
func TestOptionsChecked(t *testing.T) {
	for name, o := range map[string]*Options{
		"nil":               nil,
		"no interval":       {},
		"negative interval": {Every: -time.Second},
		"negative lag":      {Every: time.Second, Lag: -time.Second},
		"negative slice":    {Every: time.Second, Slice: -time.Second},
		"negative grain":    {Every: time.Second, Grain: -time.Second},
		"catch-up < lag":    {Every: time.Second, Lag: time.Hour, CatchUp: time.Minute},
		"limit < lag":       {Every: time.Second, Lag: time.Hour, Limit: time.Minute},
	} {
		called := false
		err := Ranges(context.Background(), func(context.Context, time.Time, time.Time) error { called = true; return nil }, o)
		assert.ErrorIs(t, err, tablets.ErrInvalidOptions, name)
		err = Ticks(context.Background(), func(context.Context, time.Time) error { called = true; return nil }, o)
		assert.ErrorIs(t, err, tablets.ErrInvalidOptions, name)
		assert.False(t, called, name)
	}
}

func TestNextBoundary(t *testing.T) {
	day := 24 * time.Hour
	at := time.Date(2024, 6, 10, 13, 0, 0, 0, time.UTC)
	assert.Equal(t, time.Date(2024, 6, 11, 0, 0, 0, 0, time.UTC), nextBoundary(at, day))
	assert.Equal(t, time.Date(2024, 6, 11, 0, 0, 0, 0, time.UTC), nextBoundary(time.Date(2024, 6, 10, 0, 0, 0, 0, time.UTC), day), "a boundary is not after itself")
	// Before the epoch, and in another zone: the same instants.
	assert.Equal(t, time.Date(1969, 12, 31, 0, 0, 0, 0, time.UTC), nextBoundary(time.Date(1969, 12, 30, 5, 0, 0, 0, time.UTC), day).UTC())
	week := 7 * day // the epoch was a Thursday
	assert.Equal(t, time.Date(2024, 6, 13, 0, 0, 0, 0, time.UTC), nextBoundary(at.In(time.FixedZone("x", 3600)), week).UTC())
}

// A phase delays every tick past the multiples of the interval, modulo it; a negative one
// is refused.
func TestRangesTicksAtPhase(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		at, cancel, done := rangesTicks(&mu, Options{Every: 7 * time.Minute, Phase: 16 * time.Minute})
		// The multiples of 7 minutes come at 4, 11, 18 and 25 minutes of the bubble
		// (TestRangesTicksAtInterval); a phase of 16 minutes is 2 modulo 7: 6, 13, 20, 27.
		time.Sleep(28 * time.Minute)
		synctest.Wait()
		cancel()
		require.ErrorIs(t, <-done, context.Canceled)
		assert.Equal(t, []time.Duration{13 * time.Minute, 20 * time.Minute, 27 * time.Minute}, *at)
	})
	err := Ranges(context.Background(), func(context.Context, time.Time, time.Time) error { return nil },
		&Options{Every: time.Minute, Phase: -time.Second})
	require.ErrorIs(t, err, tablets.ErrInvalidOptions)
}

// rangesTicks runs Ranges with o in a goroutine, its task recording the end of each range
// it is given, from now, under mu; cancel stops it, and done gets what Ranges returned.
func rangesTicks(mu *sync.Mutex, o Options) (at *[]time.Duration, cancel func(), done chan error) {
	t0 := time.Now()
	at = new([]time.Duration)
	ctx, cancel := context.WithCancel(context.Background())
	done = make(chan error, 1)
	go func() {
		done <- Ranges(ctx, func(_ context.Context, _, to time.Time) error {
			mu.Lock()
			defer mu.Unlock()
			*at = append(*at, to.Sub(t0))
			return nil
		}, &o)
	}()
	return at, cancel, done
}
