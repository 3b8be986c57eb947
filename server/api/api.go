package api

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/util/annotations"
	"github.com/prometheus/prometheus/util/stats"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/server/internal/engineselect"
	"github.com/seed71701133/tablets/server/internal/redact"
	"github.com/seed71701133/tablets/server/internal/resolution"
	"github.com/seed71701133/tablets/server/internal/results"
)

// PrometheusCompatVersion is the Prometheus version /api/v1/status/buildinfo reports.
// Grafana reads it to decide which API features it may use; it is the version of the
// Prometheus engine this package is built with (module v0.305.1 is Prometheus 3.5.1).
const PrometheusCompatVersion = "3.5.1"

// Defaults for Options, the same as Prometheus' command-line defaults.
const (
	DefaultLookbackDelta          = 5 * time.Minute
	DefaultTimeout                = 2 * time.Minute
	DefaultMaxSamples             = 50_000_000
	DefaultMaxConcurrency         = 20
	DefaultNoStepSubqueryInterval = time.Minute
	DefaultRetryPause             = time.Second
)

// maxRetryPause is the longest pause between two tries of a request whose account was
// unavailable: RetryPause doubles up to it.
const maxRetryPause = 8 * time.Second

// Options configures the query engine and the API. Zero values mean the defaults.
type Options struct {
	// LookbackDelta is how far back an instant vector selector looks for a sample
	// (default 5m). Requests may override it with the lookback_delta parameter.
	LookbackDelta time.Duration
	// MaxSamples is the most samples one query may hold in memory at once (default
	// 50,000,000); exceeding it fails the query with errorType execution.
	MaxSamples int
	// Timeout is the longest a query may take, its wait for a concurrency slot included
	// (default 2m), and a request of the series and label endpoints too; over it the answer
	// is errorType timeout, HTTP 503. A request's timeout parameter can only shorten it.
	Timeout time.Duration
	// MaxConcurrency is how many queries are evaluated at once (default 20). As in
	// Prometheus, further queries wait for a slot; one still waiting when its timeout
	// ends fails with errorType timeout (HTTP 503), "query timed out in query queue".
	MaxConcurrency int
	// MaxSeriesPerSelect is the most series one selector of a query (or one match[] of
	// /api/v1/series) may select (default 0: no limit, as in Prometheus). A selection over
	// it fails with an error wrapping ErrTooManySeries: errorType execution, HTTP 422.
	MaxSeriesPerSelect int
	// NoStepSubqueryInterval is the step of subqueries written without one, like
	// foo[1h:] (default 1m, Prometheus' default evaluation interval).
	NoStepSubqueryInterval time.Duration
	// Now is the clock for the default time of instant queries and the ResultsCache's
	// freshness horizon (default time.Now).
	Now func() time.Time
	// Logger receives engine and encoding errors (default: discarded).
	Logger *slog.Logger
	// Registerer, if set, receives the engine's prometheus_engine_* metrics.
	Registerer prometheus.Registerer
	// BuildInfo, if set, replaces what /api/v1/status/buildinfo reports.
	BuildInfo *BuildInfo
	// ResultsCache, if set, keeps the answers of range queries by step, so that a refreshed
	// panel computes only its newest steps (package server sets it: tablets serve
	// --query.results-cache-bytes, shared by its tenants). Only when the Queryable is a
	// Marker, which says whether a kept answer still stands, and only answers that read raw
	// samples (max_source_resolution raw, the default), asked no stats, have no @ modifier,
	// start() or end(), and had no warnings or infos. nil: no cache.
	ResultsCache *results.Cache
	// ResultsFreshness: the steps at or after now minus it (by Now) are always computed and
	// never kept in the ResultsCache, as in-order ingest still fills them (default
	// DefaultResultsFreshness, 1m).
	ResultsFreshness time.Duration
	// ResultsSettled: the steps kept at or after now minus it (by Now; it is at least
	// ResultsFreshness) are young. A cached answer keeps a mark of its settled steps
	// apart, so that a write a little late, into the samples of its young steps, has
	// only those computed again (default DefaultResultsSettled, 5m).
	ResultsSettled time.Duration
	// KeepAnswers has the ResultsCache keep its answers in the database too, for every
	// server sharing it, when the Queryable is a results.Keeper (promstore.Queryable: tsdb's
	// kept answers): a range query no answer of this process serves reads the one another
	// server kept (a request), and serves from it while a read mark holds it, as from one of
	// its own; an answer computed whole is kept, one computed in part again at most every
	// KeepEvery, in the background (at most MaxKeeps at once). Answers with histograms are
	// not kept. tablets serve sets it (--query.results-keep).
	KeepAnswers bool
	// Rules, if set, answers /api/v1/rules and /api/v1/alerts (nil: no rules, empty lists).
	Rules Rules
	// RetryPause: a request whose account was unavailable (errorType unavailable: the
	// account unreachable, throttled or answering 5xx) is tried again after RetryPause,
	// the pause doubling up to 8s, for as long as its timeout leaves time for another try
	// (default DefaultRetryPause, 1s). A short outage of the account then delays answers
	// instead of failing them, as Mimir's and Thanos' query-frontends retry 5xx. Negative:
	// never tried again, answered 503 at once, as Prometheus answers.
	RetryPause time.Duration
	// LimitHit, if set, is called with the limit a request hit, named as the server's
	// limits file names it: LimitMaxSamplesPerQuery, LimitQueryTimeout (not when the
	// request's own timeout parameter was shorter), LimitMaxConcurrentQueries (a timeout
	// while waiting for a slot), LimitMaxSeriesPerSelect.
	LimitHit func(limit string)
}

// Names of the limits Options.LimitHit reports.
const (
	LimitMaxSamplesPerQuery   = "max_samples_per_query"
	LimitQueryTimeout         = "query_timeout"
	LimitMaxConcurrentQueries = "max_concurrent_queries"
	LimitMaxSeriesPerSelect   = "max_series_per_select"
)

// check reports a negative option, wrapping tablets.ErrInvalidOptions.
func (o *Options) check() error {
	for _, f := range []struct {
		name     string
		negative bool
	}{
		{"LookbackDelta", o.LookbackDelta < 0},
		{"MaxSamples", o.MaxSamples < 0},
		{"Timeout", o.Timeout < 0},
		{"MaxConcurrency", o.MaxConcurrency < 0},
		{"MaxSeriesPerSelect", o.MaxSeriesPerSelect < 0},
		{"NoStepSubqueryInterval", o.NoStepSubqueryInterval < 0},
		{"ResultsFreshness", o.ResultsFreshness < 0},
		{"ResultsSettled", o.ResultsSettled < 0},
	} {
		if f.negative {
			return fmt.Errorf("api: %w: %s is negative", tablets.ErrInvalidOptions, f.name)
		}
	}
	return nil
}

// BuildInfo is the data of /api/v1/status/buildinfo, in Prometheus' format.
type BuildInfo struct {
	Version   string `json:"version"`
	Revision  string `json:"revision"`
	Branch    string `json:"branch"`
	BuildUser string `json:"buildUser"`
	BuildDate string `json:"buildDate"`
	GoVersion string `json:"goVersion"`
}

// defaultBuildInfo reports PrometheusCompatVersion (so Grafana treats the server as a
// Prometheus 3 and enables what it supports) and says in branch and buildUser that the
// server is tablets. It deliberately has no "application" or "features" field: Grafana
// uses those to detect Mimir and Cortex, whose extra APIs tablets does not have.
func defaultBuildInfo() BuildInfo {
	bi := BuildInfo{
		Version:   PrometheusCompatVersion,
		Revision:  "unknown",
		Branch:    "tablets",
		BuildUser: "tablets",
		GoVersion: runtime.Version(),
	}
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				bi.Revision = s.Value
			case "vcs.time":
				bi.BuildDate = s.Value
			}
		}
	}
	return bi
}

// API serves the Prometheus HTTP query API over a storage.Queryable.
type API struct {
	queryable storage.Queryable
	exact     exactRewriter // the queryable's exact answers from tiers, if it has them
	begin     readBeginner  // the queryable's beginning of a request's reads, if it has one
	maxSeries int           // Options.MaxSeriesPerSelect
	engine    *promql.Engine
	timeout   time.Duration
	// A request whose account was unavailable is tried again after retryPause (negative:
	// never), counted in retries.
	retryPause time.Duration
	retries    prometheus.Counter
	// speculations counts the instant queries answered speculatively, by outcome.
	speculations *prometheus.CounterVec
	// changing is whether the last check of a speculation (prepareRead after DB.Speculate)
	// found the database changed: the next query does not speculate (see speculate).
	changing  atomic.Bool
	now       func() time.Time
	logger    *slog.Logger
	buildInfo []byte // encoded once
	limitHit  func(limit string)
	rules     Rules

	// The results cache (results.go): nil results or marker, none.
	results       *results.Cache
	marker        Marker
	keeper        results.Keeper // nil: answers are not kept in the database
	keeps         chan struct{}  // the keeps under way, at most MaxKeeps
	freshness     time.Duration
	settled       time.Duration // at least freshness
	lookbackDelta time.Duration
	subqueryStep  int64 // milliseconds
}

// New returns an API evaluating queries against q with Prometheus' PromQL engine. nil
// options mean the defaults; a nil q or a negative option gives an error wrapping
// tablets.ErrInvalidOptions.
func New(q storage.Queryable, opts *Options) (*API, error) {
	if q == nil {
		return nil, fmt.Errorf("api: %w: nil Queryable", tablets.ErrInvalidOptions)
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if err := o.check(); err != nil {
		return nil, err
	}
	if o.LookbackDelta == 0 {
		o.LookbackDelta = DefaultLookbackDelta
	}
	if o.MaxSamples == 0 {
		o.MaxSamples = DefaultMaxSamples
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MaxConcurrency == 0 {
		o.MaxConcurrency = DefaultMaxConcurrency
	}
	if o.NoStepSubqueryInterval == 0 {
		o.NoStepSubqueryInterval = DefaultNoStepSubqueryInterval
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.RetryPause == 0 {
		o.RetryPause = DefaultRetryPause
	}
	if o.ResultsFreshness == 0 {
		o.ResultsFreshness = DefaultResultsFreshness
	}
	if o.ResultsSettled == 0 {
		o.ResultsSettled = DefaultResultsSettled
	}
	o.ResultsSettled = max(o.ResultsSettled, o.ResultsFreshness)
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	bi := defaultBuildInfo()
	if o.BuildInfo != nil {
		bi = *o.BuildInfo
	}
	biJSON, err := json.Marshal(bi)
	if err != nil {
		return nil, err
	}
	subqueryStep := o.NoStepSubqueryInterval.Milliseconds()
	engine := promql.NewEngine(promql.EngineOpts{
		Logger:                   o.Logger,
		Reg:                      o.Registerer,
		MaxSamples:               o.MaxSamples,
		Timeout:                  o.Timeout,
		ActiveQueryTracker:       newLimiter(o.MaxConcurrency),
		LookbackDelta:            o.LookbackDelta,
		NoStepSubqueryIntervalFn: func(int64) int64 { return subqueryStep },
		// Both are on by default since Prometheus 2.33; Grafana's $__range and
		// time-shift features produce them.
		EnableAtModifier:     true,
		EnableNegativeOffset: true,
		// Only costs anything when a request asks for stats=all.
		EnablePerStepStats: true,
	})
	retries := prometheus.NewCounter(prometheus.CounterOpts{Name: "tablets_query_retries_total",
		Help: "Requests of the query API tried again because the account was unavailable (Options.RetryPause)."})
	speculations := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tablets_query_speculations_total",
		Help: "Instant queries the engine answered beside the request that checks the database (tsdb's DB.Speculate), by outcome: " +
			"held (the answer), spoilt (the database had changed: answered again after the request), failed (answered again), " +
			"skipped (not tried: the check of the query before found the database changed)."},
		[]string{"outcome"})
	if o.Registerer != nil {
		for _, c := range []prometheus.Collector{retries, speculations} {
			if err := o.Registerer.Register(c); err != nil {
				return nil, err
			}
		}
	}
	marker, _ := q.(Marker) // before the wrapping below, which hides it
	var keeper results.Keeper
	if k, ok := marker.(results.Keeper); ok && o.KeepAnswers && o.ResultsCache != nil {
		keeper = k
	}
	exact, _ := q.(exactRewriter)
	begin, _ := q.(readBeginner)
	if o.MaxSeriesPerSelect > 0 {
		q = seriesLimited{Queryable: q, max: o.MaxSeriesPerSelect}
	}
	return &API{
		exact:         exact,
		begin:         begin,
		maxSeries:     o.MaxSeriesPerSelect,
		results:       o.ResultsCache,
		marker:        marker,
		keeper:        keeper,
		keeps:         make(chan struct{}, MaxKeeps),
		freshness:     o.ResultsFreshness,
		settled:       o.ResultsSettled,
		lookbackDelta: o.LookbackDelta,
		subqueryStep:  subqueryStep,
		queryable:     q,
		engine:        engine,
		timeout:       o.Timeout,
		retryPause:    o.RetryPause,
		retries:       retries,
		speculations:  speculations,
		now:           o.Now,
		logger:        o.Logger,
		buildInfo:     biJSON,
		limitHit:      o.LimitHit,
		rules:         o.Rules,
	}, nil
}

// Engine is the API's PromQL engine: its limits (MaxSamples, Timeout, MaxConcurrency)
// apply to whatever queries it runs (package server runs the tenant's rules on it, as
// Prometheus runs its rules on the engine of its API).
func (a *API) Engine() promql.QueryEngine { return a.engine }

// Queryable is what the API's queries read: the Queryable given to New, with the
// MaxSeriesPerSelect limit if one is set.
func (a *API) Queryable() storage.Queryable { return a.queryable }

// Close releases the engine. In-flight requests are not interrupted.
func (a *API) Close() error { return a.engine.Close() }

// Register adds the endpoints to mux, under /api/v1/.
func (a *API) Register(mux *http.ServeMux) {
	both := func(path string, f handlerFunc) {
		h := a.wrap(f)
		mux.Handle("GET "+path, h) // GET also serves HEAD
		mux.Handle("POST "+path, h)
	}
	both("/api/v1/query", a.query)
	both("/api/v1/query_range", a.queryRange)
	both("/api/v1/series", a.series)
	both("/api/v1/labels", a.labelNames)
	both("/api/v1/label/{name}/values", a.labelValues)
	both("/api/v1/query_exemplars", a.queryExemplars)
	both("/api/v1/format_query", a.formatQuery)
	both("/api/v1/metadata", a.metadata)
	both("/api/v1/status/buildinfo", a.serveBuildInfo)
	both("/api/v1/status/config", a.serveConfig)
	both("/api/v1/status/flags", a.serveFlags)
	both("/api/v1/rules", a.rulesList)
	both("/api/v1/alerts", a.alerts)
}

// Handler returns a handler serving only the API endpoints.
func (a *API) Handler() http.Handler {
	mux := http.NewServeMux()
	a.Register(mux)
	return mux
}

// handlerFunc returns the encoded "data" of a success response, or an error.
type handlerFunc func(r *http.Request) (data []byte, ws annotations.Annotations, err *apiError)

func (a *API) wrap(f handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var (
			data   []byte
			ws     annotations.Annotations
			apiErr *apiError
		)
		// Reads both the URL query and an application/x-www-form-urlencoded body.
		if err := r.ParseForm(); err != nil {
			apiErr = badData(fmt.Errorf("error parsing form values: %w", err))
		} else {
			data, ws, apiErr = a.tries(r, f)
		}
		if apiErr != nil {
			a.hit(r, apiErr)
			// Like Prometheus, error responses carry no warnings. An error from the account
			// may quote a request URL with its SAS signature: never pass that on.
			a.write(w, r, httpStatus(apiErr.typ), appendEnvelopeError(nil, apiErr.typ, redact.Secrets(apiErr.err.Error())))
			return
		}
		// The query string lets annotations point at the position in the query.
		warnings, infos := ws.AsStrings(r.FormValue("query"), 10, 10)
		for _, list := range [][]string{warnings, infos} { // a storage's warning may quote an error
			for i := range list {
				list[i] = redact.Secrets(list[i])
			}
		}
		a.write(w, r, http.StatusOK, appendEnvelopeSuccess(nil, data, warnings, infos))
	})
}

// tries runs f, and runs it again while the account is unavailable and the request's
// timeout leaves time for another try (Options.RetryPause). Every try shares the request's
// deadline (began), and reads afresh: its own BeginRead, so that nothing the failed try
// read or failed to read is taken again.
func (a *API) tries(r *http.Request, f handlerFunc) (data []byte, ws annotations.Annotations, apiErr *apiError) {
	began := time.Now()
	ctx := context.WithValue(r.Context(), beganKey{}, began)
	for try, pause := 1, a.retryPause; ; try, pause = try+1, min(2*pause, maxRetryPause) {
		tctx := ctx
		if a.begin != nil {
			tctx = a.begin.BeginRead(tctx)
		}
		// The profiles (/debug/pprof on the internal listener) say which request spent
		// what: its path and query label its goroutines and those they start.
		pprof.Do(tctx, profileLabels(r), func(tctx context.Context) {
			data, ws, apiErr = f(r.WithContext(tctx))
		})
		if apiErr == nil || apiErr.typ != ErrorUnavailable || pause < 0 {
			return data, ws, apiErr
		}
		// Another try only if, after the pause, it has at least a pause's time before
		// the deadline: else it would only turn "unavailable" into a timeout.
		deadline, ok := a.deadline(r, began)
		if !ok || time.Until(deadline) < 2*pause {
			return data, ws, apiErr
		}
		a.logger.Debug("the account was unavailable: the request is tried again", "url", r.URL.Path, "try", try, "pause", pause, "err", apiErr.err)
		t := time.NewTimer(pause)
		select {
		case <-r.Context().Done():
			t.Stop()
			return data, ws, apiErr
		case <-t.C:
		}
		a.retries.Inc()
	}
}

// beganKey is the context key of the time a request began (API.tries): every try of it
// shares the deadline it set.
type beganKey struct{}

// deadline is when a request that began at began times out: Options.Timeout, or its
// timeout parameter when that is shorter. ok is false when the parameter is not valid (its
// try has already said so).
func (a *API) deadline(r *http.Request, began time.Time) (time.Time, bool) {
	d := a.timeout
	if s := r.FormValue("timeout"); s != "" {
		p, err := parseDuration(s)
		if err != nil {
			return time.Time{}, false
		}
		d = min(d, p)
	}
	return began.Add(d), true
}

// hit reports the limit an error hit, if any. A timeout is the limit's only when the
// request's timeout parameter did not shorten it.
func (a *API) hit(r *http.Request, e *apiError) {
	if a.limitHit == nil || e.limit == "" {
		return
	}
	if e.limit == LimitQueryTimeout || e.limit == LimitMaxConcurrentQueries {
		if p, err := parseDuration(r.FormValue("timeout")); err == nil && p < a.timeout {
			return
		}
	}
	a.limitHit(e.limit)
}

// gzipMinSize is the smallest body worth compressing.
const gzipMinSize = 1024

// write sends a JSON body, gzip-compressed when the client accepts it (Prometheus
// compresses all API responses; matrices compress about tenfold).
func (a *API) write(w http.ResponseWriter, r *http.Request, code int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Add("Vary", "Accept-Encoding")
	if len(body) >= gzipMinSize && acceptsGzip(r.Header.Get("Accept-Encoding")) {
		h.Set("Content-Encoding", "gzip")
		w.WriteHeader(code)
		gz := gzip.NewWriter(w)
		_, err := gz.Write(body)
		if cerr := gz.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			a.logger.Debug("error writing response", "url", r.URL.String(), "err", err)
		}
		return
	}
	w.WriteHeader(code)
	if _, err := w.Write(body); err != nil {
		a.logger.Debug("error writing response", "url", r.URL.String(), "err", err)
	}
}

// acceptsGzip reports whether an Accept-Encoding header allows gzip (and not with q=0).
func acceptsGzip(header string) bool {
	for part := range strings.SplitSeq(header, ",") {
		coding, params, _ := strings.Cut(part, ";")
		coding = strings.TrimSpace(coding)
		if !strings.EqualFold(coding, "gzip") && coding != "*" {
			continue
		}
		if q, ok := strings.CutPrefix(strings.TrimSpace(params), "q="); ok {
			if v, err := strconv.ParseFloat(strings.TrimSpace(q), 64); err == nil && v == 0 {
				return false
			}
		}
		return true
	}
	return false
}

// queryOpts reads lookback_delta and stats, as Prometheus' extractQueryOpts.
func queryOpts(r *http.Request) (promql.QueryOpts, error) {
	var lookback time.Duration
	if s := r.FormValue("lookback_delta"); s != "" {
		d, err := parseDuration(s)
		if err != nil {
			return nil, fmt.Errorf("error parsing lookback delta duration: %w", err)
		}
		lookback = d
	}
	return promql.NewPrometheusQueryOpts(r.FormValue("stats") == "all", lookback), nil
}

// withTimeout bounds the request by Options.Timeout, or by its timeout parameter when that
// is shorter (queries, and, unlike Prometheus, the series and label endpoints too: over a
// slow account they can take as long as a query). The engine applies Options.Timeout only once it evaluates; bounding the whole
// request also ends the wait for a concurrency slot, which in Prometheus lasts as long as
// the client waits. It is measured on the real clock, not Options.Now.
func (a *API) withTimeout(r *http.Request) (context.Context, context.CancelFunc, *apiError) {
	began, ok := r.Context().Value(beganKey{}).(time.Time)
	if !ok {
		began = time.Now()
	}
	deadline, ok := a.deadline(r, began)
	if !ok {
		_, err := parseDuration(r.FormValue("timeout"))
		return nil, nil, invalidParam(err, "timeout")
	}
	ctx, cancel := context.WithDeadline(r.Context(), deadline)
	return ctx, cancel, nil
}

// withResolution carries the request's max_source_resolution in ctx (Thanos' parameter):
// "raw" (or 0) reads raw samples wherever they exist, exact; "auto" any rollup tier the
// storage estimates cheaper; a duration, the tiers of at most that step. Absent: the
// storage's default (tablets serve: --query.max-source-resolution).
func withResolution(ctx context.Context, r *http.Request) (context.Context, *apiError) {
	s := r.FormValue("max_source_resolution")
	switch s {
	case "":
		return ctx, nil
	case "auto":
		return resolution.With(ctx, resolution.Any), nil
	case "raw":
		return resolution.With(ctx, resolution.Raw), nil
	}
	d, err := parseDuration(s)
	switch {
	case err != nil:
		return nil, invalidParam(err, "max_source_resolution")
	case d < 0:
		return nil, invalidParam(errors.New("must not be negative"), "max_source_resolution")
	case d == 0:
		return resolution.With(ctx, resolution.Raw), nil
	}
	return resolution.With(ctx, d), nil
}

// /api/v1/query: query, time (default now), timeout, limit, lookback_delta, stats,
// max_source_resolution.
func (a *API) query(r *http.Request) ([]byte, annotations.Annotations, *apiError) {
	limit, err := parseLimit(r.FormValue("limit"))
	if err != nil {
		return nil, nil, invalidParam(err, "limit")
	}
	ts, err := parseTimeParam(r, "time", a.now())
	if err != nil {
		return nil, nil, invalidParam(err, "time")
	}
	ctx, cancel, apiErr := a.withTimeout(r)
	if apiErr != nil {
		return nil, nil, apiErr
	}
	defer cancel()
	if ctx, apiErr = withResolution(ctx, r); apiErr != nil {
		return nil, nil, apiErr
	}
	opts, err := queryOpts(r)
	if err != nil {
		return nil, nil, badData(err)
	}
	qry, err := a.engine.NewInstantQuery(ctx, a.queryable, opts, r.FormValue("query"), ts)
	if err != nil {
		return nil, nil, newQueryError(err)
	}
	if stmt, ok := qry.Statement().(*parser.EvalStmt); ok {
		data, ws, held, ran := a.speculate(ctx, r, stmt, qry, limit)
		if held {
			return data, ws, nil
		}
		if ran { // a Query runs once
			if qry, err = a.engine.NewInstantQuery(ctx, a.queryable, opts, r.FormValue("query"), ts); err != nil {
				return nil, nil, newQueryError(err)
			}
		}
	}
	return a.exec(ctx, r, qry, limit)
}

// speculate answers an instant query speculatively where its database can (speculator:
// tsdb's DB.Speculate): the engine answers from the database as this process last found
// it while prepareRead's request is under way, instead of after it, and the answer stands
// when that request found nothing changed. A refreshed instant panel waited for the request
// (the staging listing, a millisecond of Azurite's), then for the engine, a third of that
// again. held is whether it answered; else the read is prepared (prepareRead) and the
// caller has the engine answer it, as any query: with another Query where ran (the engine
// ran qry).
//
// A speculation the request finds spoilt is stopped then: it cost the engine's work until
// the request returned, and the CPU it took from the request's (on Azurite, the listing's)
// and from other queries. So while the database changes at every check, as it does while
// samples arrive at a watched dashboard's pace, none is tried: a query speculates only
// where the check before it, the last of this process's queries, found nothing changed
// (a check that finds the database changed is as likely to the next time). The check
// itself is made by every query, so a database that falls quiet is speculated on again
// from the query after the first that finds it so.
func (a *API) speculate(ctx context.Context, r *http.Request, stmt *parser.EvalStmt, qry promql.Query, limit int) (data []byte, ws annotations.Annotations, held, ran bool) {
	s, ok := a.marker.(speculator)
	if ok {
		_, _, ok = a.readRange(ctx, stmt)
	}
	var sctx context.Context
	var holds func() bool
	if ok {
		sctx, holds, ok = s.Speculate(ctx)
	}
	if !ok {
		_ = a.prepareRead(ctx, stmt) // a failed one fails the Selects as they read
		return nil, nil, false, false
	}
	if a.changing.Load() {
		err := a.prepareRead(ctx, stmt)
		a.changing.Store(err != nil || !holds())
		a.speculations.WithLabelValues("skipped").Inc()
		return nil, nil, false, false
	}
	sctx, stop := context.WithCancel(sctx)
	defer stop()
	prepared := make(chan error, 1)
	go func() {
		err := a.prepareRead(ctx, stmt)
		if err != nil || !holds() {
			// The answer cannot stand, whatever the engine still has to do: stopped now, the
			// query is answered again as soon as the speculation gives back its CPU.
			stop()
		}
		prepared <- err
	}()
	data, ws, apiErr := a.exec(sctx, r, qry, limit)
	err := <-prepared
	a.changing.Store(err != nil || !holds())
	switch {
	case err != nil:
		a.speculations.WithLabelValues("failed").Inc()
	case !holds():
		a.speculations.WithLabelValues("spoilt").Inc()
	case apiErr != nil:
		a.speculations.WithLabelValues("failed").Inc()
	default:
		a.speculations.WithLabelValues("held").Inc()
		return data, ws, true, true
	}
	return nil, nil, false, true
}

// prepareRead reads beforehand what the Selects of a query that began (readBeginner) take
// instead of reading it themselves: a read mark of its data range, not kept (the staging
// listing, then the raw and index logs of its periods in one request; readPreparer's,
// which selects none of the listed entities), with its staged entities prefetched beside
// it. An instant query's Selects would list the staging table beside the index log, then
// read the raw log: the same wait, in a request more. Only for Selects that read raw
// samples; a mark that fails leaves the Selects to fail as they will.
func (a *API) prepareRead(ctx context.Context, stmt *parser.EvalStmt) error {
	from, to, ok := a.readRange(ctx, stmt)
	if !ok {
		return nil
	}
	if p, ok := a.marker.(stagedPrefetcher); ok {
		p.PrefetchStaged(ctx, from, to, parser.ExtractSelectors(stmt.Expr))
	}
	if p, ok := a.marker.(readPreparer); ok {
		return p.PrepareRead(ctx, from, to)
	}
	_, err := a.marker.ReadMark(ctx, from, to)
	return err
}

// readRange is the range of samples prepareRead reads beforehand for stmt, and whether it
// reads any: only for a query that began whose Selects read raw samples, and read some.
func (a *API) readRange(ctx context.Context, stmt *parser.EvalStmt) (from, to time.Time, ok bool) {
	if a.marker == nil || a.begin == nil || !a.marker.ExactReads(ctx) {
		return from, to, false
	}
	if len(parser.ExtractSelectors(stmt.Expr)) == 0 { // nothing read (time(), vector(1))
		return from, to, false
	}
	mint, maxt := promql.FindMinMaxTime(stmt)
	from, to, ok = storeRange(time.UnixMilli(mint), time.UnixMilli(maxt+1))
	return from, to, ok && from.Before(to)
}

// /api/v1/query_range: query, start, end, step, timeout, limit, lookback_delta, stats,
// max_source_resolution.
// The engine hands Select hints with Step and Range, so the storage may serve it from
// a rollup tier.
func (a *API) queryRange(r *http.Request) ([]byte, annotations.Annotations, *apiError) {
	limit, err := parseLimit(r.FormValue("limit"))
	if err != nil {
		return nil, nil, invalidParam(err, "limit")
	}
	start, err := parseTime(r.FormValue("start"))
	if err != nil {
		return nil, nil, invalidParam(err, "start")
	}
	end, err := parseTime(r.FormValue("end"))
	if err != nil {
		return nil, nil, invalidParam(err, "end")
	}
	if end.Before(start) {
		return nil, nil, invalidParam(errors.New("end timestamp must not be before start time"), "end")
	}
	step, err := parseDuration(r.FormValue("step"))
	if err != nil {
		return nil, nil, invalidParam(err, "step")
	}
	if step <= 0 {
		return nil, nil, invalidParam(errors.New("zero or negative query resolution step widths are not accepted. Try a positive integer"), "step")
	}
	if end.Sub(start)/step > maxPointsPerSeries {
		return nil, nil, badData(errors.New("exceeded maximum resolution of 11,000 points per timeseries. Try decreasing the query resolution (?step=XX)"))
	}
	ctx, cancel, apiErr := a.withTimeout(r)
	if apiErr != nil {
		return nil, nil, apiErr
	}
	defer cancel()
	if ctx, apiErr = withResolution(ctx, r); apiErr != nil {
		return nil, nil, apiErr
	}
	opts, err := queryOpts(r)
	if err != nil {
		return nil, nil, badData(err)
	}
	if data, ws, apiErr, ok := a.cachedRange(ctx, r, opts, start, end, step, limit); ok {
		return data, ws, apiErr
	}
	qry, err := a.newRangeQuery(ctx, opts, r.FormValue("query"), start, end, step)
	if err != nil {
		return nil, nil, newQueryError(err)
	}
	return a.exec(ctx, r, qry, limit)
}

// readBeginner is a Queryable whose reads of one request can share what each would read
// first (promstore.Queryable: tsdb's DB.BeginRead): a request's results-cache mark and its
// Selects list the staging table once and read each change log once.
type readBeginner interface {
	BeginRead(ctx context.Context) context.Context
}

// exactRewriter is a Queryable that answers some range functions exactly from its tiers'
// windows (promstore.Queryable.Exact): a range query runs rewritten over what it returns.
type exactRewriter interface {
	Exact(ctx context.Context, qs string, start, end time.Time, step time.Duration) (string, storage.Queryable, bool, error)
}

// newRangeQuery makes the engine's range query of qs, over the calls the queryable answers
// exactly from its tiers where it does (docs/tiers.md, "Exact answers").
func (a *API) newRangeQuery(ctx context.Context, opts promql.QueryOpts, qs string, start, end time.Time, step time.Duration) (promql.Query, error) {
	if a.exact != nil {
		// Where the evaluation failed (the account, a timeout), the engine's own read
		// meets the same and says it as a query error.
		if rewritten, q, ok, err := a.exact.Exact(ctx, qs, start, end, step); err == nil && ok {
			if a.maxSeries > 0 {
				q = seriesLimited{Queryable: q, max: a.maxSeries}
			}
			return a.engine.NewRangeQuery(ctx, q, opts, rewritten, start, end, step)
		}
	}
	return a.engine.NewRangeQuery(ctx, a.queryable, opts, qs, start, end, step)
}

// newQueryError classifies an error from creating a query. The engine parses the query
// only after taking a concurrency slot, so besides a bad query (bad_data, as in Prometheus)
// this can be the request's context ending while waiting for a slot, which Prometheus
// would also call bad_data but is really a timeout (503) or a cancellation (499), said as
// the engine says it when its own queue wait ends so.
func newQueryError(err error) *apiError {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		e := classify(promql.ErrQueryTimeout("query queue"))
		e.limit = LimitMaxConcurrentQueries
		return e
	case errors.Is(err, context.Canceled):
		return classify(promql.ErrQueryCanceled("query queue"))
	}
	return invalidParam(err, "query")
}

// exec runs a query and encodes its result before closing it (the engine recycles the
// result's memory on Close).
func (a *API) exec(ctx context.Context, r *http.Request, qry promql.Query, limit int) ([]byte, annotations.Annotations, *apiError) {
	defer qry.Close()
	res := qry.Exec(engineselect.With(ctx)) // the engine's subqueries always have a step (subqueryStep)
	if res.Err != nil {
		return nil, res.Warnings, classify(res.Err)
	}
	ws := res.Warnings
	if limit > 0 {
		truncated := false
		switch v := res.Value.(type) {
		case promql.Matrix:
			if len(v) > limit {
				res.Value, truncated = v[:limit], true
			}
		case promql.Vector:
			if len(v) > limit {
				res.Value, truncated = v[:limit], true
			}
		}
		if truncated {
			ws = ws.Add(errors.New("results truncated due to limit"))
		}
	}
	// Optional "stats" field, only when the request asks for it, as in Prometheus.
	var qs any
	if r.FormValue("stats") != "" {
		qs = stats.NewQueryStats(qry.Stats())
	}
	data, err := appendQueryData(nil, res.Value, qs)
	if err != nil {
		a.logger.Error("error encoding query result", "err", err)
		return nil, nil, &apiError{typ: ErrorInternal, err: err}
	}
	return data, ws, nil
}

// rangeParams reads start and end (defaulting to Prometheus' bounds) and match[], as the
// metadata endpoints (series, labels, label values) do, and clamps the range to the stores'
// ([storeRange]); empty is true when none of it is left.
func rangeParams(r *http.Request) (start, end time.Time, matchers [][]*labels.Matcher, empty bool, apiErr *apiError) {
	start, err := parseTimeParam(r, "start", promMinTime)
	if err != nil {
		return start, end, nil, false, invalidParam(err, "start")
	}
	end, err = parseTimeParam(r, "end", promMaxTime)
	if err != nil {
		return start, end, nil, false, invalidParam(err, "end")
	}
	if end.Before(start) {
		// Prometheus passes such a range on to the storage, which finds nothing; saying
		// so is kinder and keeps the storage from seeing inverted ranges.
		return start, end, nil, false, invalidParam(errors.New("end timestamp must not be before start time"), "end")
	}
	matchers, err = parseMatchers(r.Form["match[]"])
	if err != nil {
		return start, end, nil, false, invalidParam(err, "match[]")
	}
	start, end, ok := storeRange(start, end)
	return start, end, matchers, !ok, nil
}

// /api/v1/series: match[] (required), start, end, limit.
func (a *API) series(r *http.Request) ([]byte, annotations.Annotations, *apiError) {
	if len(r.Form["match[]"]) == 0 {
		return nil, nil, badData(errors.New("no match[] parameter provided"))
	}
	limit, err := parseLimit(r.FormValue("limit"))
	if err != nil {
		return nil, nil, invalidParam(err, "limit")
	}
	start, end, matcherSets, empty, apiErr := rangeParams(r)
	if apiErr != nil {
		return nil, nil, apiErr
	}
	if empty { // the range is outside the stores'
		return []byte("[]"), nil, nil
	}
	ctx, cancel, apiErr := a.withTimeout(r)
	if apiErr != nil {
		return nil, nil, apiErr
	}
	defer cancel()
	q, err := a.queryable.Querier(millis(start), millis(end))
	if err != nil {
		return nil, nil, classify(err)
	}
	defer q.Close()

	hints := &storage.SelectHints{
		Start: millis(start),
		End:   millis(end),
		Func:  "series", // not a PromQL function: tells the storage that no samples are needed
		Limit: hintLimit(limit),
	}
	var set storage.SeriesSet
	if len(matcherSets) > 1 {
		sets := make([]storage.SeriesSet, 0, len(matcherSets))
		for _, ms := range matcherSets {
			// Merging needs sorted sets; it also removes duplicates across selectors.
			sets = append(sets, q.Select(ctx, true, hints, ms...))
		}
		set = storage.NewMergeSeriesSet(sets, 0, storage.ChainedSeriesMerge)
	} else {
		set = q.Select(ctx, false, hints, matcherSets[0]...)
	}

	list := []labels.Labels{}
	var ws annotations.Annotations
	for i := 1; set.Next(); i++ {
		if i%128 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, ws, classify(err)
			}
		}
		list = append(list, set.At().Labels())
		if limit > 0 && len(list) > limit {
			list = list[:limit]
			ws.Add(errors.New("results truncated due to limit"))
			break
		}
	}
	ws.Merge(set.Warnings())
	if err := set.Err(); err != nil {
		return nil, ws, classify(err)
	}
	return appendLabelsList(nil, list), ws, nil
}

// /api/v1/labels: start, end, match[], limit.
func (a *API) labelNames(r *http.Request) ([]byte, annotations.Annotations, *apiError) {
	return a.labelList(r, func(ctx context.Context, q storage.Querier, hints *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
		return q.LabelNames(ctx, hints, ms...)
	})
}

// /api/v1/label/<name>/values: start, end, match[], limit. A name that is not a legacy
// identifier (Prometheus 3 allows any UTF-8) arrives in the "U__" value encoding.
func (a *API) labelValues(r *http.Request) ([]byte, annotations.Annotations, *apiError) {
	name := r.PathValue("name")
	if strings.HasPrefix(name, "U__") {
		name = model.UnescapeName(name, model.ValueEncodingEscaping)
	}
	if name == "" || !utf8.ValidString(name) {
		return nil, nil, badData(fmt.Errorf("invalid label name: %q", name))
	}
	return a.labelList(r, func(ctx context.Context, q storage.Querier, hints *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
		return q.LabelValues(ctx, name, hints, ms...)
	})
}

// labelList answers the label endpoints: the sorted union of get over the match[] sets of
// the range, cut at limit.
func (a *API) labelList(r *http.Request, get func(context.Context, storage.Querier, *storage.LabelHints, ...*labels.Matcher) ([]string, annotations.Annotations, error)) ([]byte, annotations.Annotations, *apiError) {
	limit, err := parseLimit(r.FormValue("limit"))
	if err != nil {
		return nil, nil, invalidParam(err, "limit")
	}
	start, end, matcherSets, empty, apiErr := rangeParams(r)
	if apiErr != nil {
		return nil, nil, apiErr
	}
	if empty { // the range is outside the stores'
		return []byte("[]"), nil, nil
	}
	ctx, cancel, apiErr := a.withTimeout(r)
	if apiErr != nil {
		return nil, nil, apiErr
	}
	defer cancel()
	q, err := a.queryable.Querier(millis(start), millis(end))
	if err != nil {
		return nil, nil, classify(err)
	}
	defer q.Close()

	hints := &storage.LabelHints{Limit: hintLimit(limit)}
	vals, ws, err := collectLabels(matcherSets, func(ms []*labels.Matcher) ([]string, annotations.Annotations, error) {
		return get(ctx, q, hints, ms...)
	})
	if err != nil {
		return nil, ws, classify(err)
	}
	if limit > 0 && len(vals) > limit {
		vals = vals[:limit]
		ws = ws.Add(errors.New("results truncated due to limit"))
	}
	return appendStringList(nil, vals), ws, nil
}

// collectLabels calls get once per matcher set (once with no matchers when there is
// none) and returns the sorted union, never nil.
func collectLabels(matcherSets [][]*labels.Matcher, get func([]*labels.Matcher) ([]string, annotations.Annotations, error)) ([]string, annotations.Annotations, error) {
	var ws annotations.Annotations
	if len(matcherSets) <= 1 {
		var ms []*labels.Matcher
		if len(matcherSets) == 1 {
			ms = matcherSets[0]
		}
		vals, w, err := get(ms)
		ws.Merge(w)
		if err != nil {
			return nil, ws, err
		}
		vals = slices.Clone(vals) // the storage may own the slice
		if vals == nil {
			vals = []string{}
		}
		slices.Sort(vals)
		return vals, ws, nil
	}
	set := map[string]struct{}{}
	for _, ms := range matcherSets {
		vals, w, err := get(ms)
		ws.Merge(w)
		if err != nil {
			return nil, ws, err
		}
		for _, v := range vals {
			set[v] = struct{}{}
		}
	}
	out := make([]string, 0, len(set))
	for v := range set {
		out = append(out, v)
	}
	slices.Sort(out)
	return out, ws, nil
}

// /api/v1/query_exemplars: the store keeps no exemplars, so after validating the
// parameters as Prometheus does the answer is always an empty list.
func (a *API) queryExemplars(r *http.Request) ([]byte, annotations.Annotations, *apiError) {
	start, err := parseTimeParam(r, "start", promMinTime)
	if err != nil {
		return nil, nil, invalidParam(err, "start")
	}
	end, err := parseTimeParam(r, "end", promMaxTime)
	if err != nil {
		return nil, nil, invalidParam(err, "end")
	}
	if end.Before(start) {
		return nil, nil, badData(errors.New("end timestamp must not be before start timestamp"))
	}
	if _, err := parser.ParseExpr(r.FormValue("query")); err != nil {
		return nil, nil, badData(err)
	}
	return []byte("[]"), nil, nil
}

// /api/v1/format_query: the query pretty-printed by the PromQL parser (Grafana's query
// editor offers this).
func (a *API) formatQuery(r *http.Request) ([]byte, annotations.Annotations, *apiError) {
	expr, err := parser.ParseExpr(r.FormValue("query"))
	if err != nil {
		return nil, nil, invalidParam(err, "query")
	}
	return appendString(nil, expr.Pretty(0)), nil, nil
}

// /api/v1/metadata: metric metadata (type, help, unit) comes from scrape targets, which
// tablets does not have. An empty object is what Prometheus answers when it knows none;
// Grafana then falls back to guessing types from metric names.
func (a *API) metadata(*http.Request) ([]byte, annotations.Annotations, *apiError) {
	return []byte("{}"), nil, nil
}

func (a *API) serveBuildInfo(*http.Request) ([]byte, annotations.Annotations, *apiError) {
	return a.buildInfo, nil, nil
}

// /api/v1/status/config: there is no Prometheus configuration file; an empty YAML
// document keeps clients that display or parse it working.
func (a *API) serveConfig(*http.Request) ([]byte, annotations.Annotations, *apiError) {
	return []byte(`{"yaml":""}`), nil, nil
}

// /api/v1/status/flags: no Prometheus flags.
func (a *API) serveFlags(*http.Request) ([]byte, annotations.Annotations, *apiError) {
	return []byte("{}"), nil, nil
}

// profileLabelMax is how much of a query a profile's label keeps.
const profileLabelMax = 200

// profileLabels are the pprof labels of an API request: its path, and its query (or its
// first series selector), cut at profileLabelMax bytes.
func profileLabels(r *http.Request) pprof.LabelSet {
	q := r.Form.Get("query")
	if q == "" {
		q = r.Form.Get("match[]")
	}
	if len(q) > profileLabelMax {
		q = strings.ToValidUTF8(q[:profileLabelMax], "")
	}
	return pprof.Labels("path", r.URL.Path, "query", q)
}
