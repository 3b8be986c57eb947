package tsdb

import (
	"context"
	"fmt"
	"time"

	"github.com/seed71701133/tablets/rounding"
	"github.com/seed71701133/tablets/tsdb/internal/catalog"
	"github.com/seed71701133/tablets/tsdb/internal/tiers"
)

// Tasks whose progress the catalog keeps (Covered, SetCovered): the maintenance scheduler
// (internal/maintain/schedule: the server's loops, tablets maintain) records theirs under
// these names.
const (
	TaskRollup  = tiers.TaskRollup // Rollup: the tier windows before it are rolled up
	TaskCompact = "compact"        // Compact: the raw chunks before it are compacted
)

// Tasks is the part of a database that coordinates its background tasks between the
// processes sharing it (DB.Tasks): the progress each task recorded in the catalog
// (Covered, SetCovered), and the lease under which one process at a time runs it
// (Exclusive). The maintenance scheduler (internal/maintain/schedule) is its user: what
// it runs catches up from the recorded progress, whichever process ran it last.
type Tasks struct {
	catalog *catalog.Catalog
	now     func() time.Time // Options.Now: the leases' clock
	kept    *keptTasks       // the DB's
}

// Tasks returns the database's task coordination.
func (db *DB) Tasks() *Tasks { return &Tasks{catalog: db.catalog, now: db.opts.Now, kept: db.kept} }

// Covered returns the time before which task is done, as SetCovered recorded it (ok
// false: never recorded): one request. A bad task name gives an error wrapping
// tablets.ErrInvalidOptions before any request.
func (tk *Tasks) Covered(ctx context.Context, task string) (covered time.Time, ok bool, err error) {
	if err := catalog.CheckTask(task); err != nil {
		return time.Time{}, false, err
	}
	ms, _, ok, err := tk.catalog.ReadProgress(ctx, task)
	if err != nil || !ok {
		return time.Time{}, false, err
	}
	return time.UnixMilli(ms).UTC(), true, nil
}

// SetCovered records that task is done before t, to the millisecond (rounded down: a
// process reading it covers at most a millisecond again). It never moves the record
// backward: a later time recorded already stays, so any number of processes may record
// their progress at once and the latest wins. It reads the record, then writes it
// conditionally on the ETag read (or inserts it), and starts again when another process
// wrote meanwhile: two requests, one when the record is already as late. A bad task name
// gives an error wrapping tablets.ErrInvalidOptions, a time outside [tablets.MinTime,
// tablets.MaxTime] one wrapping tablets.ErrInvalidTime, before any request.
func (tk *Tasks) SetCovered(ctx context.Context, task string, t time.Time) error {
	if err := catalog.CheckTask(task); err != nil {
		return err
	}
	if err := rounding.CheckTime(t); err != nil {
		return fmt.Errorf("tsdb: progress of %s: %w", task, err)
	}
	if err := tk.catalog.RaiseProgress(ctx, task, t.UnixMilli()); err != nil {
		return fmt.Errorf("tsdb: progress of %s: %w", task, err)
	}
	return nil
}
