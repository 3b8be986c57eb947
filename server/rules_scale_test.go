package server_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	promrules "github.com/prometheus/prometheus/rules"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets/internal/reqlimit"
	"github.com/seed71701133/tablets/internal/testkit/azurite"
	"github.com/seed71701133/tablets/internal/testkit/rwgen"
	"github.com/seed71701133/tablets/server"
	"github.com/seed71701133/tablets/server/rules"
	"github.com/seed71701133/tablets/tsdb"
)

// scaleRules writes issue 37's scale: groups groups of 10 rules (8 recording, 2 alerting)
// at interval, group g's rules over the 100 series of rwgen_metric_g.
func scaleRules(t testing.TB, groups int, interval time.Duration) string {
	var b strings.Builder
	b.WriteString("groups:\n")
	for g := range groups {
		m := fmt.Sprintf("rwgen_metric_%d", g)
		fmt.Fprintf(&b, "  - name: scale_%03d\n    interval: %s\n    rules:\n", g, interval)
		for i, expr := range []string{
			"sum(rate(%s[5m]))", "max(%s)", "avg(rate(%s[5m]))", "count(%s)",
			"sum by (job) (increase(%s[5m]))", "quantile(0.9, rate(%s[5m]))", "min(%s)", "stddev(rate(%s[5m]))",
		} {
			fmt.Fprintf(&b, "      - record: scale:r%d:%d\n        expr: %s\n", g, i, fmt.Sprintf(expr, m))
		}
		fmt.Fprintf(&b, "      - alert: ScaleRateHigh%d\n        expr: rate(%s[5m]) > 1e12\n        for: 5m\n", g, m)
		fmt.Fprintf(&b, "      - alert: ScaleAbsent%d\n        expr: absent(%s)\n        for: 2m\n", g, m)
	}
	file := filepath.Join(t.TempDir(), "scale.yml")
	require.NoError(t, os.WriteFile(file, []byte(b.String()), 0o644))
	return file
}

// scaleService is a service client of the shared Azurite through checker.
func scaleService(t testing.TB, checker policy.Transporter) *aztables.ServiceClient {
	svc, err := azurite.Shared(t).NewServiceClient(&aztables.ClientOptions{ClientOptions: policy.ClientOptions{
		Transport: checker, Retry: azurite.TestRetryOptions(), PerCallPolicies: []policy.Policy{runtime.NewRequestIDPolicy()}}})
	require.NoError(t, err)
	return svc
}

// kindCounter counts the requests it passes on by method and table kind (the letter after
// the database's name: w staging, i index, r raw, m catalog, h histograms; "$batch" for
// transactions, whose table is in their body).
type kindCounter struct {
	next policy.Transporter
	base string
	mu   sync.Mutex
	n    map[string]int64
}

func (k *kindCounter) Do(req *http.Request) (*http.Response, error) {
	seg := req.URL.Path[strings.LastIndex(req.URL.Path, "/")+1:]
	kind := seg
	if rest, ok := strings.CutPrefix(seg, k.base); ok && rest != "" {
		kind = rest[:1]
	} else if i := strings.IndexAny(seg, "(0123456789"); i > 0 {
		kind = seg[:i]
	}
	if seg == "$batch" && req.Body != nil {
		// The table is in the body: the first operation's URL.
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		if i := bytes.Index(body, []byte("/"+k.base)); i >= 0 && i+1+len(k.base) < len(body) {
			kind += " " + string(body[i+1+len(k.base)])
		}
	}
	k.mu.Lock()
	k.n[req.Method+" "+kind]++
	k.mu.Unlock()
	return k.next.Do(req)
}

// take returns the counts since the last take.
func (k *kindCounter) take() map[string]int64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	n := k.n
	k.n = map[string]int64{}
	return n
}

// BenchmarkRulesScale is issue 37's scale on this machine: 1,000 rules in 100 groups at a
// 1-minute interval over 10,000 series that remote writes bring every 15 s (10 minutes of
// them before the rules start), with leases, for TABLETS_RULES_SCALE_DURATION (default 5m;
// the run is 30m). It reports the evaluation lag (an evaluation's end less its
// slot: p50, p99, max), the evaluations made and missed, and the account requests and
// response bytes of an evaluation: those of the run less the ingest's, measured alone for
// two minutes before. The server runs its background loops (fold, rollup, compaction) at
// their defaults, the rollup every 30 minutes (so that a 30-minute run has one), unless
// TABLETS_RULES_SCALE_BACKGROUND=off (then it folds only, hourly): on this machine a
// rollup of 10,000 series keeps Azurite busy enough to make the rules late.
//
//	TABLETS_RULES_SCALE_DURATION=30m go test ./server -run '^$' -bench BenchmarkRulesScale -benchtime 1x -timeout 60m
func BenchmarkRulesScale(b *testing.B) {
	run := 5 * time.Minute
	if v := os.Getenv("TABLETS_RULES_SCALE_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		require.NoError(b, err)
		run = d
	}
	// The defaults, but for the rollup: every 30 minutes (twice as often as by default),
	// whose ticks come on the half hours: a 30-minute run has one.
	rollupEvery, compactEvery := 30*time.Minute, time.Duration(0)
	switch v := os.Getenv("TABLETS_RULES_SCALE_BACKGROUND"); v {
	case "", "on":
	case "off":
		rollupEvery, compactEvery = -1, -1
	default:
		b.Fatalf("TABLETS_RULES_SCALE_BACKGROUND=%q: want on or off", v)
	}
	const (
		series, metrics, groups = 10_000, 100, 100
		scrape                  = 15 * time.Second
		interval                = time.Minute
	)
	var mu sync.Mutex
	var lags []time.Duration
	var slots []time.Time // of lags
	record := func(ctx context.Context, g *promrules.Group, ts time.Time) {
		promrules.DefaultEvalIterationFunc(ctx, g, ts)
		mu.Lock()
		lags, slots = append(lags, time.Since(ts)), append(slots, ts)
		mu.Unlock()
	}
	// The database as tablets serve opens it: with its read caches (four times its default sizes:
	// 10,000 series) and its bound on the requests in flight.
	_, name, checker := openDB(b, nil)
	stagingCache := tsdb.NewStagingCache(4 * tsdb.DefaultStagingCacheBytes)
	kinds := &kindCounter{next: checker, base: name, n: map[string]int64{}}
	// tablets serve's bound on the requests in flight (64: background loops at most half).
	limited := reqlimit.New(kinds, 64)
	db, err := tsdb.Open(context.Background(), scaleService(b, limited), name, &tsdb.Options{Layout: chunkedLayout,
		StagingCache: stagingCache, BlockCache: tsdb.NewBlockCache(4 * tsdb.DefaultBlockCacheBytes),
		RawCache: tsdb.NewRawCache(4 * tsdb.DefaultRawCacheBytes), IndexCache: tsdb.NewIndexCache(4 * tsdb.DefaultIndexCacheBytes)})
	require.NoError(b, err)
	s, err := server.New(db, &server.Options{RetainEvery: -1, RollupEvery: rollupEvery, CompactEvery: compactEvery,
		Rules: &rules.Options{Files: []string{scaleRules(b, groups, interval)}, EvalIteration: record, Lease: &rules.LeaseOptions{}}})
	require.NoError(b, err)
	hs := httptest.NewServer(s)
	b.Cleanup(func() { hs.Close(); _ = s.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// 10 minutes of the series before the rules start, then a round every 15 s.
	start := time.Now().Truncate(scrape).Add(-10 * time.Minute)
	value := func(tick int) func(s, r int) float64 {
		return func(s, r int) float64 { return float64((tick + r) * (s%10 + 1)) }
	}
	cfg := rwgen.Config{URL: hs.URL + "/api/v1/write", Series: series, Metrics: metrics, SamplesPerRequest: 2000, Shards: 5,
		Interval: scrape, Retry: true}
	back := cfg
	back.Requests, back.Start, back.Value = 40, start, value(0)
	res, err := rwgen.Run(ctx, back)
	require.NoError(b, err)
	b.Logf("backfill: %d samples of %d series in %s", res.Samples, series, res.Elapsed.Round(time.Millisecond))
	ticks := 40
	ingestErr := make(chan error, 1)
	go func() {
		next := start.Add(time.Duration(ticks) * scrape)
		for {
			select {
			case <-ctx.Done():
				ingestErr <- nil
				return
			case <-time.After(time.Until(next)):
			}
			c := cfg
			c.Requests, c.Start, c.Value = 1, next, value(ticks)
			if _, err := rwgen.Run(ctx, c); err != nil && ctx.Err() == nil {
				ingestErr <- err
				return
			}
			ticks++
			next = next.Add(scrape)
		}
	}()
	// The ingest alone, two minutes.
	checker.Reset()
	kinds.take()
	time.Sleep(2 * time.Minute)
	ingest := checker.Stats()
	ingestKinds := kinds.take()

	checker.Reset()
	runErr := make(chan error, 1)
	go func() { runErr <- s.Run(ctx) }()
	b.ResetTimer()
	began := time.Now()
	time.Sleep(run)
	took := time.Since(began)
	st := checker.Stats()
	runKinds := kinds.take()
	if resp, err := http.Get(hs.URL + "/metrics"); err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for line := range strings.Lines(string(body)) {
			if strings.HasPrefix(line, "tablets_background_runs_total{") {
				b.Logf("background: %s", strings.TrimSpace(line))
			}
		}
	}
	b.StopTimer()
	cancel()
	require.NoError(b, <-runErr)
	require.NoError(b, <-ingestErr)

	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(b, lags)
	sorted := slices.Clone(lags)
	slices.Sort(sorted)
	q := func(p float64) time.Duration { return sorted[min(len(sorted)-1, int(p*float64(len(sorted))))] }
	expected := float64(groups) * took.Seconds() / interval.Seconds()
	perMinute := func(n int64, d time.Duration) float64 { return float64(n) / d.Minutes() }
	ruleReq := perMinute(st.Requests, took) - perMinute(ingest.Requests, 2*time.Minute)
	ruleBytes := perMinute(st.ResponseBytes, took) - perMinute(ingest.ResponseBytes, 2*time.Minute)
	evalsPerMinute := float64(len(lags)) / took.Minutes()
	b.Logf("staging cache: %+v", stagingCache.Stats())
	// The lag by minute of the run: the first minute's evaluations take the leases and
	// restore the alerts' state.
	byMinute := map[int][]time.Duration{}
	for i, ts := range slots {
		m := int(ts.Sub(began) / time.Minute)
		byMinute[m] = append(byMinute[m], lags[i])
	}
	var minutes []string
	for _, m := range slices.Sorted(maps.Keys(byMinute)) {
		ls := byMinute[m]
		slices.Sort(ls)
		minutes = append(minutes, fmt.Sprintf("%d: %d, max %s", m, len(ls), ls[len(ls)-1].Round(100*time.Millisecond)))
	}
	b.Logf("evaluations and lag by minute of the run: %s", strings.Join(minutes, "; "))
	var byKind []string
	for _, k := range slices.Sorted(maps.Keys(runKinds)) {
		perEval := (perMinute(runKinds[k], took) - perMinute(ingestKinds[k], 2*time.Minute)) / evalsPerMinute
		byKind = append(byKind, fmt.Sprintf("%s %.1f", k, perEval))
	}
	b.Logf("requests an evaluation by kind (less the ingest's): %s", strings.Join(byKind, ", "))
	b.ReportMetric(q(0.5).Seconds(), "lag-p50-s")
	b.ReportMetric(q(0.99).Seconds(), "lag-p99-s")
	b.ReportMetric(sorted[len(sorted)-1].Seconds(), "lag-max-s")
	b.ReportMetric(float64(len(lags)), "evaluations")
	b.ReportMetric(ruleReq/evalsPerMinute, "requests/evaluation")
	b.ReportMetric(ruleBytes/evalsPerMinute, "response-bytes/evaluation")
	b.Logf("%d groups × 10 rules at %s over %d series for %s: %d evaluations (%.0f slots in the run), lag p50 %s p99 %s max %s; "+
		"ingest alone %.0f requests/min, with the rules %.0f: %.1f requests and %.0f response bytes an evaluation (%.2f a rule)",
		groups, interval, series, took.Round(time.Second), len(lags), expected, q(0.5).Round(time.Millisecond), q(0.99).Round(time.Millisecond),
		sorted[len(sorted)-1].Round(time.Millisecond), perMinute(ingest.Requests, 2*time.Minute), perMinute(st.Requests, took),
		ruleReq/evalsPerMinute, ruleBytes/evalsPerMinute, ruleReq/evalsPerMinute/10)
}
