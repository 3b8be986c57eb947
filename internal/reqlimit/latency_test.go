package reqlimit

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// The cap halves after a window in which more than a tenth of the point reads were slow,
// grows a slot a window otherwise (an empty window too), and keeps between one slot and
// its limit; slow is SlowMargin over the fastest point read of late, so that a far
// account's reads are not all slow.
func TestLatencyCap(t *testing.T) {
	start := time.Date(2026, 12, 4, 21, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return start.Add(d) }
	c := newLatencyCap(32)
	if _, ok := c.threshold(); ok {
		t.Fatal("a threshold before any point read")
	}
	c.observe(2*time.Millisecond, at(0)) // the floor
	for i := range 9 {
		c.observe(3*time.Millisecond, at(time.Duration(i)*time.Millisecond))
	}
	c.observe(200*time.Millisecond, at(500*time.Millisecond)) // one slow of 11: a tenth or less
	if c.advance(at(1100 * time.Millisecond)); c.cap != 32 {
		t.Fatalf("after a window with 1 slow read of 11: cap %d, want 32", c.cap)
	}
	// Two slow reads of 11: more than a tenth.
	for i := range 11 {
		took := 3 * time.Millisecond
		if i < 2 {
			took = threshold(t, &c) + time.Millisecond
		}
		c.observe(took, at(1200*time.Millisecond))
	}
	if !c.advance(at(2001*time.Millisecond)) || c.cap != 16 {
		t.Fatalf("after a window with 2 slow reads of 11: cap %d, want 16", c.cap)
	}
	if c.observe(threshold(t, &c), at(2500*time.Millisecond)); c.slow != 0 {
		t.Fatalf("a read of just the threshold counted slow")
	}
	for w := range 6 { // slow windows, one after another: 8, 4, 2, 1, 1, 1
		c.observe(time.Second, at(time.Duration(2500+1000*w)*time.Millisecond))
	}
	if c.advance(at(8100 * time.Millisecond)); c.cap != 1 {
		t.Fatalf("after slow windows: cap %d, want 1", c.cap)
	}
	// Three windows with no point reads, then one with fast ones: 4 slots more.
	c.observe(3*time.Millisecond, at(11500*time.Millisecond))
	if c.advance(at(12000 * time.Millisecond)); c.cap != 5 {
		t.Fatalf("after 4 windows without slow reads: cap %d, want 5", c.cap)
	}
	if c.advance(at(time.Minute)); c.cap != 32 {
		t.Fatalf("after a quiet minute: cap %d, want the limit, 32", c.cap)
	}
	if c.totalReads != 11+11+1+6+1 || c.totalSlow != 1+2+6 || c.halved != 1+6 {
		t.Fatalf("counted %d reads, %d slow, %d halvings; want 30, 9, 7", c.totalReads, c.totalSlow, c.halved)
	}

	// A far account: every read takes 80 ms, none is slow.
	far := newLatencyCap(8)
	for i := range 100 {
		far.observe(80*time.Millisecond+time.Duration(i%7)*time.Millisecond, at(time.Duration(i)*100*time.Millisecond))
	}
	if far.cap != 8 || far.totalSlow != 0 {
		t.Fatalf("far account: cap %d, %d slow; want 8, 0", far.cap, far.totalSlow)
	}
	// The floor lasts two periods: a faster route's floor takes over, a slower one's
	// waits for the old floor to age out.
	far.observe(300*time.Millisecond, at(FloorPeriod))
	if got := threshold(t, &far); got != 80*time.Millisecond+SlowMargin {
		t.Fatalf("threshold after a period: %v, want the last period's floor and the margin", got)
	}
	far.observe(300*time.Millisecond, at(2*FloorPeriod))
	if got := threshold(t, &far); got != 300*time.Millisecond+SlowMargin {
		t.Fatalf("threshold after two periods: %v, want the new floor and the margin", got)
	}
}

func threshold(t *testing.T, c *latencyCap) time.Duration {
	t.Helper()
	d, ok := c.threshold()
	if !ok {
		t.Fatal("no threshold after point reads")
	}
	return d
}

// latencyNext answers point reads (a GET of Table(PartitionKey=…,RowKey=…)) after the
// time their path asks for, and other requests once release is closed.
type latencyNext struct {
	took    map[string]time.Duration
	release chan struct{}
	sent    atomic.Int64 // of the other requests
}

func (n *latencyNext) Do(req *http.Request) (*http.Response, error) {
	if d, ok := n.took[req.URL.Path]; ok {
		time.Sleep(d)
	} else {
		n.sent.Add(1)
		<-n.release
	}
	return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader("{}"))}, nil
}

// Point reads that wait at the account (another server's background work, which this one
// cannot see) halve the background share, whatever the class that read; windows without
// slow reads give it back a slot each.
func TestTransportBackgroundYieldsToLatency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const fast, slow = "/acct/logs(PartitionKey='a',RowKey='b')", "/acct/logs(PartitionKey='a',RowKey='c')"
		next := &latencyNext{took: map[string]time.Duration{fast: time.Millisecond, slow: 200 * time.Millisecond},
			release: make(chan struct{})}
		tr := New(next, 16) // background: 8 idle
		read := func(ctx context.Context, path string) {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://account.invalid"+path, nil)
			if err != nil {
				t.Error(err)
				return
			}
			resp, err := tr.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		background := func(n int) (sentAtOnce int64) {
			next.release = make(chan struct{})
			next.sent.Store(0)
			var wg sync.WaitGroup
			for range n {
				wg.Go(func() { read(Background(context.Background()), "/acct/raw()") })
			}
			synctest.Wait()
			sentAtOnce = next.sent.Load()
			close(next.release)
			wg.Wait()
			return sentAtOnce
		}
		if got := background(10); got != 8 {
			t.Fatalf("%d background requests sent at once at first, want the idle share, 8", got)
		}
		ingest := Ingest(context.Background()) // not a query: the share stays idle-sized
		read(ingest, fast)
		var wg sync.WaitGroup
		for range 10 {
			wg.Go(func() { read(ingest, slow) })
		}
		wg.Wait()
		if got := tr.Latency(); got.PointReads != 11 || got.SlowPointReads != 10 || got.Floor != time.Millisecond {
			t.Fatalf("Latency() = %+v, want 11 point reads, 10 slow, a floor of 1 ms", got)
		}
		time.Sleep(LatencyWindow)
		if got := background(10); got != 4 {
			t.Fatalf("%d background requests sent at once after a slow window, want 4", got)
		}
		if got := tr.Latency(); got.Cap != 4 || got.Halvings != 1 {
			t.Fatalf("Latency() = %+v, want a cap of 4 after 1 halving", got)
		}
		time.Sleep(4 * LatencyWindow) // no point reads: a slot a window
		if got := background(10); got != 8 {
			t.Fatalf("%d background requests sent at once after 4 quiet windows, want 8", got)
		}
	})
}
