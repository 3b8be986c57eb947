package rules

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	config_util "github.com/prometheus/common/config"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/config"
	"github.com/prometheus/prometheus/discovery"
	"github.com/prometheus/prometheus/discovery/targetgroup"
	"github.com/prometheus/prometheus/model/labels"
	"gopkg.in/yaml.v3"

	"github.com/seed71701133/tablets"
)

// TenantHeader is the header naming the tenant of the notifications of a tenant other than
// the default one, as Cortex's and Mimir's rulers send it to their multi-tenant
// Alertmanager (a Prometheus Alertmanager ignores it).
const TenantHeader = "X-Scope-OrgID"

// alertmanagerConfigs makes Prometheus' configuration of one Alertmanager a URL, as
// `alerting.alertmanagers` would say it with one static target each: API v2, its
// scheme, host and path prefix, basic auth from its user information, timeout; then those
// of alerting (an `alerting` section, its static targets); and the target groups to feed
// the notifier (one per configuration, keyed as the notifier keys them: config-0,
// config-1, ...). With a tenant, every request to an Alertmanager names it (TenantHeader).
func alertmanagerConfigs(urls []string, alerting *config.AlertingConfig, timeout time.Duration, tenant string) (*config.Config, map[string][]*targetgroup.Group, error) {
	cfg := &config.Config{}
	tsets := map[string][]*targetgroup.Group{}
	for i, raw := range urls {
		u, err := url.Parse(raw)
		if err != nil {
			return nil, nil, fmt.Errorf("rules: %w: Alertmanager URL %q: %v", tablets.ErrInvalidOptions, raw, err)
		}
		if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			return nil, nil, fmt.Errorf("rules: %w: Alertmanager URL %q: want http(s)://host[:port][/path prefix]", tablets.ErrInvalidOptions, raw)
		}
		am := config.DefaultAlertmanagerConfig
		am.Scheme = u.Scheme
		am.PathPrefix = strings.TrimSuffix(u.Path, "/")
		am.Timeout = model.Duration(timeout)
		am.APIVersion = config.AlertmanagerAPIVersionV2
		if u.User != nil {
			pw, _ := u.User.Password()
			am.HTTPClientConfig.BasicAuth = &config_util.BasicAuth{Username: u.User.Username(), Password: config_util.Secret(pw)}
		}
		withTenant(&am, tenant)
		if err := am.HTTPClientConfig.Validate(); err != nil {
			return nil, nil, fmt.Errorf("rules: %w: Alertmanager URL %q: %v", tablets.ErrInvalidOptions, raw, err)
		}
		cfg.AlertingConfig.AlertmanagerConfigs = append(cfg.AlertingConfig.AlertmanagerConfigs, &am)
		tsets[fmt.Sprintf("config-%d", i)] = []*targetgroup.Group{{
			Source:  raw,
			Targets: []model.LabelSet{{model.AddressLabel: model.LabelValue(u.Host)}},
		}}
	}
	if alerting == nil {
		return cfg, tsets, nil
	}
	cfg.AlertingConfig.AlertRelabelConfigs = alerting.AlertRelabelConfigs
	for j, c := range alerting.AlertmanagerConfigs {
		am := *c
		var groups []*targetgroup.Group
		for _, sd := range am.ServiceDiscoveryConfigs {
			static, ok := sd.(discovery.StaticConfig)
			if !ok {
				return nil, nil, fmt.Errorf("rules: %w: alerting.alertmanagers[%d]: %s service discovery: only static_configs are supported",
					tablets.ErrInvalidOptions, j, sd.Name())
			}
			groups = append(groups, static...)
		}
		withTenant(&am, tenant)
		i := len(cfg.AlertingConfig.AlertmanagerConfigs)
		cfg.AlertingConfig.AlertmanagerConfigs = append(cfg.AlertingConfig.AlertmanagerConfigs, &am)
		tsets[fmt.Sprintf("config-%d", i)] = groups
	}
	return cfg, tsets, nil
}

// withTenant has every request of am name tenant, if not "" (TenantHeader).
func withTenant(am *config.AlertmanagerConfig, tenant string) {
	if tenant == "" {
		return
	}
	headers := map[string]config_util.Header{}
	if am.HTTPClientConfig.HTTPHeaders != nil {
		for k, v := range am.HTTPClientConfig.HTTPHeaders.Headers {
			headers[k] = v
		}
	}
	headers[TenantHeader] = config_util.Header{Values: []string{tenant}}
	am.HTTPClientConfig.HTTPHeaders = &config_util.Headers{Headers: headers}
}

// ErrNoAlerting is LoadAlerting's error for a file without an alerting section.
var ErrNoAlerting = errors.New("rules: no alerting section")

// LoadAlerting reads the `alerting` section of a Prometheus configuration file (other
// sections are not read: a Prometheus' own file may be given): its alertmanagers, as
// Prometheus reads them (API version, scheme, path prefix, timeout, HTTP client
// configuration, relabeling), whose targets are static_configs, and its
// alert_relabel_configs. Errors wrap tablets.ErrInvalidOptions and name the file.
func LoadAlerting(path string) (*config.AlertingConfig, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("rules: %w: %v", tablets.ErrInvalidOptions, err)
	}
	var sections map[string]yaml.Node
	if err := yaml.Unmarshal(b, &sections); err != nil {
		return nil, fmt.Errorf("rules: %w: %s: %v", tablets.ErrInvalidOptions, path, err)
	}
	node, ok := sections["alerting"]
	if !ok {
		return nil, fmt.Errorf("%w in %s", ErrNoAlerting, path)
	}
	section, err := yaml.Marshal(map[string]*yaml.Node{"alerting": &node})
	if err != nil {
		return nil, fmt.Errorf("rules: %w: %s: %v", tablets.ErrInvalidOptions, path, err)
	}
	cfg, err := config.Load(string(section), slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, fmt.Errorf("rules: %w: %s: %v", tablets.ErrInvalidOptions, path, err)
	}
	for j, am := range cfg.AlertingConfig.AlertmanagerConfigs {
		for _, sd := range am.ServiceDiscoveryConfigs {
			if _, ok := sd.(discovery.StaticConfig); !ok {
				return nil, fmt.Errorf("rules: %w: %s: alerting.alertmanagers[%d]: %s service discovery: only static_configs are supported",
					tablets.ErrInvalidOptions, path, j, sd.Name())
			}
		}
	}
	return &cfg.AlertingConfig, nil
}

// withExternalLabels sets the external labels the notifier adds to every alert.
func withExternalLabels(cfg *config.Config, ls labels.Labels) *config.Config {
	cfg.GlobalConfig.ExternalLabels = ls
	return cfg
}

// swappable is a collector registered once whose metrics are those of the collectors
// handed to it last: the notifier of each Run registers anew metrics a registry takes only
// once. A new notifier's counters start at 0, as after a restart. It describes nothing (an
// unchecked collector): what it collects changes with each notifier.
type swappable struct {
	mu         sync.Mutex
	collectors []prometheus.Collector
}

// recorder is a Registerer keeping what is registered with it for swap.
type recorder struct{ collectors []prometheus.Collector }

func (r *recorder) Register(c prometheus.Collector) error {
	r.collectors = append(r.collectors, c)
	return nil
}

func (r *recorder) MustRegister(cs ...prometheus.Collector) {
	r.collectors = append(r.collectors, cs...)
}

func (r *recorder) Unregister(prometheus.Collector) bool { return false }

func (s *swappable) swap(cs []prometheus.Collector) {
	s.mu.Lock()
	s.collectors = cs
	s.mu.Unlock()
}

func (s *swappable) Describe(chan<- *prometheus.Desc) {}

func (s *swappable) Collect(ch chan<- prometheus.Metric) {
	s.mu.Lock()
	cs := s.collectors
	s.mu.Unlock()
	for _, c := range cs {
		c.Collect(ch)
	}
}
