package server_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql/parser"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/testkit/azurite"
	"github.com/seed71701133/tablets/server"
	"github.com/seed71701133/tablets/server/api"
)

// dashIngestPanels are the panels BenchmarkDashboardIngesting refreshes: an instant
// panel's and range panels' of float samples (the benchmark writes no histogram).
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
	fx := newDashFixture(b, dashTargets(b, 20))
	ctx := context.Background()
	var clock atomic.Int64 // the newest sample's time, milliseconds
	clock.Store(fx.now.UnixMilli())
	db := fx.openDB(b)
	srv, err := server.New(db, &server.Options{FoldEvery: -1, RollupEvery: -1, CompactEvery: -1, RetainEvery: -1,
		Query: &api.Options{ResultsCache: server.NewResultsCache(server.DefaultResultsCacheBytes),
			Now: func() time.Time { return time.UnixMilli(clock.Load()).Add(dashRefreshAfter) }}})
	require.NoError(b, err)
	b.Cleanup(func() { _ = srv.Close() })
	// write appends the next scrape of every float series to both stores.
	write := func() time.Time {
		at := time.UnixMilli(clock.Load()).Add(dashScrape)
		app := db.Appender()
		papp := fx.prom.Appender(ctx)
		for i := range fx.tails {
			t := &fx.tails[i]
			t.last += t.growth
			app.AppendPoints(t.key, tablets.Point{Time: at, Value: t.last})
			_, err := papp.Append(0, t.ls, at.UnixMilli(), t.last)
			require.NoError(b, err)
		}
		require.NoError(b, app.Commit(ctx))
		require.NoError(b, papp.Commit())
		clock.Store(at.UnixMilli())
		return at.Add(dashRefreshAfter)
	}
	for _, name := range dashIngestPanels {
		var p dashPanel
		for _, q := range dashPanels {
			if q.name == name {
				p = q
			}
		}
		require.NotEmpty(b, p.expr, name)
		b.Run(name, func(b *testing.B) {
			now := write()
			_, err := p.askTablets(srv, now) // answered once before: a refresh
			require.NoError(b, err)
			fx.checker.Reset()
			var cost azurite.Stats
			var tab, prom, fresh time.Duration
			var body []byte
			b.StopTimer()
			for range b.N {
				now = write()
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
			got, err := answerOfJSON(p.kind, body)
			require.NoError(b, err)
			v, err := fx.evalPrometheusAt(p, now)
			require.NoError(b, err)
			pv, ok := v.(parser.Value)
			require.True(b, ok, "%T", v)
			want, err := answerOfPromQL(pv)
			require.NoError(b, err)
			d := compareAnswers(want, got)
			require.Empty(b, d.Shape, "%s: the last refresh's answer", name)
			require.Zero(b, d.Inexact, "%s: the last refresh's answer: %s", name, d.Where)
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
