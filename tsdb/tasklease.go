package tsdb

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
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

// TaskBackground is the lease of a server's background work over every database of an
// account (tablets serve's --background.max-servers): a server runs its folds, rollups,
// compactions and retention passes only while it holds one of its slots, so that the
// servers of one account do not add their background requests up at it. Exclusive takes
// slot i's lease by the task BackgroundTask(i); its work is the holding itself (it returns
// when its context ends). The lease is an entity of the catalog given (a base database's).
const TaskBackground = "background"

// BackgroundTask is the task of slot i of TaskBackground's lease (0: TaskBackground).
func BackgroundTask(slot int) string {
	if slot == 0 {
		return TaskBackground
	}
	return TaskBackground + strconv.Itoa(slot)
}

// backgroundLease is the lease of task if it is one of TaskBackground's slots.
func backgroundLease(task string) (lease.Kind, bool) {
	rest, ok := strings.CutPrefix(task, TaskBackground)
	if !ok || rest != "" && (strings.TrimLeft(rest, "0123456789") != "" || rest[0] == '0') {
		return lease.Kind{}, false
	}
	return lease.Kind{PartitionKey: task, Term: backgroundLeaseTerm, Margin: backgroundLeaseMargin, Busy: ErrTaskBusy,
		Lost: errors.New("tsdb: the background lease ended while held")}, true
}

// backgroundLeaseTerm is a term of TaskBackground's lease, shorter than a task's: a server
// killed while it holds one leaves its slot's background work undone until the term ends
// (then another takes it), where a task's lease lasts through a long slice of work.
const (
	backgroundLeaseTerm   = time.Minute
	backgroundLeaseMargin = 15 * time.Second
)

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
// of Compact, Rollup or RollupFlagged; or a server's holding of a slot of TaskBackground,
// whose term is a minute) in one process at a time of those that share the
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
		kind, ok = backgroundLease(task)
	}
	if !ok {
		return fmt.Errorf("tsdb: %w: Exclusive of task %q (%s, %s, %s or a BackgroundTask)", tablets.ErrInvalidOptions, task, TaskCompact, TaskRollup, TaskFlagged)
	}
	holder := fmt.Sprintf("%016x", rand.Uint64())
	return lease.Do(ctx, tk.catalog.Client, kind, holder, tk.now, taskLeaseKeepEvery, work)
}
