package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/seed71701133/tablets/server"
)

const rulerPath = "/prometheus/config/v1/rules"

const cpuGroup = `name: cpu
interval: 1s
rules:
  - record: job:cpu:sum
    expr: sum by (job) (cpu_seconds_total)
  - alert: CPUHigh
    expr: job:cpu:sum > 100
    for: 5m
    labels:
      severity: page
    annotations:
      summary: '{{ $labels.job }} uses {{ $value }} CPUs'
`

// rulerFront is a front with the ruler API on, tenants teama and teamb (teamb at most two
// groups of one rule), user alice bound to teama.
func rulerFront(t *testing.T, svc *aztables.ServiceClient, base string, opts *server.RulerOptions) (*server.Tenants, *httptest.Server) {
	t.Helper()
	cfg := newMutableConfig(t, `
tenants:
  allow: [teama, teamb]
  users:
    alice: [teama]
    bob: ["*"]
overrides:
  teamb:
    ruler_max_rule_groups_per_tenant: 2
    ruler_max_rules_per_rule_group: 1
`)
	if opts == nil {
		opts = &server.RulerOptions{}
	}
	front := newFront(t, svc, base, &server.TenantsOptions{Limits: cfg.load, ListEvery: time.Second,
		Server: &server.Options{FoldEvery: -1, RollupEvery: -1, CompactEvery: -1, RetainEvery: -1, Ruler: opts}})
	hs := httptest.NewServer(front)
	t.Cleanup(hs.Close)
	return front, hs
}

// yamlGroups reads the answer of a list: namespace -> groups, as mimirtool reads it.
func yamlGroups(t *testing.T, body []byte) map[string][]rulefmt.RuleGroup {
	t.Helper()
	out := map[string][]rulefmt.RuleGroup{}
	dec := yaml.NewDecoder(bytes.NewReader(body))
	dec.KnownFields(true)
	require.NoError(t, dec.Decode(&out), string(body))
	return out
}

func groupOf(t *testing.T, doc string) rulefmt.RuleGroup {
	t.Helper()
	var g rulefmt.RuleGroup
	require.NoError(t, yaml.Unmarshal([]byte(doc), &g))
	return g
}

// TestRulerAPI drives every endpoint of the ruler configuration API on Azurite: the YAML
// shapes mimirtool reads, 202 as Mimir, 404s, a bad rule refused with its name and nothing
// stored, the limits, tenants kept apart, the tenant checks of every endpoint, and the
// stored groups evaluated and shown by /api/v1/rules with their namespace as file.
func TestRulerAPI(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Azurite; skipped under -short")
	}
	svc, _, base := tenantService(t)
	front, hs := rulerFront(t, svc, base, &server.RulerOptions{MaxBodyBytes: 4096})
	a := tenantClient{base: hs.URL, tenant: "teama", user: "alice"}
	b := tenantClient{base: hs.URL, tenant: "teamb", user: "bob"}
	ns := "/" + url.PathEscape("team/a") // a "/" in a namespace, escaped as mimirtool does

	// A tenant with no database: no group, nothing created.
	status, body := a.do(t, http.MethodGet, rulerPath, nil, nil)
	require.Equal(t, http.StatusOK, status, string(body))
	require.Equal(t, "{}\n", string(body))
	status, _ = a.do(t, http.MethodGet, rulerPath+ns+"/cpu", nil, nil)
	require.Equal(t, http.StatusNotFound, status)
	status, _ = a.do(t, http.MethodDelete, rulerPath+ns, nil, nil)
	require.Equal(t, http.StatusNotFound, status)
	require.Nil(t, front.Tenant("teama"), "a read creates no database")

	// Set: 202 and Mimir's JSON.
	status, body = a.do(t, http.MethodPost, rulerPath+ns, []byte(cpuGroup), map[string]string{"Content-Type": "application/yaml"})
	require.Equal(t, http.StatusAccepted, status, string(body))
	require.JSONEq(t, `{"status":"success","data":null,"errorType":"","error":""}`, string(body))
	status, body = a.do(t, http.MethodGet, rulerPath+ns+"/cpu", nil, nil)
	require.Equal(t, http.StatusOK, status, string(body))
	require.Equal(t, cpuGroup, string(body), "the group as it was sent (canonical YAML)")
	// The legacy form, and a second namespace.
	mem := "name: mem\nrules:\n  - record: job:mem:sum\n    expr: sum by (job) (mem_bytes)\n"
	status, body = a.do(t, http.MethodPost, "/api/v1/rules/other", []byte(mem), nil)
	require.Equal(t, http.StatusAccepted, status, string(body))
	status, body = a.do(t, http.MethodGet, "/api/v1/rules/other/mem", nil, nil)
	require.Equal(t, http.StatusOK, status, string(body))
	require.Equal(t, mem, string(body))

	// Lists: namespace -> groups.
	status, body = a.do(t, http.MethodGet, rulerPath, nil, nil)
	require.Equal(t, http.StatusOK, status)
	req, err := http.NewRequest(http.MethodGet, hs.URL+rulerPath, nil)
	require.NoError(t, err)
	req.Header.Set(server.TenantHeader, "teama")
	req.SetBasicAuth("alice", "")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, "application/yaml", resp.Header.Get("Content-Type"))
	require.Equal(t, map[string][]rulefmt.RuleGroup{"team/a": {groupOf(t, cpuGroup)}, "other": {groupOf(t, mem)}}, yamlGroups(t, body))
	status, body = a.do(t, http.MethodGet, rulerPath+ns, nil, nil)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, map[string][]rulefmt.RuleGroup{"team/a": {groupOf(t, cpuGroup)}}, yamlGroups(t, body))
	status, body = a.do(t, http.MethodGet, "/api/v1/rules/team%2Fa", nil, nil)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, map[string][]rulefmt.RuleGroup{"team/a": {groupOf(t, cpuGroup)}}, yamlGroups(t, body))
	status, body = a.do(t, http.MethodGet, rulerPath+"/nope", nil, nil)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "{}\n", string(body))

	// Bad rules: 400 naming the rule; nothing stored.
	for _, c := range []struct{ doc, want string }{
		{strings.Replace(cpuGroup, "job:cpu:sum > 100", "job:cpu:sum >", 1), `group "cpu", rule 2, "CPUHigh": could not parse expression`},
		{strings.Replace(cpuGroup, "{{ $labels.job }}", "{{ $labels. }}", 1), `group "cpu", rule 2, "CPUHigh": annotation "summary"`},
		{"name: cpu\nrules: [\n", "yaml"},
		{"name: cpu\nsource_tenants: [teamb]\nrules: []\n", "field source_tenants not found"},
		{"name: cpu\nrules:\n  - record: x\n    expr: up\n    expr: up\n", `mapping key "expr" already defined`},
		{"rules: []\n", "no name"},
		{"", "empty"},
	} {
		status, body = a.do(t, http.MethodPost, rulerPath+ns, []byte(c.doc), nil)
		require.Equal(t, http.StatusBadRequest, status, c.doc)
		require.Contains(t, string(body), c.want, c.doc)
	}
	status, body = a.do(t, http.MethodGet, rulerPath+ns+"/cpu", nil, nil)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, cpuGroup, string(body), "the bad sets stored nothing")
	status, _ = a.do(t, http.MethodPost, rulerPath+ns, bytes.Repeat([]byte("#"), 5000), nil)
	require.Equal(t, http.StatusRequestEntityTooLarge, status)
	status, _ = a.do(t, http.MethodPut, rulerPath+ns, []byte(cpuGroup), nil)
	require.Equal(t, http.StatusMethodNotAllowed, status)
	status, _ = a.do(t, http.MethodPost, rulerPath+ns+"/cpu", []byte(cpuGroup), nil)
	require.Equal(t, http.StatusMethodNotAllowed, status)
	status, _ = a.do(t, http.MethodGet, rulerPath+"/a/b/c", nil, nil)
	require.Equal(t, http.StatusBadRequest, status)

	// Tenants apart; teamb's limits (overrides of the configuration).
	status, body = b.do(t, http.MethodGet, rulerPath, nil, nil)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "{}\n", string(body))
	status, _ = b.do(t, http.MethodGet, rulerPath+ns+"/cpu", nil, nil)
	require.Equal(t, http.StatusNotFound, status)
	status, _ = b.do(t, http.MethodPost, rulerPath, []byte(cpuGroup), nil)
	require.Equal(t, http.StatusMethodNotAllowed, status)
	require.Nil(t, front.Tenant("teamb"), "only a set creates the tenant's database")
	status, body = b.do(t, http.MethodPost, rulerPath+"/x", []byte(cpuGroup), nil)
	require.Equal(t, http.StatusBadRequest, status)
	require.Contains(t, string(body), "ruler_max_rules_per_rule_group")
	for _, name := range []string{"one", "two"} {
		status, body = b.do(t, http.MethodPost, rulerPath+"/x", []byte("name: "+name+"\nrules:\n  - record: x\n    expr: up\n"), nil)
		require.Equal(t, http.StatusAccepted, status, string(body))
	}
	status, body = b.do(t, http.MethodPost, rulerPath+"/x", []byte("name: three\nrules: []\n"), nil)
	require.Equal(t, http.StatusBadRequest, status)
	require.Contains(t, string(body), "ruler_max_rule_groups_per_tenant")
	_, body = tenantClient{base: hs.URL}.do(t, http.MethodGet, "/metrics", nil, nil)
	require.Contains(t, string(body), `tablets_limit_hits_total{limit="ruler_max_rule_groups_per_tenant",tenant="teamb"} 1`)
	require.Contains(t, string(body), `tablets_limit_hits_total{limit="ruler_max_rules_per_rule_group",tenant="teamb"} 1`)
	status, body = a.do(t, http.MethodGet, rulerPath, nil, nil)
	require.Equal(t, http.StatusOK, status)
	require.Len(t, yamlGroups(t, body), 2, "teamb's groups are not teama's")

	// The tenant checks of every endpoint: a user not bound to the tenant, a tenant not
	// allowed, a bad tenant ID, no user where users are bound.
	for _, c := range []struct {
		client tenantClient
		status int
	}{
		{tenantClient{base: hs.URL, tenant: "teamb", user: "alice"}, http.StatusForbidden},
		{tenantClient{base: hs.URL, tenant: "teamc", user: "bob"}, http.StatusForbidden},
		{tenantClient{base: hs.URL, tenant: "Team_A", user: "bob"}, http.StatusBadRequest},
		{tenantClient{base: hs.URL, tenant: "teama"}, http.StatusForbidden},
	} {
		for _, m := range []struct{ method, path string }{{http.MethodGet, rulerPath}, {http.MethodGet, rulerPath + ns},
			{http.MethodGet, rulerPath + ns + "/cpu"}, {http.MethodPost, rulerPath + ns}, {http.MethodDelete, rulerPath + ns + "/cpu"},
			{http.MethodDelete, rulerPath + ns}} {
			status, _ := c.client.do(t, m.method, m.path, []byte(cpuGroup), nil)
			require.Equal(t, c.status, status, "%+v %s %s", c.client, m.method, m.path)
		}
	}

	// Evaluated by the tenant's rule manager, shown with the namespace as file.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- front.Run(ctx) }()
	defer func() { cancel(); <-done }()
	require.Eventually(t, func() bool {
		status, body := a.do(t, http.MethodGet, "/api/v1/rules", nil, nil)
		return status == http.StatusOK && strings.Contains(string(body), `"file":"team/a"`) &&
			strings.Contains(string(body), `"file":"other"`) && strings.Contains(string(body), `"health":"ok"`)
	}, time.Minute, 100*time.Millisecond)
	var rulesAnswer struct {
		Data struct {
			Groups []struct {
				Name, File string
				Rules      []struct{ Name, Health string }
			}
		}
	}
	_, body = a.do(t, http.MethodGet, "/api/v1/rules", nil, nil)
	require.NoError(t, json.Unmarshal(body, &rulesAnswer))
	files := map[string]string{}
	for _, g := range rulesAnswer.Data.Groups {
		files[g.Name] = g.File
	}
	require.Equal(t, map[string]string{"cpu": "team/a", "mem": "other"}, files)

	// Deletes: 202, then 404; the rule manager drops the group at once.
	status, _ = a.do(t, http.MethodDelete, rulerPath+ns+"/cpu", nil, nil)
	require.Equal(t, http.StatusAccepted, status)
	status, _ = a.do(t, http.MethodDelete, rulerPath+ns+"/cpu", nil, nil)
	require.Equal(t, http.StatusNotFound, status)
	status, _ = a.do(t, http.MethodDelete, "/api/v1/rules/other", nil, nil)
	require.Equal(t, http.StatusAccepted, status)
	status, _ = a.do(t, http.MethodDelete, "/api/v1/rules/other", nil, nil)
	require.Equal(t, http.StatusNotFound, status)
	status, body = a.do(t, http.MethodGet, rulerPath, nil, nil)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "{}\n", string(body))
	require.Eventually(t, func() bool {
		_, body := a.do(t, http.MethodGet, "/api/v1/rules", nil, nil)
		return strings.Contains(string(body), `"groups":[]`)
	}, 10*time.Second, 100*time.Millisecond)
	// GET /api/v1/rules is still Prometheus' API.
	status, body = a.do(t, http.MethodGet, "/api/v1/rules", nil, nil)
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, string(body), `"status":"success"`)
}

// rulesAnswerHas reports whether c's /api/v1/rules holds all of want.
func rulesAnswerHas(t *testing.T, c tenantClient, want ...string) bool {
	t.Helper()
	status, body := c.do(t, http.MethodGet, "/api/v1/rules", nil, nil)
	if status != http.StatusOK {
		return false
	}
	for _, w := range want {
		if !strings.Contains(string(body), w) {
			return false
		}
	}
	return true
}

// waitFor polls cond every 50 ms for at most limit, and returns how long it took.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		require.Less(t, time.Since(start), limit, what)
		time.Sleep(50 * time.Millisecond)
	}
	return time.Since(start)
}

// TestRulerTwoServers: two servers (fronts) on one database. A group set through one is
// evaluated by the other, and shown by its /api/v1/rules, within the poll interval (the
// documented bound) for a tenant it runs, and within the listing interval for a tenant
// whose database the other just created; a change and a delete through the second reach
// the first within the same bound.
func TestRulerTwoServers(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Azurite; skipped under -short")
	}
	const poll, list = 2 * time.Second, time.Second
	svc, _, base := tenantService(t)
	frontA, hsA := rulerFront(t, svc, base, &server.RulerOptions{PollEvery: poll})
	frontB, hsB := rulerFront(t, svc, base, &server.RulerOptions{PollEvery: poll})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, f := range []*server.Tenants{frontA, frontB} {
		done := make(chan error, 1)
		go func() { done <- f.Run(ctx) }()
		defer func() { cancel(); <-done }()
	}
	slack := 3 * time.Second // a load, and this test's own polling, on a shared machine
	for _, tenant := range []string{"teama", "default"} {
		a := tenantClient{base: hsA.URL, tenant: tenant, user: "bob"}
		b := tenantClient{base: hsB.URL, tenant: tenant, user: "bob"}
		// B opens teama's database, created by the set through A, at its next listing, or at
		// once when a request for teama comes (this test's): either way it loads its groups
		// when it opens it.
		bound := poll + slack
		if tenant == "teama" {
			bound += list
		}
		// Set through A: B shows the group and evaluates it.
		group := "name: two\ninterval: 1s\nrules:\n  - record: two:x\n    expr: vector(2)\n"
		status, body := a.do(t, http.MethodPost, rulerPath+"/ns", []byte(group), nil)
		require.Equal(t, http.StatusAccepted, status, string(body))
		took := waitFor(t, bound, tenant+": B shows the group set through A", func() bool {
			return rulesAnswerHas(t, b, `"file":"ns"`, `"name":"two"`)
		})
		t.Logf("%s: a set through A shown by B after %v (bound %v)", tenant, took.Round(time.Millisecond), bound)
		waitFor(t, time.Minute, tenant+": B evaluates it", func() bool {
			return rulesAnswerHas(t, b, `"name":"two:x"`, `"health":"ok"`) && strings.Contains(tenantQuery(t, b, "two:x"), `"2"]`)
		})

		// Changed through B: A evaluates the new expression within the bound.
		status, body = b.do(t, http.MethodPost, rulerPath+"/ns", []byte(strings.Replace(group, "vector(2)", "vector(3)", 1)), nil)
		require.Equal(t, http.StatusAccepted, status, string(body))
		took = waitFor(t, poll+slack, tenant+": A shows the change made through B", func() bool {
			return rulesAnswerHas(t, a, `"query":"vector(3)"`)
		})
		t.Logf("%s: a change through B shown by A after %v", tenant, took.Round(time.Millisecond))

		waitFor(t, slack, tenant+": B shows its own change", func() bool { return rulesAnswerHas(t, b, `"query":"vector(3)"`) })

		// Deleted through A: B drops it within the bound.
		status, _ = a.do(t, http.MethodDelete, rulerPath+"/ns", nil, nil)
		require.Equal(t, http.StatusAccepted, status)
		took = waitFor(t, poll+slack, tenant+": B drops the group deleted through A", func() bool {
			return rulesAnswerHas(t, b, `"groups":[]`)
		})
		t.Logf("%s: a delete through A dropped by B after %v", tenant, took.Round(time.Millisecond))
	}
}
