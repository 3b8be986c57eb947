package promrun

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// remoteStub counts remote-write and remote-read requests. It answers reads with an empty
// result for one query, or with 500 while failRead is set.
type remoteStub struct {
	writes, reads, badWrites atomic.Int64
	failRead                 atomic.Bool
}

// emptyReadResponse is a snappy-compressed ReadResponse{results: [QueryResult{}]}: the
// protobuf is 0a 00 (field 1, length 0); the snappy block is its length (2) and one
// 2-byte literal (tag (2-1)<<2).
var emptyReadResponse = []byte{0x02, 0x04, 0x0a, 0x00}

func (s *remoteStub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	switch r.URL.Path {
	case "/write":
		s.writes.Add(1)
		if r.Header.Get("Content-Encoding") != "snappy" || r.Header.Get("X-Prometheus-Remote-Write-Version") != "0.1.0" {
			s.badWrites.Add(1)
		}
		w.WriteHeader(http.StatusNoContent)
	case "/read":
		s.reads.Add(1)
		if s.failRead.Load() {
			http.Error(w, "stub failure", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Header().Set("Content-Encoding", "snappy")
		_, _ = w.Write(emptyReadResponse)
	default:
		http.NotFound(w, r)
	}
}

// TestSelfScrape runs a Prometheus that scrapes itself every second until it holds six
// samples, remote-writes to and remote-reads from a stub, and checks what the API and
// promtool answer.
func TestSelfScrape(t *testing.T) {
	stub := &remoteStub{}
	srv := httptest.NewServer(stub)
	t.Cleanup(srv.Close)

	p := Start(t, Config{
		SelfScrapeJob: "prometheus",
		RemoteWrite:   []RemoteWrite{{URL: srv.URL + "/write"}},
		RemoteRead:    []RemoteRead{{URL: srv.URL + "/read"}},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	t0 := time.Now()
	if _, err := p.WaitFor(ctx, `up{job="prometheus"}`); err != nil {
		t.Fatal(err)
	}
	t.Logf("first scrape %s after start", time.Since(t0).Round(time.Millisecond))
	// Wait for a few more scrapes (one a second), then read the samples themselves: the
	// window and the expected answer follow from their timestamps, not from the clock.
	if _, err := p.WaitFor(ctx, `count_over_time(up{job="prometheus"}[1m]) >= 6`); err != nil {
		t.Fatal(err)
	}
	samples := rawSamples(t, p, `up{job="prometheus"}[10m]`) // all of them: it started less than a minute ago
	if len(samples) < 6 {
		t.Fatalf("%d samples after count_over_time said 6", len(samples))
	}
	first, last := samples[0].Time(), samples[len(samples)-1].Time()

	// End at the last sample (a whole second at or before it), so that the API and promtool
	// see the same samples whatever is scraped meanwhile.
	end := last.Truncate(time.Second)
	start := end.Add(-10 * time.Second)
	up, err := p.QueryRange(ctx, "up", start, end, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	self := up.Find(Labels{"job": "prometheus", "instance": p.Addr})
	if len(up) != 1 || len(self) != 1 {
		t.Fatalf("up: got %+v, want one series for job prometheus, instance %s", up, p.Addr)
	}
	// Every step from the first sample on has a value (the lookback is 5 minutes); none before.
	var want []Point
	for at := start; !at.After(end); at = at.Add(time.Second) {
		if !at.Before(first) {
			want = append(want, Point{T: at.UnixMilli(), V: 1})
		}
	}
	if !reflect.DeepEqual(self[0].Values, want) {
		t.Errorf("up: got %+v, want %+v (samples at %v)", self[0].Values, want, samples)
	}

	build, err := p.QueryRange(ctx, "prometheus_build_info", start, end, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(build) != 1 || !strings.HasPrefix(build[0].Metric["version"], VersionPrefix) || build[0].Metric["job"] != "prometheus" {
		t.Errorf("prometheus_build_info: got %+v, want one series with version %s*", build, VersionPrefix)
	}

	// promtool gets the same answers.
	for q, want := range map[string]Matrix{"up": up, "prometheus_build_info": build} {
		got, err := p.PromtoolQueryRange(ctx, q, start, end, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("promtool query range %s:\n got %+v\nwant %+v", q, got, want)
		}
	}
	if m, err := PromtoolQueryRange(ctx, p.URL(), "no_such_metric", start, end, time.Second); err != nil || len(m) != 0 {
		t.Errorf("promtool, no_such_metric: %+v, %v", m, err)
	}
	if _, err := p.PromtoolQueryRange(ctx, "up{", start, end, time.Second); err == nil || !strings.Contains(err.Error(), "parse error") {
		t.Errorf("promtool, bad query: err %v, want a parse error", err)
	}

	series, err := p.Series(ctx, `up`, start, end)
	if err != nil {
		t.Fatal(err)
	}
	if len(series) != 1 || series[0].String() != `up{instance="`+p.Addr+`", job="prometheus"}` {
		t.Errorf("series: %v", series)
	}
	jobs, err := p.LabelValues(ctx, "job", start, end)
	if err != nil || !reflect.DeepEqual(jobs, []string{"prometheus"}) {
		t.Errorf("label values of job: %q, %v", jobs, err)
	}
	if names, err := p.LabelValues(ctx, "__name__", time.Time{}, time.Time{}, `{__name__=~"prometheus_build_.*"}`); err != nil ||
		!reflect.DeepEqual(names, []string{"prometheus_build_info"}) {
		t.Errorf("metric names: %q, %v", names, err)
	}
	if names, err := p.LabelNames(ctx, start, end, "up"); err != nil || !reflect.DeepEqual(names, []string{"__name__", "instance", "job"}) {
		t.Errorf("label names of up: %q, %v", names, err)
	}
	var apiErr *APIError
	if _, err := p.QueryRange(ctx, "up{", start, end, time.Second); !errors.As(err, &apiErr) || apiErr.Type != "bad_data" {
		t.Errorf("bad query: err %v, want bad_data", err)
	}

	// Remote storage: the queue sends within a second; every query also went to remote read.
	if stub.writes.Load() == 0 || stub.badWrites.Load() != 0 {
		t.Errorf("remote write: %d requests, %d without snappy and version 0.1.0", stub.writes.Load(), stub.badWrites.Load())
	}
	if stub.reads.Load() == 0 {
		t.Error("no remote read request")
	}
	// A failed remote read is a warning; the local data still comes back.
	stub.failRead.Store(true)
	up2, err := p.QueryRange(ctx, "up", start, end, time.Second)
	var warn *WarningsError
	if !errors.As(err, &warn) || !reflect.DeepEqual(up2, up) {
		t.Errorf("failing remote read: err %v, want a WarningsError; data equal %v", err, reflect.DeepEqual(up2, up))
	}
	stub.failRead.Store(false)

	// Reload: add an external label.
	cfg := p.Config()
	cfg.ExternalLabels = map[string]string{"replica": "r1"}
	if err := p.Reload(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	data, err := p.API(ctx, "/api/v1/status/config", nil)
	if err != nil || !strings.Contains(string(data), "replica: r1") {
		t.Errorf("config after reload: %s, %v", data, err)
	}
}

// rawSamples returns the samples of the one series a range-vector selector selects now.
func rawSamples(t *testing.T, p *Prometheus, selector string) []Point {
	t.Helper()
	data, err := p.API(t.Context(), "/api/v1/query", url.Values{"query": {selector}})
	if err != nil {
		t.Fatal(err)
	}
	var m Matrix
	if err := result(data, "matrix", &m); err != nil {
		t.Fatal(err)
	}
	if len(m) != 1 {
		t.Fatalf("%s: %d series, want 1", selector, len(m))
	}
	return m[0].Values
}

// TestStartStop checks that Stop is clean and idempotent, and that Start rejects a bad
// configuration before starting anything.
func TestStartStop(t *testing.T) {
	Need(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := StartServer(ctx, t.TempDir(), Config{Args: []string{"--log.level=debug"}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(p.Args(), "--log.level=debug") {
		t.Errorf("args %q", p.Args())
	}
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := p.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if !p.Exited() || !strings.Contains(p.Log(), "See you next time") {
		t.Errorf("not stopped gracefully; log:\n%s", p.Log())
	}
	if _, err := StartServer(ctx, t.TempDir(), Config{RemoteWrite: []RemoteWrite{{}}}); err == nil {
		t.Error("no error for a remote_write without URL")
	}
}
