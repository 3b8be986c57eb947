package changelog_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets/internal/testkit/tablefake"
	"github.com/seed71701133/tablets/tsdb/internal/changelog"
)

// gatedReads is a transport over tablefake that counts the point reads of the log's
// entity and holds each until the test releases it, so that reads can be made to overlap.
type gatedReads struct {
	next    policy.Transporter
	reads   atomic.Int64
	started chan struct{} // a read arrived
	release chan struct{} // one read may go on
}

func (g *gatedReads) Do(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodGet {
		g.reads.Add(1)
		g.started <- struct{}{}
		<-g.release
	}
	return g.next.Do(req)
}

func gatedLog(t *testing.T, after func() uint64) (*changelog.Log, *gatedReads) {
	t.Helper()
	fake := tablefake.New()
	fake.CreateTable("logm")
	g := &gatedReads{next: fake, started: make(chan struct{}, 16), release: make(chan struct{}, 16)}
	svc, err := aztables.NewServiceClientWithNoCredential("http://127.0.0.1:10002/devstoreaccount1", &aztables.ClientOptions{
		ClientOptions: policy.ClientOptions{Transport: g, Retry: policy.RetryOptions{MaxRetries: -1}}})
	require.NoError(t, err)
	return changelog.New(svc.NewClient("logm"), func(p uint64) string { return fmt.Sprintf("%012d", p) }, after), g
}

// waitStarted waits for a read to arrive at the transport.
func (g *gatedReads) waitStarted(t *testing.T) {
	t.Helper()
	select {
	case <-g.started:
	case <-time.After(10 * time.Second):
		t.Fatal("no read arrived")
	}
}

// States of the raw log (a Log with after): the reads of a Select's batches that went with
// one read of the staging table share one request, whether it is under way or done; a read
// that needs a later one (the count moved since its staging read) waits for none of them.
// What was read is known without a request (Known) to estimates.
func TestStateAfterShared(t *testing.T) {
	var count atomic.Uint64
	count.Store(5)
	log, g := gatedLog(t, count.Load)
	ctx := context.Background()
	const p = 1716422400

	var wg sync.WaitGroup
	wg.Go(func() {
		_, err := log.StateAfter(ctx, p, 5)
		assert.NoError(t, err)
	})
	g.waitStarted(t) // the first read is under way
	for range 3 {
		wg.Go(func() {
			_, err := log.StateAfter(ctx, p, 4) // an earlier staging read: the read under way serves it
			assert.NoError(t, err)
		})
	}
	time.Sleep(50 * time.Millisecond) // time for the others to arrive, if they read
	require.EqualValues(t, 1, g.reads.Load(), "four States after one staging read: one request")
	g.release <- struct{}{}
	wg.Wait()

	_, known := log.Known(p + 1)
	require.False(t, known, "a period not read is not known")
	s, known := log.Known(p)
	require.True(t, known, "a period read is known")
	require.Zero(t, s.Gen(), "as read: no entity")
	_, err := log.State(changelog.AfterRead(ctx, 5), p)
	require.NoError(t, err)
	require.EqualValues(t, 1, g.reads.Load(), "a State of a context of AfterRead(5) takes the state read at 5")

	count.Store(6) // another read of the staging table completed
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, err := log.State(ctx, p) // needs a read after the 6th
		assert.NoError(t, err)
	}()
	g.waitStarted(t)
	g.release <- struct{}{}
	<-done
	require.EqualValues(t, 2, g.reads.Load(), "a State after a later staging read reads again")
}

// States of the index log (a Log without after): without Begin each reads; within a read
// that began, any state read after it began serves it (the read under way too), and one
// read before does not.
func TestStateBeganShared(t *testing.T) {
	log, g := gatedLog(t, nil)
	const p = 1716422400
	g.release <- struct{}{}
	g.release <- struct{}{}
	for range 2 {
		_, err := log.State(context.Background(), p)
		require.NoError(t, err)
		g.waitStarted(t)
	}
	require.EqualValues(t, 2, g.reads.Load(), "without Begin, each State reads")

	began := changelog.Begin(context.Background())
	require.True(t, changelog.Began(began))
	require.Equal(t, began, changelog.Begin(began), "a context that began is returned as is")
	var wg sync.WaitGroup
	wg.Go(func() {
		_, err := log.State(began, p)
		assert.NoError(t, err)
	})
	g.waitStarted(t)
	wg.Go(func() {
		_, err := log.State(began, p) // the read under way began after the read did
		assert.NoError(t, err)
	})
	time.Sleep(50 * time.Millisecond) // time for the other to arrive, if it reads
	require.EqualValues(t, 3, g.reads.Load(), "the second State of the read takes the read under way")
	g.release <- struct{}{}
	wg.Wait()
	_, err := log.State(began, p) // and now it is the state last read
	require.NoError(t, err)
	require.EqualValues(t, 3, g.reads.Load(), "three States of a read that began: one request")

	later := changelog.Begin(context.Background()) // began after that state was read
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, err := log.State(later, p)
		assert.NoError(t, err)
	}()
	g.waitStarted(t)
	g.release <- struct{}{}
	<-done
	require.EqualValues(t, 4, g.reads.Load(), "a read that began after the last state was read reads again")
}
