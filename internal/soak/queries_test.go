package soak

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeQueryAPI answers query_range with a series of the header's tenant, and of leak's
// too when the header is leaker.
func fakeQueryAPI(t *testing.T, leaker, leak string) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/api/v1/query_range" {
			http.Error(w, "not a POST of query_range", http.StatusBadRequest)
			return
		}
		if err := r.ParseForm(); err != nil || r.PostForm.Get("query") == "" || r.PostForm.Get("step") == "" {
			http.Error(w, "bad form", http.StatusBadRequest)
			return
		}
		tenant := r.Header.Get("X-Scope-OrgID")
		series := []string{fmt.Sprintf(`{"metric":{"soak_tenant":%q},"values":[[1,"1"]]}`, tenant)}
		if tenant == leaker {
			series = append(series, fmt.Sprintf(`{"metric":{"soak_tenant":%q},"values":[[1,"1"]]}`, leak))
		}
		fmt.Fprintf(w, `{"status":"success","data":{"resultType":"matrix","result":[%s]}}`, strings.Join(series, ","))
	}))
}

func TestQueriesCountCrossTenantAnswers(t *testing.T) {
	srv := fakeQueryAPI(t, "soak1", "soak0")
	defer srv.Close()
	stats := newQueryStats(time.Now(), 0, 0)
	for _, tenant := range []string{"soak0", "soak1"} {
		for _, p := range dashboard() {
			queryPanel(context.Background(), srv.Client(), srv.URL, tenant, tenant, p, stats)
		}
	}
	lat := stats.latency()
	if lat["1h"].Queries != 20 || lat["7d"].Queries != 20 || lat["1h"].Errors+lat["7d"].Errors != 0 {
		t.Fatalf("latencies %+v, errors %v", lat, stats.Errors)
	}
	if stats.CrossTenant != 20 || !strings.Contains(stats.FirstCrossTenant, `tenant soak1`) {
		t.Fatalf("%d cross-tenant answers (%s), want 20: each of soak1's", stats.CrossTenant, stats.FirstCrossTenant)
	}
}

func TestDashboard(t *testing.T) {
	ps := dashboard()
	if len(ps) != 20 {
		t.Fatalf("%d panels", len(ps))
	}
	// The first queries a browser sends hold both ranges: a refresh slower than a short run
	// still answers each.
	first := map[string]bool{}
	for _, p := range ps[:browserConnections] {
		first[p.rng] = true
	}
	if !first["1h"] || !first["7d"] {
		t.Errorf("the first %d panels are of ranges %v, want both", browserConnections, first)
	}
	agg := regexp.MustCompile(`(sum|avg|max) by \(([^)]*)\)`)
	for _, p := range ps {
		// Every aggregation keeps the tenant label: else a cross-tenant answer would not show.
		for _, m := range agg.FindAllStringSubmatch(p.expr, -1) {
			if !strings.Contains(m[2], "soak_tenant") {
				t.Errorf("%s drops the tenant label", p.expr)
			}
		}
		if p.span/p.step > 11_000 { // Prometheus' limit of points a series
			t.Errorf("%s over %s: step %s gives too many points", p.expr, p.rng, p.step)
		}
	}
}

func TestQueryErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		json.NewEncoder(w).Encode(map[string]string{"status": "error", "errorType": "unavailable", "error": "the account is down"})
	}))
	defer srv.Close()
	stats := newQueryStats(time.Now(), 0, 0)
	queryPanel(context.Background(), srv.Client(), srv.URL, "soak0", "", dashboard()[0], stats)
	if stats.Errors["1h"] != 1 || stats.latency()["1h"].Queries != 0 {
		t.Fatalf("errors %v", stats.Errors)
	}
	if _, err := postQuery(context.Background(), srv.Client(), srv.URL, "", nil); err == nil || !strings.Contains(err.Error(), "the account is down") {
		t.Fatalf("postQuery: %v", err)
	}
}

// TestReadBack: a fake query API answers count_over_time of each metric with what was
// acknowledged, but one sample short for one series, one more for another, and a series of
// another tenant.
func TestReadBack(t *testing.T) {
	s := Series{Tenant: "soak0", Targets: 3, Interval: 15 * time.Second}
	acks := make([]acked, s.Len())
	for i := range acks {
		acks[i] = acked{n: int32(10 + i), first: 1000, last: 2000}
	}
	short, long := 4, 7
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		m := regexp.MustCompile(`^count_over_time\((\w+)\{instance=~"host-\(\?:0\|1\|2\):9100"\}\[(\d+)s\]\)$`).FindStringSubmatch(r.PostForm.Get("query"))
		if m == nil || r.PostForm.Get("time") != "2000.500" || m[2] != "120" {
			http.Error(w, "unexpected query "+r.PostForm.Encode(), http.StatusBadRequest)
			return
		}
		var out []map[string]any
		for i := range s.Len() {
			ls := s.Labels(i)
			if ls[0].Value != m[1] {
				continue
			}
			metric := map[string]string{}
			for _, l := range ls[1:] {
				metric[l.Name] = l.Value
			}
			n := int(acks[i].n)
			switch i {
			case short:
				n--
			case long:
				n++
			}
			out = append(out, map[string]any{"metric": metric, "value": []any{2000.5, fmt.Sprint(n)}})
			if i == 0 {
				out = append(out, map[string]any{"metric": map[string]string{"instance": "host-0:9100", "code": "200", "soak_tenant": "soak1"}, "value": []any{2000.5, "3"}})
			}
		}
		json.NewEncoder(w).Encode(map[string]any{"status": "success", "data": map[string]any{"resultType": "vector", "result": out}})
	}))
	defer srv.Close()
	rb, err := readBack(context.Background(), srv.Client(), srv.URL, "soak0", s, checkedTargets(s.Targets, 0), acks, time.UnixMilli(1_940_500), time.UnixMilli(2_000_500))
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, a := range acks {
		total += int64(a.n)
	}
	if rb.Missing != 1 || rb.Extra != 1 || rb.CrossTenant != 1 || rb.SeriesMissing != 0 || rb.Samples != total || rb.Unverified != 0 || rb.Error != "" {
		t.Fatalf("%+v; want 1 missing, 1 extra, 1 cross-tenant series, %d samples", rb, total)
	}
	if !strings.Contains(rb.FirstMissing, `instance="host-0:9100"`) || !strings.Contains(rb.FirstMissing, "14 acknowledged") {
		t.Errorf("first missing: %s", rb.FirstMissing)
	}
}

// TestReadBackFailures: a query that keeps failing leaves its series unverified, and says
// why; the others are verified.
func TestReadBackFailures(t *testing.T) {
	s := Series{Tenant: "soak0", Targets: 2, Interval: 15 * time.Second}
	acks := make([]acked, s.Len())
	for i := range acks {
		acks[i] = acked{n: 5, first: 1000, last: 2000}
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		q := r.PostForm.Get("query")
		if strings.HasPrefix(q, "count_over_time("+gaugeName+"{") {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, `{"status":"error","errorType":"timeout","error":"query timed out"}`)
			return
		}
		var out []map[string]any
		for i := range s.Len() {
			ls := s.Labels(i)
			if !strings.HasPrefix(q, "count_over_time("+ls[0].Value+"{") {
				continue
			}
			metric := map[string]string{}
			for _, l := range ls[1:] {
				metric[l.Name] = l.Value
			}
			out = append(out, map[string]any{"metric": metric, "value": []any{2.0, "5"}})
		}
		json.NewEncoder(w).Encode(map[string]any{"status": "success", "data": map[string]any{"resultType": "vector", "result": out}})
	}))
	defer srv.Close()
	rb, err := readBack(context.Background(), srv.Client(), srv.URL, "", s, checkedTargets(s.Targets, 0), acks, time.UnixMilli(1000), time.UnixMilli(2000))
	if err != nil {
		t.Fatal(err)
	}
	if rb.Unverified != 2*5 || rb.Missing != 0 || rb.Samples != int64(5*(s.Len()-2)) || !strings.Contains(rb.Error, "query timed out") {
		t.Fatalf("%+v; want the 2 gauges' 10 samples unverified", rb)
	}
}

func TestCheckedTargets(t *testing.T) {
	if got := checkedTargets(5, 0); !slices.Equal(got, []int{0, 1, 2, 3, 4}) {
		t.Errorf("all of 5: %v", got)
	}
	if got := checkedTargets(5, 70); !slices.Equal(got, []int{0, 1, 2, 3, 4}) {
		t.Errorf("70 series of 5 targets: %v", got)
	}
	if got := checkedTargets(100, 4*seriesPerTarget); !slices.Equal(got, []int{0, 25, 50, 75}) {
		t.Errorf("4 targets of 100: %v", got)
	}
	if got := checkedTargets(100, 3); !slices.Equal(got, []int{0}) {
		t.Errorf("fewer series than a target's: %v", got)
	}
}

// TestReadBackSubset: only the checked targets' series are read back and compared.
func TestReadBackSubset(t *testing.T) {
	s := Series{Tenant: "soak0", Targets: 4, Interval: 15 * time.Second}
	acks := make([]acked, s.Len())
	for i := range acks {
		acks[i] = acked{n: 5, first: 1000, last: 2000}
	}
	var (
		mu      sync.Mutex
		queries []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		mu.Lock()
		queries = append(queries, r.PostForm.Get("query"))
		mu.Unlock()
		fmt.Fprint(w, `{"status":"success","data":{"resultType":"vector","result":[]}}`)
	}))
	defer srv.Close()
	rb, err := readBack(context.Background(), srv.Client(), srv.URL, "", s, []int{1, 3}, acks, time.UnixMilli(1000), time.UnixMilli(2000))
	if err != nil {
		t.Fatal(err)
	}
	if rb.SeriesChecked != 2*seriesPerTarget || rb.Missing != 2*seriesPerTarget*5 || rb.NotChecked != 2*seriesPerTarget*5 || rb.SeriesMissing != 2*seriesPerTarget {
		t.Fatalf("%+v", rb)
	}
	if len(queries) != len(metricNames) {
		t.Fatalf("%d queries, want one per metric: %v", len(queries), queries)
	}
	for _, q := range queries {
		if !strings.Contains(q, `instance=~"host-(?:1|3):9100"`) {
			t.Fatalf("query %s", q)
		}
	}
}
