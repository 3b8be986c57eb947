package soak

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
	"time"
)

// Report is what a soak measured, and whether it met its targets.
type Report struct {
	Started  time.Time `json:"started"`
	Duration string    `json:"duration"`
	Tenants  int       `json:"tenants"`
	Rate     float64   `json:"rate_samples_per_second"` // asked for
	Series   int       `json:"series_per_tenant"`
	Scrape   string    `json:"scrape_interval"`
	Outage   string    `json:"outage"`
	// Backfill is the history written before the load (Config.Backfill), "none" without;
	// BackfillSeconds how long writing it took, SettleSeconds how long the server's
	// background work then took to catch up. Started is when the load started, after both.
	Backfill        string  `json:"backfill"`
	BackfillSeconds float64 `json:"backfill_seconds"`
	SettleSeconds   float64 `json:"settle_seconds"`
	// Tenancy says whether the server was given the tenants (X-Scope-OrgID and
	// --config.file); without it one tenant writes without a header.
	Tenancy bool `json:"tenancy"`
	// Servers is how many `tablets serve` ran on the one database (Config.Servers), behind a
	// round-robin front when more than one.
	Servers int `json:"servers"`

	// RSS and Goroutines: the first sample, the median around the end of the warm-up (the
	// first third of the run) and over the last tenth of the run, the most in the last two
	// thirds, and the growth over those two thirds (see Trend). With several servers, of
	// their sum (the deployment's); PerServer has each server's, and the targets judge
	// each server's.
	RSS        Trend `json:"rss_bytes"`
	Goroutines Trend `json:"goroutines"`
	// GoroutinesOutsideConnections is the same of the goroutines less those the server's
	// connections hold and those waiting for the account (ServerState.ConnGoroutines): the
	// goroutine target judges its line, since those come and go with the requests in flight.
	GoroutinesOutsideConnections Trend `json:"goroutines_outside_connections"`
	// LiveHeap is the same of the heap found live by the last collection: not a target,
	// but what tells a leak (it grows) from memory the runtime holds (only the RSS grows).
	LiveHeap Trend `json:"live_heap_bytes"`
	// Caches is the same of what the read caches hold (they fill up to their bounds), and
	// HeapOutsideCaches of the live heap less the caches: what a leak outside them grows.
	Caches            Trend `json:"cache_bytes"`
	HeapOutsideCaches Trend `json:"heap_outside_caches_bytes"`

	Queries            map[string]Latency      `json:"queries"` // per dashboard range
	CrossTenantAnswers int64                   `json:"cross_tenant_answers"`
	EmptyAnswers       int64                   `json:"empty_answers"`
	FirstCrossTenant   string                  `json:"first_cross_tenant,omitempty"`
	FirstQueryError    string                  `json:"first_query_error,omitempty"`
	PerTenant          map[string]TenantReport `json:"per_tenant"`

	AccountRequests          int64   `json:"account_requests"` // every server's
	AccountRequestsPerSample float64 `json:"account_requests_per_sample"`
	LoadSeconds              float64 `json:"load_seconds"` // the load and its drain
	// CPUSeconds is the CPU time the servers used over the load, together.
	CPUSeconds float64 `json:"cpu_seconds"`
	// AccountCPUSeconds is the CPU time of the Azurite the soak started, over the load (0
	// with an account given): Azurite serves every request on one thread, so over
	// LoadSeconds it is the share of the time the account was busy.
	AccountCPUSeconds float64 `json:"account_cpu_seconds,omitempty"`
	// PerServer is each server's figures, in the order they were started (one with one
	// server: the same as the report's own).
	PerServer []ServerReport `json:"per_server"`

	// BackgroundByMinute is, for each minute of the load, what the servers' background work
	// sent the account in it: the minutes of the dashboards' slow answers (Queries'
	// Minutes) beside the folds, rollups and compactions they shared the account with.
	BackgroundByMinute []BackgroundMinute `json:"background_by_minute,omitempty"`

	Targets []Target `json:"targets"`
	OK      bool     `json:"ok"`
	Points  []Point  `json:"points"`
}

// BackgroundMinute is the background work of every server in one minute of the load: its
// account requests by task, and the bytes they read.
type BackgroundMinute struct {
	Requests  map[string]int64 `json:"requests,omitempty"`
	ReadBytes int64            `json:"read_bytes"`
}

// backgroundByMinute is the background work of the points (summed over the servers) in each
// minute of the load's duration: the growth of the counters from the last point at or
// before the minute's start to the last at or before its end (the first point where none
// is: the load's first).
func backgroundByMinute(points []Point, duration time.Duration) []BackgroundMinute {
	if len(points) == 0 {
		return nil
	}
	at := func(t float64) Point {
		p := points[0]
		for _, q := range points {
			if q.At > t {
				break
			}
			p = q
		}
		return p
	}
	var out []BackgroundMinute
	for start := 0.0; start < duration.Seconds(); start += 60 {
		a, b := at(start), at(min(start+60, duration.Seconds()))
		m := BackgroundMinute{ReadBytes: b.BackgroundReadBytes - a.BackgroundReadBytes}
		for task, n := range b.BackgroundRequests {
			if d := n - a.BackgroundRequests[task]; d > 0 {
				if m.Requests == nil {
					m.Requests = map[string]int64{}
				}
				m.Requests[task] = d
			}
		}
		out = append(out, m)
	}
	return out
}

// Trend is a quantity sampled over the run.
//
// Growth, which the targets judge, is that of the least-squares line through the samples
// after the warm-up (the last two thirds: the last 20 minutes of 30), from its value at
// their start to its value at the end, over the first. Not of two medians (MedianGrowth):
// the server's memory follows the staging's 10-minute arrival buckets (the staged points
// grow for 15 minutes and a fold drops 10 minutes of them), and two windows of 3 minutes
// compare two phases of that cycle as much as they compare the start and the end.
type Trend struct {
	First        int64   `json:"first"`
	WarmedUp     int64   `json:"warmed_up"` // median over a tenth of the run after the warm-up
	Last         int64   `json:"last"`      // median over the last tenth
	Max          int64   `json:"max_after_warm_up"`
	MedianGrowth float64 `json:"median_growth"` // Last over WarmedUp, minus 1
	LineStart    int64   `json:"line_start"`    // the line after the warm-up, at its start
	LineEnd      int64   `json:"line_end"`      // and at the end
	Growth       float64 `json:"growth"`        // LineEnd over LineStart, minus 1
}

// ServerReport is one server's figures over the load.
type ServerReport struct {
	RSS               Trend `json:"rss_bytes"`
	LiveHeap          Trend `json:"live_heap_bytes"`
	Caches            Trend `json:"cache_bytes"`
	HeapOutsideCaches Trend `json:"heap_outside_caches_bytes"`
	Goroutines        Trend `json:"goroutines"`
	// GoroutinesOutsideConnections: as the Report's.
	GoroutinesOutsideConnections Trend `json:"goroutines_outside_connections"`
	// AccountRequests and CPUSeconds are the server's over the load (as the report's
	// AccountRequests): with several servers, how their background work was shared.
	AccountRequests int64   `json:"account_requests"`
	CPUSeconds      float64 `json:"cpu_seconds"`
	// Routed is the requests the round-robin front sent the server (writes, queries and
	// the read-back), with several servers.
	Routed int64 `json:"routed_requests,omitempty"`
}

// TenantReport is one tenant's writes and read-back.
type TenantReport struct {
	Writes   WriteStats `json:"writes"`
	Readback Readback   `json:"read_back"`
}

// Target is one goal of the soak.
type Target struct {
	Name  string `json:"name"`
	Value string `json:"value"`
	Goal  string `json:"goal"`
	OK    bool   `json:"ok"`
}

func newReport(cfg Config, began time.Time, tenancy bool, series int) *Report {
	outage := "none"
	if cfg.Outage > 0 {
		outage = fmt.Sprintf("%s at %s", cfg.Outage, cfg.OutageAt)
	}
	backfill := "none"
	if cfg.Backfill > 0 {
		backfill = cfg.Backfill.String()
	}
	return &Report{Started: began.UTC(), Duration: cfg.Duration.String(), Tenants: cfg.Tenants, Rate: cfg.Rate,
		Series: series, Scrape: cfg.Scrape.String(), Outage: outage, Backfill: backfill, Tenancy: tenancy,
		Servers: max(1, cfg.Servers), PerTenant: map[string]TenantReport{}}
}

// finish computes the summaries and the targets.
func (r *Report) finish(points []Point, q *QueryStats, loadSeconds float64, duration time.Duration) {
	r.Points = points
	r.BackgroundByMinute = backgroundByMinute(points, duration)
	r.LoadSeconds = loadSeconds
	r.RSS = trend(points, duration, func(p Point) int64 { return p.RSSBytes })
	r.Goroutines = trend(points, duration, func(p Point) int64 { return p.Goroutines })
	r.GoroutinesOutsideConnections = trend(points, duration, func(p Point) int64 { return p.Goroutines - p.ConnGoroutines })
	r.LiveHeap = trend(points, duration, func(p Point) int64 { return p.LiveHeapBytes })
	r.Caches = trend(points, duration, func(p Point) int64 { return p.CacheBytes })
	r.HeapOutsideCaches = trend(points, duration, func(p Point) int64 { return p.LiveHeapBytes - p.CacheBytes })
	r.Queries = q.latency()
	q.mu.Lock()
	r.CrossTenantAnswers, r.EmptyAnswers, r.FirstCrossTenant, r.FirstQueryError = q.CrossTenant, q.Empty, q.FirstCrossTenant, q.FirstError
	q.mu.Unlock()
	var acked, missing, unacked, crossSeries, unverified, notChecked int64
	for _, t := range r.PerTenant {
		acked += t.Writes.Acked
		missing += t.Readback.Missing
		unacked += t.Writes.Sent - t.Writes.Acked
		crossSeries += t.Readback.CrossTenant
		unverified += t.Readback.Unverified
		notChecked += t.Readback.NotChecked
	}
	// The account requests and CPU time of the load: up to the last sample within the
	// duration (not the read-back's).
	r.AccountRequests = int64(overLoad(points, duration, func(p Point) float64 { return float64(p.AccountRequests) }))
	r.CPUSeconds = overLoad(points, duration, func(p Point) float64 { return p.CPUSeconds })
	r.AccountCPUSeconds = overLoad(points, duration, func(p Point) float64 { return p.AccountCPUSeconds })
	r.PerServer = make([]ServerReport, r.Servers)
	for i := range r.PerServer {
		of := func(p Point) ServerState {
			switch {
			case i < len(p.Servers):
				return p.Servers[i]
			case len(p.Servers) == 0 && r.Servers == 1: // a point without each server's: the one server's
				return p.ServerState
			}
			return ServerState{}
		}
		r.PerServer[i] = ServerReport{
			RSS:      trend(points, duration, func(p Point) int64 { return of(p).RSSBytes }),
			LiveHeap: trend(points, duration, func(p Point) int64 { return of(p).LiveHeapBytes }),
			Caches:   trend(points, duration, func(p Point) int64 { return of(p).CacheBytes }),
			HeapOutsideCaches: trend(points, duration, func(p Point) int64 {
				s := of(p)
				return s.LiveHeapBytes - s.CacheBytes
			}),
			Goroutines: trend(points, duration, func(p Point) int64 { return of(p).Goroutines }),
			GoroutinesOutsideConnections: trend(points, duration, func(p Point) int64 {
				s := of(p)
				return s.Goroutines - s.ConnGoroutines
			}),
			AccountRequests: int64(overLoad(points, duration, func(p Point) float64 { return float64(of(p).AccountRequests) })),
			CPUSeconds:      overLoad(points, duration, func(p Point) float64 { return of(p).CPUSeconds }),
		}
	}
	// The growth targets judge each server's line, naming the worst: a leak in one of three
	// servers is a third of their sum's growth. (With one server, its line is the sum's.)
	rssAt, goAt := 0, 0
	for i, s := range r.PerServer {
		if s.RSS.Growth > r.PerServer[rssAt].RSS.Growth {
			rssAt = i
		}
		if goroutinesExcess(s.GoroutinesOutsideConnections) > goroutinesExcess(r.PerServer[goAt].GoroutinesOutsideConnections) {
			goAt = i
		}
	}
	rssLine, goLine, goAll := r.PerServer[rssAt].RSS, r.PerServer[goAt].GoroutinesOutsideConnections, r.PerServer[goAt].Goroutines
	rssOf, goOf := "", ""
	if r.Servers > 1 {
		rssOf = fmt.Sprintf(" on server %d, the most of %d", rssAt, r.Servers)
		goOf = fmt.Sprintf(" on server %d, the most of %d", goAt, r.Servers)
	}
	// Per sample of the load: the backfill's went to another server, whose requests are not
	// counted.
	var loadAcked int64
	for _, t := range r.PerTenant {
		loadAcked += t.Writes.Acked - t.Writes.BackfillAcked
	}
	if loadAcked > 0 {
		r.AccountRequestsPerSample = float64(r.AccountRequests) / float64(loadAcked)
	}
	r.Targets = []Target{
		{"RSS growth after warm-up", fmt.Sprintf("%+.1f%% (the line from %s to %s%s)", 100*rssLine.Growth, mib(rssLine.LineStart), mib(rssLine.LineEnd), rssOf), "<= +10%",
			len(points) > 0 && rssLine.Growth <= 0.10},
		{"goroutines after warm-up, outside connections", fmt.Sprintf("the line from %d to %d%s (with the connections' and the account queue's: %d to %d)", goLine.LineStart, goLine.LineEnd, goOf, goAll.LineStart, goAll.LineEnd), "flat: <= +10% + 10",
			len(points) > 0 && goroutinesExcess(goLine) <= 0},
		{"samples acknowledged", fmt.Sprintf("%d unacknowledged", unacked), "every sample sent", unacked == 0 && acked > 0},
		{"acknowledged samples read back", fmt.Sprintf("%d missing, %d not verified, %d acknowledged of series not read back (--verify)", missing, unverified, notChecked), "0 missing", missing == 0 && unverified == 0},
		{"cross-tenant answers", fmt.Sprintf("%d answers, %d series read back", r.CrossTenantAnswers, crossSeries), "0", r.CrossTenantAnswers == 0 && crossSeries == 0},
	}
	// Issue 36's: every dashboard query answered, and the p99 of the answers of the queries
	// the outage did not hold (no answer can come before the account is back).
	for _, rg := range ranges {
		l := r.Queries[rg.name]
		r.Targets = append(r.Targets, Target{"dashboard queries " + rg.name,
			fmt.Sprintf("%d answered, %d errors; p99 %.2fs outside the outage (of all %.2fs, %d answers in the outage)", l.Queries, l.Errors, l.P99OutsideOutage, l.P99, l.InOutage),
			fmt.Sprintf("every query answered, p99 <= %s outside the outage", rg.p99Goal),
			l.Queries > 0 && l.Errors == 0 && l.P99OutsideOutage <= rg.p99Goal.Seconds()})
	}
	r.OK = true
	for _, t := range r.Targets {
		r.OK = r.OK && t.OK
	}
}

// goroutinesExcess is how far a line of goroutines ends above its goal (flat: its start
// + 10% + 10); more than 0 fails.
func goroutinesExcess(t Trend) float64 {
	return float64(t.LineEnd) - (1.1*float64(t.LineStart) + 10)
}

// overLoad is how much a counter of the points grew over the load: from the first point to
// the last within the duration (not the drain's and the read-back's).
func overLoad(points []Point, duration time.Duration, f func(Point) float64) float64 {
	var d float64
	for _, p := range points {
		if p.At <= duration.Seconds() {
			d = f(p) - f(points[0])
		}
	}
	return d
}

// trend summarizes one quantity of the points.
func trend(points []Point, duration time.Duration, f func(Point) int64) Trend {
	d := duration.Seconds()
	// The samples of the load only, not of the drain and read-back after it.
	var load []Point
	for _, p := range points {
		if p.At <= d {
			load = append(load, p)
		}
	}
	points = load
	if len(points) == 0 {
		return Trend{}
	}
	warm, tenth := d/3, d/10
	var t Trend
	t.First = f(points[0])
	t.WarmedUp = median(points, f, warm, warm+tenth)
	t.Last = median(points, f, d-tenth, d)
	for _, p := range points {
		if p.At >= warm {
			t.Max = max(t.Max, f(p))
		}
	}
	if t.WarmedUp > 0 {
		t.MedianGrowth = float64(t.Last)/float64(t.WarmedUp) - 1
	}
	t.LineStart, t.LineEnd = line(points, f, warm, d)
	if t.LineStart > 0 {
		t.Growth = float64(t.LineEnd)/float64(t.LineStart) - 1
	}
	return t
}

// line fits a least-squares line to f of the points in [from, to] and returns its values
// at from and to (with fewer than two points: the median, flat).
func line(points []Point, f func(Point) int64, from, to float64) (int64, int64) {
	var n, sx, sy, sxx, sxy float64
	for _, p := range points {
		if p.At >= from && p.At <= to {
			x, y := p.At-from, float64(f(p))
			n++
			sx += x
			sy += y
			sxx += x * x
			sxy += x * y
		}
	}
	if n < 2 || n*sxx == sx*sx {
		m := median(points, f, from, to)
		return m, m
	}
	slope := (n*sxy - sx*sy) / (n*sxx - sx*sx)
	at0 := (sy - slope*sx) / n
	return int64(math.Round(at0)), int64(math.Round(at0 + slope*(to-from)))
}

// median is the median of f over the points in [from, to], or f of the point nearest
// to from if there is none.
func median(points []Point, f func(Point) int64, from, to float64) int64 {
	var vs []int64
	for _, p := range points {
		if p.At >= from && p.At <= to {
			vs = append(vs, f(p))
		}
	}
	if len(vs) == 0 {
		nearest := points[0]
		for _, p := range points {
			if abs(p.At-from) < abs(nearest.At-from) {
				nearest = p
			}
		}
		return f(nearest)
	}
	slices.Sort(vs)
	return vs[len(vs)/2]
}

func abs(x float64) float64 { return max(x, -x) }

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	return e.Encode(r)
}

// WriteText writes the report for a reader.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "soak of %s from %s: %d tenants, %.0f samples/s asked (%d series each, scraped every %s), outage %s, tenancy %v\n",
		r.Duration, r.Started.Format(time.RFC3339), r.Tenants, r.Rate, r.Series, r.Scrape, r.Outage, r.Tenancy)
	if r.Backfill != "none" && r.Backfill != "" {
		fmt.Fprintf(&b, "backfill:   %s of history written before the load, in %.0fs; background work caught up %.0fs later\n", r.Backfill, r.BackfillSeconds, r.SettleSeconds)
	}
	if r.Servers > 1 {
		fmt.Fprintf(&b, "servers:    %d on the one database behind a round-robin front; CPU %.0fs over the load together; the RSS, live heap and goroutines below are their sums\n", r.Servers, r.CPUSeconds)
		for i, s := range r.PerServer {
			fmt.Fprintf(&b, "  server %d: RSS line after warm-up %s to %s (%+.1f%%), max %s; live heap line %s to %s (%+.1f%%); goroutines line %d to %d (outside connections %d to %d); CPU %.0fs; account requests %d; requests routed %d\n",
				i, mib(s.RSS.LineStart), mib(s.RSS.LineEnd), 100*s.RSS.Growth, mib(s.RSS.Max), mib(s.LiveHeap.LineStart), mib(s.LiveHeap.LineEnd), 100*s.LiveHeap.Growth,
				s.Goroutines.LineStart, s.Goroutines.LineEnd, s.GoroutinesOutsideConnections.LineStart, s.GoroutinesOutsideConnections.LineEnd, s.CPUSeconds, s.AccountRequests, s.Routed)
		}
	} else {
		fmt.Fprintf(&b, "servers:    1; CPU %.0fs over the load\n", r.CPUSeconds)
	}
	if r.AccountCPUSeconds > 0 && r.LoadSeconds > 0 {
		fmt.Fprintf(&b, "account:    Azurite's CPU %.0fs over the load's %.0fs: busy %.0f%% of the time (it serves requests on one thread)\n",
			r.AccountCPUSeconds, r.LoadSeconds, 100*r.AccountCPUSeconds/r.LoadSeconds)
	}
	fmt.Fprintf(&b, "RSS:        first %s, warmed up %s, last %s (medians: %+.1f%%), max after warm-up %s; the line after warm-up %s to %s: %+.1f%%\n",
		mib(r.RSS.First), mib(r.RSS.WarmedUp), mib(r.RSS.Last), 100*r.RSS.MedianGrowth, mib(r.RSS.Max), mib(r.RSS.LineStart), mib(r.RSS.LineEnd), 100*r.RSS.Growth)
	fmt.Fprintf(&b, "live heap:  first %s, warmed up %s, last %s (medians: %+.1f%%), max after warm-up %s; the line after warm-up %s to %s: %+.1f%%\n",
		mib(r.LiveHeap.First), mib(r.LiveHeap.WarmedUp), mib(r.LiveHeap.Last), 100*r.LiveHeap.MedianGrowth, mib(r.LiveHeap.Max), mib(r.LiveHeap.LineStart), mib(r.LiveHeap.LineEnd), 100*r.LiveHeap.Growth)
	fmt.Fprintf(&b, "caches:     first %s, warmed up %s, last %s, max after warm-up %s; the live heap outside them: the line after warm-up %s to %s: %+.1f%%\n",
		mib(r.Caches.First), mib(r.Caches.WarmedUp), mib(r.Caches.Last), mib(r.Caches.Max), mib(r.HeapOutsideCaches.LineStart), mib(r.HeapOutsideCaches.LineEnd), 100*r.HeapOutsideCaches.Growth)
	fmt.Fprintf(&b, "goroutines: first %d, warmed up %d, last %d, max after warm-up %d; the line after warm-up %d to %d; outside the connections and the account queue %d to %d\n",
		r.Goroutines.First, r.Goroutines.WarmedUp, r.Goroutines.Last, r.Goroutines.Max, r.Goroutines.LineStart, r.Goroutines.LineEnd,
		r.GoroutinesOutsideConnections.LineStart, r.GoroutinesOutsideConnections.LineEnd)
	for _, rg := range ranges {
		l := r.Queries[rg.name]
		fmt.Fprintf(&b, "queries %s:  %d answered, %d errors; p50 %.3fs, p99 %.3fs, max %.3fs; outside the outage p99 %.3fs (%d answers in it)\n",
			rg.name, l.Queries, l.Errors, l.P50, l.P99, l.Max, l.P99OutsideOutage, l.InOutage)
		var minutes []string
		for m, ml := range l.Minutes {
			e := ""
			if ml.Errors > 0 {
				e = fmt.Sprintf(" %d errors", ml.Errors)
			}
			if ml.OverGoal > 0 {
				e += fmt.Sprintf(" (%d over %s)", ml.OverGoal, rg.p99Goal)
			}
			minutes = append(minutes, fmt.Sprintf("%d: %d p99 %.1fs%s", m+1, ml.Queries, ml.P99, e))
		}
		if len(minutes) > 0 {
			fmt.Fprintf(&b, "  by minute sent: %s\n", strings.Join(minutes, ", "))
		}
		if rg.name == ranges[0].name && len(r.BackgroundByMinute) > 0 {
			fmt.Fprintf(&b, "  background by minute (account requests by task, MB read): %s\n", backgroundText(r.BackgroundByMinute))
		}
		if len(l.OverGoalByPanel) > 0 {
			panels := slices.Sorted(maps.Keys(l.OverGoalByPanel))
			slices.SortStableFunc(panels, func(a, b string) int { return cmp.Compare(l.OverGoalByPanel[b], l.OverGoalByPanel[a]) })
			fmt.Fprintf(&b, "  over %s outside the outage, by panel:\n", rg.p99Goal)
			for _, p := range panels {
				fmt.Fprintf(&b, "    %d: %s\n", l.OverGoalByPanel[p], p)
			}
		}
		for i, q := range l.Slowest {
			if i == 0 {
				fmt.Fprintf(&b, "  slowest outside the outage:\n")
			}
			fmt.Fprintf(&b, "    %.2fs, sent at %.0fs, tenant %s: %s\n", q.Seconds, q.At, q.Tenant, q.Expr)
		}
	}
	fmt.Fprintf(&b, "answers:    %d cross-tenant, %d empty\n", r.CrossTenantAnswers, r.EmptyAnswers)
	if r.FirstCrossTenant != "" {
		fmt.Fprintf(&b, "            first cross-tenant: %s\n", r.FirstCrossTenant)
	}
	if r.FirstQueryError != "" {
		fmt.Fprintf(&b, "            first query error: %s\n", r.FirstQueryError)
	}
	tenants := make([]string, 0, len(r.PerTenant))
	for t := range r.PerTenant {
		tenants = append(tenants, t)
	}
	sort.Strings(tenants)
	for _, t := range tenants {
		tr := r.PerTenant[t]
		wr, rb := tr.Writes, tr.Readback
		backfilled := ""
		if wr.Backfilled > 0 {
			backfilled = fmt.Sprintf(" (%d of them backfilled)", wr.Backfilled)
		}
		fmt.Fprintf(&b, "tenant %s: samples sent %d%s, acknowledged %d, dropped (4xx) %d, unsent %d; read back %d of %d series checked (missing %d, extra %d, series missing %d, other tenants' series %d); requests %d, retries %d, answers %s\n",
			t, wr.Sent, backfilled, wr.Acked, wr.Dropped, wr.Pending, rb.Samples, rb.SeriesChecked, rb.Missing, rb.Extra, rb.SeriesMissing, rb.CrossTenant, wr.Requests, wr.Retries, statusText(wr.Status))
		if rb.Unverified > 0 {
			fmt.Fprintf(&b, "            %d acknowledged samples not verified: %s\n", rb.Unverified, rb.Error)
		}
		if rb.FirstMissing != "" {
			fmt.Fprintf(&b, "            first missing: %s\n", rb.FirstMissing)
		}
	}
	fmt.Fprintf(&b, "account:    %d requests, %.4f a sample of the load acknowledged\n", r.AccountRequests, r.AccountRequestsPerSample)
	for _, t := range r.Targets {
		mark := "ok  "
		if !t.OK {
			mark = "FAIL"
		}
		fmt.Fprintf(&b, "%s %s: %s (goal %s)\n", mark, t.Name, t.Value, t.Goal)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func statusText(m map[int]int64) string {
	codes := make([]int, 0, len(m))
	for c := range m {
		codes = append(codes, c)
	}
	sort.Ints(codes)
	var parts []string
	for _, c := range codes {
		name := fmt.Sprint(c)
		if c == 0 {
			name = "none"
		}
		parts = append(parts, fmt.Sprintf("%s x%d", name, m[c]))
	}
	return strings.Join(parts, ", ")
}

// backgroundText is the minutes of background work that sent a request, as "8: rollup 406,
// compact 30, 52 MB": the task with the most requests first.
func backgroundText(minutes []BackgroundMinute) string {
	var out []string
	for i, m := range minutes {
		if len(m.Requests) == 0 {
			continue
		}
		tasks := slices.Sorted(maps.Keys(m.Requests))
		slices.SortStableFunc(tasks, func(a, b string) int { return cmp.Compare(m.Requests[b], m.Requests[a]) })
		var parts []string
		for _, task := range tasks {
			parts = append(parts, fmt.Sprintf("%s %d", task, m.Requests[task]))
		}
		out = append(out, fmt.Sprintf("%d: %s, %.0f MB", i+1, strings.Join(parts, ", "), float64(m.ReadBytes)/1e6))
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, "; ")
}
