package server_test

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql/parser"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/testkit/azurite"
	"github.com/seed71701133/tablets/server"
	"github.com/seed71701133/tablets/server/api"
	"github.com/seed71701133/tablets/tsdb"
)

// dashIngestPanels are the panels BenchmarkDashboardIngesting and TestDashboardIngesting
// refresh: two instant and two range panels, of float samples only (the writes add no
// histogram sample).
var dashIngestPanels = []string{"up-by-job-now", "requests-1h-now", "rate-by-code-1h", "latency-p99-6h"}

// BenchmarkDashboardIngesting: panels of TestDashboardPeer's dashboard refreshed while
// samples arrive, as a dashboard is watched. BenchmarkDashboardPeer's refreshes find the
// database as they left it; here each iteration first writes a scrape of every float
// series of the dashboard, dashScrape after the one before (through tsdb's Appender, to the
// staging table, and to Prometheus' head: not timed), then asks the panel at its newest
// sample's time plus dashRefreshAfter, as Grafana's now moves on (the server's clock with
// it), of tablets and of Prometheus' engine over its tsdb in turn. A refresh then finds the
// entities staged since the last, and computes again what they changed: ms/op, the
// account's requests and bytes an answer (the writes' left out), its ratio to Prometheus'
// answer (x-prometheus), and the freshness check alone after it (freshness-ms/op:
// tsdb.DB.PrepareRead, as in BenchmarkDashboardPeer). The last answers of both must agree,
// as TestDashboardPeer's do: the results cache and the speculative instant queries stay
// exact while samples arrive.
//
// Its time is compressed: a scrape's commit every few tens of milliseconds of wall time,
// where a target's comes every 15 s. The staging listing lists again every entity written
// within its margin of wall time before the last listing (10 s: the account's Timestamps),
// so each refresh here lists again the entities of hundreds of commits, and Azurite builds
// each whole entity (its columns) before applying the listing's $select: on Azurite the
// figures are the listing's (freshness-ms/op), not what a refresh at a scrape's pace costs.
// No Fold runs either: the staging table grows by a commit an iteration. Run it at
// -benchtime of at most a few hundred x:
//
//	TABLETS_DASHBOARD_TARGETS=100 go test ./server -run '^$' -bench DashboardIngesting -benchtime 100x
func BenchmarkDashboardIngesting(b *testing.B) {
	in := newDashIngest(b, newDashFixture(b, dashTargets(b, 20)))
	fx, db, srv, ctx := in.fx, in.db, in.srv, context.Background()
	for _, p := range dashIngestPanelsOf(b) {
		name := p.name
		b.Run(name, func(b *testing.B) {
			now := in.write(b)
			_, err := p.askTablets(srv, now) // answered once before: a refresh
			require.NoError(b, err)
			fx.checker.Reset()
			var cost azurite.Stats
			var tab, prom, fresh time.Duration
			var body []byte
			b.StopTimer()
			for range b.N {
				now = in.write(b)
				before := fx.checker.Stats()
				start := time.Now()
				b.StartTimer()
				body, err = p.askTablets(srv, now)
				b.StopTimer()
				tab += time.Since(start)
				require.NoError(b, err)
				cost = addStats(cost, subStats(fx.checker.Stats(), before))
				start = time.Now()
				_, _, err = fx.servePrometheusAt(p, now)
				prom += time.Since(start)
				require.NoError(b, err)
				start = time.Now()
				require.NoError(b, db.PrepareRead(db.BeginRead(ctx), now.Add(-5*time.Minute), now))
				fresh += time.Since(start)
			}
			in.check(b, p, now, body)
			n := float64(b.N)
			b.ReportMetric(ms(tab)/n, "ms/op")
			b.ReportMetric(ms(prom)/n, "prometheus-ms/op")
			b.ReportMetric(ms(fresh)/n, "freshness-ms/op")
			b.ReportMetric(float64(tab)/float64(prom), "x-prometheus")
			b.ReportMetric(float64(cost.Requests)/n, "account-requests/op")
			b.ReportMetric(float64(cost.RequestBytes+cost.ResponseBytes)/n, "account-bytes/op")
			b.ReportMetric(ms(cost.Busy)/n, "account-busy-ms/op")
		})
	}
}

// TestDashboardIngesting: BenchmarkDashboardIngesting's refreshes, a few of each panel, each
// answer as Prometheus' over the same samples: a refresh that answered without the samples
// written since the one before (a speculative instant query's answer held, a results
// cache's step or a staging cache's entities taken as they were) fails it. up-by-job-now's
// answer does not change as samples arrive (every up is 1); the others' change at each
// write.
func TestDashboardIngesting(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	in := newDashIngest(t, newDashFixture(t, dashTargets(t, 10)))
	for _, p := range dashIngestPanelsOf(t) {
		now := in.write(t)
		body, err := p.askTablets(in.srv, now)
		require.NoError(t, err)
		in.check(t, p, now, body)
		for range 3 {
			now = in.write(t)
			body, err := p.askTablets(in.srv, now)
			require.NoError(t, err)
			in.check(t, p, now, body)
		}
	}
}

// dashIngest is a dashboard fixture's database served as samples arrive: write appends a
// scrape of every float series to both stores, dashScrape after the one before, and moves
// the server's clock (its results cache's) to dashRefreshAfter past it.
type dashIngest struct {
	fx    *dashFixture
	db    *tsdb.DB
	srv   *server.Server
	clock atomic.Int64 // the newest sample's time, milliseconds
}

func newDashIngest(tb testing.TB, fx *dashFixture) *dashIngest {
	in := &dashIngest{fx: fx, db: fx.openDB(tb)}
	in.clock.Store(fx.now.UnixMilli())
	srv, err := server.New(in.db, &server.Options{FoldEvery: -1, RollupEvery: -1, CompactEvery: -1, RetainEvery: -1,
		Query: &api.Options{ResultsCache: server.NewResultsCache(server.DefaultResultsCacheBytes),
			Now: func() time.Time { return time.UnixMilli(in.clock.Load()).Add(dashRefreshAfter) }}})
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = srv.Close() })
	in.srv = srv
	return in
}

// write appends the next scrape of every float series to both stores (through tsdb's
// Appender, and Prometheus' head), and returns the dashboard's now after it.
func (in *dashIngest) write(tb testing.TB) time.Time {
	ctx := context.Background()
	at := time.UnixMilli(in.clock.Load()).Add(dashScrape)
	app := in.db.Appender()
	papp := in.fx.prom.Appender(ctx)
	for i := range in.fx.tails {
		t := &in.fx.tails[i]
		t.last += t.growth
		app.AppendPoints(t.key, tablets.Point{Time: at, Value: t.last})
		_, err := papp.Append(0, t.ls, at.UnixMilli(), t.last)
		require.NoError(tb, err)
	}
	require.NoError(tb, app.Commit(ctx))
	require.NoError(tb, papp.Commit())
	in.clock.Store(at.UnixMilli())
	return at.Add(dashRefreshAfter)
}

// check fails tb unless body, tablets' answer to p at now, is Prometheus' (as
// TestDashboardPeer compares them).
func (in *dashIngest) check(tb testing.TB, p dashPanel, now time.Time, body []byte) {
	tb.Helper()
	got, err := answerOfJSON(p.kind, body)
	require.NoError(tb, err)
	v, err := in.fx.evalPrometheusAt(p, now)
	require.NoError(tb, err)
	pv, ok := v.(parser.Value)
	require.True(tb, ok, "%T", v)
	want, err := answerOfPromQL(pv)
	require.NoError(tb, err)
	require.Positive(tb, want.samples(), "%s: Prometheus' answer is not empty", p.name)
	d := compareAnswers(want, got)
	require.Empty(tb, d.Shape, "%s at %s", p.name, now)
	require.Zero(tb, d.Inexact, "%s at %s: %s", p.name, now, d.Where)
}

// dashIngestPanelsOf is dashIngestPanels' panels.
func dashIngestPanelsOf(tb testing.TB) []dashPanel {
	var out []dashPanel
	for _, name := range dashIngestPanels {
		i := slices.IndexFunc(dashPanels, func(p dashPanel) bool { return p.name == name })
		require.GreaterOrEqual(tb, i, 0, name)
		out = append(out, dashPanels[i])
	}
	return out
}
