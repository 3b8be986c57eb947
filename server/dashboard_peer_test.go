package server_test

// Issue 36, "Dashboards at Prometheus' speed": a dashboard's panels answered by tablets (over
// HTTP, through the server's handler, from a database maintained as `tablets maintain` does)
// and by Prometheus' engine over its own tsdb holding the same samples, in the same run.
//
//	go test ./server -run TestDashboardPeer -count=1 -v
//	TABLETS_DASHBOARD_TARGETS=100 go test ./server -run TestDashboardPeer -count=1 -v -timeout 30m
//	go test ./server -run '^$' -bench DashboardPeer
//	TABLETS_DASHBOARD_TARGETS=100 TABLETS_DASHBOARD_DURATION=60s go test ./server -run '^$' -bench DashboardPeer -timeout 1h

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets/internal/testkit/azurite"
	"github.com/seed71701133/tablets/server"
	"github.com/seed71701133/tablets/server/promstore"
)

// dashRawTolerance bounds the relative difference of a value served from raw samples from
// Prometheus': both run the same engine on the same samples, so only the order in which an
// aggregation adds its series (the storages list them in orders of their own) may differ,
// in the last bits.
const dashRawTolerance = 1e-9

// dashTabletsRun is one answer of a tablets server to a panel and what it cost.
type dashTabletsRun struct {
	body       []byte
	took       time.Duration
	cost       azurite.Stats // of the account, counted at the transport
	tier, raw  uint64        // Selects that read a tier, raw samples
	labelsOnly uint64        // Selects of labels only (the series endpoint)
	exact      uint64        // calls answered exactly from a tier's windows (tsdb Evaluate)
}

// askTablets has s answer the panel, counting its requests to the account alone.
func (fx *dashFixture) askTablets(s *server.Server, p dashPanel) (dashTabletsRun, error) {
	before := s.Queryable().Stats()
	fx.checker.Reset()
	start := time.Now()
	body, err := p.askTablets(s, fx.now)
	r := dashTabletsRun{body: body, took: time.Since(start), cost: fx.checker.Stats()}
	after := s.Queryable().Stats()
	r.tier, r.raw, r.labelsOnly = after.TierSelects-before.TierSelects, after.RawSelects-before.RawSelects, after.LabelSelects-before.LabelSelects
	r.exact = after.ExactEvaluations - before.ExactEvaluations
	return r, err
}

// path says what a run read: "exact" (tier windows, exactly) or "exact+raw", "tier", "raw",
// "tier+raw", "labels" or "index".
func (r dashTabletsRun) path() string {
	switch {
	case r.exact > 0 && r.raw > 0:
		return "exact+raw"
	case r.exact > 0:
		return "exact"
	case r.tier > 0 && r.raw > 0:
		return "tier+raw"
	case r.tier > 0:
		return "tier"
	case r.raw > 0:
		return "raw"
	case r.labelsOnly > 0:
		return "labels"
	}
	return "index"
}

// The dashboard of issue 36, answered by tablets and by Prometheus over the same samples:
// every panel's answer from tablets is Prometheus' (the same series, timestamps and label
// values; values within dashRawTolerance) where tablets read raw samples or a tier's windows
// exactly; the approximate answers of a tier's Selects (only where a query asks for them)
// are compared and their difference logged. Then every panel again ("refresh", the caches
// warm): the same answers as the first time. Then the 7-day panels from the tiers, exactly
// (PreferExactTiers): Prometheus' answers. The requests, bytes and time of each run, and
// Prometheus' time, are logged (time is never asserted).
func TestDashboardPeer(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	fx := newDashFixture(t, dashTargets(t, 10))
	s := fx.newServer(t, nil)
	defer s.Close()

	type result struct {
		first, refresh     dashTabletsRun
		promFirst, promRef time.Duration
		diff               dashDiff
	}
	results := make([]result, len(dashPanels))
	firstAnswers := make([]dashAnswer, len(dashPanels))
	for i, p := range dashPanels {
		run, err := fx.askTablets(s, p)
		require.NoError(t, err)
		got, err := answerOfJSON(p.kind, run.body)
		require.NoError(t, err, p.name)
		start := time.Now()
		want, err := fx.askPrometheus(p)
		promTook := time.Since(start)
		require.NoError(t, err, p.name)
		require.Positive(t, want.samples(), "%s: Prometheus' answer is not empty", p.name)
		// The benchmark times Prometheus' answers with their JSON, as its API writes them:
		// that JSON holds the same answer.
		body, _, err := fx.servePrometheus(p)
		require.NoError(t, err, p.name)
		served, err := answerOfJSON(p.kind, body)
		require.NoError(t, err, p.name)
		same := compareAnswers(want, served)
		require.Empty(t, same.Shape, "%s: Prometheus' answer as its API writes it", p.name)
		require.Zero(t, same.Inexact, "%s: Prometheus' answer as its API writes it: %s", p.name, same.Where)
		d := compareAnswers(want, got)
		results[i] = result{first: run, promFirst: promTook, diff: d}
		firstAnswers[i] = got
		switch {
		case run.tier == 0:
			require.Empty(t, d.Shape, "%s (read raw): the series, timestamps and label values of Prometheus' answer", p.name)
			require.LessOrEqual(t, d.MaxRel, dashRawTolerance, "%s (read raw): %s", p.name, d.Where)
		case d.Shape != "" || d.MaxRel > dashRawTolerance:
			t.Logf("!!! %s, served from a tier, DIFFERS from Prometheus (not failed: issue 36's tier accuracy): %s max relative difference %.3g at %s; %d of %d values not exact",
				p.name, d.Shape, d.MaxRel, d.Where, d.Inexact, d.Compared)
		}
	}
	fx.settle(t, s)
	for i, p := range dashPanels {
		run, err := fx.askTablets(s, p)
		require.NoError(t, err)
		got, err := answerOfJSON(p.kind, run.body)
		require.NoError(t, err, p.name)
		start := time.Now()
		_, err = fx.askPrometheus(p)
		results[i].promRef = time.Since(start)
		require.NoError(t, err, p.name)
		results[i].refresh = run
		d := compareAnswers(firstAnswers[i], got)
		if first := results[i].first; first.path() != run.path() && first.tier+run.tier > 0 {
			// The choice between a tier and raw samples follows the server's estimate of
			// the sample rate, which its reads teach it: a refresh may choose otherwise,
			// and a tier's answer may differ from raw's (issue 36's tier accuracy).
			t.Logf("!!! %s: the refresh read %s where the first run read %s; its answer differs by %s max relative difference %.3g (%d of %d values not exact)",
				p.name, run.path(), first.path(), d.Shape, d.MaxRel, d.Inexact, d.Compared)
			continue
		}
		require.Empty(t, d.Shape, "%s: the refresh answers as the first run", p.name)
		require.Zero(t, d.Inexact, "%s: the refresh answers as the first run: %s", p.name, d.Where)
	}

	// The panels whose functions a tier answers exactly, from the tiers wherever they can
	// (PreferExactTiers; the default server reads them where the estimate says they cost
	// fewer bytes than raw samples): Prometheus' answers, within dashRawTolerance.
	tiers := fx.newServer(t, &promstore.Options{PreferExactTiers: true})
	defer tiers.Close()
	var tierLog strings.Builder
	exactPanels := 0
	for i, p := range dashPanels {
		if p.kind != dashRange || p.step < 5*time.Minute {
			continue
		}
		first, err := fx.askTablets(tiers, p)
		require.NoError(t, err)
		refresh, err := fx.askTablets(tiers, p)
		require.NoError(t, err)
		got, err := answerOfJSON(p.kind, first.body)
		require.NoError(t, err, p.name)
		want, err := fx.askPrometheus(p)
		require.NoError(t, err, p.name)
		require.Positive(t, first.exact, "%s: served from a tier's windows", p.name)
		exactPanels++
		d := compareAnswers(want, got)
		require.Empty(t, d.Shape, "%s (from a tier, exactly): the series, timestamps and label values of Prometheus' answer", p.name)
		require.LessOrEqual(t, d.MaxRel, dashRawTolerance, "%s (from a tier, exactly): %s", p.name, d.Where)
		again, err := answerOfJSON(p.kind, refresh.body)
		require.NoError(t, err, p.name)
		same := compareAnswers(got, again)
		require.Empty(t, same.Shape, "%s (from a tier): the refresh answers as the first run", p.name)
		require.Zero(t, same.Inexact, "%s (from a tier): the refresh answers as the first run: %s", p.name, same.Where)
		fmt.Fprintf(&tierLog, "%-18s %-9s %8d %10d %6.1f %8d %10d %6.1f   %.3g (%d of %d)   (the default server read %s: %d requests, %d bytes)\n", p.name, first.path(),
			first.cost.Requests, first.cost.RequestBytes+first.cost.ResponseBytes, ms(first.took),
			refresh.cost.Requests, refresh.cost.RequestBytes+refresh.cost.ResponseBytes, ms(refresh.took), d.MaxRel, d.Inexact, d.Compared,
			results[i].first.path(), results[i].first.cost.Requests, results[i].first.cost.RequestBytes+results[i].first.cost.ResponseBytes)
	}
	require.Equal(t, 3, exactPanels, "the three 7-day panels")
	t.Log("\nthe 7-day panels from the tiers, exactly (PreferExactTiers):\n" + fmt.Sprintf("%-18s %-9s %26s %26s   %s\n", "panel", "read", "first: requests bytes ms", "refresh: requests bytes ms", "vs Prometheus: max rel diff (values not exact)") + tierLog.String())

	var b strings.Builder
	fmt.Fprintf(&b, "dashboard of %d targets (%d series, %d float and %d histogram samples), now %s\n", fx.targets, fx.series, fx.floats, fx.hists,
		fx.now.UTC().Format(time.RFC3339))
	fmt.Fprintf(&b, "%-18s %-8s %26s %26s %17s %10s %s\n", "panel", "read", "first: requests bytes ms", "refresh: requests bytes ms", "prometheus ms", "points", "vs Prometheus: max rel diff (values not exact)")
	for i, p := range dashPanels {
		r := results[i]
		fmt.Fprintf(&b, "%-18s %-8s %8d %10d %6.1f %8d %10d %6.1f %8.1f %8.1f %10d %.3g (%d of %d)\n", p.name, r.first.path(),
			r.first.cost.Requests, r.first.cost.RequestBytes+r.first.cost.ResponseBytes, ms(r.first.took),
			r.refresh.cost.Requests, r.refresh.cost.RequestBytes+r.refresh.cost.ResponseBytes, ms(r.refresh.took),
			ms(r.promFirst), ms(r.promRef), firstAnswers[i].samples(), r.diff.MaxRel, r.diff.Inexact, r.diff.Compared)
	}
	t.Log("\n" + b.String())
}

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// dashDuration is how long the concurrent sub-benchmarks run: TABLETS_DASHBOARD_DURATION
// (a Go duration), else 10 s.
func dashDuration(tb testing.TB) time.Duration {
	v := os.Getenv("TABLETS_DASHBOARD_DURATION")
	if v == "" {
		return 10 * time.Second
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		tb.Fatalf("TABLETS_DASHBOARD_DURATION=%q: want a positive duration", v)
	}
	return d
}

// dashClients is the number of concurrent clients of the concurrent sub-benchmarks: a few
// people looking at the dashboard, each refreshing its panels.
const dashClients = 6

// BenchmarkDashboardPeer: each panel of TestDashboardPeer's dashboard answered by tablets
// from a server just started (tablets-first: fresh caches, a new server an iteration, made
// with the timer stopped), by a server just started that warmed its caches up as tablets
// serve's does before it serves (tablets-first-warmed: tsdb.DB.Warm, with the timer
// stopped), by a server that answered it before (tablets-refresh), by a
// server just started that finds the answer another server kept in the database (a range
// query's: tablets-first-kept, api.Options.KeepAnswers), and by
// Prometheus' engine over its tsdb (prometheus: ms/op is the engine's answer and its JSON
// as Prometheus' HTTP API writes it, as tablets' answers are timed with theirs; engine-ms/op
// the engine's alone): ms/op, and for tablets the requests and
// bytes (sent and received) to the account an answer, counted at the transport;
// refresh-by-prometheus times the refresh and Prometheus' answer in turn (x-prometheus:
// their ratio, both timed in the same minutes), and the request each refresh waits for
// alone (x-prometheus-floor: its ratio to Prometheus' answer). Then
// dashClients clients refreshing random panels at once for TABLETS_DASHBOARD_DURATION
// (10 s), each side alone: p50 and p99 latency, answers/s; and for tablets the answers
// not bit for bit the warm server's first (answers-not-exact). dashboard-load opens the
// whole dashboard as a browser does, every panel at once dashClients at a time, on a
// server just started (tablets-first, each answer checked against the warm server's) and
// on Prometheus: ms/op until the last answer. The data (TABLETS_DASHBOARD_TARGETS
// targets, 20 by default) is made once, before the sub-benchmarks, which share it.
func BenchmarkDashboardPeer(b *testing.B) {
	fx := newDashFixture(b, dashTargets(b, 20))
	warmDB := fx.openDB(b)
	warm, _ := fx.serverOf(b, warmDB, nil, false)
	b.Cleanup(func() { _ = warm.Close() })
	tiers := fx.newServer(b, &promstore.Options{PreferExactTiers: true}) // the panels a tier serves exactly, from the tier (as TestDashboardPeer)
	b.Cleanup(func() { _ = tiers.Close() })
	// The answers of the warm server, which the concurrent clients' must equal.
	bodies := make([][]byte, len(dashPanels))
	for i, p := range dashPanels {
		body, err := p.askTablets(warm, fx.now)
		require.NoError(b, err)
		bodies[i] = body
	}
	fx.settle(b, warm, tiers) // the refreshes come later than the staging listing's margin
	// report reports a sub-benchmark's time, its account requests and bytes, the time the
	// account was busy with them, and this process' CPU (the server's and the client's).
	report := func(b *testing.B, cost azurite.Stats, cpu time.Duration) {
		n := float64(b.N)
		b.ReportMetric(ms(b.Elapsed())/n, "ms/op")
		b.ReportMetric(float64(cost.Requests)/n, "account-requests/op")
		b.ReportMetric(float64(cost.RequestBytes+cost.ResponseBytes)/n, "account-bytes/op")
		// The time some request waited on Azurite: of ms/op, the account's share.
		b.ReportMetric(ms(cost.Busy)/n, "account-busy-ms/op")
		b.ReportMetric(ms(cpu)/n, "cpu-ms/op")
	}
	// onNewServers runs ask on a server just started (its caches empty), each iteration
	// another, and reports it; onNew on those newServer makes.
	var onNew func(b *testing.B, newServer func() *server.Server, ask func(*server.Server) error)
	onNewServers := func(b *testing.B, o *promstore.Options, ask func(*server.Server) error) {
		onNew(b, func() *server.Server { return fx.newServer(b, o) }, ask)
	}
	onNew = func(b *testing.B, newServer func() *server.Server, ask func(*server.Server) error) {
		var cost azurite.Stats
		var cpu time.Duration
		b.StopTimer()
		for range b.N {
			s := newServer()
			fx.checker.Reset()
			cpu0 := cpuTime()
			b.StartTimer()
			err := ask(s)
			b.StopTimer()
			cpu += cpuTime() - cpu0
			cost = addStats(cost, fx.checker.Stats())
			_ = s.Close()
			require.NoError(b, err)
		}
		report(b, cost, cpu)
	}
	for i, p := range dashPanels {
		b.Run(p.name, func(b *testing.B) {
			// first asks p of a server just started (its caches empty), each time another.
			first := func(b *testing.B, o *promstore.Options) {
				onNewServers(b, o, func(s *server.Server) error {
					_, err := p.askTablets(s, fx.now)
					return err
				})
			}
			// refresh asks p of srv again and again.
			refresh := func(b *testing.B, srv *server.Server) {
				fx.checker.Reset()
				cpu0 := cpuTime()
				b.ResetTimer()
				for range b.N {
					_, err := p.askTablets(srv, fx.now)
					require.NoError(b, err)
				}
				b.StopTimer()
				report(b, fx.checker.Stats(), cpuTime()-cpu0)
			}
			b.Run("tablets-first", func(b *testing.B) { first(b, nil) })
			b.Run("tablets-first-warmed", func(b *testing.B) {
				onNew(b, func() *server.Server { return fx.newWarmedServer(b) }, func(s *server.Server) error {
					_, err := p.askTablets(s, fx.now)
					return err
				})
			})
			b.Run("tablets-refresh", func(b *testing.B) { refresh(b, warm) })
			if p.kind == dashRange && !bytes.Contains(bodies[i], []byte(`"histograms"`)) { // answers with histograms are not kept
				// Another server answered p and kept its answer in the database: a server
				// just started reads it and computes the steps after it (the refresh's).
				b.Run("tablets-first-kept", func(b *testing.B) {
					keeper, cache := fx.newKeepingServer(b)
					defer keeper.Close()
					_, err := p.askTablets(keeper, fx.now)
					require.NoError(b, err)
					// Kept by it, or by the keeper of a run before (b.N grows): found.
					for deadline := time.Now().Add(time.Minute); cache.SharedStats().Kept+cache.SharedStats().Hits == 0; time.Sleep(10 * time.Millisecond) {
						require.True(b, time.Now().Before(deadline), "%s: no answer kept (%+v)", p.name, cache.SharedStats())
					}
					onNew(b, func() *server.Server { s, _ := fx.newKeepingServer(b); return s }, func(s *server.Server) error {
						_, err := p.askTablets(s, fx.now)
						return err
					})
				})
			}
			if p.kind == dashRange && p.step >= 5*time.Minute { // a tier may serve it
				b.Run("tablets-tier-first", func(b *testing.B) { first(b, &promstore.Options{PreferExactTiers: true}) })
				b.Run("tablets-tier-refresh", func(b *testing.B) {
					_, err := p.askTablets(tiers, fx.now) // once before: the refresh of an answer given
					require.NoError(b, err)
					refresh(b, tiers)
				})
			}
			b.Run("prometheus", func(b *testing.B) {
				var engine time.Duration
				for range b.N {
					_, took, err := fx.servePrometheus(p)
					require.NoError(b, err)
					engine += took
				}
				b.StopTimer()
				b.ReportMetric(ms(b.Elapsed())/float64(b.N), "ms/op")
				b.ReportMetric(ms(engine)/float64(b.N), "engine-ms/op")
			})
			// The refresh and Prometheus' answer in turn, refreshTurn iterations each:
			// their ratio as of the same minutes. This machine's speed (Azurite's above
			// all) drifts by a quarter between runs a minute apart, more than
			// tablets-refresh and prometheus, timed one after the other, can tell apart.
			// Turns of many, not of one: each side runs as hot as in its own
			// sub-benchmark (in turns of one, Prometheus took a fifth longer, its caches
			// cooled by tablets' request).
			//
			// And in the same turns, the request every refresh waits for alone: the read's
			// check of what changed in the database (the staging listing, with the change
			// logs' states it vouches for: tsdb.DB.PrepareRead, as a refresh's Selects take
			// it, over an instant panel's range). Prometheus answers from its memory; a
			// server that never answers from what another server changed asks the account
			// at every refresh, and on this machine that request alone is most of the
			// refresh: freshness-ms/op and x-prometheus-floor (its ratio to Prometheus'
			// answer), the least x-prometheus can be while the check is one request. Of the
			// PromQL panels only: a variable's answer is the index's, checked otherwise.
			promQL := p.kind == dashRange || p.kind == dashInstant
			b.Run("refresh-by-prometheus", func(b *testing.B) {
				const refreshTurn = 100
				ctx := context.Background()
				from, to := fx.now.Add(-5*time.Minute), fx.now.Add(time.Millisecond)
				var freshCost azurite.Stats // the checks' requests: not the refreshes'
				fx.checker.Reset()
				var tablets, prom, fresh time.Duration
				for done := 0; done < b.N; done += refreshTurn {
					turn := min(refreshTurn, b.N-done)
					start := time.Now()
					for range turn {
						_, err := p.askTablets(warm, fx.now)
						require.NoError(b, err)
					}
					tablets += time.Since(start)
					start = time.Now()
					for range turn {
						_, _, err := fx.servePrometheus(p)
						require.NoError(b, err)
					}
					prom += time.Since(start)
					if !promQL {
						continue
					}
					before := fx.checker.Stats()
					start = time.Now()
					for range turn {
						require.NoError(b, warmDB.PrepareRead(warmDB.BeginRead(ctx), from, to))
					}
					fresh += time.Since(start)
					freshCost = addStats(freshCost, subStats(fx.checker.Stats(), before))
				}
				b.StopTimer()
				cost, n := subStats(fx.checker.Stats(), freshCost), float64(b.N)
				b.ReportMetric(ms(tablets)/n, "ms/op")
				b.ReportMetric(ms(prom)/n, "prometheus-ms/op")
				b.ReportMetric(float64(tablets)/float64(prom), "x-prometheus")
				if promQL {
					b.ReportMetric(ms(fresh)/n, "freshness-ms/op")
					b.ReportMetric(float64(fresh)/float64(prom), "x-prometheus-floor")
					b.ReportMetric(float64(freshCost.Requests)/n, "freshness-requests/op")
				}
				b.ReportMetric(ms(cost.Busy)/n, "account-busy-ms/op")
				b.ReportMetric(float64(cost.Requests)/n, "account-requests/op")
			})
		})
	}
	// load opens the whole dashboard as a browser does: every panel at once (ask(panel
	// index)), dashClients at a time; ms/op is until the last answer.
	load := func(ask func(int) error) error {
		var wg sync.WaitGroup
		errs := make([]error, len(dashPanels))
		next := make(chan int)
		for range dashClients {
			wg.Go(func() {
				for i := range next {
					errs[i] = ask(i)
				}
			})
		}
		for i := range dashPanels {
			next <- i
		}
		close(next)
		wg.Wait()
		return errors.Join(errs...)
	}
	b.Run("dashboard-load/tablets-first", func(b *testing.B) {
		onNewServers(b, nil, func(s *server.Server) error {
			return load(func(i int) error {
				body, err := dashPanels[i].askTablets(s, fx.now)
				if err == nil && !bytes.Equal(body, bodies[i]) {
					err = sameAnswer(dashPanels[i], bodies[i], body)
				}
				return err
			})
		})
	})
	b.Run("dashboard-load/prometheus", func(b *testing.B) {
		for range b.N {
			require.NoError(b, load(func(i int) error {
				_, _, err := fx.servePrometheus(dashPanels[i])
				return err
			}))
		}
		b.StopTimer()
		b.ReportMetric(ms(b.Elapsed())/float64(b.N), "ms/op")
	})
	d := dashDuration(b)
	b.Run("concurrent/tablets", func(b *testing.B) {
		fx.checker.Reset()
		var (
			mu       sync.Mutex
			inexact  int      // answers not bit for bit the warm server's first
			examples []string // of the differences, the first few
		)
		lat, took, err := dashConcurrent(d, func(i int) error {
			body, err := dashPanels[i].askTablets(warm, fx.now)
			if err != nil || bytes.Equal(body, bodies[i]) {
				return err
			}
			want, err := answerOfJSON(dashPanels[i].kind, bodies[i])
			if err != nil {
				return err
			}
			got, err := answerOfJSON(dashPanels[i].kind, body)
			if err != nil {
				return err
			}
			// Not failed: the server chooses between a tier and raw samples by an
			// estimate its reads keep changing, and a tier's answer may differ from raw's
			// (in the last bits for a rate: TestDashboardPeer logs it).
			if diff := compareAnswers(want, got); diff.Shape != "" || diff.Inexact > 0 {
				mu.Lock()
				inexact++
				if len(examples) < 3 {
					examples = append(examples, fmt.Sprintf("%s: %s max relative difference %.3g at %s", dashPanels[i].name, diff.Shape, diff.MaxRel, diff.Where))
				}
				mu.Unlock()
			}
			return nil
		})
		require.NoError(b, err)
		st := fx.checker.Stats()
		n := dashReportLatencies(b, lat, took)
		if inexact > 0 {
			b.Logf("%d answers differ from the warm server's first, e.g. %s", inexact, strings.Join(examples, "; "))
		}
		b.ReportMetric(float64(inexact), "answers-not-exact")
		b.ReportMetric(float64(st.Requests)/float64(n), "account-requests/answer")
		b.ReportMetric(float64(st.RequestBytes+st.ResponseBytes)/float64(n), "account-bytes/answer")
	})
	b.Run("concurrent/prometheus", func(b *testing.B) {
		lat, took, err := dashConcurrent(d, func(i int) error {
			_, _, err := fx.servePrometheus(dashPanels[i])
			return err
		})
		require.NoError(b, err)
		dashReportLatencies(b, lat, took)
	})
}

// dashConcurrent has dashClients clients ask random panels (ask(panel index)) one after
// another for d, and returns the latencies of their answers, by panel, and the time they
// took (past d by the answers under way at its end). An error ends its client's run, and
// is returned (the first).
func dashConcurrent(d time.Duration, ask func(int) error) ([][]time.Duration, time.Duration, error) {
	var (
		mu   sync.Mutex
		all  = make([][]time.Duration, len(dashPanels))
		errs []error
		wg   sync.WaitGroup
	)
	start := time.Now()
	deadline := start.Add(d)
	for c := range dashClients {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(c), 36))
			for time.Now().Before(deadline) {
				i := rng.IntN(len(dashPanels))
				start := time.Now()
				err := ask(i)
				took := time.Since(start)
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				} else {
					all[i] = append(all[i], took)
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	if len(errs) > 0 {
		return all, took, errs[0]
	}
	return all, took, nil
}

// dashReportLatencies reports the p50 and p99 of the latencies (ms), and answers a second
// over took; and logs each panel's answers, p50 and slowest. A concurrent sub-benchmark
// runs for its duration whatever b.N: its ns/op says nothing.
func dashReportLatencies(b *testing.B, byPanel [][]time.Duration, took time.Duration) (answers int) {
	b.StopTimer()
	var lat []time.Duration
	var log strings.Builder
	for i, l := range byPanel {
		lat = append(lat, l...)
		if len(l) > 0 {
			slices.Sort(l)
			fmt.Fprintf(&log, " %s %d/%.0f/%.0f", dashPanels[i].name, len(l), ms(l[len(l)/2]), ms(l[len(l)-1]))
		}
	}
	if len(lat) == 0 {
		b.Fatal("no answer")
	}
	// On one line: the testing package keeps 10 lines of a benchmark's log.
	b.Logf("%d clients for %s; panel answers/p50 ms/slowest ms:%s", dashClients, took.Round(time.Millisecond), log.String())
	slices.Sort(lat)
	q := func(f float64) float64 { return ms(lat[min(len(lat)-1, int(f*float64(len(lat))))]) }
	b.ReportMetric(q(0.50), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
	b.ReportMetric(float64(len(lat))/took.Seconds(), "answers/s")
	return len(lat)
}

// addStats is the sum of two Checker counts.
func addStats(a, b azurite.Stats) azurite.Stats {
	a.Requests += b.Requests
	a.Queries += b.Queries
	a.RequestBytes += b.RequestBytes
	a.ResponseBytes += b.ResponseBytes
	a.Busy += b.Busy
	return a
}

// subStats is a's counts less b's (of those addStats adds).
func subStats(a, b azurite.Stats) azurite.Stats {
	a.Requests -= b.Requests
	a.Queries -= b.Queries
	a.RequestBytes -= b.RequestBytes
	a.ResponseBytes -= b.ResponseBytes
	a.Busy -= b.Busy
	return a
}

// sameAnswer is nil when got answers p as want does: the same series and points, values
// within 1e-9 relative (a fresh server may choose another path than the one that answered
// want, and a tier's rate may differ from raw's in the last bits).
func sameAnswer(p dashPanel, want, got []byte) error {
	w, err := answerOfJSON(p.kind, want)
	if err != nil {
		return err
	}
	g, err := answerOfJSON(p.kind, got)
	if err != nil {
		return err
	}
	if d := compareAnswers(w, g); d.Shape != "" || d.MaxRel > 1e-9 {
		return fmt.Errorf("%s: %s max relative difference %.3g at %s", p.name, d.Shape, d.MaxRel, d.Where)
	}
	return nil
}
