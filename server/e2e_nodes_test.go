package server_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/chunked"
	"github.com/seed71701133/tablets/internal/meter"
	"github.com/seed71701133/tablets/internal/testkit/azurite"
	"github.com/seed71701133/tablets/internal/testkit/fault"
	"github.com/seed71701133/tablets/server"
	"github.com/seed71701133/tablets/tsdb"
)

// e2eNode is one `tablets serve` as a separate process would run it: its own service
// client (its own connections, retry policy and limit Checker), its own *tsdb.DB handle and
// its own Server, sharing nothing with the other nodes but the account and the database
// name. Every request it sends to Azure goes Checker-ward through a fault transport that
// fails all of them while down is set.
type e2eNode struct {
	name    string
	db      *tsdb.DB
	srv     *server.Server
	http    *httptest.Server
	checker *azurite.Checker
	fault   *fault.Transport
	origins *byOrigin
	logs    *syncBuffer
}

// startNode opens database dbName with a fresh service client, serves it on a real TCP port
// and runs the server's background loops (compaction every compactEvery) until the test
// ends.
func startNode(t *testing.T, name, dbName string, down *atomic.Bool, compactEvery time.Duration) *e2eNode {
	t.Helper()
	n := &e2eNode{name: name, logs: &syncBuffer{}}
	az := azurite.Shared(t)
	var mu sync.Mutex
	ended := false
	t.Cleanup(func() { mu.Lock(); ended = true; mu.Unlock() })
	n.checker = azurite.NewChecker(nil, func(v string) {
		mu.Lock()
		defer mu.Unlock()
		if !ended {
			t.Errorf("node %s: Azure limit violated: %s", name, v)
		}
	})
	// Below the retry policy: each attempt is failed (503 ServerBusy or 500 InternalError,
	// before it is sent) while the account is "down".
	n.origins = &byOrigin{next: n.checker}
	n.fault = fault.New(n.origins, fault.Options{Seed: int64(len(name)), FailBefore: 1,
		Match: func(*http.Request) bool { return down.Load() }})
	svc, err := az.NewServiceClient(&aztables.ClientOptions{ClientOptions: policy.ClientOptions{
		Transport: n.fault, Retry: azurite.TestRetryOptions(), PerCallPolicies: []policy.Policy{runtime.NewRequestIDPolicy()}}})
	if err != nil {
		t.Fatalf("node %s: service client: %v", name, err)
	}
	n.db, err = tsdb.Open(context.Background(), svc, dbName, &tsdb.Options{
		Layout: func(c *aztables.Client) (tablets.Store, error) { return chunked.New(c, nil) }})
	if err != nil {
		t.Fatalf("node %s: open %s: %v", name, dbName, err)
	}
	n.srv, err = server.New(n.db, &server.Options{
		CompactEvery: compactEvery,
		RollupEvery:  -1, // tiers are not read at the steps used here; see promstore's doc
		RetainEvery:  -1,
		Logger:       slog.New(slog.NewTextHandler(n.logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		t.Fatalf("node %s: server.New: %v", name, err)
	}
	n.http = httptest.NewServer(withOrigin(n.srv))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = n.srv.Run(ctx)
	}()
	// Registered before Prometheus is started, so it runs after Prometheus has stopped.
	t.Cleanup(func() {
		cancel()
		<-done
		n.http.Close()
		_ = n.srv.Close()
		if t.Failed() && n.logs.Len() > 0 {
			t.Logf("node %s log:\n%s", name, n.logs.Tail(16<<10))
		}
	})
	return n
}

// origin is what a node was doing when it sent a request to Azure: serving a remote write,
// serving a read (remote read, the query API: the test's own questions), or neither (its
// background loops, whose context is no HTTP request's).
type origin int

const (
	fromLoops origin = iota
	fromWrite
	fromRead
	numOrigins
)

func (o origin) String() string { return [...]string{"background", "remote write", "read"}[o] }

type originKey struct{}

// withOrigin marks the context of each request h serves with its origin, which the SDK
// passes down to the transport with every request to Azure made for it.
func withOrigin(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o := fromRead
		if r.URL.Path == "/api/v1/write" {
			o = fromWrite
		}
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), originKey{}, o)))
	})
}

// byOrigin is a transport that meters the requests to Azure (every attempt that reaches the
// account: it sits below the fault transport) and their body bytes, by origin.
type byOrigin struct {
	next policy.Transporter
	m    [numOrigins]meter.Meter
}

func (b *byOrigin) Do(req *http.Request) (*http.Response, error) {
	o, _ := req.Context().Value(originKey{}).(origin)
	return b.m[o].Send(b.next, req)
}

// counts returns what was metered for origin o.
func (b *byOrigin) counts(o origin) meter.Counts { return b.m[o].Counts() }

// roundRobin is a reverse proxy that sends each request to the next backend in turn, as a
// load balancer in front of several servers would.
type roundRobin struct {
	proxy    *httputil.ReverseProxy
	backends []*url.URL
	next     atomic.Uint64
	counts   []atomic.Int64

	mu     sync.Mutex
	writes []timedWrite
}

func newRoundRobin(t *testing.T, backends ...string) *roundRobin {
	rr := &roundRobin{counts: make([]atomic.Int64, len(backends))}
	for _, b := range backends {
		u, err := url.Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		rr.backends = append(rr.backends, u)
	}
	rr.proxy = &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		i := int((rr.next.Add(1) - 1) % uint64(len(rr.backends)))
		rr.counts[i].Add(1)
		r.SetURL(rr.backends[i])
	}}
	return rr
}

func (rr *roundRobin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	cw := &codeWriter{ResponseWriter: w}
	rr.proxy.ServeHTTP(cw, r)
	if r.URL.Path == "/api/v1/write" {
		rr.mu.Lock()
		rr.writes = append(rr.writes, timedWrite{time.Since(start), cw.code})
		rr.mu.Unlock()
	}
}

type timedWrite struct {
	took time.Duration
	code int
}

// codeWriter keeps the status code written.
type codeWriter struct {
	http.ResponseWriter
	code int
}

func (c *codeWriter) WriteHeader(code int) {
	if c.code == 0 {
		c.code = code
	}
	c.ResponseWriter.WriteHeader(code)
}

// writeLatency summarizes how long the remote writes answered ok (2xx) and not took, as
// Prometheus saw them.
func (rr *roundRobin) writeLatency() string {
	rr.mu.Lock()
	all := slices.Clone(rr.writes)
	rr.mu.Unlock()
	var parts []string
	for _, ok := range []bool{true, false} {
		var d []time.Duration
		for _, w := range all {
			if (w.code >= 200 && w.code < 300) == ok {
				d = append(d, w.took)
			}
		}
		what := map[bool]string{true: "2xx", false: "failed"}[ok]
		if len(d) == 0 {
			parts = append(parts, "no "+what)
			continue
		}
		slices.Sort(d)
		q := func(f float64) time.Duration { return d[int(f*float64(len(d)-1))].Round(time.Millisecond) }
		parts = append(parts, fmt.Sprintf("%d %s: p50 %s, p90 %s, p99 %s, max %s", len(d), what, q(0.5), q(0.9), q(0.99), q(1)))
	}
	return strings.Join(parts, "; ")
}

// extraTarget is a scrape target the test controls: a gauge per kind (kind="b" can be
// dropped from the answer, which makes Prometheus write a staleness marker for it; failing
// makes it write one for every series of the target), and values whose bits are easy to
// lose: a NaN that is not the staleness marker, infinities, the smallest subnormal and the
// largest float. (Not -0: Prometheus's remote write, gogo protobuf's proto3 encoding, omits
// a double equal to 0, so -0 arrives as +0 at any receiver; and its remote read sends +0.)
type extraTarget struct {
	scrapes atomic.Int64
	dropB   atomic.Bool
	fail    atomic.Bool
}

func (e *extraTarget) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	if e.fail.Load() {
		http.Error(w, "gone", http.StatusServiceUnavailable)
		return
	}
	n := e.scrapes.Add(1)
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	var b strings.Builder
	b.WriteString("# TYPE e2e_gauge gauge\n")
	fmt.Fprintf(&b, "e2e_gauge{kind=\"a\"} %s\n", f(float64(n)/3))
	if !e.dropB.Load() {
		fmt.Fprintf(&b, "e2e_gauge{kind=\"b\"} %s\n", f(-float64(n)*1e-7))
	}
	b.WriteString("# TYPE e2e_special gauge\n")
	b.WriteString("e2e_special{v=\"nan\"} NaN\n")
	b.WriteString("e2e_special{v=\"inf\"} +Inf\n")
	b.WriteString("e2e_special{v=\"neginf\"} -Inf\n")
	b.WriteString("e2e_special{v=\"tiny\"} 5e-324\n")
	b.WriteString("e2e_special{v=\"max\"} 1.7976931348623157e+308\n")
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	_, _ = w.Write([]byte(b.String()))
}

// syncBuffer is a bytes.Buffer safe for concurrent writes (the servers' logs).
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Len()
}

// Lines counts the lines written.
func (s *syncBuffer) Lines() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Count(s.b.Bytes(), []byte("\n"))
}

// Tail returns the last n bytes written.
func (s *syncBuffer) Tail(n int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.b.Bytes()
	if len(b) > n {
		return "..." + string(b[len(b)-n:])
	}
	return string(b)
}

// foldCost is what a fold did and what it cost at the transport.
type foldCost struct {
	report tsdb.FoldReport
	wire   meter.Counts
}

// foldAhead is how far ahead of the wall clock foldNow's clock runs: past the end of the
// current staging bucket (10 minutes) and Fold's margin after it (5 minutes), so that it
// folds everything staged until then.
const foldAhead = 20 * time.Minute

// foldNow folds database dbName's staged points, as `tablets maintain` would, from a handle
// of its own (its own service client and limit Checker) whose clock is foldAhead ahead.
func foldNow(ctx context.Context, t *testing.T, dbName string) foldCost {
	t.Helper()
	checker := azurite.NewChecker(nil, func(v string) { t.Errorf("fold: Azure limit violated: %s", v) })
	svc, err := azurite.Shared(t).NewServiceClient(&aztables.ClientOptions{ClientOptions: policy.ClientOptions{
		Transport: checker, Retry: azurite.TestRetryOptions(), PerCallPolicies: []policy.Policy{runtime.NewRequestIDPolicy()}}})
	if err != nil {
		t.Fatalf("fold: service client: %v", err)
	}
	db, err := tsdb.Open(ctx, svc, dbName, &tsdb.Options{
		Layout: func(c *aztables.Client) (tablets.Store, error) { return chunked.New(c, nil) },
		Now:    func() time.Time { return time.Now().Add(foldAhead) }})
	if err != nil {
		t.Fatalf("fold: open %s: %v", dbName, err)
	}
	checker.Reset() // the fold's requests only
	began := time.Now()
	report, err := db.Fold(ctx)
	if err != nil {
		t.Fatalf("fold: %v (%+v)", err, report)
	}
	if !report.Through.After(began) {
		t.Fatalf("fold: folded through %s only, before the fold began (%s)", report.Through, began)
	}
	st := checker.Stats()
	t.Logf("fold: %+v in %s", report, time.Since(began).Round(time.Millisecond))
	return foldCost{report: report, wire: meter.Counts{Requests: st.Requests, BytesSent: st.RequestBytes, BytesReceived: st.ResponseBytes}}
}
