package rules

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/rules"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
)

// An alerting section of a Prometheus configuration file: its Alertmanager (static
// target, path prefix, basic auth) receives the alerts, relabeled by its
// alert_relabel_configs, with the tenant's header; the file's other sections are not read.
func TestManagerAlertingSection(t *testing.T) {
	srv, posts := alertmanagerServer(t)
	defer srv.Close()
	u, err := url.Parse(srv.URL)
	require.NoError(t, err)
	dir := t.TempDir()
	promFile := writeFile(t, dir, "prometheus.yml", strings.ReplaceAll(`
global:
  scrape_interval: 15s
scrape_configs:
  - job_name: not-read
    kubernetes_sd_configs: [{role: pod}]
alerting:
  alert_relabel_configs:
    - target_label: region
      replacement: eu
    - source_labels: [alertname]
      regex: Dropped
      action: drop
  alertmanagers:
    - path_prefix: /am
      timeout: 5s
      basic_auth: {username: u, password: p}
      static_configs:
        - targets: [HOST]
`, "HOST", u.Host))
	alerting, err := LoadAlerting(promFile)
	require.NoError(t, err)
	file := writeFile(t, dir, "r.yml", `groups:
  - name: fast
    interval: 1s
    rules:
      - alert: Always
        expr: vector(1)
      - alert: Dropped
        expr: vector(1)
`)
	store := newMemStore()
	engine := promql.NewEngine(promql.EngineOpts{MaxSamples: 1e6, Timeout: time.Minute})
	m, err := New(&Options{Files: []string{file}, QueryFunc: rules.EngineQueryFunc(engine, store), Queryable: store, Writer: store,
		Alerting: alerting, Tenant: "team1", ResendDelay: time.Second})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	defer func() {
		cancel()
		require.NoError(t, <-done)
	}()
	for seen := 0; seen < 3; {
		select {
		case p := <-posts:
			require.Equal(t, "/am/api/v2/alerts", p.path)
			require.Equal(t, "team1", p.tenant)
			require.Equal(t, "u", p.user)
			require.Equal(t, "p", p.pass)
			for _, a := range p.alerts {
				require.Equal(t, map[string]string{"alertname": "Always", "region": "eu"}, a.Labels, "relabeled; Dropped dropped")
				seen++
			}
		case <-time.After(30 * time.Second):
			t.Fatal("no notification in 30 s")
		}
	}
}

func TestLoadAlertingErrors(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"none.yml":     "global:\n  scrape_interval: 15s\n",
		"dns.yml":      "alerting:\n  alertmanagers:\n    - dns_sd_configs: [{names: [am.example]}]\n",
		"bad.yml":      "alerting:\n  alertmanagers:\n    - api_version: v1\n      static_configs: [{targets: [a:9093]}]\n",
		"notyaml.yml":  "alerting: [",
		"badfield.yml": "alerting:\n  alertmanager: []\n",
	} {
		_, err := LoadAlerting(writeFile(t, dir, name, content))
		require.Error(t, err, name)
		if name == "none.yml" {
			require.ErrorIs(t, err, ErrNoAlerting)
			continue
		}
		require.ErrorIs(t, err, tablets.ErrInvalidOptions, name)
		require.Contains(t, err.Error(), name)
	}
	_, err := LoadAlerting(dir + "/missing.yml")
	require.ErrorIs(t, err, tablets.ErrInvalidOptions)
}
