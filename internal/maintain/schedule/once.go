package schedule

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

// OnceOptions configure Once. Zero values mean the defaults.
type OnceOptions struct {
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

// Once calls, once and now, the step of every task Run keeps calling, in order: it folds the
// staged points into the raw tables, compacts the chunks, rolls up the tiers and the slices
// that writes of late points marked dirty, and drops the tables past their retention
// (rolling up first what of them is not). Compaction and rollup cover from their progress
// in the database (where the last run of any process ended; opts.CatchUp ago when there is
// none) to now (a rollup: to the database's SealDelay ago, windows are trusted once sealed),
// cut as Run cuts them, and record their progress as they go. Compaction also compacts again
// the quarter of an hour before its range, whose points the last fold may have left staged
// (Run's compaction, the fold interval too). A fold that finds another process folding
// leaves the staged points to it (Step.FoldBusy), and the run goes on; so does a
// compaction or rollup that finds another process holding its lease (Step.Busy: a
// server's scheduler keeps the compaction's between its ticks).
//
// It yields each step once done, with its error, and stops after the first error (a later
// step may rely on an earlier one: compacting before a failed fold would compact days
// before their staged points are in). Bad options give a single yield, before any request,
// of an error wrapping tablets.ErrInvalidOptions (a From in the future or before
// tablets.MinTime: tablets.ErrInvalidTime).
func Once(ctx context.Context, db *tsdb.DB, opts *OnceOptions) iter.Seq2[Step, error] {
	return func(yield func(Step, error) bool) {
		o, err := onceDefaults(db, opts)
		if err != nil {
			yield(Step{}, err)
			return
		}
		// An interval for each task, that it runs; Once ignores them. A fold runs just
		// before the compaction: no margin for the folds of a loop.
		all, err := tasks(db, Options{FoldEvery: 1, CompactEvery: 1, CompactCatchUp: o.CatchUp, RollupEvery: 1,
			RollupCatchUp: o.CatchUp, RetainEvery: 1, Now: o.Now}, 0, false)
		if err != nil {
			yield(Step{}, err)
			return
		}
		for _, t := range all {
			start := time.Now()
			var s Step
			if t.Ranges != nil {
				if !o.From.IsZero() {
					t.Opts.Progress = startAt{Progress: t.Opts.Progress, from: o.From}
				}
				var r maintain.Run
				r, err = maintain.Once(ctx, t.Ranges, &t.Opts)
				s = Step{From: r.From, To: r.To}
			} else {
				s, err = t.Tick(ctx, o.Now())
			}
			s.Task, s.Took = t.Name, time.Since(start)
			if errors.Is(err, tsdb.ErrTaskBusy) {
				s.Busy, err = true, nil // the other process's to do
			}
			if !yield(s, err) || err != nil {
				return
			}
		}
	}
}

func onceDefaults(db *tsdb.DB, opts *OnceOptions) (OnceOptions, error) {
	if db == nil {
		return OnceOptions{}, fmt.Errorf("schedule: %w: nil database", tablets.ErrInvalidOptions)
	}
	o := OnceOptions{}
	if opts != nil {
		o = *opts
	}
	switch {
	case o.CatchUp < 0:
		return o, fmt.Errorf("schedule: %w: CatchUp %v is negative", tablets.ErrInvalidOptions, o.CatchUp)
	case o.CatchUp == 0:
		o.CatchUp = DefaultRollupCatchUp
	}
	if o.Now == nil {
		o.Now = db.Options().Now
	}
	if !o.From.IsZero() && (o.From.Before(tablets.MinTime) || o.From.After(o.Now())) {
		return o, fmt.Errorf("schedule: %w: From %s is not between %s and now", tablets.ErrInvalidTime,
			o.From.UTC().Format(time.RFC3339Nano), tablets.MinTime.Format(time.RFC3339))
	}
	return o, nil
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
