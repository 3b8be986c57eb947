package soak

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
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
// p99Goal is issue 36's target for the range's panels: every query answered, and the p99
// of the answers within it.
var ranges = []struct {
	name       string
	span, step time.Duration
	p99Goal    time.Duration
}{
	{"1h", time.Hour, 15 * time.Second, 2500 * time.Millisecond},
	{"7d", 7 * 24 * time.Hour, 10 * time.Minute, 5 * time.Second},
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
	mu      sync.Mutex
	began   time.Time          // the load's start, which a query's time is counted from
	outage  [2]time.Duration   // the account cut off, from the load's start (none: equal)
	queries map[string][]query // per range
	Errors  map[string]int64   // per range
	// CrossTenant counts answers holding a series of another tenant (or of none).
	CrossTenant int64
	// Empty counts successful answers without a series.
	Empty int64
	// FirstCrossTenant describes the first cross-tenant answer, FirstError the first
	// failed query.
	FirstCrossTenant, FirstError string
}

// A query is one dashboard query: when it was sent (from the load's start), how long its
// answer took, and whether it failed.
type query struct {
	at, took     time.Duration
	failed       bool
	tenant, expr string
}

// overlaps says whether the query was in flight during [from, to).
func (q query) overlaps(from, to time.Duration) bool {
	return from < to && q.at < to && q.at+q.took > from
}

// newQueryStats keeps the queries of a load that began at began, with an outage of outage
// at outageAt (0: none).
func newQueryStats(began time.Time, outageAt, outage time.Duration) *QueryStats {
	return &QueryStats{began: began, outage: [2]time.Duration{outageAt, outageAt + outage},
		queries: map[string][]query{}, Errors: map[string]int64{}}
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
	stats.queries[p.rng] = append(stats.queries[p.rng], query{at: began.Sub(stats.began), took: took, failed: err != nil, tenant: tenant, expr: p.expr})
	if err != nil {
		stats.Errors[p.rng]++
		if stats.FirstError == "" {
			stats.FirstError = shorten(fmt.Sprintf("tenant %s, %s over %s: %v", tenant, p.expr, p.rng, err), 400)
		}
		return
	}
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

// Latency is the percentiles of one range's answers (Queries of them; Errors failed).
type Latency struct {
	Queries int64   `json:"queries"`
	Errors  int64   `json:"errors"`
	P50     float64 `json:"p50_seconds"`
	P99     float64 `json:"p99_seconds"`
	Max     float64 `json:"max_seconds"`
	// InOutage answers were of queries in flight while the account was cut off: none can
	// come before the account is back, and a server may not answer from its caches what it
	// cannot check (another server may have changed it). P99OutsideOutage is the p99 of the
	// others, which the dashboards' targets judge.
	InOutage         int64   `json:"answers_in_outage"`
	P99OutsideOutage float64 `json:"p99_outside_outage_seconds"`
	// Minutes are the queries sent in each minute of the load, in order: when the slow
	// answers were (a server's first loads, the outage, a fold).
	Minutes []MinuteLatency `json:"minutes,omitempty"`
	// Slowest are the slowest answers outside the outage (at most slowestKept), slowest
	// first: which panels of which tenants, sent when, make the p99.
	Slowest []SlowQuery `json:"slowest,omitempty"`
	// OverGoalByPanel counts, by panel, the answers outside the outage slower than the
	// range's p99 goal: which panels spend the run's hundredth.
	OverGoalByPanel map[string]int64 `json:"over_goal_by_panel,omitempty"`
}

// MinuteLatency is the answers of the queries sent in one minute of the load. OverGoal
// counts those outside the outage slower than the range's p99 goal: the p99 of the run
// allows a hundredth of its answers over it, and the minutes say where they were spent.
type MinuteLatency struct {
	Queries  int64   `json:"queries"`
	Errors   int64   `json:"errors"`
	P50      float64 `json:"p50_seconds"`
	P99      float64 `json:"p99_seconds"`
	OverGoal int64   `json:"over_goal"`
}

// SlowQuery is one answer of Latency.Slowest.
type SlowQuery struct {
	Tenant  string  `json:"tenant"`
	Expr    string  `json:"expr"`
	At      float64 `json:"sent_at_seconds"` // from the load's start
	Seconds float64 `json:"seconds"`
}

// slowestKept is how many of a range's slowest answers the report names.
const slowestKept = 10

// latency summarizes the queries of each range.
func (s *QueryStats) latency() map[string]Latency {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]Latency{}
	for _, r := range ranges {
		var all, outside []time.Duration
		var minutes [][]time.Duration
		var minuteErrors, minuteOver []int64
		var slowest []query
		l := Latency{Errors: s.Errors[r.name]}
		for _, q := range s.queries[r.name] {
			m := max(int(q.at/time.Minute), 0)
			for len(minutes) <= m {
				minutes, minuteErrors, minuteOver = append(minutes, nil), append(minuteErrors, 0), append(minuteOver, 0)
			}
			if q.failed {
				minuteErrors[m]++
				continue
			}
			all, minutes[m] = append(all, q.took), append(minutes[m], q.took)
			if q.overlaps(s.outage[0], s.outage[1]) {
				l.InOutage++
			} else {
				outside, slowest = append(outside, q.took), append(slowest, q)
				if q.took > r.p99Goal {
					minuteOver[m]++
					if l.OverGoalByPanel == nil {
						l.OverGoalByPanel = map[string]int64{}
					}
					l.OverGoalByPanel[q.expr]++
				}
			}
		}
		slices.SortStableFunc(slowest, func(a, b query) int { return cmp.Compare(b.took, a.took) })
		for _, q := range slowest[:min(len(slowest), slowestKept)] {
			l.Slowest = append(l.Slowest, SlowQuery{Tenant: q.tenant, Expr: q.expr, At: q.at.Seconds(), Seconds: q.took.Seconds()})
		}
		l.Queries = int64(len(all))
		if len(all) > 0 {
			slices.Sort(all)
			l.P50, l.P99, l.Max = quantile(all, 0.5).Seconds(), quantile(all, 0.99).Seconds(), all[len(all)-1].Seconds()
		}
		if len(outside) > 0 {
			slices.Sort(outside)
			l.P99OutsideOutage = quantile(outside, 0.99).Seconds()
		}
		for m, d := range minutes {
			ml := MinuteLatency{Queries: int64(len(d)), Errors: minuteErrors[m], OverGoal: minuteOver[m]}
			if len(d) > 0 {
				slices.Sort(d)
				ml.P50, ml.P99 = quantile(d, 0.5).Seconds(), quantile(d, 0.99).Seconds()
			}
			l.Minutes = append(l.Minutes, ml)
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
