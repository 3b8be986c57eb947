// Package server is `tablets serve`: Prometheus' remote write and remote read, and the query
// API Grafana uses, over one tsdb database. It keeps no state another process cannot see:
// any number of servers on one database, behind one load balancer, answer alike.
//
//	POST /api/v1/write              remote write 1.0 and 2.0 (package remote)
//	POST /api/v1/read               remote read: SAMPLES, STREAMED_XOR_CHUNKS (package remote)
//	POST /api/v1/otlp/v1/metrics    OTLP/HTTP metrics, stored as remote writes (package otlp)
//	GET|POST /api/v1/query...       the query API, PromQL on Prometheus' engine (package api)
//	                                over a storage.Queryable of the database (package promstore)
//	/prometheus/config/v1/rules...  the ruler configuration API of Cortex and Mimir: rule
//	                                groups stored in the database (Options.Ruler, ruler.go)
//	GET /-/healthy, /-/ready        liveness; readiness (the catalog answers, Run's warm-up is over)
//	GET /metrics                    the server's own metrics
//
// Run keeps the database in shape beside the endpoints: folding the staged points of remote
// writes into the raw tables, compaction of the chunks, rollups and retention, each on a
// timer; several servers may run them at once (their writes are conditional on ETags).
// Rollup and compaction cover the time since their last successful run, whatever the
// interval: a run that fails is retried from the same start, so an outage of the account is
// caught up. Their progress is kept in the database (tsdb's DB.Tasks().Covered), shared by every
// server: a server restarted after hours down starts where the last run of any server ended,
// and only a database that never ran them starts from a catch-up horizon
// (Options.RollupCatchUp, Options.CompactCatchUp). The tasks and their timing are the
// scheduler's (internal/maintain/schedule), which `tablets maintain` runs once, now; the
// server adds its bound on background jobs (Jobs), its metrics and its logs.
package server

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/maintain/schedule"
	"github.com/seed71701133/tablets/server/api"
	"github.com/seed71701133/tablets/server/internal/redact"
	"github.com/seed71701133/tablets/server/internal/results"
	"github.com/seed71701133/tablets/server/limits"
	"github.com/seed71701133/tablets/server/otlp"
	"github.com/seed71701133/tablets/server/promstore"
	"github.com/seed71701133/tablets/server/remote"
	"github.com/seed71701133/tablets/server/rules"
	"github.com/seed71701133/tablets/tsdb"
)

// Options configure a Server. Zero values mean the defaults.
type Options struct {
	// MaxSamplesInFlight bounds the samples of the remote writes being stored (default
	// 500,000): more wait, which slows Prometheus down instead of growing the heap.
	MaxSamplesInFlight int
	// FoldEvery is how often Run folds the staged points of remote writes into the raw
	// tables (default DefaultFoldEvery; negative: never, for a database another process
	// folds). A fold writes a transaction per series it folds, so folding rarely is what
	// makes staging cheap: an hour of a series' points cost one transaction instead of
	// one each. Reads see staged points meanwhile. Each compaction also compacts again the
	// fold interval before its range, and a quarter of an hour and the database's FoldDelay
	// more (a point may wait that long before a fold may fold it): a day is compacted once
	// its points are folded in.
	// A fold that finds another process folding leaves it to that one.
	FoldEvery time.Duration
	// RollupEvery is how often Run rolls up the tier windows sealed since its last
	// successful rollup (default DefaultRollupEvery; negative: never). A rollup writes a
	// transaction a series and tier whose block changed, however few windows sealed since
	// the last: an hour's windows at once cost what 5 minutes' did. Queries read raw
	// points for the windows not rolled up yet.
	RollupEvery time.Duration
	// RollupCatchUp is how far back the first rollup of a database starts, when it holds no
	// progress of a rollup (default DefaultRollupCatchUp; never past the database's
	// RawRetention, whose points may be gone).
	RollupCatchUp time.Duration
	// RollupGrain is the span of sealed windows a rollup waits for (default
	// DefaultRollupGrain; negative: none): rollups cover whole spans of it, aligned to the
	// Unix epoch, so that one every minute runs at every quarter of an hour. Each rewrites
	// every series' block of the finest tier (a day of minutes by default): at every minute,
	// each block 1,440 times a day.
	RollupGrain time.Duration
	// RollupDelay is how much further behind the database's SealDelay the rollups' ranges
	// end: a [Tenants] front spreads its tenants' rollups by it (TenantsOptions.Spread).
	// 0: none.
	RollupDelay time.Duration
	// CompactEvery is how often Run compacts the chunks written since its last successful
	// compaction (default DefaultCompactEvery; negative: never).
	CompactEvery time.Duration
	// CompactPhase delays the compactions past the multiples of CompactEvery, modulo it: a
	// [Tenants] front gives each tenant its share of the interval, by its share of the
	// spread (TenantsOptions.Spread). 0: none.
	CompactPhase time.Duration
	// CompactCatchUp is how far back the first compaction of a database starts, when it
	// holds no progress of a compaction (default DefaultCompactCatchUp).
	CompactCatchUp time.Duration
	// RetainEvery is how often Run drops tables past their retention (default 1h; negative:
	// never).
	RetainEvery time.Duration
	// WarmCache is how far back Run reads the raw points into the database's raw cache
	// when it starts (default DefaultWarmCache; negative: no warm-up), with a scan of
	// the raw tables by ranges of keys, so that the first dashboards after a start are
	// answered from the cache; the warm-up also reads the present period's index into the
	// registrations, which the first writes would, and into the index cache (tsdb.DB.Warm).
	// It stops once the raw cache, shared by a process's tenants, is half full. While it
	// goes on (at most WarmReady), /-/ready answers 503, as Prometheus' does while it
	// replays its write-ahead log: a front or an orchestrator sends the queries to a
	// server that answers them from its caches.
	WarmCache time.Duration
	// Jobs, if set, bounds the background jobs running at once, in this server and the
	// others sharing it (a [Tenants] front shares one among its tenants). nil: no bound.
	Jobs *Jobs
	// Now is the clock of the background loops and of the server's own timing (nil: the
	// database's, tsdb.Options.Now).
	Now func() time.Time
	// Query configures the PromQL engine (nil: its defaults), and the results cache
	// (Query.ResultsCache, from NewResultsCache; nil: none).
	Query *api.Options
	// Store configures the Queryable (nil: its defaults: a Select reads a tier wherever
	// that is estimated to cost fewer bytes than the raw points, see docs/tiers.md).
	Store *promstore.Options
	// OTLP configures the OTLP endpoint (nil: its defaults, Prometheus' default translation).
	OTLP *otlp.Options
	// Logger (default: discarded).
	Logger *slog.Logger
	// SlowQueries, if positive, logs every request of the query API that takes at least as
	// long, at Info with what the account did for it (see serveSlowQueryLogged); tablets
	// serve's --query.log-slower-than. 0: none.
	SlowQueries time.Duration
	// Collectors are more metrics for /metrics, such as the command's count of requests to
	// the account.
	Collectors []prometheus.Collector

	// BackgroundHeld, if set, says whether this process may run background jobs now (a
	// [Tenants] front's hold of the account's background lease: TenantsOptions.
	// BackgroundServers): while it answers false, Run's folds, rollups, compactions and
	// retention passes do nothing and count as busy, another server doing them.
	BackgroundHeld func() bool

	// Tenant is the tenant whose database this is (default limits.DefaultTenant): it
	// picks the tenant's limits in the configuration Limits returns.
	Tenant string
	// Limits, if set, returns the server's configuration; it is called for every request,
	// so a configuration reloaded applies at once. The tenant's ingest limits apply to
	// remote write and OTLP; its query limits, where not zero, replace Query's; its
	// MaxSeriesPerSelect applies to remote read too. nil: no limits but Query's.
	Limits func() *limits.Config
	// LimitHit, if set, is called with a limit's name (its name in the configuration file,
	// like "ingestion_rate") each time a request hits it.
	LimitHit func(limit string)
	// Rules, if set, are the rules the server evaluates over its database while Run runs
	// (package rules, Prometheus' rule manager): their Files, evaluation interval, external
	// labels and URL, Alertmanagers and the rest. The server sets their QueryFunc (its
	// query engine, with the query limits in force, over its Queryable), Queryable,
	// Writer (its remote-write handler: the database, the tenant's ingest limits),
	// Registerer, Logger, for a tenant other than the default one Tenant, and, if they
	// have a Lease without a Table, Lease.Table: the catalog of the database, so that one
	// server of those sharing the database evaluates each group.
	// /api/v1/rules and /api/v1/alerts report them. A rule file that does not load makes
	// New fail with an error naming it (rules.ErrBadRules).
	Rules *rules.Options
	// Ruler, if set, serves the ruler configuration API of Cortex and Mimir and evaluates
	// the rule groups it stores in the database's catalog (see ruler.go, docs/rules.md),
	// with a rule manager of Rules' options (nil Rules: the defaults, no rule file).
	Ruler *RulerOptions
	// Registerer, if set, receives the server's metrics in place of a registry of its own
	// (the servers of a process's tenants share one, each through a
	// prometheus.WrapRegistererWith adding its tenant label). The Go and process
	// collectors are then left to the caller, and the server's /metrics serves nothing.
	Registerer prometheus.Registerer
}

// ResultsCache keeps the answers of range queries by step for the query API
// (api.Options.ResultsCache): a refreshed panel computes only its newest steps. One may
// serve many servers (the tenants of a process share one); it keeps each database's
// answers apart, and checks them against a read mark of the database before using them.
type ResultsCache = results.Cache

// DefaultResultsCacheBytes is the size of tablets serve's results cache by default
// (--query.results-cache-bytes).
const DefaultResultsCacheBytes = 128 << 20

// NewResultsCache returns a results cache of at most maxBytes (about their memory); its
// Stats convert to tsdb.CacheStats.
func NewResultsCache(maxBytes int64) *ResultsCache { return results.New(maxBytes) }

// Defaults of Run (see Options).
const (
	DefaultFoldEvery    = time.Hour
	DefaultCompactEvery = 5 * time.Minute
	// DefaultRollupEvery is an hour, the default SealDelay: at 5 minutes, the rollups of
	// 10,000 series wrote 33 transactions a second (0.054 a sample, five times the
	// ingest's), and on Azurite made rule evaluations lag by a minute and more.
	DefaultRollupEvery    = time.Hour
	DefaultRollupCatchUp  = schedule.DefaultRollupCatchUp
	DefaultRollupGrain    = schedule.DefaultRollupGrain
	DefaultCompactCatchUp = schedule.DefaultCompactCatchUp
)

// Server serves one database.
type Server struct {
	db         *tsdb.DB
	opts       Options
	log        *slog.Logger
	queryable  *promstore.Queryable
	write      *remote.WriteHandler
	read       *remote.ReadHandler
	otlp       *otlp.Handler
	queries    queryAPIs
	registry   prometheus.Registerer
	gatherer   prometheus.Gatherer
	handler    http.Handler
	requests   *prometheus.CounterVec
	duration   *prometheus.HistogramVec
	background *prometheus.CounterVec
	covered    *prometheus.GaugeVec
	rules      *rules.Manager // nil: no rules
	ruler      *ruler         // nil: no ruler API, no stored rule groups
	warming    warming        // Run's warm-up, which readiness waits for
}

// New makes the server of db. Bad options give an error wrapping tablets.ErrInvalidOptions.
func New(db *tsdb.DB, opts *Options) (*Server, error) {
	if db == nil {
		return nil, fmt.Errorf("server: %w: nil database", tablets.ErrInvalidOptions)
	}
	o := Options{}
	if opts != nil {
		o = *opts
	}
	if o.MaxSamplesInFlight < 0 {
		return nil, fmt.Errorf("server: %w: MaxSamplesInFlight %d is negative", tablets.ErrInvalidOptions, o.MaxSamplesInFlight)
	}
	if o.SlowQueries < 0 {
		return nil, fmt.Errorf("server: %w: SlowQueries %v is negative", tablets.ErrInvalidOptions, o.SlowQueries)
	}
	if o.RollupEvery == 0 {
		o.RollupEvery = DefaultRollupEvery
	}
	if o.CompactEvery == 0 {
		o.CompactEvery = DefaultCompactEvery
	}
	if o.RetainEvery == 0 {
		o.RetainEvery = time.Hour
	}
	if o.FoldEvery == 0 {
		o.FoldEvery = DefaultFoldEvery
	}
	if o.WarmCache == 0 {
		o.WarmCache = DefaultWarmCache
	}
	if o.RollupCatchUp < 0 || o.CompactCatchUp < 0 || o.RollupDelay < 0 || o.CompactPhase < 0 {
		return nil, fmt.Errorf("server: %w: RollupCatchUp %v, CompactCatchUp %v, RollupDelay %v and CompactPhase %v must not be negative", tablets.ErrInvalidOptions, o.RollupCatchUp, o.CompactCatchUp, o.RollupDelay, o.CompactPhase)
	}
	if o.RollupCatchUp == 0 {
		o.RollupCatchUp = DefaultRollupCatchUp
	}
	if o.CompactCatchUp == 0 {
		o.CompactCatchUp = DefaultCompactCatchUp
	}
	if o.Now == nil {
		o.Now = db.Options().Now
	}
	if _, err := schedule.Plan(scheduleOptions(o), db.Options()); err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Tenant == "" {
		o.Tenant = limits.DefaultTenant
	}
	s := &Server{db: db, opts: o, log: o.Logger, warming: warming{ended: make(chan struct{})}}
	if o.Registerer != nil {
		s.registry, s.gatherer = o.Registerer, prometheus.Gatherers{}
	} else {
		reg := prometheus.NewRegistry()
		reg.MustRegister(goCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		s.registry, s.gatherer = reg, reg
	}
	var err error
	if s.queryable, err = promstore.New(db, o.Store); err != nil {
		return nil, err
	}
	if s.write, err = remote.NewWriteHandler(db, &remote.WriteOptions{MaxSamplesInFlight: o.MaxSamplesInFlight,
		Tenant: o.Tenant, Limits: o.Limits, LimitHit: o.LimitHit, Now: o.Now}); err != nil {
		return nil, err
	}
	if s.read, err = remote.NewReadHandler(s.queryable, &remote.ReadOptions{Tenant: o.Tenant, Limits: o.Limits, LimitHit: o.LimitHit}); err != nil {
		return nil, err
	}
	if s.otlp, err = otlp.NewHandler(s.write, o.OTLP); err != nil {
		return nil, err
	}
	q := api.Options{}
	if o.Query != nil {
		q = *o.Query
	}
	if q.Logger == nil {
		q.Logger = o.Logger
	}
	q.LimitHit = o.LimitHit
	if o.Ruler != nil && o.Rules == nil {
		o.Rules = &rules.Options{}
	}
	if o.Rules != nil {
		if s.rules, err = s.newRules(*o.Rules); err != nil {
			return nil, err
		}
		q.Rules = s.rules
	}
	s.queries = queryAPIs{base: q, metrics: &engineMetrics{}}
	if _, err := s.queryAPI(); err != nil { // the engine's metrics are described once registered
		return nil, err
	}
	s.registerMetrics()
	if o.Ruler != nil {
		if s.ruler, err = newRuler(s, *o.Ruler); err != nil {
			return nil, err
		}
	}
	s.handler = s.routes()
	return s, nil
}

// otlpPath is the OTLP endpoint's, Prometheus' own.
const otlpPath = "/api/v1/otlp/v1/metrics"

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/api/v1/write", s.instrument("write", s.write))
	mux.Handle("/api/v1/read", s.instrument("read", s.read))
	mux.Handle(otlpPath, s.instrument("otlp", s.otlp))
	mux.HandleFunc("GET /-/healthy", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "tablets is Healthy.")
	})
	mux.HandleFunc("GET /-/ready", s.ready)
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.gatherer, promhttp.HandlerOpts{}))
	return s.instrumentQueries(mux)
}

// ready answers 200 when the database's catalog answers (the account is reachable) and
// Run's warm-up of the caches is over (Options.WarmCache).
func (s *Server) ready(w http.ResponseWriter, r *http.Request) {
	if s.warmingUp() {
		http.Error(w, "tablets is not ready: warming its caches up", http.StatusServiceUnavailable)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	if _, err := s.db.Series(ctx, time.Unix(0, 0), time.Unix(1, 0)); err != nil {
		http.Error(w, "tablets is not ready: "+redact.Secrets(err.Error()), http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintln(w, "tablets is Ready.")
}

// ServeHTTP serves the endpoints.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// DB is the server's database.
func (s *Server) DB() *tsdb.DB { return s.db }

// Queryable is the server's storage.Queryable (for its Stats).
func (s *Server) Queryable() *promstore.Queryable { return s.queryable }

// WriteStats are the remote-write handler's counters.
func (s *Server) WriteStats() remote.WriteStats { return s.write.Stats() }

// OTLPStats are the OTLP handler's counters.
func (s *Server) OTLPStats() otlp.Stats { return s.otlp.Stats() }

// Close releases the query engine.
func (s *Server) Close() error {
	if q := s.queries.current.Load(); q != nil {
		return q.api.Close()
	}
	return nil
}

// Run keeps the database folded, compacted, rolled up and within its retention until ctx is
// done, then returns nil; it first warms the database's caches up (Options.WarmCache),
// beside the loops. Errors are logged and counted; the loops go on.
func (s *Server) Run(ctx context.Context) error {
	tasks, err := schedule.Tasks(s.db, scheduleOptions(s.opts))
	if err != nil {
		return fmt.Errorf("server: %w", err) // New checked the options: a bug
	}
	warmed := make(chan struct{})
	s.warming.begin()
	go func() {
		defer close(warmed)
		defer s.warming.end()
		s.warm(ctx)
	}()
	defer func() { <-warmed }()
	if s.rules == nil {
		s.runLoops(ctx, tasks)
		return nil
	}
	done := make(chan error, 1)
	go func() { done <- s.rules.Run(ctx) }()
	waitRuler := s.startRuler(ctx)
	s.runLoops(ctx, tasks)
	waitRuler()
	if err := <-done; err != nil {
		s.log.Error("rules", "err", err)
	}
	return nil
}

// statusRecorder keeps the status code a handler wrote.
type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// Flush lets streamed remote reads flush through the recorder.
func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *Server) instrument(handler string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := s.opts.Now()
		rec := &statusRecorder{ResponseWriter: w}
		defer func() {
			code := rec.code
			if code == 0 {
				code = http.StatusOK
			}
			s.requests.WithLabelValues(handler, strconv.Itoa(code)).Inc()
			s.duration.WithLabelValues(handler).Observe(s.opts.Now().Sub(start).Seconds())
		}() // runs too when a streamed read aborts with http.ErrAbortHandler, which goes on up

		h.ServeHTTP(rec, r)
	})
}

// instrumentQueries counts the query API's requests by path (the write, read and OTLP
// handlers count themselves), and serves those of the query API with the current one.
func (s *Server) instrumentQueries(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/v1/write" || r.URL.Path == "/api/v1/read" || r.URL.Path == otlpPath {
			mux.ServeHTTP(w, r)
			return
		}
		if s.ruler != nil && isRulerPath(r.URL.Path) {
			s.instrument("ruler", s.ruler).ServeHTTP(w, r)
			return
		}
		if isQueryPath(r.URL.Path) {
			s.serveQuery(w, r)
			return
		}
		_, pattern := mux.Handler(r)
		if pattern == "" {
			pattern = "other"
		}
		s.instrument(pattern, mux).ServeHTTP(w, r)
	})
}

func (s *Server) registerMetrics() {
	s.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tablets_http_requests_total",
		Help: "HTTP requests answered, by handler and status code."}, []string{"handler", "code"})
	s.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "tablets_http_request_duration_seconds",
		Help: "Time to answer HTTP requests, by handler.", Buckets: prometheus.ExponentialBuckets(0.001, 4, 10)}, []string{"handler"})
	s.registerLoopMetrics()
	s.registry.MustRegister(s.requests, s.duration, s.background, s.covered, s.queries.metrics)
	counter := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, f)
	}
	gauge := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f)
	}
	s.registry.MustRegister(
		counter("tablets_remote_write_samples_received_total", "Float samples of remote writes that got room in flight.",
			func() float64 { return float64(s.write.Stats().SamplesReceived) }),
		counter("tablets_remote_write_samples_written_total", "Float samples stored from remote writes.",
			func() float64 { return float64(s.write.Stats().SamplesWritten) }),
		counter("tablets_remote_write_samples_rejected_total", "Float samples refused as invalid.",
			func() float64 { return float64(s.write.Stats().SamplesRejected) }),
		counter("tablets_remote_write_histograms_received_total", "Native histogram samples of remote writes that got room in flight.",
			func() float64 { return float64(s.write.Stats().HistogramsReceived) }),
		counter("tablets_remote_write_histograms_written_total", "Native histogram samples stored from remote writes.",
			func() float64 { return float64(s.write.Stats().HistogramsWritten) }),
		counter("tablets_remote_write_histograms_rejected_total", "Native histogram samples refused as invalid.",
			func() float64 { return float64(s.write.Stats().HistogramsRejected) }),
		gauge("tablets_remote_write_samples_in_flight", "Samples of the remote writes being stored.",
			func() float64 { return float64(s.write.Stats().SamplesInFlight) }),
		gauge("tablets_remote_write_requests_waiting", "Remote writes waiting for room in flight.",
			func() float64 { return float64(s.write.Stats().RequestsWaiting) }),
		counter("tablets_otlp_datapoints_received_total", "OTLP data points received.",
			func() float64 { return float64(s.otlp.Stats().DataPointsReceived) }),
		counter("tablets_otlp_datapoints_refused_total", "OTLP data points of requests refused whole (delta temporality, ...).",
			func() float64 { return float64(s.otlp.Stats().DataPointsRefused) }),
		counter("tablets_otlp_samples_written_total", "Float samples stored from OTLP.",
			func() float64 { return float64(s.otlp.Stats().SamplesWritten) }),
		counter("tablets_otlp_histograms_written_total", "Native histogram samples stored from OTLP.",
			func() float64 { return float64(s.otlp.Stats().HistogramsWritten) }),
		counter("tablets_otlp_samples_not_stored_total", "Samples translated from OTLP and not stored (refused or failed).",
			func() float64 { return float64(s.otlp.Stats().SamplesNotStored) }),
		counter("tablets_remote_read_samples_sent_total", "Samples sent by remote read.",
			func() float64 { return float64(s.read.Stats().SamplesSent) }),
		counter("tablets_select_raw_total", "Selects that read raw points.",
			func() float64 { return float64(s.queryable.Stats().RawSelects) }),
		counter("tablets_select_tier_total", "Selects that read a rollup tier.",
			func() float64 { return float64(s.queryable.Stats().TierSelects) }),
		counter("tablets_select_samples_total", "Samples returned by Selects.",
			func() float64 { return float64(s.queryable.Stats().Samples) }),
		counter("tablets_select_shared_staged_reads_total", "Selects of several raw batches that read the staged points once for all of them.",
			func() float64 { return float64(s.queryable.Stats().SharedStagedReads) }),
		counter("tablets_select_raw_prefetches_total", "Raw batches of Selects whose raw points were read into the raw cache beside their staged points.",
			func() float64 { return float64(s.queryable.Stats().RawPrefetches) }),
		counter("tablets_query_exact_tier_total", "Calls of range queries answered exactly from a tier's windows (docs/tiers.md, \"Exact answers\").",
			func() float64 { return float64(s.queryable.Stats().ExactEvaluations) }),
		counter("tablets_query_exact_raw_cheaper_total", "Calls a tier could answer exactly, read from raw samples for the estimate of their bytes.",
			func() float64 { return float64(s.queryable.Stats().ExactRawCheaper) }),
		counter("tablets_query_exact_raw_series_total", "Series of calls answered from a tier that were computed from raw samples (their windows could not say).",
			func() float64 { return float64(s.queryable.Stats().ExactRawSeries) }),
	)
	for _, c := range s.opts.Collectors {
		s.registry.MustRegister(c)
	}
}
