package soak

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestMetricSums(t *testing.T) {
	exposition := `# HELP go_goroutines Number of goroutines that currently exist.
# TYPE go_goroutines gauge
go_goroutines 42
go_goroutines_total_not_this 7
tablets_account_requests_total{tenant="a"} 10
tablets_account_requests_total{tenant="b",x="}"} 5 1700000000000
tablets_account_requests_total 1.5e3
other{go_goroutines="1"} 3
go_gc_heap_live_bytes 2.5e+08
tablets_account_class_requests_total{class="ingest"} 7
tablets_account_class_requests_total{class="query"} 11
tablets_account_class_requests_total{class="querying"} 100
`
	v := metricSums(strings.NewReader(exposition), "go_goroutines", "tablets_account_requests_total", "go_gc_heap_live_bytes", "absent",
		`tablets_account_class_requests_total{class="query"}`, "tablets_account_class_requests_total", `tablets_account_requests_total{x="}"}`)
	if g, r, h, a := v[0], v[1], v[2], v[3]; g != 42 || r != 1515 || h != 2.5e8 || a != 0 {
		t.Fatalf("goroutines %v, account requests %v, live heap %v, absent %v; want 42, 1515, 2.5e8 and 0", g, r, h, a)
	}
	if q, all, x := v[4], v[5], v[6]; q != 11 || all != 118 || x != 5 {
		t.Fatalf("class query %v, all classes %v, x=} %v; want 11, 118 and 5", q, all, x)
	}
}

func points(rss ...int64) []Point {
	var ps []Point
	for i, v := range rss {
		ps = append(ps, Point{At: float64(10 * i), ServerState: ServerState{RSSBytes: v, Goroutines: 100, AccountRequests: int64(1000 * i)}})
	}
	return ps
}

func TestTargets(t *testing.T) {
	run := func(rss []int64, tenants map[string]TenantReport, cross int64) *Report {
		r := newReport(Config{Duration: 300 * time.Second, Tenants: len(tenants), Rate: 10, Scrape: 15 * time.Second}, time.Unix(0, 0), true, 14)
		r.PerTenant = tenants
		q := newQueryStats(time.Unix(0, 0), 0, 0)
		q.CrossTenant = cross
		q.queries["1h"] = []query{{at: 0, took: 2 * time.Second}, {at: 10 * time.Second, took: time.Second}, {at: 20 * time.Second, took: 2 * time.Second}}
		q.queries["7d"] = []query{{at: 0, took: 3 * time.Second}}
		r.finish(points(rss...), q, 300, 300*time.Second)
		return r
	}
	good := map[string]TenantReport{"soak0": {Writes: WriteStats{Sent: 100, Acked: 100}, Readback: Readback{Samples: 100}}}
	// 31 points over 300s: warm-up at 100s..130s (points 10-13), the end at 270s..300s (27-30).
	flat := make([]int64, 31)
	for i := range flat {
		flat[i] = 100 << 20
	}
	r := run(flat, good, 0)
	if !r.OK {
		t.Fatalf("a flat run failed: %+v", r.Targets)
	}
	if r.Queries["1h"].P50 != 2 || r.Queries["1h"].P99 != 2 || r.Queries["1h"].Queries != 3 {
		t.Errorf("1h latency %+v", r.Queries["1h"])
	}
	if r.AccountRequests != 30000 || r.AccountRequestsPerSample != 300 {
		t.Errorf("account requests %d, %v a sample", r.AccountRequests, r.AccountRequestsPerSample)
	}

	grown := append([]int64(nil), flat...)
	for i := 27; i < 31; i++ {
		grown[i] = 115 << 20
	}
	grown[5] = 500 << 20 // during the warm-up: not counted
	// The line through points 10..30 (21 points, the last four at 115): 96.2 to 109.5 MiB.
	if r := run(grown, good, 0); r.OK || r.Targets[0].OK || r.RSS.MedianGrowth < 0.149 || r.RSS.MedianGrowth > 0.151 ||
		r.RSS.Growth < 0.137 || r.RSS.Growth > 0.139 {
		t.Errorf("RSS grown 15%% at the end: growth %v (medians %v), targets %+v", r.RSS.Growth, r.RSS.MedianGrowth, r.Targets)
	}
	// A steady rise of 1% a point after the warm-up fails, whatever the medians' windows.
	rising := append([]int64(nil), flat...)
	for i := 10; i < 31; i++ {
		rising[i] = int64(float64(100<<20) * (1 + 0.01*float64(i-10)))
	}
	if r := run(rising, good, 0); r.Targets[0].OK || r.RSS.Growth < 0.19 || r.RSS.Growth > 0.21 {
		t.Errorf("RSS rising 20%% over the last two thirds: growth %v, targets %+v", r.RSS.Growth, r.Targets)
	}
	// A cycle of 10 points (the staging's 10-minute buckets: up by 10 MiB a point, then
	// dropped) is not growth, though the median near its top is 38% over the one near its
	// foot. (Its line still rises 7.5%: the cycle's phase at the ends of the window.)
	cycle := append([]int64(nil), flat...)
	for i := range cycle {
		cycle[i] = int64(100+10*((i+1)%10)) << 20
	}
	if r := run(cycle, good, 0); !r.Targets[0].OK || r.RSS.MedianGrowth < 0.3 {
		t.Errorf("a cycle without growth: growth %v (medians %v), targets %+v", r.RSS.Growth, r.RSS.MedianGrowth, r.Targets)
	}
	spike := append([]int64(nil), flat...)
	spike[20] = 300 << 20 // a spike in the middle (the outage's backlog) that goes away
	if r := run(spike, good, 0); !r.OK || r.RSS.Max != 300<<20 {
		t.Errorf("a passing spike: max %d, targets %+v", r.RSS.Max, r.Targets)
	}
	if r := run(flat, good, 1); r.OK {
		t.Error("a cross-tenant answer passed")
	}
	missing := map[string]TenantReport{"soak0": {Writes: WriteStats{Sent: 100, Acked: 100}, Readback: Readback{Samples: 99, Missing: 1}}}
	late := append(append([]int64(nil), flat...), 900<<20) // at 310s: after the load
	if r := run(late, good, 0); !r.OK || r.RSS.Max != 100<<20 || r.RSS.Last != 100<<20 {
		t.Errorf("a sample after the load counted: %+v", r.RSS)
	}
	if r := run(flat, missing, 0); r.OK {
		t.Error("a missing sample passed")
	}
	unacked := map[string]TenantReport{"soak0": {Writes: WriteStats{Sent: 100, Acked: 90, Dropped: 10}, Readback: Readback{Samples: 90}}}
	if r := run(flat, unacked, 0); r.OK {
		t.Error("samples dropped passed")
	}

	var text, js bytes.Buffer
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"tenant soak0: samples sent 100, acknowledged 100", "ok   RSS growth after warm-up: +0.0%"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("the text report lacks %q:\n%s", want, text.String())
		}
	}
	if err := r.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || !back.OK || back.PerTenant["soak0"].Writes.Acked != 100 || len(back.Points) != 31 {
		t.Fatalf("the JSON report does not read back: %v\n%s", err, js.String())
	}
}

// With several servers the report sums them, gives each its own figures, and the growth
// targets judge each server: one server's leak fails the run though the sum grows less.
func TestTargetsOfServers(t *testing.T) {
	const n = 31 // 300s: the line after warm-up runs through points 10..30
	var ps []Point
	for i := range n {
		steady := ServerState{RSSBytes: 100 << 20, Goroutines: 100, AccountRequests: int64(100 * i), CPUSeconds: float64(i)}
		// Server 1 leaks: 20% more RSS over the last two thirds, and the most goroutines
		// at the end (100 to 130: over the goal's 120).
		leaking := ServerState{RSSBytes: 100 << 20, Goroutines: 100, AccountRequests: int64(300 * i), CPUSeconds: 3 * float64(i)}
		if i >= 10 {
			leaking.RSSBytes = int64(float64(100<<20) * (1 + 0.01*float64(i-10)))
			leaking.Goroutines = int64(100 + 1.5*float64(i-10))
		}
		// Server 2's goroutines grow as much, all of them its connections' and the account
		// queue's: the load's, not a leak.
		busier := steady
		if i >= 10 {
			busier.ConnGoroutines = int64(1.5 * float64(i-10))
			busier.Goroutines += busier.ConnGoroutines
		}
		p := Point{At: float64(10 * i), Servers: []ServerState{steady, leaking, busier}}
		for _, s := range p.Servers {
			p.add(s)
		}
		ps = append(ps, p)
	}
	r := newReport(Config{Duration: 300 * time.Second, Tenants: 1, Rate: 10, Scrape: 15 * time.Second, Servers: 3}, time.Unix(0, 0), true, 14)
	r.PerTenant = map[string]TenantReport{"soak0": {Writes: WriteStats{Sent: 100, Acked: 100}, Readback: Readback{Samples: 100}}}
	r.finish(ps, newQueryStats(time.Unix(0, 0), 0, 0), 300, 300*time.Second)

	if r.Servers != 3 || len(r.PerServer) != 3 {
		t.Fatalf("%d servers, %d reported", r.Servers, len(r.PerServer))
	}
	// The sums: 500 account requests and 5 CPU seconds a point, over 30 points.
	if r.AccountRequests != 15000 || r.CPUSeconds != 150 || r.RSS.First != 300<<20 {
		t.Errorf("sums: %d account requests, %v CPU seconds, RSS first %d", r.AccountRequests, r.CPUSeconds, r.RSS.First)
	}
	if s := r.PerServer[1]; s.AccountRequests != 9000 || s.CPUSeconds != 90 || s.RSS.Growth < 0.19 || s.RSS.Growth > 0.21 {
		t.Errorf("the leaking server: %+v", s)
	}
	if s := r.PerServer[0]; s.AccountRequests != 3000 || s.RSS.Growth != 0 || s.Goroutines.LineEnd != 100 {
		t.Errorf("a steady server: %+v", s)
	}
	if s := r.PerServer[2]; s.Goroutines.LineEnd != 130 || s.GoroutinesOutsideConnections.LineEnd != 100 {
		t.Errorf("the server of more connections: goroutines %+v, outside its connections %+v", s.Goroutines, s.GoroutinesOutsideConnections)
	}
	if r.RSS.Growth > 0.07 { // a third of the leak, diluted in the sum
		t.Errorf("the sum's RSS growth %v", r.RSS.Growth)
	}
	if r.OK || r.Targets[0].OK || r.Targets[1].OK ||
		!strings.Contains(r.Targets[0].Value, "on server 1, the most of 3") || !strings.Contains(r.Targets[1].Value, "on server 1") {
		t.Errorf("one server leaking passed, or is not named: %+v", r.Targets)
	}

	// Without the leaking server, the goroutine target passes: server 2's grew only with
	// its connections.
	var calm []Point
	for _, p := range ps {
		c := Point{At: p.At, Servers: []ServerState{p.Servers[0], p.Servers[2]}}
		for _, s := range c.Servers {
			c.add(s)
		}
		calm = append(calm, c)
	}
	rc := newReport(Config{Duration: 300 * time.Second, Tenants: 1, Rate: 10, Scrape: 15 * time.Second, Servers: 2}, time.Unix(0, 0), true, 14)
	rc.PerTenant = r.PerTenant
	rc.finish(calm, newQueryStats(time.Unix(0, 0), 0, 0), 300, 300*time.Second)
	if !rc.Targets[1].OK || !strings.Contains(rc.Targets[1].Value, "the line from 100 to 100 on server 0") ||
		!strings.Contains(rc.Targets[1].Value, "(with the connections' and the account queue's: 100 to 100)") {
		t.Errorf("goroutines of connections judged as a leak: %+v", rc.Targets[1])
	}

	var text, js bytes.Buffer
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"servers:    3 on the one database behind a round-robin front", "  server 1: RSS line after warm-up"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("the text report lacks %q:\n%s", want, text.String())
		}
	}
	if err := r.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || back.Servers != 3 || len(back.PerServer) != 3 ||
		len(back.Points) != n || len(back.Points[5].Servers) != 3 || back.Points[5].RSSBytes != 300<<20 {
		t.Fatalf("the JSON report does not read back: %v\n%.2000s", err, js.String())
	}
}

func TestParseCPUSeconds(t *testing.T) {
	// A command name with a space and a parenthesis; utime 250 and stime 50 ticks.
	stat := "4242 (tablets (x) y) S 1 4242 4242 0 -1 4194560 1000 0 2 0 250 50 0 0 20 0 12 0 100 2000000 5000"
	if s, err := parseCPUSeconds(stat); err != nil || s != 3 {
		t.Errorf("parseCPUSeconds = %v, %v; want 3s", s, err)
	}
	if _, err := parseCPUSeconds("4242 (tablets) S 1 2"); err == nil {
		t.Error("a short stat line parsed")
	}
	if runtime.GOOS == "linux" {
		if s, err := cpuSeconds(os.Getpid()); err != nil || s < 0 {
			t.Errorf("this process's CPU time: %v, %v", s, err)
		}
	}
}

// The caches fill up to their bounds by design: the report follows them and the live heap
// outside them apart, and the account's CPU over the load.
func TestCachesAndAccountCPU(t *testing.T) {
	const n = 31 // 300s: the line after warm-up runs through points 10..30
	var ps []Point
	for i := range n {
		// The caches grow by 4 MiB a point and the live heap with them: nothing grows
		// outside the caches. Azurite works half of each 10s.
		caches := int64(4*i) << 20
		st := ServerState{RSSBytes: 300<<20 + 2*caches, Goroutines: 100, LiveHeapBytes: 100<<20 + caches, CacheBytes: caches}
		p := Point{At: float64(10 * i), AccountCPUSeconds: 7 + 5*float64(i), Servers: []ServerState{st}}
		p.add(st)
		ps = append(ps, p)
	}
	r := newReport(Config{Duration: 300 * time.Second, Tenants: 1, Rate: 10, Scrape: 15 * time.Second}, time.Unix(0, 0), true, 14)
	r.PerTenant = map[string]TenantReport{"soak0": {Writes: WriteStats{Sent: 100, Acked: 100}, Readback: Readback{Samples: 100}}}
	r.finish(ps, newQueryStats(time.Unix(0, 0), 0, 0), 300, 300*time.Second)
	if r.AccountCPUSeconds != 150 {
		t.Errorf("account CPU over the load %v, want 150", r.AccountCPUSeconds)
	}
	if r.Caches.LineStart != 40<<20 || r.Caches.LineEnd != 120<<20 || r.LiveHeap.Growth < 0.5 {
		t.Errorf("caches %+v, live heap %+v", r.Caches, r.LiveHeap)
	}
	if h := r.HeapOutsideCaches; h.LineStart != 100<<20 || h.LineEnd != 100<<20 || h.Growth != 0 {
		t.Errorf("the live heap outside the caches: %+v, want flat at 100 MiB", h)
	}
	if h := r.PerServer[0].HeapOutsideCaches; h.Growth != 0 || r.PerServer[0].Caches.LineEnd != 120<<20 {
		t.Errorf("the server's own: caches %+v, outside them %+v", r.PerServer[0].Caches, h)
	}
	var text bytes.Buffer
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"account:    Azurite's CPU 150s over the load's 300s: busy 50%",
		"caches:     first 0.0 MiB, warmed up 48.0 MiB, last 116.0 MiB, max after warm-up 120.0 MiB; the live heap outside them: the line after warm-up 100.0 MiB to 100.0 MiB: +0.0%"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("the text report lacks %q:\n%s", want, text.String())
		}
	}
}

func TestScrapeServerSumsCaches(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, `go_goroutines 12
go_gc_heap_live_bytes 1e9
tablets_account_requests_total{class="query"} 5
tablets_staging_cache_bytes 100
tablets_raw_cache_bytes 20
tablets_tier_block_cache_bytes 3
tablets_index_cache_bytes 4000
tablets_results_cache_bytes 50000
tablets_raw_cache_hits_total 7
tablets_account_connections 9
tablets_http_connections{listener="public"} 4
tablets_http_connections{listener="internal"} 1
tablets_account_requests_waiting 2
tablets_account_table_requests_total{class="background",table="batch",task="fold"} 300
tablets_account_table_requests_total{class="background",table="staging",task="fold"} 12
tablets_account_table_requests_total{class="background",table="tier",task="rollup"} 40
tablets_account_table_requests_total{class="query",table="staging",task=""} 9000
tablets_account_table_received_bytes_total{class="background",table="tier",task="rollup"} 5e6
tablets_account_table_received_bytes_total{class="query",table="staging",task=""} 7e9
`)
	}))
	defer srv.Close()
	var st ServerState
	if err := scrapeServer(t.Context(), srv.Client(), srv.URL, &st); err != nil {
		t.Fatal(err)
	}
	if st.CacheBytes != 54123 || st.Goroutines != 12 || st.LiveHeapBytes != 1e9 || st.AccountRequests != 5 || st.ConnGoroutines != 2*9+4+1+2 {
		t.Errorf("scraped %+v; want caches 54123 bytes, the connections' goroutines 25", st)
	}
	if want := map[string]int64{"fold": 312, "rollup": 40}; !maps.Equal(st.BackgroundRequests, want) || st.BackgroundReadBytes != 5e6 {
		t.Errorf("background requests %v and %d bytes read, want %v and 5e6", st.BackgroundRequests, st.BackgroundReadBytes, want)
	}
}

// The report counts the servers' background work by minute of the load, from the counters'
// growth between the points at the minutes' bounds (summed over the servers), and names
// the minutes that had any.
func TestBackgroundByMinute(t *testing.T) {
	var ps []Point
	for i := range 19 { // 0 to 180 s, a point every 10 s
		at := float64(10 * i)
		var servers []ServerState
		for s := range 2 {
			st := ServerState{BackgroundRequests: map[string]int64{"compact": 5 + int64(i)}, BackgroundReadBytes: int64(i) * 1e6}
			if at > 60 && s == 1 { // the second minute: a rollup on one server, 10 a point
				st.BackgroundRequests["rollup"] = 10 * int64(min(i, 12)-6)
			}
			servers = append(servers, st)
		}
		p := Point{At: at, Servers: servers}
		for _, st := range servers {
			p.add(st)
		}
		ps = append(ps, p)
	}
	got := backgroundByMinute(ps, 150*time.Second)
	want := []BackgroundMinute{
		{Requests: map[string]int64{"compact": 12}, ReadBytes: 12e6},
		{Requests: map[string]int64{"compact": 12, "rollup": 60}, ReadBytes: 12e6},
		{Requests: map[string]int64{"compact": 6}, ReadBytes: 6e6}, // 120 to 150 s
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("by minute %+v, want %+v", got, want)
	}
	if text := backgroundText(got); text != "1: compact 12, 12 MB; 2: rollup 60, compact 12, 12 MB; 3: compact 6, 6 MB" {
		t.Errorf("text %q", text)
	}
	if text := backgroundText([]BackgroundMinute{{}, {ReadBytes: 3}}); text != "none" {
		t.Errorf("text of minutes without requests %q, want none", text)
	}
}

// The dashboards' targets judge the answers of the queries the outage did not hold; the
// minutes say when the slow ones were sent.
func TestDashboardTargets(t *testing.T) {
	const outageAt, outage = 100 * time.Second, 60 * time.Second
	q := newQueryStats(time.Unix(0, 0), outageAt, outage)
	for i := range 50 {
		q.queries["1h"] = append(q.queries["1h"],
			query{at: time.Duration(i) * time.Second, took: 500 * time.Millisecond},
			query{at: 180*time.Second + time.Duration(i)*time.Second, took: 500 * time.Millisecond})
	}
	for range 5 { // held by the outage
		q.queries["1h"] = append(q.queries["1h"], query{at: 95 * time.Second, took: 70 * time.Second})
	}
	q.queries["1h"] = append(q.queries["1h"],
		query{at: 90 * time.Second, took: 10 * time.Second, tenant: "soak0", expr: "up"}, // answered as the outage began
		query{at: 160 * time.Second, took: time.Second})                                  // sent as it ended
	q.queries["7d"] = []query{{at: 0, took: 6 * time.Second}}

	lat := q.latency()
	h := lat["1h"]
	if h.Queries != 107 || h.InOutage != 5 || h.P99 != 70 || h.P99OutsideOutage != 1 || h.P50 != 0.5 {
		t.Errorf("1h: %+v", h)
	}
	wantMinutes := []MinuteLatency{{Queries: 50, P50: 0.5, P99: 0.5}, {Queries: 6, P50: 70, P99: 70, OverGoal: 1}, {Queries: 1, P50: 1, P99: 1}, {Queries: 50, P50: 0.5, P99: 0.5}}
	if !slices.Equal(h.Minutes, wantMinutes) {
		t.Errorf("1h by minute %+v, want %+v", h.Minutes, wantMinutes)
	}
	// The slowest answers outside the outage: the one answered as it began, then the one
	// sent as it ended, then the half-second ones.
	if len(h.Slowest) != slowestKept || h.Slowest[0] != (SlowQuery{Tenant: "soak0", Expr: "up", At: 90, Seconds: 10}) ||
		h.Slowest[1].Seconds != 1 || h.Slowest[1].At != 160 || h.Slowest[slowestKept-1].Seconds != 0.5 {
		t.Errorf("1h slowest %+v", h.Slowest)
	}
	if !maps.Equal(h.OverGoalByPanel, map[string]int64{"up": 1}) {
		t.Errorf("1h over the goal by panel: %v", h.OverGoalByPanel)
	}

	judge := func(q *QueryStats) map[string]Target {
		r := newReport(Config{Duration: 300 * time.Second, Tenants: 1, Rate: 10, Scrape: 15 * time.Second, OutageAt: outageAt, Outage: outage}, time.Unix(0, 0), true, 14)
		r.PerTenant = map[string]TenantReport{"soak0": {Writes: WriteStats{Sent: 100, Acked: 100}, Readback: Readback{Samples: 100}}}
		r.finish(points(make([]int64, 31)...), q, 300, 300*time.Second)
		byName := map[string]Target{}
		for _, target := range r.Targets {
			byName[target.Name] = target
		}
		var text bytes.Buffer
		if err := r.WriteText(&text); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(text.String(), "  by minute sent: 1: 50 p99 0.5s, 2: 6 p99 70.0s (1 over 2.5s),") ||
			!strings.Contains(text.String(), "    10.00s, sent at 90s, tenant soak0: up\n") ||
			!strings.Contains(text.String(), "  over 2.5s outside the outage, by panel:\n    1: up\n") {
			t.Errorf("the text report lacks the minutes:\n%s", text.String())
		}
		return byName
	}
	targets := judge(q)
	if h := targets["dashboard queries 1h"]; !h.OK || h.Goal != "every query answered, p99 <= 2.5s outside the outage" {
		t.Errorf("1h, p99 1 s outside the outage: %+v", h)
	}
	if d := targets["dashboard queries 7d"]; d.OK { // 6 s over its 5 s
		t.Errorf("7d, p99 6 s: %+v", d)
	}
	q.queries["1h"] = append(q.queries["1h"], query{at: 200 * time.Second, took: time.Minute, failed: true})
	q.Errors["1h"]++
	if h := judge(q)["dashboard queries 1h"]; h.OK || !strings.Contains(h.Value, "107 answered, 1 errors") {
		t.Errorf("1h with an error: %+v", h)
	}
	if m := q.latency()["1h"].Minutes[3]; m.Errors != 1 || m.Queries != 50 {
		t.Errorf("minute 4 with an error: %+v", m)
	}
}

// The settle counts a server's first rollup, compaction and rollup of dirty slices when it
// did them or found another server holding their lease, and the task caught up once some
// server did it; and it waits for every server's warm-up of its raw cache.
func TestFirstRunsDone(t *testing.T) {
	r := &run{cfg: Config{Tenants: 2}, tenancy: true}
	runs := func(result, task, tenant string) string {
		return `tablets_background_runs_total{result="` + result + `",task="` + task + `",tenant="` + tenant + `"} 1` + "\n"
	}
	warm := runs("ok", "warm", "soak0") + runs("ok", "warm", "soak1") // each server warms its own cache
	holder := runs("ok", "rollup", "soak0") + runs("ok", "compact", "soak0") + runs("ok", "rollup", "soak1") + runs("ok", "compact", "soak1") +
		runs("ok", "flagged", "soak0") + runs("ok", "flagged", "soak1") + warm
	other := runs("busy", "rollup", "soak0") + runs("busy", "compact", "soak0") + runs("busy", "rollup", "soak1") + runs("ok", "compact", "soak1") +
		runs("busy", "flagged", "soak0") + runs("busy", "flagged", "soak1") + warm
	for _, c := range []struct {
		name        string
		expositions []string
		want        bool
	}{
		{"one server did all", []string{holder}, true},
		{"the other found them busy", []string{holder, other}, true},
		{"busy everywhere: nobody did soak0's rollup yet", []string{other, other}, false},
		{"a server has not run soak1's rollup", []string{holder, strings.Replace(other, runs("busy", "rollup", "soak1"), "", 1)}, false},
		{"a server has not rolled up soak0's dirty slices", []string{holder, strings.Replace(other, runs("busy", "flagged", "soak0"), "", 1)}, false},
		{"busy everywhere: nobody rolled up soak1's dirty slices", []string{strings.Replace(holder, runs("ok", "flagged", "soak1"), runs("busy", "flagged", "soak1"), 1), other}, false},
		{"a server has not warmed soak1's cache up", []string{holder, strings.Replace(other, runs("ok", "warm", "soak1"), "", 1)}, false},
		{"an error is not a run", []string{holder, strings.Replace(other, `result="busy",task="compact",tenant="soak0"`, `result="error",task="compact",tenant="soak0"`, 1)}, false},
	} {
		if got := r.firstRunsDone(c.expositions); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
