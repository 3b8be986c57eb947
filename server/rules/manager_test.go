package rules

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/rules"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/server/api"
)

const testRules = `
groups:
  - name: g
    interval: 10s
    rules:
      - record: job:x:double
        expr: x * 2
        labels:
          recorded: "yes"
      - alert: High
        expr: x > 5
        for: 30s
        keep_firing_for: 20s
        labels:
          severity: page
        annotations:
          summary: "{{ $labels.instance }} is at {{ $value }} ({{ $externalLabels.cluster }})"
`

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	return p
}

// testManager makes a manager over store, with an engine of Prometheus' defaults.
func testManager(t *testing.T, store *memStore, am *fakeAlertmanager, reg prometheus.Registerer, files ...string) *Manager {
	t.Helper()
	engine := promql.NewEngine(promql.EngineOpts{MaxSamples: 1e6, Timeout: time.Minute, LookbackDelta: 5 * time.Minute})
	m, err := New(&Options{
		Files:          files,
		QueryFunc:      rules.EngineQueryFunc(engine, store),
		Queryable:      store,
		Writer:         store,
		ExternalLabels: labels.FromStrings("cluster", "eu1"),
		ExternalURL:    "http://tablets.example:9201",
		Alertmanagers:  []string{"http://am.example:9093/prefix"},
		Tenant:         "team1",
		Registerer:     reg,
	})
	require.NoError(t, err)
	m.do = am.do
	return m
}

// feed writes x{instance="a"} every 5 s from now for d: value v(t since start).
func feed(store *memStore, start time.Time, d time.Duration, v func(time.Duration) float64) {
	for at := time.Duration(0); at <= d; at += 5 * time.Second {
		store.add(labels.FromStrings("__name__", "x", "instance", "a"), memSample{t: start.Add(at).UnixMilli(), f: v(at)})
	}
}

func TestManagerRecordsAndAlerts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		file := writeFile(t, dir, "r.yml", testRules)
		store, am, reg := newMemStore(), &fakeAlertmanager{}, prometheus.NewRegistry()
		m := testManager(t, store, am, reg, filepath.Join(dir, "*.yml"))
		require.Equal(t, []string{file}, m.Files())
		start := time.Now()
		// x is 10 for 100 s, then 0.
		feed(store, start, 200*time.Second, func(at time.Duration) float64 {
			if at < 100*time.Second {
				return 10
			}
			return 0
		})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- m.Run(ctx) }()
		defer func() {
			cancel()
			require.NoError(t, <-done)
		}()
		time.Sleep(175 * time.Second)
		synctest.Wait()

		groups := m.RuleGroups(t.Context())
		require.Len(t, groups, 1)
		require.Equal(t, "g", groups[0].Name)
		require.Equal(t, file, groups[0].File)
		require.Equal(t, 10*time.Second, groups[0].Interval)
		require.Len(t, groups[0].Rules, 2)
		require.Equal(t, api.RuleRecording, groups[0].Rules[0].Type)
		require.Equal(t, "ok", groups[0].Rules[0].Health)
		alert := groups[0].Rules[1]
		require.Equal(t, api.RuleAlerting, alert.Type)
		require.Equal(t, "inactive", alert.State)
		require.Equal(t, 30*time.Second, alert.Duration)
		require.Equal(t, 20*time.Second, alert.KeepFiringFor)

		// The recording rule: at the group's times, every 10 s, 2x, with its label.
		rec := store.samples(labels.MustNewMatcher(labels.MatchEqual, "__name__", "job:x:double"))
		require.Len(t, rec, 1)
		var recorded []memSample
		for key, ss := range rec {
			require.Equal(t, `{__name__="job:x:double", instance="a", recorded="yes"}`, key)
			recorded = ss
		}
		require.GreaterOrEqual(t, len(recorded), 15)
		for i, s := range recorded {
			if i > 0 {
				require.Equal(t, int64(10_000), s.t-recorded[i-1].t, "evaluations 10 s apart")
			}
			want := 20.0
			if time.UnixMilli(s.t).Sub(start) >= 100*time.Second {
				want = 0
			}
			require.Equal(t, want, s.f, "at %v", time.UnixMilli(s.t).Sub(start))
		}

		// ALERTS: pending, then firing 30 s after it became active, until 20 s after the
		// condition ended; then a staleness marker. ALERTS_FOR_STATE holds the active time.
		alerts := store.samples(labels.MustNewMatcher(labels.MatchEqual, "__name__", "ALERTS"))
		pending := alerts[`{__name__="ALERTS", alertname="High", alertstate="pending", instance="a", severity="page"}`]
		firing := alerts[`{__name__="ALERTS", alertname="High", alertstate="firing", instance="a", severity="page"}`]
		require.NotEmpty(t, pending)
		require.NotEmpty(t, firing)
		// Active from the first evaluation; its ALERTS are written from the third, once
		// the state is restored (after the second, as Prometheus).
		activeAt := recorded[0].t
		require.Equal(t, recorded[2].t, pending[0].t)
		require.Equal(t, activeAt+30_000, firing[0].t)
		require.True(t, value.IsStaleNaN(pending[len(pending)-1].f), "pending ends with a staleness marker")
		lastFiring := firing[len(firing)-1]
		require.True(t, value.IsStaleNaN(lastFiring.f))
		condEnd := recorded[0].t // the first evaluation at or after 100 s
		for _, s := range recorded {
			if s.f == 0 {
				condEnd = s.t
				break
			}
		}
		require.Equal(t, condEnd+20_000, lastFiring.t, "kept firing for 20 s after the condition ended")
		fs := store.samples(labels.MustNewMatcher(labels.MatchEqual, "__name__", "ALERTS_FOR_STATE"))
		forState := fs[`{__name__="ALERTS_FOR_STATE", alertname="High", instance="a", severity="page"}`]
		require.NotEmpty(t, forState)
		require.Equal(t, float64(activeAt/1000), forState[0].f, "ALERTS_FOR_STATE is the active time, in seconds")

		// Notifications: firing with the labels, templates and external labels; then
		// resolved (endsAt the resolution time).
		posted := am.posted()
		require.NotEmpty(t, posted)
		first := posted[0]
		require.Equal(t, map[string]string{"alertname": "High", "instance": "a", "severity": "page", "cluster": "eu1"}, first.Labels)
		require.Equal(t, map[string]string{"summary": "a is at 10 (eu1)"}, first.Annotations)
		require.Equal(t, "/prefix/api/v2/alerts", first.Path)
		require.Equal(t, time.UnixMilli(firing[0].t).UTC(), first.StartsAt.UTC())
		require.True(t, strings.HasPrefix(first.GeneratorURL, "http://tablets.example:9201/graph?g0.expr="), first.GeneratorURL)
		last := posted[len(posted)-1]
		require.Equal(t, time.UnixMilli(lastFiring.t).UTC(), last.EndsAt.UTC(), "the resolved notification")

		// Prometheus' metrics, with their names.
		key := file + ";g"
		require.InDelta(t, 2*float64(len(recorded)), testutil.ToFloat64(m.metrics.EvalTotal.WithLabelValues(key)), 2)
		require.Equal(t, 0.0, testutil.ToFloat64(m.metrics.EvalFailures.WithLabelValues(key)))
		names := map[string]bool{}
		mfs, err := reg.Gather()
		require.NoError(t, err)
		for _, mf := range mfs {
			names[mf.GetName()] = true
		}
		for _, n := range []string{"prometheus_rule_evaluations_total", "prometheus_rule_group_last_evaluation_timestamp_seconds",
			"prometheus_rule_group_interval_seconds", "prometheus_notifications_sent_total", "prometheus_notifications_queue_capacity"} {
			require.True(t, names[n], "metric %s", n)
		}
		// The evaluation lag: one observation an evaluation.
		var lagged uint64
		var iterations float64
		for _, mf := range mfs {
			switch mf.GetName() {
			case "tablets_rule_group_evaluation_lag_seconds":
				lagged = mf.GetMetric()[0].GetHistogram().GetSampleCount()
			case "prometheus_rule_group_iterations_total":
				iterations = mf.GetMetric()[0].GetCounter().GetValue()
			}
		}
		require.Positive(t, lagged)
		require.InDelta(t, iterations, float64(lagged), 1, "an observation of the lag an evaluation")
	})
}

// A restarted manager restores the state of a firing alert from ALERTS_FOR_STATE: it does
// not start over from pending. (As in Prometheus, only alerts whose `for` is at least the
// grace period, 10m by default, are restored: the others start over.)
func TestManagerRestoresForState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		writeFile(t, dir, "r.yml", strings.Replace(testRules, "for: 30s", "for: 15m", 1))
		store, am := newMemStore(), &fakeAlertmanager{}
		m := testManager(t, store, am, nil, filepath.Join(dir, "r.yml"))
		start := time.Now()
		feed(store, start, 40*time.Minute, func(time.Duration) float64 { return 10 })

		run := func(d time.Duration) {
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error)
			go func() { done <- m.Run(ctx) }()
			time.Sleep(d)
			cancel()
			require.NoError(t, <-done)
		}
		activeOf := func() time.Time {
			for _, a := range m.RuleGroups(t.Context())[0].Rules[1].Alerts {
				return a.ActiveAt
			}
			return time.Time{}
		}
		run(20 * time.Minute)
		active := activeOf()
		require.False(t, active.IsZero())
		require.Equal(t, "firing", m.RuleGroups(t.Context())[0].Rules[1].State)

		time.Sleep(5 * time.Minute) // down
		restarted := time.Now()
		run(45 * time.Second) // the second evaluation restores; the next fires
		require.Equal(t, "firing", m.RuleGroups(t.Context())[0].Rules[1].State)
		require.Equal(t, active.Truncate(time.Second), activeOf(), "the active time restored (to the second, as ALERTS_FOR_STATE holds it)")
		alerts := store.samples(labels.MustNewMatcher(labels.MatchEqual, "alertstate", "pending"))
		for _, ss := range alerts {
			for _, s := range ss {
				if !value.IsStaleNaN(s.f) {
					require.Less(t, s.t, restarted.UnixMilli(), "no pending sample after the restart")
				}
			}
		}
		require.NotEmpty(t, am.posted())
	})
}

func TestManagerBadFiles(t *testing.T) {
	dir := t.TempDir()
	good := writeFile(t, dir, "good.yml", testRules)
	bad := writeFile(t, dir, "bad.yml", "groups:\n  - name: b\n    rules:\n      - record: y\n        expr: sum(\n")
	store := newMemStore()
	engine := promql.NewEngine(promql.EngineOpts{MaxSamples: 1e6, Timeout: time.Minute})
	opts := &Options{Files: []string{good, bad}, QueryFunc: rules.EngineQueryFunc(engine, store), Queryable: store, Writer: store}
	_, err := New(opts)
	require.ErrorIs(t, err, ErrBadRules)
	require.Contains(t, err.Error(), bad)
	require.NotContains(t, err.Error(), good+":")

	for name, content := range map[string]string{
		"yaml.yml":     "groups: [",
		"unknown.yml":  "groups:\n  - name: a\n    rulez: []\n",
		"template.yml": "groups:\n  - name: a\n    rules:\n      - alert: A\n        expr: up\n        annotations:\n          x: '{{ .Nope '\n",
		"dup.yml":      "groups:\n  - name: a\n    rules: []\n  - name: a\n    rules: []\n",
		"both.yml":     "groups:\n  - name: a\n    rules:\n      - alert: A\n        record: b\n        expr: up\n",
	} {
		p := writeFile(t, dir, name, content)
		_, err := New(&Options{Files: []string{p}, QueryFunc: opts.QueryFunc, Queryable: store, Writer: store})
		require.ErrorIs(t, err, ErrBadRules, name)
		require.Contains(t, err.Error(), p, name)
	}
	_, err = New(&Options{Files: []string{"["}, QueryFunc: opts.QueryFunc, Queryable: store, Writer: store})
	require.ErrorIs(t, err, ErrBadRules)

	// Reload: a bad file keeps the rules loaded.
	m, err := New(&Options{Files: []string{filepath.Join(dir, "good*.yml")}, QueryFunc: opts.QueryFunc, Queryable: store, Writer: store})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(good, []byte("groups: ["), 0o644))
	err = m.Reload()
	require.ErrorIs(t, err, ErrBadRules)
	require.Equal(t, []string{good}, m.Files())
	groups, errs := m.loader.Load(good, false)
	require.Empty(t, errs)
	require.Len(t, groups.Groups, 1)

	for _, o := range []*Options{
		{QueryFunc: opts.QueryFunc, Queryable: store},
		{QueryFunc: opts.QueryFunc, Queryable: store, Writer: store, Alertmanagers: []string{"am:9093"}},
		{QueryFunc: opts.QueryFunc, Queryable: store, Writer: store, Alertmanagers: []string{"ftp://am"}},
		{QueryFunc: opts.QueryFunc, Queryable: store, Writer: store, ExternalURL: "nope"},
		{QueryFunc: opts.QueryFunc, Queryable: store, Writer: store, EvaluationInterval: -1},
		{QueryFunc: opts.QueryFunc, Queryable: store, Writer: store, ExternalLabels: labels.FromStrings("a", "")},
	} {
		_, err := New(o)
		require.True(t, errors.Is(err, tablets.ErrInvalidOptions), "%+v: %v", o, err)
	}
}

// The notifier posts to a real Alertmanager endpoint over HTTP: API v2 under the URL's path
// prefix, basic auth from the URL, the tenant's header.
// amPost is a request an Alertmanager received: its path, tenant header, basic auth and
// alerts.
type amPost struct {
	path, tenant, user, pass string
	alerts                   []postedAlert
}

// alertmanagerServer is an HTTP server that records the alerts posted to it.
func alertmanagerServer(t *testing.T) (*httptest.Server, chan amPost) {
	posts := make(chan amPost, 100)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var as []postedAlert
		if err := json.NewDecoder(r.Body).Decode(&as); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		user, pass, _ := r.BasicAuth()
		posts <- amPost{path: r.URL.Path, tenant: r.Header.Get(TenantHeader), user: user, pass: pass, alerts: as}
	}))
	return srv, posts
}

func TestManagerNotifiesOverHTTP(t *testing.T) {
	srv, posts := alertmanagerServer(t)
	defer srv.Close()
	dir := t.TempDir()
	file := writeFile(t, dir, "r.yml", "groups:\n  - name: fast\n    interval: 1s\n    rules:\n      - alert: Always\n        expr: vector(1)\n")
	store := newMemStore()
	engine := promql.NewEngine(promql.EngineOpts{MaxSamples: 1e6, Timeout: time.Minute})
	u, err := url.Parse(srv.URL)
	require.NoError(t, err)
	m, err := New(&Options{Files: []string{file}, QueryFunc: rules.EngineQueryFunc(engine, store), Queryable: store, Writer: store,
		Alertmanagers: []string{"http://u:p@" + u.Host + "/am/"}, Tenant: "team1"})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	defer func() {
		cancel()
		require.NoError(t, <-done)
	}()
	select {
	case p := <-posts:
		require.Equal(t, "/am/api/v2/alerts", p.path)
		require.Equal(t, "team1", p.tenant)
		require.Equal(t, "u", p.user)
		require.Equal(t, "p", p.pass)
		require.Len(t, p.alerts, 1)
		require.Equal(t, map[string]string{"alertname": "Always"}, p.alerts[0].Labels)
	case <-time.After(30 * time.Second):
		t.Fatal("no notification in 30 s")
	}
}
