package itest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets/internal/maintain/schedule"
	"github.com/seed71701133/tablets/tsdb"
)

// LoopRuns receives the calls of one task's step that the maintenance scheduler reports
// (pass its Report as schedule.Hooks.Report), and the failures of the others.
type LoopRuns struct {
	ctx  context.Context
	task string
	C    chan LoopRun
}

// LoopRun is one call of a step the scheduler reported.
type LoopRun struct {
	Task     string
	From, To time.Time
	Err      error
}

// NewLoopRuns receives the runs of task until ctx (the scheduler's) ends.
func NewLoopRuns(ctx context.Context, task string) *LoopRuns {
	return &LoopRuns{ctx: ctx, task: task, C: make(chan LoopRun)}
}

// Report hands a call of the task's step, or a failure of another task's, to the test (or
// drops it once the scheduler's context ends).
func (l *LoopRuns) Report(s schedule.Step, err error) {
	if s.Task != l.task && err == nil {
		return
	}
	select {
	case l.C <- LoopRun{s.Task, s.From, s.To, err}:
	case <-l.ctx.Done():
	}
}

// WaitCovered waits (30 s at most) until successful runs have covered [from, to), failing
// the test on a failed run (of any task) or a run that does not start where the last one
// ended.
func (l *LoopRuns) WaitCovered(t *testing.T, from, to time.Time) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	var mark time.Time
	for mark.IsZero() || mark.Before(to) {
		select {
		case r := <-l.C:
			require.NoError(t, r.Err, "%s", r.Task)
			if mark.IsZero() {
				require.False(t, r.From.After(from), "the first run starts at %v, after %v", r.From, from)
			} else {
				require.Equal(t, mark, r.From, "a run starts where the last one ended")
			}
			mark = r.To
		case <-deadline:
			t.Fatalf("runs covered up to %v, not %v", mark, to)
		}
	}
}

// Schedule runs the maintenance scheduler on db with the tasks of o (schedule.Tasks and
// schedule.Run: the server's loops, without the server) until stop, and returns the runs of
// task. stop requires that Run returned context.Canceled.
func Schedule(t *testing.T, db *tsdb.DB, o schedule.Options, task string) (runs *LoopRuns, stop func()) {
	t.Helper()
	tasks, err := schedule.Tasks(db, o)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	runs = NewLoopRuns(ctx, task)
	done := make(chan error, 1)
	go func() { done <- schedule.Run(ctx, tasks, &schedule.Hooks{Report: runs.Report}) }()
	return runs, func() {
		cancel()
		require.ErrorIs(t, <-done, context.Canceled)
	}
}
