package changelog_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets/internal/testkit/tablefake"
	"github.com/seed71701133/tablets/tsdb/internal/changelog"
)

// countedReads counts the point reads and the writes a transport over tablefake sees
// (which keeps no entity: every read finds none).
type countedReads struct {
	next          policy.Transporter
	reads, writes atomic.Int64
}

func (c *countedReads) Do(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodGet {
		c.reads.Add(1)
	} else {
		c.writes.Add(1)
	}
	return c.next.Do(req)
}

// countedLog is a log without after (the index's) on a fake table, and its transport.
func countedLog(t *testing.T) (*changelog.Log, *countedReads) {
	t.Helper()
	fake := tablefake.New()
	fake.CreateTable("logm")
	c := &countedReads{next: fake}
	svc, err := aztables.NewServiceClientWithNoCredential("http://127.0.0.1:10002/devstoreaccount1", &aztables.ClientOptions{
		ClientOptions: policy.ClientOptions{Transport: c, Retry: policy.RetryOptions{MaxRetries: -1}}})
	require.NoError(t, err)
	return changelog.New(svc.NewClient("logm"), func(p uint64) string { return fmt.Sprintf("%012d", p) }, nil), c
}

// Vouch lets a read that began later take the states read at or after since as if read
// at until: no request. A state read before since is not vouched for, nor is a read that
// began after until served by it.
func TestVouch(t *testing.T) {
	log, reads := countedLog(t)
	const p, q = 1716422400, 1716508800
	ctx := context.Background()
	_, err := log.State(changelog.Begin(ctx), q) // read before since: not vouched for
	require.NoError(t, err)
	since := changelog.Stamp()
	_, err = log.State(changelog.Begin(ctx), p)
	require.NoError(t, err)
	require.Equal(t, int64(2), reads.reads.Load())

	later := changelog.Begin(ctx) // a read that began after both
	until := changelog.Stamp()
	log.Vouch(since, until)
	_, err = log.State(later, p)
	require.NoError(t, err)
	require.Equal(t, int64(2), reads.reads.Load(), "p read after since: vouched for, no request")
	_, err = log.State(later, q)
	require.NoError(t, err)
	require.Equal(t, int64(3), reads.reads.Load(), "q read before since: read again")

	_, err = log.State(changelog.Begin(ctx), p)
	require.NoError(t, err)
	require.Equal(t, int64(4), reads.reads.Load(), "a read that began after until: read again")
}

// OnRecorded's function runs after each update, before Record returns; when it fails,
// Record fails, the change recorded all the same (the write fails, and its retry records and marks again).
func TestOnRecorded(t *testing.T) {
	log, counted := countedLog(t)
	const p = 1716422400
	ctx := context.Background()
	var marks []int64 // the writes the transport had seen at each
	var fail atomic.Bool
	log.OnRecorded(func(ctx context.Context) error {
		marks = append(marks, counted.writes.Load())
		if fail.Load() {
			return errors.New("mark failed")
		}
		return nil
	})
	require.NoError(t, log.Record(ctx, map[uint64]changelog.Range{p: {From: 1, To: 2}}))
	require.Equal(t, []int64{1}, marks, "after the entity's write")
	fail.Store(true)
	err := log.Record(ctx, map[uint64]changelog.Range{p: {From: 3, To: 4}})
	require.ErrorContains(t, err, "mark failed")
	require.Equal(t, []int64{1, 2}, marks, "after the second write")
	require.NoError(t, log.Record(ctx, map[uint64]changelog.Range{p: {From: 5, To: 5}}))
	require.Len(t, marks, 2, "an empty range records nothing, and marks nothing")
}
