package server_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/prompb"

	"github.com/seed71701133/tablets/internal/meter"
	"github.com/seed71701133/tablets/internal/testkit/azurite"
	"github.com/seed71701133/tablets/internal/testkit/dbtest"
	"github.com/seed71701133/tablets/internal/testkit/promrun"
)

func TestMain(m *testing.M) {
	if code, ok := foldChild(); ok { // the test binary run as TestCrashRemoteWrite's fold process
		os.Exit(code)
	}
	azurite.Main(m)
}

// The queries compared: plain selectors exactly (same series, same timestamps, same value
// bits), functions within 1e-6 relative. Tablets' API runs Prometheus 3's engine, P1 and P2
// run 2.42's, whose rate extrapolates differently where a counter starts within the range:
// so tablets' answers to functions are held to Prometheus 3's engine on P1's own samples
// (refEngine), and P2's (2.42 over tablets' remote read) to P1's.
var (
	e2eExact = []string{
		`up`,
		`prometheus_http_requests_total`,
		`prometheus_tsdb_head_series`,
		`e2e_gauge`,
		`e2e_special`,
	}
	e2eApprox = []string{
		`rate(prometheus_http_requests_total[30s])`,
		`sum by (job) (rate(prometheus_tsdb_head_samples_appended_total[30s]))`,
		`histogram_quantile(0.9, sum by (le) (rate(prometheus_http_request_duration_seconds_bucket[30s])))`,
	}
)

const (
	e2eRel  = 1e-6
	e2eStep = 5 * time.Second
)

// TestE2E runs tablets against a real Prometheus (2.42): Prometheus P1 scrapes itself and a
// target the test controls every second and remote-writes, through a round-robin proxy, to
// two tablets servers A and B on one database; the test then compares what tablets answers
// (its query API on A and on B, its remote read, and a second Prometheus P2 that reads
// tablets through remote read, queried with promtool) with what P1 answers from its own
// TSDB; takes the account down for a while as P1 keeps pushing, and checks that nothing was
// lost once it is back; and checks that staleness markers arrive bit for bit.
//
// A and B run in this process because every request a test sends to Azure must go through
// the limit Checker (a separate `tablets serve` binary could not); they share nothing but
// the account: each has its own service client, Checker, *tsdb.DB and server.Server, as two
// processes would.
func TestE2E(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test: needs Azurite and Prometheus; skipped under -short")
	}
	promrun.Need(t) // install before the clock starts
	azurite.Shared(t)
	// Beside the other end-to-end tests: this test mostly waits for Prometheus' scrapes, on a database of
	// its own.
	t.Parallel()
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	rnd := make([]byte, 6)
	_, _ = rand.Read(rnd)
	dbName := "e2e" + hex.EncodeToString(rnd)
	dbtest.DropOnCleanup(t, dbName)
	var down atomic.Bool
	a := startNode(t, "A", dbName, &down, 30*time.Second)
	b := startNode(t, "B", dbName, &down, 30*time.Second)
	nodes := []*e2eNode{a, b}
	lb := newRoundRobin(t, a.http.URL, b.http.URL)
	lbSrv := httptest.NewServer(lb)
	t.Cleanup(lbSrv.Close)
	extra := &extraTarget{}
	extraSrv := httptest.NewServer(extra)
	t.Cleanup(extraSrv.Close)

	p1cfg := promrun.Config{
		SelfScrapeJob: "prometheus",
		Scrape:        []promrun.ScrapeJob{{Name: "extra", Targets: []string{extraSrv.Listener.Addr().String()}}},
		RemoteWrite:   []promrun.RemoteWrite{{URL: lbSrv.URL + "/api/v1/write", Name: "tablets"}},
		// Prometheus's default flush deadline, not promrun's 2 s: the deadline also bounds
		// how long resharding waits for the old shards, and a batch still in flight (or
		// being retried) when it expires is dropped (a hard shutdown, "Failed to flush
		// all samples on shutdown"). With 2 s, a reshard while a write takes longer than
		// that, or during the outage below, loses samples in Prometheus itself.
		Args: []string{"--storage.remote.flush-deadline=1m"},
	}
	p1 := promrun.Start(t, p1cfg)
	// P2 scrapes nothing: all it knows comes from tablets (A) through remote read.
	p2 := promrun.Start(t, promrun.Config{RemoteRead: []promrun.RemoteRead{{URL: a.http.URL + "/api/v1/read", Name: "tablets-a"}}})

	for _, q := range []string{`up{job="prometheus"}`, `up{job="extra"}`} {
		if _, err := p1.WaitFor(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	firstScrape := time.Now()
	t.Logf("first scrapes %s after start", firstScrape.Sub(began).Round(time.Millisecond))

	// Staleness, three ways: kind="b" disappears from the target's answer; then the target
	// fails (every series it had gets a marker, up goes 0); then a reload empties the job's
	// targets (up and the scrape_* series of the target get one). (Removing the whole job
	// instead writes no marker in Prometheus 2.42: the pool's context is cancelled before
	// the loops' end-of-run staleness runs.)
	sleepUntil(ctx, firstScrape.Add(20*time.Second))
	extra.dropB.Store(true)
	dropAt := time.Now()
	sleepUntil(ctx, dropAt.Add(10*time.Second))
	extra.fail.Store(true)
	failAt := time.Now()
	sleepUntil(ctx, failAt.Add(10*time.Second))
	p1cfgNoTarget := p1cfg
	p1cfgNoTarget.Scrape = []promrun.ScrapeJob{{Name: "extra", Targets: []string{}}}
	if err := p1.Reload(ctx, p1cfgNoTarget); err != nil {
		t.Fatal(err)
	}
	reloadAt := time.Now()
	sleepUntil(ctx, reloadAt.Add(25*time.Second))

	// Part 1: the last ~50 s, ending 10 s ago, at a 5 s step.
	end1 := time.Now().Add(-10 * time.Second).Truncate(e2eStep)
	start1 := end1.Add(-50 * time.Second)
	p1Raw := waitDelivered(ctx, t, p1, nodes, began, end1)
	checkStaleness(t, p1Raw, extraSrv.Listener.Addr().String())
	ref := newRefEngine(p1Raw)

	apis := map[string]apiClient{"A": newAPIClient(a.http.URL), "B": newAPIClient(b.http.URL)}
	for _, q := range e2eExact {
		compareQuery(ctx, t, p1, ref, apis, q, start1, end1, e2eStep, 0, true)
	}
	for _, q := range e2eApprox {
		compareQuery(ctx, t, p1, ref, apis, q, start1, end1, e2eStep, e2eRel, false)
	}
	// Across the staleness markers, at the scrape interval: the series end at the same step.
	around := func(at time.Time) (time.Time, time.Time) {
		to := at.Add(8 * time.Second).Truncate(time.Second)
		if to.After(end1) {
			to = end1
		}
		return at.Add(-5 * time.Second).Truncate(time.Second), to
	}
	from, to := around(dropAt)
	compareQuery(ctx, t, p1, ref, apis, `e2e_gauge`, from, to, time.Second, 0, true)
	from, to = around(failAt)
	compareQuery(ctx, t, p1, ref, apis, `{job="extra"}`, from, to, time.Second, 0, true)
	from, to = around(reloadAt)
	compareQuery(ctx, t, p1, ref, apis, `{job="extra"}`, from, to, time.Second, 0, true)

	// P2 answers from tablets through remote read, with 2.42's engine, through promtool.
	if m, err := p2.QueryRange(ctx, `up`, start1, end1, e2eStep); err != nil || len(m) == 0 {
		t.Errorf("P2 query_range up: %d series, %v", len(m), err)
	}
	for _, q := range slices.Concat(e2eExact, e2eApprox) {
		rel := e2eRel
		if slices.Contains(e2eExact, q) {
			rel = 0
		}
		want, err := p1.QueryRange(ctx, q, start1, end1, e2eStep)
		if err != nil {
			t.Fatalf("P1 %s: %v", q, err)
		}
		got, err := p2.PromtoolQueryRange(ctx, q, start1, end1, e2eStep)
		if err != nil {
			t.Errorf("P2 promtool %s: %v", q, err)
			continue
		}
		if d := diffMatrix(want, got, rel, 10); len(d) > 0 {
			t.Errorf("P2 (promtool, remote read from A) %s differs from P1:\n\t%s", q, strings.Join(d, "\n\t"))
		}
	}

	compareMetadata(ctx, t, p1, apis, began.Add(-time.Minute), time.Now().Add(time.Minute))

	// Part 2: the account goes down as P1 keeps pushing.
	before := map[string]uint64{}
	for _, n := range nodes {
		before[n.name] = n.srv.WriteStats().Requests[http.StatusServiceUnavailable]
	}
	retriedBefore, _ := p1Value(ctx, p1, `sum(prometheus_remote_storage_samples_retried_total)`)
	outageStart := time.Now()
	down.Store(true)
	sleepUntil(ctx, outageStart.Add(12*time.Second))
	down.Store(false)
	outageEnd := time.Now()
	t.Logf("account down for %s", outageEnd.Sub(outageStart).Round(time.Millisecond))
	// Each failed write takes seconds (every series is retried), so Prometheus sends only a
	// few while the account is down: together the servers must have answered some 503.
	var failed uint64
	for _, n := range nodes {
		got := n.srv.WriteStats().Requests[http.StatusServiceUnavailable] - before[n.name]
		failed += got
		t.Logf("node %s answered %d remote writes 503 while the account was down", n.name, got)
	}
	if failed == 0 {
		t.Error("no remote write was answered 503 while the account was down")
	}

	sleepUntil(ctx, outageEnd.Add(10*time.Second))
	end2 := time.Now().Add(-5 * time.Second).Truncate(e2eStep)
	start2 := outageStart.Add(-20 * time.Second).Truncate(e2eStep)
	p1Raw = waitDelivered(ctx, t, p1, nodes, began, end2)
	ref = newRefEngine(p1Raw)
	for _, q := range []string{`up`, `prometheus_http_requests_total`} {
		compareQuery(ctx, t, p1, ref, apis, q, start2, end2, e2eStep, 0, true)
	}
	compareQuery(ctx, t, p1, ref, apis, `count_over_time(up{job="prometheus"}[1m])`, start2, end2, e2eStep, 0, false)
	retried, _ := p1Value(ctx, p1, `sum(prometheus_remote_storage_samples_retried_total)`)
	if retried <= retriedBefore {
		t.Errorf("P1 retried no sample during the outage (prometheus_remote_storage_samples_retried_total %v, before %v)", retried, retriedBefore)
	}
	for _, q := range []string{`sum(prometheus_remote_storage_samples_failed_total)`, `sum(prometheus_remote_storage_samples_dropped_total)`} {
		if v, ok := p1Value(ctx, p1, q); !ok || v != 0 {
			t.Errorf("P1 %s = %v (present %v), want 0: Prometheus gave up on samples", q, v, ok)
		}
	}

	// Fold everything staged so far, as `tablets maintain` would, from a handle of its own
	// whose clock is a staging bucket and the fold's margin ahead (the test lasts minutes, and
	// Fold leaves the latest buckets to come): then the servers still answer every sample.
	fold := foldNow(ctx, t, dbName)
	waitDelivered(ctx, t, p1, nodes, began, end2)

	// Figures.
	samples := 0
	for _, s := range p1Raw.samples {
		samples += len(s)
	}
	sent, _ := p1Value(ctx, p1, `sum(prometheus_remote_storage_samples_total)`)
	t.Logf("P1: %d series, %d samples from start to %s; %v samples sent by remote write, %v retried",
		len(p1Raw.samples), samples, end2.Format(time.TimeOnly), sent, retried)
	for i, n := range nodes {
		ws := n.srv.WriteStats()
		cs := n.checker.Stats()
		codes := slices.Sorted(maps.Keys(ws.Requests))
		var byCode []string
		for _, c := range codes {
			byCode = append(byCode, fmt.Sprintf("%d: %d", c, ws.Requests[c]))
			if c != http.StatusNoContent && c != http.StatusServiceUnavailable {
				t.Errorf("node %s answered %d remote writes %d", n.name, ws.Requests[c], c)
			}
		}
		if rejected := rejectedSamples(ws); rejected != 0 {
			t.Errorf("node %s rejected %d samples", n.name, rejected)
		}
		t.Logf("node %s: %d requests via the proxy; remote writes by code {%s}; samples received %d, written %d, rejected %d",
			n.name, lb.counts[i].Load(), strings.Join(byCode, ", "), ws.SamplesReceived, ws.SamplesWritten, ws.SamplesRejected)
		t.Logf("node %s: Azure requests %d (calls %d): %d queries, %d batches of %d operations, %d entity writes, %d other; %d failed by the outage; %d log lines",
			n.name, cs.Requests, cs.Calls, cs.Queries, cs.Batches, cs.BatchOperations, cs.EntityWrites, cs.Other, n.fault.Injected(), n.logs.Lines())
	}
	t.Logf("remote writes through the proxy: %s", lb.writeLatency())
	checkTransactionsPerSample(t, nodes, fold)
	t.Logf("run took %s", time.Since(began).Round(time.Millisecond))
}

// e2eMaxTransactionsPerSample is issue 19's bound on the Azure requests a remote-written
// sample costs in this test (626 series at 1 s, 500 samples a request).
const e2eMaxTransactionsPerSample = 0.05

// checkTransactionsPerSample logs the Azure requests and bytes per sample written, by origin,
// and holds to e2eMaxTransactionsPerSample both the remote writes' and everything but the
// test's own reads (remote writes, the background loops, and a fold of it all). A request is
// every attempt that reached the account, a transaction (batch) counting one. The reads are
// logged, not bounded: they depend on what the test asks (the query API, remote read, P2). A
// fold costs about a request a series however many points it moves, which a test of 100 s
// (75 points a series) amortizes less than an hourly fold does.
func checkTransactionsPerSample(t *testing.T, nodes []*e2eNode, fold foldCost) {
	t.Helper()
	var samples uint64
	var by [numOrigins]meter.Counts
	for _, n := range nodes {
		samples += writtenSamples(n.srv.WriteStats())
		for o := range numOrigins {
			by[o] = sumCounts(by[o], n.origins.counts(o))
		}
	}
	if samples == 0 {
		t.Error("no sample written: no figure")
		return
	}
	per := func(c meter.Counts) string {
		return fmt.Sprintf("%d requests (%.4f a sample), %.1f bytes sent and %.1f received a sample", c.Requests,
			float64(c.Requests)/float64(samples), float64(c.BytesSent)/float64(samples), float64(c.BytesReceived)/float64(samples))
	}
	t.Logf("%d samples written by remote write", samples)
	for o := range numOrigins {
		t.Logf("Azure requests for %s: %s", o, per(by[o]))
	}
	t.Logf("Azure requests for the fold: %s (%d staging entities, %d points, %d series)", per(fold.wire),
		fold.report.Entities, fold.report.Points, fold.report.Series)
	stored := sumCounts(by[fromWrite], by[fromLoops], fold.wire)
	t.Logf("Azure requests for all but the reads (remote writes, background loops, fold): %s", per(stored))
	if tps := float64(by[fromWrite].Requests) / float64(samples); tps > e2eMaxTransactionsPerSample {
		t.Errorf("remote writes: %.4f Azure transactions a sample, want at most %v", tps, e2eMaxTransactionsPerSample)
	}
	if tps := float64(stored.Requests) / float64(samples); tps > e2eMaxTransactionsPerSample {
		t.Errorf("all but the reads: %.4f Azure transactions a sample, want at most %v", tps, e2eMaxTransactionsPerSample)
	}
}

// sumCounts adds up meter counts.
func sumCounts(cs ...meter.Counts) meter.Counts {
	var s meter.Counts
	for _, c := range cs {
		s.Requests += c.Requests
		s.BytesSent += c.BytesSent
		s.BytesReceived += c.BytesReceived
	}
	return s
}

// sleepUntil sleeps until t or until ctx is done.
func sleepUntil(ctx context.Context, t time.Time) {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-ctx.Done():
	case <-timer.C:
	}
}

// waitDelivered waits until the raw samples of every series in [from, to], read from P1's
// TSDB and from tablets through A's and B's remote read, are the same, bit for bit (remote
// write is eventually delivered; to is in the past, so what P1 has there is final), and
// returns P1's. It fails the test if they still differ after a minute.
func waitDelivered(ctx context.Context, t *testing.T, p1 *promrun.Prometheus, nodes []*e2eNode, from, to time.Time) *rawSeries {
	t.Helper()
	all := &prompb.LabelMatcher{Type: prompb.LabelMatcher_RE, Name: "__name__", Value: ".+"}
	want, err := remoteRead(ctx, p1.URL()+"/api/v1/read", from, to, all)
	if err != nil {
		t.Fatalf("P1 remote read: %v", err)
	}
	if len(want.samples) == 0 {
		t.Fatal("P1 remote read: no series")
	}
	deadline := time.Now().Add(time.Minute)
	waited := time.Now()
	for attempt := 1; ; attempt++ {
		var diffs []string
		for _, n := range nodes {
			got, err := remoteRead(ctx, n.http.URL+"/api/v1/read", from, to, all)
			if err != nil {
				diffs = append(diffs, fmt.Sprintf("node %s: %v", n.name, err))
				continue
			}
			for _, d := range diffRaw(want, got, 10) {
				diffs = append(diffs, "node "+n.name+": "+d)
			}
		}
		if len(diffs) == 0 {
			t.Logf("raw samples to %s identical in P1, A and B (%d series) after %d reads, %s",
				to.Format(time.TimeOnly), len(want.samples), attempt, time.Since(waited).Round(time.Millisecond))
			return want
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("raw samples to %s still differ from P1's after %d reads:\n\t%s", to.Format(time.TimeOnly), attempt, strings.Join(diffs, "\n\t"))
		}
		sleepUntil(ctx, time.Now().Add(2*time.Second))
	}
}

// checkStaleness checks that P1 wrote the staleness markers the test provoked, and NaNs
// that are not markers, so that the bit-for-bit comparison of waitDelivered covered them.
func checkStaleness(t *testing.T, raw *rawSeries, target string) {
	t.Helper()
	// tail returns the last n samples of series k, or fails.
	tail := func(k string, n int) []prompb.Sample {
		s := raw.samples[k]
		if len(s) < n {
			t.Errorf("P1 has %d samples of %s, want at least %d", len(s), k, n)
			return nil
		}
		return s[len(s)-n:]
	}
	stale := func(s prompb.Sample) bool { return value.IsStaleNaN(s.Value) }
	for _, k := range []string{
		fmt.Sprintf(`e2e_gauge{instance=%q, job="extra", kind="b"}`, target),
		fmt.Sprintf(`e2e_gauge{instance=%q, job="extra", kind="a"}`, target),
		fmt.Sprintf(`e2e_special{instance=%q, job="extra", v="inf"}`, target),
	} {
		if s := tail(k, 2); s != nil && (!stale(s[1]) || stale(s[0])) {
			t.Errorf("P1's %s does not end with a value and a staleness marker: %s, %s", k, fmtSample(s[0]), fmtSample(s[1]))
		}
	}
	k := fmt.Sprintf(`e2e_special{instance=%q, job="extra", v="nan"}`, target)
	if s := tail(k, 2); s != nil && (!stale(s[1]) || stale(s[0]) || !math.IsNaN(s[0].Value)) {
		t.Errorf("P1's %s does not end with a NaN and a staleness marker: %s, %s", k, fmtSample(s[0]), fmtSample(s[1]))
	}
	k = fmt.Sprintf(`up{instance=%q, job="extra"}`, target)
	if s := tail(k, 2); s != nil && (!stale(s[1]) || s[0].Value != 0) {
		t.Errorf("P1's %s does not end with 0 (the failed scrapes) and a staleness marker: %s, %s", k, fmtSample(s[0]), fmtSample(s[1]))
	}
	n := 0
	for _, ss := range raw.samples {
		for _, s := range ss {
			if stale(s) {
				n++
			}
		}
	}
	t.Logf("P1 wrote %d staleness markers; tablets has them bit for bit", n)
}

// compareQuery runs a range query on each tablets API: every server must give the same
// answer (exactly), and that answer must match, within rel, what Prometheus 3's engine
// answers on P1's samples (ref: the engine tablets runs) and, if strictP1, what P1 answers
// (Prometheus 2.42: plain selectors, whose answers no engine change touches). Where a
// function's answer differs from P1's, the difference is the engines' and is logged.
func compareQuery(ctx context.Context, t *testing.T, p1 *promrun.Prometheus, ref *refEngine, apis map[string]apiClient,
	q string, start, end time.Time, step time.Duration, rel float64, strictP1 bool) {
	t.Helper()
	span := fmt.Sprintf("%s [%s, %s] step %s", q, start.Format(time.TimeOnly), end.Format(time.TimeOnly), step)
	want, err := p1.QueryRange(ctx, q, start, end, step)
	if err != nil {
		t.Fatalf("P1 %s: %v", span, err)
	}
	if len(want) == 0 {
		t.Errorf("P1 %s: no series (the comparison would be vacuous)", span)
	}
	want3, err := ref.queryRange(ctx, q, start, end, step)
	if err != nil {
		t.Fatalf("reference engine %s: %v", span, err)
	}
	var first promrun.Matrix
	var firstName string
	for _, name := range slices.Sorted(maps.Keys(apis)) {
		got, err := apis[name].queryRange(ctx, q, start, end, step)
		if err != nil {
			t.Errorf("tablets %s: %v", name, err)
			continue
		}
		if d := diffMatrix(want3, got, rel, 10); len(d) > 0 {
			t.Errorf("tablets %s: %s differs from Prometheus 3's engine on P1's samples (rel %g):\n\t%s", name, span, rel, strings.Join(d, "\n\t"))
		}
		if d := diffMatrix(want, got, rel, 10); len(d) > 0 {
			if strictP1 {
				t.Errorf("tablets %s: %s differs from P1 (rel %g):\n\t%s", name, span, rel, strings.Join(d, "\n\t"))
			} else if first == nil {
				t.Logf("tablets %s: %s differs from P1's answer as Prometheus 3's engine does from 2.42's:\n\t%s", name, span, strings.Join(d, "\n\t"))
			}
		}
		if first == nil {
			first, firstName = got, name
		} else if d := diffMatrix(first, got, 0, 10); len(d) > 0 {
			t.Errorf("tablets %s and %s answer %s differently:\n\t%s", firstName, name, span, strings.Join(d, "\n\t"))
		}
	}
}

// compareMetadata compares the series, label names and job values over [start, end] (which
// covers the whole run: tablets' index is per period). Retried: P1 makes series for the
// endpoints the test calls, which tablets gets a second later.
func compareMetadata(ctx context.Context, t *testing.T, p1 *promrun.Prometheus, apis map[string]apiClient, start, end time.Time) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		var diffs []string
		check := func(what string, want []string, wantErr error, get func(apiClient) ([]string, error)) {
			if wantErr != nil {
				t.Fatalf("P1 %s: %v", what, wantErr)
			}
			if len(want) == 0 {
				diffs = append(diffs, "P1 "+what+": empty")
			}
			for _, name := range slices.Sorted(maps.Keys(apis)) {
				got, err := get(apis[name])
				if err != nil {
					diffs = append(diffs, fmt.Sprintf("tablets %s %s: %v", name, what, err))
					continue
				}
				for _, d := range diffSets(want, got, 10) {
					diffs = append(diffs, fmt.Sprintf("tablets %s %s: %s", name, what, d))
				}
			}
		}
		for _, match := range []string{`prometheus_http_requests_total`, `{job="extra"}`} {
			ls, err := p1.Series(ctx, match, start, end)
			check("series "+match, labelStrings(ls), err, func(c apiClient) ([]string, error) {
				ls, err := c.series(ctx, match, start, end)
				return labelStrings(ls), err
			})
		}
		vs, err := p1.LabelValues(ctx, "job", start, end)
		check("label job values", vs, err, func(c apiClient) ([]string, error) { return c.labelValues(ctx, "job", start, end) })
		ns, err := p1.LabelNames(ctx, start, end)
		check("label names", ns, err, func(c apiClient) ([]string, error) { return c.labelNames(ctx, start, end) })
		if len(diffs) == 0 {
			t.Logf("series, label names and job values identical in P1, A and B (%d label names; attempt %d)", len(ns), attempt)
			return
		}
		if attempt == 10 || ctx.Err() != nil {
			t.Errorf("metadata differs from P1's:\n\t%s", strings.Join(diffs, "\n\t"))
			return
		}
		sleepUntil(ctx, time.Now().Add(2*time.Second))
	}
}

// p1Value is the value of a one-sample instant query on P1 (ok false if it has none).
func p1Value(ctx context.Context, p1 *promrun.Prometheus, q string) (float64, bool) {
	v, err := p1.Query(ctx, q, time.Time{})
	var w *promrun.WarningsError
	if (err != nil && !errors.As(err, &w)) || len(v) != 1 {
		return math.NaN(), false
	}
	return v[0].Value.V, true
}
