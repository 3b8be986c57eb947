package promrun

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"time"
)

// Config describes the Prometheus that [Start] runs. The zero value runs a Prometheus with
// no targets and no remote storage.
type Config struct {
	// ScrapeInterval is the global scrape_interval and evaluation_interval; 0 means 1s.
	ScrapeInterval time.Duration
	// SelfScrapeJob, if set, adds a scrape job of that name for Prometheus's own /metrics.
	SelfScrapeJob string
	// Scrape lists further scrape jobs.
	Scrape []ScrapeJob
	// ExternalLabels are the global external_labels (added to remote-written series, and
	// added as matchers to remote-read queries unless a RemoteRead sets
	// NoFilterExternalLabels).
	ExternalLabels map[string]string
	// RemoteWrite lists the remote_write endpoints (protocol 1.0: Prometheus 2.42 has no
	// remote write 2.0).
	RemoteWrite []RemoteWrite
	// RemoteRead lists the remote_read endpoints.
	RemoteRead []RemoteRead
	// RuleFiles are the rule_files (paths or globs), evaluated at the global
	// evaluation_interval (ScrapeInterval) unless a group sets its own.
	RuleFiles []string
	// Alertmanagers are the URLs (http://host:port[/prefix]) of the Alertmanagers the
	// alerts are sent to (alerting.alertmanagers, API v2, one static target each).
	Alertmanagers []string
	// Args are extra command-line flags, appended after the harness's (a repeated flag
	// overrides: e.g. "--query.lookback-delta=1m", "--storage.remote.flush-deadline=10s").
	Args []string
}

// ScrapeJob is a scrape job with static targets.
type ScrapeJob struct {
	Name    string
	Targets []string // host:port
	// Interval is the job's scrape_interval; 0 means the global one.
	Interval time.Duration
	// MetricsPath is the job's metrics_path; "" means /metrics.
	MetricsPath string
}

// RemoteWrite is a remote_write endpoint.
type RemoteWrite struct {
	URL  string
	Name string // optional; must be unique among the remote_write endpoints
	// RemoteTimeout is the request timeout; 0 means 10s (Prometheus's default: 30s).
	RemoteTimeout time.Duration
	Headers       map[string]string
	// Queue tunes the queue; its zero fields take the test defaults listed there.
	Queue QueueConfig
	// NoMetadata stops Prometheus from sending metric metadata (requests that carry metadata
	// and no series, every MetadataInterval; 0 means Prometheus's default, 1m).
	NoMetadata       bool
	MetadataInterval time.Duration
	// SendExemplars sets send_exemplars (Prometheus stores exemplars only with
	// Args "--enable-feature=exemplar-storage").
	SendExemplars bool
	// SendNativeHistograms sets send_native_histograms (Prometheus 2.42 scrapes native
	// histograms only with Args "--enable-feature=native-histograms"; without this option it
	// does not remote-write them).
	SendNativeHistograms bool
	// BasicAuth, if set, is sent with every request (basic_auth).
	BasicAuth *BasicAuth
	// TLSCAFile, if set, is the tls_config ca_file that verifies an https URL's server.
	TLSCAFile string
	// TLSCertFile and TLSKeyFile, if set, are the tls_config cert_file and key_file:
	// the client certificate Prometheus presents (mutual TLS).
	TLSCertFile, TLSKeyFile string
}

// BasicAuth is a remote_write basic_auth.
type BasicAuth struct{ Username, Password string }

// QueueConfig is a remote_write queue_config. Zero fields of the durations take the test
// defaults: BatchSendDeadline 1s, MinBackoff 100ms, MaxBackoff 1s (Prometheus's own: 5s, 30ms,
// 5s); zero counts are left out (Prometheus's defaults: capacity 2500, min_shards 1,
// max_shards 200, max_samples_per_send 500).
type QueueConfig struct {
	Capacity          int
	MinShards         int
	MaxShards         int
	MaxSamplesPerSend int
	BatchSendDeadline time.Duration
	MinBackoff        time.Duration
	MaxBackoff        time.Duration
	// RetryOnHTTP429 sets retry_on_http_429: retry on 429 Too Many Requests (otherwise a 429
	// drops the batch, like other 4xx answers).
	RetryOnHTTP429 bool
}

// RemoteRead is a remote_read endpoint. Prometheus 2.42 sends one query per request and no
// accepted_response_types, so it wants the SAMPLES response (a snappy-compressed ReadResponse
// protobuf); it has no label-name or label-value queries (see [Prometheus.LabelValues]).
type RemoteRead struct {
	URL  string
	Name string // optional; must be unique among the remote_read endpoints
	// RemoteTimeout is the request timeout; 0 means 10s (Prometheus's default: 1m).
	RemoteTimeout time.Duration
	Headers       map[string]string
	// RequiredMatchers: only queries with these equality matchers go to the endpoint.
	RequiredMatchers map[string]string
	// SkipRecent sets read_recent: false, so that queries whose range the local TSDB covers
	// are not sent to the endpoint. By default read_recent is true: every query goes to the
	// endpoint (and is merged with the local TSDB's answer).
	SkipRecent bool
	// NoFilterExternalLabels sets filter_external_labels: false (by default Prometheus adds
	// the external labels as matchers to remote-read queries).
	NoFilterExternalLabels bool
}

// Defaults applied by [Config.YAML].
const (
	DefaultScrapeInterval    = time.Second
	DefaultRemoteTimeout     = 10 * time.Second
	DefaultBatchSendDeadline = time.Second
	DefaultMinBackoff        = 100 * time.Millisecond
	DefaultMaxBackoff        = time.Second
)

// YAML renders the configuration as a prometheus.yml for a Prometheus listening on self
// (host:port, the self-scrape target).
func (c Config) YAML(self string) ([]byte, error) {
	var w yamlWriter
	interval := c.ScrapeInterval
	if interval == 0 {
		interval = DefaultScrapeInterval
	}
	if interval < 0 {
		return nil, errors.New("promrun: negative ScrapeInterval")
	}
	w.line(0, "global:")
	w.kv(1, "scrape_interval", duration(interval))
	w.kv(1, "scrape_timeout", duration(min(interval, 10*time.Second)))
	w.kv(1, "evaluation_interval", duration(interval))
	w.strMap(1, "external_labels", c.ExternalLabels)

	jobs := c.Scrape
	if c.SelfScrapeJob != "" {
		jobs = append([]ScrapeJob{{Name: c.SelfScrapeJob, Targets: []string{self}}}, jobs...)
	}
	seen := map[string]bool{}
	if len(jobs) > 0 {
		w.line(0, "scrape_configs:")
	}
	for _, j := range jobs {
		if j.Name == "" || seen[j.Name] {
			return nil, fmt.Errorf("promrun: scrape job name %q empty or repeated", j.Name)
		}
		seen[j.Name] = true
		w.kv(1, "- job_name", quote(j.Name))
		if j.Interval > 0 {
			w.kv(2, "scrape_interval", duration(j.Interval))
			w.kv(2, "scrape_timeout", duration(min(j.Interval, interval, 10*time.Second)))
		}
		if j.MetricsPath != "" {
			w.kv(2, "metrics_path", quote(j.MetricsPath))
		}
		w.line(2, "static_configs:")
		w.kv(3, "- targets", quoteList(j.Targets))
	}

	if len(c.RemoteWrite) > 0 {
		w.line(0, "remote_write:")
	}
	for _, rw := range c.RemoteWrite {
		if rw.URL == "" {
			return nil, errors.New("promrun: remote_write without URL")
		}
		w.kv(1, "- url", quote(rw.URL))
		if rw.Name != "" {
			w.kv(2, "name", quote(rw.Name))
		}
		w.kv(2, "remote_timeout", duration(or(rw.RemoteTimeout, DefaultRemoteTimeout)))
		w.strMap(2, "headers", rw.Headers)
		if rw.BasicAuth != nil {
			w.line(2, "basic_auth:")
			w.kv(3, "username", quote(rw.BasicAuth.Username))
			w.kv(3, "password", quote(rw.BasicAuth.Password))
		}
		if rw.TLSCAFile != "" || rw.TLSCertFile != "" {
			w.line(2, "tls_config:")
			if rw.TLSCAFile != "" {
				w.kv(3, "ca_file", quote(rw.TLSCAFile))
			}
			if rw.TLSCertFile != "" {
				w.kv(3, "cert_file", quote(rw.TLSCertFile))
				w.kv(3, "key_file", quote(rw.TLSKeyFile))
			}
		}
		if rw.SendExemplars {
			w.kv(2, "send_exemplars", "true")
		}
		if rw.SendNativeHistograms {
			w.kv(2, "send_native_histograms", "true")
		}
		q := rw.Queue
		w.line(2, "queue_config:")
		for _, n := range []struct {
			key string
			v   int
		}{{"capacity", q.Capacity}, {"min_shards", q.MinShards}, {"max_shards", q.MaxShards}, {"max_samples_per_send", q.MaxSamplesPerSend}} {
			if n.v != 0 {
				w.kv(3, n.key, fmt.Sprint(n.v))
			}
		}
		w.kv(3, "batch_send_deadline", duration(or(q.BatchSendDeadline, DefaultBatchSendDeadline)))
		w.kv(3, "min_backoff", duration(or(q.MinBackoff, DefaultMinBackoff)))
		w.kv(3, "max_backoff", duration(or(q.MaxBackoff, DefaultMaxBackoff)))
		if q.RetryOnHTTP429 {
			w.kv(3, "retry_on_http_429", "true")
		}
		if rw.NoMetadata || rw.MetadataInterval > 0 {
			w.line(2, "metadata_config:")
			w.kv(3, "send", fmt.Sprint(!rw.NoMetadata))
			if rw.MetadataInterval > 0 {
				w.kv(3, "send_interval", duration(rw.MetadataInterval))
			}
		}
	}

	if len(c.RuleFiles) > 0 {
		w.kv(0, "rule_files", quoteList(c.RuleFiles))
	}
	if len(c.Alertmanagers) > 0 {
		w.line(0, "alerting:")
		w.line(1, "alertmanagers:")
	}
	for _, am := range c.Alertmanagers {
		u, err := url.Parse(am)
		if err != nil || u.Host == "" {
			return nil, fmt.Errorf("promrun: Alertmanager URL %q: want http://host:port[/prefix]", am)
		}
		w.kv(2, "- scheme", quote(u.Scheme))
		w.kv(3, "api_version", "v2")
		if u.Path != "" {
			w.kv(3, "path_prefix", quote(u.Path))
		}
		w.line(3, "static_configs:")
		w.kv(4, "- targets", quoteList([]string{u.Host}))
	}

	if len(c.RemoteRead) > 0 {
		w.line(0, "remote_read:")
	}
	for _, rr := range c.RemoteRead {
		if rr.URL == "" {
			return nil, errors.New("promrun: remote_read without URL")
		}
		w.kv(1, "- url", quote(rr.URL))
		if rr.Name != "" {
			w.kv(2, "name", quote(rr.Name))
		}
		w.kv(2, "remote_timeout", duration(or(rr.RemoteTimeout, DefaultRemoteTimeout)))
		w.strMap(2, "headers", rr.Headers)
		w.kv(2, "read_recent", fmt.Sprint(!rr.SkipRecent))
		w.strMap(2, "required_matchers", rr.RequiredMatchers)
		if rr.NoFilterExternalLabels {
			w.kv(2, "filter_external_labels", "false")
		}
	}
	return []byte(w.b.String()), nil
}

func or(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// duration formats d as a Prometheus duration: whole hours, minutes or seconds if d is one,
// else milliseconds (rounded up, so that a positive duration stays positive).
func duration(d time.Duration) string {
	switch {
	case d%time.Hour == 0 && d != 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0 && d != 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	case d%time.Second == 0:
		return fmt.Sprintf("%ds", d/time.Second)
	default:
		return fmt.Sprintf("%dms", (d+time.Millisecond-1)/time.Millisecond)
	}
}

// quote returns s as a double-quoted YAML scalar (a JSON string is one).
func quote(s string) string {
	b, _ := json.Marshal(s) // a string always marshals
	return string(b)
}

func quoteList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = quote(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

type yamlWriter struct{ b strings.Builder }

func (w *yamlWriter) line(indent int, s string) {
	w.b.WriteString(strings.Repeat("  ", indent))
	w.b.WriteString(s)
	w.b.WriteByte('\n')
}

func (w *yamlWriter) kv(indent int, k, v string) { w.line(indent, k+": "+v) }

// strMap writes a mapping of strings under key, sorted; nothing if m is empty.
func (w *yamlWriter) strMap(indent int, key string, m map[string]string) {
	if len(m) == 0 {
		return
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	w.line(indent, key+":")
	for _, k := range keys {
		w.kv(indent+1, quote(k), quote(m[k]))
	}
}
