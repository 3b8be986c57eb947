package tsdb

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/tsdb/internal/lease"
	"github.com/seed71701133/tablets/tsdb/internal/sentinel"
)

// ErrTaskBusy is returned by Exclusive when another process is running the task.
var ErrTaskBusy = sentinel.ErrTaskBusy

// taskLeases are the leases of the tasks Exclusive runs (package lease), by task.
var taskLeases = map[string]lease.Kind{
	TaskCompact: {PartitionKey: TaskCompact, Term: taskLeaseTerm, Margin: taskLeaseMargin,
		Busy: ErrTaskBusy, Lost: errors.New("tsdb: the compaction lease ended before the compaction was done")},
	TaskRollup: {PartitionKey: TaskRollup, Term: taskLeaseTerm, Margin: taskLeaseMargin,
		Busy: ErrTaskBusy, Lost: errors.New("tsdb: the rollup lease ended before the rollup was done")},
	TaskFlagged: {PartitionKey: TaskFlagged, Term: taskLeaseTerm, Margin: taskLeaseMargin,
		Busy: ErrTaskBusy, Lost: errors.New("tsdb: the lease of the rollup of dirty slices ended before it was done")},
}

// TaskFlagged is the scheduler's RollupFlagged (the slices late writes marked dirty), which
// Exclusive runs too: it keeps no progress.
const TaskFlagged = "flagged"

const (
	// taskLeaseTerm is how long a task's lease lasts unless renewed (by Options.Now), and
	// taskLeaseMargin how long before its end the holder counts it lost.
	taskLeaseTerm   = 5 * time.Minute
	taskLeaseMargin = time.Minute
	// taskLeaseKeepEvery is how often (on the real clock) a holder keeps its lease as the
	// task goes: it renews once half the term has passed.
	taskLeaseKeepEvery = 15 * time.Second
)

// Exclusive runs work as task (TaskCompact, TaskRollup or TaskFlagged: the scheduler's run
// of Compact, Rollup or RollupFlagged) in one process at a time of those that share the
// database: the one holding the task's lease in the catalog (taken conditionally on its
// ETag, 5 minutes by Options.Now, renewed as work goes, released when it returns). While another process holds it,
// Exclusive returns ErrTaskBusy without calling work, having sent one request. A holder
// whose lease another process took (it outlasted it without a renewal) has work's context
// cancelled, and gets an error.
//
// Compact, Rollup and RollupFlagged are each right when several processes run them at once
// (their writes are conditional and idempotent); the lease is for their cost. The servers
// of one database tick together (the scheduler's timers follow the clock), and each did all
// the work of every run: in the soak's three servers, a compaction after a Fold merged every
// series' chunks three times over, each meeting the others' merges, and the dashboards of
// all three waited on the account for minutes. After a backfill, each rolled up the slices
// the backfill marked dirty, for every series of the tenant, and those that came last met
// markers the first had deleted.
func (tk *Tasks) Exclusive(ctx context.Context, task string, work func(context.Context) error) error {
	kind, ok := taskLeases[task]
	if !ok {
		return fmt.Errorf("tsdb: %w: Exclusive of task %q (%s, %s or %s)", tablets.ErrInvalidOptions, task, TaskCompact, TaskRollup, TaskFlagged)
	}
	holder := fmt.Sprintf("%016x", rand.Uint64())
	return lease.Do(ctx, tk.catalog.Client, kind, holder, tk.now, taskLeaseKeepEvery, work)
}
