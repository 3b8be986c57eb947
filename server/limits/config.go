// Package limits is the configuration file of `tablets serve`: which tenants may exist, which
// basic-auth users may act for which tenants, and the limits of each tenant (global values
// with per-tenant overrides). The server reads it at start and again on SIGHUP.
//
//	tenants:
//	  allow: [teama, teamb]        # tenants a first write may create, besides "default"; "*": any valid ID
//	  users:                       # basic_auth users of --web.config.file, and their tenants
//	    prometheus-a: [teama]
//	    grafana: ["*"]
//	limits:                        # every tenant's, unless overridden
//	  ingestion_rate: 10000        # samples/s (a token bucket); 0: no limit
//	  max_series_per_request: 5000
//	overrides:
//	  teama:
//	    ingestion_rate: 50000      # the other fields stay those of limits
//	requests:
//	  max_body_bytes_waiting: 268435456
//
// A field left out keeps its default: for limits, the server's flags (--query.*), else 0,
// which means no limit. Unknown fields are errors, so a misspelled limit is not silently
// ignored.
package limits

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/prometheus/common/model"
	"gopkg.in/yaml.v3"

	"github.com/seed71701133/tablets"
)

// DefaultTenant is the tenant of a request without X-Scope-OrgID: the server's own database,
// as before tenants existed. A request may also name it.
const DefaultTenant = "default"

// MaxTenantIDLength bounds a tenant ID whatever the database name; the server bounds it
// further so that the tenant's database name fits (see the server's documentation).
const MaxTenantIDLength = 38

// Config is the whole file.
type Config struct {
	Tenants   Tenants           `yaml:"tenants"`
	Limits    Limits            `yaml:"limits"`
	Overrides map[string]Limits `yaml:"-"` // decoded over Limits, see UnmarshalYAML
	Requests  Requests          `yaml:"requests"`
}

// Tenants says which tenants may exist and who may act for them.
type Tenants struct {
	// Allow lists the tenants a first write may create (their databases), besides
	// DefaultTenant, which always exists. "*" allows any valid tenant ID. Empty: only the
	// default tenant; a request naming another is 403.
	Allow []string `yaml:"allow"`
	// Users binds basic-auth users (of the web config file) to the tenants each may act
	// for ("*": every allowed tenant). When it is set, every request must come from a
	// listed user, and a request for a tenant its user is not bound to is 403. Empty:
	// the X-Scope-OrgID header is trusted as sent (a trusted network, or a proxy that
	// authenticates).
	Users map[string][]string `yaml:"users"`
}

// Limits are one tenant's. Zero means no limit, except for the query limits, where zero
// means the server's flags.
type Limits struct {
	// IngestionRate is the samples per second a tenant may write, on average (a token
	// bucket per server). A native histogram sample counts 1.
	IngestionRate float64 `yaml:"ingestion_rate"`
	// IngestionBurstSize is the bucket's size, in samples (0: 10 seconds of IngestionRate).
	// A request with more samples can never be taken: 400.
	IngestionBurstSize int `yaml:"ingestion_burst_size"`
	// MaxSeriesPerRequest bounds the series of one remote write or OTLP request.
	MaxSeriesPerRequest int `yaml:"max_series_per_request"`
	// MaxLabelNamesPerSeries bounds a series' labels, __name__ included.
	MaxLabelNamesPerSeries int `yaml:"max_label_names_per_series"`
	// MaxLabelNameLength and MaxLabelValueLength bound a label's name and value, in bytes.
	MaxLabelNameLength  int `yaml:"max_label_name_length"`
	MaxLabelValueLength int `yaml:"max_label_value_length"`

	// MaxSamplesPerQuery is the engine's MaxSamples for the tenant's queries.
	MaxSamplesPerQuery int `yaml:"max_samples_per_query"`
	// QueryTimeout is the longest one of the tenant's queries may take.
	QueryTimeout model.Duration `yaml:"query_timeout"`
	// MaxConcurrentQueries is how many of the tenant's queries are evaluated at once.
	MaxConcurrentQueries int `yaml:"max_concurrent_queries"`
	// MaxSeriesPerSelect bounds the series one selector selects, in queries, the series
	// endpoint and remote read.
	MaxSeriesPerSelect int `yaml:"max_series_per_select"`

	// RulerMaxRuleGroupsPerTenant bounds the rule groups a tenant may store through the
	// ruler API; RulerMaxRulesPerRuleGroup the rules of one of them (Mimir's limits of the
	// same names). A set over either is 400; groups stored before a limit was lowered stay.
	RulerMaxRuleGroupsPerTenant int `yaml:"ruler_max_rule_groups_per_tenant"`
	RulerMaxRulesPerRuleGroup   int `yaml:"ruler_max_rules_per_rule_group"`
}

// Requests are limits of the whole server, not of a tenant.
type Requests struct {
	// MaxBodyBytesWaiting bounds the request body bytes (as sent) of the remote writes,
	// remote reads and OTLP requests being served at once, all tenants together (0:
	// DefaultMaxBodyBytesWaiting). A request that does not fit waits for room; one that
	// still does not fit after a while is answered 503 with Retry-After.
	MaxBodyBytesWaiting int64 `yaml:"max_body_bytes_waiting"`
	// RateLimitedStatus is the status of a write over its tenant's IngestionRate: 503
	// (default), which Prometheus retries, or 429, which it retries only with
	// retry_on_http_429: true (and drops otherwise). Both carry Retry-After.
	RateLimitedStatus int `yaml:"rate_limited_status"`
}

// DefaultMaxBodyBytesWaiting is the default of Requests.MaxBodyBytesWaiting: eight remote
// writes of the largest size a body may have.
const DefaultMaxBodyBytesWaiting = 256 << 20

// Load reads the file at path (see Parse).
func Load(path string, defaults Limits) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("limits: %w: %w", tablets.ErrInvalidOptions, err)
	}
	c, err := Parse(b, defaults)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// Parse reads a configuration. Fields of limits not in it keep defaults' values; an
// override's fields not in it keep limits' values. Errors wrap tablets.ErrInvalidOptions.
func Parse(data []byte, defaults Limits) (*Config, error) {
	c := &Config{Limits: defaults}
	var raw struct {
		Tenants   *Tenants             `yaml:"tenants"`
		Limits    yaml.Node            `yaml:"limits"`
		Overrides map[string]yaml.Node `yaml:"overrides"`
		Requests  *Requests            `yaml:"requests"`
	}
	raw.Tenants, raw.Requests = &c.Tenants, &c.Requests
	if err := decodeStrict(data, &raw); err != nil {
		return nil, invalid("%v", err)
	}
	if !raw.Limits.IsZero() {
		if err := decodeNode(&raw.Limits, &c.Limits); err != nil {
			return nil, invalid("limits: %v", err)
		}
	}
	for tenant, node := range raw.Overrides {
		l := c.Limits
		if err := decodeNode(&node, &l); err != nil {
			return nil, invalid("overrides: %s: %v", tenant, err)
		}
		if c.Overrides == nil {
			c.Overrides = map[string]Limits{}
		}
		c.Overrides[tenant] = l
	}
	if err := c.check(); err != nil {
		return nil, err
	}
	return c, nil
}

// For returns the limits of tenant: its override, or the global limits.
func (c *Config) For(tenant string) Limits {
	if l, ok := c.Overrides[tenant]; ok {
		return l
	}
	return c.Limits
}

// Allowed reports whether tenant may exist (DefaultTenant always may).
func (c *Config) Allowed(tenant string) bool {
	return tenant == DefaultTenant || slices.Contains(c.Tenants.Allow, "*") || slices.Contains(c.Tenants.Allow, tenant)
}

// MayActFor reports whether the basic-auth user may act for tenant (an allowed one). With
// no Users configured, anyone may: the header is trusted.
func (c *Config) MayActFor(user, tenant string) bool {
	if !c.Allowed(tenant) {
		return false
	}
	if len(c.Tenants.Users) == 0 {
		return true
	}
	ts, ok := c.Tenants.Users[user]
	return ok && (slices.Contains(ts, "*") || slices.Contains(ts, tenant))
}

// CheckTenantID reports whether id is a valid tenant ID: lowercase letters and digits, 1 to
// MaxTenantIDLength of them. Table names are case-insensitive in Azure, so "TeamA" and
// "teama" could not be two tenants; other characters cannot be in a table name.
func CheckTenantID(id string) error {
	if id == "" || len(id) > MaxTenantIDLength {
		return fmt.Errorf("tenant ID %q must be 1 to %d characters", id, MaxTenantIDLength)
	}
	for _, c := range id {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return fmt.Errorf("tenant ID %q must be lowercase letters and digits (it names the tenant's tables)", id)
		}
	}
	return nil
}

func (c *Config) check() error {
	for _, id := range c.Tenants.Allow {
		if id == "*" {
			continue
		}
		if err := CheckTenantID(id); err != nil {
			return invalid("tenants: allow: %v", err)
		}
	}
	for user, ts := range c.Tenants.Users {
		if user == "" {
			return invalid("tenants: users: an empty user name")
		}
		for _, id := range ts {
			if id == "*" {
				continue
			}
			if err := CheckTenantID(id); err != nil {
				return invalid("tenants: users: %s: %v", user, err)
			}
			if !c.Allowed(id) {
				return invalid("tenants: users: %s: tenant %q is not in tenants.allow", user, id)
			}
		}
	}
	if err := c.Limits.check(); err != nil {
		return invalid("limits: %v", err)
	}
	for tenant, l := range c.Overrides {
		if err := CheckTenantID(tenant); err != nil {
			return invalid("overrides: %v", err)
		}
		if err := l.check(); err != nil {
			return invalid("overrides: %s: %v", tenant, err)
		}
	}
	switch {
	case c.Requests.MaxBodyBytesWaiting < 0:
		return invalid("requests: max_body_bytes_waiting %d is negative", c.Requests.MaxBodyBytesWaiting)
	case c.Requests.MaxBodyBytesWaiting == 0:
		c.Requests.MaxBodyBytesWaiting = DefaultMaxBodyBytesWaiting
	}
	switch c.Requests.RateLimitedStatus {
	case 0:
		c.Requests.RateLimitedStatus = 503
	case 429, 503:
	default:
		return invalid("requests: rate_limited_status %d must be 503 or 429", c.Requests.RateLimitedStatus)
	}
	return nil
}

func (l Limits) check() error {
	if l.IngestionRate < 0 || l.IngestionRate != l.IngestionRate {
		return fmt.Errorf("ingestion_rate %v must be a number not negative", l.IngestionRate)
	}
	for name, v := range map[string]int{
		"ingestion_burst_size": l.IngestionBurstSize, "max_series_per_request": l.MaxSeriesPerRequest,
		"max_label_names_per_series": l.MaxLabelNamesPerSeries, "max_label_name_length": l.MaxLabelNameLength,
		"max_label_value_length": l.MaxLabelValueLength, "max_samples_per_query": l.MaxSamplesPerQuery,
		"max_concurrent_queries": l.MaxConcurrentQueries, "max_series_per_select": l.MaxSeriesPerSelect,
		"ruler_max_rule_groups_per_tenant": l.RulerMaxRuleGroupsPerTenant, "ruler_max_rules_per_rule_group": l.RulerMaxRulesPerRuleGroup,
	} {
		if v < 0 {
			return fmt.Errorf("%s %d is negative", name, v)
		}
	}
	if l.QueryTimeout < 0 {
		return fmt.Errorf("query_timeout %v is negative", time.Duration(l.QueryTimeout))
	}
	return nil
}

func decodeStrict(data []byte, v any) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

// decodeNode decodes n over v strictly (yaml.Node.Decode does not reject unknown fields).
func decodeNode(n *yaml.Node, v any) error {
	b, err := yaml.Marshal(n)
	if err != nil {
		return err
	}
	return decodeStrict(b, v)
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("limits: %w: "+format, append([]any{tablets.ErrInvalidOptions}, args...)...)
}
