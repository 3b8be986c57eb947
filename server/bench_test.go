package server_test

// Run: go test ./server/ -run '^$' -bench . -count 6 | tee new.txt; benchstat old.txt new.txt

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/rwgen"
	"github.com/seed71701133/tablets/server"
	"github.com/seed71701133/tablets/server/promstore"
	"github.com/seed71701133/tablets/tsdb"
)

// BenchmarkRemoteWrite: remote-write throughput on Azurite, with our load generator (2,000
// series, 500 samples a request, 4 senders), counted at the transport: samples/s, requests
// and bytes to the account per sample, client CPU per sample, and the heap's peak.
func BenchmarkRemoteWrite(b *testing.B) {
	for _, shards := range []int{4, 16} {
		b.Run(fmt.Sprintf("shards=%d", shards), func(b *testing.B) {
			s, hs, checker := newServer(b, nil, nil)
			const series, perRequest, requests = 2000, 500, 10
			var samples int64
			var peakHeap uint64
			checker.Reset()
			cpu0 := cpuTime()
			b.ResetTimer()
			for i := range b.N {
				res, err := rwgen.Run(context.Background(), rwgen.Config{URL: hs.URL + "/api/v1/write", Series: series, Metrics: 20,
					SamplesPerRequest: perRequest, Shards: shards, Interval: 15 * time.Second, Requests: requests,
					Start: time.Now().Add(-20 * time.Minute).Add(time.Duration(i) * 3 * time.Minute)})
				if err != nil || res.Failed > 0 {
					b.Fatalf("%v %v", err, res.Status)
				}
				samples += res.Samples
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				peakHeap = max(peakHeap, ms.HeapInuse)
			}
			b.StopTimer()
			cpu := cpuTime() - cpu0
			st := checker.Stats()
			b.ReportMetric(float64(samples)/b.Elapsed().Seconds(), "samples/s")
			b.ReportMetric(float64(st.Requests)/float64(samples), "account-requests/sample")
			b.ReportMetric(float64(st.RequestBytes+st.ResponseBytes)/float64(samples), "account-bytes/sample")
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(samples), "cpu-ns/sample")
			b.ReportMetric(float64(peakHeap)/(1<<20), "peak-heap-MiB")
			_ = s
		})
	}
}

// BenchmarkDashboard: Grafana's `sum by (job) (rate(x[5m]))` over 7 days at a 1 h step, on
// 20 counters scraped every 15 s (about 800,000 samples), from the 1-minute tier, from the
// raw points, and as the server's default picks (raw while it exists): requests, bytes and
// time of one query.
func BenchmarkDashboard(b *testing.B) {
	s, hs, checker := newServer(b, nil, nil)
	_ = s
	end := time.Now().Add(-2 * time.Hour).Truncate(time.Hour)
	start := end.Add(-7 * 24 * time.Hour)
	db := dashboardData(b, s, start, end)
	raw, err := server.New(db, &server.Options{RollupEvery: -1, CompactEvery: -1, RetainEvery: -1, Store: &promstore.Options{DisableTiers: true}})
	require.NoError(b, err)
	defer raw.Close()
	tier, err := server.New(db, &server.Options{RollupEvery: -1, CompactEvery: -1, RetainEvery: -1, Store: &promstore.Options{}})
	require.NoError(b, err)
	defer tier.Close()
	for _, c := range []struct {
		name string
		h    http.Handler
	}{{"minute-tier", tier}, {"raw", raw}, {"default", hs.Config.Handler}} {
		b.Run(c.name, func(b *testing.B) {
			q := url.Values{"query": {`sum by (job) (rate(dash_requests_total[5m]))`}, "start": {fmt.Sprint(start.Add(time.Hour).Unix())},
				"end": {fmt.Sprint(end.Unix())}, "step": {"3600"}}
			checker.Reset()
			b.ResetTimer()
			for range b.N {
				req, _ := http.NewRequest(http.MethodGet, "/api/v1/query_range?"+q.Encode(), nil)
				rec := newRecorder()
				c.h.ServeHTTP(rec, req)
				if rec.code != http.StatusOK {
					b.Fatalf("%d %s", rec.code, rec.body)
				}
			}
			b.StopTimer()
			st := checker.Stats()
			b.ReportMetric(float64(st.Requests)/float64(b.N), "account-requests/op")
			b.ReportMetric(float64(st.ResponseBytes)/float64(b.N), "account-bytes/op")
		})
	}
}

// dashboardData writes the 20 counters of BenchmarkDashboard and rolls them up.
func dashboardData(b *testing.B, s *server.Server, start, end time.Time) *tsdb.DB {
	db := s.DB()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 1))
	var sets []tsdb.Labels
	for i := range 20 {
		sets = append(sets, tsdb.LabelsFromStrings(tsdb.MetricName, "dash_requests_total", "job", fmt.Sprintf("job%d", i%4), "instance", fmt.Sprintf("i%d", i)))
	}
	keys, err := db.SeriesOfMany(ctx, sets)
	require.NoError(b, err)
	var batch []tsdb.SeriesPoints
	for _, k := range keys {
		v := 0.0
		var pts []tablets.Point
		for t := start; t.Before(end); t = t.Add(15 * time.Second) {
			v += float64(rng.IntN(100))
			pts = append(pts, tablets.Point{Time: t, Value: v})
		}
		batch = append(batch, tsdb.SeriesPoints{Series: k, Points: pts})
	}
	require.NoError(b, db.WriteMany(ctx, batch))
	require.NoError(b, db.Rollup(ctx, start, end))
	return db
}

// recorder is a minimal http.ResponseWriter for benchmarks.
type recorder struct {
	header http.Header
	code   int
	body   []byte
}

func newRecorder() *recorder { return &recorder{header: http.Header{}, code: http.StatusOK} }

func (r *recorder) Header() http.Header         { return r.header }
func (r *recorder) WriteHeader(code int)        { r.code = code }
func (r *recorder) Write(p []byte) (int, error) { r.body = append(r.body, p...); return len(p), nil }

var _ io.Writer = (*recorder)(nil)
