package tsdb

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
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

// ExclusiveOptions are the options of Exclusive; nil is the defaults.
type ExclusiveOptions struct {
	// KeepFor keeps the task's lease this long after work returns, rather than releasing
	// it: this DB's next Exclusive of the task within KeepFor takes it again and runs, while
	// the other processes' find it busy. The scheduler keeps the compaction's lease for its
	// interval and a minute: Compact skips the tables it compacted since their last change
	// (a request instead of a scan of the table's keys), which only the process that
	// compacted knows; with the lease taken by whichever server ticked first, three servers
	// each scanned every table again. A process stopped or killed leaves the task to the
	// others KeepFor after its last run. 0 (the default) releases it at once; negative is
	// an error.
	KeepFor time.Duration
}

// Exclusive runs work as task (TaskCompact, TaskRollup or TaskFlagged: the scheduler's run
// of Compact, Rollup or RollupFlagged; or a server's holding of a slot of TaskBackground,
// whose term is a minute) in one process at a time of those that share the
// database: the one holding the task's lease in the catalog (taken conditionally on its
// ETag, 5 minutes by Options.Now, renewed as work goes, released when it returns, or kept
// for this DB's next run: ExclusiveOptions). While another process holds it,
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
func (tk *Tasks) Exclusive(ctx context.Context, task string, work func(context.Context) error, opts *ExclusiveOptions) error {
	kind, ok := taskLeases[task]
	if !ok {
		kind, ok = backgroundLease(task)
	}
	if !ok {
		return fmt.Errorf("tsdb: %w: Exclusive of task %q (%s, %s, %s or a BackgroundTask)", tablets.ErrInvalidOptions, task, TaskCompact, TaskRollup, TaskFlagged)
	}
	var keepFor time.Duration
	if opts != nil {
		if opts.KeepFor < 0 {
			return fmt.Errorf("tsdb: %w: Exclusive's KeepFor %v is negative", tablets.ErrInvalidOptions, opts.KeepFor)
		}
		keepFor = opts.KeepFor
	}
	holder := fmt.Sprintf("%016x", rand.Uint64())
	if keepFor > 0 {
		// The DB's holder, the same at every run, so that its next run takes the lease it
		// kept; one run of the task at a time in the DB, so that no two of its runs hold
		// it as one holder.
		if !tk.kept.begin(task, true) {
			return ErrTaskBusy
		}
		defer tk.kept.end(task)
		holder = tk.kept.holder
	}
	return lease.Do(ctx, tk.catalog.Client, kind, holder, tk.now, taskLeaseKeepEvery, keepFor, work)
}

// ReleaseKept ends the task leases this DB keeps between its runs (ExclusiveOptions.
// KeepFor), for a process that stops: the other processes take the tasks over at their
// next tick rather than KeepFor after its last run. Two requests a task whose lease it kept
// since its last ReleaseKept, none for the others: a read, and a delete conditional on it,
// so that a lease another process took since stays. A task that runs now is left to its
// run, which releases the lease if its context ended. (The scheduler calls it as its loops
// stop.)
func (tk *Tasks) ReleaseKept(ctx context.Context) error {
	var errs []error
	for _, task := range tk.kept.keeping() {
		if !tk.kept.begin(task, false) {
			continue
		}
		kind := taskLeases[task]
		if k, ok := backgroundLease(task); ok {
			kind = k
		}
		_, err := lease.ReleaseHeld(ctx, tk.catalog.Client, kind, tk.kept.holder)
		if err == nil {
			tk.kept.released(task)
		}
		tk.kept.end(task)
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// keptTasks is what a DB needs to keep task leases between its runs (ExclusiveOptions.
// KeepFor): its holder id, the same for every run of every task, the tasks it runs now,
// and those it ever kept a lease of.
type keptTasks struct {
	holder string
	mu     sync.Mutex
	runs   map[string]bool
	kept   map[string]bool
}

func newKeptTasks() *keptTasks {
	return &keptTasks{holder: fmt.Sprintf("%016x", rand.Uint64()), runs: map[string]bool{}, kept: map[string]bool{}}
}

// begin notes that a run of task begins, false if one runs already; keep notes that it
// may keep the task's lease.
func (k *keptTasks) begin(task string, keep bool) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.runs[task] {
		return false
	}
	k.runs[task] = true
	if keep {
		k.kept[task] = true
	}
	return true
}

// released notes that task's lease is not kept (until a run keeps it again).
func (k *keptTasks) released(task string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.kept, task)
}

// keeping returns the tasks whose leases a run may have kept.
func (k *keptTasks) keeping() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make([]string, 0, len(k.kept))
	for task := range k.kept {
		out = append(out, task)
	}
	slices.Sort(out)
	return out
}

// end notes that the run of task ended.
func (k *keptTasks) end(task string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.runs, task)
}
