// Package maintain runs background work on a timer: the timing of the one scheduler of a
// database's fold, compaction, rollup and retention (package schedule, below it: the
// server's loops and `tablets maintain`). It knows no database: a task is a function.
//
// A ranged task (Ranges) is given, each interval, the time it has not yet covered: from
// where its last successful call ended up to now less its lag. A failed call does not
// advance that mark, so the next tick retries from the same start and an outage is caught up
// once the task succeeds again. The first tick starts at the stored progress (below), else at
// the catch-up horizon, so a process started after downtime covers what was missed
// meanwhile. A long range is cut into slices aligned to the Unix epoch, and the mark advances
// slice by slice: one call's memory and time stay bounded. A grain (Options.Grain) makes a
// loop that ticks often cover the time in whole spans of it, for a task whose every call
// costs much more than its range.
//
// With Options.Progress the mark is also kept outside the process (tsdb keeps it in its
// catalog): each tick starts from the later of its own mark and the stored one, so a process
// restarted after hours of downtime covers them (from where it stopped, not from a fixed
// lookback), and several processes on one database follow each other instead of each
// covering everything. Without it the mark is in memory only, and a restarted process starts
// again from its horizon. Either way covering a range twice, or in several processes at
// once, only costs requests: the tasks run here (rollup, compaction) are idempotent and their
// writes conditional on ETags.
//
// Once is one tick, now, for a command run by hand or by cron.
package maintain

import (
	"cmp"
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
// for a TickTask, and for a failure to load the progress) and its error (nil: done).
type Run struct {
	From, To time.Time
	Err      error
	// SaveErr is the failure to save the progress after a successful call (Err nil): the
	// range is covered, and the loop goes on from its end, but a process started before a
	// later save succeeds covers it again.
	SaveErr error
}

// Progress is where a ranged task's mark is kept outside the process.
type Progress interface {
	// Load returns where the last successful run ended (ok false: never ran).
	Load(ctx context.Context) (covered time.Time, ok bool, err error)
	// Save records that everything before covered is done. It never moves backward:
	// concurrent savers (several servers) keep the latest.
	Save(ctx context.Context, covered time.Time) error
}

// Options configure a loop. Every is required; the others may be zero.
type Options struct {
	// Every is the interval between ticks. They come at its multiples since the Unix epoch
	// (on the real clock), plus Phase: the first at the next one after the start.
	Every time.Duration
	// Phase delays every tick past the multiples of Every, taken modulo Every (0: on them).
	// Loops of one kind in many databases tick on the same instants otherwise, and a task
	// whose requests are scans (a compaction's) then holds the account for all of them at
	// once; each database given its own phase, they follow each other.
	Phase time.Duration
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
	// Grain, when positive, cuts the end of a tick's range down to a multiple of Grain since
	// the Unix epoch: the time after it waits for a later tick. A loop that ticks more often
	// than Grain then covers the time in whole spans of Grain, each once, for a task whose
	// every call costs much more than its range (a rollup rewrites whole blocks of windows
	// for the few it adds). A tick whose range the cut leaves empty reports a Run with From
	// equal to To (nothing covered, no error): the loop is alive, and waits. Once does not
	// cut: it covers up to now less Lag.
	Grain time.Duration
	// Progress keeps the mark outside the process (nil: in memory only). Each tick loads it
	// first: a tick whose Load fails is reported (a Run with only Err) and covers nothing,
	// and the next tries again. Falling back to the horizon instead would skip, for good,
	// the time between the stored mark and the horizon. After each successful call the
	// tick saves the call's end.
	Progress Progress
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// Report is told of every call, successful or not, except one cut short because ctx
	// ended, of every failed Load of Progress, and of every tick Grain left nothing to
	// cover (nil: none).
	Report func(Run)
}

// Check reports bad options with an error wrapping tablets.ErrInvalidOptions, or nil.
func (o *Options) Check() error {
	if o.Every <= 0 {
		return fmt.Errorf("%w: interval %v must be positive", tablets.ErrInvalidOptions, o.Every)
	}
	if o.Phase < 0 {
		return fmt.Errorf("%w: phase %v must not be negative", tablets.ErrInvalidOptions, o.Phase)
	}
	return o.checkRange()
}

// checkRange checks the options of the range a tick covers (all but Every).
func (o *Options) checkRange() error {
	switch {
	case o.Lag < 0 || o.CatchUp < 0 || o.Limit < 0 || o.Slice < 0 || o.Grain < 0:
		return fmt.Errorf("%w: lag %v, catch-up %v, limit %v, slice %v and grain %v must not be negative", tablets.ErrInvalidOptions, o.Lag, o.CatchUp, o.Limit, o.Slice, o.Grain)
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

// Once does one tick of Ranges now (by opts.Now): it covers the time not yet covered by
// opts.Progress (from the catch-up horizon when it holds none), up to now less the lag,
// slice by slice, saving the progress after each slice. Every of opts does not apply. It
// returns the range it covered, from its start to where it got (From == To: nothing to
// cover), and the first error: loading the progress (then nothing is covered), a call of
// task, or saving the progress. Bad options give an error wrapping
// tablets.ErrInvalidOptions before any call.
func Once(ctx context.Context, task RangeTask, opts *Options) (Run, error) {
	if opts == nil {
		return Run{}, fmt.Errorf("%w: no options", tablets.ErrInvalidOptions)
	}
	o := *opts
	if err := o.checkRange(); err != nil {
		return Run{}, err
	}
	o.Grain = 0 // a run by hand covers everything there is
	if o.Now == nil {
		o.Now = time.Now
	}
	report := o.Report
	var failed error
	o.Report = func(r Run) {
		if failed == nil {
			failed = cmp.Or(r.Err, r.SaveErr)
		}
		if report != nil {
			report(r)
		}
	}
	p := progress{opts: o}
	covered := p.run(ctx, task, o.Now())
	if err := ctx.Err(); err != nil && failed == nil {
		failed = err
	}
	return covered, failed
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

// every calls tick with the clock's time at every multiple of o.Every since the Unix epoch
// plus o.Phase (on the real clock, as a ticker would), until ctx is done. A tick that takes
// longer than the interval delays the next; missed ticks are not made up (the next range
// covers them).
// Ticks on boundaries, not an interval after the start, so that a restart postpones
// nothing: with a ticker from the start, a server restarted every 30 minutes never ran its
// hourly fold. Servers on one database then tick together; their tasks are safe to run at
// once (the fold takes a lease, the others are idempotent).
func every(ctx context.Context, o Options, tick func(now time.Time)) error {
	for {
		now := time.Now()
		phase := o.Phase % o.Every
		t := time.NewTimer(nextBoundary(now.Add(-phase), o.Every).Add(phase).Sub(now))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		tick(o.Now())
	}
}

// progress is how far a ranged task got.
type progress struct {
	opts    Options
	mark    time.Time // end of the last successful call (the catch-up horizon before); zero before the first tick
	unsaved bool      // mark is later than what Progress last saved
}

// run covers [mark, now-Lag) slice by slice, and stops at the first failure. It returns the
// range it covered: its start, and where it got.
func (p *progress) run(ctx context.Context, task RangeTask, now time.Time) Run {
	o := p.opts
	if !p.load(ctx, now) {
		return Run{}
	}
	if p.unsaved {
		_ = p.save(ctx) // the last tick's save failed (reported then): its range is done
	}
	end := now.Add(-o.Lag)
	from := p.mark
	if o.Limit > 0 {
		from = later(from, now.Add(-o.Limit))
	}
	covered := Run{From: from, To: from}
	if o.Grain > 0 && from.Before(end) {
		end = lastBoundary(end, o.Grain)
		if !from.Before(end) {
			if o.Report != nil {
				o.Report(covered) // less than a grain to cover: it waits
			}
			return covered
		}
	}
	for from.Before(end) && ctx.Err() == nil {
		to := end
		if o.Slice > 0 {
			to = earlier(end, nextBoundary(from, o.Slice))
		}
		err := task(ctx, from, to)
		if ctx.Err() != nil {
			return covered // cut short: neither a failure nor progress
		}
		r := Run{From: from, To: to, Err: err}
		if err == nil {
			p.mark, from, covered.To = to, to, to
			p.unsaved = o.Progress != nil
			r.SaveErr = p.save(ctx)
		}
		if o.Report != nil && ctx.Err() == nil {
			o.Report(r)
		}
		if err != nil {
			return covered
		}
	}
	return covered
}

// load sets the mark from the stored progress (when later than its own), or the horizon on
// the first tick; false: loading failed (reported), and the tick covers nothing.
func (p *progress) load(ctx context.Context, now time.Time) bool {
	o := p.opts
	if o.Progress != nil {
		stored, ok, err := o.Progress.Load(ctx)
		if ctx.Err() != nil {
			return false
		}
		if err != nil {
			if o.Report != nil {
				o.Report(Run{Err: fmt.Errorf("maintain: load progress: %w", err)})
			}
			return false
		}
		if ok && !stored.Before(p.mark) {
			p.mark, p.unsaved = stored, false // another process got as far
		}
	}
	if p.mark.IsZero() {
		p.mark = now.Add(-max(o.CatchUp, o.Lag))
	}
	return true
}

// save stores the mark in Progress (if any).
func (p *progress) save(ctx context.Context) error {
	if p.opts.Progress == nil {
		return nil
	}
	if err := p.opts.Progress.Save(ctx, p.mark); err != nil {
		return fmt.Errorf("maintain: save progress: %w", err)
	}
	p.unsaved = false
	return nil
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

// lastBoundary is the last multiple of d since the Unix epoch at or before t.
func lastBoundary(t time.Time, d time.Duration) time.Time { return nextBoundary(t, d).Add(-d) }

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
