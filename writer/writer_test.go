package writer_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/writer"
)

// fakeStore is an in-memory store for the Writer's tests: series -> exact time -> value.
// It is only a writer.Sink: a Writer only writes.
type fakeStore struct {
	// fail, if set, decides each call's outcome before anything is stored: nil stores every
	// point; an error that unwraps to a *WriteError stores the points not in Failed; any other
	// error stores none. It may be called concurrently.
	fail func(series string, points []tablets.Point) error
	// gate, if set, makes Write wait until it is closed (or ctx ends).
	gate chan struct{}
	// log records every call's points.
	log bool

	inflight atomic.Int32
	mu       sync.Mutex
	data     map[string]map[int64]float64
	calls    map[string][][]tablets.Point
	ncalls   int
}

func newFakeStore() *fakeStore {
	return &fakeStore{log: true, data: map[string]map[int64]float64{}, calls: map[string][][]tablets.Point{}}
}

func (m *fakeStore) Write(ctx context.Context, series string, points ...tablets.Point) error {
	m.inflight.Add(1)
	defer m.inflight.Add(-1)
	if m.gate != nil {
		select {
		case <-m.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	var err error
	if m.fail != nil {
		err = m.fail(series, points)
	}
	stored := make([]bool, len(points))
	var we *tablets.WriteError
	switch {
	case err == nil:
		for i := range stored {
			stored[i] = true
		}
	case errors.As(err, &we):
		for i := range stored {
			stored[i] = true
		}
		for _, f := range we.Failed { // the earliest unmarked equal argument
			for i, p := range points {
				if stored[i] && p.Time.Equal(f.Time) && p.Value == f.Value {
					stored[i] = false
					break
				}
			}
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ncalls++
	if m.log {
		m.calls[series] = append(m.calls[series], slices.Clone(points))
	}
	s := m.data[series]
	if s == nil {
		s = map[int64]float64{}
		m.data[series] = s
	}
	for i, p := range points { // the later argument wins
		if stored[i] {
			s[p.Time.UnixNano()] = p.Value
		}
	}
	return err
}

func (m *fakeStore) value(series string, t time.Time) (float64, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.data[series][t.UnixNano()]
	return v, ok
}

// len is the number of points stored in series.
func (m *fakeStore) len(series string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.data[series])
}

// total is the number of points stored in every series.
func (m *fakeStore) total() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, s := range m.data {
		n += len(s)
	}
	return n
}

// callsOf returns the points of every call for series so far.
func (m *fakeStore) callsOf(series string) [][]tablets.Point {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.calls[series])
}

// failWhere returns a fail function that fails, with a *WriteError (wrapped, as the stores
// do), the points for which bad is true.
func failWhere(bad func(series string, p tablets.Point) bool) func(string, []tablets.Point) error {
	return func(series string, points []tablets.Point) error {
		we := &tablets.WriteError{Series: series, Index: -1, Err: errors.New("injected")}
		for _, p := range points {
			if bad(series, p) {
				we.Failed = append(we.Failed, p)
			}
		}
		if len(we.Failed) == 0 {
			return nil
		}
		return fmt.Errorf("fake: %w", we)
	}
}

var wt0 = time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)

// wpt is the point at second sec with value v.
func wpt(sec int, v float64) tablets.Point {
	return tablets.Point{Time: wt0.Add(time.Duration(sec) * time.Second), Value: v}
}

// writeErrors returns every *WriteError in err's tree, in order.
func writeErrors(err error) []*tablets.WriteError {
	var out []*tablets.WriteError
	var walk func(error)
	walk = func(err error) {
		switch e := err.(type) {
		case nil:
		case *tablets.WriteError:
			out = append(out, e)
		case interface{ Unwrap() []error }:
			for _, c := range e.Unwrap() {
				walk(c)
			}
		case interface{ Unwrap() error }:
			walk(e.Unwrap())
		}
	}
	walk(err)
	return out
}

// requireStats checks the counters that are given and the invariant
// Added = Written + GivenUp + Buffered.
func requireStats(t *testing.T, w *writer.Writer, want writer.Stats) {
	t.Helper()
	s := w.Stats()
	require.Equal(t, s.Added, s.Written+s.GivenUp+s.Buffered, "invariant: %+v", s)
	require.Equal(t, want, s)
}

// mustNew is writer.New for options that are valid.
func mustNew(tb testing.TB, sink writer.Sink, opts *writer.Options) *writer.Writer {
	tb.Helper()
	w, err := writer.New(sink, opts)
	require.NoError(tb, err)
	return w
}

func newWriter(t *testing.T, st writer.Sink, opts *writer.Options) *writer.Writer {
	t.Helper()
	w := mustNew(t, st, opts)
	t.Cleanup(func() { _ = w.Close(context.Background()) })
	return w
}

const waitFor, tick = 10 * time.Second, time.Millisecond

func TestWriterFlushesOnInterval(t *testing.T) {
	st := newFakeStore()
	w := newWriter(t, st, &writer.Options{FlushInterval: 2 * time.Millisecond})
	for i := range 10 {
		require.NoError(t, w.Add("cpu", wpt(i, float64(i))))
	}
	require.Eventually(t, func() bool { return w.Stats().Written == 10 }, waitFor, tick)
	require.Equal(t, 10, st.len("cpu"))
	for i := range 10 {
		v, ok := st.value("cpu", wpt(i, 0).Time)
		require.True(t, ok)
		require.Equal(t, float64(i), v)
	}
	requireStats(t, w, writer.Stats{Added: 10, Written: 10})
	require.NoError(t, w.Close(context.Background()))
}

func TestWriterFlushesAtMaxBuffered(t *testing.T) {
	st := newFakeStore()
	w := newWriter(t, st, &writer.Options{FlushInterval: time.Hour, MaxBuffered: 10})
	for i := range 9 {
		require.NoError(t, w.Add(fmt.Sprint("s", i%3), wpt(i, 1)))
	}
	// Nine points wait: nothing starts a flush before the hour is over.
	require.Zero(t, st.total())
	requireStats(t, w, writer.Stats{Added: 9, Buffered: 9})

	require.NoError(t, w.Add("s0", wpt(9, 1))) // the tenth starts one
	require.Eventually(t, func() bool { return w.Stats().Written == 10 }, waitFor, tick)
	require.Equal(t, 10, st.total())

	require.NoError(t, w.Add("s1", wpt(10, 1), wpt(11, 1), wpt(12, 1)))
	requireStats(t, w, writer.Stats{Added: 13, Written: 10, Buffered: 3})
	require.NoError(t, w.Close(context.Background()))
	require.Equal(t, 13, st.total())
	requireStats(t, w, writer.Stats{Added: 13, Written: 13})
}

func TestWriterCloseFlushesAll(t *testing.T) {
	st := newFakeStore()
	w := newWriter(t, st, &writer.Options{FlushInterval: time.Hour, Concurrency: 3})
	for s := range 100 {
		for i := range 5 {
			require.NoError(t, w.Add(fmt.Sprint("host-", s), wpt(i, float64(s*10+i))))
		}
	}
	require.Zero(t, st.total())
	require.NoError(t, w.Close(context.Background()))
	require.Equal(t, 500, st.total())
	for s := range 100 {
		require.Len(t, st.callsOf(fmt.Sprint("host-", s)), 1, "one call per series")
		v, ok := st.value(fmt.Sprint("host-", s), wpt(4, 0).Time)
		require.True(t, ok)
		require.Equal(t, float64(s*10+4), v)
	}
	requireStats(t, w, writer.Stats{Added: 500, Written: 500})
}

// Add copies the points: the caller may reuse its slice as soon as Add returns.
func TestWriterCopiesAddedPoints(t *testing.T) {
	st := newFakeStore()
	w := newWriter(t, st, &writer.Options{FlushInterval: time.Hour})
	buf := []tablets.Point{wpt(0, 1), wpt(1, 2)}
	require.NoError(t, w.Add("a", buf...))
	buf[0].Value, buf[1].Value = -1, -2
	require.NoError(t, w.Flush(context.Background()))
	for i, want := range []float64{1, 2} {
		got, ok := st.value("a", wpt(i, 0).Time)
		require.True(t, ok)
		require.Equal(t, want, got)
	}
}

func TestWriterExplicitFlush(t *testing.T) {
	st := newFakeStore()
	w := newWriter(t, st, &writer.Options{FlushInterval: time.Hour})
	require.NoError(t, w.Flush(context.Background())) // nothing to do
	require.NoError(t, w.Add("a", wpt(0, 1), wpt(1, 2)))
	require.NoError(t, w.Add("b", wpt(0, 3)))
	require.NoError(t, w.Flush(context.Background()))
	require.Equal(t, 3, st.total())
	requireStats(t, w, writer.Stats{Added: 3, Written: 3})

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.NoError(t, w.Add("a", wpt(2, 1)))
	err := w.Flush(ctx) // a flush whose context ended: the point stays, its attempt not counted
	require.ErrorIs(t, err, context.Canceled)
	require.NotErrorIs(t, err, writer.ErrGivenUp)
	require.Equal(t, 3, st.total())
	require.NoError(t, w.Flush(context.Background()))
	require.Equal(t, 4, st.total())
}

func TestWriterRetriesUntilStoreRecovers(t *testing.T) {
	var down atomic.Bool
	down.Store(true)
	unavailable := errors.New("service unavailable")
	st := newFakeStore()
	st.fail = func(string, []tablets.Point) error {
		if down.Load() {
			return unavailable
		}
		return nil
	}
	w := newWriter(t, st, &writer.Options{FlushInterval: time.Hour})
	a := []tablets.Point{wpt(0, 1), wpt(1, 2), wpt(2, 3)}
	b := []tablets.Point{wpt(0, 4), wpt(1, 5)}
	require.NoError(t, w.Add("a", a...))
	require.NoError(t, w.Add("b", b...))

	err := w.Flush(context.Background())
	require.ErrorIs(t, err, unavailable)
	require.NotErrorIs(t, err, writer.ErrGivenUp)
	wes := writeErrors(err)
	require.Len(t, wes, 2)
	slices.SortFunc(wes, func(x, y *tablets.WriteError) int { return strings.Compare(x.Series, y.Series) })
	require.Equal(t, "a", wes[0].Series)
	require.Equal(t, a, wes[0].Failed)
	require.Equal(t, b, wes[1].Failed)
	require.Zero(t, st.total())
	requireStats(t, w, writer.Stats{Added: 5, Retried: 5, Buffered: 5})

	require.Error(t, w.Flush(context.Background())) // still down: a second attempt
	requireStats(t, w, writer.Stats{Added: 5, Retried: 10, Buffered: 5})

	down.Store(false)
	require.NoError(t, w.Flush(context.Background()))
	require.Equal(t, 5, st.total())
	requireStats(t, w, writer.Stats{Added: 5, Written: 5, Retried: 10})
	require.Equal(t, [][]tablets.Point{a, a, a}, st.callsOf("a"))
}

func TestWriterRetriesInBackground(t *testing.T) {
	var calls atomic.Int32
	st := newFakeStore()
	st.fail = func(string, []tablets.Point) error {
		if calls.Add(1) <= 2 {
			return errors.New("throttled")
		}
		return nil
	}
	w := newWriter(t, st, &writer.Options{FlushInterval: time.Millisecond})
	require.NoError(t, w.Add("a", wpt(0, 1), wpt(1, 2)))
	require.Eventually(t, func() bool { return w.Stats().Written == 2 }, waitFor, tick)
	requireStats(t, w, writer.Stats{Added: 2, Written: 2, Retried: 4})
	require.Equal(t, 2, st.len("a"))
}

func TestWriterPartialWriteErrorRetriesOnlyFailed(t *testing.T) {
	var first atomic.Bool
	first.Store(true)
	st := newFakeStore()
	odd := failWhere(func(_ string, p tablets.Point) bool { return int(p.Value)%2 == 1 })
	st.fail = func(s string, points []tablets.Point) error {
		if first.Swap(false) {
			return odd(s, points)
		}
		return nil
	}
	w := newWriter(t, st, &writer.Options{FlushInterval: time.Hour})
	var all, failed []tablets.Point
	for i := range 10 {
		p := wpt(i, float64(i))
		all = append(all, p)
		if i%2 == 1 {
			failed = append(failed, p)
		}
	}
	require.NoError(t, w.Add("a", all...))

	err := w.Flush(context.Background())
	wes := writeErrors(err)
	require.Len(t, wes, 1)
	require.Equal(t, failed, wes[0].Failed)
	require.Equal(t, 5, st.len("a"))
	requireStats(t, w, writer.Stats{Added: 10, Written: 5, Retried: 5, Buffered: 5})

	require.NoError(t, w.Flush(context.Background()))
	require.Equal(t, [][]tablets.Point{all, failed}, st.callsOf("a"), "the retry carries the failed points only")
	require.Equal(t, 10, st.len("a"))
	requireStats(t, w, writer.Stats{Added: 10, Written: 10, Retried: 5})
}

func TestWriterUnmatchedFailedRetriesAll(t *testing.T) {
	// A WriteError listing a point that was not an argument (here: its time truncated to
	// the minute) cannot be trusted to say which points were stored: all are retried.
	var first atomic.Bool
	first.Store(true)
	st := newFakeStore()
	st.fail = func(s string, points []tablets.Point) error {
		if !first.Swap(false) {
			return nil
		}
		return &tablets.WriteError{Series: s, Index: -1, Failed: []tablets.Point{{Time: points[1].Time.Truncate(time.Minute), Value: points[1].Value}}}
	}
	w := newWriter(t, st, &writer.Options{FlushInterval: time.Hour})
	all := []tablets.Point{wpt(0, 1), wpt(1, 2), wpt(2, 3)}
	require.NoError(t, w.Add("a", all...))
	wes := writeErrors(w.Flush(context.Background()))
	require.Len(t, wes, 1)
	require.Equal(t, all, wes[0].Failed)
	require.NoError(t, w.Flush(context.Background()))
	require.Equal(t, [][]tablets.Point{all, all}, st.callsOf("a"))
	requireStats(t, w, writer.Stats{Added: 3, Written: 3, Retried: 3})
}

func TestWriterGivesUpAfterMaxAttempts(t *testing.T) {
	boom := errors.New("boom")
	st := newFakeStore()
	st.fail = func(s string, points []tablets.Point) error {
		if s == "bad" {
			return boom
		}
		return nil
	}
	type report struct {
		series string
		points []tablets.Point
		err    error
	}
	var reports []report // OnError calls are never concurrent
	w := newWriter(t, st, &writer.Options{FlushInterval: time.Hour, MaxAttempts: 3,
		OnError: func(series string, points []tablets.Point, err error) {
			reports = append(reports, report{series, points, err})
		}})
	bad := []tablets.Point{wpt(0, 1), wpt(1, 2), wpt(2, 3)}
	require.NoError(t, w.Add("bad", bad...))
	require.NoError(t, w.Add("good", wpt(0, 1), wpt(1, 2)))

	for attempt := 1; attempt <= 2; attempt++ {
		err := w.Flush(context.Background())
		require.ErrorIs(t, err, boom)
		require.NotErrorIs(t, err, writer.ErrGivenUp)
		require.Empty(t, reports)
	}
	requireStats(t, w, writer.Stats{Added: 5, Written: 2, Retried: 6, Buffered: 3})

	err := w.Flush(context.Background()) // the third attempt is the last
	require.ErrorIs(t, err, writer.ErrGivenUp)
	require.ErrorIs(t, err, boom)
	require.Len(t, reports, 1)
	require.Equal(t, "bad", reports[0].series)
	require.Equal(t, bad, reports[0].points)
	require.ErrorIs(t, reports[0].err, writer.ErrGivenUp)
	var we *tablets.WriteError
	require.ErrorAs(t, reports[0].err, &we)
	require.Equal(t, bad, we.Failed)
	require.Len(t, st.callsOf("bad"), 3)
	requireStats(t, w, writer.Stats{Added: 5, Written: 2, Retried: 6, GivenUp: 3})

	require.NoError(t, w.Flush(context.Background()))
	require.NoError(t, w.Close(context.Background()))
	require.Len(t, reports, 1, "reported once")
	require.Len(t, st.callsOf("bad"), 3)
}

func TestWriterGivenUpPartial(t *testing.T) {
	// Only the points the store keeps failing are given up.
	st := newFakeStore()
	st.fail = failWhere(func(_ string, p tablets.Point) bool { return p.Value < 0 })
	var got []tablets.Point
	w := newWriter(t, st, &writer.Options{FlushInterval: time.Hour, MaxAttempts: 2,
		OnError: func(_ string, points []tablets.Point, _ error) { got = append(got, points...) }})
	require.NoError(t, w.Add("a", wpt(0, 1), wpt(1, -1), wpt(2, 2), wpt(3, -2)))
	require.Error(t, w.Flush(context.Background()))
	require.ErrorIs(t, w.Flush(context.Background()), writer.ErrGivenUp)
	require.Equal(t, []tablets.Point{wpt(1, -1), wpt(3, -2)}, got)
	require.Equal(t, [][]tablets.Point{
		{wpt(0, 1), wpt(1, -1), wpt(2, 2), wpt(3, -2)},
		{wpt(1, -1), wpt(3, -2)},
	}, st.callsOf("a"))
	requireStats(t, w, writer.Stats{Added: 4, Written: 2, Retried: 2, GivenUp: 2})
}

func TestWriterGivenUpWithoutOnError(t *testing.T) {
	st := newFakeStore()
	st.fail = func(s string, _ []tablets.Point) error {
		if s == "bad" {
			return errors.New("boom")
		}
		return nil
	}
	// Background flushes give the points up; the next Flush returns them.
	w := newWriter(t, st, &writer.Options{FlushInterval: time.Millisecond, MaxAttempts: 2})
	bad := []tablets.Point{wpt(0, 1), wpt(1, 2), wpt(2, 3), wpt(3, 4)}
	require.NoError(t, w.Add("bad", bad...))
	require.NoError(t, w.Add("good", wpt(0, 1)))
	require.Eventually(t, func() bool { return w.Stats().GivenUp == 4 }, waitFor, tick)

	err := w.Flush(context.Background())
	require.ErrorIs(t, err, writer.ErrGivenUp)
	wes := writeErrors(err)
	require.Len(t, wes, 1)
	require.Equal(t, "bad", wes[0].Series)
	require.Equal(t, bad, wes[0].Failed)
	require.NoError(t, w.Flush(context.Background()), "returned once")

	// Given up in Close: Close returns them.
	require.NoError(t, w.Add("bad", wpt(9, 9)))
	err = w.Close(context.Background())
	require.ErrorIs(t, err, writer.ErrGivenUp)
	wes = writeErrors(err)
	require.Len(t, wes, 1)
	require.Equal(t, []tablets.Point{wpt(9, 9)}, wes[0].Failed)
	requireStats(t, w, writer.Stats{Added: 6, Written: 1, Retried: 5, GivenUp: 5})
}

func TestWriterPermanentErrorGivenUpAtOnce(t *testing.T) {
	st := newFakeStore()
	st.fail = func(s string, _ []tablets.Point) error {
		return fmt.Errorf("fake: %w: %q", tablets.ErrInvalidSeries, s)
	}
	var got []tablets.Point
	w := newWriter(t, st, &writer.Options{FlushInterval: time.Hour,
		OnError: func(_ string, points []tablets.Point, _ error) { got = append(got, points...) }})
	require.NoError(t, w.Add("a#b", wpt(0, 1)))
	err := w.Flush(context.Background())
	require.ErrorIs(t, err, writer.ErrGivenUp)
	require.ErrorIs(t, err, tablets.ErrInvalidSeries)
	require.Equal(t, []tablets.Point{wpt(0, 1)}, got)
	require.Len(t, st.callsOf("a#b"), 1)
	requireStats(t, w, writer.Stats{Added: 1, GivenUp: 1})
}

func TestWriterCloseRetriesWithBackoff(t *testing.T) {
	var calls atomic.Int32
	st := newFakeStore()
	st.fail = func(string, []tablets.Point) error {
		if calls.Add(1) <= 3 {
			return errors.New("throttled")
		}
		return nil
	}
	w := newWriter(t, st, &writer.Options{FlushInterval: time.Hour})
	require.NoError(t, w.Add("a", wpt(0, 1), wpt(1, 2)))
	require.NoError(t, w.Close(context.Background()))
	require.Equal(t, 2, st.len("a"))
	requireStats(t, w, writer.Stats{Added: 2, Written: 2, Retried: 6})
}

func TestWriterCloseGivesUpWhenContextEnds(t *testing.T) {
	st := newFakeStore()
	st.fail = func(string, []tablets.Point) error { return errors.New("down") }
	var got []tablets.Point
	w := newWriter(t, st, &writer.Options{FlushInterval: time.Hour, MaxAttempts: 1 << 20,
		OnError: func(_ string, points []tablets.Point, _ error) { got = append(got, points...) }})
	require.NoError(t, w.Add("a", wpt(0, 1), wpt(1, 2)))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	err := w.Close(ctx)
	require.ErrorIs(t, err, writer.ErrGivenUp)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Equal(t, []tablets.Point{wpt(0, 1), wpt(1, 2)}, got)
	s := w.Stats()
	require.Equal(t, int64(2), s.GivenUp)
	require.Zero(t, s.Buffered)
}

func TestWriterLastWriteWinsAcrossRetries(t *testing.T) {
	t.Run("retried point goes before newer ones", func(t *testing.T) {
		var fail atomic.Value // func(tablets.Point) bool
		fail.Store(func(tablets.Point) bool { return true })
		st := newFakeStore()
		st.fail = failWhere(func(_ string, p tablets.Point) bool { return fail.Load().(func(tablets.Point) bool)(p) })
		w := newWriter(t, st, &writer.Options{FlushInterval: time.Hour})

		require.NoError(t, w.Add("a", wpt(0, 1)))
		require.Error(t, w.Flush(context.Background())) // 1 fails
		require.NoError(t, w.Add("a", wpt(0, 2)))       // a newer value of the same time
		fail.Store(func(p tablets.Point) bool { return p.Value == 2 })
		require.Error(t, w.Flush(context.Background())) // the call is [1, 2]: 1 stored, 2 failed
		v, _ := st.value("a", wt0)
		require.Equal(t, 1.0, v)
		fail.Store(func(tablets.Point) bool { return false })
		require.NoError(t, w.Flush(context.Background()))
		v, _ = st.value("a", wt0)
		require.Equal(t, 2.0, v)
		require.Equal(t, [][]tablets.Point{{wpt(0, 1)}, {wpt(0, 1), wpt(0, 2)}, {wpt(0, 2)}}, st.callsOf("a"))
	})
	t.Run("failed point superseded in its own call is not retried", func(t *testing.T) {
		st := newFakeStore()
		st.fail = failWhere(func(_ string, p tablets.Point) bool { return p.Value == 1 })
		w := newWriter(t, st, &writer.Options{FlushInterval: time.Hour})
		require.NoError(t, w.Add("a", wpt(0, 1), wpt(1, 1)))
		require.NoError(t, w.Add("a", wpt(0, 2))) // supersedes the first; the second has no successor
		err := w.Flush(context.Background())
		wes := writeErrors(err)
		require.Len(t, wes, 1)
		require.Equal(t, []tablets.Point{wpt(1, 1)}, wes[0].Failed)
		st.fail = nil
		require.NoError(t, w.Flush(context.Background()))
		v, _ := st.value("a", wt0)
		require.Equal(t, 2.0, v)
		require.Equal(t, []tablets.Point{wpt(1, 1)}, st.callsOf("a")[1])
		requireStats(t, w, writer.Stats{Added: 3, Written: 3, Retried: 1})
	})
	t.Run("random failures", func(t *testing.T) {
		for seed := range uint64(20) {
			testLastWriteWinsRandom(t, seed)
		}
	})
}

// testLastWriteWinsRandom adds values that grow with time to a few series and times, while
// the store fails whole calls or random subsets; once everything is written, each time must
// hold the value added last.
func testLastWriteWinsRandom(t *testing.T, seed uint64) {
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(seed, 1))
	intn := func(n int) int {
		mu.Lock()
		defer mu.Unlock()
		return rng.IntN(n)
	}
	var healthy atomic.Bool
	st := newFakeStore()
	st.fail = func(s string, points []tablets.Point) error {
		if healthy.Load() {
			return nil
		}
		switch intn(4) {
		case 0:
			return errors.New("whole call")
		case 1:
			return failWhere(func(string, tablets.Point) bool { return intn(2) == 0 })(s, points)
		}
		return nil
	}
	w := mustNew(t, st, &writer.Options{FlushInterval: time.Hour, MaxAttempts: 1 << 20, Concurrency: 4})
	want := map[string]map[int]float64{}
	v := 0.0
	for range 300 {
		name := fmt.Sprint("s", intn(3))
		sec := intn(5)
		v++
		require.NoError(t, w.Add(name, wpt(sec, v)))
		if want[name] == nil {
			want[name] = map[int]float64{}
		}
		want[name][sec] = v
		if intn(8) == 0 {
			_ = w.Flush(context.Background())
		}
	}
	healthy.Store(true)
	require.NoError(t, w.Close(context.Background()))
	for name, times := range want {
		for sec, v := range times {
			got, ok := st.value(name, wpt(sec, 0).Time)
			require.True(t, ok)
			require.Equal(t, v, got, "seed %d, series %s, second %d", seed, name, sec)
		}
	}
	s := w.Stats()
	require.Equal(t, s.Added, s.Written)
}

func TestWriterBackpressure(t *testing.T) {
	st := newFakeStore()
	st.gate = make(chan struct{})
	w := newWriter(t, st, &writer.Options{FlushInterval: time.Hour, MaxBuffered: 10})
	for i := range 10 {
		require.NoError(t, w.Add("a", wpt(i, 1)))
	}
	require.Eventually(t, func() bool { return st.inflight.Load() == 1 }, waitFor, tick) // the flush is stuck
	for i := 10; i < 20; i++ {
		require.NoError(t, w.Add("a", wpt(i, 1))) // the other half
	}
	requireStats(t, w, writer.Stats{Added: 20, Buffered: 20})

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	err := w.AddContext(ctx, "a", wpt(20, 1))
	require.ErrorIs(t, err, context.DeadlineExceeded)

	ctx, cancel = context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- w.AddContext(ctx, "b", wpt(0, 1)) }()
	cancel()
	require.ErrorIs(t, <-errc, context.Canceled)
	requireStats(t, w, writer.Stats{Added: 20, Buffered: 20})

	// Many blocked Adds: memory stays bounded while the store is stuck, and every one goes
	// through once it recovers.
	var maxBuffered atomic.Int64
	stopSampling := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Go(func() {
		for {
			maxBuffered.Store(max(maxBuffered.Load(), w.Stats().Buffered))
			select {
			case <-stopSampling:
				return
			default:
				runtime.Gosched()
			}
		}
	})
	var adders sync.WaitGroup
	for g := range 8 {
		adders.Go(func() {
			for i := range 50 {
				if err := w.Add(fmt.Sprint("g", g), wpt(i, float64(i))); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	require.Never(t, func() bool { return w.Stats().Added > 20 }, 20*time.Millisecond, tick)
	close(st.gate)
	adders.Wait()
	require.NoError(t, w.Close(context.Background()))
	close(stopSampling)
	sampler.Wait()
	require.LessOrEqual(t, maxBuffered.Load(), int64(20))
	require.Equal(t, 20+8*50, st.total())
	requireStats(t, w, writer.Stats{Added: 420, Written: 420})
}

func TestWriterLargeAdd(t *testing.T) {
	// An Add of more than 2*MaxBuffered points is accepted whole, once the writer is empty.
	st := newFakeStore()
	w := newWriter(t, st, &writer.Options{FlushInterval: time.Millisecond, MaxBuffered: 4})
	require.NoError(t, w.Add("a", wpt(0, 1)))
	var big []tablets.Point
	for i := range 50 {
		big = append(big, wpt(i+1, 2))
	}
	require.NoError(t, w.Add("a", big...))
	require.NoError(t, w.Close(context.Background()))
	require.Equal(t, 51, st.len("a"))
}

func TestWriterConcurrentAdds(t *testing.T) {
	const nSeries, perSeries, goroutines = 1000, 20, 32
	var calls atomic.Int64
	st := newFakeStore()
	st.log = false
	st.fail = func(string, []tablets.Point) error {
		if calls.Add(1)%10 == 0 {
			return errors.New("transient")
		}
		return nil
	}
	w := newWriter(t, st, &writer.Options{FlushInterval: time.Millisecond, MaxBuffered: 256, MaxAttempts: 1000})
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range perSeries {
				for s := g; s < nSeries; s += goroutines {
					if err := w.Add(fmt.Sprint("s", s), wpt(i, float64(s*1000+i))); err != nil {
						t.Error(err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	require.NoError(t, w.Close(context.Background()))
	require.Equal(t, nSeries*perSeries, st.total())
	for s := range nSeries {
		for i := range perSeries {
			v, ok := st.value(fmt.Sprint("s", s), wpt(i, 0).Time)
			require.True(t, ok)
			require.Equal(t, float64(s*1000+i), v)
		}
	}
	stats := w.Stats()
	require.Equal(t, int64(nSeries*perSeries), stats.Added)
	require.Equal(t, stats.Added, stats.Written)
	require.Zero(t, stats.GivenUp)
	require.Zero(t, stats.Buffered)
}

func TestWriterAfterClose(t *testing.T) {
	st := newFakeStore()
	w := mustNew(t, st, nil)
	require.NoError(t, w.Add("a", wpt(0, 1)))
	require.NoError(t, w.Close(context.Background()))
	require.Equal(t, 1, st.total())
	require.ErrorIs(t, w.Add("a", wpt(1, 1)), writer.ErrClosed)
	require.ErrorIs(t, w.AddContext(context.Background(), "a", wpt(1, 1)), writer.ErrClosed)
	require.ErrorIs(t, w.Add("a"), writer.ErrClosed)
	require.ErrorIs(t, w.Flush(context.Background()), writer.ErrClosed)
	require.ErrorIs(t, w.Close(context.Background()), writer.ErrClosed)
	requireStats(t, w, writer.Stats{Added: 1, Written: 1})
}

func TestWriterCloseReleasesBlockedAdd(t *testing.T) {
	st := newFakeStore()
	st.gate = make(chan struct{}) // never opens
	var got []tablets.Point
	w := mustNew(t, st, &writer.Options{FlushInterval: time.Hour, MaxBuffered: 2,
		OnError: func(_ string, points []tablets.Point, _ error) { got = append(got, points...) }})
	require.NoError(t, w.Add("a", wpt(0, 1), wpt(1, 1)))
	require.Eventually(t, func() bool { return st.inflight.Load() == 1 }, waitFor, tick)
	require.NoError(t, w.Add("a", wpt(2, 1), wpt(3, 1)))
	errc := make(chan error, 1)
	go func() { errc <- w.Add("a", wpt(4, 1)) }()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	err := w.Close(ctx) // the stuck flush ends with ctx: everything held is given up
	require.ErrorIs(t, <-errc, writer.ErrClosed)
	require.ErrorIs(t, err, writer.ErrGivenUp)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	slices.SortFunc(got, func(a, b tablets.Point) int { return a.Time.Compare(b.Time) })
	require.Equal(t, []tablets.Point{wpt(0, 1), wpt(1, 1), wpt(2, 1), wpt(3, 1)}, got)
	requireStats(t, w, writer.Stats{Added: 4, GivenUp: 4, Retried: 2}) // the stuck call's 2
}

func TestWriterInvalidInput(t *testing.T) {
	st := newFakeStore()
	w := newWriter(t, st, &writer.Options{FlushInterval: time.Hour})
	require.ErrorIs(t, w.Add("", wpt(0, 1)), tablets.ErrInvalidSeries)
	require.ErrorIs(t, w.Add("a", wpt(0, 1), tablets.Point{Time: tablets.MinTime.Add(-1)}), tablets.ErrInvalidTime)
	require.ErrorIs(t, w.Add("a", tablets.Point{Time: tablets.MaxTime.Add(1)}), tablets.ErrInvalidTime)
	require.NoError(t, w.Add("a")) // nothing to add
	requireStats(t, w, writer.Stats{})
}

func TestWriterInvalidOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		sink writer.Sink
		opts writer.Options
	}{
		{"nil sink", nil, writer.Options{}},
		{"FlushInterval", newFakeStore(), writer.Options{FlushInterval: -time.Second}},
		{"MaxBuffered", newFakeStore(), writer.Options{MaxBuffered: -1}},
		{"MaxBuffered too large", newFakeStore(), writer.Options{MaxBuffered: math.MaxInt/4 + 1}},
		{"Concurrency", newFakeStore(), writer.Options{Concurrency: -1}},
		{"MaxAttempts", newFakeStore(), writer.Options{MaxAttempts: -1}},
		{"MaxAttempts too large", newFakeStore(), writer.Options{MaxAttempts: math.MaxInt32 + 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := runtime.NumGoroutine()
			w, err := writer.New(tc.sink, &tc.opts)
			require.ErrorIs(t, err, tablets.ErrInvalidOptions)
			require.Nil(t, w)
			require.LessOrEqual(t, runtime.NumGoroutine(), before, "no goroutine started")
		})
	}
}

func TestWriterNoGoroutineLeak(t *testing.T) {
	before := runtime.NumGoroutine()
	for i := range 10 {
		st := newFakeStore()
		if i%2 == 1 {
			st.fail = failWhere(func(_ string, p tablets.Point) bool { return p.Value > 5 })
		}
		w := mustNew(t, st, &writer.Options{FlushInterval: time.Millisecond, MaxBuffered: 8, Concurrency: 1 + i, MaxAttempts: 2})
		for s := range 20 {
			require.NoError(t, w.Add(fmt.Sprint("s", s), wpt(0, float64(s)), wpt(1, float64(s))))
		}
		_ = w.Flush(context.Background())
		_ = w.Close(context.Background())
	}
	// Eventually runs the condition in a goroutine of its own (one at a time): hence the +1.
	require.Eventually(t, func() bool { return runtime.NumGoroutine() <= before+1 }, waitFor, tick,
		"goroutines: %d before, %d after", before, runtime.NumGoroutine())
}

// BenchmarkWriter adds points one at a time across 1,000 series and closes the writer, so
// every point is written to the in-memory fake store. To compare with a previous version:
//
//	go test -run '^$' -bench Writer -count 6 . | tee new.txt && benchstat old.txt new.txt
func BenchmarkWriter(b *testing.B) {
	const nSeries = 1000
	names := make([]string, nSeries)
	for i := range names {
		names[i] = fmt.Sprint("host-", i, ".cpu")
	}
	point := func(i int) tablets.Point {
		// 64 times per series at most, so the fake store stays small (in cache).
		return tablets.Point{Time: wt0.Add(time.Duration(i/nSeries%64) * time.Second), Value: float64(i)}
	}
	newStore := func() *fakeStore {
		st := newFakeStore()
		st.log = false
		return st
	}
	b.Run("adders=1", func(b *testing.B) {
		w := mustNew(b, newStore(), nil)
		b.ReportAllocs()
		for i := range b.N {
			if err := w.Add(names[i%nSeries], point(i)); err != nil {
				b.Fatal(err)
			}
		}
		if err := w.Close(context.Background()); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "points/s")
	})
	b.Run("adders=GOMAXPROCS", func(b *testing.B) {
		w := mustNew(b, newStore(), nil)
		var next atomic.Int64
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				i := int(next.Add(1))
				if err := w.Add(names[i%nSeries], point(i)); err != nil {
					b.Error(err)
					return
				}
			}
		})
		if err := w.Close(context.Background()); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "points/s")
	})
}

// manyStore is a ManySink over a fakeStore: WriteMany writes each series as Write does and
// joins their errors, as tsdb's WriteMany reports them.
type manyStore struct {
	*fakeStore
	batches atomic.Int32
	whole   error // if set, the next WriteMany fails whole with it, storing nothing
}

func (m *manyStore) WriteMany(ctx context.Context, batch []tablets.SeriesPoints) error {
	m.batches.Add(1)
	if err := m.whole; err != nil {
		m.whole = nil
		return err
	}
	var errs []error
	for _, sp := range batch {
		if err := m.Write(ctx, sp.Series, sp.Points...); err != nil {
			var we *tablets.WriteError
			if errors.As(err, &we) {
				we.Series = sp.Series
			}
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// A ManySink gets one call a flush, and the outcome of each series is its own.
func TestWriterManySink(t *testing.T) {
	st := &manyStore{fakeStore: newFakeStore()}
	var first atomic.Bool
	first.Store(true)
	odd := failWhere(func(s string, p tablets.Point) bool { return s == "b" && int(p.Value)%2 == 1 })
	st.fail = func(s string, points []tablets.Point) error {
		if first.Load() {
			return odd(s, points)
		}
		return nil
	}
	w := newWriter(t, st, &writer.Options{FlushInterval: time.Hour})
	var bAll, bFailed []tablets.Point
	for i := range 6 {
		require.NoError(t, w.Add("a", wpt(i, float64(i))))
		require.NoError(t, w.Add("c", wpt(i, float64(i))))
		p := wpt(i, float64(i))
		bAll = append(bAll, p)
		if i%2 == 1 {
			bFailed = append(bFailed, p)
		}
	}
	require.NoError(t, w.Add("b", bAll...))
	wes := writeErrors(w.Flush(context.Background()))
	require.Len(t, wes, 1)
	require.Equal(t, "b", wes[0].Series)
	require.Equal(t, bFailed, wes[0].Failed)
	require.EqualValues(t, 1, st.batches.Load(), "one call for the three series")
	requireStats(t, w, writer.Stats{Added: 18, Written: 15, Retried: 3, Buffered: 3})

	first.Store(false)
	require.NoError(t, w.Flush(context.Background()))
	require.EqualValues(t, 2, st.batches.Load())
	require.Equal(t, [][]tablets.Point{bAll, bFailed}, st.callsOf("b"), "the retry carries b's failed points only")
	require.Len(t, st.callsOf("a"), 1)

	// A failure of the whole call (nothing stored) retries every series.
	require.NoError(t, w.Add("a", wpt(10, 10)))
	require.NoError(t, w.Add("c", wpt(10, 10)))
	st.whole = errors.New("the catalog could not be read")
	require.Error(t, w.Flush(context.Background()))
	require.NoError(t, w.Flush(context.Background()))
	require.Equal(t, 7, st.len("a"))
	require.Equal(t, 7, st.len("c"))
	require.EqualValues(t, 4, st.batches.Load())
}
