package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/prometheus/storage"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/gate"
	"github.com/seed71701133/tablets/internal/reqlimit"
	"github.com/seed71701133/tablets/server/api"
	"github.com/seed71701133/tablets/server/internal/redact"
	"github.com/seed71701133/tablets/server/limits"
	"github.com/seed71701133/tablets/server/remote"
	"github.com/seed71701133/tablets/server/rules"
	"github.com/seed71701133/tablets/tsdb"
)

// TenantHeader names the tenant of a request, as in Cortex, Mimir and Loki.
const TenantHeader = "X-Scope-OrgID"

// Defaults of [TenantsOptions].
const (
	// DefaultListTenantsEvery is how often Run lists the account's tenant databases, to run
	// the background work of those another server created.
	DefaultListTenantsEvery = time.Minute
	// DefaultMissingTenantFor is how long a read of a tenant whose database does not exist
	// takes that for granted before asking the account again: another server may create the
	// database at any time, so it is short.
	DefaultMissingTenantFor = 10 * time.Second
	// DefaultBodyWait is how long a remote write, remote read or OTLP request waits for room
	// under the configuration's max_body_bytes_waiting before it is answered 503.
	DefaultBodyWait = 10 * time.Second
)

// TenantsOptions configure a [Tenants] front. Zero values mean the defaults.
type TenantsOptions struct {
	// DB are the options of every tenant's database, the default tenant's included (nil:
	// tsdb's defaults).
	DB *tsdb.Options
	// Server are the options of every tenant's server. The front sets Tenant, Limits,
	// LimitHit and Registerer; Collectors are registered once, in the front's registry.
	Server *Options
	// Limits returns the configuration; it is called for every request, so a configuration
	// reloaded applies at once. nil: only the default tenant, no users, no limits.
	Limits func() *limits.Config
	// ListEvery is how often Run lists the tenant databases (default
	// DefaultListTenantsEvery).
	ListEvery time.Duration
	// MissingFor is how long a tenant's database found missing is taken as missing by reads
	// (default DefaultMissingTenantFor).
	MissingFor time.Duration
	// BodyWait is how long a request waits for room under max_body_bytes_waiting (default
	// DefaultBodyWait).
	BodyWait time.Duration
	// Rules, if set, returns the rules tenant id evaluates (nil: none), read when the
	// tenant's server is made: the Options.Rules of its server (Server.Rules is ignored:
	// rules are per tenant). tablets serve evaluates the rule files of --rule.file in one
	// tenant (--rule.tenant, by default the default tenant). With Server.Ruler set, every
	// tenant has a rule manager for its stored rule groups: nil here is the defaults.
	Rules func(id string) *rules.Options
	// MaxBackgroundJobs bounds the background jobs running at once, all tenants together
	// (default DefaultMaxBackgroundJobs; negative: no bound). See [Jobs].
	MaxBackgroundJobs int
	// BackgroundServers is how many servers of the account run background work at once:
	// Run holds one of this many slots of a lease in the base database's catalog
	// (tsdb.TaskBackground), or none while the others hold them all, and its tenants'
	// folds, rollups, compactions and retention passes run only while it holds one. Each
	// server bounds its own background requests (reqlimit); without the lease, N servers
	// send N times as many to the one account, and their queries wait behind them. A server
	// that stops gives its slot back; one killed holds it until its term ends (a minute),
	// and another takes it then. 0 (the default): every server runs its own. Measured on
	// Azurite (docs/soak.md, run 115), one holder of three servers was slower than none.
	BackgroundServers int
	// BackgroundRetry is how often a server without a slot tries to take one (default
	// DefaultBackgroundRetry).
	BackgroundRetry time.Duration
	// Spread is how far apart the tenants' folds and rollups are spread: each tenant's
	// database leaves a bucket staged longer (tsdb.Options.FoldDelay, unless DB sets one),
	// and its rollups lag further behind its SealDelay (Options.RollupDelay), by a share of
	// Spread: its rank's where the configuration's allow list names it (spreadRanked), else
	// one its database's name fixes (spreadOf); the same on every server. Without it, every
	// tenant's fold of a bucket begins at the same minute, and so do their rollups of the
	// windows sealed, each at the account's pace, and the queries of all of them wait
	// behind all of it. A tenant's staged points then wait up to Spread longer before they
	// are folded (a query reads them staged meanwhile), and its tier windows are rolled up
	// up to Spread later (read raw meanwhile). 0: DefaultSpread; negative: none; at most
	// tsdb.MaxFoldDelay.
	Spread time.Duration
}

// DefaultBackgroundRetry is how often a server without a slot of the background lease
// tries to take one (TenantsOptions.BackgroundRetry).
const DefaultBackgroundRetry = 30 * time.Second

// Tenants serves the tenants of one base database: each tenant is a database of its own,
// named base + "x" + the tenant ID, served by a [Server] of its own. The tenant of a request
// is its X-Scope-OrgID header; without one it is limits.DefaultTenant, whose database is the
// base database itself. See docs/tenants.md.
//
// The user a configuration binds to tenants is the request's basic-auth user, taken as is:
// serve the front with [Serve] and a web config whose basic_auth_users checks the passwords.
type Tenants struct {
	service  *aztables.ServiceClient
	base     string
	opts     TenantsOptions
	srvOpts  Options
	limits   func() *limits.Config
	defaults *limits.Config // without a configuration: the default tenant alone
	now      func() time.Time
	log      *slog.Logger
	def      *Server
	empty    http.Handler // the answers of a tenant with no database yet
	emptyAPI *api.API
	gate     *gate.Gate // the request body bytes being served, all tenants together
	jobs     *Jobs      // the background jobs running, all tenants together
	// holding is whether this process holds a slot of the background lease (with
	// BackgroundServers above 0: else every server runs its background work).
	holding   atomic.Bool
	registry  *prometheus.Registry
	metrics   http.Handler
	hits      *prometheus.CounterVec
	refused   *prometheus.CounterVec
	bodyBytes prometheus.Gauge
	// started is set once Run started the background work of the tenants opened before
	// it; warmed once /-/ready found none of those warming up (warmingUp).
	started, warmed atomic.Bool

	mu      sync.Mutex
	tenants map[string]*tenant   // opened, or being opened
	missing map[string]time.Time // tenant: until when its database is taken as missing
	runCtx  context.Context      // Run's, while it runs
	runs    sync.WaitGroup
}

// tenant is one tenant's server, once opened, and its background work.
type tenant struct {
	id     string
	open   sync.Mutex         // held while opening
	srv    *Server            // set once, under Tenants.mu
	stop   context.CancelFunc // of its background work, while it runs
	closed bool
}

// NewTenants opens the base database (creating its catalog, as tsdb.Open does) and returns
// the front of its tenants. Bad options give an error wrapping tablets.ErrInvalidOptions,
// before any request.
func NewTenants(ctx context.Context, service *aztables.ServiceClient, base string, opts *TenantsOptions) (*Tenants, error) {
	o := TenantsOptions{}
	if opts != nil {
		o = *opts
	}
	if o.ListEvery < 0 || o.MissingFor < 0 || o.BodyWait < 0 || o.BackgroundServers < 0 || o.BackgroundRetry < 0 {
		return nil, fmt.Errorf("server: %w: ListEvery, MissingFor, BodyWait, BackgroundServers and BackgroundRetry must not be negative", tablets.ErrInvalidOptions)
	}
	if o.Spread > tsdb.MaxFoldDelay {
		return nil, fmt.Errorf("server: %w: Spread %v is over %v", tablets.ErrInvalidOptions, o.Spread, tsdb.MaxFoldDelay)
	}
	o.Spread = orDuration(o.Spread, DefaultSpread)
	o.BackgroundRetry = orDuration(o.BackgroundRetry, DefaultBackgroundRetry)
	o.ListEvery = orDuration(o.ListEvery, DefaultListTenantsEvery)
	o.MissingFor = orDuration(o.MissingFor, DefaultMissingTenantFor)
	o.BodyWait = orDuration(o.BodyWait, DefaultBodyWait)
	if err := tsdb.CheckOptions(base, o.DB); err != nil {
		return nil, err
	}
	t := &Tenants{service: service, base: base, opts: o, limits: o.Limits,
		tenants: map[string]*tenant{}, missing: map[string]time.Time{}}
	if o.Server != nil {
		t.srvOpts = *o.Server
	}
	var err error
	if t.defaults, err = limits.Parse(nil, limits.Limits{}); err != nil {
		return nil, err
	}
	if t.limits == nil {
		t.limits = func() *limits.Config { return t.defaults }
	}
	t.log = t.srvOpts.Logger
	if t.log == nil {
		t.log = slog.New(slog.DiscardHandler)
	}
	t.now = t.srvOpts.Now
	if t.now == nil && o.DB != nil {
		t.now = o.DB.Now
	}
	if t.now == nil {
		t.now = time.Now
	}
	t.gate = gate.New(t.config().Requests.MaxBodyBytesWaiting)
	if o.MaxBackgroundJobs == 0 {
		o.MaxBackgroundJobs = DefaultMaxBackgroundJobs
	}
	if o.MaxBackgroundJobs > 0 {
		if t.jobs, err = NewJobs(o.MaxBackgroundJobs); err != nil {
			return nil, err
		}
	}
	t.registerMetrics()
	db, err := tsdb.Open(ctx, service, base, spreadDB(o.DB, t.spreadOfTenant(limits.DefaultTenant)))
	if err != nil {
		return nil, err
	}
	if t.def, err = New(db, t.serverOptions(limits.DefaultTenant)); err != nil {
		return nil, err
	}
	if err := t.makeEmpty(); err != nil {
		_ = t.def.Close()
		return nil, err
	}
	t.tenants[limits.DefaultTenant] = &tenant{id: limits.DefaultTenant, srv: t.def}
	return t, nil
}

// config is the configuration in force (one whose Limits func answers nil: the defaults).
func (t *Tenants) config() *limits.Config {
	if cfg := t.limits(); cfg != nil {
		return cfg
	}
	return t.defaults
}

// serverOptions are the options of tenant id's server.
func (t *Tenants) serverOptions(id string) *Options {
	o := t.srvOpts
	o.Tenant = id
	if o.RollupDelay == 0 {
		o.RollupDelay = t.spreadOfTenant(id)
	}
	if o.CompactPhase == 0 {
		o.CompactPhase = compactPhase(t.spreadOfTenant(id), t.opts.Spread, o.CompactEvery)
	}
	o.Limits = t.config
	o.LimitHit = func(limit string) { t.hits.WithLabelValues(id, limit).Inc() }
	if t.opts.BackgroundServers > 0 {
		o.BackgroundHeld = t.holding.Load
	}
	o.Registerer = prometheus.WrapRegistererWith(prometheus.Labels{"tenant": id}, t.registry)
	o.Collectors = nil // the front's, once
	o.Jobs = t.jobs
	o.Rules = nil
	if t.opts.Rules != nil {
		o.Rules = t.opts.Rules(id)
	}
	if o.Logger != nil {
		o.Logger = o.Logger.With("tenant", id)
	}
	return &o
}

// makeEmpty makes the handler answering the reads of a tenant whose database does not exist:
// as an empty database would, without creating it.
func (t *Tenants) makeEmpty() error {
	empty := storage.QueryableFunc(func(int64, int64) (storage.Querier, error) { return storage.NoopQuerier(), nil })
	read, err := remote.NewReadHandler(empty, nil)
	if err != nil {
		return err
	}
	q := api.Options{}
	if t.srvOpts.Query != nil {
		q = *t.srvOpts.Query
	}
	q.Registerer, q.Logger = nil, t.log
	if t.emptyAPI, err = api.New(empty, &q); err != nil {
		return err
	}
	mux := http.NewServeMux()
	t.emptyAPI.Register(mux)
	mux.Handle("/api/v1/read", read)
	t.empty = mux
	if t.srvOpts.Ruler != nil {
		t.empty = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if isRulerPath(r.URL.Path) {
				emptyRuler.ServeHTTP(w, r)
				return
			}
			mux.ServeHTTP(w, r)
		})
	}
	return nil
}

func (t *Tenants) registerMetrics() {
	t.registry = prometheus.NewRegistry()
	t.registry.MustRegister(goCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	t.hits = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tablets_limit_hits_total",
		Help: "Requests that hit a limit, by tenant and limit (its name in the configuration file)."}, []string{"tenant", "limit"})
	t.refused = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tablets_tenant_refused_total",
		Help: "Requests refused for their tenant: bad_id (400), multi_tenant (400), not_allowed (403), user (403)."}, []string{"reason"})
	t.bodyBytes = prometheus.NewGauge(prometheus.GaugeOpts{Name: "tablets_request_body_bytes_admitted",
		Help: "Body bytes (as sent) of the remote writes, remote reads and OTLP requests being served, all tenants together."})
	t.registry.MustRegister(t.hits, t.refused, t.bodyBytes,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tablets_tenants_open",
			Help: "Tenants whose server this process opened, the default one included."},
			func() float64 { return float64(len(t.Opened())) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tablets_request_body_waiting",
			Help: "Remote writes, remote reads and OTLP requests waiting for room under max_body_bytes_waiting."},
			func() float64 { _, n := t.gate.State(); return float64(n) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tablets_background_jobs_running",
			Help: "Background jobs (a fold, a slice of a rollup or compaction, a retention pass) running, all tenants together."},
			func() float64 { n, _ := t.jobs.State(); return float64(n) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tablets_background_jobs_waiting",
			Help: "Background jobs waiting for their turn under the bound of jobs at once."},
			func() float64 { _, n := t.jobs.State(); return float64(n) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tablets_folds_kept_bytes",
			Help: "Bytes of what this server's last folds wrote, kept for its raw cache to take them in (tsdb.DB.FoldsKept: the last 3 folds at most, and 32 MiB, a tenant), all tenants together."},
			func() float64 { return float64(t.foldsKeptBytes()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tablets_background_lease_held",
			Help: "1 while this server holds a slot of the account's background lease (--background.max-servers) and runs its tenants' background work, else 0; 1 when every server runs its own."},
			func() float64 {
				if t.opts.BackgroundServers == 0 || t.holding.Load() {
					return 1
				}
				return 0
			}))
	for _, c := range t.srvOpts.Collectors {
		t.registry.MustRegister(c)
	}
	t.metrics = promhttp.HandlerFor(t.registry, promhttp.HandlerOpts{})
}

// warmingUp returns a tenant that /-/ready waits for, warming its caches up
// (Server.warmingUp), or false: of those whose background work Run started at its start.
// Once none is, a tenant opened later (a new one, or one another server made) warms up
// behind a front that stays ready, one of many.
func (t *Tenants) warmingUp() (string, bool) {
	if t.warmed.Load() {
		return "", false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	ids := slices.Sorted(maps.Keys(t.tenants))
	for _, id := range ids {
		if e := t.tenants[id]; e.srv != nil && e.srv.warmingUp() {
			return id, true
		}
	}
	if t.started.Load() {
		t.warmed.Store(true)
	}
	return "", false
}

// Default is the server of the default tenant, the base database's.
func (t *Tenants) Default() *Server { return t.def }

// Registry is the front's registry: every tenant's metrics, with a tenant label, the Go and
// process collectors and the front's own.
func (t *Tenants) Registry() *prometheus.Registry { return t.registry }

// ServeHTTP serves a request for its tenant (see docs/tenants.md for the statuses).
func (t *Tenants) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/metrics":
		t.metrics.ServeHTTP(w, r)
		return
	case "/-/ready":
		if id, ok := t.warmingUp(); ok {
			http.Error(w, fmt.Sprintf("tablets is not ready: tenant %q is warming its caches up", id), http.StatusServiceUnavailable)
			return
		}
		t.def.ServeHTTP(w, r) // the default database's catalog answers: the account does
		return
	case "/-/healthy":
		t.def.ServeHTTP(w, r)
		return
	}
	if r.Method == http.MethodPost && writePath(r.URL.Path) {
		// A write may take every request to the account in flight; queries and background
		// work hold a share of them (reqlimit), so that they never make writes queue.
		r = r.WithContext(reqlimit.Ingest(r.Context()))
	}
	cfg := t.config()
	id, err := t.authorize(r, cfg)
	if err != nil {
		var re *refusal
		errors.As(err, &re)
		t.refused.WithLabelValues(re.reason).Inc()
		http.Error(w, err.Error(), re.status)
		return
	}
	if bodyPath(r.URL.Path) {
		release, ok := t.admit(r, cfg, id)
		if !ok {
			w.Header().Set("Retry-After", strconv.Itoa(int((t.opts.BodyWait+time.Second-1)/time.Second)))
			http.Error(w, fmt.Sprintf("the server is busy: the request bodies being served fill max_body_bytes_waiting (%d bytes); retry later",
				cfg.Requests.MaxBodyBytesWaiting), http.StatusServiceUnavailable)
			return
		}
		defer release()
	}
	// A write, and a set of the ruler API, create the tenant's database.
	create := r.Method == http.MethodPost && writePath(r.URL.Path) || t.srvOpts.Ruler != nil && isRulerSet(r)
	h, err := t.handler(r.Context(), id, create)
	if err != nil {
		t.log.Warn("tenant database", "tenant", id, "err", err)
		http.Error(w, "tenant "+id+": "+redact.Secrets(err.Error()), http.StatusServiceUnavailable)
		return
	}
	h.ServeHTTP(w, r)
}

// bodyPath reports whether path's requests carry bodies the gate bounds.
func bodyPath(path string) bool {
	return path == "/api/v1/write" || path == "/api/v1/read" || path == otlpPath
}

// writePath reports whether path writes: the first write of a tenant creates its database.
func writePath(path string) bool { return path == "/api/v1/write" || path == otlpPath }

// admit waits for room for r's body under the gate, at most BodyWait. ok false: no room.
func (t *Tenants) admit(r *http.Request, cfg *limits.Config, id string) (release func(), ok bool) {
	t.gate.Resize(cfg.Requests.MaxBodyBytesWaiting)
	n := r.ContentLength
	if n < 0 || n > remote.DefaultMaxBodyBytes { // unknown, or refused by the handler at that size
		n = remote.DefaultMaxBodyBytes
	}
	ctx, cancel := context.WithTimeout(r.Context(), t.opts.BodyWait)
	defer cancel()
	taken, err := t.gate.Acquire(ctx, n)
	if err != nil {
		if r.Context().Err() == nil { // timed out, not gone
			t.hits.WithLabelValues(id, "max_body_bytes_waiting").Inc()
		}
		return nil, false
	}
	t.bodyBytes.Add(float64(taken))
	return func() { t.bodyBytes.Sub(float64(taken)); t.gate.Release(taken) }, true
}

// Close stops nothing (Run's context does) and releases the query engines.
func (t *Tenants) Close() error {
	t.mu.Lock()
	servers := make([]*Server, 0, len(t.tenants))
	for _, e := range t.tenants {
		if e.srv != nil && !e.closed {
			e.closed = true
			servers = append(servers, e.srv)
		}
	}
	t.mu.Unlock()
	errs := []error{t.emptyAPI.Close()}
	for _, s := range servers {
		errs = append(errs, s.Close())
	}
	return errors.Join(errs...)
}
