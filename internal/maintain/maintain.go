// Package maintain runs background work on a timer: the one loop behind the rollup,
// compaction and retention of tsdb, chunked and the server.
//
// A ranged task (Ranges) is given, each interval, the time it has not yet covered: from
// where its last successful call ended up to now less its lag. A failed call does not
// advance that mark, so the next tick retries from the same start and an outage is caught up
// once the task succeeds again. The first tick starts at the catch-up horizon, so a process
// started after downtime covers what was missed meanwhile. A long range is cut into slices
// aligned to the Unix epoch, and the mark advances slice by slice: one call's memory and
// time stay bounded.
//
// Progress is kept in memory only: a restarted process starts again from its horizon. That
// is harmless, because the tasks run here (rollup, compaction) are idempotent and their
// writes conditional on ETags, so covering a range twice, or in several processes at once,
// only costs requests. Keeping progress in the account (a rollup watermark in the catalog) is
// issue 21's.
package maintain

import (
	"context"
	"fmt"
	"time"

	"github.com/seed71701133/tablets"
)

// RangeTask does a task's work for the time range [from, to).
type RangeTask func(ctx context.Context, from, to time.Time) error

// TickTask does a task's work as of now (retention: drop what is older than a limit).
type TickTask func(ctx context.Context, now time.Time) error

// Run is one call of a task, as Options.Report sees it: the range it covered (zero times
// for a TickTask) and its error (nil: done).
type Run struct {
	From, To time.Time
	Err      error
}

// Options configure a loop. Every is required; the others may be zero.
type Options struct {
	// Every is the interval between ticks; the first tick comes one interval after the start.
	Every time.Duration
	// Lag is how far behind now a range ends (a rollup's seal delay; 0 for compaction).
	Lag time.Duration
	// CatchUp is how far before now the first range starts. At least Lag; 0 means Lag: the
	// first tick covers nothing, and the loop starts from there.
	CatchUp time.Duration
	// Limit is how far before now a range may start at most (0: no limit): after an outage
	// longer than it, the older time is not covered. A rollup must not reach raw points
	// that retention may have dropped.
	Limit time.Duration
	// Slice bounds the range of one call: ranges are cut at multiples of Slice since the Unix
	// epoch (0: no cut).
	Slice time.Duration
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// Report is told of every call, successful or not, except one cut short because ctx
	// ended (nil: none).
	Report func(Run)
}

// Check reports bad options with an error wrapping tablets.ErrInvalidOptions, or nil.
func (o *Options) Check() error {
	switch {
	case o.Every <= 0:
		return fmt.Errorf("%w: interval %v must be positive", tablets.ErrInvalidOptions, o.Every)
	case o.Lag < 0 || o.CatchUp < 0 || o.Limit < 0 || o.Slice < 0:
		return fmt.Errorf("%w: lag %v, catch-up %v, limit %v and slice %v must not be negative", tablets.ErrInvalidOptions, o.Lag, o.CatchUp, o.Limit, o.Slice)
	case o.CatchUp != 0 && o.CatchUp < o.Lag:
		return fmt.Errorf("%w: catch-up %v is shorter than the lag %v", tablets.ErrInvalidOptions, o.CatchUp, o.Lag)
	case o.Limit != 0 && o.Limit < o.Lag:
		return fmt.Errorf("%w: limit %v is shorter than the lag %v", tablets.ErrInvalidOptions, o.Limit, o.Lag)
	}
	return nil
}

// Ranges calls task every opts.Every over the time not yet covered, until ctx is done; it
// then returns ctx's error. Bad options give an error wrapping tablets.ErrInvalidOptions
// before the first tick. A failed call is reported, and the loop goes on.
func Ranges(ctx context.Context, task RangeTask, opts *Options) error {
	o, err := checked(opts)
	if err != nil {
		return err
	}
	p := progress{opts: o}
	return every(ctx, o, func(now time.Time) { p.run(ctx, task, now) })
}

// Ticks calls task every opts.Every with the clock's time, until ctx is done; it then
// returns ctx's error. Only Every, Now and Report of opts apply.
func Ticks(ctx context.Context, task TickTask, opts *Options) error {
	o, err := checked(opts)
	if err != nil {
		return err
	}
	return every(ctx, o, func(now time.Time) {
		err := task(ctx, now)
		if ctx.Err() == nil && o.Report != nil {
			o.Report(Run{Err: err})
		}
	})
}

func checked(opts *Options) (Options, error) {
	if opts == nil {
		return Options{}, fmt.Errorf("%w: no options", tablets.ErrInvalidOptions)
	}
	o := *opts
	if err := o.Check(); err != nil {
		return o, err
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o, nil
}

// every calls tick with the clock's time every o.Every until ctx is done. A tick that takes
// longer than the interval delays the next; missed ticks are not made up (the next range
// covers them).
func every(ctx context.Context, o Options, tick func(now time.Time)) error {
	t := time.NewTicker(o.Every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		tick(o.Now())
	}
}

// progress is how far a ranged task got.
type progress struct {
	opts Options
	mark time.Time // end of the last successful call (the catch-up horizon before); zero before the first tick
}

// run covers [mark, now-Lag) slice by slice, and stops at the first failure.
func (p *progress) run(ctx context.Context, task RangeTask, now time.Time) {
	o := p.opts
	end := now.Add(-o.Lag)
	if p.mark.IsZero() {
		p.mark = now.Add(-max(o.CatchUp, o.Lag))
	}
	from := p.mark
	if o.Limit > 0 {
		from = later(from, now.Add(-o.Limit))
	}
	for from.Before(end) && ctx.Err() == nil {
		to := end
		if o.Slice > 0 {
			to = earlier(end, nextBoundary(from, o.Slice))
		}
		err := task(ctx, from, to)
		if ctx.Err() != nil {
			return // cut short: neither a failure nor progress
		}
		if o.Report != nil {
			o.Report(Run{From: from, To: to, Err: err})
		}
		if err != nil {
			return
		}
		p.mark, from = to, to
	}
}

// nextBoundary is the first multiple of d since the Unix epoch after t.
func nextBoundary(t time.Time, d time.Duration) time.Time {
	sinceEpoch := t.Sub(time.Unix(0, 0)) // saturates far from 1970: fine for a cut
	r := sinceEpoch % d
	if r < 0 {
		r += d
	}
	return t.Add(d - r)
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
