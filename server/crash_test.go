package server_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log"
	"math"
	mrand "math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/prometheus/prometheus/prompb"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/chunked"
	"github.com/seed71701133/tablets/internal/proc"
	"github.com/seed71701133/tablets/internal/testkit/azurite"
	"github.com/seed71701133/tablets/internal/testkit/dbtest"
	"github.com/seed71701133/tablets/internal/testkit/rwgen"
	"github.com/seed71701133/tablets/tsdb"
)

// The crash test's load: Prometheus 2.42's max_samples_per_send, one sample of each of many
// series a request, several requests in flight.
const (
	crashSeries     = 2000
	crashPerRequest = 500
	crashShards     = 4
	crashInterval   = 15 * time.Second
)

// TestCrashRemoteWrite runs `tablets serve` as a real process, remote-writes at it (1.0,
// through a proxy that follows it from port to port) with Prometheus' retries, and kills it
// with SIGKILL three times at random moments (a fixed seed), restarting it on the same
// database each time. Between the first two kills a fold runs to its end beside the server;
// between the last two a fold runs in a process of its own that is killed with SIGKILL in
// the middle. Then every sample the server acknowledged (204) must read back bit for bit
// through the library, values that are hard to keep included (staleness markers, other
// NaNs, infinities, random bits), its series listed by the index; every point read must be
// one that was sent; and again after a last fold, which must leave nothing staged.
//
// Every request the processes send to Azure goes through a limit Checker in this process: a
// reverse proxy in front of Azurite, whose address is the account's endpoint in their
// connection string.
func TestCrashRemoteWrite(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test: needs Azurite and builds the command; skipped under -short")
	}
	az := azurite.Shared(t)
	bin := buildCommand(t)
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	rnd := make([]byte, 6)
	_, _ = rand.Read(rnd)
	dbName := "crash" + hex.EncodeToString(rnd)
	dbtest.DropOnCleanup(t, dbName)
	rng := mrand.New(mrand.NewPCG(19, 2026))

	serveAccount := newCheckedAccount(t, az, "serve")
	srv := &serveProcess{t: t, bin: bin, db: dbName, account: serveAccount}
	srv.start(ctx)
	front := newFollowingProxy(t, srv.url())

	// The load: until stopped, retried as Prometheus retries (5xx, no answer).
	start := time.Now().Add(-50 * time.Minute).Truncate(crashInterval) // not late: see BenchmarkRemoteWrite
	acks := newAckLog(start)
	stop := make(chan struct{})
	var load rwgen.Result
	var loadErr error
	loadDone := make(chan struct{})
	go func() {
		defer close(loadDone)
		load, loadErr = rwgen.Run(ctx, rwgen.Config{URL: front.URL() + "/api/v1/write", Series: crashSeries, Metrics: 20,
			SamplesPerRequest: crashPerRequest, Shards: crashShards, Interval: crashInterval, Start: start,
			Value: crashValue, Retry: true, Stop: stop, Answered: acks.answered})
	}()

	for kill := 1; kill <= 3; kill++ {
		// A random moment once the server has acknowledged some writes since it started.
		acks.waitAcked(ctx, t, acks.acked()+2*crashPerRequest)
		sleepUntil(ctx, time.Now().Add(time.Duration(500+rng.IntN(2500))*time.Millisecond))
		n := acks.acked()
		srv.kill()
		t.Logf("kill %d: serve SIGKILLed at %s, %d samples acknowledged so far", kill, time.Since(began).Round(time.Millisecond), n)
		srv.start(ctx)
		front.follow(srv.url())
		switch kill {
		case 1: // a fold beside the server, to its end
			acks.waitAcked(ctx, t, acks.acked()+2*crashPerRequest)
			rep := foldFrom(ctx, t, az, dbName)
			t.Logf("fold beside the server: %+v", rep)
			if rep.Entities == 0 {
				t.Error("the fold beside the server found nothing staged")
			}
		case 2: // a fold killed in the middle
			acks.waitAcked(ctx, t, acks.acked()+2*crashPerRequest)
			killFoldMidway(ctx, t, az, dbName, 1+rng.IntN(crashSeries)) // a fold: a request a series, and a few
		}
	}
	acks.waitAcked(ctx, t, acks.acked()+4*crashPerRequest)
	close(stop)
	<-loadDone
	if loadErr != nil || load.Failed != 0 {
		t.Fatalf("load: %v; %+v", loadErr, load)
	}
	t.Logf("load: %d requests accepted (%d samples), %d attempts sent again; answers %v", load.Requests, load.Samples, load.Retried, load.Status)
	if load.Retried == 0 {
		t.Error("no request was sent again: the kills interrupted nothing")
	}
	if int64(acks.acked()) != load.Samples {
		t.Errorf("%d samples acknowledged, the load counts %d", acks.acked(), load.Samples)
	}
	st := serveAccount.checker.Stats()
	t.Logf("serve processes: %d Azure requests (%d transactions of %d operations, %d queries), %.4f a sample acknowledged",
		st.Requests, st.Batches, st.BatchOperations, st.Queries, float64(st.Requests)/float64(acks.acked()))

	// What the account holds: read by a process that wrote none of it.
	checkAcked(ctx, t, openReader(ctx, t, az, dbName, 0), acks, "before the last fold")
	rep := foldFrom(ctx, t, az, dbName)
	t.Logf("last fold: %+v", rep)
	if again := foldFrom(ctx, t, az, dbName); again.Entities != 0 {
		t.Errorf("a fold after the last found %d staging entities left", again.Entities)
	}
	checkAcked(ctx, t, openReader(ctx, t, az, dbName, 0), acks, "after the last fold")
	t.Logf("run took %s", time.Since(began).Round(time.Millisecond))
}

// crashValue is the value of series i's sample of round r: mostly random bits, and values
// that are easy to lose: the staleness marker, another NaN, the infinities, the smallest
// subnormal, the largest float. Never -0: Prometheus' protobuf omits a double equal to 0, so
// it arrives as +0 at any receiver.
func crashValue(i, r int) float64 {
	h := splitmix(uint64(i)<<32 | uint64(r))
	switch h % 16 {
	case 0:
		return math.Float64frombits(staleNaN)
	case 1:
		return math.Float64frombits(0x7ff8000000000001)
	case 2:
		return math.Inf(1)
	case 3:
		return math.Inf(-1)
	case 4:
		return math.SmallestNonzeroFloat64
	case 5:
		return math.MaxFloat64
	}
	bits := splitmix(h)
	if bits == 1<<63 { // -0
		bits = 0
	}
	return math.Float64frombits(bits)
}

// staleNaN is Prometheus' staleness marker.
const staleNaN = 0x7ff0000000000002

func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// ackLog records what the load sent and what was acknowledged, by series and round.
type ackLog struct {
	start time.Time

	mu     sync.Mutex
	cond   *sync.Cond
	acks   map[[2]int]bool // (series, round) acknowledged
	sent   []int           // by series: the highest round sent, -1 for none
	nAcked int
}

func newAckLog(start time.Time) *ackLog {
	a := &ackLog{start: start, acks: map[[2]int]bool{}, sent: make([]int, crashSeries)}
	a.cond = sync.NewCond(&a.mu)
	for i := range a.sent {
		a.sent[i] = -1
	}
	return a
}

// answered is rwgen's Answered: a 204 acknowledges every sample of the request.
func (a *ackLog) answered(req *prompb.WriteRequest, status int, _ error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, ts := range req.Timeseries {
		i, r := a.sample(ts)
		if i < 0 {
			continue
		}
		a.sent[i] = max(a.sent[i], r)
		if status == http.StatusNoContent && !a.acks[[2]int{i, r}] {
			a.acks[[2]int{i, r}] = true
			a.nAcked++
		}
	}
	a.cond.Broadcast()
}

// sample is the series and round of a one-sample series of a request (-1 if it is not one
// of the load's).
func (a *ackLog) sample(ts prompb.TimeSeries) (int, int) {
	i := seriesNumber(ts.Labels)
	if i < 0 || len(ts.Samples) != 1 {
		return -1, 0
	}
	return i, int((ts.Samples[0].Timestamp - a.start.UnixMilli()) / crashInterval.Milliseconds())
}

func seriesNumber(ls []prompb.Label) int {
	for _, l := range ls {
		if l.Name == "instance" {
			if i, ok := rwgen.SeriesOf(l.Value); ok && i < crashSeries {
				return i
			}
		}
	}
	return -1
}

func (a *ackLog) acked() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.nAcked
}

// waitAcked waits until n samples are acknowledged; it fails the test if ctx ends first.
func (a *ackLog) waitAcked(ctx context.Context, t *testing.T, n int) {
	t.Helper()
	stop := context.AfterFunc(ctx, func() { a.mu.Lock(); a.cond.Broadcast(); a.mu.Unlock() })
	defer stop()
	a.mu.Lock()
	defer a.mu.Unlock()
	for a.nAcked < n && ctx.Err() == nil {
		a.cond.Wait()
	}
	if a.nAcked < n {
		t.Fatalf("%d samples acknowledged, waited for %d: %v", a.nAcked, n, ctx.Err())
	}
}

// checkAcked reads every series of the load through db and checks that each acknowledged
// sample is there, bit for bit, that each point read was sent (right series, round and
// value), and that the index lists every series with an acknowledged sample.
func checkAcked(ctx context.Context, t *testing.T, db *tsdb.DB, a *ackLog, when string) {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	rounds := 0
	for _, r := range a.sent {
		rounds = max(rounds, r+1)
	}
	from, to := a.start, a.start.Add(time.Duration(rounds)*crashInterval)
	byKey := map[string]int{}
	var keys []string
	for s, err := range db.Select(ctx, from, to, tsdb.Matcher{Type: tsdb.MatchEqual, Name: "job", Value: "rwgen"}) {
		if err != nil {
			t.Fatalf("%s: select: %v", when, err)
		}
		i := -1
		for _, l := range s.Labels {
			if l.Name == "instance" {
				if n, ok := rwgen.SeriesOf(l.Value); ok && n < crashSeries {
					i = n
				}
			}
		}
		if i < 0 {
			t.Errorf("%s: the index lists %v, not a series of the load", when, s.Labels)
			continue
		}
		byKey[s.Series] = i
		keys = append(keys, s.Series)
	}
	found := map[[2]int]bool{}
	var problems []string
	problem := func(format string, args ...any) {
		if len(problems) < 20 {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}
	points := 0
	for p, err := range db.QueryMany(ctx, keys, from, to) {
		if err != nil {
			t.Fatalf("%s: query: %v", when, err)
		}
		points++
		i := byKey[p.Series]
		d := p.Time.Sub(a.start)
		r := int(d / crashInterval)
		switch {
		case d%crashInterval != 0 || r > a.sent[i]:
			problem("series %d: a point at %s, which was never sent", i, p.Time.Format(time.RFC3339Nano))
		case math.Float64bits(p.Value) != math.Float64bits(crashValue(i, r)):
			problem("series %d round %d: value %#x, sent %#x", i, r, math.Float64bits(p.Value), math.Float64bits(crashValue(i, r)))
		case found[[2]int{i, r}]:
			problem("series %d round %d: read twice", i, r)
		}
		found[[2]int{i, r}] = true
	}
	missing := 0
	for k := range a.acks {
		if !found[k] {
			missing++
			problem("series %d round %d: acknowledged, not read back", k[0], k[1])
		}
	}
	stale := 0
	for k := range found {
		if math.Float64bits(crashValue(k[0], k[1])) == staleNaN {
			stale++
		}
	}
	t.Logf("%s: %d series listed, %d points read (%d staleness markers), %d acknowledged, %d of them missing",
		when, len(keys), points, stale, len(a.acks), missing)
	if len(problems) > 0 {
		t.Errorf("%s:\n\t%s", when, strings.Join(problems, "\n\t"))
	}
	if len(a.acks) == 0 || stale == 0 {
		t.Errorf("%s: %d samples acknowledged, %d staleness markers read: nothing to check", when, len(a.acks), stale)
	}
}

// buildCommand builds `tablets` into a temporary directory.
func buildCommand(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go command to build tablets with: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "tablets")
	cmd := exec.CommandContext(t.Context(), goBin, "build", "-o", bin, "github.com/seed71701133/tablets/cmd/tablets")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build tablets: %v\n%s", err, out)
	}
	return bin
}

// checkedAccount is the Azurite account as another process sees it: a reverse proxy in this
// process whose transport is a limit Checker, so that every request the process sends to
// Azure is checked and counted here.
type checkedAccount struct {
	checker *azurite.Checker
	proxy   *httptest.Server
	// afterRequest, if set, is called after each request has been answered by Azurite and
	// before the answer goes back, with the number of requests so far.
	afterRequest atomic.Pointer[func(n int64)]
	requests     atomic.Int64
}

func newCheckedAccount(t *testing.T, az *azurite.Server, name string) *checkedAccount {
	t.Helper()
	target, err := url.Parse(az.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	target.Path = ""
	var mu sync.Mutex
	ended := false
	t.Cleanup(func() { mu.Lock(); ended = true; mu.Unlock() })
	a := &checkedAccount{checker: azurite.NewChecker(nil, func(v string) {
		mu.Lock()
		defer mu.Unlock()
		if !ended {
			t.Errorf("%s: Azure limit violated: %s", name, v)
		}
	})}
	rp := &httputil.ReverseProxy{
		Rewrite:   func(r *httputil.ProxyRequest) { r.SetURL(target) },
		Transport: transportFunc(a.roundTrip),
		ErrorLog:  log.New(io.Discard, "", 0), // a killed process's requests are cancelled
	}
	a.proxy = httptest.NewServer(rp)
	t.Cleanup(a.proxy.Close)
	return a
}

func (a *checkedAccount) roundTrip(req *http.Request) (*http.Response, error) {
	req.RequestURI = "" // the proxy's outgoing request, which the Checker's http.Client sends
	resp, err := a.checker.Do(req)
	n := a.requests.Add(1)
	if f := a.afterRequest.Load(); f != nil {
		(*f)(n)
	}
	return resp, err
}

// connectionString is the account's, with the proxy as its table endpoint.
func (a *checkedAccount) connectionString() string {
	return fmt.Sprintf("DefaultEndpointsProtocol=http;AccountName=%s;AccountKey=%s;TableEndpoint=%s/%s;",
		azurite.AccountName, azurite.AccountKey, a.proxy.URL, azurite.AccountName)
}

type transportFunc func(*http.Request) (*http.Response, error)

func (f transportFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// serveProcess is `tablets serve` on the database, started and killed by the test.
type serveProcess struct {
	t       *testing.T
	bin, db string
	account *checkedAccount
	p       *proc.Process
	addr    string
	starts  int
}

// start starts the server on a free port and waits until it is ready.
func (s *serveProcess) start(ctx context.Context) {
	s.t.Helper()
	s.starts++
	p, err := proc.OnFreePort(5, func(port int) (*proc.Process, error) {
		addr := "127.0.0.1:" + strconv.Itoa(port)
		p, err := proc.Start(s.bin, []string{"serve", "--db", s.db, "--listen", addr,
			"--connection-string", s.account.connectionString()}, &proc.Options{PortInUse: "address already in use"})
		if err != nil {
			return nil, err
		}
		if err := p.WaitReady(ctx, time.Minute, readyAt("http://"+addr)); err != nil {
			_ = p.Stop(0)
			return nil, err
		}
		s.addr = addr
		return p, nil
	})
	if err != nil {
		s.t.Fatalf("serve (start %d): %v", s.starts, err)
	}
	s.p = p
	start := s.starts
	s.t.Cleanup(func() {
		if !p.Exited() {
			_ = p.Stop(0)
		}
		if s.t.Failed() {
			s.t.Logf("serve (start %d) output:\n%s", start, p.Output())
		}
	})
}

func (s *serveProcess) url() string { return "http://" + s.addr }

// kill sends SIGKILL to the server and waits until it is gone.
func (s *serveProcess) kill() {
	s.t.Helper()
	if s.p.Exited() {
		s.t.Fatalf("serve exited before it was killed: %v\n%s", s.p.ExitErr(), s.p.Output())
	}
	if err := s.p.Stop(0); err != nil {
		s.t.Fatalf("kill serve: %v", err)
	}
}

// readyAt reports whether the server at base answers /-/ready with 200.
func readyAt(base string) func(context.Context) bool {
	return func(ctx context.Context) bool {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/-/ready", nil)
		if err != nil {
			return false
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
}

// followingProxy sends each request to the server's current address, as a load balancer
// in front of a restarted server would; while none answers it answers 502.
type followingProxy struct {
	srv    *httptest.Server
	target atomic.Pointer[url.URL]
}

func newFollowingProxy(t *testing.T, to string) *followingProxy {
	f := &followingProxy{}
	f.follow(to)
	f.srv = httptest.NewServer(&httputil.ReverseProxy{
		Rewrite:  func(r *httputil.ProxyRequest) { r.SetURL(f.target.Load()) },
		ErrorLog: log.New(io.Discard, "", 0), // requests to a killed server fail: expected
	})
	t.Cleanup(f.srv.Close)
	return f
}

func (f *followingProxy) URL() string { return f.srv.URL }

func (f *followingProxy) follow(to string) {
	u, err := url.Parse(to)
	if err != nil {
		panic(err) // built by the test from an address
	}
	f.target.Store(u)
}

// openReader opens the database through its own client and Checker, its clock ahead by
// ahead.
func openReader(ctx context.Context, t *testing.T, az *azurite.Server, dbName string, ahead time.Duration) *tsdb.DB {
	t.Helper()
	checker := azurite.NewChecker(nil, func(v string) { t.Errorf("reader: Azure limit violated: %s", v) })
	svc, err := az.NewServiceClient(&aztables.ClientOptions{ClientOptions: policy.ClientOptions{
		Transport: checker, Retry: azurite.TestRetryOptions(), PerCallPolicies: []policy.Policy{runtime.NewRequestIDPolicy()}}})
	if err != nil {
		t.Fatal(err)
	}
	db, err := tsdb.Open(ctx, svc, dbName, &tsdb.Options{
		Layout: func(c *aztables.Client) (tablets.Store, error) { return chunked.New(c, nil) },
		Now:    func() time.Time { return time.Now().Add(ahead) }})
	if err != nil {
		t.Fatalf("open %s: %v", dbName, err)
	}
	return db
}

// foldFrom folds everything staged so far from a handle of its own, whose clock is ahead
// by foldAhead and the fold lease's 5 minutes and more: the lease of the fold process killed
// midway (its clock foldAhead ahead) has ended by it, as it does after 5 minutes.
func foldFrom(ctx context.Context, t *testing.T, az *azurite.Server, dbName string) tsdb.FoldReport {
	t.Helper()
	began := time.Now()
	rep, err := openReader(ctx, t, az, dbName, foldAhead+6*time.Minute).Fold(ctx)
	if err != nil {
		t.Fatalf("fold: %v (%+v)", err, rep)
	}
	if !rep.Through.After(began) {
		t.Fatalf("fold: folded through %s only, before the fold began (%s)", rep.Through, began)
	}
	return rep
}

// Environment of the fold process (the test binary run again: see TestMain).
const (
	foldChildEnv   = "TABLETS_TEST_FOLD_DB"
	foldAccountEnv = "TABLETS_TEST_FOLD_ACCOUNT"
)

// killFoldMidway runs a fold in a process of its own and kills it with SIGKILL once it has
// sent afterRequests requests to Azure (the last one answered by Azurite, the answer lost).
func killFoldMidway(ctx context.Context, t *testing.T, az *azurite.Server, dbName string, afterRequests int) {
	t.Helper()
	account := newCheckedAccount(t, az, "fold")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(foldChildEnv, dbName)
	t.Setenv(foldAccountEnv, account.connectionString())
	p, err := proc.Start(self, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	killing, killed := make(chan struct{}), make(chan struct{})
	var once sync.Once
	kill := func(n int64) {
		if n >= int64(afterRequests) {
			once.Do(func() { close(killing); _ = p.Stop(0); close(killed) })
		}
	}
	account.afterRequest.Store(&kill)
	select {
	case <-killing:
	case <-p.Done():
		select {
		case <-killing:
		default:
			t.Fatalf("the fold process ended before its request %d (%v):\n%s", afterRequests, p.ExitErr(), p.Output())
		}
	case <-ctx.Done():
		_ = p.Stop(0)
		t.Fatalf("fold process: %v", ctx.Err())
	}
	<-killed
	st := account.checker.Stats()
	t.Logf("fold process SIGKILLed after %d requests to Azure (%d transactions of %d operations, %d queries)",
		afterRequests, st.Batches, st.BatchOperations, st.Queries)
}

// foldChild is the fold process: when the environment says so, it folds the database
// through the account given and returns true (the test binary then exits).
func foldChild() (code int, ok bool) {
	dbName := os.Getenv(foldChildEnv)
	if dbName == "" {
		return 0, false
	}
	fail := func(err error) (int, bool) { fmt.Fprintln(os.Stderr, "fold process:", err); return 1, true }
	svc, err := aztables.NewServiceClientFromConnectionString(os.Getenv(foldAccountEnv), nil)
	if err != nil {
		return fail(err)
	}
	ctx := context.Background()
	db, err := tsdb.Open(ctx, svc, dbName, &tsdb.Options{
		Layout: func(c *aztables.Client) (tablets.Store, error) { return chunked.New(c, nil) },
		Now:    func() time.Time { return time.Now().Add(foldAhead) }})
	if err != nil {
		return fail(err)
	}
	rep, err := db.Fold(ctx)
	if err != nil {
		return fail(err)
	}
	fmt.Printf("fold process: %+v\n", rep)
	return 0, true
}
