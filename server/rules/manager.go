package rules

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/config"
	"github.com/prometheus/prometheus/discovery/targetgroup"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/notifier"
	"github.com/prometheus/prometheus/rules"
	"github.com/prometheus/prometheus/storage"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/server/api"
)

// Defaults of Options: Prometheus' own (its flags and global configuration).
const (
	// DefaultEvaluationInterval is global.evaluation_interval's default.
	DefaultEvaluationInterval = time.Minute
	// DefaultOutageTolerance is --rules.alert.for-outage-tolerance's: an alert whose last
	// ALERTS_FOR_STATE sample is older is not restored.
	DefaultOutageTolerance = time.Hour
	// DefaultForGracePeriod is --rules.alert.for-grace-period's: a restored alert fires no
	// sooner than this after the restore.
	DefaultForGracePeriod = 10 * time.Minute
	// DefaultResendDelay is --rules.alert.resend-delay's: how often a firing alert is sent
	// again.
	DefaultResendDelay = time.Minute
	// DefaultNotificationQueueCapacity is --alertmanager.notification-queue-capacity's.
	DefaultNotificationQueueCapacity = 10000
	// DefaultAlertmanagerTimeout is an alertmanager configuration's timeout default.
	DefaultAlertmanagerTimeout = 10 * time.Second
)

// Options configure a Manager. Zero values mean the defaults.
type Options struct {
	// Files are the rule files, each a path or a glob, as Prometheus' rule_files.
	Files []string
	// QueryFunc evaluates the rules' expressions (required): package server gives the
	// tenant's query engine over its Queryable, with its query limits.
	QueryFunc rules.QueryFunc
	// Queryable is what the restore of `for` state reads ALERTS_FOR_STATE from
	// (required): the same as QueryFunc's.
	Queryable storage.Queryable
	// Writer stores the recorded series, ALERTS and ALERTS_FOR_STATE (required).
	Writer Writer

	// EvaluationInterval is the interval of the groups that set none (default 1m).
	EvaluationInterval time.Duration
	// QueryOffset is the query offset of the groups that set none (global
	// rule_query_offset; default 0).
	QueryOffset time.Duration
	// ExternalLabels are added to every alert sent, and are $externalLabels in templates.
	ExternalLabels labels.Labels
	// ExternalURL is the alerts' generator URL's base, and $externalURL in templates
	// (default http://localhost:9201).
	ExternalURL string

	// Alertmanagers are the URLs of the Alertmanagers to send alerts to (API v2): each
	// http(s)://host[:port][/path prefix], basic auth from its user information. None:
	// alerts are evaluated, recorded (ALERTS) and shown, and sent nowhere.
	Alertmanagers []string
	// Alerting, if set, is Prometheus' alerting section (LoadAlerting): more Alertmanagers
	// (static_configs), with Prometheus' options of each, and alert_relabel_configs.
	Alerting *config.AlertingConfig
	// AlertmanagerTimeout bounds a request to an Alertmanager of Alertmanagers (default 10s).
	AlertmanagerTimeout time.Duration
	// NotificationQueueCapacity bounds the alerts waiting to be sent (default 10,000).
	NotificationQueueCapacity int
	// Tenant, if set, is sent with every notification as the X-Scope-OrgID header (package
	// server sets it for tenants other than the default one).
	Tenant string

	// OutageTolerance, ForGracePeriod and ResendDelay: as Prometheus'
	// --rules.alert.for-outage-tolerance, --rules.alert.for-grace-period and
	// --rules.alert.resend-delay (defaults 1h, 10m, 1m).
	OutageTolerance, ForGracePeriod, ResendDelay time.Duration

	// EvalIteration, if set, runs each evaluation of a group in place of
	// rules.DefaultEvalIterationFunc, which it should call to evaluate (and may skip: the
	// seam for a lease deciding which of several servers evaluates a group).
	EvalIteration rules.GroupEvalIterationFunc
	// Lease, if set, makes one server of many evaluate each group: the one holding the
	// group's lease in Lease.Table (see LeaseOptions; EvalIteration runs for the groups
	// this manager holds). nil: every manager evaluates every group.
	Lease *LeaseOptions
	// SharedReads, if set, lets the rules of an evaluation of a group share their reads
	// (see SharedReads): QueryFunc's engine should read through its Queryable.
	SharedReads *SharedReads
	// Registerer, if set, receives Prometheus' prometheus_rule_* and
	// prometheus_notifications_* metrics.
	Registerer prometheus.Registerer
	// Logger (default: discarded).
	Logger *slog.Logger
}

// Manager evaluates rule groups with Prometheus' rule manager and sends their alerts with
// Prometheus' notifier: while Run runs, each group is evaluated at its interval, at
// times offset by a hash of its file and name as in Prometheus, its results written through
// Options.Writer, its alerts sent to Options.Alertmanagers.
type Manager struct {
	opts      Options
	log       *slog.Logger
	metrics   *rules.Metrics
	notifyReg *swappable
	amConfig  *config.Config
	amTargets map[string][]*targetgroup.Group
	loader    loader
	leases    *leases // nil: no Options.Lease

	// do, if set, sends the notifier's requests (tests).
	do func(context.Context, *http.Client, *http.Request) (*http.Response, error)

	mu      sync.Mutex
	files   []string // the files of the rules loaded
	rm      *rules.Manager
	running bool
}

// New checks the options and loads the rule files (Options.Files): a file that does not
// load is an error wrapping ErrBadRules and naming it. Bad options give an error wrapping
// tablets.ErrInvalidOptions. Nothing is evaluated before Run.
func New(opts *Options) (*Manager, error) {
	o := Options{}
	if opts != nil {
		o = *opts
	}
	switch {
	case o.QueryFunc == nil || o.Queryable == nil || o.Writer == nil:
		return nil, fmt.Errorf("rules: %w: QueryFunc, Queryable and Writer are required", tablets.ErrInvalidOptions)
	case o.EvaluationInterval < 0 || o.QueryOffset < 0 || o.AlertmanagerTimeout < 0 || o.NotificationQueueCapacity < 0 ||
		o.OutageTolerance < 0 || o.ForGracePeriod < 0 || o.ResendDelay < 0:
		return nil, fmt.Errorf("rules: %w: negative interval, offset, timeout, capacity or delay", tablets.ErrInvalidOptions)
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&o.EvaluationInterval, DefaultEvaluationInterval)
	def(&o.AlertmanagerTimeout, DefaultAlertmanagerTimeout)
	def(&o.OutageTolerance, DefaultOutageTolerance)
	def(&o.ForGracePeriod, DefaultForGracePeriod)
	def(&o.ResendDelay, DefaultResendDelay)
	if o.NotificationQueueCapacity == 0 {
		o.NotificationQueueCapacity = DefaultNotificationQueueCapacity
	}
	if o.ExternalURL == "" {
		o.ExternalURL = "http://localhost:9201"
	}
	if u, err := url.Parse(o.ExternalURL); err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("rules: %w: ExternalURL %q is not an absolute URL", tablets.ErrInvalidOptions, o.ExternalURL)
	}
	if o.EvalIteration == nil {
		o.EvalIteration = rules.DefaultEvalIterationFunc
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if err := o.ExternalLabels.Validate(func(l labels.Label) error {
		if l.Name == "" || l.Value == "" || !model.LabelName(l.Name).IsValid() {
			return fmt.Errorf("external label %q=%q: a valid name and a value are required", l.Name, l.Value)
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("rules: %w: %v", tablets.ErrInvalidOptions, err)
	}
	amConfig, amTargets, err := alertmanagerConfigs(o.Alertmanagers, o.Alerting, o.AlertmanagerTimeout, o.Tenant)
	if err != nil {
		return nil, err
	}
	extURL, _ := url.Parse(o.ExternalURL)
	var leases *leases
	if o.Lease != nil {
		lo := *o.Lease
		if leases, err = newLeases(&lo, &o, extURL); err != nil {
			return nil, err
		}
		o.EvalIteration = leases.evalIteration
	}
	lag := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "tablets_rule_group_evaluation_lag_seconds",
		Help:    "Time from a rule group evaluation's timestamp (its slot) to the end of the evaluation here: its queries done, its results written.",
		Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}})
	o.EvalIteration = lagged(o.EvalIteration, lag)
	if o.SharedReads != nil {
		o.EvalIteration = sharing(o.EvalIteration)
	}
	m := &Manager{opts: o, log: o.Logger, amConfig: withExternalLabels(amConfig, o.ExternalLabels), amTargets: amTargets,
		notifyReg: &swappable{}, leases: leases}
	m.metrics = rules.NewGroupMetrics(o.Registerer)
	if o.Registerer != nil {
		if err := o.Registerer.Register(lag); err != nil {
			return nil, fmt.Errorf("rules: registering the evaluation lag: %w", err)
		}
		if o.SharedReads != nil {
			if err := o.SharedReads.register(o.Registerer); err != nil {
				return nil, fmt.Errorf("rules: registering the shared reads' metrics: %w", err)
			}
		}
		if err := o.Registerer.Register(m.notifyReg); err != nil {
			return nil, fmt.Errorf("rules: registering the notifier's metrics: %w", err)
		}
	}
	files, groups, err := m.read()
	if err != nil {
		return nil, err
	}
	m.loader.set(groups)
	m.files = files
	return m, nil
}

// read expands Options.Files and parses what they name.
func (m *Manager) read() ([]string, map[string]*rulefmt.RuleGroups, error) {
	files, err := ExpandFiles(m.opts.Files)
	if err != nil {
		return nil, nil, err
	}
	groups, err := ParseFiles(files)
	if err != nil {
		return nil, nil, err
	}
	return files, groups, nil
}

// Files returns the rule files of the rules loaded.
func (m *Manager) Files() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.files)
}

// Reload reads the rule files again (the globs expanded anew) and, if every one loads,
// replaces the rules with theirs: a group unchanged goes on as it was, a changed one keeps
// its alerts' state, as on a Prometheus reload. If one does not load, the rules stay as
// they were, and the error (wrapping ErrBadRules) names the file.
func (m *Manager) Reload() error {
	files, groups, err := m.read()
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.loader.set(groups)
	m.files = files
	if m.running {
		if err := m.update(m.rm); err != nil {
			return err
		}
		m.releaseRemoved()
	}
	m.log.Info("rule files loaded", "files", len(files), "groups", groupCount(groups))
	return nil
}

func groupCount(groups map[string]*rulefmt.RuleGroups) int {
	n := 0
	for _, g := range groups {
		n += len(g.Groups)
	}
	return n
}

// update gives rm the rules loaded. Called with m.mu held.
func (m *Manager) update(rm *rules.Manager) error {
	if err := rm.Update(m.opts.EvaluationInterval, m.identifiers(), m.opts.ExternalLabels, m.opts.ExternalURL, m.opts.EvalIteration); err != nil {
		// The loader serves only groups that parsed: a rule that passes rulefmt's checks
		// and fails the manager's.
		return fmt.Errorf("%w: %v", ErrBadRules, err)
	}
	return nil
}

// ErrRunning is Run's error when the manager already runs.
var ErrRunning = errors.New("rules: the manager already runs")

// Run evaluates the rules until ctx is done, then stops the evaluations (those under way
// are cancelled), sends the alerts still queued, and returns nil. Each Run starts as a
// restarted Prometheus does: every alerting rule restores the state of its alerts from
// ALERTS_FOR_STATE (after the group's second evaluation, as Prometheus), and the notifier
// starts with an empty queue.
func (m *Manager) Run(ctx context.Context) error {
	m.mu.Lock()
	if m.running {
		m.mu.Unlock()
		return ErrRunning
	}
	rec := &recorder{}
	nm := notifier.NewManager(&notifier.Options{QueueCapacity: m.opts.NotificationQueueCapacity, DrainOnShutdown: true,
		Registerer: rec, Do: m.do}, m.log.With("part", "notifier"))
	m.notifyReg.swap(rec.collectors)
	if err := nm.ApplyConfig(m.amConfig); err != nil {
		m.mu.Unlock()
		return fmt.Errorf("rules: the notifier's configuration: %w", err) // New checked it
	}
	tsets := make(chan map[string][]*targetgroup.Group, 1)
	tsets <- m.amTargets
	evalCtx, cancelEval := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelEval()
	extURL, _ := url.Parse(m.opts.ExternalURL)
	rm := rules.NewManager(&rules.ManagerOptions{
		ExternalURL:     extURL,
		QueryFunc:       m.opts.QueryFunc,
		NotifyFunc:      rules.SendAlerts(nm, m.opts.ExternalURL),
		Context:         evalCtx,
		Appendable:      appendable{m.opts.Writer},
		Queryable:       m.restoreQueryable(),
		Logger:          m.log.With("part", "rule manager"),
		OutageTolerance: m.opts.OutageTolerance,
		ForGracePeriod:  m.opts.ForGracePeriod,
		ResendDelay:     m.opts.ResendDelay,
		GroupLoader:     &m.loader,
		Metrics:         m.metrics,
		DefaultRuleQueryOffset: func() time.Duration {
			return m.opts.QueryOffset
		},
	})
	if err := m.update(rm); err != nil {
		m.mu.Unlock()
		return err
	}
	m.rm, m.running = rm, true
	m.mu.Unlock()

	notified := make(chan struct{})
	go func() {
		defer close(notified)
		nm.Run(tsets)
	}()
	evaluated := make(chan struct{})
	go func() {
		defer close(evaluated)
		rm.Run()
	}()
	<-ctx.Done()
	m.mu.Lock()
	m.running = false
	m.mu.Unlock()
	cancelEval()
	rm.Stop()
	<-evaluated
	if m.leases != nil {
		releaseCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		m.leases.release(releaseCtx, nil)
		cancel()
	}
	nm.Stop()
	<-notified
	return nil
}

// ruleGroups returns the groups of the last Run's manager (none before one).
func (m *Manager) ruleGroups() []*rules.Group {
	m.mu.Lock()
	rm := m.rm
	m.mu.Unlock()
	if rm == nil {
		return nil
	}
	return rm.RuleGroups()
}

// RuleGroups returns the groups and the state of their rules, for /api/v1/rules and
// /api/v1/alerts (api.Rules). Before the first Run it lists none.
func (m *Manager) RuleGroups(context.Context) []api.RuleGroup {
	groups := m.ruleGroups()
	out := make([]api.RuleGroup, 0, len(groups))
	for _, g := range groups {
		ag := apiGroup(g)
		if m.leases != nil && !m.leases.holds(g.File(), g.Name()) {
			// Another server evaluates it: its state as that server recorded it.
			if st, ok := m.leases.holderState(g.File(), g.Name()); ok {
				ag, _ = withState(ag, st)
			} else {
				ag = notHeld(ag)
			}
		}
		out = append(out, ag)
	}
	return out
}

// apiGroup is g and the state of its rules, as this manager knows them.
func apiGroup(g *rules.Group) api.RuleGroup {
	ag := api.RuleGroup{Name: g.Name(), File: g.File(), Interval: g.Interval(), Limit: g.Limit(),
		EvaluationTime: g.GetEvaluationTime(), LastEvaluation: g.GetLastEvaluation()}
	for _, r := range g.Rules() {
		ar := api.Rule{Name: r.Name(), Query: r.Query().String(), Labels: r.Labels(), Health: string(r.Health()),
			EvaluationTime: r.GetEvaluationDuration(), LastEvaluation: r.GetEvaluationTimestamp()}
		if err := r.LastError(); err != nil {
			ar.LastError = err.Error()
		}
		switch r := r.(type) {
		case *rules.AlertingRule:
			ar.Type, ar.State, ar.Annotations = api.RuleAlerting, r.State().String(), r.Annotations()
			ar.Duration, ar.KeepFiringFor = r.HoldDuration(), r.KeepFiringFor()
			for _, a := range r.ActiveAlerts() {
				ar.Alerts = append(ar.Alerts, api.Alert{Labels: a.Labels, Annotations: a.Annotations, State: a.State.String(),
					ActiveAt: a.ActiveAt, KeepFiringSince: a.KeepFiringSince, Value: a.Value})
			}
		case *rules.RecordingRule:
			ar.Type = api.RuleRecording
		default:
			continue
		}
		ag.Rules = append(ag.Rules, ar)
	}
	return ag
}

// lagged is iterate, observing into lag each evaluation it made: the time from the
// evaluation's timestamp to its end. An iteration that skipped the group (a server without
// its lease) leaves the group's last evaluation timestamp before ts: it is not observed.
func lagged(iterate rules.GroupEvalIterationFunc, lag prometheus.Histogram) rules.GroupEvalIterationFunc {
	return func(ctx context.Context, g *rules.Group, ts time.Time) {
		iterate(ctx, g, ts)
		if g.GetLastEvalTimestamp().Equal(ts) {
			lag.Observe(time.Since(ts).Seconds())
		}
	}
}
