// Package schedule is the one scheduler of a tsdb database's maintenance: which step of the
// database each task calls (the fold of the staged points, compaction, rollup, the rollup
// of the slices late writes marked dirty, retention), when, over which range and under which
// progress key of the catalog. Run keeps calling them on their timers: the server's loops
// (`tablets serve`). Once calls each once, now, in order: `tablets maintain`. The tests drive
// the same two; nothing else loops (tsdb and chunked offer the single-pass steps only).
//
// It is a package of its own, not part of the server, so that it stays lean: no Prometheus,
// no HTTP. The server adds what is its own through Hooks: its bound on the background jobs
// and the class of their requests (Hooks.Do), its metrics and logs (Hooks.Report). The
// timing (ticks on interval boundaries, the ranges not yet covered, cut in slices, their
// progress) is internal/maintain's.
package schedule

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/maintain"
	"github.com/seed71701133/tablets/tsdb"
)

// The tasks, by name (the server's metrics and logs name them so too).
const (
	Fold    = "fold"    // tsdb.DB.Fold: the staged points into the raw tables
	Compact = "compact" // tsdb.DB.Compact of the time since the last compaction
	Rollup  = "rollup"  // tsdb.DB.Rollup of the windows sealed since the last rollup
	Flagged = "flagged" // tsdb.DB.RollupFlagged: the slices late writes marked dirty
	Retain  = "retain"  // tsdb.DB.Retain: drop the tables past their retention; expire kept answers
)

// Defaults of Options.
const (
	DefaultRollupCatchUp  = 72 * time.Hour
	DefaultCompactCatchUp = 24 * time.Hour
	DefaultRollupGrain    = 15 * time.Minute
)

// Options are when the tasks run (the server's options, their defaults applied). A task
// whose interval is not positive does not run.
type Options struct {
	// FoldEvery is the interval of the fold.
	FoldEvery time.Duration
	// CompactEvery is the interval of compaction.
	CompactEvery time.Duration
	// CompactPhase delays compaction's ticks past the multiples of CompactEvery, modulo it
	// (maintain.Options.Phase).
	CompactPhase time.Duration
	// CompactCatchUp is how far back the first compaction of a database starts, when it
	// holds no progress of a compaction (0: DefaultCompactCatchUp).
	CompactCatchUp time.Duration
	// RollupEvery is the interval of the rollup, and of the rollup of the slices late
	// writes marked dirty (flagged, with tiers only).
	RollupEvery time.Duration
	// RollupCatchUp is how far back the first rollup of a database starts, when it holds no
	// progress of a rollup (0: DefaultRollupCatchUp). It is at least the database's
	// SealDelay (a catch-up within it covers nothing at first: windows are trusted once
	// sealed) and at most its RawRetention (the raw points of older windows may be gone).
	RollupCatchUp time.Duration
	// RollupGrain is the span of sealed windows a rollup waits for (0: DefaultRollupGrain;
	// negative: none): its ranges end at multiples of it since the Unix epoch, so that a
	// rollup every minute runs at every quarter of an hour (internal/maintain's
	// Options.Grain). A rollup of a quarter of an hour's windows writes them as tails beside
	// the blocks of the finest tier (docs/format.md, "Tails"), and splices them into the
	// blocks once a segment (4 hours); one of fewer windows (a rollup every minute) rewrites
	// every series' block for the windows sealed since the last, 1,440 times a day. The
	// windows not rolled up yet are read raw.
	RollupGrain time.Duration
	// RollupDelay is how much further behind the database's SealDelay the rollup's ranges
	// end (0: none; not negative): tablets serve spreads its tenants' rollups, which would
	// all begin at the same minute, by a delay each tenant's name fixes.
	RollupDelay time.Duration
	// RetainEvery is the interval of retention.
	RetainEvery time.Duration
	// Now is the clock of the ranges and of retention (nil: the database's,
	// tsdb.Options.Now). The ticks come by the real clock (see internal/maintain).
	Now func() time.Time
}

// Task is one of the database's maintenance tasks: when it runs, and its step. A ranged
// task (compaction, rollup) has Ranges, the others Tick.
type Task struct {
	// Name is the task's: Fold, Compact, Rollup, Flagged or Retain.
	Name string
	// Opts are when the task runs and, for a ranged task, over which range and where its
	// progress is kept (Report is Run's own).
	Opts maintain.Options
	// Ranges is a ranged task's step: its work over [from, to).
	Ranges maintain.RangeTask
	// Tick is the step of the others, as of now.
	Tick func(ctx context.Context, now time.Time) (Step, error)
	// Stop, if set, is called once Run's loops have stopped, its context ended: the
	// compaction's ends the lease its loop keeps between its ticks (tsdb.Tasks.ReleaseKept),
	// so that another process takes the task over at its next tick.
	Stop func(ctx context.Context) error
}

// Step is what one call of a task's step did.
type Step struct {
	// Task is the task's name.
	Task string
	// Took is how long the step took (its turn among the jobs, Hooks.Do, not counted).
	Took time.Duration
	// From and To are the range a ranged task covered: Run's, one slice; Once's, from its
	// start to where it got (From == To: nothing to cover). Both zero with an error: the
	// task's progress could not be read, and nothing was done.
	From, To time.Time
	// SaveErr is Run's failure to record the progress after a successful call of a ranged
	// task: the range is covered and the loop goes on from its end, but a process started
	// before a later save succeeds covers it again. (Once returns it as the step's error.)
	SaveErr error
	// Fold is what the fold did (Task Fold).
	Fold tsdb.FoldReport
	// FoldBusy is set when another process was folding the database: this fold left the
	// staged points to it (Task Fold).
	FoldBusy bool
	// Busy is set by Once when another process held the task's lease (Tasks Compact,
	// Rollup, Flagged): running it, or keeping it for its next run (a server's scheduler
	// keeps the compaction's between its ticks); the task was left to it.
	Busy bool
	// Flagged is how many dirty markers the rollup of dirty slices cleared (Task Flagged).
	Flagged int
	// Dropped are the tables retention dropped (Task Retain).
	Dropped []string
	// Skipped is set for a retention of a database without a raw or tier retention: there
	// is nothing to drop (the kept answers are still expired).
	Skipped bool
	// Expired is how many kept answers nobody wrote for tsdb.AnswerLife the retention
	// deleted (Task Retain).
	Expired int
}

// tierBlockWindows is the number of windows of a tier block (docs/format.md).
const tierBlockWindows = 24

// Plan is when and over what range the tasks run, for o and a database of options db: the
// tasks that run, without their steps, in the order a run of them all takes (Once's):
// fold, compact, rollup, flagged, retain. A negative catch-up gives an error wrapping
// tablets.ErrInvalidOptions.
func Plan(o Options, db tsdb.Options) ([]Task, error) {
	if o.RollupCatchUp < 0 || o.CompactCatchUp < 0 || o.RollupDelay < 0 || o.CompactPhase < 0 {
		return nil, fmt.Errorf("schedule: %w: RollupCatchUp %v, CompactCatchUp %v, RollupDelay %v and CompactPhase %v must not be negative",
			tablets.ErrInvalidOptions, o.RollupCatchUp, o.CompactCatchUp, o.RollupDelay, o.CompactPhase)
	}
	var tasks []Task
	if o.FoldEvery > 0 {
		tasks = append(tasks, Task{Name: Fold, Opts: maintain.Options{Every: o.FoldEvery}})
	}
	if o.CompactEvery > 0 {
		// Cut at days: a chunked partition is a day by default, and compacted whole.
		tasks = append(tasks, Task{Name: Compact, Opts: maintain.Options{Every: o.CompactEvery, Phase: o.CompactPhase,
			CatchUp: orDefault(o.CompactCatchUp, DefaultCompactCatchUp), Slice: 24 * time.Hour}})
	}
	if o.RollupEvery > 0 {
		// Windows are trusted once sealed; their raw points are kept RawRetention at least.
		lag := db.SealDelay + o.RollupDelay
		catchUp, limit := max(orDefault(o.RollupCatchUp, DefaultRollupCatchUp), lag), time.Duration(0)
		if db.RawRetention > 0 {
			limit = max(db.RawRetention, lag)
			catchUp = min(catchUp, limit)
		}
		var slice time.Duration // a block of the coarsest tier: Rollup works whole ones
		if len(db.Tiers) > 0 {
			slice = db.Tiers[len(db.Tiers)-1].Step * tierBlockWindows
		}
		grain := max(orDefault(o.RollupGrain, DefaultRollupGrain), 0)
		tasks = append(tasks, Task{Name: Rollup, Opts: maintain.Options{Every: o.RollupEvery, Lag: lag,
			CatchUp: catchUp, Limit: limit, Slice: slice, Grain: grain}})
		if len(db.Tiers) > 0 {
			tasks = append(tasks, Task{Name: Flagged, Opts: maintain.Options{Every: o.RollupEvery}})
		}
	}
	if o.RetainEvery > 0 {
		tasks = append(tasks, Task{Name: Retain, Opts: maintain.Options{Every: o.RetainEvery}})
	}
	now := o.Now
	if now == nil {
		now = db.Now
	}
	for i := range tasks {
		tasks[i].Opts.Now = now
	}
	return tasks, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// Tasks is Plan on db, with each task's step and the ranged tasks' progress in db's
// catalog (tsdb.TaskCompact, tsdb.TaskRollup): where the last run of any process ended.
func Tasks(db *tsdb.DB, o Options) ([]Task, error) {
	return tasks(db, o, o.FoldEvery, true)
}

// tasks is Tasks, with the compaction's margin for the folds that run every foldEvery (see
// refolded); keep keeps the compaction's lease for the next tick (a loop's; Once's runs no
// other).
func tasks(db *tsdb.DB, o Options, foldEvery time.Duration, keep bool) ([]Task, error) {
	if db == nil {
		return nil, fmt.Errorf("schedule: %w: nil database", tablets.ErrInvalidOptions)
	}
	dbOpts := db.Options()
	plan, err := Plan(o, dbOpts)
	if err != nil {
		return nil, err
	}
	for i := range plan {
		t := &plan[i]
		switch t.Name {
		case Fold:
			t.Tick = func(ctx context.Context, _ time.Time) (Step, error) {
				r, err := db.Fold(ctx)
				if errors.Is(err, tsdb.ErrFoldBusy) {
					return Step{FoldBusy: true}, nil // the other process folds what this one would
				}
				return Step{Fold: r}, err
			}
		case Compact:
			// The lease kept until this process's next tick, and a minute more: its
			// compactions remember the tables they left with nothing to merge.
			var kept *tsdb.ExclusiveOptions
			if keep {
				kept = &tsdb.ExclusiveOptions{KeepFor: t.Opts.Every + compactKeepSlack}
			}
			t.Ranges = func(ctx context.Context, from, to time.Time) error {
				return db.Tasks().Exclusive(ctx, tsdb.TaskCompact, func(ctx context.Context) error {
					return db.Compact(ctx, refolded(from, max(foldEvery, 0)+dbOpts.FoldDelay), to)
				}, kept)
			}
			t.Opts.Progress = progress{db: db, task: tsdb.TaskCompact}
			if keep {
				t.Stop = func(ctx context.Context) error { return db.Tasks().ReleaseKept(ctx) }
			}
		case Rollup:
			t.Ranges = func(ctx context.Context, from, to time.Time) error {
				return db.Tasks().Exclusive(ctx, tsdb.TaskRollup, func(ctx context.Context) error { return db.Rollup(ctx, from, to) }, nil)
			}
			t.Opts.Progress = progress{db: db, task: tsdb.TaskRollup}
		case Flagged:
			t.Tick = func(ctx context.Context, _ time.Time) (Step, error) {
				var n int
				err := db.Tasks().Exclusive(ctx, tsdb.TaskFlagged, func(ctx context.Context) (err error) {
					n, err = db.RollupFlagged(ctx)
					return err
				}, nil)
				return Step{Flagged: n}, err
			}
		case Retain:
			t.Tick = func(ctx context.Context, now time.Time) (Step, error) {
				expired, err := db.Answers().Expire(ctx, now)
				if err != nil {
					return Step{}, err
				}
				if !hasRetention(dbOpts) {
					return Step{Skipped: true, Expired: expired}, nil
				}
				dropped, err := db.Retain(ctx, now)
				return Step{Dropped: dropped, Expired: expired}, err
			}
		}
	}
	return plan, nil
}

// compactKeepSlack is how much longer than its interval a process keeps the compaction's
// lease after a run (tsdb.ExclusiveOptions.KeepFor): its next tick comes an interval
// later, the lease must still be its own then, however late the run ended or the tick
// comes. Another process takes the compaction over that much after the keeper's last run.
const compactKeepSlack = time.Minute

// stagedFor is about how long a staged point may wait after its arrival before a Fold may
// fold it: tsdb folds an arrival bucket (10 minutes) 5 minutes after its end, and its
// Options.FoldDelay later (added to the fold's interval where refolded is called).
const stagedFor = 15 * time.Minute

// refolded is where a compaction of a range starting at from starts, when folds run every
// foldEvery (0: only just before it, as Once's): the points staged when the last compaction
// ran may have arrived up to stagedFor before its end, and be folded up to foldEvery later,
// into days it compacted; compacted again, their chunks are merged. Compaction works whole
// days, so that costs more only on the day after a day boundary.
func refolded(from time.Time, foldEvery time.Duration) time.Time {
	start := from.Add(-max(foldEvery, 0) - stagedFor)
	if start.Before(tablets.MinTime) {
		return tablets.MinTime
	}
	return start
}

// hasRetention reports whether Retain may drop anything in a database of these options.
func hasRetention(o tsdb.Options) bool {
	if o.RawRetention > 0 {
		return true
	}
	for _, t := range o.Tiers {
		if t.Retention > 0 {
			return true
		}
	}
	return false
}

// progress is a task's progress in the database's catalog, as a loop keeps it.
type progress struct {
	db   *tsdb.DB
	task string
}

func (p progress) Load(ctx context.Context) (time.Time, bool, error) {
	return p.db.Tasks().Covered(ctx, p.task)
}

func (p progress) Save(ctx context.Context, t time.Time) error {
	return p.db.Tasks().SetCovered(ctx, p.task, t)
}
