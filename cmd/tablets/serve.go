package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"
	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"github.com/seed71701133/tablets/internal/azurite/runner"
	"github.com/seed71701133/tablets/internal/meter"
	"github.com/seed71701133/tablets/internal/reqlimit"
	"github.com/seed71701133/tablets/server"
	"github.com/seed71701133/tablets/server/api"
	"github.com/seed71701133/tablets/server/limits"
	"github.com/seed71701133/tablets/server/promstore"
	"github.com/seed71701133/tablets/server/rules"
	"github.com/seed71701133/tablets/tsdb"
)

// serveFlags are the flags of `tablets serve`.
type serveFlags struct {
	conn                              connFlags
	query                             queryLimitFlags
	listen, db, layout                string
	rawPeriod, rawRetention           time.Duration
	maxInFlight                       int
	accountRequests                   int
	backgroundJobs                    int
	backgroundServers                 int
	backgroundSpread                  time.Duration
	querySlowLog                      time.Duration
	backgroundFoldPace                time.Duration
	backgroundRollupPace              time.Duration
	stagingReadBytes                  int64
	stagingFoldBytes                  int64
	stagingCacheBytes                 int64
	blockCacheBytes                   int64
	rawCacheBytes                     int64
	maxSourceResolution               string
	indexCacheBytes                   int64
	resultsCacheBytes                 int64
	resultsFreshness                  time.Duration
	resultsKeep                       bool
	memoryLimit                       string
	rollupEvery, compactEvery, retain time.Duration
	foldEvery                         time.Duration
	stagingPartitions                 int
	rollupCatchUp, compactCatchUp     time.Duration
	rollupGrain                       time.Duration
	warmCache                         time.Duration
	shutdownTimeout                   time.Duration
	webConfigFile, listenInternal     string
	configFile                        string
	readTimeout, writeTimeout         time.Duration
	rules                             ruleFlags
	ruler                             rulerFlags
}

func (a *app) serveCommand() *cobra.Command {
	var sf serveFlags
	cmd := &cobra.Command{
		Use:   "serve --db NAME [--listen 127.0.0.1:9201]",
		Short: "Serve a database to Prometheus (remote write and read) and Grafana (the query API)",
		Long: `Serve a tsdb database as Prometheus long-term storage:

  POST /api/v1/write    remote write 1.0 and 2.0 (204 once stored; 503 when a retry can succeed)
  POST /api/v1/read     remote read (SAMPLES and STREAMED_XOR_CHUNKS)
  /api/v1/query, /api/v1/query_range, /api/v1/series, /api/v1/labels,
  /api/v1/label/NAME/values, /api/v1/status/buildinfo
                        the query API Grafana uses (PromQL on Prometheus' engine)
  /-/healthy, /-/ready, /metrics

With no connection string or account URL it starts a local Azurite (in memory), as the demo
does: one command gives a working store on a laptop. The server keeps no state another
cannot see: run as many as you like on one database behind a load balancer. Each also folds
the points remote writes stage into the raw tables, compacts the chunks, rolls up the tiers,
and drops tables past --raw-retention, on timers that tick on the clock's multiples of
their intervals, so a restart postpones none (several servers may do so at once; 'tablets
maintain' does it all once). Rollup and compaction cover everything since their last
successful run, whatever the interval, so an outage is caught up; the database records how
far they got, so a server restarted after downtime starts there (a database that never ran
them starts --rollup-catch-up and --compact-catch-up ago).

prometheus.yml:
  remote_write:
    - url: http://127.0.0.1:9201/api/v1/write
  remote_read:
    - url: http://127.0.0.1:9201/api/v1/read
      read_recent: true
Grafana: a Prometheus data source with URL http://127.0.0.1:9201.

TLS and authentication are Prometheus' own: --web.config.file takes Prometheus' web
configuration file (tls_server_config: cert_file, key_file, client_ca_file and
client_auth_type for mutual TLS; basic_auth_users: user: bcrypt hash). The file is read again
for every new connection and every request, so a new password or a renewed certificate takes
effect without a restart (SIGHUP only checks the file and logs what is wrong with it). Give
Prometheus remote_write/remote_read a basic_auth and a tls_config (ca_file), and Grafana's
data source Basic auth and its CA. --listen-internal moves /metrics, /-/ready and /-/healthy
to a second address, in plain HTTP without authentication, for the scraper and the kubelet;
Go's profiles (/debug/pprof/) are served there too, and never on --listen.

Tenants: the header X-Scope-OrgID names a request's tenant; each tenant is a database of its
own, named --db + "x" + the tenant ID (lowercase letters and digits), created on the tenant's
first write. Without the header, a request is for the tenant "default", the database --db.
--config.file says which tenants may exist, which basic-auth users may act for which, and
their limits (see docs/tenants.md); it is read again on SIGHUP (a file that no longer loads
keeps the previous configuration). Without it, only the default tenant exists: a header
naming another is 403.

Rules: --rule.file evaluates Prometheus rule files (globs; read again on SIGHUP: a file
that no longer loads keeps the rules in force) in the tenant --rule.tenant (default: the
default tenant), with Prometheus' rule engine; recorded series and ALERTS are written as
remote writes into that tenant's database; --alertmanager.url sends the alerts (API v2).
/api/v1/rules and /api/v1/alerts report them. The ruler configuration API of Cortex and
Mimir (/prometheus/config/v1/rules, what 'mimirtool rules' and 'tablets rules sync' drive;
--ruler.enable-api, on by default) stores rule groups per tenant in the tenant's database,
evaluated beside the files; a server sees a change another server made within
--ruler.poll-interval. Servers sharing the database evaluate each rule group once: the one
holding the group's lease in the account (--rule.lease), another taking over if it dies.
See docs/rules.md.`,
		Example: `  tablets serve --db metrics
  tablets serve --db metrics --listen :9201 --raw-retention 720h --connection-string "$CS"
  tablets serve --db metrics --listen :9201 --web.config.file web.yml --listen-internal :9202
  tablets serve --db metrics --web.config.file web.yml --config.file tenants.yml
  tablets serve --db metrics --rule.file 'rules/*.yml' --alertmanager.url http://alertmanager:9093`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.serve(cmd, sf)
		},
	}
	addConnFlags(cmd, &sf.conn)
	f := cmd.Flags()
	f.StringVar(&sf.listen, "listen", "127.0.0.1:9201", "address to listen on")
	f.StringVar(&sf.db, "db", "", "database name (required): letters and digits, 3-40 characters, starting with a letter")
	f.StringVar(&sf.layout, "layout", "", "raw layout of a database made before tsdb recorded its raw format (default: the database's own;\na database made now is chunked at a millisecond, which keeps Prometheus' times and NaN bits exactly)")
	f.DurationVar(&sf.rawPeriod, "raw-period", 0, "span of one raw table (0: 168h); as the database was written")
	f.DurationVar(&sf.rawRetention, "raw-retention", 0, "drop raw tables older than this, and refuse older samples (0: keep forever)")
	f.IntVar(&sf.maxInFlight, "max-samples-in-flight", 0, "remote-write samples being stored at once; more wait (0: 500000)")
	f.IntVar(&sf.accountRequests, "account.max-requests-in-flight", defaultAccountRequests, "requests to the storage account in flight at once, all tenants and loops together (writes all of them, queries at most 3/4, background loops at most 1/2); more wait their turn")
	f.DurationVar(&sf.querySlowLog, "query.log-slower-than", 0, "log every request of the query API that takes at least this long, with what the account did for it: the requests and bytes, the time they waited for a slot of --account.max-requests-in-flight and the time at the account (0: none)")
	f.DurationVar(&sf.backgroundSpread, "background.spread", server.DefaultSpread, "how far apart the tenants' folds and rollups begin, and (by the same share of --compact-every) their compactions tick: each tenant's waits a share of it, by its rank in tenants.allow where that names the tenants, else fixed by its database's name (the same on every server either way), so that the account does not serve every tenant's at once; at most 10m, 0: none")
	f.DurationVar(&sf.backgroundFoldPace, "background.fold-pace", server.DefaultFoldPace, "the least time a tenant's fold of a 10-minute bucket takes: its series' writes begin evenly over it, so that the account serves the queries meanwhile (a fold catching up on several buckets is not paced); at most 5m, 0: as fast as the account allows")
	f.DurationVar(&sf.backgroundRollupPace, "background.rollup-pace", server.DefaultRollupPace, "the least time a tenant's rollup of the windows sealed in the last hour takes: its groups of series begin evenly over it, so that the account serves the queries meanwhile (a rollup catching up on older windows is not paced); at most 5m, 0: as fast as the account allows")
	f.IntVar(&sf.backgroundServers, "background.max-servers", 0, "servers of one database that run background work (folds, rollups, compactions, retention) at once, each holding a slot of a lease in the database's catalog; the others serve writes and queries only, and take a slot when one is given back, or a minute after its holder was killed; 0: every server runs its own (each task under its own lease)")
	f.IntVar(&sf.backgroundJobs, "background.max-jobs", server.DefaultMaxBackgroundJobs, "background jobs (a fold, a slice of a rollup or compaction, a retention pass) running at once, all tenants together; more wait their turn; folds go first, with a slot of their own, but take at most half")
	f.StringVar(&sf.memoryLimit, "memory-limit", "auto", "the Go runtime's soft memory limit, as GOMEMLIMIT: a size (512MiB, 2GiB), none, or auto: GOMEMLIMIT if set, else 90% of the cgroup's memory limit if any (as Prometheus' --auto-gomemlimit)")
	f.Int64Var(&sf.stagingReadBytes, "staging.max-read-bytes", defaultStagingReadBytes, "bytes of staging-table reads in memory at once, all tenants together: pages being read and decoded (queries' recent samples, folds; a page is up to 8 MiB of JSON, held about twice while decoded, then 16 bytes a point while yielded) and the staged points queries collect (32 bytes each); more wait their turn, but the oldest read goes on")
	f.Int64Var(&sf.stagingFoldBytes, "staging.max-fold-bytes", defaultStagingReadBytes, "bytes of staged points the folds' rounds collect and hold while they write them into the raw tables (32 bytes each), and of their pages, all tenants together, apart from --staging.max-read-bytes: a round holds its points for as long as its writes take, which queries must not wait for; more wait their turn, but the oldest round goes on")
	f.Int64Var(&sf.stagingCacheBytes, "staging.cache-bytes", tsdb.DefaultStagingCacheBytes*4, "bytes of decoded staging-entity columns kept for later queries, all tenants together: a refreshed query lists the entities of its range with their ETags and fetches only those written or changed since (at least 1 MiB; not given: the default or an eighth of the memory limit, whichever is less)")
	f.StringVar(&sf.maxSourceResolution, "query.max-source-resolution", "raw", "the coarsest rollup tier a query reads where raw samples exist, unless it says another (max_source_resolution): raw (exact answers: tiers only where raw samples are dropped), auto (any tier estimated cheaper: approximate answers, docs/tiers.md) or a duration")
	f.Int64Var(&sf.rawCacheBytes, "raw.cache-bytes", tsdb.DefaultRawCacheBytes*4, "bytes of raw samples kept for later queries, all tenants together: a refreshed query reads the change log of each raw period and reads again only the times a write, fold, delete or retention changed since (at least 1 MiB; not given: the default or an eighth of the memory limit, whichever is less)")
	f.Int64Var(&sf.indexCacheBytes, "index.cache-bytes", tsdb.DefaultIndexCacheBytes*4, "bytes of label sets kept for later queries, all tenants together: a refreshed query (or a Grafana variable) reads the index change log of each period and reads its label sets again only when a series was registered since (at least 1 MiB; not given: the default or a 32nd of the memory limit, whichever is less)")
	f.Int64Var(&sf.blockCacheBytes, "tiers.cache-bytes", tsdb.DefaultBlockCacheBytes*4, "bytes of tier blocks kept for later queries, all tenants together: a refreshed query lists the blocks of its range with their ETags and fetches only those rolled up or rewritten since (at least 1 MiB; not given: the default or a 16th of the memory limit, whichever is less)")
	f.Int64Var(&sf.resultsCacheBytes, "query.results-cache-bytes", server.DefaultResultsCacheBytes, "bytes of range-query answers kept by step, all tenants together: a refreshed panel computes only its steps newer than --query.results-freshness, and those whose samples any server changed since (checked by a read mark, a request or two); 0: no results cache (else at least 1 MiB; not given: the default or a 16th of the memory limit, whichever is less)")
	f.BoolVar(&sf.resultsKeep, "query.results-keep", true, "keep the results cache's answers in the database too, for every server sharing it (each tenant's table of kept answers, docs/format.md): a range query none of this server's answers serves reads the one another server kept (a request) and computes only the steps after it, while a read mark holds it; an answer is kept when computed whole, and again at most once a minute a query, a request each")
	f.DurationVar(&sf.resultsFreshness, "query.results-freshness", api.DefaultResultsFreshness, "the newest steps of a range query, always computed and never kept in the results cache: remote writes are still filling them. A write later than it into the steps kept has those computed again (only the young ones, newer than 5 minutes, while it is within them); raise it when remote writes arrive later than that")
	f.IntVar(&sf.stagingPartitions, "staging-partitions", 0, "partitions a remote write's staged samples spread over: a power of two; double it each time the rate doubles past ~1,300 samples/s (0: 1)")
	f.DurationVar(&sf.foldEvery, "fold-interval", 0, "how often to fold the points remote writes stage into the raw tables, a transaction a series (0: 1h; negative: never)")
	f.DurationVar(&sf.rollupEvery, "rollup-every", 0, "how often to roll up the tier windows sealed since the last rollup (0: 1h; negative: never)")
	f.DurationVar(&sf.rollupGrain, "rollup-grain", 0, "the span of sealed windows a rollup waits for: rollups cover whole spans of it, so that one every minute runs at every quarter of an hour (each writes the windows as tails beside every series' day block of the minute tier, spliced into it every 4 hours; 0: 15m; negative: none, every tick rolls up and rewrites the blocks)")
	f.DurationVar(&sf.warmCache, "warm-cache", 0, "how far back each tenant's raw points are read into the raw cache when the server starts, with one scan of the raw tables, and its staged samples into the staging cache, so that the first dashboards are answered from them (at most half of --raw.cache-bytes; 0: 6h, Grafana's default range; negative: none)")
	f.DurationVar(&sf.rollupCatchUp, "rollup-catch-up", 0, "how far back the first rollup of a database starts (0: 72h; never past --raw-retention)")
	f.DurationVar(&sf.compactEvery, "compact-every", 0, "how often to compact the chunks written since the last compaction (0: 5m; negative: never)")
	f.DurationVar(&sf.compactCatchUp, "compact-catch-up", 0, "how far back the first compaction of a database starts (0: 24h)")
	f.DurationVar(&sf.retain, "retain-every", 0, "how often to drop tables past their retention (0: 1h; negative: never)")
	f.DurationVar(&sf.shutdownTimeout, "shutdown-timeout", 30*time.Second, "on SIGINT/SIGTERM, how long to finish requests in flight")
	f.StringVar(&sf.webConfigFile, "web.config.file", "", "Prometheus web configuration file: TLS, mutual TLS, basic auth (read again on every connection and request)")
	f.StringVar(&sf.configFile, "config.file", "", "tenants, the users bound to them, and limits (YAML, see docs/tenants.md; read again on SIGHUP); none: only the default tenant")
	f.StringVar(&sf.listenInternal, "listen-internal", "", "if set, serve /metrics, /-/ready and /-/healthy here (plain HTTP, no auth) and not on --listen")
	f.DurationVar(&sf.readTimeout, "read-timeout", server.DefaultReadTimeout, "longest time to read a request with its body (a 32 MiB remote write at 1 Mbit/s takes 4.5m; negative: none)")
	f.DurationVar(&sf.writeTimeout, "write-timeout", server.DefaultWriteTimeout, "longest time from a request's headers to the end of its answer (negative: none)")
	addQueryLimitFlags(cmd, &sf.query)
	addRuleFlags(cmd, &sf.rules)
	addRulerFlags(cmd, &sf.ruler)
	return cmd
}

// defaultAccountRequests bounds the requests to the account in flight: as many as the
// shared client keeps idle connections for (runner.DefaultTransport), so that every one is
// reused rather than opened and closed again.
const defaultAccountRequests = 64

// foldWriters is how many series each fold writes at once (tsdb.Options.FoldWriters): the
// folds that may run at once (half the background jobs, rounded up) together take the
// background's share of the account's requests (reqlimit.BackgroundLimit), and no more
// than a fold's default. More would only wait for the account, a goroutine each: while soak
// run 109's last folds ran, the server's goroutines went from about 110 to over 200.
func foldWriters(accountRequests, backgroundJobs int) int {
	folds := (backgroundJobs + 1) / 2
	return max(1, min(tsdb.DefaultFoldWriters, reqlimit.BackgroundLimit(accountRequests)/folds))
}

// defaultStagingReadBytes bounds the staging pages that the tenants' queries and folds read
// at once: four pages of 8 MiB. In the soak, 14 staged reads at once held 230 MB of a 390 MB
// heap (docs/soak.md, 2026-11-28).
const defaultStagingReadBytes = 32 << 20

// sharedCacheBytes is a cache's size by default: def, or a share-th of the memory limit
// where that is less (at least 1 MiB).
func sharedCacheBytes(def, limit, share int64) int64 {
	return max(min(def, limit/share), 1<<20)
}

// parseResolution reads a max source resolution: raw or 0s (tsdb.RawResolution), auto
// (tsdb.AnyResolution) or a positive duration, as the query API's max_source_resolution.
func parseResolution(s string) (time.Duration, error) {
	switch s {
	case "raw":
		return tsdb.RawResolution, nil
	case "auto":
		return tsdb.AnyResolution, nil
	}
	d, err := time.ParseDuration(s)
	switch {
	case err != nil || d < 0:
		return 0, fmt.Errorf("%q is not raw, auto or a duration", s)
	case d == 0:
		return tsdb.RawResolution, nil
	}
	return d, nil
}

// queryLimitFlags are the query API's limits, named as Prometheus names its own.
type queryLimitFlags struct {
	maxSamples, maxConcurrency, maxSeriesPerSelect int
	timeout                                        time.Duration
}

func addQueryLimitFlags(cmd *cobra.Command, q *queryLimitFlags) {
	f := cmd.Flags()
	f.IntVar(&q.maxSamples, "query.max-samples", api.DefaultMaxSamples, "most samples a query may hold in memory at once; over it: 422 execution")
	f.DurationVar(&q.timeout, "query.timeout", api.DefaultTimeout, "longest a query may take, waiting for a slot included; over it: 503 timeout")
	f.IntVar(&q.maxConcurrency, "query.max-concurrency", api.DefaultMaxConcurrency, "queries evaluated at once; more wait for a slot, until their timeout")
	f.IntVar(&q.maxSeriesPerSelect, "query.max-series-per-select", 0, "most series one selector may select; over it: 422 execution (0: no limit)")
}

// options are the flags as api.Options; non-positive values are usage errors.
func (q queryLimitFlags) options(cmd *cobra.Command) (*api.Options, error) {
	if q.maxSamples <= 0 || q.maxConcurrency <= 0 || q.timeout <= 0 || q.maxSeriesPerSelect < 0 {
		return nil, usageErrorf(cmd, "--query.max-samples, --query.timeout and --query.max-concurrency must be positive, --query.max-series-per-select not negative")
	}
	return &api.Options{MaxSamples: q.maxSamples, Timeout: q.timeout, MaxConcurrency: q.maxConcurrency, MaxSeriesPerSelect: q.maxSeriesPerSelect}, nil
}

func (a *app) serve(cmd *cobra.Command, sf serveFlags) (err error) {
	ctx := cmd.Context()
	if sf.db == "" {
		return usageErrorf(cmd, "--db is required")
	}
	queryOpts, err := sf.query.options(cmd)
	if err != nil {
		return err
	}
	rulerOpts, err := sf.ruler.options(cmd)
	if err != nil {
		return err
	}
	cfg, err := loadServeConfig(sf.configFile, sf.query, sf.ruler, sf.webConfigFile)
	if err != nil {
		return usageErrorf(cmd, "--config.file: %v", err)
	}
	ruleOpts, err := sf.rules.options(cmd, sf.listen, rulerOpts != nil)
	if err != nil {
		return err
	}
	ruleFiles := len(sf.rules.files) > 0
	ruleTenant := sf.rules.tenant
	if ruleTenant == "" {
		ruleTenant = limits.DefaultTenant
	}
	if ruleFiles && ruleTenant != limits.DefaultTenant && !cfg.Load().Allowed(ruleTenant) {
		return usageErrorf(cmd, "--rule.tenant %q: not a tenant --config.file allows", ruleTenant)
	}
	layout, err := dbLayout(sf.layout, layoutOptions{})
	if err != nil {
		return usageErrorf(cmd, "%v", err)
	}
	dbOpts := &tsdb.Options{
		Layout:       layout,
		RawPeriod:    sf.rawPeriod,
		RawRetention: sf.rawRetention,

		StagingPartitions: sf.stagingPartitions,
	}
	cgroup, _ := os.ReadFile("/proc/self/cgroup")
	memLimit, err := resolveMemoryLimit(sf.memoryLimit, a.env, os.DirFS("/sys/fs/cgroup"), string(cgroup))
	if err != nil {
		return usageErrorf(cmd, "%v", err)
	}
	if sf.stagingReadBytes < 1 {
		return usageErrorf(cmd, "--staging.max-read-bytes must be positive")
	}
	if sf.stagingFoldBytes < 1 {
		return usageErrorf(cmd, "--staging.max-fold-bytes must be positive")
	}
	// The caches share the memory limit: a size not given is its default, or its share of
	// the limit where that is less (together about a third of it).
	heapLimit := memLimit.limit
	if memLimit.keep {
		heapLimit = debug.SetMemoryLimit(-1) // GOMEMLIMIT, as the runtime read it
	}
	for _, c := range []struct {
		flag  string
		bytes *int64
		share int64
	}{{"staging.cache-bytes", &sf.stagingCacheBytes, 8}, {"raw.cache-bytes", &sf.rawCacheBytes, 8},
		{"tiers.cache-bytes", &sf.blockCacheBytes, 16}, {"index.cache-bytes", &sf.indexCacheBytes, 32},
		{"query.results-cache-bytes", &sf.resultsCacheBytes, 16}} {
		if !cmd.Flags().Changed(c.flag) {
			*c.bytes = sharedCacheBytes(*c.bytes, heapLimit, c.share)
		}
	}
	if sf.stagingCacheBytes < 1<<20 {
		return usageErrorf(cmd, "--staging.cache-bytes must be at least 1 MiB")
	}
	dbOpts.StagingCache = tsdb.NewStagingCache(sf.stagingCacheBytes)
	if sf.blockCacheBytes < 1<<20 {
		return usageErrorf(cmd, "--tiers.cache-bytes must be at least 1 MiB")
	}
	dbOpts.BlockCache = tsdb.NewBlockCache(sf.blockCacheBytes)
	if sf.rawCacheBytes < 1<<20 {
		return usageErrorf(cmd, "--raw.cache-bytes must be at least 1 MiB")
	}
	dbOpts.RawCache = tsdb.NewRawCache(sf.rawCacheBytes)
	if sf.indexCacheBytes < 1<<20 {
		return usageErrorf(cmd, "--index.cache-bytes must be at least 1 MiB")
	}
	dbOpts.IndexCache = tsdb.NewIndexCache(sf.indexCacheBytes)
	if sf.resultsFreshness <= 0 {
		return usageErrorf(cmd, "--query.results-freshness must be positive")
	}
	var collectors []prometheus.Collector
	switch {
	case sf.resultsCacheBytes == 0:
	case sf.resultsCacheBytes < 1<<20:
		return usageErrorf(cmd, "--query.results-cache-bytes must be 0 (none) or at least 1 MiB")
	default:
		rc := server.NewResultsCache(sf.resultsCacheBytes)
		queryOpts.ResultsCache = rc
		queryOpts.ResultsFreshness = sf.resultsFreshness
		queryOpts.KeepAnswers = sf.resultsKeep
		collectors = append(collectors, cacheCollector("results_cache", "Range queries that took steps from the cache (their read mark held).",
			"Range queries that computed all their steps before the freshness horizon: none cached, or changed since.", "--query.results-cache-bytes",
			func() tsdb.CacheStats { return tsdb.CacheStats(rc.Stats()) }))
		for _, c := range []struct {
			outcome string
			count   func() uint64
		}{
			{"hit", func() uint64 { return rc.SharedStats().Hits }},
			{"miss", func() uint64 { return rc.SharedStats().Misses }},
			{"kept", func() uint64 { return rc.SharedStats().Kept }},
			{"failed", func() uint64 { return rc.SharedStats().Failed }},
		} {
			collectors = append(collectors, prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "tablets_results_kept_answers_total",
				Help:        "Answers kept in the database for every server (--query.results-keep): lookups of range queries none of this server's answers served that found one that served (hit), or none that held (miss); answers kept (kept); keeps that failed or were left out, as many being under way (failed).",
				ConstLabels: prometheus.Labels{"outcome": c.outcome}}, func() float64 { return float64(c.count()) }))
		}
	}
	if dbOpts.StagingReadBudget, err = tsdb.NewReadBudget(sf.stagingReadBytes); err != nil {
		return usageErrorf(cmd, "--staging.max-read-bytes: %v", err)
	}
	if dbOpts.FoldReadBudget, err = tsdb.NewReadBudget(sf.stagingFoldBytes); err != nil {
		return usageErrorf(cmd, "--staging.max-fold-bytes: %v", err)
	}
	if err := tsdb.CheckOptions(sf.db, dbOpts); err != nil {
		return usageErrorf(cmd, "%v", err)
	}
	if sf.maxInFlight < 0 {
		return usageErrorf(cmd, "--max-samples-in-flight must not be negative")
	}
	if sf.accountRequests < 1 {
		return usageErrorf(cmd, "--account.max-requests-in-flight must be positive")
	}
	if sf.querySlowLog < 0 {
		return usageErrorf(cmd, "--query.log-slower-than %v is negative", sf.querySlowLog)
	}
	if sf.backgroundSpread < 0 || sf.backgroundSpread > tsdb.MaxFoldDelay {
		return usageErrorf(cmd, "--background.spread %v is not from 0 to %v", sf.backgroundSpread, tsdb.MaxFoldDelay)
	}
	if sf.backgroundFoldPace < 0 || sf.backgroundFoldPace > tsdb.MaxFoldPace {
		return usageErrorf(cmd, "--background.fold-pace %v is not from 0 to %v", sf.backgroundFoldPace, tsdb.MaxFoldPace)
	}
	dbOpts.FoldPace = sf.backgroundFoldPace
	if sf.backgroundRollupPace < 0 || sf.backgroundRollupPace > tsdb.MaxRollupPace {
		return usageErrorf(cmd, "--background.rollup-pace %v is not from 0 to %v", sf.backgroundRollupPace, tsdb.MaxRollupPace)
	}
	dbOpts.RollupPace = sf.backgroundRollupPace
	if sf.backgroundServers < 0 {
		return usageErrorf(cmd, "--background.max-servers must not be negative")
	}
	if sf.backgroundJobs < 1 {
		return usageErrorf(cmd, "--background.max-jobs must be positive")
	}
	dbOpts.FoldWriters = foldWriters(sf.accountRequests, sf.backgroundJobs)
	if sf.rollupCatchUp < 0 || sf.compactCatchUp < 0 {
		return usageErrorf(cmd, "--rollup-catch-up and --compact-catch-up must not be negative")
	}
	if err := server.CheckWebConfig(sf.webConfigFile); err != nil {
		return usageErrorf(cmd, "--web.config.file: %v", err)
	}
	listener, err := net.Listen("tcp", sf.listen)
	if err != nil {
		return usageErrorf(cmd, "--listen %s: %v", sf.listen, err)
	}
	defer listener.Close()
	conns := &serveConns{}
	listener = conns.public.Listener(listener)
	var internal net.Listener
	if sf.listenInternal != "" {
		if internal, err = net.Listen("tcp", sf.listenInternal); err != nil {
			return usageErrorf(cmd, "--listen-internal %s: %v", sf.listenInternal, err)
		}
		defer internal.Close()
		internal = conns.internal.Listener(internal)
	}
	conn, haveAccount, err := sf.conn.resolve(cmd, a.env)
	if err != nil {
		return err
	}
	if !haveAccount {
		fmt.Fprintln(a.stderr, "no connection string or account URL: starting a local Azurite (in memory; the first run installs it from npm)...")
		srv, err := runner.Start(ctx)
		if err != nil {
			return err
		}
		defer func() {
			if serr := srv.Stop(); serr != nil && err == nil {
				err = serr
			}
		}()
		conn = connFlags{connectionString: srv.ConnectionString}
	}
	// Its own client, not the process's shared one, so that the connections it counts are
	// the account's.
	tables := &tableMeter{next: runner.NewTransport(conns.account.Dial)}
	limited := reqlimit.New(tables, sf.accountRequests)
	// The requests and bytes only: a counter of entities would read and parse every page a
	// second time (a third of the server's allocations in the soak).
	wire := &meteredTransport{next: limited}
	sc, err := conn.serviceClient(wire)
	if err != nil {
		return err
	}
	maxResolution, err := parseResolution(sf.maxSourceResolution)
	if err != nil {
		return usageErrorf(cmd, "--query.max-source-resolution: %v", err)
	}
	logger := slog.New(slog.NewTextHandler(a.stderr, nil))
	if !memLimit.keep {
		debug.SetMemoryLimit(memLimit.limit)
	}
	logger.Info("memory limit", "bytes", debug.SetMemoryLimit(-1), "from", memLimit.from)
	front, err := server.NewTenants(ctx, sc, sf.db, &server.TenantsOptions{
		DB: dbOpts,
		Server: &server.Options{
			MaxSamplesInFlight: sf.maxInFlight,
			FoldEvery:          sf.foldEvery,
			RollupEvery:        sf.rollupEvery,
			RollupCatchUp:      sf.rollupCatchUp,
			RollupGrain:        sf.rollupGrain,
			WarmCache:          sf.warmCache,
			CompactEvery:       sf.compactEvery,
			CompactCatchUp:     sf.compactCatchUp,
			Query:              queryOpts,
			Store:              &promstore.Options{MaxResolution: maxResolution},
			RetainEvery:        sf.retain,
			Ruler:              rulerOpts,
			Logger:             logger,
			SlowQueries:        sf.querySlowLog,
			Collectors: append(append([]prometheus.Collector{accountCollector(&wire.wire, limited), tables, connCollector(conns),
				stagingReadCollector(dbOpts.StagingReadBudget, "read_bytes_in_use", "reads_waiting", "Bytes of staging pages being read, decoded and yielded, and of staged points being collected by queries (--staging.max-read-bytes, and what the oldest read takes past it).", "Staging page reads and collections waiting for room under --staging.max-read-bytes."),
				stagingReadCollector(dbOpts.FoldReadBudget, "fold_bytes_in_use", "folds_waiting", "Bytes of staged points the folds' rounds collected and hold until written, and of their pages (--staging.max-fold-bytes, and what the oldest round takes past it).", "Fold rounds' page reads and collections waiting for room under --staging.max-fold-bytes.")},
				cacheCollectors(dbOpts)...), collectors...),
		},
		Limits:            cfg.Load,
		MaxBackgroundJobs: sf.backgroundJobs,
		BackgroundServers: sf.backgroundServers,
		Spread:            spreadOption(sf.backgroundSpread),
		Rules: func(id string) *rules.Options {
			if ruleOpts == nil || (id != ruleTenant && rulerOpts == nil) {
				return nil
			}
			o := *ruleOpts
			if id != ruleTenant {
				o.Files = nil // the rule files are the rule tenant's; the others have their stored groups
			}
			return &o
		},
	})
	if err != nil {
		return err
	}
	defer front.Close()
	if ruleFiles {
		// The rules' tenant is opened now, so that its rules run before any request.
		if _, err := front.Open(ctx, ruleTenant); err != nil {
			return fmt.Errorf("--rule.tenant %s: %w", ruleTenant, err)
		}
		logger.Info("rules", "files", sf.rules.files, "tenant", ruleTenant, "alertmanagers", len(sf.rules.alertmanagers))
	}
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	done := make(chan error, 1)
	go func() { done <- front.Run(runCtx) }()
	defer func() { stopRun(); <-done }()
	stopHUP := a.onSIGHUP(logger, sf.webConfigFile, func() {
		cfg.reload(logger)
		if ruleFiles {
			if err := front.ReloadRules(); err != nil {
				logger.Error("SIGHUP: the rule files do not load; the previous rules stay", "err", err)
			} else {
				logger.Info("SIGHUP: the rule files are loaded", "files", sf.rules.files)
			}
		}
	})
	defer stopHUP()
	if sf.webConfigFile == "" {
		fmt.Fprintf(a.stderr, "serving database %s (%s) on http://%s: remote write /api/v1/write, remote read /api/v1/read, Grafana's Prometheus data source URL http://%s\n",
			sf.db, layoutDescription(sf.layout), listener.Addr(), listener.Addr())
	} else {
		fmt.Fprintf(a.stderr, "serving database %s (%s) on %s, with the TLS and basic auth of %s: remote write /api/v1/write, remote read /api/v1/read\n",
			sf.db, layoutDescription(sf.layout), listener.Addr(), sf.webConfigFile)
	}
	if internal != nil {
		fmt.Fprintf(a.stderr, "serving /metrics, /-/ready and /-/healthy on http://%s\n", internal.Addr())
	}
	if sf.configFile != "" {
		fmt.Fprintf(a.stderr, "tenants and limits of %s: X-Scope-OrgID names a tenant, database %s + \"x\" + its ID\n", sf.configFile, sf.db)
	}
	err = server.Serve(ctx, listener, front, &server.ServeOptions{
		WebConfigFile:   sf.webConfigFile,
		Internal:        internal,
		ReadTimeout:     sf.readTimeout,
		WriteTimeout:    sf.writeTimeout,
		ShutdownTimeout: sf.shutdownTimeout,
		Logger:          logger,
	})
	if err == nil {
		fmt.Fprintln(a.stderr, "shut down: the requests in flight finished")
	}
	return err
}

// serveConfig is the configuration of --config.file, replaced whole on SIGHUP.
type serveConfig struct {
	path, webConfigFile string
	defaults            limits.Limits
	current             atomic.Pointer[limits.Config]
}

// loadServeConfig reads path, the limits it leaves out taken from the --query.* flags; no
// path: the default tenant alone, with the flags' limits.
func loadServeConfig(path string, q queryLimitFlags, r rulerFlags, webConfigFile string) (*serveConfig, error) {
	c := &serveConfig{path: path, webConfigFile: webConfigFile, defaults: limits.Limits{MaxSamplesPerQuery: q.maxSamples,
		QueryTimeout: model.Duration(q.timeout), MaxConcurrentQueries: q.maxConcurrency, MaxSeriesPerSelect: q.maxSeriesPerSelect,
		RulerMaxRuleGroupsPerTenant: r.maxGroups, RulerMaxRulesPerRuleGroup: r.maxRules}}
	var cfg *limits.Config
	var err error
	if path == "" {
		cfg, err = limits.Parse(nil, c.defaults)
	} else {
		cfg, err = c.load()
	}
	if err != nil {
		return nil, err
	}
	c.current.Store(cfg)
	return c, nil
}

// load reads the file, and refuses one binding users to tenants unless the web config
// checks their passwords: the server takes a request's basic-auth user as its identity.
func (c *serveConfig) load() (*limits.Config, error) {
	cfg, err := limits.Load(c.path, c.defaults)
	if err != nil || len(cfg.Tenants.Users) == 0 {
		return cfg, err
	}
	if c.webConfigFile == "" {
		return nil, fmt.Errorf("%s: tenants.users binds users to tenants, but no --web.config.file checks their passwords", c.path)
	}
	b, err := os.ReadFile(c.webConfigFile)
	if err != nil {
		return nil, err
	}
	var web struct {
		Users map[string]any `yaml:"basic_auth_users"`
	}
	if err := yaml.Unmarshal(b, &web); err != nil {
		return nil, fmt.Errorf("%s: %w", c.webConfigFile, err)
	}
	if len(web.Users) == 0 {
		return nil, fmt.Errorf("%s: tenants.users binds users to tenants, but %s sets no basic_auth_users to check their passwords", c.path, c.webConfigFile)
	}
	return cfg, nil
}

// Load is the configuration now.
func (c *serveConfig) Load() *limits.Config { return c.current.Load() }

// reload reads the file again; one that no longer loads keeps the previous configuration.
func (c *serveConfig) reload(logger *slog.Logger) {
	if c.path == "" {
		return
	}
	cfg, err := c.load()
	if err != nil {
		logger.Error("SIGHUP: the config file does not load; the previous configuration stays", "err", err)
		return
	}
	c.current.Store(cfg)
	logger.Info("SIGHUP: the config file is loaded", "file", c.path)
}

// onSIGHUP keeps SIGHUP from ending the process, as it would by default, and calls reload
// for each. The web config is read again as the server serves, so a SIGHUP only checks it
// and logs the result.
func (a *app) onSIGHUP(logger *slog.Logger, webConfigFile string, reload func()) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	quit := make(chan struct{})
	go func() {
		for {
			select {
			case <-hup:
				reload()
				if err := server.CheckWebConfig(webConfigFile); err != nil {
					logger.Error("SIGHUP: the web config file does not load; requests fail until it is fixed", "err", err)
				} else {
					logger.Info("SIGHUP: the web config file loads; it is read again on every connection and request")
				}
			case <-quit:
				return
			}
		}
	}()
	return func() { signal.Stop(hup); close(quit) }
}

// accountCollector exports what the server asked of the storage account.
// meteredTransport counts the requests to the account and their body bytes.
type meteredTransport struct {
	next policy.Transporter
	wire meter.Meter
}

func (t *meteredTransport) Do(req *http.Request) (*http.Response, error) {
	return t.wire.Send(t.next, req)
}

func accountCollector(wire *meter.Meter, limited *reqlimit.Transport) prometheus.Collector {
	return &accountMetrics{wire: wire, limited: limited,
		inFlight: prometheus.NewDesc("tablets_account_requests_in_flight", "Requests to the storage account in flight (at most --account.max-requests-in-flight).", nil, nil),
		waiting:  prometheus.NewDesc("tablets_account_requests_waiting", "Requests to the storage account waiting for one in flight to end.", nil, nil),
		requests: prometheus.NewDesc("tablets_account_requests_total", "HTTP requests to the storage account (every attempt).", nil, nil),
		sent:     prometheus.NewDesc("tablets_account_sent_bytes_total", "Request body bytes sent to the storage account.", nil, nil),
		received: prometheus.NewDesc("tablets_account_received_bytes_total", "Response body bytes received from the storage account.", nil, nil),
		classRequests: prometheus.NewDesc("tablets_account_class_requests_total",
			"Requests to the storage account by class: ingest (remote write, OTLP, rule results), background (folds, rollups, compactions, retention), query (every other).", []string{"class"}, nil),
		classSeconds: prometheus.NewDesc("tablets_account_class_slot_seconds_total",
			"Seconds requests of each class held one of --account.max-requests-in-flight, from sending until their response was read: the account's time each class took.", []string{"class"}, nil),
		pointReads: prometheus.NewDesc("tablets_account_point_read_seconds",
			"Seconds point reads (one entity by its keys, of every class) took, from sending until their response was read: how long a request waits at the account behind what is queued there, whichever server sent it.", nil, nil),
		pointReadPhases: prometheus.NewDesc("tablets_account_point_read_phase_seconds",
			"Seconds of the point reads' phases, as the HTTP client saw them: connection (until it had one), answer (from the request written to the answer's first byte: the account and the network), body (until the answer was read to its end).", []string{"phase"}, nil),
	}
}

// stagingReadCollector serves a staging read budget's state: the bytes in use and the
// takers waiting, as tablets_staging_<inUse> and tablets_staging_<waiting>.
func stagingReadCollector(b *tsdb.ReadBudget, inUse, waiting, inUseHelp, waitingHelp string) prometheus.Collector {
	return &stagingReadMetrics{budget: b,
		inUse:   prometheus.NewDesc("tablets_staging_"+inUse, inUseHelp, nil, nil),
		waiting: prometheus.NewDesc("tablets_staging_"+waiting, waitingHelp, nil, nil),
	}
}

type stagingReadMetrics struct {
	budget         *tsdb.ReadBudget
	inUse, waiting *prometheus.Desc
}

func (m *stagingReadMetrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.inUse
	ch <- m.waiting
}

func (m *stagingReadMetrics) Collect(ch chan<- prometheus.Metric) {
	inUse, waiting := m.budget.InUse()
	ch <- prometheus.MustNewConstMetric(m.inUse, prometheus.GaugeValue, float64(inUse))
	ch <- prometheus.MustNewConstMetric(m.waiting, prometheus.GaugeValue, float64(waiting))
}

// cacheCollector exports a cache's counts as tablets_<name>_hits_total, _misses_total,
// _bytes and _entries; what describes the cache's hits and misses, and its flag.
func cacheCollector(name, hit, miss, flag string, stats func() tsdb.CacheStats) prometheus.Collector {
	return &cacheMetrics{stats: stats,
		hits:    prometheus.NewDesc("tablets_"+name+"_hits_total", hit, nil, nil),
		misses:  prometheus.NewDesc("tablets_"+name+"_misses_total", miss, nil, nil),
		bytes:   prometheus.NewDesc("tablets_"+name+"_bytes", "About the memory of the cache ("+flag+").", nil, nil),
		entries: prometheus.NewDesc("tablets_"+name+"_entries", "Entries in the cache.", nil, nil),
	}
}

// cacheCollectors are the metrics of the read caches of dbOpts: each one's hits, misses,
// bytes and entries.
func cacheCollectors(o *tsdb.Options) []prometheus.Collector {
	return []prometheus.Collector{
		cacheCollector("staging_cache", "Columns of staging entities queries found in the cache at their entity's ETag.",
			"Columns of staging entities queries fetched: new, changed, or not cached.", "--staging.cache-bytes", o.StagingCache.Stats),
		cacheCollector("staging_cache_memos", "Reads of many series' staged points that took them from a memo of the same series' last read, and read only the entities staged since.",
			"Reads of many series' staged points that kept a memo anew: the first of their series, or after a Fold, a Delete or a Retain changed what it held.",
			"an eighth of --staging.cache-bytes and what the cached entities leave of it; in tablets_staging_cache_bytes too", o.StagingCache.Memos),
		cacheCollector("tier_block_cache", "Tier blocks queries found in the cache at the ETag a listing gave.",
			"Tier blocks queries fetched: new, rewritten, or not cached.", "--tiers.cache-bytes", o.BlockCache.Stats),
		cacheCollector("raw_cache", "Series whose raw samples of a table reads took from the cache whole (no change recorded since in their range).",
			"Series whose raw samples reads read from a table, whole or from a change on: new, changed, or not cached.", "--raw.cache-bytes", o.RawCache.Stats),
		cacheCollector("index_cache", "Queries of a period's index answered from the cache (no series registered there since).",
			"Queries of a period's index read: new series registered, or not cached.", "--index.cache-bytes", o.IndexCache.Stats),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "tablets_raw_cache_folds_taken_in_total",
			Help: "Series whose cached raw samples took in a Fold's samples from the staging entities this server had cached (the Fold's receipt), without reading them."},
			func() float64 { return float64(o.RawCache.FoldedIn()) }),
		foldMisses(o.RawCache),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "tablets_raw_cache_reads_shared_total",
			Help: "Series whose raw samples a read took from another read of them under way (the panels of a dashboard opened at once), instead of reading them."},
			func() float64 { return float64(o.RawCache.Shared()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "tablets_raw_cache_spilled_total",
			Help: "Series a read of others by the range of their keys found beside them and cached (a dashboard's next panels' series), instead of dropping them."},
			func() float64 { return float64(o.RawCache.Spilled()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tablets_staging_cache_frozen_bytes",
			Help: "About the memory of the staged points the staging cache holds frozen, series by series (in tablets_staging_cache_bytes too): those of the entities cached 2 minutes ago or more whose bucket's Fold is not due yet, which reads and the Folds' take-in take from there."},
			func() float64 { b, _ := o.StagingCache.Frozen(); return float64(b) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "tablets_staging_cache_fetches_shared_total",
			Help: "Fetches of staging entities under way that another query waited for, instead of fetching the same itself (a partition's, or a cold table's whole)."},
			func() float64 { return float64(o.StagingCache.Shared()) }),
	}
}

// foldMisses is tablets_raw_cache_folds_missed_total, by reason (tsdb.RawFoldMiss): the
// series whose cached raw samples another server's Fold changed, and which read the raw
// table again instead of taking the Fold in from the staging entities this server had.
func foldMisses(c *tsdb.RawCache) prometheus.Collector {
	return &foldMissMetrics{c: c, desc: prometheus.NewDesc("tablets_raw_cache_folds_missed_total",
		"Series whose cached raw samples a Fold changed and which read the raw table again, by why the Fold could not be taken in: log (a change other than a Fold's since, or more than the log keeps), receipt (the Fold's staging entities not all cached here at the ETags it read), column (the series' column of one not cached), overlap (a folded sample at a millisecond the cache held).",
		[]string{"reason"}, nil)}
}

type foldMissMetrics struct {
	c    *tsdb.RawCache
	desc *prometheus.Desc
}

func (m *foldMissMetrics) Describe(ch chan<- *prometheus.Desc) { ch <- m.desc }

func (m *foldMissMetrics) Collect(ch chan<- prometheus.Metric) {
	for _, r := range tsdb.RawFoldMisses {
		ch <- prometheus.MustNewConstMetric(m.desc, prometheus.CounterValue, float64(m.c.FoldMisses(r)), r.String())
	}
}

type cacheMetrics struct {
	stats                        func() tsdb.CacheStats
	hits, misses, bytes, entries *prometheus.Desc
}

func (m *cacheMetrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.hits
	ch <- m.misses
	ch <- m.bytes
	ch <- m.entries
}

func (m *cacheMetrics) Collect(ch chan<- prometheus.Metric) {
	st := m.stats()
	ch <- prometheus.MustNewConstMetric(m.hits, prometheus.CounterValue, float64(st.Hits))
	ch <- prometheus.MustNewConstMetric(m.misses, prometheus.CounterValue, float64(st.Misses))
	ch <- prometheus.MustNewConstMetric(m.bytes, prometheus.GaugeValue, float64(st.Bytes))
	ch <- prometheus.MustNewConstMetric(m.entries, prometheus.GaugeValue, float64(st.Entries))
}

type accountMetrics struct {
	wire                                        *meter.Meter
	limited                                     *reqlimit.Transport
	requests, sent, received, inFlight, waiting *prometheus.Desc
	classRequests, classSeconds                 *prometheus.Desc
	pointReads, pointReadPhases                 *prometheus.Desc
}

func (m *accountMetrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.requests
	ch <- m.sent
	ch <- m.received
	ch <- m.inFlight
	ch <- m.waiting
	ch <- m.classRequests
	ch <- m.classSeconds
	ch <- m.pointReads
	ch <- m.pointReadPhases
}

func (m *accountMetrics) Collect(ch chan<- prometheus.Metric) {
	s := m.wire.Counts()
	ch <- prometheus.MustNewConstMetric(m.requests, prometheus.CounterValue, float64(s.Requests))
	ch <- prometheus.MustNewConstMetric(m.sent, prometheus.CounterValue, float64(s.BytesSent))
	ch <- prometheus.MustNewConstMetric(m.received, prometheus.CounterValue, float64(s.BytesReceived))
	inFlight, waiting := m.limited.State()
	ch <- prometheus.MustNewConstMetric(m.inFlight, prometheus.GaugeValue, float64(inFlight))
	ch <- prometheus.MustNewConstMetric(m.waiting, prometheus.GaugeValue, float64(waiting))
	for _, c := range m.limited.Classes() {
		ch <- prometheus.MustNewConstMetric(m.classRequests, prometheus.CounterValue, float64(c.Requests), c.Class)
		ch <- prometheus.MustNewConstMetric(m.classSeconds, prometheus.CounterValue, c.Held.Seconds(), c.Class)
	}
	ch <- pointReadHistogram(m.pointReads, m.limited.PointReads())
	for i, phase := range m.limited.PointReadPhases() {
		ch <- pointReadHistogram(m.pointReadPhases, phase, reqlimit.PhaseNames[i])
	}
}

// pointReadHistogram is a histogram of point reads' times in Prometheus' form.
func pointReadHistogram(desc *prometheus.Desc, s reqlimit.PointReadStats, labels ...string) prometheus.Metric {
	buckets := make(map[float64]uint64, len(reqlimit.PointReadBuckets))
	var cumulative uint64
	for i, bound := range reqlimit.PointReadBuckets {
		cumulative += uint64(s.Counts[i])
		buckets[bound.Seconds()] = cumulative
	}
	return prometheus.MustNewConstHistogram(desc, uint64(s.Count()), s.Sum.Seconds(), buckets, labels...)
}

// spreadOption is --background.spread as server.TenantsOptions.Spread: 0 is none there
// (negative), the flag's default its default.
func spreadOption(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}
