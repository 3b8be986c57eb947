package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets/server"
	"github.com/seed71701133/tablets/server/rules"
)

// alertSink is an Alertmanager's v2 endpoint recording what it is sent.
type alertSink struct {
	mu    sync.Mutex
	posts []alertPost
}

type alertPost struct {
	Tenant string
	Alerts []struct {
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
		StartsAt    time.Time         `json:"startsAt"`
		EndsAt      time.Time         `json:"endsAt"`
	}
}

func (s *alertSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var p alertPost
	if r.URL.Path != "/api/v2/alerts" || json.NewDecoder(r.Body).Decode(&p.Alerts) != nil {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	p.Tenant = r.Header.Get(rules.TenantHeader)
	s.mu.Lock()
	s.posts = append(s.posts, p)
	s.mu.Unlock()
}

func (s *alertSink) all() []alertPost {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]alertPost(nil), s.posts...)
}

// TestTenantRules evaluates rule files in one tenant of a front, over Azurite: the recorded
// series lands in that tenant's database (the query API reads it), the alert fires and is
// sent with the tenant's header, /api/v1/rules and /api/v1/alerts report them, Prometheus'
// rule metrics carry the tenant label, and the other tenants evaluate nothing. It also
// measures the account requests an evaluation costs.
func TestTenantRules(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Azurite; skipped under -short")
	}
	svc, checker, base := tenantService(t)
	sink := &alertSink{}
	am := httptest.NewServer(sink)
	defer am.Close()
	dir := t.TempDir()
	file := filepath.Join(dir, "team.yml")
	require.NoError(t, os.WriteFile(file, []byte(`
groups:
  - name: team
    interval: 1s
    rules:
      - record: team:up:sum
        expr: sum(up_teama)
      - alert: TeamUp
        expr: sum(up_teama) > 0
        for: 2s
        labels:
          severity: info
        annotations:
          summary: "{{ $value }} up"
`), 0o644))
	cfg := newMutableConfig(t, "tenants:\n  allow: [teama, teamb]\n")
	front := newFront(t, svc, base, &server.TenantsOptions{
		Limits: cfg.load,
		Rules: func(id string) *rules.Options {
			if id != "teama" {
				return nil
			}
			return &rules.Options{Files: []string{file}, Alertmanagers: []string{am.URL}}
		},
	})
	s, err := front.Open(context.Background(), "teama")
	require.NoError(t, err)
	require.NotNil(t, s.Rules())
	require.Nil(t, front.Default().Rules())
	_, err = front.Open(context.Background(), "nope")
	require.Error(t, err)

	hs := httptest.NewServer(front)
	defer hs.Close()
	c := tenantClient{base: hs.URL, tenant: "teama"}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- front.Run(ctx) }()
	defer func() { cancel(); <-done }()

	// up_teama{team_a="1"} 1, every 250 ms, until the alert has been sent.
	var firing alertPost
	deadline := time.Now().Add(60 * time.Second)
	key := file + ";team"
	for firing.Alerts == nil {
		require.True(t, time.Now().Before(deadline), "no notification within a minute")
		status, body := c.write(t, time.Now(), "a", "up_teama")
		require.Equal(t, http.StatusNoContent, status, body)
		for _, p := range sink.all() {
			if len(p.Alerts) > 0 && p.Alerts[0].EndsAt.After(time.Now()) {
				firing = p
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
	require.Equal(t, "teama", firing.Tenant)
	require.Equal(t, map[string]string{"alertname": "TeamUp", "severity": "info"}, firing.Alerts[0].Labels)
	require.Equal(t, map[string]string{"summary": "1 up"}, firing.Alerts[0].Annotations)

	// The recorded series, through the tenant's query API.
	got := tenantQuery(t, c, "team:up:sum")
	require.Contains(t, got, `"__name__":"team:up:sum"`)
	require.Contains(t, got, `"1"]`)
	require.Contains(t, tenantQuery(t, c, `ALERTS{alertname="TeamUp",alertstate="firing"}`), `"severity":"info"`)
	require.Contains(t, tenantQuery(t, c, `ALERTS_FOR_STATE{alertname="TeamUp"}`), `"ALERTS_FOR_STATE"`)
	require.NotContains(t, tenantQueryAs(t, tenantClient{base: hs.URL}, "team:up:sum"), "team:up:sum", "the default tenant records nothing")

	status, body := c.do(t, http.MethodGet, "/api/v1/rules?type=alert", nil, nil)
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, string(body), `"name":"TeamUp"`)
	require.Contains(t, string(body), `"state":"firing"`)
	require.NotContains(t, string(body), "team:up:sum")
	status, body = c.do(t, http.MethodGet, "/api/v1/alerts", nil, nil)
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, string(body), `"alertname":"TeamUp"`)
	status, body = tenantClient{base: hs.URL}.do(t, http.MethodGet, "/api/v1/rules", nil, nil)
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, string(body), `"groups":[]`)

	// The account requests of an evaluation of the group of two rules (two queries; two
	// writes, of the recorded sample and of ALERTS and ALERTS_FOR_STATE), with no other
	// traffic: the writes stopped.
	before, evals := float64(checker.Stats().Requests), groupEvals(t, front, key)
	time.Sleep(5 * time.Second)
	after, n := float64(checker.Stats().Requests), groupEvals(t, front, key)
	require.Greater(t, n, evals)
	t.Logf("account requests: %.1f an evaluation of a group of 2 rules (over %.0f evaluations, no other traffic)", (after-before)/(n-evals), n-evals)

	// Prometheus' metrics, with the tenant's label.
	status, body = tenantClient{base: hs.URL}.do(t, http.MethodGet, "/metrics", nil, nil)
	require.Equal(t, http.StatusOK, status)
	for _, want := range []string{`prometheus_rule_evaluations_total{rule_group="` + key + `",tenant="teama"}`,
		`prometheus_rule_group_interval_seconds{rule_group="` + key + `",tenant="teama"} 1`,
		`prometheus_notifications_sent_total{alertmanager="` + am.URL + `/api/v2/alerts",tenant="teama"}`} {
		require.Contains(t, string(body), want)
	}

	// A reload with a bad file keeps the rules; a good one replaces them.
	require.NoError(t, os.WriteFile(file, []byte("groups: [\n"), 0o644))
	err = front.ReloadRules()
	require.ErrorIs(t, err, rules.ErrBadRules)
	require.Contains(t, err.Error(), file)
	require.Len(t, s.Rules().RuleGroups(ctx), 1)
	require.NoError(t, os.WriteFile(file, []byte("groups:\n  - name: other\n    rules:\n      - record: x:y\n        expr: vector(1)\n"), 0o644))
	require.NoError(t, front.ReloadRules())
	gs := s.Rules().RuleGroups(ctx)
	require.Len(t, gs, 1)
	require.Equal(t, "other", gs[0].Name)
}

// groupEvals is the prometheus_rule_group_iterations_total of a group (its evaluations), from the front's registry.
func groupEvals(t *testing.T, front *server.Tenants, key string) float64 {
	t.Helper()
	mfs, err := front.Registry().Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != "prometheus_rule_group_iterations_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "rule_group" && l.GetValue() == key {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

func tenantQuery(t *testing.T, c tenantClient, q string) string {
	t.Helper()
	return tenantQueryAs(t, c, q)
}

func tenantQueryAs(t *testing.T, c tenantClient, q string) string {
	t.Helper()
	status, body := c.do(t, http.MethodGet, "/api/v1/query?query="+url.QueryEscape(q), nil, nil)
	require.Equal(t, http.StatusOK, status, string(body))
	return strings.TrimSpace(string(body))
}

// TestRulesRestoreFromDatabase: a server restarted restores a firing alert's state from
// the ALERTS_FOR_STATE it wrote into its database: the alert keeps its active time and
// does not start over from pending.
func TestRulesRestoreFromDatabase(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Azurite; skipped under -short")
	}
	file := filepath.Join(t.TempDir(), "r.yml")
	require.NoError(t, os.WriteFile(file, []byte("groups:\n  - name: r\n    interval: 1s\n    rules:\n      - alert: A\n        expr: vector(1)\n        for: 3s\n"), 0o644))
	// A grace period shorter than the for, so that the alert is restored (Prometheus skips
	// alerts whose for is shorter than it).
	s, _, _ := newServer(t, nil, &server.Options{FoldEvery: -1, RollupEvery: -1, CompactEvery: -1, RetainEvery: -1,
		Rules: &rules.Options{Files: []string{file}, ForGracePeriod: time.Second}})
	alert := func() (state string, active time.Time) {
		for _, g := range s.Rules().RuleGroups(context.Background()) {
			for _, r := range g.Rules {
				for _, a := range r.Alerts {
					return a.State, a.ActiveAt
				}
			}
		}
		return "", time.Time{}
	}
	run := func(until func() bool) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- s.Run(ctx) }()
		deadline := time.Now().Add(time.Minute)
		for !until() {
			require.True(t, time.Now().Before(deadline), "not within a minute")
			time.Sleep(100 * time.Millisecond)
		}
		cancel()
		require.NoError(t, <-done)
	}
	// Firing for two seconds more than its for when stopped: Prometheus' restore, which
	// counts whole seconds, then sees it fired (not pending, whose active time it would move
	// by the time the server was down) and gives it back its active time.
	run(func() bool { state, at := alert(); return state == "firing" && time.Since(at) > 5*time.Second })
	_, active := alert()
	time.Sleep(2 * time.Second)
	restarted := time.Now()
	// The restarted server's alert: restored, it is firing with the active time
	// ALERTS_FOR_STATE holds (whole seconds), not the one the first run kept in memory (which
	// the server may still list just after Run starts again); started over, it would be
	// pending with an active time after the restart.
	var pendingAfter bool
	var again time.Time
	restored := active.Truncate(time.Second)
	run(func() bool {
		if gs := s.Rules().RuleGroups(context.Background()); len(gs) == 0 || !gs[0].LastEvaluation.After(restarted) {
			return false // the last run's groups, or the new ones not evaluated yet
		}
		state, at := alert()
		// Started over: still pending after most of the for (the first evaluation after a
		// restart makes the alert pending, and the restore that follows it sets its active
		// time back), or firing since the restart.
		if at.After(restarted) && (state == "firing" || state == "pending" && time.Since(restarted) > 2500*time.Millisecond) {
			pendingAfter = true
		}
		if state == "firing" && !at.After(restarted) {
			again = at
			return true
		}
		return pendingAfter
	})
	require.False(t, pendingAfter, "the alert started over after the restart")
	require.Equal(t, restored, again, "the active time restored from ALERTS_FOR_STATE (whole seconds)")
}

// TestTenantRulesUnderLimits: a rule's results go through the tenant's ingest limits, as a
// remote write: a recorded series over max_label_value_length is refused, the rule's
// health says why, and the evaluation counts as failed. (The metric's name counts too: the
// names here are 4 bytes.)
func TestTenantRulesUnderLimits(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Azurite; skipped under -short")
	}
	svc, _, base := tenantService(t)
	file := filepath.Join(t.TempDir(), "r.yml")
	require.NoError(t, os.WriteFile(file, []byte(`
groups:
  - name: limited
    interval: 1s
    rules:
      - record: fine
        expr: vector(1)
        labels: {v: "abc"}
      - record: long
        expr: vector(1)
        labels: {v: "abcdefgh"}
`), 0o644))
	cfg := newMutableConfig(t, "tenants:\n  allow: [teamb]\noverrides:\n  teamb:\n    max_label_value_length: 4\n")
	front := newFront(t, svc, base, &server.TenantsOptions{Limits: cfg.load,
		Rules: func(id string) *rules.Options {
			if id != "teamb" {
				return nil
			}
			return &rules.Options{Files: []string{file}}
		}})
	s, err := front.Open(context.Background(), "teamb")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- front.Run(ctx) }()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(time.Minute)
	for {
		require.True(t, time.Now().Before(deadline), "no evaluation within a minute")
		gs := s.Rules().RuleGroups(ctx)
		if len(gs) == 1 && gs[0].Rules[1].Health != "unknown" {
			short, long := gs[0].Rules[0], gs[0].Rules[1]
			require.Equal(t, "ok", short.Health, short.LastError)
			require.Equal(t, "err", long.Health)
			require.Contains(t, long.LastError, "max_label_value_length")
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	hs := httptest.NewServer(front)
	defer hs.Close()
	c := tenantClient{base: hs.URL, tenant: "teamb"}
	require.Contains(t, tenantQuery(t, c, "fine"), `"v":"abc"`)
	require.NotContains(t, tenantQuery(t, c, "long"), `"long"`)
	status, body := tenantClient{base: c.base}.do(t, http.MethodGet, "/metrics", nil, nil)
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, string(body), `prometheus_rule_evaluation_failures_total{rule_group="`+file+`;limited",tenant="teamb"}`)
	require.NotContains(t, string(body), `prometheus_rule_evaluation_failures_total{rule_group="`+file+`;limited",tenant="teamb"} 0`)
}
