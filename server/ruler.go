package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/model/rulefmt"
	"gopkg.in/yaml.v3"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/server/internal/redact"
	"github.com/seed71701133/tablets/server/limits"
	"github.com/seed71701133/tablets/server/rules"
)

// Defaults of [RulerOptions].
const (
	// DefaultRulerPollEvery is how often a server reads the generation of a tenant's stored
	// rule groups (one point read), and loads them again when it changed.
	DefaultRulerPollEvery = 15 * time.Second
	// DefaultRulerMaxBodyBytes bounds the body of a set: the YAML of one rule group.
	DefaultRulerMaxBodyBytes = 512 << 10
)

// RulerOptions configure the ruler configuration API of Cortex and Mimir (what `mimirtool
// rules` drives) and the evaluation of the rule groups it stores, in the account, in the
// catalog table of the tenant's database (package rules, Store). Zero values mean the
// defaults. See docs/rules.md, "Rule groups in the account".
type RulerOptions struct {
	// PollEvery is how often the server reads the generation of the stored groups, and
	// loads them into the tenant's rule manager when it changed: a change another server
	// made is evaluated here within about this (default DefaultRulerPollEvery). A change
	// made through this server is loaded at once.
	PollEvery time.Duration
	// MaxBodyBytes bounds the body of a set, the YAML of one group (default
	// DefaultRulerMaxBodyBytes); a larger one is answered 413.
	MaxBodyBytes int64
}

// Paths of the ruler configuration API. Mimir's (and mimirtool's by default) is under
// rulerConfigPrefix; Cortex's older one, which mimirtool uses with --use-legacy-routes, is
// under /api/v1/rules, whose GET without a namespace stays Prometheus' /api/v1/rules.
const (
	rulerConfigPrefix = "/prometheus/config/v1/rules"
	rulerLegacyPrefix = "/api/v1/rules/"
)

// isRulerSet reports a set of the ruler API: what creates a tenant's database.
func isRulerSet(r *http.Request) bool {
	if r.Method != http.MethodPost || !isRulerPath(r.URL.Path) {
		return false
	}
	rr, err := parseRulerPath(r)
	return err == nil && rr.parts == 1
}

// isRulerPath reports the paths of the ruler configuration API.
func isRulerPath(path string) bool {
	if rest, ok := strings.CutPrefix(path, rulerConfigPrefix); ok {
		return rest == "" || rest[0] == '/'
	}
	return strings.HasPrefix(path, rulerLegacyPrefix)
}

// ruler serves a tenant's ruler configuration API over its store, and loads the stored
// groups into the tenant's rule manager (run).
type ruler struct {
	s     *Server
	store *rules.Store
	opts  RulerOptions
	kick  chan struct{} // a change made here: load now

	loaded, failures prometheus.Counter
	groups           prometheus.Gauge
}

// newRuler makes the ruler of s, whose rule manager is made, and registers its metrics.
func newRuler(s *Server, o RulerOptions) (*ruler, error) {
	if o.PollEvery < 0 || o.MaxBodyBytes < 0 {
		return nil, fmt.Errorf("server: %w: Ruler.PollEvery and Ruler.MaxBodyBytes must not be negative", tablets.ErrInvalidOptions)
	}
	if o.PollEvery == 0 {
		o.PollEvery = DefaultRulerPollEvery
	}
	if o.MaxBodyBytes == 0 {
		o.MaxBodyBytes = DefaultRulerMaxBodyBytes
	}
	store, err := rules.NewStore(s.db.CatalogClient())
	if err != nil {
		return nil, err
	}
	r := &ruler{s: s, store: store, opts: o, kick: make(chan struct{}, 1),
		loaded: prometheus.NewCounter(prometheus.CounterOpts{Name: "tablets_ruler_config_loads_total",
			Help: "Loads of the stored rule groups into the rule manager: at start, and after each change of their generation."}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{Name: "tablets_ruler_config_load_failures_total",
			Help: "Reads of the stored rule groups' generation or groups that failed, and loads the rule manager refused (retried at the next poll)."}),
		groups: prometheus.NewGauge(prometheus.GaugeOpts{Name: "tablets_ruler_config_rule_groups",
			Help: "Rule groups stored in the account that the rule manager was last given."}),
	}
	s.registry.MustRegister(r.loaded, r.failures, r.groups)
	return r, nil
}

// run loads the stored groups into the rule manager now, and again whenever their
// generation changed, read every PollEvery or at once after a change made here, until ctx
// is done.
func (r *ruler) run(ctx context.Context) {
	tick := time.NewTicker(r.opts.PollEvery)
	defer tick.Stop()
	var last uint64
	loaded := false
	for {
		if gen, err := r.load(ctx, last, loaded); err == nil {
			last, loaded = gen, true
		} else if ctx.Err() == nil {
			r.failures.Inc()
			r.s.log.Warn("loading the stored rule groups", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-r.kick:
		}
	}
}

// load reads the generation and, unless it is last (and a load was made), every group,
// and gives them to the rule manager. It returns the generation loaded. The generation is
// read before the groups: a change made while they are read changes it again, and the next
// poll loads once more.
func (r *ruler) load(ctx context.Context, last uint64, loaded bool) (uint64, error) {
	gen, err := r.store.Generation(ctx)
	if err != nil || (loaded && gen == last) {
		return gen, err
	}
	groups, err := r.store.Load(ctx)
	if err != nil && !errors.Is(err, rules.ErrStoredFormat) {
		return 0, err
	}
	if err != nil { // evaluated without the groups that do not decode
		r.failures.Inc()
		r.s.log.Error("stored rule groups this version does not read are not evaluated", "err", err)
	}
	r.loaded.Inc()
	r.groups.Set(float64(len(groups)))
	if err := r.s.rules.SetStored(groups); err != nil {
		r.failures.Inc()
		r.s.log.Error("the stored rule groups", "err", err)
	}
	if gen > 0 {
		r.s.log.Info("stored rule groups loaded", "generation", gen, "groups", len(groups))
	}
	return gen, nil
}

// changed makes run load at once.
func (r *ruler) changed() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// rulerRequest is a request of the API: its namespace and group, as many as its path gives.
type rulerRequest struct {
	namespace, group string
	parts            int // 0: none, 1: a namespace, 2: a namespace and a group
}

// parseRulerPath reads the namespace and group of a path of the API, each unescaped from
// its segment (mimirtool escapes them with url.PathEscape: a "/" in a name is %2F).
func parseRulerPath(r *http.Request) (rulerRequest, error) {
	p := r.URL.EscapedPath()
	var rest string
	if after, ok := strings.CutPrefix(p, rulerConfigPrefix); ok {
		rest = after
	} else if after, ok := strings.CutPrefix(p, strings.TrimSuffix(rulerLegacyPrefix, "/")); ok {
		rest = after
		if rest == "/" || rest == "" {
			return rulerRequest{}, errors.New("a namespace must be provided in the request")
		}
	}
	if rest == "" {
		return rulerRequest{}, nil
	}
	segs := strings.Split(strings.TrimPrefix(rest, "/"), "/")
	if len(segs) > 2 {
		return rulerRequest{}, fmt.Errorf("%s: not a path of the ruler API (%s[/NAMESPACE[/GROUP]])", p, rulerConfigPrefix)
	}
	req := rulerRequest{parts: len(segs)}
	for i, seg := range segs {
		v, err := url.PathUnescape(seg)
		if err != nil {
			return rulerRequest{}, fmt.Errorf("%s: %v", p, err)
		}
		if v == "" {
			return rulerRequest{}, errors.New("an empty namespace or group name in the path")
		}
		if i == 0 {
			req.namespace = v
		} else {
			req.group = v
		}
	}
	return req, nil
}

// ServeHTTP serves the ruler configuration API, as Mimir's:
//
//	GET    PREFIX                     every group, YAML: namespace -> groups
//	GET    PREFIX/{namespace}         the groups of a namespace, the same YAML
//	GET    PREFIX/{namespace}/{group} a group, YAML (404 if there is none)
//	POST   PREFIX/{namespace}         set a group, the YAML body: 202
//	DELETE PREFIX/{namespace}/{group} delete a group: 202 (404 if there is none)
//	DELETE PREFIX/{namespace}         delete a namespace's groups: 202 (404 if none)
//
// PREFIX is /prometheus/config/v1/rules, or /api/v1/rules with a namespace.
func (r *ruler) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	rr, err := parseRulerPath(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	switch {
	case req.Method == http.MethodGet && rr.parts < 2:
		r.list(w, req, rr.namespace)
	case req.Method == http.MethodGet:
		r.get(w, req, rr.namespace, rr.group)
	case req.Method == http.MethodPost && rr.parts == 1:
		r.set(w, req, rr.namespace)
	case req.Method == http.MethodDelete && rr.parts == 1:
		r.change(w, req, func(ctx context.Context) error { return r.store.DeleteNamespace(ctx, rr.namespace) })
	case req.Method == http.MethodDelete && rr.parts == 2:
		r.change(w, req, func(ctx context.Context) error { return r.store.Delete(ctx, rr.namespace, rr.group) })
	default:
		w.Header().Set("Allow", allowedRulerMethods(rr.parts))
		http.Error(w, fmt.Sprintf("method %s not allowed here", req.Method), http.StatusMethodNotAllowed)
	}
}

func allowedRulerMethods(parts int) string {
	switch parts {
	case 0:
		return "GET"
	case 1:
		return "GET, POST, DELETE"
	}
	return "GET, DELETE"
}

// list answers the groups of namespace ("": all), as Mimir: a YAML map of namespace to its
// groups, {} when there is none.
func (r *ruler) list(w http.ResponseWriter, req *http.Request, namespace string) {
	groups, err := r.store.Groups(req.Context(), namespace)
	if err != nil {
		r.fail(w, err)
		return
	}
	writeRulerYAML(w, namespaceMap(groups))
}

// namespaceMap arranges groups as the API answers them: by namespace, in name order.
func namespaceMap(groups []rules.StoredGroup) map[string][]rulefmt.RuleGroup {
	out := map[string][]rulefmt.RuleGroup{}
	for _, g := range groups {
		out[g.Namespace] = append(out[g.Namespace], g.Group)
	}
	return out
}

func (r *ruler) get(w http.ResponseWriter, req *http.Request, namespace, group string) {
	g, err := r.store.Group(req.Context(), namespace, group)
	if err != nil {
		r.fail(w, err)
		return
	}
	writeRulerYAML(w, g.Group)
}

// writeRulerYAML writes v as the API's YAML (indented by two spaces).
func writeRulerYAML(w http.ResponseWriter, v any) {
	var b strings.Builder
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(v); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	_ = enc.Close()
	w.Header().Set("Content-Type", "application/yaml")
	_, _ = io.WriteString(w, b.String())
}

// set stores the group of the body in namespace: 400 naming what is wrong with a bad one
// (nothing is stored), 413 for a body over MaxBodyBytes, 202 once stored.
func (r *ruler) set(w http.ResponseWriter, req *http.Request, namespace string) {
	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, r.opts.MaxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			http.Error(w, fmt.Sprintf("the rule group is over %d bytes", r.opts.MaxBodyBytes), http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "reading the body: "+err.Error(), http.StatusBadRequest)
		return
	}
	g, err := rules.ParseGroup(body)
	if err != nil {
		r.fail(w, err)
		return
	}
	lim := r.limits()
	r.change(w, req, func(ctx context.Context) error {
		return r.store.Set(ctx, namespace, g, &rules.SetOptions{MaxGroups: lim.RulerMaxRuleGroupsPerTenant, MaxRulesPerGroup: lim.RulerMaxRulesPerRuleGroup})
	})
}

// limits are the tenant's limits in force (none without a configuration).
func (r *ruler) limits() limits.Limits {
	if r.s.opts.Limits == nil {
		return limits.Limits{}
	}
	return r.s.opts.Limits().For(r.s.opts.Tenant)
}

// change makes a change and answers as Mimir: 202 and {"status":"success"}; the rule
// manager of this server loads it at once.
func (r *ruler) change(w http.ResponseWriter, req *http.Request, do func(context.Context) error) {
	if err := do(req.Context()); err != nil {
		var le *rules.LimitError
		if errors.As(err, &le) && r.s.opts.LimitHit != nil {
			r.s.opts.LimitHit(le.Limit)
		}
		r.fail(w, err)
		return
	}
	r.changed()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusAccepted)
	_, _ = io.WriteString(w, `{"status":"success","data":null,"errorType":"","error":""}`)
}

// fail answers an error of the store: 400 for a bad group or name and a limit, 404 for a
// group or namespace that is not there, 500 for the rest (the account's secrets redacted).
func (r *ruler) fail(w http.ResponseWriter, err error) {
	status := http.StatusInternalServerError
	switch {
	case errors.Is(err, rules.ErrBadRules), errors.Is(err, rules.ErrLimit):
		status = http.StatusBadRequest
	case errors.Is(err, rules.ErrGroupNotFound), errors.Is(err, rules.ErrNamespaceNotFound):
		status = http.StatusNotFound
	default:
		r.s.log.Error("ruler API", "err", err)
	}
	http.Error(w, redact.Secrets(err.Error()), status)
}

// emptyRuler answers the API for a tenant whose database does not exist: no group. A set
// opens (creates) the database first and never comes here.
var emptyRuler = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
	rr, err := parseRulerPath(req)
	switch {
	case err != nil:
		http.Error(w, err.Error(), http.StatusBadRequest)
	case req.Method == http.MethodGet && rr.parts < 2:
		writeRulerYAML(w, map[string][]rulefmt.RuleGroup{})
	case req.Method == http.MethodGet || req.Method == http.MethodDelete && rr.parts == 2:
		http.Error(w, fmt.Sprintf("%v: group %q of namespace %q", rules.ErrGroupNotFound, rr.group, rr.namespace), http.StatusNotFound)
	case req.Method == http.MethodDelete && rr.parts == 1:
		http.Error(w, fmt.Sprintf("%v: %q", rules.ErrNamespaceNotFound, rr.namespace), http.StatusNotFound)
	default:
		w.Header().Set("Allow", allowedRulerMethods(rr.parts))
		http.Error(w, fmt.Sprintf("method %s not allowed here", req.Method), http.StatusMethodNotAllowed)
	}
})

// startRuler runs the ruler's loads until ctx is done; wait waits for them to end.
func (s *Server) startRuler(ctx context.Context) (wait func()) {
	if s.ruler == nil {
		return func() {}
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.ruler.run(ctx)
	}()
	return wg.Wait
}
