package api

import (
	"context"
	"time"

	"github.com/seed71701133/tablets/internal/reqlimit"
)

// limiter bounds the number of queries the engine evaluates at once. It implements
// promql.QueryTracker; Prometheus' own ActiveQueryTracker does the same but also
// mmaps a file of active queries for crash reports, which a server over a remote
// store does not need.
type limiter struct{ sem chan struct{} }

func newLimiter(n int) *limiter { return &limiter{sem: make(chan struct{}, n)} }

func (l *limiter) GetMaxConcurrent() int { return cap(l.sem) }

// Insert waits for a free slot or for ctx to end.
func (l *limiter) Insert(ctx context.Context, _ string) (int, error) {
	select {
	case l.sem <- struct{}{}:
		return 0, nil
	default: // full: the wait counts in a slow query's log line
	}
	defer reqlimit.TallyQueued(ctx, time.Now())
	select {
	case l.sem <- struct{}{}:
		return 0, nil
	case <-ctx.Done():
		return 0, queueWait{ctx.Err()}
	}
}

// queueWait is the error of a query whose context ended while it waited for a slot: the
// context's error, marked so that a timeout there is told apart from one in evaluation
// (the engine waits both before parsing a query and before evaluating it).
type queueWait struct{ err error }

func (e queueWait) Error() string { return e.err.Error() }
func (e queueWait) Unwrap() error { return e.err }

func (l *limiter) Delete(int) { <-l.sem }

func (l *limiter) Close() error { return nil }
