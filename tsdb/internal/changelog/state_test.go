package changelog_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
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

// Two reads of a period's log under way, the one begun first served last, after a change:
// the newer state is the one known, whatever order the reads began or ended in, so that a
// State after both never answers an older one than either answered (a read mark's, then
// its Select's).
func TestStateKeepsNewest(t *testing.T) {
	var count atomic.Uint64
	count.Store(5)
	kept := &keptEntity{next: tablefake.New()}
	kept.next.CreateTable("logm")
	g := &orderedReads{next: kept, started: make(chan int, 16), release: []chan struct{}{make(chan struct{}), make(chan struct{})}}
	client := func(tr policy.Transporter) *aztables.Client {
		svc, err := aztables.NewServiceClientWithNoCredential("http://127.0.0.1:10002/devstoreaccount1", &aztables.ClientOptions{
			ClientOptions: policy.ClientOptions{Transport: tr, Retry: policy.RetryOptions{MaxRetries: -1}}})
		require.NoError(t, err)
		return svc.NewClient("logm")
	}
	key := func(p uint64) string { return fmt.Sprintf("%012d", p) }
	log := changelog.New(client(g), key, count.Load)
	writer := changelog.New(client(kept), key, nil) // another process's
	ctx := context.Background()
	const p = 1716422400

	ended := make([]chan changelog.State, 2)
	read := func(i int, after uint64) {
		ended[i] = make(chan changelog.State, 1)
		go func() {
			s, err := log.StateAfter(ctx, p, after)
			assert.NoError(t, err)
			ended[i] <- s
		}()
		select {
		case <-g.started: // begun, not served
		case <-time.After(10 * time.Second):
			t.Fatal("no read arrived")
		}
	}
	read(0, 5)
	count.Store(6)
	read(1, 6) // after a later staging read: a read of its own
	serve := func(i int) changelog.State {
		t.Helper()
		close(g.release[i])
		select {
		case s := <-ended[i]:
			return s
		case <-time.After(10 * time.Second):
			t.Fatal("the read did not end")
			return changelog.State{}
		}
	}
	require.Zero(t, serve(1).Gen(), "the read begun last, served first: before the change")
	require.NoError(t, writer.Record(ctx, map[uint64]changelog.Range{p: {From: 1, To: 2}}))
	require.EqualValues(t, 1, serve(0).Gen(), "the read begun first, served last: after it")

	s, known := log.Known(p)
	require.True(t, known)
	require.EqualValues(t, 1, s.Gen(), "the newer state known")
	s, err := log.StateAfter(ctx, p, 6)
	require.NoError(t, err)
	require.EqualValues(t, 1, s.Gen(), "a State after both: the newer, whichever read began first")
	require.EqualValues(t, 2, g.reads.Load(), "and without a request")
}

// orderedReads holds the i-th read of the log's entity until release[i] is closed.
type orderedReads struct {
	next    policy.Transporter
	reads   atomic.Int64
	started chan int
	release []chan struct{}
}

func (o *orderedReads) Do(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodGet {
		i := int(o.reads.Add(1)) - 1
		o.started <- i
		if i < len(o.release) {
			<-o.release[i]
		}
	}
	return o.next.Do(req)
}

// keptEntity is tablefake that keeps the last entity inserted or replaced, and answers the
// point reads of it (the fake keeps none).
type keptEntity struct {
	next *tablefake.Transport
	mu   sync.Mutex
	body []byte
	gen  int
}

func (k *keptEntity) Do(req *http.Request) (*http.Response, error) {
	switch req.Method {
	case http.MethodPost, http.MethodPut:
		if req.Body != nil && !strings.Contains(req.URL.Path, "Tables") {
			body, err := io.ReadAll(req.Body)
			if err != nil {
				return nil, err
			}
			req.Body = io.NopCloser(bytes.NewReader(body))
			k.mu.Lock()
			k.body, k.gen = body, k.gen+1
			k.mu.Unlock()
		}
	case http.MethodGet:
		k.mu.Lock()
		body, gen := k.body, k.gen
		k.mu.Unlock()
		if body != nil && strings.Contains(req.URL.Path, "PartitionKey=") {
			h := http.Header{}
			h.Set("Content-Type", "application/json;odata=minimalmetadata")
			h.Set("ETag", fmt.Sprintf("W/\"datetime'2024-05-23T00%%3A00%%3A%02d.0000000Z'\"", gen))
			return &http.Response{StatusCode: http.StatusOK, Header: h, Body: io.NopCloser(bytes.NewReader(body)), Request: req}, nil
		}
	}
	return k.next.Do(req)
}
