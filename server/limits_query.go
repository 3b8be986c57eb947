package server

import (
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seed71701133/tablets/server/api"
)

// queryAPI is the query API built for one set of query limits: the engine fixes MaxSamples,
// its timeout and its concurrency when it is made, so other limits need another API.
type queryAPI struct {
	limits queryLimits
	api    *api.API
	mux    *http.ServeMux
}

// queryLimits are the options of api.Options a tenant's limits replace.
type queryLimits struct {
	maxSamples, maxConcurrency, maxSeriesPerSelect int
	timeout                                        time.Duration
}

// queryAPIs keeps the server's current query API, made anew when the query limits in force
// change (a configuration reloaded).
type queryAPIs struct {
	base    api.Options // Options.Query, its Registerer left to metrics
	metrics *engineMetrics
	current atomic.Pointer[queryAPI]
	mu      sync.Mutex // one build at a time
}

// queryLimitsNow are Options.Query's limits with the tenant's over them, where not zero.
func (s *Server) queryLimitsNow() queryLimits {
	b := s.queries.base
	l := queryLimits{maxSamples: b.MaxSamples, maxConcurrency: b.MaxConcurrency, maxSeriesPerSelect: b.MaxSeriesPerSelect, timeout: b.Timeout}
	if s.opts.Limits == nil {
		return l
	}
	cfg := s.opts.Limits()
	if cfg == nil {
		return l
	}
	t := cfg.For(s.opts.Tenant)
	if t.MaxSamplesPerQuery > 0 {
		l.maxSamples = t.MaxSamplesPerQuery
	}
	if t.MaxConcurrentQueries > 0 {
		l.maxConcurrency = t.MaxConcurrentQueries
	}
	if t.MaxSeriesPerSelect > 0 {
		l.maxSeriesPerSelect = t.MaxSeriesPerSelect
	}
	if t.QueryTimeout > 0 {
		l.timeout = time.Duration(t.QueryTimeout)
	}
	return l
}

// queryAPI returns the query API of the limits in force now, making it if they changed.
// The API it replaces is left to finish its queries: its Close only releases its
// concurrency slots' tracker, which holds nothing, so the garbage collector takes it. Until
// they finish, the old and the new limits of concurrent queries both apply, each to its own
// queries.
func (s *Server) queryAPI() (*queryAPI, error) {
	want := s.queryLimitsNow()
	if cur := s.queries.current.Load(); cur != nil && cur.limits == want {
		return cur, nil
	}
	s.queries.mu.Lock()
	defer s.queries.mu.Unlock()
	if cur := s.queries.current.Load(); cur != nil && cur.limits == want {
		return cur, nil
	}
	o := s.queries.base
	o.MaxSamples, o.MaxConcurrency, o.MaxSeriesPerSelect, o.Timeout = want.maxSamples, want.maxConcurrency, want.maxSeriesPerSelect, want.timeout
	rec := &recordingRegisterer{}
	o.Registerer = rec
	a, err := api.New(s.queryable, &o)
	if err != nil {
		return nil, err
	}
	q := &queryAPI{limits: want, api: a, mux: http.NewServeMux()}
	a.Register(q.mux)
	s.queries.metrics.swap(rec.collectors)
	s.queries.current.Store(q)
	return q, nil
}

// serveQuery serves a request of the query API with the API of the limits in force.
func (s *Server) serveQuery(w http.ResponseWriter, r *http.Request) {
	q, err := s.queryAPI()
	if err != nil { // limits Parse checked: not expected
		s.log.Error("making the query API", "err", err)
		http.Error(w, "the query limits cannot be applied: "+err.Error(), http.StatusInternalServerError)
		return
	}
	_, pattern := q.mux.Handler(r)
	if pattern == "" {
		pattern = "other"
	}
	if s.opts.SlowQueries > 0 {
		s.serveSlowQueryLogged(w, r, pattern, s.instrument(pattern, q.mux))
		return
	}
	s.instrument(pattern, q.mux).ServeHTTP(w, r)
}

// isQueryPath reports a path of the query API.
func isQueryPath(path string) bool { return strings.HasPrefix(path, "/api/v1/") }

// recordingRegisterer keeps the collectors an engine registers, for engineMetrics.
type recordingRegisterer struct{ collectors []prometheus.Collector }

func (r *recordingRegisterer) Register(c prometheus.Collector) error {
	r.collectors = append(r.collectors, c)
	return nil
}

func (r *recordingRegisterer) MustRegister(cs ...prometheus.Collector) {
	r.collectors = append(r.collectors, cs...)
}

func (r *recordingRegisterer) Unregister(prometheus.Collector) bool { return false }

// engineMetrics is the prometheus_engine_* metrics of the current engine, registered once:
// every engine registers the same metrics, which a registry takes only once. A new engine's
// counters start at 0.
type engineMetrics struct {
	mu         sync.Mutex
	collectors []prometheus.Collector
}

func (m *engineMetrics) swap(cs []prometheus.Collector) {
	m.mu.Lock()
	m.collectors = cs
	m.mu.Unlock()
}

func (m *engineMetrics) current() []prometheus.Collector {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.collectors
}

func (m *engineMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.current() {
		c.Describe(ch)
	}
}

func (m *engineMetrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.current() {
		c.Collect(ch)
	}
}
