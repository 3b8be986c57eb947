package soak

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/azurite/runner"
	"github.com/seed71701133/tablets/internal/proc"
)

// Config is one soak run.
type Config struct {
	Duration time.Duration // of the load
	Tenants  int
	Rate     float64 // samples/s, all tenants together
	// OutageAt is when, after the load starts, the account is cut off for Outage (0: no
	// outage).
	OutageAt, Outage time.Duration
	// ConnectionString names the account; "" starts a local Azurite. Its table endpoint
	// must be plain http (Azurite's): the outage proxy forwards TCP and cannot present the
	// account's TLS certificate.
	ConnectionString string
	// Tablets is the tablets executable whose `serve` is soaked.
	Tablets string
	// Servers is how many `tablets serve` run on the one database (0: 1), each with its
	// background work (the database's leases share it out), behind a round-robin Front that
	// the writers, the dashboards and the read-back use: consecutive requests of a client
	// reach different servers. One server is reached directly, as before the front.
	Servers int
	// ServeArgs are more flags for `tablets serve` (after the soak's own, so they win).
	ServeArgs []string
	// Dir receives the servers' logs (server.log, server-1.log, ...) and configuration
	// file; "" means a temporary directory, removed at the end.
	Dir string
	// Progress, if set, receives a line a minute.
	Progress io.Writer

	// Scrape, Refresh and Sample are the scrape interval of every target (0: 15s), the
	// dashboards' refresh interval (0: 10s) and how often the server is sampled (0: 10s).
	Scrape, Refresh, Sample time.Duration
	// Drain bounds the wait, after the load, for the writes still queued to be answered
	// (0: 5m).
	Drain time.Duration
	// Backfill is how much history is written before the load, as fast as the server takes
	// it (0: none): the span of the samples before the load's first scrape. A soak that
	// starts from an empty database measures its tables filling up as much as the server:
	// a dashboard's 1h panels read more data every minute until an hour of it exists.
	// With a backfill of the longest raw range queried, their working set is full from the
	// start. A server without background work takes it (backgroundOff); once it is all
	// answered, the soak starts the server of the load in its place and waits (at most
	// Settle, 0: 20m) for its background work to catch up (see settle), then starts the
	// load, its first scrape at its start: the history has a hole from the backfill's end
	// to the load's start. A 1h panel's range holds as much data all through the run (an
	// hour less the hole) while the hole is shorter than an hour less the run.
	Backfill, Settle time.Duration
	// Verify is how many of a tenant's series are read back at the end, spread over its
	// targets (0: all). Reading back costs the server a request to the account per 5
	// series, and on Azurite each request scans a whole table.
	Verify int
}

// maxServers bounds Config.Servers: each is a process with its own caches and account
// connections, all on one machine.
const maxServers = 64

// The tenant header, as Cortex and Mimir name it.
const tenantHeader = "X-Scope-OrgID"

func (c *Config) check() error {
	if c.Scrape == 0 {
		c.Scrape = 15 * time.Second
	}
	if c.Refresh == 0 {
		c.Refresh = 10 * time.Second
	}
	if c.Sample == 0 {
		c.Sample = 10 * time.Second
	}
	if c.Drain == 0 {
		c.Drain = 5 * time.Minute
	}
	if c.Settle == 0 {
		c.Settle = 20 * time.Minute
	}
	if c.Servers == 0 {
		c.Servers = 1
	}
	switch {
	case c.Duration <= 0:
		return invalid("the duration %s is not positive", c.Duration)
	case c.Tenants < 1 || c.Tenants > 1000:
		return invalid("%d tenants: 1 to 1000", c.Tenants)
	case c.Servers < 1 || c.Servers > maxServers:
		return invalid("%d servers: 1 to %d", c.Servers, maxServers)
	case !(c.Rate > 0) || math.IsInf(c.Rate, 0):
		return invalid("the rate %v is not a positive number of samples/s", c.Rate)
	case c.OutageAt < 0 || c.Outage < 0 || (c.Outage > 0 && c.OutageAt+c.Outage > c.Duration):
		return invalid("the outage (%s at %s) must end within the run (%s)", c.Outage, c.OutageAt, c.Duration)
	case c.Backfill < 0 || c.Backfill > 7*24*time.Hour:
		return invalid("the backfill %s must be 0 to 168h", c.Backfill)
	case c.Settle < 0:
		return invalid("the settle bound %s is negative", c.Settle)
	case c.Verify < 0:
		return invalid("the series to verify (%d) are negative", c.Verify)
	case c.Scrape < time.Second || c.Refresh <= 0 || c.Sample <= 0 || c.Drain < 0:
		return invalid("the intervals must be positive, the scrape interval at least 1s")
	case c.Tablets == "":
		return invalid("no tablets executable")
	}
	if c.ConnectionString != "" {
		if _, err := tableEndpointHost(c.ConnectionString); err != nil {
			return err
		}
	}
	return nil
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("soak: %w: %s", tablets.ErrInvalidOptions, fmt.Sprintf(format, args...))
}

// tenantID is tenant number i's ID: lowercase letters and digits.
func tenantID(i int) string { return "soak" + strconv.Itoa(i) }

// Run runs the soak and returns its report; the report's OK says whether every target was
// met. The error is a failure to run it at all (or ctx ending).
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	tenancy, err := serveHasTenants(ctx, cfg.Tablets)
	if err != nil {
		return nil, err
	}
	if !tenancy && cfg.Tenants > 1 {
		return nil, invalid("%s serve has no --config.file (tenants): run one tenant", cfg.Tablets)
	}
	dir := cfg.Dir
	if dir != "" {
		// The server runs in another directory: it gets the configuration's absolute path.
		if dir, err = filepath.Abs(dir); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
	} else {
		if dir, err = os.MkdirTemp("", "tablets-soak-"); err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
	}
	connString, accountPid, stopAccount, err := account(ctx, cfg.ConnectionString, cfg.Progress)
	if err != nil {
		return nil, err
	}
	defer stopAccount()
	target, err := tableEndpointHost(connString)
	if err != nil {
		return nil, err
	}
	proxy, err := NewProxy(target)
	if err != nil {
		return nil, err
	}
	defer proxy.Close()
	r := &run{cfg: cfg, tenancy: tenancy, proxy: proxy, dir: dir, accountPid: accountPid, connString: strings.Replace(connString, target, proxy.Addr(), 1),
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	if cfg.Backfill > 0 {
		r.srvs, err = startServers(ctx, cfg, dir, tenancy, r.connString, "server-backfill", backgroundOff...)
	} else {
		r.srvs, err = startServers(ctx, cfg, dir, tenancy, r.connString, "server")
	}
	if err != nil {
		return nil, err
	}
	defer func() { stopServers(r.srvs) }()
	r.base = r.srvs[0].base
	if len(r.srvs) > 1 {
		if r.front, err = NewFront(bases(r.srvs)); err != nil {
			return nil, err
		}
		defer r.front.Close()
		r.base = r.front.URL()
	}
	return r.run(ctx)
}

// serveHasTenants reports whether the executable's serve takes a configuration file of
// tenants.
func serveHasTenants(ctx context.Context, bin string) (bool, error) {
	out, err := exec.CommandContext(ctx, bin, "serve", "--help").CombinedOutput()
	if err != nil {
		return false, fmt.Errorf("soak: %s serve --help: %w: %.500s", bin, err, out)
	}
	return strings.Contains(string(out), "--config.file"), nil
}

// account returns the connection string of the account, starting a local Azurite if none
// is given, and the process ID of the Azurite it started (0 for an account given).
func account(ctx context.Context, cs string, progress io.Writer) (string, int, func(), error) {
	if cs != "" {
		return cs, 0, func() {}, nil
	}
	if progress != nil {
		fmt.Fprintln(progress, "starting a local Azurite (in memory; the first run installs it from npm)...")
	}
	az, err := runner.Start(ctx)
	if err != nil {
		return "", 0, nil, err
	}
	return az.ConnectionString, az.Pid(), func() { _ = az.Stop() }, nil
}

// tableEndpointHost is the host:port of a connection string's table endpoint, which must
// be plain http.
func tableEndpointHost(cs string) (string, error) {
	for _, part := range strings.Split(cs, ";") {
		k, v, _ := strings.Cut(part, "=")
		if !strings.EqualFold(strings.TrimSpace(k), "TableEndpoint") {
			continue
		}
		u, err := url.Parse(strings.TrimSpace(v))
		if err != nil || u.Scheme != "http" || u.Port() == "" {
			return "", invalid("the connection string's TableEndpoint must be http://HOST:PORT/... (the outage proxy cannot carry TLS)")
		}
		return u.Host, nil
	}
	return "", invalid("the connection string has no TableEndpoint (the outage proxy needs an http endpoint)")
}

// server is a `tablets serve` subprocess.
type server struct {
	p        *proc.Process
	base     string // http://host:port of --listen
	internal string // http://host:port of --listen-internal
}

func (s *server) stop() { _ = s.p.Stop(30 * time.Second) }

// backgroundOff are the flags of the server that takes a backfill: no background work.
// Its rollups and compactions would read the tables the backfill fills, over and over
// while they grow (on Azurite each read scans a whole table); the server of the load
// catches up on all of it once, before the load starts (Config.Settle).
var backgroundOff = []string{"--fold-interval=-1s", "--rollup-every=-1s", "--compact-every=-1s", "--retain-every=-1s"}

// startServers starts cfg.Servers `tablets serve` on the one database (the same flags, the
// same account, the same tenants), at once as replicas of a deployment start, and waits
// until every one is ready; if one fails, it stops the others. Their logs are dir/log.log,
// dir/log-1.log, ...
func startServers(ctx context.Context, cfg Config, dir string, tenancy bool, connString, log string, extra ...string) ([]*server, error) {
	var args []string
	if tenancy {
		// Written once, before any server reads it.
		file := filepath.Join(dir, "soak-config.yml")
		allow := make([]string, cfg.Tenants)
		for i := range allow {
			allow[i] = tenantID(i)
		}
		if err := os.WriteFile(file, []byte("tenants:\n  allow: ["+strings.Join(allow, ", ")+"]\n"), 0o600); err != nil {
			return nil, err
		}
		args = append(args, "--config.file", file)
	}
	args = append(append(args, extra...), cfg.ServeArgs...)
	srvs := make([]*server, cfg.Servers)
	errs := make([]error, cfg.Servers)
	var wg sync.WaitGroup
	for i := range srvs {
		name := log + ".log"
		if i > 0 {
			name = fmt.Sprintf("%s-%d.log", log, i)
		}
		wg.Go(func() { srvs[i], errs[i] = startServer(ctx, cfg, connString, filepath.Join(dir, name), args) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		stopServers(srvs)
		return nil, err
	}
	return srvs, nil
}

// stopServers stops the servers (nil ones skipped), at once: each may take its grace
// period to finish its work.
func stopServers(srvs []*server) {
	var wg sync.WaitGroup
	for _, s := range srvs {
		if s != nil {
			wg.Go(s.stop)
		}
	}
	wg.Wait()
}

// bases are the servers' base URLs.
func bases(srvs []*server) []string {
	b := make([]string, len(srvs))
	for i, s := range srvs {
		b[i] = s.base
	}
	return b
}

// startServer starts `tablets serve` on two free ports, with short background intervals
// so that folds, rollups and compactions happen during the soak (then extra, which win),
// logging to the file log, and waits until it is ready.
func startServer(ctx context.Context, cfg Config, connString, log string, extra []string) (*server, error) {
	listen, err := freeAddr()
	if err != nil {
		return nil, err
	}
	internal, err := freeAddr()
	if err != nil {
		return nil, err
	}
	args := []string{"serve", "--db", "soak",
		"--listen", listen, "--listen-internal", internal,
		"--connection-string", connString,
		"--fold-interval", "1m", "--rollup-every", "1m", "--compact-every", "2m",
		"--rollup-catch-up", "1h", "--compact-catch-up", "1h",
		// The queries over the dashboards' goal, with what the account did for each, in
		// the servers' logs.
		"--query.log-slower-than", "2.5s",
		"--staging-partitions", strconv.Itoa(stagingPartitions(cfg.Rate / float64(cfg.Tenants))),
	}
	args = append(args, extra...)
	p, err := proc.Start(cfg.Tablets, args, &proc.Options{LogFile: log})
	if err != nil {
		return nil, err
	}
	s := &server{p: p, base: "http://" + listen, internal: "http://" + internal}
	if err := p.WaitReady(ctx, 2*time.Minute, s.ready); err != nil {
		_ = p.Stop(0)
		return nil, fmt.Errorf("soak: %w", err)
	}
	return s, nil
}

// stagingPartitions follows `tablets serve --help`: a partition takes about 1,300
// samples/s, and their number is a power of two.
func stagingPartitions(rate float64) int {
	n := 1
	for float64(n)*1300 < rate {
		n *= 2
	}
	return n
}

func (s *server) ready(ctx context.Context) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.internal+"/-/ready", nil)
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

// freeAddr is a free address of 127.0.0.1 (another process may take it before the server
// listens: the server then fails to start, and so does the soak).
func freeAddr() (string, error) {
	port, err := proc.FreePort()
	if err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), nil
}

// run is one soak in progress.
type run struct {
	cfg     Config
	tenancy bool
	proxy   *Proxy
	srvs    []*server
	// front is the round-robin front of several servers (nil with one); base is the URL the
	// writers, dashboards and read-back use: the front's, or the one server's.
	front *Front
	base  string
	// dir and connString are the servers', for a restart.
	dir, connString string
	// accountPid is the process of the Azurite the soak started (0: an account given), whose
	// CPU time the samples take.
	accountPid int
	client     *http.Client
}

func (r *run) run(ctx context.Context) (*Report, error) {
	cfg := r.cfg
	writers := r.writers()
	// from is the backfill's end; the load's first scrape is when it starts (began).
	from := time.Now()
	var settled time.Duration
	if cfg.Backfill > 0 {
		r.progress("backfill: writing each tenant's %s before %s", cfg.Backfill, from.UTC().Format(time.TimeOnly))
		var wg sync.WaitGroup
		for _, w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				w.backfill(ctx, from, cfg.Backfill)
			}()
		}
		wg.Wait()
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		r.progress("backfill over in %s; restarting the %s with background work, waiting (at most %s) for the background work to catch up", time.Since(from).Round(time.Second), serversText(cfg.Servers), cfg.Settle)
		t0 := time.Now()
		if err := r.restart(ctx, writers); err != nil {
			return nil, err
		}
		quiet, err := r.settle(ctx, cfg.Settle)
		if err != nil {
			return nil, err
		}
		settled = time.Since(t0)
		r.progress("background work caught up: %v, after %s", quiet, settled.Round(time.Second))
	}
	began := time.Now()
	points := r.monitor(ctx, began)
	queries, err := r.load(ctx, began, writers)
	if err != nil {
		points()
		return nil, err
	}
	rep := newReport(cfg, began, r.tenancy, writers[0].series.Len())
	rep.BackfillSeconds, rep.SettleSeconds = began.Sub(from).Seconds()-settled.Seconds(), settled.Seconds()
	to := time.Now()
	for i, w := range writers {
		r.progress("reading back tenant %s's series (%d)", tenantID(i), w.series.Len())
		t0 := time.Now()
		rb, err := readBack(ctx, r.client, r.base, w.header, w.series, checkedTargets(w.series.Targets, cfg.Verify), w.acked, from.Add(-cfg.Backfill), to)
		if err != nil {
			points()
			return nil, err
		}
		r.progress("tenant %s read back in %s: %d samples, %d missing, %d not verified",
			tenantID(i), time.Since(t0).Round(time.Second), rb.Samples, rb.Missing, rb.Unverified)
		rep.PerTenant[tenantID(i)] = TenantReport{Writes: w.snapshot(), Readback: rb}
	}
	rep.finish(points(), queries, to.Sub(began).Seconds(), cfg.Duration)
	if r.front != nil {
		for i, n := range r.front.Routed() {
			rep.PerServer[i].Routed = n
		}
	}
	return rep, nil
}

// writers are the tenants' remote writers: each has Rate/Tenants samples/s, as targets of
// seriesPerTarget series scraped every Scrape, sent by a shard per 250 samples/s (2 at
// least: a shard sends one request at a time).
func (r *run) writers() []*writer {
	perTenant := r.cfg.Rate / float64(r.cfg.Tenants)
	targets := max(1, int(math.Round(perTenant*r.cfg.Scrape.Seconds()/seriesPerTarget)))
	shards := max(2, int(math.Ceil(perTenant/250)))
	writers := make([]*writer, r.cfg.Tenants)
	for i := range writers {
		header := ""
		if r.tenancy {
			header = tenantID(i)
		}
		writers[i] = newWriter(Series{Tenant: tenantID(i), Targets: targets, Interval: r.cfg.Scrape},
			r.base+"/api/v1/write", header, r.client, shards)
	}
	return writers
}

// monitor samples the servers every Sample from now on; the function returned stops it and
// returns the samples.
func (r *run) monitor(ctx context.Context, began time.Time) func() []Point {
	ctx, stop := context.WithCancel(ctx)
	ch := make(chan Point, 16)
	go observe(ctx, r.client, r.srvs, r.accountPid, began, r.cfg.Sample, ch)
	var points []Point
	done := make(chan struct{})
	go func() {
		defer close(done)
		for p := range ch {
			points = append(points, p)
		}
	}()
	return func() []Point {
		stop()
		<-done
		return points
	}
}

// load runs the writers and the dashboards for the run's duration, with the outage, then
// waits (at most Drain) for the writes still queued to be answered.
func (r *run) load(ctx context.Context, began time.Time, writers []*writer) (*QueryStats, error) {
	stop := make(chan struct{})
	drainCtx, cancelDrain := context.WithCancel(ctx)
	defer cancelDrain()
	var wg sync.WaitGroup
	for _, w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.run(drainCtx, began, stop)
		}()
	}
	queryCtx, stopQueries := context.WithCancel(ctx)
	defer stopQueries()
	queries := newQueryStats(began, r.cfg.OutageAt, r.cfg.Outage)
	var qwg sync.WaitGroup
	for i, w := range writers {
		qwg.Add(1)
		go func() {
			defer qwg.Done()
			refresh(queryCtx, r.client, r.base, tenantID(i), w.header, r.cfg.Refresh, queries)
		}()
	}
	outage := r.scheduleOutage(ctx)

	r.wait(ctx, began, writers, queries)
	close(stop)
	r.progress("load over: waiting for the writes queued to be answered (at most %s)", r.cfg.Drain)
	stopQueries()
	qwg.Wait()
	drainTimer := time.AfterFunc(r.cfg.Drain, cancelDrain)
	wg.Wait()
	drainTimer.Stop()
	if err := <-outage; err != nil {
		return nil, err
	}
	return queries, ctx.Err()
}

// scheduleOutage cuts the account at OutageAt for Outage; the channel gets the restore's
// error, or nil, once the outage is over (at once without one).
func (r *run) scheduleOutage(ctx context.Context) <-chan error {
	done := make(chan error, 1)
	if r.cfg.Outage == 0 {
		done <- nil
		return done
	}
	go func() {
		if !sleep(ctx, r.cfg.OutageAt) {
			done <- nil
			return
		}
		r.progress("outage: the account is cut off for %s", r.cfg.Outage)
		r.proxy.Cut()
		sleep(ctx, r.cfg.Outage)
		err := r.proxy.Restore()
		r.progress("outage over: the account is back")
		done <- err
	}()
	return done
}

// restart stops the servers of the backfill and starts those of the load (with their
// background work, logging to server.log, server-1.log, ...), which the writers then write
// to: through the front, now in front of them, or to the one server directly.
func (r *run) restart(ctx context.Context, writers []*writer) error {
	stopServers(r.srvs)
	r.srvs = nil
	srvs, err := startServers(ctx, r.cfg, r.dir, r.tenancy, r.connString, "server")
	if err != nil {
		return err
	}
	r.srvs = srvs
	if r.front != nil {
		return r.front.SetBackends(bases(srvs))
	}
	r.base = srvs[0].base
	for _, w := range writers {
		w.url = r.base + "/api/v1/write"
	}
	return nil
}

// settleQuiet is how many samples in a row, 10s apart, must find the servers idle for them
// to count as caught up.
const settleQuiet = 3

// settleTasks are the background tasks whose first run must be over for a server to
// count as caught up: the first rollup and compaction cover the backfill (as far as it is
// sealed), and they only start at their first tick; the first rollup of dirty slices
// (flagged) rolls up again the slices the backfill's late points marked dirty, every
// series' (it ran for minutes into the load, where the settle took the servers for idle
// because nothing waited); the warm-up of the raw cache at start (warm) reads the
// backfill's last hours into it, as a server started before a dashboard is opened has.
var settleTasks = []string{"rollup", "compact", "flagged", "warm"}

// settle waits until every server's background work has caught up, or at most bound
// (false): each server's first rollup, compaction and rollup of dirty slices of every
// tenant run (done, or left to the server holding the task's lease) and one of them done,
// then settleQuiet samples in a row in which every server's /metrics has
// tablets_background_jobs_waiting and tablets_account_requests_waiting 0. Every server, not one: one still catching up would
// do it during the load.
func (r *run) settle(ctx context.Context, bound time.Duration) (bool, error) {
	deadline := time.Now().Add(bound)
	quiet := 0
	for time.Now().Before(deadline) {
		if !sleep(ctx, 10*time.Second) {
			return false, ctx.Err()
		}
		idle := true
		var expositions []string
		for _, s := range r.srvs {
			ok, exposition, err := r.idle(ctx, s)
			if err != nil {
				return false, err
			}
			idle = idle && ok
			expositions = append(expositions, exposition)
		}
		idle = idle && r.firstRunsDone(expositions)
		if idle {
			quiet++
		} else {
			quiet = 0
		}
		if quiet == settleQuiet {
			return true, nil
		}
	}
	return false, nil
}

// idle reports whether a server's /metrics (returned) shows no background job or account
// request waiting. A server that does not answer is not idle; the error is ctx's.
func (r *run) idle(ctx context.Context, s *server) (bool, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.internal+"/metrics", nil)
	if err != nil {
		return false, "", err
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return false, "", ctx.Err()
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return false, "", ctx.Err()
	}
	waiting := metricSums(bytes.NewReader(body), "tablets_background_jobs_waiting", "tablets_account_requests_waiting")
	jobs, requests := waiting[0], waiting[1]
	return jobs == 0 && requests == 0, string(body), nil
}

// firstRunsDone reports whether the servers' /metrics expositions count, for each tenant
// and each of settleTasks, a run on every server (done, or "busy": another server held the
// task's lease) and a successful one on some server.
func (r *run) firstRunsDone(expositions []string) bool {
	for i := range r.cfg.Tenants {
		for _, task := range settleTasks {
			done := false
			for _, metrics := range expositions {
				ran := false
				for _, result := range []string{"ok", "busy"} {
					series := `tablets_background_runs_total{result="` + result + `",task="` + task + `"`
					if r.tenancy {
						series += `,tenant="` + tenantID(i) + `"`
					}
					if strings.Contains(metrics, series+"} ") {
						ran = true
						done = done || result == "ok"
					}
				}
				if !ran {
					return false
				}
			}
			if !done {
				return false
			}
		}
	}
	return true
}

// wait waits for the run's duration, printing progress each minute.
func (r *run) wait(ctx context.Context, began time.Time, writers []*writer, queries *QueryStats) {
	end := time.NewTimer(r.cfg.Duration)
	defer end.Stop()
	tick := time.NewTicker(time.Minute)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-end.C:
			return
		case <-tick.C:
		}
		var sent, acked int64
		for _, w := range writers {
			s := w.snapshot()
			sent, acked = sent+s.Sent, acked+s.Acked
		}
		lat := queries.latency()
		r.progress("%s: samples sent %d, acknowledged %d; %s; query p50 1h %.3fs 7d %.3fs, p99 %.3fs %.3fs",
			time.Since(began).Round(time.Second), sent, acked, r.rssText(), lat["1h"].P50, lat["7d"].P50, lat["1h"].P99, lat["7d"].P99)
	}
}

// serversText is "server", or "2 servers".
func serversText(n int) string {
	if n == 1 {
		return "server"
	}
	return fmt.Sprintf("%d servers", n)
}

// rssText is the servers' RSS now, for the progress: "server RSS 300 MiB", or with
// several servers "servers' RSS 900 MiB (300+310+290)".
func (r *run) rssText() string {
	var total int64
	each := make([]string, len(r.srvs))
	for i, s := range r.srvs {
		b, _ := rss(s.p.Pid())
		total += b
		each[i] = fmt.Sprintf("%.0f", float64(b)/(1<<20))
	}
	if len(r.srvs) == 1 {
		return fmt.Sprintf("server RSS %.0f MiB", float64(total)/(1<<20))
	}
	return fmt.Sprintf("servers' RSS %.0f MiB (%s)", float64(total)/(1<<20), strings.Join(each, "+"))
}

func (r *run) progress(format string, args ...any) {
	if r.cfg.Progress != nil {
		fmt.Fprintf(r.cfg.Progress, format+"\n", args...)
	}
}

// sleep waits d, or less if ctx ends: it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
