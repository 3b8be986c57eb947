package reliability

import (
	"fmt"
	"math"
	"net"
	"net/http"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/testkit/azurite"
	"github.com/seed71701133/tablets/internal/testkit/fault"
	"github.com/seed71701133/tablets/internal/testkit/itest"
)

// Helpers of the reliability tests (reliability_test.go).

// relStore is a store layout under test, as the conformance suite runs it.
type relStore = itest.Harness

// relStores are the stores of each layout with their default options.
var relStores = []itest.Harness{itest.Stores[0], itest.Stores[1], itest.Stores[3]}

// relStoreByName returns the store of that name.
func relStoreByName(t testing.TB, name string) relStore {
	t.Helper()
	for _, h := range relStores {
		if h.Name() == name {
			return h
		}
	}
	t.Fatalf("no store %q", name)
	return relStore{}
}

// relTransportFunc adapts a function to policy.Transporter.
type relTransportFunc func(*http.Request) (*http.Response, error)

func (f relTransportFunc) Do(req *http.Request) (*http.Response, error) { return f(req) }

// relIsBatch reports whether req is an entity group transaction.
func relIsBatch(req *http.Request) bool {
	return req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/$batch")
}

// relDeliveredCounter counts the requests that reached the service AND whose reply reached the
// client: it sits below nothing but the fault transport's caller, so a request failed before
// forwarding (a fabricated 503/500) or whose reply was lost (a fabricated 500, timeout or
// reset) is not counted, and each logical request of the store is counted exactly once, as
// it is without faults, however often the retry policy had to send it.
type relDeliveredCounter struct {
	next policy.Transporter
	n    atomic.Int64
}

func (d *relDeliveredCounter) Do(req *http.Request) (*http.Response, error) {
	resp, err := d.next.Do(req)
	if err == nil && !fault.IsInjected(resp) {
		d.n.Add(1)
	}
	return resp, err
}

// relFaultTotals adds up what the fault transports of one harness did, over every table.
type relFaultTotals struct {
	tables, requests, injected, lost atomic.Int64
}

func (ft *relFaultTotals) add(tr *fault.Transport) {
	if tr == nil {
		return
	}
	ft.tables.Add(1)
	ft.requests.Add(tr.Requests())
	ft.injected.Add(tr.Injected())
	ft.lost.Add(tr.Lost())
}

// relFaultHarness is a conformance harness whose stores talk to Azurite through a fault
// transport: Checker -> relDeliveredCounter -> fault.Transport -> network. Its request counter
// is the relDeliveredCounter (see there): the suite's bounds on request counts then bound the
// requests the store issued, not the retries that the injected faults caused.
type relFaultHarness struct {
	relStore
	faults fault.Options
	retry  policy.RetryOptions
	totals *relFaultTotals
}

func (h relFaultHarness) NewStore(t *testing.T) (tablets.Store, func() int64) {
	counter := &relDeliveredCounter{}
	var tr *fault.Transport
	client, _ := azurite.NewTable(t, &azurite.TableOptions{
		Wrap: func(next policy.Transporter) policy.Transporter {
			tr = fault.New(next, h.faults)
			counter.next = tr
			return counter
		},
		Retry: &h.retry,
	})
	t.Cleanup(func() { h.totals.add(tr) })
	return h.Make(t, client), counter.n.Load
}

// relNewPrivateHTTP returns an HTTP client of the test's own: its connections (and their
// goroutines) can be closed at will, unlike those of the shared azurite.DefaultTransport.
func relNewPrivateHTTP() *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
		MaxIdleConns:        64,
		MaxIdleConnsPerHost: 32,
		IdleConnTimeout:     30 * time.Second,
	}}
}

// relCloseIdle closes the idle connections of the private client and of the shared transport
// (which the harness's table administration uses): a kept-alive connection has two
// goroutines, and one closed by the server's keep-alive timeout in the middle of a
// measurement would hide a leak.
func relCloseIdle(hc *http.Client) {
	hc.CloseIdleConnections()
	azurite.DefaultTransport().CloseIdleConnections()
}

// relGoroutineDump returns the stacks of every goroutine.
func relGoroutineDump() string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return string(buf[:n])
		}
		buf = make([]byte, 2*len(buf))
	}
}

// relGoroutineBaseline returns the number of goroutines once the private client's connections
// are closed and the count has settled (the lowest of a short series of samples).
func relGoroutineBaseline(hc *http.Client) int {
	low := math.MaxInt
	for range 20 {
		relCloseIdle(hc)
		low = min(low, runtime.NumGoroutine())
		time.Sleep(5 * time.Millisecond)
	}
	return low
}

// relRequireGoroutinesBack waits (up to 10 s) until there are no more goroutines than baseline,
// closing the private client's idle connections meanwhile, and fails with a dump otherwise.
func relRequireGoroutinesBack(t *testing.T, hc *http.Client, baseline int, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		relCloseIdle(hc)
		n := runtime.NumGoroutine()
		if n <= baseline {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d goroutines outlive the call (baseline %d, now %d):\n%s", what, n-baseline, baseline, n, relGoroutineDump())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// relTripwire calls fire once, on the n-th request after arm(n, fire).
type relTripwire struct {
	mu   sync.Mutex
	left int
	fire func()
}

func (w *relTripwire) arm(n int, fire func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.left, w.fire = n, fire
}

func (w *relTripwire) request() {
	w.mu.Lock()
	var fire func()
	if w.fire != nil {
		if w.left--; w.left <= 0 {
			fire, w.fire = w.fire, nil
		}
	}
	w.mu.Unlock()
	if fire != nil {
		fire()
	}
}

// relPointKey identifies a point exactly: the instant (not the location) and the value's bits.
type relPointKey struct {
	sec, nsec int64
	bits      uint64
}

func relKeyOfPoint(p tablets.Point) relPointKey {
	return relPointKey{p.Time.Unix(), int64(p.Time.Nanosecond()), math.Float64bits(p.Value)}
}

// relMultiset counts points by relPointKey.
func relMultiset(pts []tablets.Point) map[relPointKey]int {
	m := make(map[relPointKey]int, len(pts))
	for _, p := range pts {
		m[relKeyOfPoint(p)]++
	}
	return m
}

// relRequireSamePoints requires two lists to hold the same points the same number of times, in
// any order, and reports a few differences.
func relRequireSamePoints(t *testing.T, want, got []tablets.Point, format string, args ...any) {
	t.Helper()
	w, g := relMultiset(want), relMultiset(got)
	var missing, extra []string
	for k, n := range w {
		if g[k] < n {
			missing = append(missing, relFmtKey(k, n-g[k]))
		}
	}
	for k, n := range g {
		if w[k] < n {
			extra = append(extra, relFmtKey(k, n-w[k]))
		}
	}
	if len(missing)+len(extra) == 0 {
		return
	}
	sort.Strings(missing)
	sort.Strings(extra)
	require.Failf(t, "point sets differ", "%s: want %d points, got %d; %d missing (first %v), %d unexpected (first %v)",
		fmt.Sprintf(format, args...), len(want), len(got), len(missing), relHead(missing, 5), len(extra), relHead(extra, 5))
}

func relFmtKey(k relPointKey, n int) string {
	return fmt.Sprintf("%s=%v x%d", time.Unix(k.sec, k.nsec).UTC().Format(time.RFC3339Nano), math.Float64frombits(k.bits), n)
}

func relHead(s []string, n int) []string { return s[:min(n, len(s))] }

// relRequireOrderedExactly requires got to be want in order, with times in UTC and values bit
// for bit.
func relRequireOrderedExactly(t *testing.T, want, got []tablets.Point, format string, args ...any) {
	t.Helper()
	what := fmt.Sprintf(format, args...)
	for i := range min(len(want), len(got)) {
		w, g := want[i], got[i]
		if !w.Time.Equal(g.Time) || math.Float64bits(w.Value) != math.Float64bits(g.Value) || g.Time.Location() != time.UTC {
			require.Failf(t, "points differ", "%s: index %d: want %s=%v, got %s=%v (location %s)", what, i,
				w.Time.UTC().Format(time.RFC3339Nano), w.Value, g.Time.Format(time.RFC3339Nano), g.Value, g.Time.Location())
		}
	}
	require.Equal(t, len(want), len(got), "%s: point count", what)
}

// relCollect drains a Query iterator; it returns the points before the first error and that
// error.
func relCollect(seq func(func(tablets.Point, error) bool)) ([]tablets.Point, error) {
	var out []tablets.Point
	for p, err := range seq {
		if err != nil {
			return out, err
		}
		out = append(out, p)
	}
	return out, nil
}

// relWatchdog fails the test with a goroutine dump if call does not return within limit.
func relWatchdog(t *testing.T, limit time.Duration, what string, call func()) {
	t.Helper()
	done := make(chan struct{})
	timer := time.AfterFunc(limit, func() {
		select {
		case <-done:
		default:
			panic(fmt.Sprintf("%s did not return within %v:\n%s", what, limit, relGoroutineDump()))
		}
	})
	defer timer.Stop()
	call()
	close(done)
}
