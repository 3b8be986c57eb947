package tsdb

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/seed71701133/tablets/internal/maintain/schedule"
	"github.com/seed71701133/tablets/internal/testkit/clock"
	"github.com/seed71701133/tablets/internal/testkit/dbtest"
	"github.com/seed71701133/tablets/internal/testkit/itest"
)

// BenchmarkTSDBStagedIngest loads a chunked database as Prometheus' remote write does:
// 10,000 series, a sample each at a 15 s scrape, 2,000 samples a request, 4 requests in
// flight; an op is a scrape (10,000 samples). Then it reads one series over the range (not
// folded yet), and folds it all. Requests and bytes are counted at the transport (the limit
// Checker). An hour is 240 ops:
//
//	go test -run '^$' -bench TSDBStagedIngest -benchtime 240x -count 6 ./integration_test/tsdb/ | tee new.txt
//	benchstat old.txt new.txt
func BenchmarkTSDBStagedIngest(b *testing.B) {
	clock := new(clock.Clock)
	db, _, checker := dbtest.NewDB(b, stagingOptions(clock))
	names := seriesNames(b, db, 10_000)
	start := time.Date(2025, 3, 10, 9, 0, 0, 0, time.UTC)
	checker.Reset()
	cpuBefore := itest.CPUTime()
	b.ResetTimer()
	written := promLoad(b, db, clock, names, start, b.N, 15*time.Second, 2000, 4)
	b.StopTimer()
	cpu := itest.CPUTime() - cpuBefore
	ingest := checker.Stats()
	samples := float64(b.N * len(names))
	b.ReportMetric(samples/b.Elapsed().Seconds(), "samples/s")
	b.ReportMetric(float64(ingest.Requests)/samples, "requests/sample")
	b.ReportMetric(float64(ingest.RequestBytes)/samples, "bytes/sample")
	b.ReportMetric(float64(cpu.Nanoseconds())/samples, "cpu-ns/sample")
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.HeapInuse)/1e6, "heap-MB")

	ctx := context.Background()
	end := start.Add(time.Duration(b.N) * 15 * time.Second)
	checker.Reset()
	n := 0
	for _, err := range db.Query(ctx, names[42], end.Add(-time.Hour), end) {
		if err != nil {
			b.Fatal(err)
		}
		n++
	}
	read := checker.Stats()
	if want := len(written[names[42]]); n != min(want, 240) {
		b.Fatalf("read %d points, want %d", n, min(want, 240))
	}
	b.ReportMetric(float64(read.Requests), "hour-read-requests")
	b.ReportMetric(float64(read.ResponseBytes)/1e3, "hour-read-KB")

	checker.Reset()
	clock.Set(end.Add(20 * time.Minute))
	rep, err := db.Fold(ctx)
	if err != nil {
		b.Fatal(err)
	}
	fold := checker.Stats()
	if rep.Points != int(samples) {
		b.Fatalf("folded %d points of %.0f", rep.Points, samples)
	}
	b.ReportMetric(float64(fold.Requests)/samples, "fold-requests/sample")
	b.ReportMetric(float64(ingest.Requests+fold.Requests)/samples, "total-requests/sample")
}

// BenchmarkTSDBIngestAndMaintain is the whole load: 10,000 series at a 15 s scrape,
// 2,000 samples a request, with the default tiers (a minute and an hour); then one
// schedule.Once (what `tablets maintain` runs: fold, compact, roll up, retain). It reports
// the requests a sample of everything, counted at the transport. Two hours are 480 ops:
//
//	go test -run '^$' -bench TSDBIngestAndMaintain -benchtime 480x -count 6 ./integration_test/tsdb/ | tee new.txt
//	benchstat old.txt new.txt
func BenchmarkTSDBIngestAndMaintain(b *testing.B) {
	clock := new(clock.Clock)
	opts := stagingOptions(clock)
	opts.Tiers = nil // the defaults
	db, _, checker := dbtest.NewDB(b, opts)
	names := seriesNames(b, db, 10_000)
	start := time.Date(2025, 3, 10, 9, 0, 0, 0, time.UTC)
	checker.Reset()
	b.ResetTimer()
	promLoad(b, db, clock, names, start, b.N, 15*time.Second, 2000, 4)
	b.StopTimer()
	ingest := checker.Stats()
	samples := float64(b.N * len(names))
	b.ReportMetric(samples/b.Elapsed().Seconds(), "samples/s")
	b.ReportMetric(float64(ingest.Requests)/samples, "ingest-requests/sample")

	end := start.Add(time.Duration(b.N) * 15 * time.Second)
	clock.Set(end.Add(20 * time.Minute))
	checker.Reset()
	maintained := time.Now()
	for step, err := range schedule.Once(context.Background(), db, nil) {
		if err != nil {
			b.Fatal(err)
		}
		if step.Task == "fold" && step.Fold.Points != int(samples) {
			b.Fatalf("folded %d points of %.0f", step.Fold.Points, samples)
		}
	}
	maintain := checker.Stats()
	b.ReportMetric(time.Since(maintained).Seconds(), "maintain-s")
	b.ReportMetric(float64(maintain.Requests)/samples, "maintain-requests/sample")
	b.ReportMetric(float64(ingest.Requests+maintain.Requests)/samples, "total-requests/sample")
}
