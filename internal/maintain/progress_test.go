package maintain

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
)

// memProgress is an in-memory Progress, monotonic as the real one; Load or Save fail while
// their flag is set.
type memProgress struct {
	mu                   sync.Mutex
	covered              time.Time
	ok                   bool
	failLoad, failSave   bool
	loads, saves, failed int
}

func (m *memProgress) Load(context.Context) (time.Time, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.loads++
	if m.failLoad {
		m.failed++
		return time.Time{}, false, errDown
	}
	return m.covered, m.ok, nil
}

func (m *memProgress) Save(_ context.Context, t time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.saves++
	if m.failSave {
		m.failed++
		return errDown
	}
	if !m.ok || t.After(m.covered) {
		m.covered, m.ok = t, true
	}
	return nil
}

func (m *memProgress) get() (time.Time, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.covered, m.ok
}

func (m *memProgress) set(f func(m *memProgress)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f(m)
}

// A process restarted after five hours down starts from the stored progress, not from its
// catch-up horizon of an hour: everything is covered once. With a Limit, no further back
// than it.
func TestRangesResumeFromProgress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		m := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Minute) }
		p := &memProgress{}
		r := &recorder{}
		o := Options{Every: 10 * time.Minute, CatchUp: time.Hour, Progress: p}
		stop := start(t, r, o)
		time.Sleep(30 * time.Minute)
		synctest.Wait()
		stop()
		require.Equal(t, []Run{{From: m(-50), To: m(10)}, {From: m(10), To: m(20)}, {From: m(20), To: m(30)}}, r.takeCalls())
		covered, ok := p.get()
		require.True(t, ok)
		require.Equal(t, m(30), covered)

		time.Sleep(5 * time.Hour) // down
		r2 := &recorder{}
		stop = start(t, r2, o)
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		stop()
		assert.Equal(t, []Run{{From: m(30), To: m(340)}}, r2.takeCalls(), "from where the last process stopped")
		assert.Equal(t, r2.reports, []Run{{From: m(30), To: m(340)}})
		covered, _ = p.get()
		assert.Equal(t, m(340), covered)

		time.Sleep(5 * time.Hour)
		r3 := &recorder{}
		o.Limit = 2 * time.Hour
		stop = start(t, r3, o)
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		stop()
		assert.Equal(t, []Run{{From: m(650 - 120), To: m(650)}}, r3.takeCalls(), "never further back than Limit")
	})
}

// A tick whose Load fails is reported and covers nothing; the next starts from the stored
// progress, not from the horizon.
func TestRangesLoadFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		m := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Minute) }
		p := &memProgress{covered: m(-300), ok: true, failLoad: true}
		r := &recorder{}
		stop := start(t, r, Options{Every: 10 * time.Minute, CatchUp: time.Hour, Progress: p})
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		assert.Empty(t, r.takeCalls())
		require.Len(t, r.reports, 1)
		assert.ErrorIs(t, r.reports[0].Err, errDown)
		assert.Contains(t, r.reports[0].Err.Error(), "load progress")
		assert.Zero(t, r.reports[0].From)

		p.set(func(m *memProgress) { m.failLoad = false })
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		stop()
		assert.Equal(t, []Run{{From: m(-300), To: m(20)}}, r.takeCalls())
		covered, _ := p.get()
		assert.Equal(t, m(20), covered)
	})
}

// A failed Save is reported with the covered range; the loop goes on from the range's end,
// and saves it at its next tick.
func TestRangesSaveFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		m := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Minute) }
		p := &memProgress{covered: m(-30), ok: true, failSave: true}
		r := &recorder{}
		stop := start(t, r, Options{Every: 10 * time.Minute, CatchUp: time.Hour, Progress: p})
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		require.Equal(t, []Run{{From: m(-30), To: m(10)}}, r.takeCalls())
		require.Len(t, r.reports, 1)
		assert.NoError(t, r.reports[0].Err)
		assert.ErrorIs(t, r.reports[0].SaveErr, errDown)
		covered, _ := p.get()
		assert.Equal(t, m(-30), covered, "not saved")

		p.set(func(m *memProgress) { m.failSave = false })
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		covered, _ = p.get()
		assert.Equal(t, m(20), covered)
		stop()
		assert.Equal(t, []Run{{From: m(10), To: m(20)}}, r.takeCalls(), "the stored progress, older than the loop's, is not gone back to")
		assert.Equal(t, 3, p.saves, "the failed save, the retry at the next tick, the next range's")
	})
}

// Two processes sharing one progress follow each other: each tick starts where either got.
func TestRangesShareProgress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		m := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Minute) }
		p := &memProgress{}
		a, b := &recorder{}, &recorder{}
		stopA := start(t, a, Options{Every: 10 * time.Minute, CatchUp: time.Hour, Progress: p})
		// Ticks come at the multiples of the interval since the epoch: of 35 minutes, the
		// first is 25 minutes after the bubble's start (2000-01-01, 946,684,800 s).
		stopB := start(t, b, Options{Every: 35 * time.Minute, CatchUp: time.Hour, Progress: p})
		time.Sleep(35 * time.Minute) // A at 10, 20, 30; B at 25
		synctest.Wait()
		stopA()
		stopB()
		assert.Equal(t, []Run{{From: m(-50), To: m(10)}, {From: m(10), To: m(20)}, {From: m(25), To: m(30)}}, a.takeCalls())
		assert.Equal(t, []Run{{From: m(20), To: m(25)}}, b.takeCalls())
	})
}

// Once covers, now, from the stored progress (the horizon when there is none) to now less
// the lag, slice by slice, saving after each; a second Once starts where the first ended.
func TestOnce(t *testing.T) {
	ctx := context.Background()
	n0 := time.Date(2030, 1, 2, 6, 0, 0, 0, time.UTC)
	now := n0
	h := func(n int) time.Time { return n0.Add(time.Duration(n) * time.Hour) }
	p := &memProgress{}
	r := &recorder{}
	o := &Options{Lag: time.Hour, CatchUp: 30 * time.Hour, Slice: 24 * time.Hour, Progress: p,
		Now: func() time.Time { return now }, Report: r.report}
	got, err := Once(ctx, r.task, o)
	require.NoError(t, err)
	assert.Equal(t, Run{From: h(-30), To: h(-1)}, got)
	assert.Equal(t, []Run{{From: h(-30), To: h(-6)}, {From: h(-6), To: h(-1)}}, r.takeCalls(), "cut at midnight")
	covered, _ := p.get()
	assert.Equal(t, h(-1), covered)

	now = now.Add(3 * time.Hour)
	got, err = Once(ctx, r.task, o)
	require.NoError(t, err)
	assert.Equal(t, Run{From: h(-1), To: h(2)}, got)
	assert.Equal(t, []Run{{From: h(-1), To: h(2)}}, r.takeCalls())

	// Nothing new: an empty range, no call.
	got, err = Once(ctx, r.task, o)
	require.NoError(t, err)
	assert.Equal(t, Run{From: h(2), To: h(2)}, got)
	assert.Empty(t, r.takeCalls())

	// A failed Load: nothing covered.
	p.set(func(m *memProgress) { m.failLoad = true })
	now = now.Add(30 * time.Hour)
	_, err = Once(ctx, r.task, o)
	require.ErrorIs(t, err, errDown)
	assert.Empty(t, r.takeCalls())

	// A failed call: the slices before it are saved.
	p.set(func(m *memProgress) { m.failLoad = false })
	calls := 0
	_, err = Once(ctx, func(ctx context.Context, from, to time.Time) error {
		if calls++; calls == 2 {
			return errDown
		}
		return nil
	}, o)
	require.ErrorIs(t, err, errDown)
	covered, _ = p.get()
	assert.Equal(t, time.Date(2030, 1, 3, 0, 0, 0, 0, time.UTC), covered, "the first slice, to midnight")

	// A failed save: the range is covered, and the error says so.
	p.set(func(m *memProgress) { m.failSave = true })
	got, err = Once(ctx, r.task, o)
	require.ErrorIs(t, err, errDown)
	assert.Contains(t, err.Error(), "save progress")
	assert.Equal(t, Run{From: time.Date(2030, 1, 3, 0, 0, 0, 0, time.UTC), To: h(32)}, got)
	assert.Equal(t, []Run{{From: time.Date(2030, 1, 3, 0, 0, 0, 0, time.UTC), To: h(32)}}, r.takeCalls())

	// Bad options: before any call. Every does not apply.
	_, err = Once(ctx, r.task, &Options{Lag: time.Hour, CatchUp: time.Minute})
	assert.ErrorIs(t, err, tablets.ErrInvalidOptions)
	_, err = Once(ctx, r.task, nil)
	assert.ErrorIs(t, err, tablets.ErrInvalidOptions)
	assert.Empty(t, r.takeCalls())
}
