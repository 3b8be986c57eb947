// Package writer buffers points, one at a time or a few at a time across many series, and
// writes them to a store in the background with retries and backpressure. It only calls
// Write, so any [Sink] works: every tablets.Store (the layouts, *tsdb.DB) is one.
package writer

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed71701133/tablets"
)

// Sink is where a Writer writes: the one method of tablets.Store it calls. Write must not
// retain the points slice after it returns (the Writer reuses it), as tablets.Store's
// contract says.
type Sink interface {
	Write(ctx context.Context, series string, points ...tablets.Point) error
}

// ManySink is a Sink that also writes many series in one call, as *tsdb.DB does: a flush
// then makes one WriteMany call of all its series (*tsdb.DB's is one commit of its
// Appender: where a database stages writes, a few transactions instead of one per series). WriteMany returns nil when every point is stored;
// else either errors joined (an Unwrap() []error) each a *tablets.WriteError naming its
// series and the points it did not store, or another error, when it stored nothing.
type ManySink interface {
	Sink
	WriteMany(ctx context.Context, batch []tablets.SeriesPoints) error
}

// Writer errors.
var (
	// ErrClosed is returned by Add, AddContext and Flush once Close has been called,
	// by an Add that was still waiting for room when Close was called, and by a second Close.
	ErrClosed = errors.New("writer: closed")
	// ErrGivenUp is wrapped by the errors that report points a Writer gave up: out of
	// attempts, refused by the store as invalid input, or still buffered when Close's context
	// ended. Such an error also wraps a *tablets.WriteError whose Failed lists the points.
	ErrGivenUp = errors.New("writer: gave up")
)

// Writer defaults.
const (
	defaultFlushInterval = time.Second
	defaultMaxBuffered   = 10_000
	defaultConcurrency   = 8
	defaultMaxAttempts   = 5

	// Close retries failed points after a backoff that starts here, doubles, and is capped
	// at the flush interval and at closeMaxBackoff.
	closeMinBackoff = 10 * time.Millisecond
	closeMaxBackoff = time.Second
)

// Options configure a Writer. The zero value of each field means its default;
// a negative value is invalid.
type Options struct {
	// FlushInterval is how often the writer flushes the points it holds. Default 1s.
	FlushInterval time.Duration
	// MaxBuffered is the number of new points waiting that starts a flush without waiting
	// for the interval. It also bounds memory: the writer holds at most 2*MaxBuffered
	// points (waiting, being written, or waiting to be retried), and Add blocks while its
	// points do not fit. Default 10,000.
	MaxBuffered int
	// Concurrency is the number of series a flush writes at once. Default 8.
	Concurrency int
	// MaxAttempts is the number of flushes a point takes part in before the writer gives
	// it up; 1 means no retry. Default 5.
	MaxAttempts int
	// OnError, if set, receives every point the writer gives up, grouped by series, with
	// an error wrapping ErrGivenUp and a *tablets.WriteError. It is called from the goroutine that
	// flushed (the writer's own, or one in Flush or Close), never concurrently with
	// itself, while no other flush can run: it must not call the writer's Add, Flush or
	// Close. It may keep points.
	//
	// If OnError is nil, the writer keeps the errors of given-up points (with the points,
	// up to 2*MaxBuffered of them; beyond that only their number) and returns them from the
	// next Flush or Close.
	OnError func(series string, points []tablets.Point, err error)
}

// Stats counts what a Writer did since it was created. Added = Written + GivenUp +
// Buffered holds in every snapshot.
type Stats struct {
	Added   int64 // points Add accepted
	Written int64 // points the store accepted, or that a later point of the same series and time replaced in the same store call
	Retried int64 // points a Sink.Write call failed that were put back for another attempt (once per retry)
	GivenUp int64 // points given up (see Options.OnError)
	// Buffered is the number of points held now: waiting, being written, or waiting to be
	// retried.
	Buffered int64
}

// Writer buffers points, one at a time or a few at a time across many series, and writes
// them to a Sink in the background: every FlushInterval, and as soon as MaxBuffered new
// points are waiting. A flush groups the points by series and makes one Sink.Write call
// per series, Concurrency series at once, and reuses the slice it passed once the call has
// returned (a Sink must not retain it, as tablets.Store.Write's contract says). Its methods
// are safe for concurrent use.
//
// Backpressure: the writer holds at most 2*MaxBuffered points. While the store keeps up,
// Add fills one half while a flush writes the other; when the store falls behind or fails,
// Add blocks until enough points are written or given up (or its context ends). A single
// Add of more than 2*MaxBuffered points waits until the writer holds nothing, then is
// accepted whole. Blocked Adds are served in arrival order.
//
// Failures: when a Sink.Write call fails with an error that unwraps to a *tablets.WriteError,
// only its Failed points are retried (the others were stored); with any other error every
// point of the call is (and so are they all if a Failed point matches no argument by time
// and value). A point takes part in at most MaxAttempts flushes; then it is given
// up and reported (see Options.OnError), never dropped silently. A point the store
// refuses as invalid input (tablets.ErrInvalidSeries, tablets.ErrInvalidTime) is given up at once. An
// attempt that failed because the flush's context ended does not count.
//
// Ordering: the points of one series are written in the order they were added, and a point
// being retried is written before, or in the same Sink.Write call ahead of, every point of
// its series added after it. As Sink.Write keeps the later of two points with the same
// time, a later Add of the same time wins over an earlier one even across retries. A
// failed point is not retried when a later point of the same series and time (time.Equal)
// was stored by the same call. For times that differ but fall into the same slot of the
// store's resolution, the guarantee rests on the store failing such points together, as
// package basic does (its tablets.WriteError lists every argument that fell into a failed
// transaction).
type Writer struct {
	sink  Sink
	opts  Options
	limit int // 2*MaxBuffered

	flushSem chan struct{} // held by the one flush in progress
	kick     chan struct{} // asks the background goroutine to flush now
	stop     chan struct{} // closed by Close: the background goroutine returns
	done     chan struct{} // closed by the background goroutine as it returns
	abort    context.Context
	cancel   context.CancelFunc // cancels abort: in-progress flushes end (Close's context ended)

	mu          sync.Mutex
	buf         map[string]*seriesBuf // points waiting, by series
	free        []*seriesBuf          // recycled buffers
	waiting     int                   // points in buf
	fresh       int                   // points in buf never tried
	held        int                   // points in buf or being written
	kickPending bool
	waiters     []*waiter // blocked Adds, oldest first
	closed      bool
	stats       Stats
	kept        []error // given-up reports kept for the next Flush or Close (OnError nil)
	keptPoints  int
	keptLost    int64 // given-up points beyond the kept ones

	items []flushItem // scratch of the flush in progress
}

// seriesBuf is the buffer of one series: its first len(retries) points are being retried,
// with the attempts they took part in; the others are new.
type seriesBuf struct {
	points  []tablets.Point
	retries []int32
}

// waiter is a blocked Add. The writer appends its points and closes ready when they fit,
// or sets err and closes ready when it closes.
type waiter struct {
	series string
	points []tablets.Point
	ready  chan struct{}
	err    error
}

// flushItem is one Sink.Write call of a flush and its outcome.
type flushItem struct {
	series string
	sb     *seriesBuf
	err    error
	failed []bool // per point, when err is or wraps a *tablets.WriteError; nil: all failed
	we     *tablets.WriteError
	// ctxEnded: the flush's context had ended when the call returned, so the attempt does
	// not count; skipped: it had ended before, so no call was made.
	ctxEnded, skipped bool
}

// New returns a writer to sink and starts its background goroutine; Close stops it. nil
// options mean the defaults. Invalid options (a negative field, a MaxBuffered or
// MaxAttempts too large) or a nil sink give an error wrapping tablets.ErrInvalidOptions,
// and start nothing.
func New(sink Sink, opts *Options) (*Writer, error) {
	if sink == nil {
		return nil, fmt.Errorf("%w: writer: nil sink", tablets.ErrInvalidOptions)
	}
	w := &Writer{sink: sink}
	if opts != nil {
		w.opts = *opts
	}
	if err := w.opts.resolve(); err != nil {
		return nil, err
	}
	w.limit = 2 * w.opts.MaxBuffered
	w.flushSem = make(chan struct{}, 1)
	w.kick = make(chan struct{}, 1)
	w.stop = make(chan struct{})
	w.done = make(chan struct{})
	w.abort, w.cancel = context.WithCancel(context.Background())
	w.buf = make(map[string]*seriesBuf)
	go w.run()
	return w, nil
}

func (o *Options) resolve() error {
	switch {
	case o.FlushInterval < 0:
		return fmt.Errorf("%w: writer: FlushInterval %v is negative", tablets.ErrInvalidOptions, o.FlushInterval)
	case o.MaxBuffered < 0:
		return fmt.Errorf("%w: writer: MaxBuffered %d is negative", tablets.ErrInvalidOptions, o.MaxBuffered)
	case o.MaxBuffered > math.MaxInt/4:
		return fmt.Errorf("%w: writer: MaxBuffered %d is too large", tablets.ErrInvalidOptions, o.MaxBuffered)
	case o.Concurrency < 0:
		return fmt.Errorf("%w: writer: Concurrency %d is negative", tablets.ErrInvalidOptions, o.Concurrency)
	case o.MaxAttempts < 0:
		return fmt.Errorf("%w: writer: MaxAttempts %d is negative", tablets.ErrInvalidOptions, o.MaxAttempts)
	case o.MaxAttempts > math.MaxInt32:
		return fmt.Errorf("%w: writer: MaxAttempts %d is too large", tablets.ErrInvalidOptions, o.MaxAttempts)
	}
	if o.FlushInterval == 0 {
		o.FlushInterval = defaultFlushInterval
	}
	if o.MaxBuffered == 0 {
		o.MaxBuffered = defaultMaxBuffered
	}
	if o.Concurrency == 0 {
		o.Concurrency = defaultConcurrency
	}
	if o.MaxAttempts == 0 {
		o.MaxAttempts = defaultMaxAttempts
	}
	return nil
}

// Add is AddContext without a deadline: it blocks until the points fit or the writer
// closes.
func (w *Writer) Add(series string, points ...tablets.Point) error {
	return w.AddContext(context.Background(), series, points...)
}

// AddContext buffers points of series for writing; it copies them, so the caller may reuse
// the slice. It blocks while the writer holds too many points (see Writer), until they fit
// or ctx ends, which returns an error wrapping ctx.Err() with none of the points accepted.
// The points of one call are accepted together or not at all. An empty series name (an
// error wrapping tablets.ErrInvalidSeries) or a time outside [tablets.MinTime, tablets.MaxTime] (tablets.ErrInvalidTime)
// rejects the call at once. After Close it returns ErrClosed.
func (w *Writer) AddContext(ctx context.Context, series string, points ...tablets.Point) error {
	if series == "" {
		return fmt.Errorf("%w: writer: empty series name", tablets.ErrInvalidSeries)
	}
	for i, p := range points {
		if p.Time.Before(tablets.MinTime) || p.Time.After(tablets.MaxTime) {
			return fmt.Errorf("%w: writer: add %q: point %d: %s is outside [%s, %s]", tablets.ErrInvalidTime, series, i,
				p.Time.Format(time.RFC3339Nano), tablets.MinTime.Format(time.RFC3339), tablets.MaxTime.Format(time.RFC3339Nano))
		}
	}
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return ErrClosed
	}
	if len(points) == 0 {
		w.mu.Unlock()
		return nil
	}
	if len(w.waiters) == 0 && w.fitsLocked(len(points)) {
		w.appendLocked(series, points)
		w.mu.Unlock()
		return nil
	}
	if err := ctx.Err(); err != nil {
		w.mu.Unlock()
		return fmt.Errorf("writer: add %q: %w", series, err)
	}
	// A copy: points does not escape, so an Add that does not block does not allocate.
	wt := &waiter{series: series, points: slices.Clone(points), ready: make(chan struct{})}
	w.waiters = append(w.waiters, wt)
	if w.fresh > 0 {
		w.kickLocked()
	}
	w.mu.Unlock()

	select {
	case <-wt.ready:
		return wt.err
	case <-ctx.Done():
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	select {
	case <-wt.ready: // accepted (or closed) meanwhile
		return wt.err
	default:
	}
	w.waiters = slices.DeleteFunc(w.waiters, func(x *waiter) bool { return x == wt })
	w.admitLocked() // the ones behind may fit now
	return fmt.Errorf("writer: add %q: %w", series, ctx.Err())
}

// fitsLocked reports whether n more points may be accepted now.
func (w *Writer) fitsLocked(n int) bool {
	return w.held == 0 || w.held+n <= w.limit
}

func (w *Writer) appendLocked(series string, points []tablets.Point) {
	sb := w.buf[series]
	if sb == nil {
		sb = w.newBufLocked()
		w.buf[series] = sb
	}
	sb.points = append(sb.points, points...)
	n := len(points)
	w.waiting += n
	w.fresh += n
	w.held += n
	w.stats.Added += int64(n)
	if w.fresh >= w.opts.MaxBuffered {
		w.kickLocked()
	}
}

func (w *Writer) kickLocked() {
	if w.kickPending {
		return
	}
	w.kickPending = true
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// admitLocked accepts the blocked Adds that fit, oldest first.
func (w *Writer) admitLocked() {
	for len(w.waiters) > 0 && w.fitsLocked(len(w.waiters[0].points)) {
		wt := w.waiters[0]
		w.waiters[0] = nil
		w.waiters = w.waiters[1:]
		w.appendLocked(wt.series, wt.points)
		close(wt.ready)
	}
	if len(w.waiters) == 0 {
		w.waiters = nil
	}
}

func (w *Writer) newBufLocked() *seriesBuf {
	if n := len(w.free); n > 0 {
		sb := w.free[n-1]
		w.free[n-1] = nil
		w.free = w.free[:n-1]
		return sb
	}
	return &seriesBuf{}
}

// recycleLocked keeps sb for reuse, unless it grew large or enough are kept already.
func (w *Writer) recycleLocked(sb *seriesBuf) {
	if cap(sb.points) > w.opts.MaxBuffered || len(w.free) >= 4096 {
		return
	}
	clear(sb.points) // no references kept
	sb.points = sb.points[:0]
	sb.retries = sb.retries[:0]
	w.free = append(w.free, sb)
}

// Stats returns the writer's counters.
func (w *Writer) Stats() Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.stats
	s.Buffered = int64(w.held)
	return s
}

// run is the background goroutine: it flushes every interval and when kicked.
func (w *Writer) run() {
	defer close(w.done)
	t := time.NewTicker(w.opts.FlushInterval)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
		case <-w.kick:
		}
		select {
		case <-w.stop: // Close flushes
			return
		default:
		}
		select {
		case <-w.stop:
			return
		case w.flushSem <- struct{}{}:
		}
		w.flushOnce(w.abort)
		<-w.flushSem
	}
}

// Flush writes every point the writer holds now, and returns when that attempt is over,
// waiting first for a flush in progress. It returns nil when every point accepted by an
// Add that returned before Flush was called has been stored, or given up and passed to
// OnError by an earlier flush. Otherwise it returns the errors.Join of one error per series
// and outcome, each wrapping a *tablets.WriteError that lists the points: points to be retried by
// later flushes; points given up by this flush (these also wrap ErrGivenUp, and went to
// OnError if set); and, if OnError is nil, points given up by background flushes since the
// last Flush or Close. After Close it returns ErrClosed.
func (w *Writer) Flush(ctx context.Context) error {
	w.mu.Lock()
	closed := w.closed
	w.mu.Unlock()
	if closed {
		return ErrClosed
	}
	select {
	case w.flushSem <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("writer: flush: %w", ctx.Err())
	}
	w.mu.Lock()
	closed = w.closed
	w.mu.Unlock()
	if closed { // Close flushes
		<-w.flushSem
		return ErrClosed
	}
	// The flush also ends when Close's context does.
	fctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(w.abort, cancel)
	retryErrs, givenErrs := w.flushOnce(fctx)
	stop()
	cancel()
	<-w.flushSem
	return errors.Join(append(append(retryErrs, givenErrs...), w.drainKept()...)...)
}

// Close stops the background goroutine and flushes every point the writer holds, retrying
// failed ones after a short backoff until each is stored or out of attempts. If ctx ends
// first, the points still held are given up with ctx's error. Blocked Adds return
// ErrClosed. Close returns nil when every point was stored (or given up and reported
// before); otherwise the errors.Join of errors wrapping ErrGivenUp and a *tablets.WriteError per
// series (the given-up points went to OnError too, if set), plus, if OnError is nil, the
// reports kept from earlier flushes. When Close returns, no goroutine of the writer runs.
// A second Close returns ErrClosed.
func (w *Writer) Close(ctx context.Context) error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return ErrClosed
	}
	w.closed = true
	for _, wt := range w.waiters {
		wt.err = ErrClosed
		close(wt.ready)
	}
	w.waiters = nil
	w.mu.Unlock()
	defer w.cancel()

	// Stop the background goroutine and wait for a flush in progress; both end early if
	// ctx does.
	stopAbort := context.AfterFunc(ctx, w.cancel)
	close(w.stop)
	<-w.done
	w.flushSem <- struct{}{}
	stopAbort()
	defer func() { <-w.flushSem }()

	var errs []error
	backoff := min(closeMinBackoff, w.opts.FlushInterval)
	for {
		w.mu.Lock()
		held := w.held
		w.mu.Unlock()
		if held == 0 {
			break
		}
		if err := ctx.Err(); err != nil {
			errs = append(errs, w.giveUpAll(err)...)
			break
		}
		_, given := w.flushOnce(ctx)
		errs = append(errs, given...)
		w.mu.Lock()
		held = w.held
		w.mu.Unlock()
		if held == 0 {
			break
		}
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
		backoff = min(2*backoff, w.opts.FlushInterval, closeMaxBackoff)
	}
	return errors.Join(append(errs, w.drainKept()...)...)
}

// flushOnce writes the points waiting, once; the caller holds flushSem. It returns the
// errors of the points to be retried, and those of the points given up if OnError is set
// (otherwise they are kept for drainKept).
func (w *Writer) flushOnce(ctx context.Context) (retryErrs, givenErrs []error) {
	w.mu.Lock()
	items := w.items[:0]
	for s, sb := range w.buf {
		items = append(items, flushItem{series: s, sb: sb})
	}
	clear(w.buf)
	w.waiting, w.fresh, w.kickPending = 0, 0, false
	w.mu.Unlock()
	if len(items) == 0 {
		return nil, nil
	}

	w.writeAll(ctx, items)

	w.mu.Lock()
	retryErrs, given := w.settleLocked(items)
	clear(items) // no references kept
	w.items = items[:0]
	w.mu.Unlock()
	return retryErrs, w.report(given)
}

// writeAll makes the Sink.Write calls of items, Concurrency at once; or one WriteMany call
// of them all, to a ManySink.
func (w *Writer) writeAll(ctx context.Context, items []flushItem) {
	if many, ok := w.sink.(ManySink); ok {
		w.writeMany(ctx, many, items)
		return
	}
	n := min(w.opts.Concurrency, len(items))
	if n <= 1 {
		for i := range items {
			w.write(ctx, &items[i])
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(items) {
					return
				}
				w.write(ctx, &items[i])
			}
		})
	}
	wg.Wait()
}

func (w *Writer) write(ctx context.Context, it *flushItem) {
	if err := ctx.Err(); err != nil {
		it.err, it.ctxEnded, it.skipped = err, true, true
		return
	}
	err := w.sink.Write(ctx, it.series, it.sb.points...)
	if err == nil {
		return
	}
	it.err, it.ctxEnded = err, ctx.Err() != nil
	if errors.As(err, &it.we) {
		it.failed = matchFailed(it.sb.points, it.we.Failed)
	}
}

// writeMany writes items in one WriteMany call and gives each item its series' outcome.
func (w *Writer) writeMany(ctx context.Context, sink ManySink, items []flushItem) {
	if err := ctx.Err(); err != nil {
		for i := range items {
			items[i].err, items[i].ctxEnded, items[i].skipped = err, true, true
		}
		return
	}
	batch := make([]tablets.SeriesPoints, len(items))
	for i, it := range items {
		batch[i] = tablets.SeriesPoints{Series: it.series, Points: it.sb.points}
	}
	err := sink.WriteMany(ctx, batch)
	if err == nil {
		return
	}
	ended := ctx.Err() != nil
	var parts []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		parts = j.Unwrap()
	}
	bySeries := map[string][]*tablets.WriteError{}
	if len(parts) == 0 {
		bySeries = nil // one error: nothing stored
	}
	for _, e := range parts {
		var we *tablets.WriteError
		if !errors.As(e, &we) {
			bySeries = nil // not a per-series report: every series failed
			break
		}
		bySeries[we.Series] = append(bySeries[we.Series], we)
	}
	for i := range items {
		it := &items[i]
		if bySeries == nil {
			it.err, it.ctxEnded = err, ended
			continue
		}
		wes := bySeries[it.series]
		if len(wes) == 0 {
			continue // stored
		}
		// One series may have several causes (rejected points, a failed write): the first
		// decides retry or give up, and the points failed are all of theirs.
		we := &tablets.WriteError{Series: it.series, Code: wes[0].Code, Index: wes[0].Index, Status: wes[0].Status, Err: wes[0].Err}
		for _, e := range wes {
			we.Failed = append(we.Failed, e.Failed...)
		}
		it.err, it.ctxEnded, it.we = we, ended, we
		it.failed = matchFailed(it.sb.points, we.Failed)
	}
}

type pointKey struct {
	sec  int64
	nsec int
	bits uint64
}

type timeKey struct {
	sec  int64
	nsec int
}

// matchFailed marks, for each point of failed, the earliest not yet marked argument with
// the same time and value. If a failed point matches no argument (a store that reports
// times it truncated, say), it returns nil: the whole call is retried rather than a point
// lost.
func matchFailed(points, failed []tablets.Point) []bool {
	marks := make([]bool, len(points))
	if len(failed) == 0 {
		return marks
	}
	at := make(map[pointKey][]int, len(failed))
	for _, p := range failed {
		at[pointKey{p.Time.Unix(), p.Time.Nanosecond(), math.Float64bits(p.Value)}] = nil
	}
	for i, p := range points {
		k := pointKey{p.Time.Unix(), p.Time.Nanosecond(), math.Float64bits(p.Value)}
		if idx, ok := at[k]; ok {
			at[k] = append(idx, i)
		}
	}
	for _, p := range failed {
		k := pointKey{p.Time.Unix(), p.Time.Nanosecond(), math.Float64bits(p.Value)}
		idx := at[k]
		if len(idx) == 0 {
			return nil
		}
		marks[idx[0]] = true
		at[k] = idx[1:]
	}
	return marks
}

// givenUp is a report of given-up points.
type givenUp struct {
	we  *tablets.WriteError
	err error // wraps ErrGivenUp and we
}

// settleLocked accounts for the outcome of a flush: it puts the points to retry back at the
// front of their series' buffers, gives up the others that failed, and accepts blocked Adds
// that fit now.
func (w *Writer) settleLocked(items []flushItem) (retryErrs []error, given []givenUp) {
	for i := range items {
		it := &items[i]
		points := it.sb.points
		if it.err == nil {
			w.stats.Written += int64(len(points))
			w.held -= len(points)
			w.recycleLocked(it.sb)
			continue
		}
		permanent := errors.Is(it.err, tablets.ErrInvalidSeries) || errors.Is(it.err, tablets.ErrInvalidTime)
		cause, code, index := it.err, "", -1
		if it.we != nil {
			code, index = it.we.Code, it.we.Index
			if it.we.Err != nil {
				cause = it.we.Err
			}
		}
		// A failed point is superseded when a later argument with the same time was stored.
		var superseded []bool
		if it.failed != nil {
			var storedLater map[timeKey]struct{}
			for j := len(points) - 1; j >= 0; j-- {
				k := timeKey{points[j].Time.Unix(), points[j].Time.Nanosecond()}
				if !it.failed[j] {
					if storedLater == nil {
						storedLater = make(map[timeKey]struct{})
					}
					storedLater[k] = struct{}{}
				} else if _, ok := storedLater[k]; ok {
					if superseded == nil {
						superseded = make([]bool, len(points))
					}
					superseded[j] = true
				}
			}
		}

		var retry *seriesBuf
		var gaveUp []tablets.Point
		written := 0
		for j, p := range points {
			if (it.failed != nil && !it.failed[j]) || (superseded != nil && superseded[j]) {
				written++
				continue
			}
			var a int32
			if j < len(it.sb.retries) {
				a = it.sb.retries[j]
			}
			if !it.ctxEnded {
				a++
			}
			if permanent || int(a) >= w.opts.MaxAttempts {
				gaveUp = append(gaveUp, p)
				continue
			}
			if retry == nil {
				retry = w.newBufLocked()
			}
			retry.points = append(retry.points, p)
			retry.retries = append(retry.retries, a)
		}
		w.stats.Written += int64(written)
		w.stats.GivenUp += int64(len(gaveUp))
		w.held -= written + len(gaveUp)
		if retry != nil {
			n := len(retry.points)
			we := &tablets.WriteError{Series: it.series, Failed: slices.Clone(retry.points), Code: code, Index: index, Err: cause}
			retryErrs = append(retryErrs, we)
			if cur := w.buf[it.series]; cur != nil { // added meanwhile: after the retries
				retry.points = append(retry.points, cur.points...)
				w.recycleLocked(cur)
			}
			w.buf[it.series] = retry
			w.waiting += n
			if !it.skipped {
				w.stats.Retried += int64(n)
			}
		}
		if len(gaveUp) > 0 {
			we := &tablets.WriteError{Series: it.series, Failed: gaveUp, Code: code, Index: index, Err: cause}
			given = append(given, givenUp{we: we, err: fmt.Errorf("%w: %w", ErrGivenUp, we)})
		}
		w.recycleLocked(it.sb)
	}
	w.admitLocked()
	return retryErrs, given
}

// report passes given-up points to OnError and returns their errors, or, without OnError,
// keeps the errors for drainKept.
func (w *Writer) report(given []givenUp) []error {
	if len(given) == 0 {
		return nil
	}
	if w.opts.OnError == nil {
		w.mu.Lock()
		defer w.mu.Unlock()
		for _, g := range given {
			if n := len(g.we.Failed); w.keptPoints+n <= w.limit {
				w.kept = append(w.kept, g.err)
				w.keptPoints += n
			} else {
				w.keptLost += int64(n)
			}
		}
		return nil
	}
	errs := make([]error, 0, len(given))
	for _, g := range given {
		w.opts.OnError(g.we.Series, g.we.Failed, g.err)
		errs = append(errs, g.err)
	}
	return errs
}

// drainKept returns and forgets the kept reports of given-up points.
func (w *Writer) drainKept() []error {
	w.mu.Lock()
	defer w.mu.Unlock()
	errs := w.kept
	if w.keptLost > 0 {
		errs = append(errs, fmt.Errorf("%w: %d more points, not kept (set Options.OnError to receive every one)", ErrGivenUp, w.keptLost))
	}
	w.kept, w.keptPoints, w.keptLost = nil, 0, 0
	return errs
}

// giveUpAll gives up every point waiting, with cause; the caller holds flushSem.
func (w *Writer) giveUpAll(cause error) []error {
	w.mu.Lock()
	var given []givenUp
	for s, sb := range w.buf {
		we := &tablets.WriteError{Series: s, Failed: slices.Clone(sb.points), Index: -1, Err: cause}
		given = append(given, givenUp{we: we, err: fmt.Errorf("%w: %w", ErrGivenUp, we)})
		w.stats.GivenUp += int64(len(sb.points))
		w.held -= len(sb.points)
		w.recycleLocked(sb)
	}
	clear(w.buf)
	w.waiting, w.fresh = 0, 0
	w.mu.Unlock()
	return w.report(given)
}
