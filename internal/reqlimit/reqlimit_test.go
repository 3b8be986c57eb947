package reqlimit

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// blockingNext answers every request once release is closed, counting the requests it
// holds at once.
type blockingNext struct {
	release        chan struct{}
	inFlight, most atomic.Int64
	sent           atomic.Int64
	body           string
	fail           bool
}

func (b *blockingNext) Do(req *http.Request) (*http.Response, error) {
	n := b.inFlight.Add(1)
	for {
		m := b.most.Load()
		if n <= m || b.most.CompareAndSwap(m, n) {
			break
		}
	}
	b.sent.Add(1)
	<-b.release
	b.inFlight.Add(-1)
	if b.fail {
		return nil, errors.New("connection refused")
	}
	return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader(b.body))}, nil
}

func get(ctx context.Context, t *testing.T) *http.Request { return getOf(ctx, t, "t") }

// getOf is a query of table with ctx.
func getOf(ctx context.Context, t *testing.T, table string) *http.Request {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://account.invalid/"+table+"()", nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// send sends a GET through tr with ctx and reads its answer to the end (an error is the
// test's).
func send(ctx context.Context, t *testing.T, tr *Transport) { sendReq(t, tr, get(ctx, t)) }

// sendReq sends req through tr and reads its answer to the end (an error is the test's).
func sendReq(t *testing.T, tr *Transport, req *http.Request) {
	resp, err := tr.Do(req)
	if err != nil {
		t.Error(err)
		return
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

func TestTransportBoundsRequestsInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		next := &blockingNext{release: make(chan struct{}), body: "{}"}
		tr := New(next, 3)
		var wg sync.WaitGroup
		for range 10 {
			wg.Go(func() {
				resp, err := tr.Do(get(context.Background(), t))
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			})
		}
		synctest.Wait()
		if got := next.sent.Load(); got != 3 {
			t.Fatalf("%d requests sent while 3 may be in flight", got)
		}
		if inFlight, waiting := tr.State(); inFlight != 3 || waiting != 7 {
			t.Fatalf("State() = %d in flight, %d waiting; want 3, 7", inFlight, waiting)
		}
		close(next.release)
		wg.Wait()
		if got, most := next.sent.Load(), next.most.Load(); got != 10 || most != 3 {
			t.Fatalf("%d requests sent, %d at most at once; want 10, 3", got, most)
		}
		if inFlight, waiting := tr.State(); inFlight != 0 || waiting != 0 {
			t.Fatalf("after all: State() = %d, %d; want 0, 0", inFlight, waiting)
		}
	})
}

// A slot is held until the body is done with: read to its end, or closed unread.
func TestTransportHoldsSlotUntilBodyDone(t *testing.T) {
	next := &blockingNext{release: make(chan struct{}), body: "entities"}
	close(next.release)
	tr := New(next, 1)
	resp, err := tr.Do(get(context.Background(), t))
	if err != nil {
		t.Fatal(err)
	}
	if inFlight, _ := tr.State(); inFlight != 1 {
		t.Fatalf("body unread: %d in flight, want 1", inFlight)
	}
	if b, _ := io.ReadAll(resp.Body); string(b) != "entities" {
		t.Fatalf("body %q", b)
	}
	if inFlight, _ := tr.State(); inFlight != 0 {
		t.Fatalf("body read to EOF: %d in flight, want 0", inFlight)
	}
	resp.Body.Close() // a second release would panic in the gate

	resp, err = tr.Do(get(context.Background(), t))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	resp.Body.Close()
	if inFlight, _ := tr.State(); inFlight != 0 {
		t.Fatalf("body closed unread: %d in flight, want 0", inFlight)
	}
}

func TestTransportReleasesOnError(t *testing.T) {
	next := &blockingNext{release: make(chan struct{}), fail: true}
	close(next.release)
	tr := New(next, 1)
	for range 3 {
		if _, err := tr.Do(get(context.Background(), t)); err == nil {
			t.Fatal("no error from a failing transport")
		}
	}
	if inFlight, _ := tr.State(); inFlight != 0 {
		t.Fatalf("%d in flight after failures, want 0", inFlight)
	}
}

// A request whose context ends while it waits is never sent, and leaves the queue.
func TestTransportWaiterCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		next := &blockingNext{release: make(chan struct{}), body: "{}"}
		tr := New(next, 1)
		go func() {
			if resp, err := tr.Do(get(context.Background(), t)); err == nil {
				resp.Body.Close()
			}
		}()
		synctest.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		start := time.Now()
		_, err := tr.Do(get(ctx, t))
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want the context's deadline", err)
		}
		if waited := time.Since(start); waited != 5*time.Second {
			t.Fatalf("waited %v, want the context's 5s", waited)
		}
		if got := next.sent.Load(); got != 1 {
			t.Fatalf("%d requests sent, want only the first", got)
		}
		if _, waiting := tr.State(); waiting != 0 {
			t.Fatalf("%d still waiting", waiting)
		}
		close(next.release)
	})
}

// Each class holds at most its share of the slots: of 8, background requests 4 and the
// unmarked (queries) 6 with them, so ingest requests behind 20 background and 4 queries
// are sent at once. Unmarked requests alone take their 6, ingest ones all 8. Every slot and
// share comes back at the end, also of a request cancelled while it waited for its share,
// or failing.
func TestTransportClassShares(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		next := &blockingNext{release: make(chan struct{}), body: "{}"}
		tr := New(next, 8)
		do := func(ctx context.Context) { send(ctx, t, tr) }
		bg, ingest := Background(context.Background()), Ingest(context.Background())
		var wg sync.WaitGroup
		for range 20 {
			wg.Go(func() { do(bg) })
		}
		synctest.Wait()
		if got := next.sent.Load(); got != 4 {
			t.Fatalf("%d background requests sent, want their share of 4", got)
		}
		for range 4 {
			wg.Go(func() { do(context.Background()) })
		}
		synctest.Wait()
		if got := next.sent.Load(); got != 6 {
			t.Fatalf("%d requests sent after 4 queries, want 6 (the others' share)", got)
		}
		for range 2 {
			wg.Go(func() { do(ingest) })
		}
		synctest.Wait()
		if got := next.sent.Load(); got != 8 {
			t.Fatalf("%d requests sent; the 2 ingest ones waited behind the others", got)
		}
		if inFlight, waiting := tr.State(); inFlight != 8 || waiting != 18 {
			t.Fatalf("State() = %d in flight, %d waiting; want 8, 18", inFlight, waiting)
		}
		// Requests cancelled while they wait for their shares leave no trace.
		for _, ctx := range []context.Context{bg, context.Background(), ingest} {
			ctx, cancel := context.WithTimeout(ctx, time.Second)
			if _, err := tr.Do(get(ctx, t)); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("err = %v, want the context's deadline", err)
			}
			cancel()
		}
		close(next.release)
		wg.Wait()
		if got, most := next.sent.Load(), next.most.Load(); got != 26 || most != 8 {
			t.Fatalf("%d requests sent, %d at most at once; want 26, 8", got, most)
		}
		if inFlight, waiting := tr.State(); inFlight != 0 || waiting != 0 {
			t.Fatalf("after all: State() = %d, %d; want 0, 0", inFlight, waiting)
		}

		for _, c := range []struct {
			ctx  context.Context
			want int64
		}{{context.Background(), 6}, {ingest, 8}, {bg, 4}} {
			next := &blockingNext{release: make(chan struct{}), body: "{}"}
			tr = New(next, 8)
			for range 10 {
				wg.Go(func() {
					if resp, err := tr.Do(get(c.ctx, t)); err == nil {
						resp.Body.Close()
					}
				})
			}
			synctest.Wait()
			if got := next.sent.Load(); got != c.want {
				t.Errorf("one class alone: %d requests sent, want %d", got, c.want)
			}
			close(next.release)
			wg.Wait()
		}

		// A failing request gives back its slot and its shares.
		failing := &blockingNext{release: make(chan struct{}), fail: true}
		close(failing.release)
		tr = New(failing, 2)
		for _, ctx := range []context.Context{bg, bg, context.Background(), ingest} {
			if _, err := tr.Do(get(ctx, t)); err == nil {
				t.Fatal("no error from a failing transport")
			}
		}
		if inFlight, waiting := tr.State(); inFlight != 0 || waiting != 0 {
			t.Fatalf("after failures: State() = %d, %d; want 0, 0", inFlight, waiting)
		}
	})
}

func TestClassLimits(t *testing.T) {
	if BusyBackgroundLimit(64) != 8 || BusyBackgroundLimit(4) != 1 {
		t.Errorf("busy background: %d of 64, %d of 4; want 8, 1", BusyBackgroundLimit(64), BusyBackgroundLimit(4))
	}
	for limit, want := range map[int][2]int{1: {1, 1}, 2: {2, 1}, 3: {3, 1}, 4: {3, 2}, 64: {48, 32}} {
		if o, b := OthersLimit(limit), BackgroundLimit(limit); o != want[0] || b != want[1] {
			t.Errorf("limit %d: others %d, background %d; want %v", limit, o, b, want)
		}
	}
	ctx := context.Background()
	if IsBackground(ctx) || IsIngest(ctx) || !IsBackground(Background(ctx)) || !IsIngest(Ingest(ctx)) ||
		IsIngest(Background(Ingest(ctx))) || IsBackground(Ingest(Background(ctx))) {
		t.Error("IsBackground and IsIngest do not follow the last mark")
	}
}

// Background requests keep to an eighth of the slots while a query's request waits or is in
// flight, and for QuietPeriod after the last one; then to their half again.
func TestTransportBackgroundYieldsToQueries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		next := &blockingNext{release: make(chan struct{}), body: "{}"}
		close(next.release) // answers at once: a request holds its slot until its body is closed
		tr := New(next, 16) // background: 8 idle, 2 busy
		query := func() io.Closer {
			resp, err := tr.Do(get(context.Background(), t))
			if err != nil {
				t.Fatal(err)
			}
			return resp.Body
		}
		q := query()
		done := make(chan struct{})
		var wg sync.WaitGroup
		for range 10 {
			wg.Go(func() {
				resp, err := tr.Do(get(Background(context.Background()), t))
				if err != nil {
					t.Error(err)
					return
				}
				<-done
				resp.Body.Close()
			})
		}
		synctest.Wait()
		if got := next.sent.Load(); got != 1+2 {
			t.Fatalf("%d requests sent beside a query, want the query and 2 background ones", got)
		}
		q.Close()
		time.Sleep(QuietPeriod * 3 / 4)
		query().Close() // another query within the quiet period starts it over
		time.Sleep(QuietPeriod * 3 / 4)
		synctest.Wait()
		if got := next.sent.Load(); got != 2+2 {
			t.Fatalf("%d requests sent within the quiet period, want the 2 queries and 2 background ones", got)
		}
		time.Sleep(QuietPeriod/4 + time.Millisecond)
		synctest.Wait()
		if got := next.sent.Load(); got != 2+8 {
			t.Fatalf("%d requests sent after the quiet period, want the 2 queries and background's 8", got)
		}
		// A query now is sent at once: the others' share (12) has room beside background's 8.
		q = query()
		synctest.Wait()
		if got := next.sent.Load(); got != 3+8 {
			t.Fatalf("%d requests sent, want the third query too", got)
		}
		q.Close()
		close(done)
		wg.Wait()
		if got := next.sent.Load(); got != 3+10 {
			t.Fatalf("%d requests sent in all, want 13", got)
		}
		if inFlight, waiting := tr.State(); inFlight != 0 || waiting != 0 {
			t.Fatalf("after all: State() = %d, %d; want 0, 0", inFlight, waiting)
		}
		time.Sleep(QuietPeriod) // the idle timer's last look
	})
}

// Classes counts each class's requests and the time they held a slot, from sending until
// the body is done with (synctest's clock: a second in the account, a second more before
// the body is read, or held while another waited); a request that never got a slot
// counts nowhere.
func TestTransportClasses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		next := &slowNext{took: time.Second}
		tr := New(next, 1)
		do := func(ctx context.Context) {
			resp, err := tr.Do(get(ctx, t))
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Second)
			resp.Body.Close()
		}
		do(Ingest(context.Background()))
		do(Background(context.Background()))
		do(Background(context.Background()))
		do(context.Background())
		// One waiting for the slot until its context ends is never sent.
		resp, err := tr.Do(get(context.Background(), t))
		if err != nil {
			t.Fatal(err)
		}
		waiting, cancel := context.WithTimeout(Ingest(context.Background()), time.Second)
		defer cancel()
		if _, err := tr.Do(get(waiting, t)); err == nil {
			t.Fatal("a request sent while the one slot was held")
		}
		resp.Body.Close()
		want := []ClassStats{{"query", 2, 4 * time.Second}, {"ingest", 1, 2 * time.Second}, {"background", 2, 4 * time.Second}}
		got := tr.Classes()
		if len(got) != len(want) {
			t.Fatalf("Classes() = %v, want %v", got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("Classes() = %v, want %v", got, want)
			}
		}
	})
}

// sendHeld sends req through tr in a goroutine, and returns a channel closed once its
// response came; the response's body is read to its end and closed once hold is closed.
func sendHeld(t *testing.T, tr *Transport, req *http.Request, hold chan struct{}) chan struct{} {
	sent := make(chan struct{})
	go func() {
		resp, err := tr.Do(req)
		if err != nil {
			t.Error(err)
			return
		}
		close(sent)
		<-hold
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}()
	return sent
}

// slowNext answers every request after took.
type slowNext struct{ took time.Duration }

func (s *slowNext) Do(req *http.Request) (*http.Response, error) {
	time.Sleep(s.took)
	return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader("{}"))}, nil
}

// A background request weighs in its share by the bytes it sends: while a query runs (a
// share of 2 of 16 slots), a transaction of 300 KB takes both slots and waits for the small
// requests before it; small ones go two at a time again once it is done. Without queries
// (a share of 8), a request of 4 MB takes at most the busy share's 2: 6 small ones go beside
// it.
func TestTransportBackgroundWeighsBytes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		next := &blockingNext{release: make(chan struct{}), body: "{}"}
		close(next.release)
		tr := New(next, 16) // background: 8 idle, 2 busy
		body := func(n int) *http.Request {
			req, err := http.NewRequestWithContext(Background(context.Background()), http.MethodPost,
				"http://account.invalid/$batch", strings.NewReader(strings.Repeat("x", n)))
			if err != nil {
				t.Fatal(err)
			}
			return req
		}
		if w := tr.backgroundWeight(body(BackgroundWeightBytes)); w != 1 {
			t.Fatalf("weight of %d bytes = %d, want 1", BackgroundWeightBytes, w)
		}
		if w := tr.backgroundWeight(body(BackgroundWeightBytes + 1)); w != 2 {
			t.Fatalf("weight of %d bytes = %d, want 2", BackgroundWeightBytes+1, w)
		}
		if w := tr.backgroundWeight(get(Background(context.Background()), t)); w != 1 {
			t.Fatalf("weight of a GET = %d, want 1", w)
		}
		// tablets serve's 64 slots: a rollup's usual transaction of tier blocks (128 KiB)
		// takes 4 of the busy share's 8, so that two are in flight beside the queries.
		if w := New(next, 64).backgroundWeight(body(128 << 10)); w != 4 {
			t.Fatalf("weight of 128 KiB of 64 slots = %d, want 4", w)
		}
		send := func(req *http.Request, hold chan struct{}) chan struct{} { return sendHeld(t, tr, req, hold) }
		q, err := tr.Do(get(context.Background(), t))
		if err != nil {
			t.Fatal(err)
		}
		holdSmall, holdLarge := make(chan struct{}), make(chan struct{})
		send(body(100), holdSmall)
		synctest.Wait()
		large := send(body(300<<10), holdLarge)
		synctest.Wait()
		select {
		case <-large:
			t.Fatal("a transaction of 300 KB went beside a small request in a busy share of 2")
		default:
		}
		smallAfter := send(body(100), holdSmall)
		synctest.Wait()
		select {
		case <-smallAfter:
			t.Fatal("a small request went ahead of the large one waiting")
		default:
		}
		close(holdSmall)
		synctest.Wait()
		select {
		case <-large:
		default:
			t.Fatal("the large transaction waits once the small ones are done")
		}
		if got := next.sent.Load(); got != 3 {
			t.Fatalf("%d requests sent, want the query, a small one and the large one", got)
		}
		close(holdLarge)
		synctest.Wait()
		q.Body.Close()

		// No query for the quiet period: the idle share of 8, a request of 4 MB takes the busy
		// share's 2 of them.
		time.Sleep(QuietPeriod + time.Millisecond)
		synctest.Wait()
		before := next.sent.Load()
		hold := make(chan struct{})
		send(body(4<<20), hold)
		synctest.Wait() // the large one first: sent beside it, a small one may take a slot before it
		for range 8 {
			send(body(100), hold)
		}
		synctest.Wait()
		if got := next.sent.Load() - before; got != 1+6 {
			t.Fatalf("%d background requests in flight in an idle share of 8, want the 4 MB one and 6 small", got)
		}
		close(hold)
		synctest.Wait()
		if got := next.sent.Load() - before; got != 9 {
			t.Fatalf("%d sent in all, want 9", got)
		}
		if inFlight, waiting := tr.State(); inFlight != 0 || waiting != 0 {
			t.Fatalf("after all: State() = %d, %d; want 0, 0", inFlight, waiting)
		}
	})
}

// sizedNext answers every request at once with a body of the size its path asks for
// (sizes, by the URL's path; 2 bytes otherwise).
type sizedNext struct {
	sizes map[string]int
	sent  atomic.Int64
}

func (s *sizedNext) Do(req *http.Request) (*http.Response, error) {
	s.sent.Add(1)
	n, ok := s.sizes[req.URL.Path]
	if !ok {
		n = 2
	}
	return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader(strings.Repeat("x", n)))}, nil
}

// A background read weighs by the answers of its kind: the same task, method and table,
// whatever the digits of the table's name. While a query runs (a busy share of 2 of 16
// slots), reads of a kind that received 100 KB go one at a time, those of a kind that
// received 2 bytes two at a time; a kind's weight follows its answers' moving average.
func TestTransportBackgroundWeighsAnswers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		next := &sizedNext{sizes: map[string]int{
			"/acct/tenant1w()": 100 << 10, "/acct/tenant2w()": 100 << 10, "/acct/tenant3w()": 10,
		}}
		tr := New(next, 16) // background: 8 idle, 2 busy
		fold := WithTask(Background(context.Background()), "fold")
		read := func(ctx context.Context, path string) *http.Request {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://account.invalid"+path+"?$filter=PartitionKey%20lt%20'5'", nil)
			if err != nil {
				t.Fatal(err)
			}
			return req
		}
		if got, want := answerKind(read(fold, "/acct/tenant1w(PartitionKey='1',RowKey='2')")), "fold GET tenantw"; got != want {
			t.Fatalf("answerKind = %q, want %q", got, want)
		}
		if w := tr.backgroundWeight(read(fold, "/acct/tenant2w()")); w != 1 {
			t.Fatalf("weight of a read of a kind not answered yet = %d, want 1", w)
		}
		whole := func(req *http.Request) {
			resp, err := tr.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(io.Discard, resp.Body); err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
		whole(read(fold, "/acct/tenant1w()")) // 100 KB: the kind "fold GET tenantw"
		whole(read(fold, "/acct/tenant1m()")) // 2 bytes: "fold GET tenantm"
		if w := tr.backgroundWeight(read(fold, "/acct/tenant2w()")); w != 2 {
			t.Fatalf("weight of a read of a kind that received 100 KB = %d, want the busy share's 2", w)
		}
		compact := WithTask(Background(context.Background()), "compact")
		if w := tr.backgroundWeight(read(compact, "/acct/tenant2w()")); w != 1 {
			t.Fatalf("weight of another task's read of the same table = %d, want 1: another kind", w)
		}
		if w := New(next, 64).backgroundWeight(read(fold, "/acct/tenant2w()")); w != 1 {
			t.Fatalf("a new Transport's weight = %d, want 1: it knows no answers yet", w)
		}

		q, err := tr.Do(get(context.Background(), t)) // a query: the busy share
		if err != nil {
			t.Fatal(err)
		}
		send := func(req *http.Request, hold chan struct{}) chan struct{} { return sendHeld(t, tr, req, hold) }
		hold := make(chan struct{})
		first := send(read(fold, "/acct/tenant2w()"), hold)
		synctest.Wait()
		second := send(read(fold, "/acct/tenant2w()"), hold)
		synctest.Wait()
		<-first
		select {
		case <-second:
			t.Fatal("two reads of a kind that received 100 KB went at once in a busy share of 2")
		default:
		}
		close(hold)
		synctest.Wait()
		<-second

		hold = make(chan struct{})
		small1 := send(read(fold, "/acct/tenant1m()"), hold)
		small2 := send(read(fold, "/acct/tenant9m()"), hold)
		synctest.Wait()
		<-small1
		<-small2 // both in flight: a weight of 1 each
		close(hold)
		synctest.Wait()
		q.Body.Close()

		// The kind's answers shrink: its weight follows their moving average (100 KB, then
		// a quarter less at each answer of 10 bytes), down to 1 once under 32 KiB.
		expected := int64(100 << 10)
		for i := range 5 {
			whole(read(fold, "/acct/tenant3w()"))
			expected = (3*expected + 10) / 4
			want := 1 + (expected-1)/BackgroundWeightBytes
			if w := tr.backgroundWeight(read(fold, "/acct/tenant2w()")); w != min(want, 2) {
				t.Fatalf("after %d small answers: weight %d, want %d", i+1, w, min(want, 2))
			}
		}
		if w := tr.backgroundWeight(read(fold, "/acct/tenant2w()")); w != 1 {
			t.Fatalf("after small answers: weight %d, want 1", w)
		}
		if inFlight, waiting := tr.State(); inFlight != 0 || waiting != 0 {
			t.Fatalf("after all: State() = %d, %d; want 0, 0", inFlight, waiting)
		}
		time.Sleep(QuietPeriod) // the idle timer's last look
	})
}

// timedNext answers every request after the time its path asks for (took, by the URL's
// path; at once otherwise), with a small body.
type timedNext struct {
	took map[string]time.Duration
	sent atomic.Int64
}

func (s *timedNext) Do(req *http.Request) (*http.Response, error) {
	s.sent.Add(1)
	time.Sleep(s.took[req.URL.Path])
	return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader("{}"))}, nil
}

// A background request weighs by the time the requests of its kind held their slot too: a
// scan that answers little after a long filter. While a query runs (a busy share of 2 of
// 16 slots), requests of a kind that took a second go one at a time; those of a kind that
// took 50 ms two at a time.
func TestTransportBackgroundWeighsTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		next := &timedNext{took: map[string]time.Duration{"/acct/raw1": time.Second, "/acct/raw2": time.Second, "/acct/log1": 50 * time.Millisecond}}
		tr := New(next, 16) // background: 8 idle, 2 busy
		compact := WithTask(Background(context.Background()), "compact")
		read := func(path string) *http.Request {
			req, err := http.NewRequestWithContext(compact, http.MethodGet, "http://account.invalid"+path, nil)
			if err != nil {
				t.Fatal(err)
			}
			return req
		}
		whole := func(req *http.Request) {
			resp, err := tr.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		whole(read("/acct/raw1"))
		whole(read("/acct/log1"))
		if w := New(next, 64).backgroundWeight(read("/acct/raw2")); w != 1 {
			t.Fatalf("a new Transport's weight = %d, want 1", w)
		}
		if w := tr.backgroundWeight(read("/acct/raw2")); w != 2 {
			t.Fatalf("weight of a kind that took a second = %d, want the busy share's 2", w)
		}
		if w := tr.backgroundWeight(read("/acct/log2")); w != 1 {
			t.Fatalf("weight of a kind that took 50 ms = %d, want 1", w)
		}
		// tablets serve's 64 slots (a busy share of 8): a slot a 100 ms begun past the first.
		serve := New(next, 64)
		serve.answered("compact GET raw", answerCost{held: 350 * time.Millisecond})
		if got := serve.backgroundWeight(read("/acct/raw2")); got != 4 {
			t.Fatalf("of 64 slots, weight of a kind that took 350 ms = %d, want 4", got)
		}

		q, err := tr.Do(get(context.Background(), t)) // a query: the busy share
		if err != nil {
			t.Fatal(err)
		}
		most := func(path string) int64 { // of 4 requests of path at once
			var inFlight, top atomic.Int64
			var wg sync.WaitGroup
			for range 4 {
				wg.Go(func() {
					resp, err := tr.Do(read(path))
					if err != nil {
						t.Error(err)
						return
					}
					n := inFlight.Add(1)
					for m := top.Load(); n > m && !top.CompareAndSwap(m, n); m = top.Load() {
					}
					time.Sleep(time.Millisecond)
					inFlight.Add(-1)
					resp.Body.Close()
				})
			}
			wg.Wait()
			return top.Load()
		}
		if got := most("/acct/raw2"); got != 1 {
			t.Fatalf("%d requests of a kind that took a second answered at once beside a query, want 1", got)
		}
		if got := most("/acct/log2"); got != 2 {
			t.Fatalf("%d requests of a kind that took 50 ms answered at once beside a query, want 2", got)
		}
		q.Body.Close()
		time.Sleep(QuietPeriod) // the idle timer's last look
	})
}

// A Tally counts the time an operation waited for others' reads and for a budget, when its
// context has one.
func TestTallyJoinedAndBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, tally := WithTally(context.Background())
		wait := func(ctx context.Context, d time.Duration, count func(context.Context, time.Time)) {
			defer count(ctx, time.Now())
			time.Sleep(d)
		}
		wait(ctx, 2*time.Second, TallyJoined)
		wait(context.WithoutCancel(ctx), 3*time.Second, TallyJoined)
		wait(ctx, 5*time.Second, TallyBudget)
		wait(ctx, 7*time.Second, TallyQueued)
		wait(context.Background(), time.Hour, TallyJoined) // no Tally: nothing counted, no panic
		got := tally.Counts()
		if got.Joined != 5*time.Second || got.Budget != 5*time.Second || got.Queued != 7*time.Second || got.Requests != 0 {
			t.Fatalf("Counts() = %+v, want 5s joined, 5s budget, 7s queued, no requests", got)
		}
	})
}

// A Tally counts the requests sent with its context, and only those: how long each waited
// for its slot and held it, and the bytes of their bodies.
func TestTransportTally(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		next := &blockingNext{release: make(chan struct{}), body: "entities"}
		tr := New(next, 1)
		ctx, tally := WithTally(context.Background())
		read := func(ctx context.Context) { send(ctx, t, tr) }
		var wg sync.WaitGroup
		wg.Go(func() { read(context.Background()) }) // untallied: holds the one slot first
		synctest.Wait()
		wg.Go(func() { read(ctx) }) // waits for the slot
		synctest.Wait()
		time.Sleep(3 * time.Second)
		next.release <- struct{}{} // the first answered after 3 s: the tallied one's turn
		synctest.Wait()
		time.Sleep(2 * time.Second)
		next.release <- struct{}{} // the tallied one answered after 2 s
		wg.Wait()
		want := TallyCounts{Requests: 1, ReceivedBytes: int64(len("entities")), Waited: 3 * time.Second, Held: 2 * time.Second,
			Slowest: 2 * time.Second, SlowestKind: "GET t"}
		if got := tally.Counts(); got != want {
			t.Fatalf("Counts() = %+v, want %+v", got, want)
		}

		// A request of another table held longer is the slowest.
		slower := getOf(ctx, t, "u")
		wg.Go(func() { sendReq(t, tr, slower) })
		synctest.Wait()
		time.Sleep(5 * time.Second)
		next.release <- struct{}{}
		wg.Wait()
		want = TallyCounts{Requests: 2, ReceivedBytes: 2 * int64(len("entities")), Waited: 3 * time.Second, Held: 7 * time.Second,
			Slowest: 5 * time.Second, SlowestKind: "GET u"}
		if got := tally.Counts(); got != want {
			t.Fatalf("after a slower one: Counts() = %+v, want %+v", got, want)
		}

		// A context derived from the tallied one counts in it; a failed request counts its
		// wait and hold, no bytes; neither, answered at once, is the slowest.
		close(next.release)
		read(context.WithoutCancel(ctx))
		next.fail = true
		if _, err := tr.Do(get(ctx, t)); err == nil {
			t.Fatal("no error from a failing transport")
		}
		want.Requests, want.ReceivedBytes = 4, 3*int64(len("entities"))
		if got := tally.Counts(); got != want {
			t.Fatalf("after two more: Counts() = %+v, want %+v", got, want)
		}
	})
}
