package server_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/prompb"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"

	"github.com/seed71701133/tablets/internal/testkit/azurite"
	"github.com/seed71701133/tablets/internal/testkit/clock"
	"github.com/seed71701133/tablets/internal/testkit/dbtest"
	"github.com/seed71701133/tablets/server"
	"github.com/seed71701133/tablets/server/limits"
	"github.com/seed71701133/tablets/tsdb"
)

// tenantsConfig binds alice to teama, bob to teamb, and admin to every tenant; carol is a
// user of the web config bound to none.
const tenantsConfig = `
tenants:
  allow: [teama, teamb, teamc]
  users:
    alice: [teama]
    bob: [teamb]
    admin: ["*"]
    carol: []
`

var tenantUsers = map[string]string{"alice": "pa", "bob": "pb", "admin": "px", "carol": "pc"}

// mutableConfig is a configuration a test replaces, as a SIGHUP would.
type mutableConfig struct {
	mu  sync.Mutex
	cfg *limits.Config
}

func newMutableConfig(t *testing.T, yaml string) *mutableConfig {
	t.Helper()
	c := &mutableConfig{}
	c.set(t, yaml)
	return c
}

func (c *mutableConfig) set(t *testing.T, yaml string) {
	t.Helper()
	cfg, err := limits.Parse([]byte(yaml), limits.Limits{})
	require.NoError(t, err)
	c.mu.Lock()
	c.cfg = cfg
	c.mu.Unlock()
}

func (c *mutableConfig) load() *limits.Config {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cfg
}

// tenantService is a service client of the shared Azurite through a limit Checker, and a
// fresh base database name whose tables (its tenants' too) are dropped when the test ends.
func tenantService(t *testing.T) (*aztables.ServiceClient, *azurite.Checker, string) {
	svc, checker := dbtest.NewService(t)
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	base := "ten" + hex.EncodeToString(b)
	dbtest.DropOnCleanup(t, base)
	return svc, checker, base
}

// newFront is a Tenants front on base with no background loops.
func newFront(t *testing.T, svc *aztables.ServiceClient, base string, opts *server.TenantsOptions) *server.Tenants {
	t.Helper()
	o := server.TenantsOptions{}
	if opts != nil {
		o = *opts
	}
	so := server.Options{FoldEvery: -1, RollupEvery: -1, CompactEvery: -1, RetainEvery: -1}
	if o.Server != nil {
		so = *o.Server
	}
	o.Server = &so
	o.DB = &tsdb.Options{Layout: chunkedLayout}
	f, err := server.NewTenants(context.Background(), svc, base, &o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close() })
	return f
}

// tenantClient sends requests to a front as a user (none: "") for a tenant (none: "").
type tenantClient struct {
	base, tenant, user, password string
}

func (c tenantClient) do(t *testing.T, method, path string, body []byte, header map[string]string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, c.base+path, bytes.NewReader(body))
	require.NoError(t, err)
	if c.tenant != "" {
		req.Header.Set(server.TenantHeader, c.tenant)
	}
	if c.user != "" {
		req.SetBasicAuth(c.user, c.password)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, b
}

// write remote-writes one sample of each metric, labelled team_<team>="1", at at.
func (c tenantClient) write(t *testing.T, at time.Time, team string, metrics ...string) (int, string) {
	t.Helper()
	wr := &prompb.WriteRequest{}
	for _, m := range metrics {
		wr.Timeseries = append(wr.Timeseries, prompb.TimeSeries{
			Labels:  []prompb.Label{{Name: "__name__", Value: m}, {Name: "team_" + team, Value: "1"}},
			Samples: []prompb.Sample{{Timestamp: at.UnixMilli(), Value: 1}}})
	}
	data, err := wr.Marshal()
	require.NoError(t, err)
	status, body := c.do(t, http.MethodPost, "/api/v1/write", snappy.Encode(nil, data), map[string]string{
		"Content-Type": "application/x-protobuf", "Content-Encoding": "snappy", "X-Prometheus-Remote-Write-Version": "0.1.0"})
	return status, string(body)
}

// otlp sends a gauge named metric, of service team, at at.
func (c tenantClient) otlp(t *testing.T, at time.Time, team, metric string) (int, string) {
	t.Helper()
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", team)
	g := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	g.SetName(metric)
	p := g.SetEmptyGauge().DataPoints().AppendEmpty()
	p.SetTimestamp(pcommon.NewTimestampFromTime(at))
	p.SetDoubleValue(1)
	body, err := pmetricotlp.NewExportRequestFromMetrics(md).MarshalProto()
	require.NoError(t, err)
	status, answer := c.do(t, http.MethodPost, "/api/v1/otlp/v1/metrics", body, map[string]string{"Content-Type": "application/x-protobuf"})
	return status, string(answer)
}

// read remote-reads every series in [from, to) and returns their metric names, or the status.
func (c tenantClient) read(t *testing.T, from, to time.Time) ([]string, int) {
	t.Helper()
	rr := &prompb.ReadRequest{Queries: []*prompb.Query{{StartTimestampMs: from.UnixMilli(), EndTimestampMs: to.UnixMilli(),
		Matchers: []*prompb.LabelMatcher{{Type: prompb.LabelMatcher_RE, Name: "__name__", Value: ".+"}}}}}
	data, err := rr.Marshal()
	require.NoError(t, err)
	status, body := c.do(t, http.MethodPost, "/api/v1/read", snappy.Encode(nil, data), map[string]string{
		"Content-Type": "application/x-protobuf", "Content-Encoding": "snappy", "X-Prometheus-Remote-Read-Version": "0.1.0"})
	if status != http.StatusOK {
		return nil, status
	}
	dec, err := snappy.Decode(nil, body)
	require.NoError(t, err)
	var ans prompb.ReadResponse
	require.NoError(t, ans.Unmarshal(dec))
	names := []string{}
	for _, ts := range ans.Results[0].Timeseries {
		for _, l := range ts.Labels {
			if l.Name == "__name__" {
				names = append(names, l.Value)
			}
		}
	}
	sort.Strings(names)
	return names, status
}

// names asks a query API endpoint and returns the metric names it answers (sorted), or the
// status.
func (c tenantClient) names(t *testing.T, endpoint string, at time.Time) ([]string, int) {
	t.Helper()
	start, end := at.Add(-time.Hour).Format(time.RFC3339), at.Add(time.Minute).Format(time.RFC3339)
	params := url.Values{}
	path := "/api/v1/" + endpoint
	switch endpoint {
	case "query":
		params = url.Values{"query": {`{__name__=~".+"}`}, "time": {at.Add(time.Second).Format(time.RFC3339)}}
	case "query_range":
		params = url.Values{"query": {`{__name__=~".+"}`}, "start": {start}, "end": {end}, "step": {"60"}}
	case "series":
		params = url.Values{"match[]": {`{__name__=~".+"}`}, "start": {start}, "end": {end}}
	case "labels":
		params = url.Values{"start": {start}, "end": {end}}
	case "values":
		path = "/api/v1/label/__name__/values"
		params = url.Values{"start": {start}, "end": {end}}
	}
	status, body := c.do(t, http.MethodGet, path+"?"+params.Encode(), nil, nil)
	if status != http.StatusOK {
		return nil, status
	}
	var out struct {
		Data json.RawMessage `json:"data"`
	}
	require.NoError(t, json.Unmarshal(body, &out), string(body))
	names := []string{}
	switch endpoint {
	case "query", "query_range":
		var d struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
			} `json:"result"`
		}
		require.NoError(t, json.Unmarshal(out.Data, &d))
		for _, r := range d.Result {
			names = append(names, r.Metric["__name__"])
		}
	case "series":
		var d []map[string]string
		require.NoError(t, json.Unmarshal(out.Data, &d))
		for _, s := range d {
			names = append(names, s["__name__"])
		}
	case "labels", "values":
		require.NoError(t, json.Unmarshal(out.Data, &names))
	}
	sort.Strings(names)
	return names, status
}

var queryEndpoints = []string{"query", "query_range", "series", "labels", "values"}

// Through every endpoint (remote write, OTLP, remote read, query, query_range, series,
// labels, label values), behind a web config's basic auth: a tenant reads only its own
// series, a user bound to one tenant can neither read nor write another's (403), a tenant
// not allowed is 403, a bad tenant ID 400, no header the default database with the data
// written before tenants; a tenant's database is created by its first write, not by a read.
func TestTenantsIsolation(t *testing.T) {
	ctx := context.Background()
	svc, checker, base := tenantService(t)
	at := time.Now().Add(-5 * time.Minute).Truncate(time.Second)

	// The data of the database before tenants: a plain server over the base database.
	db, err := tsdb.Open(ctx, svc, base, &tsdb.Options{Layout: chunkedLayout})
	require.NoError(t, err)
	plain, err := server.New(db, &server.Options{FoldEvery: -1, RollupEvery: -1, CompactEvery: -1, RetainEvery: -1})
	require.NoError(t, err)
	hs := newHTTPTest(t, plain)
	status, msg := tenantClient{base: hs}.write(t, at, "none", "pre_tenants")
	require.NoError(t, plain.Close())
	require.Equal(t, http.StatusNoContent, status, msg)

	cfg := newMutableConfig(t, tenantsConfig)
	front := newFront(t, svc, base, &server.TenantsOptions{Limits: cfg.load})
	web := filepath.Join(t.TempDir(), "web.yml")
	writeAtomic(t, web, (*testPKI)(nil).webConfig(t, false, tenantUsers))
	s := serve(t, front, false, &server.ServeOptions{WebConfigFile: web})
	url := "http://" + s.public
	as := func(user, tenant string) tenantClient {
		return tenantClient{base: url, tenant: tenant, user: user, password: tenantUsers[user]}
	}
	alice, bob := as("alice", "teama"), as("bob", "teamb")

	// A read of a tenant with no database answers empty, and creates nothing.
	for _, e := range queryEndpoints {
		names, status := alice.names(t, e, at)
		require.Equal(t, http.StatusOK, status, e)
		require.Empty(t, names, e)
	}
	names, status := alice.read(t, at.Add(-time.Hour), at.Add(time.Hour))
	require.Equal(t, http.StatusOK, status)
	require.Empty(t, names)
	for _, id := range []string{"teama", "teamb"} {
		exists, err := tsdb.Exists(ctx, svc, base+"x"+id)
		require.NoError(t, err)
		require.False(t, exists, "a read created tenant %s's database", id)
	}

	// Each writes its own series, by remote write and OTLP: the first write creates.
	for _, w := range []struct {
		c    tenantClient
		team string
	}{{alice, "a"}, {bob, "b"}} {
		status, msg := w.c.write(t, at, w.team, w.team+"_rw")
		require.Equal(t, http.StatusNoContent, status, msg)
		status, msg = w.c.otlp(t, at, w.team, w.team+"_otlp")
		require.Equal(t, http.StatusOK, status, msg)
	}
	for _, id := range []string{"teama", "teamb"} {
		exists, err := tsdb.Exists(ctx, svc, base+"x"+id)
		require.NoError(t, err)
		require.True(t, exists, "tenant %s's first write did not create its database", id)
	}

	// Each reads its own series, through every endpoint, and nothing of the other's; the
	// admin, bound to every tenant, reads each tenant's through its header.
	admin := func(tenant string) tenantClient { return as("admin", tenant) }
	for _, r := range []struct {
		clients      []tenantClient
		want, labels []string
	}{
		{[]tenantClient{alice, admin("teama")}, []string{"a_otlp", "a_rw"}, []string{"__name__", "job", "team_a"}},
		{[]tenantClient{bob, admin("teamb")}, []string{"b_otlp", "b_rw"}, []string{"__name__", "job", "team_b"}},
		{[]tenantClient{admin(""), admin(limits.DefaultTenant)}, []string{"pre_tenants"}, []string{"__name__", "team_none"}},
	} {
		for _, c := range r.clients {
			for _, e := range queryEndpoints {
				names, status := c.names(t, e, at)
				require.Equal(t, http.StatusOK, status, "%s %s %s", c.user, c.tenant, e)
				want := r.want
				if e == "labels" {
					want = r.labels
				}
				require.Equal(t, want, names, "%s %s %s", c.user, c.tenant, e)
			}
			names, status := c.read(t, at.Add(-time.Hour), at.Add(time.Hour))
			require.Equal(t, http.StatusOK, status)
			require.Equal(t, r.want, names, "remote read %s %s", c.user, c.tenant)
		}
	}

	// Another tenant's, or no tenant bound: 403 on every endpoint, nothing written.
	refused := []tenantClient{
		as("alice", "teamb"), as("bob", "teama"), as("alice", ""), as("carol", "teama"),
		as("admin", "teamz"), // not in tenants.allow
	}
	for _, c := range refused {
		for _, e := range queryEndpoints {
			_, status := c.names(t, e, at)
			require.Equal(t, http.StatusForbidden, status, "%s for %q: %s", c.user, c.tenant, e)
		}
		_, status := c.read(t, at.Add(-time.Hour), at.Add(time.Hour))
		require.Equal(t, http.StatusForbidden, status, "%s for %q: remote read", c.user, c.tenant)
		status, msg := c.write(t, at, "x", "intruder_rw")
		require.Equal(t, http.StatusForbidden, status, "%s for %q: remote write: %s", c.user, c.tenant, msg)
		status, msg = c.otlp(t, at, "x", "intruder_otlp")
		require.Equal(t, http.StatusForbidden, status, "%s for %q: OTLP: %s", c.user, c.tenant, msg)
	}
	exists, err := tsdb.Exists(ctx, svc, base+"xteamz")
	require.NoError(t, err)
	require.False(t, exists)
	names, _ = admin("teama").names(t, "values", at)
	require.Equal(t, []string{"a_otlp", "a_rw"}, names, "a refused write was stored")

	// A tenant ID that cannot name a database, or several tenants: 400, before any request.
	before := checker.Stats().Requests
	for _, id := range []string{"TeamA", "team-a", "team_a", "teama|teamb", strings.Repeat("a", 40-len(base))} {
		_, status := admin(id).names(t, "query", at)
		require.Equal(t, http.StatusBadRequest, status, id)
		status, _ = admin(id).write(t, at, "x", "bad_rw")
		require.Equal(t, http.StatusBadRequest, status, id)
	}
	require.Equal(t, before, checker.Stats().Requests, "a refused request reached the account")
	// The longest ID that fits is a tenant like any other (not allowed here: 403).
	_, status = admin(strings.Repeat("a", 39-len(base))).names(t, "query", at)
	require.Equal(t, http.StatusForbidden, status)

	// A wrong password is the web config's 401, whatever the tenant.
	_, status = tenantClient{base: url, tenant: "teama", user: "alice", password: "pb"}.names(t, "query", at)
	require.Equal(t, http.StatusUnauthorized, status)

	// Every table of the account under the base name is one of the base database's or of
	// the two tenants'.
	tables := listTables(t, svc, base)
	for _, name := range tables {
		rest := strings.TrimPrefix(name, base)
		rest = strings.TrimPrefix(strings.TrimPrefix(rest, "xteama"), "xteamb")
		require.Regexp(t, `^(m|w|[rih]\d+|t\d+p\d+)$`, rest, name)
	}

	// /metrics counts the refusals and each tenant's writes apart.
	code, body := as("admin", "").do(t, http.MethodGet, "/metrics", nil, nil)
	require.Equal(t, http.StatusOK, code)
	for _, want := range []string{
		`tablets_tenant_refused_total{reason="user"} 32`, // 4 clients x 8 endpoints
		`tablets_tenant_refused_total{reason="not_allowed"} 9`,
		`tablets_tenant_refused_total{reason="bad_id"} 8`,
		`tablets_tenant_refused_total{reason="multi_tenant"} 2`,
		`tablets_remote_write_samples_written_total{tenant="teama"} 2`, // OTLP's included
		`tablets_remote_write_samples_written_total{tenant="teamb"} 2`,
		`tablets_otlp_samples_written_total{tenant="teama"} 1`,
		`tablets_tenants_open 3`,
	} {
		requireMetric(t, string(body), want)
	}
	requireMetric(t, string(body), `go_goroutines `) // once, the process's
}

// requireMetric fails unless the exposition holds a line starting with want.
func requireMetric(t *testing.T, exposition, want string) {
	t.Helper()
	name, _, _ := strings.Cut(want, "{")
	name, _, _ = strings.Cut(name, " ")
	var lines []string
	for line := range strings.Lines(exposition) {
		if strings.HasPrefix(line, want) {
			return
		}
		if strings.HasPrefix(line, name) {
			lines = append(lines, line)
		}
	}
	t.Fatalf("no %q in /metrics; %s:\n%s", want, name, strings.Join(lines, ""))
}

// listTables lists the account's tables whose names start with prefix.
func listTables(t *testing.T, svc *aztables.ServiceClient, prefix string) []string {
	t.Helper()
	var out []string
	for p := svc.NewListTablesPager(nil); p.More(); {
		page, err := p.NextPage(context.Background())
		require.NoError(t, err)
		for _, tb := range page.Tables {
			if strings.HasPrefix(*tb.Name, prefix) {
				out = append(out, *tb.Name)
			}
		}
	}
	slices.Sort(out)
	return out
}

func newHTTPTest(t *testing.T, h http.Handler) string {
	t.Helper()
	s := serve(t, h, false, nil)
	return "http://" + s.public
}

// Without a configuration, only the default tenant exists: a header naming another is 403,
// and no header, or "default", is the base database.
func TestTenantsWithoutConfig(t *testing.T) {
	svc, _, base := tenantService(t)
	front := newFront(t, svc, base, nil)
	url := newHTTPTest(t, front)
	at := time.Now().Add(-time.Minute).Truncate(time.Second)
	status, msg := tenantClient{base: url}.write(t, at, "x", "up")
	require.Equal(t, http.StatusNoContent, status, msg)
	names, status := tenantClient{base: url, tenant: limits.DefaultTenant}.names(t, "values", at)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, []string{"up"}, names)
	status, msg = tenantClient{base: url, tenant: "teama"}.write(t, at, "x", "up")
	require.Equal(t, http.StatusForbidden, status, msg)
	require.Contains(t, msg, `tenant "teama" is not allowed`)
	require.Equal(t, []string{limits.DefaultTenant}, front.Opened())
}

// A second front on the same account sees the tenants the first created, once it lists them
// (Sync: at the start of Run and every ListEvery; that Run runs them is
// TestTenantsRunListsTheAccount's); a read of a tenant found missing is
// answered empty from the cache for MissingFor, and sees the tenant's data after.
func TestTenantsSecondFront(t *testing.T) {
	ctx := context.Background()
	svc1, _, base := tenantService(t)
	svc2, checker2 := dbtest.NewService(t)
	cfg := newMutableConfig(t, "tenants:\n  allow: [\"*\"]\n")
	first := newFront(t, svc1, base, &server.TenantsOptions{Limits: cfg.load})
	clock := clock.New(time.Now())
	second := newFront(t, svc2, base, &server.TenantsOptions{Limits: cfg.load,
		Server: &server.Options{Now: clock.Now, FoldEvery: -1, RollupEvery: -1, CompactEvery: -1, RetainEvery: -1}})
	url1, url2 := newHTTPTest(t, first), newHTTPTest(t, second)
	at := time.Now().Add(-time.Minute).Truncate(time.Second)

	// The second reads teamc before it exists: empty, and remembered missing; the probe is
	// one listing request.
	probe := checker2.Stats()
	names, status := tenantClient{base: url2, tenant: "teamc"}.names(t, "values", at)
	require.Equal(t, http.StatusOK, status)
	require.Empty(t, names)
	after := checker2.Stats()
	require.EqualValues(t, 1, after.Requests-probe.Requests, "probing a missing tenant")
	t.Logf("probing a missing tenant: %d request, %d response bytes", after.Requests-probe.Requests, after.ResponseBytes-probe.ResponseBytes)

	for _, id := range []string{"teama", "teamb", "teamc"} {
		status, msg := tenantClient{base: url1, tenant: id}.write(t, at, id, id+"_metric")
		require.Equal(t, http.StatusNoContent, status, msg)
	}
	// Within MissingFor, the second takes teamc as missing without asking the account.
	before := checker2.Stats().Requests
	names, status = tenantClient{base: url2, tenant: "teamc"}.names(t, "values", at)
	require.Equal(t, http.StatusOK, status)
	require.Empty(t, names)
	require.Equal(t, before, checker2.Stats().Requests)
	clock.Add(server.DefaultMissingTenantFor)
	names, _ = tenantClient{base: url2, tenant: "teamc"}.names(t, "values", at)
	require.Equal(t, []string{"teamc_metric"}, names)
	require.Equal(t, []string{"default", "teamc"}, second.Opened())

	// Sync (Run's listing) opens the rest; teamb is no longer allowed: not opened.
	cfg.set(t, "tenants:\n  allow: [teama, teamc]\n")
	sync := checker2.Stats()
	require.NoError(t, second.Sync(ctx))
	synced := checker2.Stats()
	require.Equal(t, []string{"default", "teama", "teamc"}, second.Opened())
	// One listing, and teama's catalog made sure of (the only table an open asks for) and
	// its formats read (the raw format and the tier layout, one query).
	require.EqualValues(t, 3, synced.Requests-sync.Requests, "Sync")
	t.Logf("Sync opening one tenant: %d requests, %d response bytes", synced.Requests-sync.Requests, synced.ResponseBytes-sync.ResponseBytes)
	names, _ = tenantClient{base: url2, tenant: "teama"}.names(t, "values", at)
	require.Equal(t, []string{"teama_metric"}, names)
	_, status = tenantClient{base: url2, tenant: "teamb"}.names(t, "values", at)
	require.Equal(t, http.StatusForbidden, status)
}

// Each tenant's limits apply to its own requests through the front (an override of one
// tenant does not touch another), and every hit is counted with its tenant.
func TestTenantsLimitsPerTenant(t *testing.T) {
	svc, _, base := tenantService(t)
	cfg := newMutableConfig(t, "tenants:\n  allow: [teama, teamb]\noverrides:\n  teama:\n    max_series_per_request: 1\n")
	front := newFront(t, svc, base, &server.TenantsOptions{Limits: cfg.load})
	url := newHTTPTest(t, front)
	at := time.Now().Add(-time.Minute).Truncate(time.Second)
	status, msg := tenantClient{base: url, tenant: "teama"}.write(t, at, "a", "m1", "m2")
	require.Equal(t, http.StatusBadRequest, status, msg)
	require.Contains(t, msg, "max_series_per_request")
	status, msg = tenantClient{base: url, tenant: "teamb"}.write(t, at, "b", "m1", "m2")
	require.Equal(t, http.StatusNoContent, status, msg)
	status, msg = tenantClient{base: url}.write(t, at, "d", "m1", "m2")
	require.Equal(t, http.StatusNoContent, status, msg)

	code, body := tenantClient{base: url}.do(t, http.MethodGet, "/metrics", nil, nil)
	require.Equal(t, http.StatusOK, code)
	requireMetric(t, string(body), `tablets_limit_hits_total{limit="max_series_per_request",tenant="teama"} 1`)
	require.NotContains(t, string(body), `tablets_limit_hits_total{limit="max_series_per_request",tenant="teamb"}`)
}
