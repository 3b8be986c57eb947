package limits

import (
	"errors"
	"testing"
	"time"

	"github.com/prometheus/common/model"

	"github.com/seed71701133/tablets"
)

func TestParseOverridesKeepGlobals(t *testing.T) {
	defaults := Limits{MaxSamplesPerQuery: 50_000_000, QueryTimeout: model.Duration(2 * time.Minute)}
	c, err := Parse([]byte(`
tenants:
  allow: [teama, teamb]
  users:
    prom: [teama]
    grafana: ["*"]
limits:
  ingestion_rate: 1000
  max_series_per_request: 500
  query_timeout: 30s
overrides:
  teama:
    ingestion_rate: 5000
`), defaults)
	if err != nil {
		t.Fatal(err)
	}
	a, b := c.For("teama"), c.For("teamb")
	if a.IngestionRate != 5000 || a.MaxSeriesPerRequest != 500 || time.Duration(a.QueryTimeout) != 30*time.Second || a.MaxSamplesPerQuery != 50_000_000 {
		t.Errorf("teama's limits = %+v", a)
	}
	if b.IngestionRate != 1000 || b.MaxSeriesPerRequest != 500 {
		t.Errorf("teamb's limits = %+v", b)
	}
	if c.Requests.MaxBodyBytesWaiting != DefaultMaxBodyBytesWaiting || c.Requests.RateLimitedStatus != 503 {
		t.Errorf("requests = %+v", c.Requests)
	}
	for _, tc := range []struct {
		user, tenant string
		want         bool
	}{
		{"prom", "teama", true}, {"prom", "teamb", false}, {"grafana", "teamb", true},
		{"grafana", "teamc", false}, {"nobody", "teama", false}, {"prom", DefaultTenant, false},
	} {
		if got := c.MayActFor(tc.user, tc.tenant); got != tc.want {
			t.Errorf("MayActFor(%q, %q) = %v, want %v", tc.user, tc.tenant, got, tc.want)
		}
	}
}

func TestParseEmptyIsDefaults(t *testing.T) {
	d := Limits{MaxConcurrentQueries: 20}
	c, err := Parse(nil, d)
	if err != nil {
		t.Fatal(err)
	}
	if c.For("x") != d || !c.Allowed(DefaultTenant) || c.Allowed("x") || !c.MayActFor("anyone", DefaultTenant) {
		t.Errorf("empty config: %+v", c)
	}
}

func TestParseRejects(t *testing.T) {
	for _, doc := range []string{
		"limits: {ingestion_rat: 5}",
		"overrides: {teama: {max_series_per_reqest: 5}}",
		"limits: {ingestion_rate: -1}",
		"limits: {max_label_name_length: -1}",
		"overrides: {TeamA: {ingestion_rate: 5}}",
		"tenants: {allow: [team-a]}",
		"tenants: {allow: [teama], users: {u: [teamb]}}",
		"requests: {rate_limited_status: 500}",
		"requests: {max_body_bytes_waiting: -1}",
		"limits: [1, 2]",
		"limits: {query_timeout: soon}",
	} {
		if _, err := Parse([]byte(doc), Limits{}); !errors.Is(err, tablets.ErrInvalidOptions) {
			t.Errorf("Parse(%q) = %v, want ErrInvalidOptions", doc, err)
		}
	}
}

func TestCheckTenantID(t *testing.T) {
	for id, ok := range map[string]bool{"a": true, "team1": true, "0": true, "": false, "Team": false, "team-a": false,
		"tenant_1": false, "a|b": false, string(make([]byte, MaxTenantIDLength+1)): false} {
		if err := CheckTenantID(id); (err == nil) != ok {
			t.Errorf("CheckTenantID(%q) = %v", id, err)
		}
	}
}
