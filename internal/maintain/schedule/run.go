package schedule

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/maintain"
)

// Hooks are what a caller of Run adds to the calls of the steps. Either may be nil.
type Hooks struct {
	// Do makes each call of a task's step: it calls call, with ctx or a context derived
	// from it, and returns its error (nil Do: call(ctx)). The server waits there for the
	// call's turn among its background jobs, and marks its requests background.
	Do func(ctx context.Context, task string, call func(context.Context) error) error
	// Report is told of each call of a step, with its error (nil: done), except a call cut
	// short because ctx ended; of each failure to read a ranged task's progress (a Step
	// with only Task, and the error), after which that tick does nothing; and of each tick
	// of the rollup that its grain left nothing to cover (a Step whose From equals To, no
	// error); and of a Task.Stop's failure (a Step with only Task).
	Report func(Step, error)
}

// Run calls each task's step on its timer, each task in a goroutine of its own, until ctx
// is done; it then calls the tasks' Stops and returns ctx's error. A failed call is
// reported, and its task goes on: a ranged task's next tick retries from the same start.
// Bad options (or a task without a step) give an error wrapping tablets.ErrInvalidOptions
// before any call.
func Run(ctx context.Context, tasks []Task, hooks *Hooks) error {
	var h Hooks
	if hooks != nil {
		h = *hooks
	}
	for _, t := range tasks {
		if err := t.Opts.Check(); err != nil {
			return fmt.Errorf("schedule: %s: %w", t.Name, err)
		}
		if (t.Ranges == nil) == (t.Tick == nil) {
			return fmt.Errorf("schedule: %w: task %q needs one step, Ranges or Tick", tablets.ErrInvalidOptions, t.Name)
		}
	}
	errs := make([]error, len(tasks))
	var wg sync.WaitGroup
	for i, t := range tasks {
		wg.Go(func() { errs[i] = t.loop(ctx, h) })
	}
	wg.Wait()
	stop(ctx, tasks, h)
	for _, err := range errs {
		if err != nil && !errors.Is(err, ctx.Err()) {
			return fmt.Errorf("schedule: %w", err) // the options were checked: a bug
		}
	}
	return ctx.Err()
}

// stopTimeout bounds the tasks' Stops: a lease left unreleased ends by itself.
const stopTimeout = 10 * time.Second

// stop calls the tasks' Stops, once their loops have stopped, and reports their failures.
func stop(ctx context.Context, tasks []Task, h Hooks) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopTimeout)
	defer cancel()
	for _, t := range tasks {
		if t.Stop == nil {
			continue
		}
		if err := t.Stop(ctx); err != nil && h.Report != nil {
			h.Report(Step{Task: t.Name}, fmt.Errorf("stopping: %w", err))
		}
	}
}

// loop calls t's step on its timer until ctx is done.
func (t Task) loop(ctx context.Context, h Hooks) error {
	do := func(ctx context.Context, call func(context.Context) error) error {
		if h.Do == nil {
			return call(ctx)
		}
		return h.Do(ctx, t.Name, call)
	}
	report := func(s Step, err error) {
		if h.Report != nil {
			s.Task = t.Name
			h.Report(s, err)
		}
	}
	o := t.Opts
	if t.Ranges != nil {
		var took time.Duration // of the call reported next: Report follows it in this goroutine
		o.Report = func(r maintain.Run) {
			report(Step{Took: took, From: r.From, To: r.To, SaveErr: r.SaveErr}, r.Err)
			took = 0
		}
		return maintain.Ranges(ctx, func(ctx context.Context, from, to time.Time) error {
			return do(ctx, func(ctx context.Context) error {
				start := time.Now()
				err := t.Ranges(ctx, from, to)
				took = time.Since(start)
				return err
			})
		}, &o)
	}
	o.Report = nil // reported below, with the step
	return maintain.Ticks(ctx, func(ctx context.Context, now time.Time) error {
		var s Step
		err := do(ctx, func(ctx context.Context) error {
			start := time.Now()
			var err error
			s, err = t.Tick(ctx, now)
			s.Took = time.Since(start)
			return err
		})
		if ctx.Err() == nil {
			report(s, err)
		}
		return err
	}, &o)
}
