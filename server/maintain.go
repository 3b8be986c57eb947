package server

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/maintain"
	"github.com/seed71701133/tablets/tsdb"
)

// MaintainOptions configure Maintain. Zero values mean the defaults.
type MaintainOptions struct {
	// CatchUp is how far before now compaction and rollup start when the database holds no
	// progress of theirs (default DefaultRollupCatchUp; a rollup never reaches past the
	// database's RawRetention).
	CatchUp time.Duration
	// From, if not zero, is where compaction and rollup start at the latest, before their
	// progress: after a backfill of older points. (A rollup still never reaches past
	// RawRetention, and the progress saved never moves backward.)
	From time.Time
	// Now is the clock (nil: the database's, tsdb.Options.Now).
	Now func() time.Time
}

// Step is what one step of Maintain did.
type Step struct {
	// Task is the step: "fold", "compact", "rollup", "flagged" (the rollup of the slices
	// that writes of late points marked dirty, tsdb.DB.RollupFlagged) or "retain".
	Task string
	// Took is how long the step took.
	Took time.Duration
	// Fold is what the fold did (Task "fold").
	Fold tsdb.FoldReport
	// FoldBusy is set when another process was folding the database: this fold left the
	// staged points to it (Task "fold").
	FoldBusy bool
	// From and To are the range compaction or rollup covered: from its start to where it
	// got (From == To: nothing to cover).
	From, To time.Time
	// Flagged is how many dirty markers the rollup of dirty slices cleared (Task "flagged").
	Flagged int
	// Dropped are the tables retention dropped (Task "retain").
	Dropped []string
	// Skipped is set for a retention step of a database without a raw or tier retention:
	// there is nothing to drop.
	Skipped bool
}

// Maintain does, once and now, what Run keeps doing on its timers, in order: it folds the
// staged points into the raw tables, compacts the chunks, rolls up the tiers and the slices
// that writes of late points marked dirty, and drops the tables past their retention
// (rolling up first what of them is not). Compaction and rollup cover from their progress
// in the database (where the last run of any server or Maintain ended; opts.CatchUp ago
// when there is none) to now (a rollup: to the database's SealDelay ago, windows are trusted once
// sealed), cut as Run cuts them, and record their progress as they go. Compaction also
// compacts again the quarter of an hour before its range, whose points the last fold may
// have left staged (Run's compaction, the fold interval too). A fold that finds another
// process folding leaves the staged points to it (Step.FoldBusy), and the run goes on.
//
// It yields each step once done, with its error, and stops after the first error (a later
// step may rely on an earlier one: compacting before a failed fold would compact days
// before their staged points are in). Bad options give a single yield, before any request,
// of an error wrapping tablets.ErrInvalidOptions (a From in the future or before
// tablets.MinTime: tablets.ErrInvalidTime).
func Maintain(ctx context.Context, db *tsdb.DB, opts *MaintainOptions) iter.Seq2[Step, error] {
	return func(yield func(Step, error) bool) {
		o, err := maintainDefaults(db, opts)
		if err != nil {
			yield(Step{}, err)
			return
		}
		dbOpts := db.Options()
		loops := schedule(Options{CompactEvery: 1, CompactCatchUp: o.CatchUp, RollupEvery: 1, RollupCatchUp: o.CatchUp, Now: o.Now}, dbOpts)
		steps := []func(context.Context) (Step, error){
			func(ctx context.Context) (Step, error) {
				r, err := db.Fold(ctx)
				if errors.Is(err, tsdb.ErrFoldBusy) {
					return Step{Task: "fold", FoldBusy: true}, nil
				}
				return Step{Task: "fold", Fold: r}, err
			},
		}
		compact := func(ctx context.Context, from, to time.Time) error {
			return db.Compact(ctx, refolded(from, 0), to)
		}
		for _, l := range loops {
			if l.name == "flagged" {
				steps = append(steps, func(ctx context.Context) (Step, error) {
					n, err := db.RollupFlagged(ctx)
					return Step{Task: l.name, Flagged: n}, err
				})
				continue
			}
			task, rangeTask := tsdb.TaskCompact, maintain.RangeTask(compact)
			if l.name == "rollup" {
				task, rangeTask = tsdb.TaskRollup, db.Rollup
			}
			l.opts.Progress = progress{db: db, task: task}
			if !o.From.IsZero() {
				l.opts.Progress = startAt{Progress: l.opts.Progress, from: o.From}
			}
			steps = append(steps, func(ctx context.Context) (Step, error) {
				r, err := maintain.Once(ctx, rangeTask, &l.opts)
				return Step{Task: l.name, From: r.From, To: r.To}, err
			})
		}
		steps = append(steps, func(ctx context.Context) (Step, error) {
			if !hasRetention(dbOpts) {
				return Step{Task: "retain", Skipped: true}, nil
			}
			dropped, err := db.Retain(ctx, o.Now())
			return Step{Task: "retain", Dropped: dropped}, err
		})
		for _, step := range steps {
			start := time.Now()
			s, err := step(ctx)
			s.Took = time.Since(start)
			if !yield(s, err) || err != nil {
				return
			}
		}
	}
}

func maintainDefaults(db *tsdb.DB, opts *MaintainOptions) (MaintainOptions, error) {
	if db == nil {
		return MaintainOptions{}, fmt.Errorf("server: %w: nil database", tablets.ErrInvalidOptions)
	}
	o := MaintainOptions{}
	if opts != nil {
		o = *opts
	}
	switch {
	case o.CatchUp < 0:
		return o, fmt.Errorf("server: %w: CatchUp %v is negative", tablets.ErrInvalidOptions, o.CatchUp)
	case o.CatchUp == 0:
		o.CatchUp = DefaultRollupCatchUp
	}
	if o.Now == nil {
		o.Now = db.Options().Now
	}
	if !o.From.IsZero() && (o.From.Before(tablets.MinTime) || o.From.After(o.Now())) {
		return o, fmt.Errorf("server: %w: From %s is not between %s and now", tablets.ErrInvalidTime,
			o.From.UTC().Format(time.RFC3339Nano), tablets.MinTime.Format(time.RFC3339))
	}
	return o, nil
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

// startAt is a progress whose Load says from, or the progress stored if earlier: a run
// starts there.
type startAt struct {
	maintain.Progress
	from time.Time
}

func (s startAt) Load(ctx context.Context) (time.Time, bool, error) {
	stored, ok, err := s.Progress.Load(ctx)
	if err != nil || ok && stored.Before(s.from) {
		return stored, ok, err
	}
	return s.from, true, nil
}
