package soak

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A panel is one query of a dashboard, over one time range.
type panel struct {
	expr string
	rng  string        // "1h" or "7d": the dashboard's time range
	span time.Duration // the range
	step time.Duration // Grafana's step for it
}

// Grafana's steps: the range over its max data points (about a panel's width in pixels),
// rounded up to a round interval and no less than the scrape interval (the data source's
// min interval).
var ranges = []struct {
	name       string
	span, step time.Duration
}{
	{"1h", time.Hour, 15 * time.Second},
	{"7d", 7 * 24 * time.Hour, 10 * time.Minute},
}

// dashboard is the panels of the query mix: ten queries, over both ranges. Every
// aggregation keeps the tenant label, so that an answer says whose series it holds.
func dashboard() []panel {
	exprs := []string{
		`sum by (soak_tenant) (rate(soak_http_requests_total[5m]))`,
		`sum by (soak_tenant, job) (rate(soak_http_requests_total[5m]))`,
		`sum by (soak_tenant, code) (rate(soak_http_requests_total{code="500"}[5m]))`,
		`rate(soak_http_requests_total{instance="host-0:9100"}[5m])`,
		`histogram_quantile(0.99, sum by (soak_tenant, le) (rate(soak_request_duration_seconds_bucket[5m])))`,
		`histogram_quantile(0.5, sum by (soak_tenant, job, le) (rate(soak_request_duration_seconds_bucket[5m])))`,
		`sum by (soak_tenant) (rate(soak_request_duration_seconds_sum[5m])) / sum by (soak_tenant) (rate(soak_request_duration_seconds_count[5m]))`,
		`avg by (soak_tenant, job) (soak_memory_bytes)`,
		`max by (soak_tenant) (soak_memory_bytes)`,
		`topk(5, rate(soak_http_requests_total{code="200"}[5m]))`,
	}
	// The ranges alternate, so that a refresh slower than the run still answers both (in
	// ranges' order, the 7d panels would wait for every 1h one).
	var ps []panel
	for _, e := range exprs {
		for _, r := range ranges {
			ps = append(ps, panel{expr: e, rng: r.name, span: r.span, step: r.step})
		}
	}
	return ps
}

// browserConnections is how many queries a dashboard sends at once (a browser's
// connections to one host).
const browserConnections = 6

// QueryStats are the queries of all tenants.
type QueryStats struct {
	mu        sync.Mutex
	latencies map[string][]time.Duration // successful queries, per range
	Errors    map[string]int64           // per range
	// CrossTenant counts answers holding a series of another tenant (or of none).
	CrossTenant int64
	// Empty counts successful answers without a series.
	Empty int64
	// FirstCrossTenant describes the first cross-tenant answer, FirstError the first
	// failed query.
	FirstCrossTenant, FirstError string
}

func newQueryStats() *QueryStats {
	return &QueryStats{latencies: map[string][]time.Duration{}, Errors: map[string]int64{}}
}

// refresh runs a tenant's dashboard every interval until ctx ends: its panels, at most
// browserConnections at once. A refresh that takes longer delays the next one.
func refresh(ctx context.Context, client *http.Client, base, tenant, header string, every time.Duration, stats *QueryStats) {
	panels := dashboard()
	for {
		began := time.Now()
		sem := make(chan struct{}, browserConnections)
		var wg sync.WaitGroup
		for _, p := range panels {
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				queryPanel(ctx, client, base, tenant, header, p, stats)
			}()
		}
		wg.Wait()
		t := time.NewTimer(max(every-time.Since(began), 0))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// queryPanel runs one panel (query_range by POST form, as Grafana does) and records its
// latency and whose series it answered.
func queryPanel(ctx context.Context, client *http.Client, base, tenant, header string, p panel, stats *QueryStats) {
	now := time.Now()
	end := now.Truncate(p.step) // Grafana aligns the range to the step
	start := end.Add(-p.span)
	form := url.Values{
		"query": {p.expr},
		"start": {strconv.FormatInt(start.Unix(), 10)},
		"end":   {strconv.FormatInt(end.Unix(), 10)},
		"step":  {strconv.FormatFloat(p.step.Seconds(), 'f', -1, 64)},
	}
	began := time.Now()
	res, err := postQuery(ctx, client, base+"/api/v1/query_range", header, form)
	took := time.Since(began)
	if ctx.Err() != nil {
		return // the run ended: not an answer
	}
	stats.mu.Lock()
	defer stats.mu.Unlock()
	if err != nil {
		stats.Errors[p.rng]++
		if stats.FirstError == "" {
			stats.FirstError = shorten(fmt.Sprintf("tenant %s, %s over %s: %v", tenant, p.expr, p.rng, err), 400)
		}
		return
	}
	stats.latencies[p.rng] = append(stats.latencies[p.rng], took)
	if len(res) == 0 {
		stats.Empty++
	}
	for _, r := range res {
		if got := r.Metric["soak_tenant"]; got != tenant {
			stats.CrossTenant++
			if stats.FirstCrossTenant == "" {
				stats.FirstCrossTenant = fmt.Sprintf("tenant %s, query %s: a series of soak_tenant=%q", tenant, p.expr, got)
			}
			break
		}
	}
}

// result is one series of a query API answer; Value is an instant query's, Values a range
// query's.
type result struct {
	Metric map[string]string `json:"metric"`
	Value  []any             `json:"value"`
	Values [][]any           `json:"values"`
}

// postQuery posts a query API request and returns the answer's series, or an error for
// anything but a successful answer.
func postQuery(ctx context.Context, client *http.Client, u, header string, form url.Values) ([]result, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if header != "" {
		req.Header.Set(tenantHeader, header)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	var ans struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []result `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &ans); err != nil {
		return nil, fmt.Errorf("HTTP %d: %.200s", resp.StatusCode, body)
	}
	if resp.StatusCode != http.StatusOK || ans.Status != "success" {
		return nil, fmt.Errorf("HTTP %d: %s", resp.StatusCode, ans.Error)
	}
	return ans.Data.Result, nil
}

// Latency is the percentiles of one range's queries.
type Latency struct {
	Queries int64   `json:"queries"`
	Errors  int64   `json:"errors"`
	P50     float64 `json:"p50_seconds"`
	P99     float64 `json:"p99_seconds"`
	Max     float64 `json:"max_seconds"`
}

// latency summarizes the queries of each range.
func (s *QueryStats) latency() map[string]Latency {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]Latency{}
	for _, r := range ranges {
		d := append([]time.Duration(nil), s.latencies[r.name]...)
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		l := Latency{Queries: int64(len(d)), Errors: s.Errors[r.name]}
		if len(d) > 0 {
			l.P50, l.P99, l.Max = quantile(d, 0.5).Seconds(), quantile(d, 0.99).Seconds(), d[len(d)-1].Seconds()
		}
		out[r.name] = l
	}
	return out
}

// quantile is the q-quantile of sorted d (nearest rank).
func quantile(d []time.Duration, q float64) time.Duration {
	i := int(q*float64(len(d))+0.5) - 1
	return d[min(max(i, 0), len(d)-1)]
}

// shorten cuts s to at most n bytes (an error may quote a long URL of the account).
func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "..."
}
