package tsdb

import (
	"context"
	"fmt"
	"time"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/maintain"
)

// KeepRolledUp rolls up, every interval, the windows sealed since its last successful run
// (Rollup up to SealDelay ago: windows are trusted only once sealed), until ctx is done; it
// then returns ctx's error. Its progress is kept in the catalog (Covered, TaskRollup), shared
// by every process: a run starts where the last successful one of any process ended, and
// the first run of a database lookback ago. A run that fails is retried by the next from the
// same start, so an outage or a restart is caught up, up to lookback back (and never past
// RawRetention, whose points may be gone). A run is cut into blocks of the coarsest
// tier, each rolled up once it is done. Every interval it also runs RollupFlagged, which
// recomputes the slices that writes of late points marked dirty. report (nil: none) is told
// of each, its range and its error (nil: rolled up; zero times: the progress could not be
// read, and nothing was done, or RollupFlagged failed), and the loop goes on. Run it in a goroutine of a long-running process instead of a
// cron job; several processes may run it at once (their writes of a block are conditional
// on its ETag). lookback must exceed SealDelay, else the error wraps
// tablets.ErrInvalidOptions.
func (db *DB) KeepRolledUp(ctx context.Context, interval, lookback time.Duration, report func(from, to time.Time, err error)) error {
	return db.tiers.keepRolledUp(ctx, interval, lookback, report)
}

// keepRolledUp is DB.KeepRolledUp.
func (tr *tiers) keepRolledUp(ctx context.Context, interval, lookback time.Duration, report func(from, to time.Time, err error)) error {
	if retention := tr.opts.RawRetention; retention > 0 && lookback > retention {
		lookback = retention
	}
	if interval <= 0 || lookback <= tr.opts.SealDelay {
		return fmt.Errorf("tsdb: KeepRolledUp: %w: interval %v must be positive and lookback %v (at most RawRetention) over SealDelay %v",
			tablets.ErrInvalidOptions, interval, lookback, tr.opts.SealDelay)
	}
	var slice time.Duration
	if tiers := tr.opts.Tiers; len(tiers) > 0 {
		slice = tiers[len(tiers)-1].block()
	}
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	flagged := make(chan error, 1)
	go func() {
		// The slices that late writes marked dirty, every interval too.
		flagged <- maintain.Ticks(ctx, func(ctx context.Context, _ time.Time) error {
			_, err := tr.rollupFlagged(ctx)
			return err
		}, &maintain.Options{Every: interval, Now: tr.opts.Now, Report: func(r maintain.Run) {
			if report != nil && r.Err != nil {
				report(time.Time{}, time.Time{}, r.Err)
			}
		}})
	}()
	err := maintain.Ranges(ctx, tr.rollup, &maintain.Options{Every: interval, Now: tr.opts.Now, Lag: tr.opts.SealDelay, CatchUp: lookback,
		Limit: lookback, Slice: slice, Progress: tr.db.progressOf(TaskRollup), Report: func(r maintain.Run) {
			if report != nil {
				report(r.From, r.To, r.Err)
			}
		}})
	cancel()
	<-flagged
	if err != nil && parent.Err() == nil {
		return fmt.Errorf("tsdb: KeepRolledUp: %w", err)
	}
	return err
}
