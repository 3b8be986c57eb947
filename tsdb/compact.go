package tsdb

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/maintain"
)

// Compact merges the small chunks of every series with points or histogram samples in
// [from, to): in each raw table of the range whose layout compacts (chunked; others are
// skipped), and in each histogram table. A process that writes every few seconds, such as a
// remote-write endpoint, makes a chunk each time. A table is scanned once for the partitions
// (series and day) that hold several chunks, and only those are compacted: a table with
// nothing to merge costs a request per 1,000 chunks of the range. A histogram table's runs
// become chunks of up to 16 KiB, each written with the highest priority of the chunks it
// replaces, in one transaction that deletes those only if unchanged (their ETags). Several
// processes may compact at once, and a Compact killed midway leaves every sample readable:
// the merges are conditional on the chunks' ETags, each one transaction.
func (db *DB) Compact(ctx context.Context, from, to time.Time) error {
	return errors.Join(db.floats.compact(ctx, from, to), db.hists.compact(ctx, from, to))
}

// KeepCompacted compacts, every interval, the chunks of the time since its last successful
// run (Compact up to now), until ctx is done; it then returns ctx's error. Its progress is
// kept in the catalog (Covered, TaskCompact), shared by every process: a run starts where the
// last successful one of any process ended, and the first run of a database covers the last
// lookback. A run that fails is retried by the next from the same start, so an outage or a
// restart is caught up, up to lookback back: no run reaches further. A run is cut into days
// (UTC), each compacted once it is done. report (nil: none) is told of each, its range and
// its error (nil: compacted; zero times: the progress could not be read, and nothing was
// done), and the loop goes on. Bad arguments give an error wrapping
// tablets.ErrInvalidOptions.
func (db *DB) KeepCompacted(ctx context.Context, interval, lookback time.Duration, report func(from, to time.Time, err error)) error {
	if interval <= 0 || lookback <= 0 {
		return fmt.Errorf("tsdb: KeepCompacted: %w: interval %v and lookback %v must be positive", tablets.ErrInvalidOptions, interval, lookback)
	}
	err := maintain.Ranges(ctx, db.Compact, &maintain.Options{Every: interval, Now: db.opts.Now, CatchUp: lookback, Limit: lookback,
		Slice: 24 * time.Hour, Progress: db.progressOf(TaskCompact), Report: func(r maintain.Run) {
			if report != nil {
				report(r.From, r.To, r.Err)
			}
		}})
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("tsdb: KeepCompacted: %w", err)
	}
	return err
}
