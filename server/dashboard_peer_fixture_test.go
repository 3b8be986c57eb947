package server_test

// The pieces TestDashboardPeer and BenchmarkDashboardPeer (dashboard_peer_test.go) share:
// issue 36's dashboard data, written into tablets (and maintained as `tablets maintain`
// does) and into a Prometheus tsdb; its panels as Grafana sends them; each side's answer to
// a panel in one form; and their comparison.

import (
	"cmp"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"
	promtsdb "github.com/prometheus/prometheus/tsdb"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/maintain/schedule"
	"github.com/seed71701133/tablets/internal/testkit/azurite"
	"github.com/seed71701133/tablets/internal/testkit/dbtest"
	"github.com/seed71701133/tablets/internal/testkit/promjson"
	"github.com/seed71701133/tablets/server"
	"github.com/seed71701133/tablets/server/api"
	"github.com/seed71701133/tablets/server/promstore"
	"github.com/seed71701133/tablets/tsdb"
)

// The dashboard's data (issue 36), scaled by its number of targets.
const (
	dashScrape     = 15 * time.Second // the targets' and the native histograms' scrape interval
	dashSpan       = 6 * time.Hour    // how far back their samples go
	dashNodeScrape = time.Minute      // the node series' scrape interval
	dashNodeSpan   = 8 * 24 * time.Hour
	dashNodes      = 25 // each a node_load1 gauge and a counter: 50 series over 8 days
	// dashStaged is how much of the newest samples are in the staging table, written as
	// remote writes write them and not folded yet: half of tablets serve's hourly fold
	// interval, what a dashboard finds on average.
	dashStaged = 30 * time.Minute
)

var (
	dashJobs     = []string{"api", "web", "auth", "billing"}
	dashCodes    = []string{"200", "404", "500"}
	dashHandlers = []string{"/api/users", "/api/orders", "/login", "/static"}
	// dashLE are the classic histogram's bucket bounds, +Inf included.
	dashLE = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, math.Inf(1)}
)

// The native histograms' buckets: schema 1 (a bucket a half power of two), indexes
// dashNativeLow to dashNativeHigh (about 1 ms to 16 s) in one span.
const (
	dashNativeSchema = 1
	dashNativeLow    = -20
	dashNativeHigh   = 8
)

// dashTargets is the number of targets of the dashboard's data: TABLETS_DASHBOARD_TARGETS,
// else def (small, so that `go test ./server` and CI stay quick; issue 36's size is 100).
func dashTargets(tb testing.TB, def int) int {
	v := os.Getenv("TABLETS_DASHBOARD_TARGETS")
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		tb.Fatalf("TABLETS_DASHBOARD_TARGETS=%q: want a positive number of targets", v)
	}
	return n
}

// dashSeries is one series of the dashboard's data: float samples (ts, fs) or integer
// native histograms (ts, hs).
type dashSeries struct {
	pairs []string // label names and values
	ts    []int64  // milliseconds
	fs    []float64
	hs    []*histogram.Histogram
}

// dashGrid is the scrape times of a target scraped every interval at offset off past the
// interval's boundaries, from span before now to now.
func dashGrid(now time.Time, span, interval, off time.Duration) []int64 {
	first := now.Add(-span).Truncate(interval).Add(off)
	var ts []int64
	for t := first; !t.After(now); t = t.Add(interval) {
		ts = append(ts, t.UnixMilli())
	}
	return ts
}

// dashData makes the dashboard's samples up to now, the same for a number of targets
// whatever the run: each target and node draws from a generator of its own. A target
// scrapes at an offset of its own (as Prometheus spreads its targets), so times fall on
// milliseconds. Every seventh target restarts two thirds of the way: its counters and
// histograms start again from zero, as a process restarted does.
func dashData(targets int, now time.Time) []dashSeries {
	var out []dashSeries
	for i := range targets {
		rng := rand.New(rand.NewPCG(36, uint64(i)))
		job, inst := dashJobs[i%len(dashJobs)], fmt.Sprintf("host-%03d:8080", i)
		ts := dashGrid(now, dashSpan, dashScrape, time.Duration(i*1733%15000)*time.Millisecond)
		restart := -1
		if i%7 == 3 {
			restart = len(ts) * 2 / 3
		}
		var mine []*dashSeries // the target's series, added to out once complete
		floats := func(name string, pairs ...string) *dashSeries {
			s := &dashSeries{pairs: append([]string{"__name__", name, "job", job, "instance", inst}, pairs...), ts: ts,
				fs: make([]float64, 0, len(ts))}
			mine = append(mine, s)
			return s
		}
		up := floats("up")
		for range ts {
			up.fs = append(up.fs, 1)
		}
		for h, handler := range dashHandlers {
			for c, code := range dashCodes {
				s := floats("http_requests_total", "handler", handler, "code", code)
				v := 0.0
				for k := range ts {
					if k == restart {
						v = 0
					}
					switch c {
					case 0:
						v += float64(rng.IntN(20*(h+1) + 1))
					default:
						v += float64(rng.IntN(3 - c))
					}
					s.fs = append(s.fs, v)
				}
			}
		}
		mem := floats("process_resident_memory_bytes")
		base := 150e6 + float64(i)*3e6
		m := base
		for k := range ts {
			if k == restart {
				m = base
			}
			m = max(base/2, m+math.Round((rng.Float64()-0.45)*2e6))
			mem.fs = append(mem.fs, m)
		}
		buckets := make([]*dashSeries, len(dashLE))
		for j, le := range dashLE {
			buckets[j] = floats("http_request_duration_seconds_bucket", "le", strconv.FormatFloat(le, 'f', -1, 64))
		}
		sum, count := floats("http_request_duration_seconds_sum"), floats("http_request_duration_seconds_count")
		cum := make([]float64, len(dashLE))
		total := 0.0
		for k := range ts {
			if k == restart {
				clear(cum)
				total = 0
			}
			for range rng.IntN(25) {
				lat := math.Exp(math.Log(0.06) + rng.NormFloat64()*1.2)
				for j, le := range dashLE {
					if lat <= le {
						cum[j]++
					}
				}
				total += lat
			}
			for j := range dashLE {
				buckets[j].fs = append(buckets[j].fs, cum[j])
			}
			sum.fs = append(sum.fs, total)
			count.fs = append(count.fs, cum[len(cum)-1])
		}
		for _, s := range mine {
			out = append(out, *s)
		}
	}
	for j := range dashNodes {
		rng := rand.New(rand.NewPCG(3600, uint64(j)))
		ts := dashGrid(now, dashNodeSpan, dashNodeScrape, time.Duration((500+j*2311)%60000)*time.Millisecond)
		pairs := []string{"job", "node", "instance", fmt.Sprintf("node-%02d:9100", j)}
		load := dashSeries{pairs: append([]string{"__name__", "node_load1"}, pairs...), ts: ts, fs: make([]float64, len(ts))}
		rx := dashSeries{pairs: append([]string{"__name__", "node_network_receive_bytes_total"}, pairs...), ts: ts, fs: make([]float64, len(ts))}
		l, v := 1+rng.Float64(), 0.0
		for k := range ts {
			l = math.Abs(l + rng.NormFloat64()*0.3)
			v += float64(rng.IntN(5_000_000))
			load.fs[k], rx.fs[k] = l, v
		}
		out = append(out, load, rx)
	}
	for j, job := range dashJobs {
		rng := rand.New(rand.NewPCG(360, uint64(j)))
		ts := dashGrid(now, dashSpan, dashScrape, time.Duration((250+j*977)%15000)*time.Millisecond)
		s := dashSeries{pairs: []string{"__name__", "native_latency_seconds", "job", job}, ts: ts}
		counts := make([]int64, dashNativeHigh-dashNativeLow+1)
		var n uint64
		total := 0.0
		for range ts {
			for range rng.IntN(40) {
				lat := math.Exp(math.Log(0.08) + rng.NormFloat64())
				idx := int(math.Ceil(math.Log2(lat) * (1 << dashNativeSchema)))
				counts[min(max(idx, dashNativeLow), dashNativeHigh)-dashNativeLow]++
				n++
				total += lat
			}
			deltas := make([]int64, len(counts))
			prev := int64(0)
			for b, c := range counts {
				deltas[b], prev = c-prev, c
			}
			s.hs = append(s.hs, &histogram.Histogram{Schema: dashNativeSchema, ZeroThreshold: 2.938735877055719e-39,
				Count: n, Sum: total, PositiveSpans: []histogram.Span{{Offset: dashNativeLow, Length: uint32(len(counts))}},
				PositiveBuckets: deltas})
		}
		out = append(out, s)
	}
	return out
}

// dashRefreshAfter is how long after the dashboard's now its panels are asked, for the
// results cache's freshness horizon: a refresh 10 s after the newest scrape.
const dashRefreshAfter = 10 * time.Second

// dashFixture is the dashboard's data in both stores: a tablets database on the shared
// Azurite, whose requests the Checker counts; and a Prometheus tsdb in a temporary
// directory with the engine that queries it.
type dashFixture struct {
	targets int
	now     time.Time // the dashboard's "now": the newest samples are at most this
	series  int
	floats  int // float samples
	hists   int // native histogram samples

	svc     *aztables.ServiceClient
	name    string // of the tablets database
	checker *azurite.Checker

	prom   *promtsdb.DB
	engine *promql.Engine

	stagedAt time.Time // when the last staged commit returned

	// tails are the float series as they end at now, for samples after it (dashIngest's
	// writes, which move them on).
	tails []dashTail
}

// dashTail is a float series' last sample, how much it grew at its last scrape, and its key
// in the tablets database.
type dashTail struct {
	ls     labels.Labels
	key    string
	last   float64
	growth float64 // of a scrape: |last - the sample before|
}

// settle waits until the staging entities' listing margin passed since the last staged
// commit, as it has when Grafana refreshes a panel (every 30 s or more), and has each of
// servers list the staging table once more (an instant query of every series of a
// metric): its last listing may have been within the margin, and the first listing after
// it lists again the entities of the margin (54 KB at 10 targets). A refresh then lists
// only the entities written since.
func (fx *dashFixture) settle(tb testing.TB, servers ...http.Handler) {
	tb.Helper()
	time.Sleep(time.Until(fx.stagedAt.Add(11 * time.Second)))
	for _, s := range servers {
		_, err := dashPanel{kind: dashInstant, expr: `up`}.askTablets(s, fx.now)
		require.NoError(tb, err)
	}
}

// newDashFixture writes the dashboard's data of targets targets into a new tablets
// database and a new Prometheus tsdb, both dropped when tb ends. Into tablets, as a server
// that has run a while holds it: the samples older than dashStaged in the raw tables,
// compacted and rolled up; the newest staged, as remote writes left them.
func newDashFixture(tb testing.TB, targets int) *dashFixture {
	ctx := context.Background()
	now := time.Now().Truncate(time.Second) // Grafana sends whole seconds
	data := dashData(targets, now)
	fx := &dashFixture{targets: targets, now: now, series: len(data)}
	for _, s := range data {
		fx.floats += len(s.fs)
		fx.hists += len(s.hs)
	}
	fx.svc, fx.checker = dbtest.NewService(tb)
	rnd := make([]byte, 6)
	_, _ = crand.Read(rnd)
	fx.name = "dash" + hex.EncodeToString(rnd)
	dbtest.DropOnCleanup(tb, fx.name)
	db := fx.openDB(tb)

	start := time.Now()
	sets := make([]tsdb.Labels, len(data))
	for i, s := range data {
		sets[i] = tsdb.LabelsFromStrings(s.pairs...)
	}
	keys, err := db.SeriesOfMany(ctx, sets)
	require.NoError(tb, err)
	// The samples older than dashStaged, in bulk (a series' points go to its raw tables
	// directly): committed 100 series at a time, as the points of a commit are held twice
	// (as given and as planned).
	staged := now.Add(-dashStaged)
	next := make([]int, len(data)) // each series' first sample not appended yet
	app := db.Appender()
	for i := range data {
		appendBefore(app, data, keys, next, i, staged.UnixMilli())
		if i%100 == 99 || i == len(data)-1 {
			require.NoError(tb, app.Commit(ctx))
		}
	}
	wrote := fx.checker.Stats()
	tb.Logf("tablets: wrote %d series, %d float samples, %d native histogram samples (%d targets) before %s in %s: %d requests, %d bytes sent",
		fx.series, fx.floats, fx.hists, targets, dashStaged, time.Since(start).Round(time.Millisecond), wrote.Requests, wrote.RequestBytes)

	// What `tablets maintain` does, from the oldest sample on (the catch-up horizon is 72
	// hours: the 8 days of the node series are a backfill): fold, compact, roll up, the
	// slices the points written marked dirty, retain.
	fx.checker.Reset()
	start = time.Now()
	for step, err := range schedule.Once(ctx, db, &schedule.OnceOptions{From: now.Add(-dashNodeSpan - time.Hour)}) {
		require.NoError(tb, err, "maintain: %s", step.Task)
	}
	st := fx.checker.Stats()
	tb.Logf("tablets: maintained (fold, compact, rollup, flagged, retain) in %s: %d requests, %d bytes sent, %d received",
		time.Since(start).Round(time.Millisecond), st.Requests, st.RequestBytes, st.ResponseBytes)

	// The last dashStaged, as remote writes bring it: a commit a scrape interval, every
	// series' samples of that interval, staged and not folded yet.
	fx.checker.Reset()
	start = time.Now()
	commits := 0
	for to := staged.Add(dashScrape); ; to = to.Add(dashScrape) {
		for i := range data {
			appendBefore(app, data, keys, next, i, to.UnixMilli())
		}
		require.NoError(tb, app.Commit(ctx))
		commits++
		if to.After(now) {
			break
		}
	}
	fx.stagedAt = time.Now()
	for i, s := range data {
		if n := len(s.fs); n >= 2 && s.hs == nil {
			fx.tails = append(fx.tails, dashTail{ls: labels.FromStrings(s.pairs...), key: keys[i], last: s.fs[n-1],
				growth: math.Abs(s.fs[n-1] - s.fs[n-2])})
		}
	}
	st = fx.checker.Stats()
	tb.Logf("tablets: staged the last %s in %d commits in %s: %d requests, %d bytes sent",
		dashStaged, commits, time.Since(start).Round(time.Millisecond), st.Requests, st.RequestBytes)

	start = time.Now()
	fx.prom = openPromTSDB(tb, data)
	fx.engine = promql.NewEngine(promql.EngineOpts{
		MaxSamples: 50_000_000, Timeout: 2 * time.Minute, LookbackDelta: 5 * time.Minute,
		EnableAtModifier: true, EnableNegativeOffset: true,
	})
	tb.Cleanup(func() { _ = fx.engine.Close() })
	tb.Logf("prometheus: appended the same samples in %s", time.Since(start).Round(time.Millisecond))
	return fx
}

// openDB opens the fixture's tablets database as `tablets serve` does: with a staging cache
// and a block cache of its default sizes (fresh ones: a DB opened so answers its first
// queries as a server just started), every request through the fixture's Checker.
func (fx *dashFixture) openDB(tb testing.TB) *tsdb.DB { return fx.openDBAt(tb, nil) }

// openDBAt is openDB with the clock now (nil: time.Now).
func (fx *dashFixture) openDBAt(tb testing.TB, now func() time.Time) *tsdb.DB {
	db, err := tsdb.Open(context.Background(), fx.svc, fx.name, &tsdb.Options{Layout: chunkedLayout, Now: now,
		StagingCache: tsdb.NewStagingCache(tsdb.DefaultStagingCacheBytes * 4),
		BlockCache:   tsdb.NewBlockCache(tsdb.DefaultBlockCacheBytes * 4),
		RawCache:     tsdb.NewRawCache(tsdb.DefaultRawCacheBytes * 4),
		IndexCache:   tsdb.NewIndexCache(tsdb.DefaultIndexCacheBytes * 4)})
	require.NoError(tb, err)
	return db
}

// newServer serves the fixture's database from a fresh DB (fresh caches, a fresh results
// cache of tablets serve's size), with no background loops (their requests would be counted
// with the queries'), choosing between raw samples and tiers as store says (nil: by its
// estimate of their costs, the default). The caller closes it.
//
// Its results cache's clock is dashRefreshAfter past the dashboard's now, however long the
// test has run: a refresh then computes the steps of the freshness horizon, as a panel
// refreshed while samples arrive does, and not none (the wall clock minutes later).
func (fx *dashFixture) newServer(tb testing.TB, store *promstore.Options) *server.Server {
	s, _ := fx.newServerOf(tb, store, false)
	return s
}

// newKeepingServer is a newServer that keeps its answers in the database (and finds those
// other servers kept), and its results cache.
func (fx *dashFixture) newKeepingServer(tb testing.TB) (*server.Server, *server.ResultsCache) {
	return fx.newServerOf(tb, nil, true)
}

// newWarmedServer is a newServer whose database first warmed its caches up as tablets
// serve's does when it starts (tsdb.DB.Warm from server.DefaultWarmCache before the
// dashboard's now): a server started a while before the dashboard is opened. Its
// database's clock is the dashboard's now (its panels are asked dashRefreshAfter later):
// the warm-up brings in the staged entities of the half hour before it, which the fixture
// staged, and not of the half hour before the wall clock, minutes later than the
// dashboard's samples as the benchmark goes on.
func (fx *dashFixture) newWarmedServer(tb testing.TB) *server.Server {
	db := fx.openDBAt(tb, func() time.Time { return fx.now })
	_, err := db.Warm(context.Background(), fx.now.Add(-server.DefaultWarmCache))
	require.NoError(tb, err)
	s, _ := fx.serverOf(tb, db, nil, false)
	return s
}

func (fx *dashFixture) newServerOf(tb testing.TB, store *promstore.Options, keep bool) (*server.Server, *server.ResultsCache) {
	return fx.serverOf(tb, fx.openDB(tb), store, keep)
}

func (fx *dashFixture) serverOf(tb testing.TB, db *tsdb.DB, store *promstore.Options, keep bool) (*server.Server, *server.ResultsCache) {
	cache := server.NewResultsCache(server.DefaultResultsCacheBytes)
	s, err := server.New(db, &server.Options{FoldEvery: -1, RollupEvery: -1, CompactEvery: -1, RetainEvery: -1, Store: store,
		Query: &api.Options{ResultsCache: cache, KeepAnswers: keep,
			Now: func() time.Time { return fx.now.Add(dashRefreshAfter) }}})
	require.NoError(tb, err)
	return s, cache
}

// appendBefore appends to app the samples of data[i] from next[i] on that are before to
// (milliseconds), and moves next[i] past them.
func appendBefore(app *tsdb.Appender, data []dashSeries, keys []string, next []int, i int, to int64) {
	s := data[i]
	k := next[i]
	for next[i] < len(s.ts) && s.ts[next[i]] < to {
		next[i]++
	}
	if k == next[i] {
		return
	}
	if s.hs != nil {
		hs := make([]tsdb.HistogramPoint, 0, next[i]-k)
		for ; k < next[i]; k++ {
			hs = append(hs, tsdb.HistogramPoint{Time: time.UnixMilli(s.ts[k]), H: tabletsHistogram(s.hs[k])})
		}
		app.AppendHistograms(keys[i], hs...)
		return
	}
	pts := make([]tablets.Point, 0, next[i]-k)
	for ; k < next[i]; k++ {
		pts = append(pts, tablets.Point{Time: time.UnixMilli(s.ts[k]), Value: s.fs[k]})
	}
	app.AppendPoints(keys[i], pts...)
}

// tabletsHistogram is h as tablets stores it (field for field; slices copied, so that
// neither store's use of its own changes the other's).
func tabletsHistogram(h *histogram.Histogram) *tablets.Histogram {
	spans := func(ss []histogram.Span) []tablets.HistogramSpan {
		var out []tablets.HistogramSpan
		for _, s := range ss {
			out = append(out, tablets.HistogramSpan{Offset: s.Offset, Length: s.Length})
		}
		return out
	}
	return &tablets.Histogram{CounterResetHint: tablets.CounterResetHint(h.CounterResetHint), Schema: h.Schema,
		ZeroThreshold: h.ZeroThreshold, ZeroCount: h.ZeroCount, Count: h.Count, Sum: h.Sum,
		PositiveSpans: spans(h.PositiveSpans), NegativeSpans: spans(h.NegativeSpans),
		PositiveBuckets: slices.Clone(h.PositiveBuckets), NegativeBuckets: slices.Clone(h.NegativeBuckets),
		CustomValues: slices.Clone(h.CustomValues)}
}

// openPromTSDB is a Prometheus tsdb in a temporary directory holding data. Its block range
// is 20 days, so that the head takes the 8 days of the node series in any order of series
// (it accepts samples within half a block range of its newest) and never compacts them
// into a block during the run; the WAL is off (nothing here is recovered).
func openPromTSDB(tb testing.TB, data []dashSeries) *promtsdb.DB {
	opts := promtsdb.DefaultOptions()
	opts.MinBlockDuration = (20 * 24 * time.Hour).Milliseconds()
	opts.MaxBlockDuration = opts.MinBlockDuration
	opts.EnableNativeHistograms = true
	opts.WALSegmentSize = -1
	db, err := promtsdb.Open(tb.TempDir(), slog.New(slog.DiscardHandler), nil, opts, nil)
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = db.Close() })
	ctx := context.Background()
	for i, s := range data {
		app := db.Appender(ctx)
		ls := labels.FromStrings(s.pairs...)
		var ref storage.SeriesRef
		for k, t := range s.ts {
			if s.hs != nil {
				ref, err = app.AppendHistogram(ref, ls, t, s.hs[k], nil)
			} else {
				ref, err = app.Append(ref, ls, t, s.fs[k])
			}
			require.NoError(tb, err, "series %d", i)
		}
		require.NoError(tb, app.Commit())
	}
	return db
}

// dashPanelKind is what a panel asks the API.
type dashPanelKind int

const (
	dashRange       dashPanelKind = iota // /api/v1/query_range
	dashInstant                          // /api/v1/query at now
	dashLabelValues                      // /api/v1/label/<label>/values?match[]=
	dashSeriesList                       // /api/v1/series?match[]=
)

// dashPanel is one panel (or variable) of the dashboard.
type dashPanel struct {
	name  string
	kind  dashPanelKind
	expr  string        // PromQL, or the match[] selector
	label string        // of label values
	span  time.Duration // of a range query, or the time range of a variable
	step  time.Duration // of a range query
}

// dashPanels is the dashboard: issue 36's panels and Grafana's variables.
var dashPanels = []dashPanel{
	{name: "rate-by-code-1h", kind: dashRange, expr: `sum by (code) (rate(http_requests_total[5m]))`, span: time.Hour, step: 15 * time.Second},
	{name: "rate-by-code-6h", kind: dashRange, expr: `sum by (code) (rate(http_requests_total[5m]))`, span: 6 * time.Hour, step: time.Minute},
	{name: "latency-p99-6h", kind: dashRange, expr: `histogram_quantile(0.99, sum by (le, job) (rate(http_request_duration_seconds_bucket[5m])))`, span: 6 * time.Hour, step: time.Minute},
	{name: "memory-top5-6h", kind: dashRange, expr: `topk(5, process_resident_memory_bytes)`, span: 6 * time.Hour, step: time.Minute},
	{name: "load-avg-7d", kind: dashRange, expr: `avg_over_time(node_load1[10m])`, span: 7 * 24 * time.Hour, step: 10 * time.Minute},
	{name: "load-max-7d", kind: dashRange, expr: `max_over_time(node_load1[10m])`, span: 7 * 24 * time.Hour, step: 10 * time.Minute},
	{name: "net-rate-7d", kind: dashRange, expr: `sum(rate(node_network_receive_bytes_total[10m]))`, span: 7 * 24 * time.Hour, step: 10 * time.Minute},
	{name: "requests-1h-now", kind: dashInstant, expr: `sum(increase(http_requests_total[1h]))`},
	{name: "up-by-job-now", kind: dashInstant, expr: `count by (job) (up == 1)`},
	{name: "native-p90-1h", kind: dashRange, expr: `histogram_quantile(0.9, sum(rate(native_latency_seconds[5m])))`, span: time.Hour, step: 15 * time.Second},
	{name: "native-heatmap-1h", kind: dashRange, expr: `sum by (job) (rate(native_latency_seconds[5m]))`, span: time.Hour, step: time.Minute},
	{name: "var-job", kind: dashLabelValues, label: "job", expr: `up`, span: 6 * time.Hour},
	{name: "var-instance", kind: dashLabelValues, label: "instance", expr: `up{job="api"}`, span: 6 * time.Hour},
	{name: "var-series", kind: dashSeriesList, expr: `up{job="api"}`, span: 6 * time.Hour},
}

// times are the panel's times in milliseconds: a range query's start and end aligned to its
// step, as Grafana aligns them; an instant query's now (start = end); a variable's range.
func (p dashPanel) times(now time.Time) (start, end int64) {
	end = now.UnixMilli()
	if p.kind == dashRange {
		end -= end % p.step.Milliseconds()
	}
	if p.kind == dashInstant {
		return end, end
	}
	return end - p.span.Milliseconds(), end
}

// dashSeconds formats milliseconds as the API's seconds.
func dashSeconds(ms int64) string { return strconv.FormatFloat(float64(ms)/1000, 'f', -1, 64) }

// request is the panel's request to a tablets server, as Grafana sends it.
func (p dashPanel) request(now time.Time) *http.Request {
	start, end := p.times(now)
	var target string
	switch p.kind {
	case dashRange:
		target = "/api/v1/query_range?" + url.Values{"query": {p.expr}, "start": {dashSeconds(start)}, "end": {dashSeconds(end)},
			"step": {dashSeconds(p.step.Milliseconds())}}.Encode()
	case dashInstant:
		target = "/api/v1/query?" + url.Values{"query": {p.expr}, "time": {dashSeconds(end)}}.Encode()
	case dashLabelValues:
		target = "/api/v1/label/" + p.label + "/values?" + url.Values{"match[]": {p.expr}, "start": {dashSeconds(start)}, "end": {dashSeconds(end)}}.Encode()
	case dashSeriesList:
		target = "/api/v1/series?" + url.Values{"match[]": {p.expr}, "start": {dashSeconds(start)}, "end": {dashSeconds(end)}}.Encode()
	}
	req, err := http.NewRequest(http.MethodGet, target, nil)
	if err != nil {
		panic(err) // the targets are ours
	}
	return req
}

// askTablets sends the panel's request to h and returns the body of its answer.
func (p dashPanel) askTablets(h http.Handler, now time.Time) ([]byte, error) {
	rec := newRecorder()
	h.ServeHTTP(rec, p.request(now))
	if rec.code != http.StatusOK {
		return nil, fmt.Errorf("%s: %d %s", p.name, rec.code, rec.body)
	}
	return rec.body, nil
}

// askPrometheus answers the panel from the Prometheus tsdb: PromQL by the engine, the
// variables by a Querier as Prometheus' API does.
func (fx *dashFixture) askPrometheus(p dashPanel) (dashAnswer, error) {
	v, err := fx.evalPrometheus(p)
	if err != nil {
		return dashAnswer{}, err
	}
	switch v := v.(type) {
	case parser.Value:
		return answerOfPromQL(v)
	case []string:
		a := dashAnswer{Values: slices.Clone(v)}
		slices.Sort(a.Values)
		return a, nil
	case []labels.Labels:
		var a dashAnswer
		for _, ls := range v {
			a.Series = append(a.Series, dashSeriesAnswer{Labels: ls.String()})
		}
		a.sort()
		return a, nil
	}
	return dashAnswer{}, fmt.Errorf("unexpected answer %T", v)
}

// servePrometheus answers the panel as Prometheus' HTTP API does: the engine's answer (a
// Querier's for a variable), then the JSON web/api/v1 writes of it (package promjson), as
// tablets' answers are timed with their JSON. It returns the time the engine (or Querier)
// took too, of the whole.
func (fx *dashFixture) servePrometheus(p dashPanel) ([]byte, time.Duration, error) {
	return fx.servePrometheusAt(p, fx.now)
}

// servePrometheusAt is servePrometheus with the dashboard's now at now.
func (fx *dashFixture) servePrometheusAt(p dashPanel, now time.Time) ([]byte, time.Duration, error) {
	start := time.Now()
	v, err := fx.evalPrometheusAt(p, now)
	engine := time.Since(start)
	if err != nil {
		return nil, engine, err
	}
	var body []byte
	if pv, ok := v.(parser.Value); ok {
		body, err = promjson.Answer(pv)
	} else {
		body, err = promjson.Marshal(promjson.Response{Status: "success", Data: v})
	}
	return body, engine, err
}

// evalPrometheus is the panel's answer from the Prometheus tsdb: the engine's result
// (parser.Value), or a variable's label values ([]string) or series ([]labels.Labels).
func (fx *dashFixture) evalPrometheus(p dashPanel) (any, error) {
	return fx.evalPrometheusAt(p, fx.now)
}

// evalPrometheusAt is evalPrometheus with the dashboard's now at now.
func (fx *dashFixture) evalPrometheusAt(p dashPanel, now time.Time) (any, error) {
	ctx := context.Background()
	start, end := p.times(now)
	var (
		qry promql.Query
		err error
	)
	switch p.kind {
	case dashRange:
		qry, err = fx.engine.NewRangeQuery(ctx, fx.prom, nil, p.expr, time.UnixMilli(start), time.UnixMilli(end), p.step)
	case dashInstant:
		qry, err = fx.engine.NewInstantQuery(ctx, fx.prom, nil, p.expr, time.UnixMilli(end))
	default:
		return fx.promMetadata(ctx, p, start, end)
	}
	if err != nil {
		return nil, err
	}
	defer qry.Close()
	res := qry.Exec(ctx)
	if res.Err != nil {
		return nil, res.Err
	}
	return res.Value, nil
}

// promMetadata answers a variable from the Prometheus tsdb: label values, or label sets.
func (fx *dashFixture) promMetadata(ctx context.Context, p dashPanel, start, end int64) (any, error) {
	ms, err := parser.ParseMetricSelector(p.expr)
	if err != nil {
		return nil, err
	}
	q, err := fx.prom.Querier(start, end)
	if err != nil {
		return nil, err
	}
	defer q.Close()
	if p.kind == dashLabelValues {
		vals, _, err := q.LabelValues(ctx, p.label, &storage.LabelHints{}, ms...)
		return slices.Clone(vals), err
	}
	var sets []labels.Labels
	set := q.Select(ctx, false, &storage.SelectHints{Start: start, End: end, Func: "series"}, ms...)
	for set.Next() {
		sets = append(sets, set.At().Labels())
	}
	return sets, set.Err()
}

// dashAnswer is a panel's answer in one form for both sides: series sorted by their label
// sets (Grafana keys series by labels; the order of an instant vector is the storage's),
// or the values of a label.
type dashAnswer struct {
	Series []dashSeriesAnswer
	Values []string
}

type dashSeriesAnswer struct {
	Labels string // labels.Labels.String()
	Points []dashPoint
}

// dashPoint is a float (H nil) or a histogram at T (milliseconds).
type dashPoint struct {
	T int64
	F float64
	H *dashHist
}

// dashHist is a histogram as the API writes it: its count, sum and non-empty buckets.
type dashHist struct {
	Count, Sum float64
	Buckets    []dashBucket
}

type dashBucket struct {
	Boundaries          int // 0: upper inclusive, 1: lower, 2: neither, 3: both
	Lower, Upper, Count float64
}

func (a *dashAnswer) sort() {
	slices.SortFunc(a.Series, func(x, y dashSeriesAnswer) int { return strings.Compare(x.Labels, y.Labels) })
}

// samples is the number of points of the answer (values of a label, label sets).
func (a dashAnswer) samples() int {
	n := len(a.Values)
	for _, s := range a.Series {
		n += max(1, len(s.Points))
	}
	return n
}

// answerOfPromQL is the engine's result as a dashAnswer.
func answerOfPromQL(v parser.Value) (dashAnswer, error) {
	var a dashAnswer
	switch v := v.(type) {
	case promql.Matrix:
		for _, s := range v {
			sa := dashSeriesAnswer{Labels: s.Metric.String()}
			for _, p := range s.Floats {
				sa.Points = append(sa.Points, dashPoint{T: p.T, F: p.F})
			}
			for _, p := range s.Histograms {
				sa.Points = append(sa.Points, dashPoint{T: p.T, H: histOfProm(p.H)})
			}
			slices.SortFunc(sa.Points, func(x, y dashPoint) int { return cmp.Compare(x.T, y.T) })
			a.Series = append(a.Series, sa)
		}
	case promql.Vector:
		for _, s := range v {
			p := dashPoint{T: s.T, F: s.F}
			if s.H != nil {
				p = dashPoint{T: s.T, H: histOfProm(s.H)}
			}
			a.Series = append(a.Series, dashSeriesAnswer{Labels: s.Metric.String(), Points: []dashPoint{p}})
		}
	case promql.Scalar:
		a.Series = []dashSeriesAnswer{{Labels: "{}", Points: []dashPoint{{T: v.T, F: v.V}}}}
	default:
		return a, fmt.Errorf("unexpected result type %T", v)
	}
	a.sort()
	return a, nil
}

// histOfProm is h as the API writes it (Prometheus' jsonutil.MarshalHistogram): every
// bucket of a non-zero count, in the iterator's order.
func histOfProm(h *histogram.FloatHistogram) *dashHist {
	out := &dashHist{Count: h.Count, Sum: h.Sum}
	for it := h.AllBucketIterator(); it.Next(); {
		b := it.At()
		if b.Count == 0 {
			continue
		}
		bd := 2
		switch {
		case b.LowerInclusive && b.UpperInclusive:
			bd = 3
		case b.LowerInclusive:
			bd = 1
		case b.UpperInclusive:
			bd = 0
		}
		out.Buckets = append(out.Buckets, dashBucket{Boundaries: bd, Lower: b.Lower, Upper: b.Upper, Count: b.Count})
	}
	return out
}

// answerOfJSON decodes a tablets answer (the body of a 200) to a dashAnswer.
func answerOfJSON(kind dashPanelKind, body []byte) (dashAnswer, error) {
	var resp struct {
		Status string          `json:"status"`
		Data   json.RawMessage `json:"data"`
	}
	var a dashAnswer
	if err := json.Unmarshal(body, &resp); err != nil {
		return a, err
	}
	if resp.Status != "success" {
		return a, fmt.Errorf("status %q: %s", resp.Status, body)
	}
	switch kind {
	case dashLabelValues:
		err := json.Unmarshal(resp.Data, &a.Values)
		slices.Sort(a.Values)
		return a, err
	case dashSeriesList:
		var sets []map[string]string
		if err := json.Unmarshal(resp.Data, &sets); err != nil {
			return a, err
		}
		for _, m := range sets {
			a.Series = append(a.Series, dashSeriesAnswer{Labels: labels.FromMap(m).String()})
		}
		a.sort()
		return a, nil
	}
	var data struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(resp.Data, &data); err != nil {
		return a, err
	}
	switch data.ResultType {
	case "matrix":
		var result []struct {
			Metric     map[string]string    `json:"metric"`
			Values     [][2]json.RawMessage `json:"values"`
			Histograms [][2]json.RawMessage `json:"histograms"`
		}
		if err := json.Unmarshal(data.Result, &result); err != nil {
			return a, err
		}
		for _, r := range result {
			s := dashSeriesAnswer{Labels: labels.FromMap(r.Metric).String()}
			for _, v := range append(r.Values, r.Histograms...) {
				p, err := pointOfJSON(v)
				if err != nil {
					return a, err
				}
				s.Points = append(s.Points, p)
			}
			slices.SortFunc(s.Points, func(x, y dashPoint) int { return cmp.Compare(x.T, y.T) })
			a.Series = append(a.Series, s)
		}
	case "vector":
		var result []struct {
			Metric    map[string]string  `json:"metric"`
			Value     [2]json.RawMessage `json:"value"`
			Histogram [2]json.RawMessage `json:"histogram"`
		}
		if err := json.Unmarshal(data.Result, &result); err != nil {
			return a, err
		}
		for _, r := range result {
			v := r.Value
			if r.Histogram[0] != nil {
				v = r.Histogram
			}
			p, err := pointOfJSON(v)
			if err != nil {
				return a, err
			}
			a.Series = append(a.Series, dashSeriesAnswer{Labels: labels.FromMap(r.Metric).String(), Points: []dashPoint{p}})
		}
	case "scalar":
		var v [2]json.RawMessage
		if err := json.Unmarshal(data.Result, &v); err != nil {
			return a, err
		}
		p, err := pointOfJSON(v)
		if err != nil {
			return a, err
		}
		a.Series = []dashSeriesAnswer{{Labels: "{}", Points: []dashPoint{p}}}
	default:
		return a, fmt.Errorf("result type %q", data.ResultType)
	}
	a.sort()
	return a, nil
}

// pointOfJSON decodes [seconds, "value"] or [seconds, {histogram}].
func pointOfJSON(v [2]json.RawMessage) (dashPoint, error) {
	var secs float64
	if err := json.Unmarshal(v[0], &secs); err != nil {
		return dashPoint{}, fmt.Errorf("time %s: %w", v[0], err)
	}
	p := dashPoint{T: int64(math.Round(secs * 1000))}
	var s string
	if json.Unmarshal(v[1], &s) == nil {
		f, err := strconv.ParseFloat(s, 64)
		p.F = f
		return p, err
	}
	var h struct {
		Count   string               `json:"count"`
		Sum     string               `json:"sum"`
		Buckets [][4]json.RawMessage `json:"buckets"`
	}
	if err := json.Unmarshal(v[1], &h); err != nil {
		return p, fmt.Errorf("value %s: %w", v[1], err)
	}
	p.H = &dashHist{}
	var err1, err2 error
	p.H.Count, err1 = strconv.ParseFloat(h.Count, 64)
	p.H.Sum, err2 = strconv.ParseFloat(h.Sum, 64)
	if err1 != nil || err2 != nil {
		return p, fmt.Errorf("histogram %s", v[1])
	}
	for _, b := range h.Buckets {
		var bk dashBucket
		var lo, hi, n string
		if json.Unmarshal(b[0], &bk.Boundaries) != nil || json.Unmarshal(b[1], &lo) != nil || json.Unmarshal(b[2], &hi) != nil || json.Unmarshal(b[3], &n) != nil {
			return p, fmt.Errorf("bucket of %s", v[1])
		}
		for _, f := range []struct {
			s string
			p *float64
		}{{lo, &bk.Lower}, {hi, &bk.Upper}, {n, &bk.Count}} {
			x, err := strconv.ParseFloat(f.s, 64)
			if err != nil {
				return p, err
			}
			*f.p = x
		}
		p.H.Buckets = append(p.H.Buckets, bk)
	}
	return p, nil
}

// dashDiff is how a tablets answer differs from Prometheus'.
type dashDiff struct {
	Shape    string  // the first difference of series, label values or timestamps ("": none)
	MaxRel   float64 // the largest relative difference of a value (0: all equal)
	Where    string  // where MaxRel is
	Inexact  int     // values not bit for bit equal (NaN equals NaN)
	Compared int     // values compared
}

// relDiff is |a-b| relative to the larger magnitude; 0 when equal (NaN to NaN too), +Inf
// when only one is NaN or infinite.
func relDiff(a, b float64) float64 {
	switch {
	case a == b || math.IsNaN(a) && math.IsNaN(b):
		return 0
	case math.IsNaN(a) || math.IsNaN(b) || math.IsInf(a, 0) || math.IsInf(b, 0):
		return math.Inf(1)
	}
	return math.Abs(a-b) / max(math.Abs(a), math.Abs(b))
}

// compareAnswers says how got (tablets) differs from want (Prometheus): the same label
// values, series and timestamps are a shape; values are compared with relDiff, histograms
// bucket by bucket.
func compareAnswers(want, got dashAnswer) dashDiff {
	var d dashDiff
	if !slices.Equal(want.Values, got.Values) {
		d.Shape = fmt.Sprintf("label values %q, want %q", got.Values, want.Values)
		return d
	}
	if len(want.Series) != len(got.Series) {
		d.Shape = fmt.Sprintf("%d series, want %d (%s)", len(got.Series), len(want.Series), seriesNames(got, want))
		return d
	}
	value := func(w, g float64, where func() string) {
		d.Compared++
		if math.Float64bits(w) != math.Float64bits(g) && !(math.IsNaN(w) && math.IsNaN(g)) {
			d.Inexact++
		}
		if r := relDiff(w, g); r > d.MaxRel {
			d.MaxRel, d.Where = r, where()
		}
	}
	for i, ws := range want.Series {
		gs := got.Series[i]
		if ws.Labels != gs.Labels {
			d.Shape = fmt.Sprintf("series %s, want %s", gs.Labels, ws.Labels)
			return d
		}
		if len(ws.Points) != len(gs.Points) {
			d.Shape = fmt.Sprintf("%s: %d points, want %d", ws.Labels, len(gs.Points), len(ws.Points))
			return d
		}
		for k, wp := range ws.Points {
			gp := gs.Points[k]
			where := func() string {
				return fmt.Sprintf("%s at %s: %v, want %v", ws.Labels, time.UnixMilli(wp.T).UTC().Format(time.RFC3339Nano), gp.value(), wp.value())
			}
			switch {
			case wp.T != gp.T:
				d.Shape = fmt.Sprintf("%s: point %d at %d, want %d", ws.Labels, k, gp.T, wp.T)
				return d
			case (wp.H == nil) != (gp.H == nil):
				d.Shape = fmt.Sprintf("%s at %d: a histogram on one side only", ws.Labels, wp.T)
				return d
			case wp.H == nil:
				value(wp.F, gp.F, where)
				continue
			}
			if len(wp.H.Buckets) != len(gp.H.Buckets) {
				d.Shape = fmt.Sprintf("%s at %d: %d buckets, want %d", ws.Labels, wp.T, len(gp.H.Buckets), len(wp.H.Buckets))
				return d
			}
			value(wp.H.Count, gp.H.Count, where)
			value(wp.H.Sum, gp.H.Sum, where)
			for b, wb := range wp.H.Buckets {
				gb := gp.H.Buckets[b]
				if wb.Boundaries != gb.Boundaries || wb.Lower != gb.Lower || wb.Upper != gb.Upper {
					d.Shape = fmt.Sprintf("%s at %d: bucket %d is %v, want %v", ws.Labels, wp.T, b, gb, wb)
					return d
				}
				value(wb.Count, gb.Count, where)
			}
		}
	}
	return d
}

// value is the point's value, for messages.
func (p dashPoint) value() any {
	if p.H != nil {
		return *p.H
	}
	return p.F
}

// seriesNames lists the label sets of got and want, shortened, for a message.
func seriesNames(got, want dashAnswer) string {
	names := func(a dashAnswer) string {
		var out []string
		for _, s := range a.Series {
			out = append(out, s.Labels)
		}
		if len(out) > 6 {
			out = append(out[:6], "...")
		}
		return strings.Join(out, " ")
	}
	return fmt.Sprintf("got %s; want %s", names(got), names(want))
}
