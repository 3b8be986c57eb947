package tsdb

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/maintain/schedule"
	"github.com/seed71701133/tablets/internal/testkit/azurite"
	"github.com/seed71701133/tablets/internal/testkit/fault"
	"github.com/seed71701133/tablets/internal/testkit/itest"
	"github.com/seed71701133/tablets/tsdb"
)

// A task's progress in the catalog: absent at first, recorded to the millisecond (rounded
// down), never moved backward; what each call costs; bad input refused before any request.
func TestTSDBProgress(t *testing.T) {
	ctx := context.Background()
	db, _, checker := newDB(t, nil)
	requests := func(f func()) int64 {
		before := checker.Stats().Requests
		f()
		return checker.Stats().Requests - before
	}

	var ok bool
	var err error
	assert.Equal(t, int64(1), requests(func() { _, ok, err = db.Tasks().Covered(ctx, tsdb.TaskRollup) }))
	require.NoError(t, err)
	require.False(t, ok, "never recorded")

	t1 := time.Date(2024, 5, 23, 1, 0, 0, 999_999_999, time.UTC)
	assert.Equal(t, int64(2), requests(func() { require.NoError(t, db.Tasks().SetCovered(ctx, tsdb.TaskRollup, t1)) }), "a read, an insert")
	covered, ok, err := db.Tasks().Covered(ctx, tsdb.TaskRollup)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, time.Date(2024, 5, 23, 1, 0, 0, 999_000_000, time.UTC), covered, "to the millisecond, rounded down")
	_, ok, err = db.Tasks().Covered(ctx, tsdb.TaskCompact)
	require.NoError(t, err)
	assert.False(t, ok, "each task its own")

	assert.Equal(t, int64(1), requests(func() { require.NoError(t, db.Tasks().SetCovered(ctx, tsdb.TaskRollup, t1.Add(-time.Hour))) }), "an earlier time: a read only")
	covered, _, _ = db.Tasks().Covered(ctx, tsdb.TaskRollup)
	assert.Equal(t, t1.Truncate(time.Millisecond), covered, "never backward")

	t2 := t1.Add(24 * time.Hour)
	assert.Equal(t, int64(2), requests(func() { require.NoError(t, db.Tasks().SetCovered(ctx, tsdb.TaskRollup, t2)) }), "a read, a conditional update")
	covered, _, _ = db.Tasks().Covered(ctx, tsdb.TaskRollup)
	assert.Equal(t, t2.Truncate(time.Millisecond), covered)

	assert.Zero(t, requests(func() {
		for _, task := range []string{"", "a/b", "roll up", string(make([]byte, 65))} {
			assert.ErrorIs(t, db.Tasks().SetCovered(ctx, task, t1), tablets.ErrInvalidOptions, "%q", task)
			_, _, err := db.Tasks().Covered(ctx, task)
			assert.ErrorIs(t, err, tablets.ErrInvalidOptions, "%q", task)
		}
		assert.ErrorIs(t, db.Tasks().SetCovered(ctx, tsdb.TaskRollup, time.Unix(-1, 0)), tablets.ErrInvalidTime)
		assert.ErrorIs(t, db.Tasks().SetCovered(ctx, tsdb.TaskRollup, time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)), tablets.ErrInvalidTime)
	}), "bad input: no request")
}

// Processes racing to record their progress, through lost replies (a retried insert or
// update the service had applied), keep the latest time; a reader meanwhile never sees it go
// backward.
func TestTSDBProgressRace(t *testing.T) {
	ctx := context.Background()
	db, _, _ := newDB(t, nil)
	checker := azurite.NewChecker(azurite.DefaultTransport(), func(v string) { t.Errorf("Azure limit violated: %s", v) })
	faults := fault.New(checker, fault.Options{Seed: 5, LoseReply: 0.3})
	lossy, err := azurite.Shared(t).NewServiceClient(&aztables.ClientOptions{ClientOptions: policy.ClientOptions{
		Transport: faults,
		Retry:     policy.RetryOptions{MaxRetries: 20, RetryDelay: time.Millisecond, MaxRetryDelay: 5 * time.Millisecond}}})
	require.NoError(t, err)
	base := time.Date(2024, 5, 23, 0, 0, 0, 0, time.UTC)
	const writers, each = 4, 15
	var wg sync.WaitGroup
	for w := range writers {
		other, err := tsdb.Open(ctx, lossy, db.Name(), nil) // a process of its own
		require.NoError(t, err)
		wg.Go(func() {
			for i := range each {
				// Interleaved times, each writer's increasing: the latest is the last writer's last.
				at := base.Add(time.Duration(i*writers+w) * time.Minute)
				assert.NoError(t, other.Tasks().SetCovered(ctx, tsdb.TaskCompact, at))
			}
		})
	}
	writing, done := make(chan struct{}), make(chan struct{})
	seen := 0
	go func() {
		defer close(done)
		var last time.Time
		for {
			select {
			case <-writing:
				return
			default:
			}
			covered, ok, err := db.Tasks().Covered(ctx, tsdb.TaskCompact)
			if !assert.NoError(t, err) {
				return
			}
			if ok {
				assert.False(t, covered.Before(last), "went back from %v to %v", last, covered)
				last = covered
				seen++
			}
		}
	}()
	wg.Wait()
	close(writing)
	<-done
	covered, ok, err := db.Tasks().Covered(ctx, tsdb.TaskCompact)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, base.Add((writers*each-1)*time.Minute), covered)
	require.NotZero(t, faults.Lost())
	t.Logf("%d requests for %d records through %d lost replies; the reader read %d", checker.Stats().Requests, writers*each, faults.Lost(), seen)
}

// The scheduler's compaction in a restarted process starts where the last one stopped (its
// progress in the catalog), not at its catch-up horizon.
func TestTSDBScheduledCompactionResumes(t *testing.T) {
	ctx := context.Background()
	db, svc, _ := newDB(t, nil)
	stopped := time.Now().UTC().Add(-5 * time.Hour).Truncate(time.Millisecond)
	require.NoError(t, db.Tasks().SetCovered(ctx, tsdb.TaskCompact, stopped))
	other, err := tsdb.Open(ctx, svc, db.Name(), nil)
	require.NoError(t, err)
	runs, stop := itest.Schedule(t, other, schedule.Options{CompactEvery: 500 * time.Millisecond, CompactCatchUp: 24 * time.Hour}, schedule.Compact)
	r := <-runs.C
	stop() // before the next tick, half a second later
	require.NoError(t, r.Err)
	assert.Equal(t, schedule.Compact, r.Task)
	assert.Equal(t, stopped, r.From, "from the stored progress, not 24 h ago")
	covered, _, err := db.Tasks().Covered(ctx, tsdb.TaskCompact)
	require.NoError(t, err)
	assert.Equal(t, r.To.UTC().Truncate(time.Millisecond), covered)
}
