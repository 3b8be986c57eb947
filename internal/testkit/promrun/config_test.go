package promrun

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// fullConfig sets every option.
var fullConfig = Config{
	ScrapeInterval: 2 * time.Second,
	SelfScrapeJob:  "prometheus",
	Scrape: []ScrapeJob{
		{Name: "tablets", Targets: []string{"127.0.0.1:8080", "127.0.0.1:8081"}, Interval: 500 * time.Millisecond, MetricsPath: "/m"},
	},
	ExternalLabels: map[string]string{"replica": "a", "cluster": `c"1`},
	RemoteWrite: []RemoteWrite{
		{URL: "http://127.0.0.1:8080/api/v1/write"},
		{
			URL: "http://127.0.0.1:8081/write", Name: "second", RemoteTimeout: 3 * time.Second,
			Headers: map[string]string{"X-Scope": "t1"},
			Queue: QueueConfig{Capacity: 100, MinShards: 1, MaxShards: 2, MaxSamplesPerSend: 50,
				BatchSendDeadline: 250 * time.Millisecond, MinBackoff: 10 * time.Millisecond, MaxBackoff: time.Minute,
				RetryOnHTTP429: true},
			NoMetadata: true, SendExemplars: true, SendNativeHistograms: true,
		},
		{URL: "http://127.0.0.1:8082/write", MetadataInterval: 5 * time.Second},
	},
	RemoteRead: []RemoteRead{
		{URL: "http://127.0.0.1:8080/api/v1/read"},
		{URL: "http://127.0.0.1:8081/read", Name: "r2", RemoteTimeout: 90 * time.Second,
			Headers: map[string]string{"X-Scope": "t1"}, RequiredMatchers: map[string]string{"job": "tablets"},
			SkipRecent: true, NoFilterExternalLabels: true},
	},
}

const fullYAML = `global:
  scrape_interval: 2s
  scrape_timeout: 2s
  evaluation_interval: 2s
  external_labels:
    "cluster": "c\"1"
    "replica": "a"
scrape_configs:
  - job_name: "prometheus"
    static_configs:
      - targets: ["127.0.0.1:9999"]
  - job_name: "tablets"
    scrape_interval: 500ms
    scrape_timeout: 500ms
    metrics_path: "/m"
    static_configs:
      - targets: ["127.0.0.1:8080", "127.0.0.1:8081"]
remote_write:
  - url: "http://127.0.0.1:8080/api/v1/write"
    remote_timeout: 10s
    queue_config:
      batch_send_deadline: 1s
      min_backoff: 100ms
      max_backoff: 1s
  - url: "http://127.0.0.1:8081/write"
    name: "second"
    remote_timeout: 3s
    headers:
      "X-Scope": "t1"
    send_exemplars: true
    send_native_histograms: true
    queue_config:
      capacity: 100
      min_shards: 1
      max_shards: 2
      max_samples_per_send: 50
      batch_send_deadline: 250ms
      min_backoff: 10ms
      max_backoff: 1m
      retry_on_http_429: true
    metadata_config:
      send: false
  - url: "http://127.0.0.1:8082/write"
    remote_timeout: 10s
    queue_config:
      batch_send_deadline: 1s
      min_backoff: 100ms
      max_backoff: 1s
    metadata_config:
      send: true
      send_interval: 5s
remote_read:
  - url: "http://127.0.0.1:8080/api/v1/read"
    remote_timeout: 10s
    read_recent: true
  - url: "http://127.0.0.1:8081/read"
    name: "r2"
    remote_timeout: 90s
    headers:
      "X-Scope": "t1"
    read_recent: false
    required_matchers:
      "job": "tablets"
    filter_external_labels: false
`

func TestConfigYAML(t *testing.T) {
	got, err := fullConfig.YAML("127.0.0.1:9999")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != fullYAML {
		t.Errorf("got\n%s\nwant\n%s", got, fullYAML)
	}

	got, err = Config{}.YAML("127.0.0.1:9999")
	if err != nil {
		t.Fatal(err)
	}
	if want := "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n"; string(got) != want {
		t.Errorf("zero Config: got\n%s\nwant\n%s", got, want)
	}

	for _, bad := range []Config{
		{RemoteWrite: []RemoteWrite{{}}},
		{RemoteRead: []RemoteRead{{}}},
		{SelfScrapeJob: "x", Scrape: []ScrapeJob{{Name: "x"}}},
		{Scrape: []ScrapeJob{{}}},
		{ScrapeInterval: -time.Second},
	} {
		if _, err := bad.YAML("127.0.0.1:9999"); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
}

// TestConfigCheck has promtool check the rendered configuration (and so that every option
// exists in Prometheus 2.42).
func TestConfigCheck(t *testing.T) {
	b := Need(t)
	y, err := fullConfig.YAML("127.0.0.1:9999")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "prometheus.yml")
	if err := os.WriteFile(file, y, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := b.RunPromtool(ctx, "check", "config", file); err != nil {
		t.Fatalf("%v\nconfig:\n%s", err, y)
	} else {
		t.Logf("%s", out)
	}
}

func TestDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0s", time.Second: "1s", 90 * time.Second: "90s", 2 * time.Minute: "2m", 3 * time.Hour: "3h",
		1500 * time.Millisecond: "1500ms", 100 * time.Millisecond: "100ms", time.Microsecond: "1ms",
	} {
		if got := duration(d); got != want {
			t.Errorf("duration(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestMergeFlags(t *testing.T) {
	got := mergeFlags([]string{"--a=1", "--web.enable-lifecycle", "--c=3"}, []string{"--c=4", "--no-web.enable-lifecycle", "--d"})
	want := []string{"--a=1", "--c=4", "--no-web.enable-lifecycle", "--d"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestPointJSON(t *testing.T) {
	var m Matrix
	in := `[{"metric":{"__name__":"up","job":"j"},"values":[[1795419990,"1"],[1795419990.5,"NaN"],[1795419991.25,"+Inf"],[1795419992.001,"-2.5e-3"]]}]`
	if err := json.Unmarshal([]byte(in), &m); err != nil {
		t.Fatal(err)
	}
	if len(m) != 1 || m[0].Metric.String() != `up{job="j"}` || len(m[0].Values) != 4 {
		t.Fatalf("decoded %+v", m)
	}
	v := m[0].Values
	if v[0] != (Point{1795419990000, 1}) || v[1].T != 1795419990500 || v[1].V == v[1].V ||
		v[2] != (Point{1795419991250, math.Inf(1)}) || v[3] != (Point{1795419992001, -0.0025}) {
		t.Errorf("decoded %+v", v)
	}
	out, err := json.Marshal(v[3])
	if err != nil || string(out) != `[1795419992.001,"-0.0025"]` {
		t.Errorf("encoded %s, %v", out, err)
	}
	if len(m.Find(Labels{"job": "j"})) != 1 || len(m.Find(Labels{"job": "k"})) != 0 {
		t.Error("Find")
	}
	if err := json.Unmarshal([]byte(`[[1,2]]`), new([]Point)); err == nil || !strings.Contains(err.Error(), "value") {
		t.Errorf("numeric value: err %v", err)
	}
}
