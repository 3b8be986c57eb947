package itest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// LoopRuns receives the runs a Keep loop reports (pass its Report as the loop's report).
type LoopRuns struct {
	ctx context.Context
	C   chan LoopRun
}

// LoopRun is one run a Keep loop reported.
type LoopRun struct {
	From, To time.Time
	Err      error
}

// NewLoopRuns receives runs until ctx (the loop's) ends.
func NewLoopRuns(ctx context.Context) *LoopRuns {
	return &LoopRuns{ctx: ctx, C: make(chan LoopRun)}
}

// Report hands a run to the test (or drops it once the loop's context ends).
func (l *LoopRuns) Report(from, to time.Time, err error) {
	select {
	case l.C <- LoopRun{from, to, err}:
	case <-l.ctx.Done():
	}
}

// WaitCovered waits (30 s at most) until successful runs have covered [from, to), failing
// the test on a failed run or a run that does not start where the last one ended.
func (l *LoopRuns) WaitCovered(t *testing.T, from, to time.Time) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	var mark time.Time
	for mark.IsZero() || mark.Before(to) {
		select {
		case r := <-l.C:
			require.NoError(t, r.Err)
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
