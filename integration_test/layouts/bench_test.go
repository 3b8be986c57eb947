package layouts

// The benchmarks run against a local Azurite through a counting transport (azurite.NewCounter:
// requests and entity bytes; the limits are checked by the tests, not here, so that the
// checks' own JSON decoding does not compete for the CPU). Reproduce and compare a change with:
//
//	go test -run '^$' -bench . -benchtime 3x -count 6 ./integration_test/layouts/ | tee new.txt
//	benchstat old.txt new.txt
//
// (benchstat: go run golang.org/x/perf/cmd/benchstat@latest). Each sub-benchmark reports
// points/s, requests/op, points/request, cpu-ns/point (this process's CPU time from
// getrusage over the timed loop: the client's, since Azurite is another process) and, for
// writes, bytes/point: the entity JSON sent divided by the points; reads report the response
// bytes received per point. Data sizes differ between stores to keep a run short (basic and
// naive are slow by design); every metric is per point or per request, so they compare.

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	promchunk "github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/advanced"
	"github.com/seed71701133/tablets/basic"
	"github.com/seed71701133/tablets/chunked"
	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/internal/testkit/azurite"
	"github.com/seed71701133/tablets/internal/testkit/fault"
	"github.com/seed71701133/tablets/internal/testkit/itest"
)

var benchStart = time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC)

// day returns n points at 1 Hz from benchStart, values from a fixed-seed random walk.
func series1Hz(seed uint64, n int, step time.Duration) []tablets.Point {
	rng := rand.New(rand.NewPCG(seed, 1))
	points := make([]tablets.Point, n)
	v := 50.0
	for i := range points {
		v += rng.NormFloat64()
		points[i] = tablets.Point{Time: benchStart.Add(time.Duration(i) * step), Value: v}
	}
	return points
}

// naive is what a user writes by hand with aztables: one upsert per point.
type naive struct{ client *aztables.Client }

func (n naive) write(ctx context.Context, series string, points []tablets.Point) error {
	for _, p := range points {
		body := entity.AppendKeys(nil, series, fmt.Sprintf("%015d", p.Time.UnixMilli()))
		body = entity.AppendEnd(entity.AppendDouble(body, "Value", p.Value))
		if _, err := n.client.UpsertEntity(ctx, body, nil); err != nil {
			return err
		}
	}
	return nil
}

type writeCase struct {
	name   string
	points int // per series, at 1 Hz
	write  func(b *testing.B, client *aztables.Client) func(ctx context.Context, series string, points []tablets.Point) error
}

var writeCases = []writeCase{
	{"naive", 300, func(b *testing.B, client *aztables.Client) func(context.Context, string, []tablets.Point) error {
		return naive{client}.write
	}},
	{"basic", 3600, func(b *testing.B, client *aztables.Client) func(context.Context, string, []tablets.Point) error {
		s, err := basic.New(client, nil)
		require.NoError(b, err)
		return func(ctx context.Context, series string, points []tablets.Point) error {
			return s.Write(ctx, series, points...)
		}
	}},
	{"advanced", 86400, func(b *testing.B, client *aztables.Client) func(context.Context, string, []tablets.Point) error {
		s, err := advanced.New(client, nil)
		require.NoError(b, err)
		return func(ctx context.Context, series string, points []tablets.Point) error {
			return s.Write(ctx, series, points...)
		}
	}},
	{"chunked", 86400, func(b *testing.B, client *aztables.Client) func(context.Context, string, []tablets.Point) error {
		s, err := chunked.New(client, nil)
		require.NoError(b, err)
		return func(ctx context.Context, series string, points []tablets.Point) error {
			return s.Write(ctx, series, points...)
		}
	}},
}

const benchSeries = 4

// benchWrite writes benchSeries series per iteration, each into a fresh table, the series
// concurrently (as a collector of several series would).
func benchWrite(b *testing.B, c writeCase, opts *azurite.TableOptions) {
	data := make([][]tablets.Point, benchSeries)
	for s := range data {
		data[s] = series1Hz(uint64(s), c.points, time.Second)
	}
	var requests, bytes int64
	var cpu time.Duration
	for b.Loop() {
		b.StopTimer()
		client, checker := azurite.NewTable(b, opts)
		write := c.write(b, client)
		b.StartTimer()
		cpuBefore := itest.CPUTime()
		var wg sync.WaitGroup
		for s := range data {
			wg.Add(1)
			go func() {
				defer wg.Done()
				require.NoError(b, write(context.Background(), fmt.Sprintf("series-%d", s), data[s]))
			}()
		}
		wg.Wait()
		cpu += itest.CPUTime() - cpuBefore
		stats := checker.Stats()
		requests += stats.Requests
		bytes += stats.EntityBytes
	}
	points := float64(b.N * benchSeries * c.points)
	b.ReportMetric(points/b.Elapsed().Seconds(), "points/s")
	b.ReportMetric(float64(requests)/float64(b.N), "requests/op")
	b.ReportMetric(points/float64(requests), "points/request")
	b.ReportMetric(float64(bytes)/points, "bytes/point")
	b.ReportMetric(float64(cpu.Nanoseconds())/points, "cpu-ns/point")
}

// readMetrics reports a read benchmark's figures from the counter's stats before and after
// the loop, the points read and the CPU time the loop used.
func readMetrics(b *testing.B, before, after azurite.Stats, points int, cpu time.Duration) {
	requests := after.Requests - before.Requests
	b.ReportMetric(float64(points)/b.Elapsed().Seconds(), "points/s")
	b.ReportMetric(float64(requests)/float64(b.N), "requests/op")
	b.ReportMetric(float64(points)/float64(requests), "points/request")
	b.ReportMetric(float64(after.ResponseBytes-before.ResponseBytes)/float64(points), "resp-bytes/point")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(points), "cpu-ns/point")
}

// BenchmarkWrite: a day at 1 Hz of 4 series for advanced; an hour for basic and five
// minutes for naive (one request per point), with the same per-point metrics.
func BenchmarkWrite(b *testing.B) {
	for _, c := range writeCases {
		b.Run(c.name, func(b *testing.B) { benchWrite(b, c, &azurite.TableOptions{CountOnly: true}) })
	}
}

// BenchmarkLatency is BenchmarkWrite with 20 ms added to every request: what concurrency
// and batching buy when the service is far away.
func BenchmarkLatency(b *testing.B) {
	latency := &azurite.TableOptions{CountOnly: true, Wrap: func(next policy.Transporter) policy.Transporter {
		return fault.New(next, fault.Options{Seed: 1, Latency: 20 * time.Millisecond})
	}}
	for _, c := range writeCases {
		if c.name == "naive" {
			c.points = 25 // 100 requests of 20 ms
		}
		b.Run(c.name, func(b *testing.B) { benchWrite(b, c, latency) })
	}
}

// queryFixture is a table holding data for query benchmarks, written once per process.
type queryFixture struct {
	store   tablets.Store
	checker *azurite.Checker
}

var (
	fixturesMu sync.Mutex
	fixtures   = map[string]*queryFixture{}
)

func newStore(b *testing.B, name string, client *aztables.Client) tablets.Store {
	switch name {
	case "basic":
		s, err := basic.New(client, nil)
		require.NoError(b, err)
		return s
	case "chunked":
		s, err := chunked.New(client, nil)
		require.NoError(b, err)
		return s
	default:
		s, err := advanced.New(client, nil)
		require.NoError(b, err)
		return s
	}
}

// fixture returns a store of the named layout holding series points[i] under "s<i>". The
// table outlives the benchmark that made it (it is reused by the next b.N round).
func fixture(b *testing.B, key, layout string, series int, points []tablets.Point) *queryFixture {
	fixturesMu.Lock()
	defer fixturesMu.Unlock()
	if f, ok := fixtures[key]; ok {
		return f
	}
	srv := azurite.Shared(b)
	table := azurite.NewTableName()
	setup, err := srv.NewClient(table, nil)
	require.NoError(b, err)
	require.NoError(b, tablets.EnsureTable(context.Background(), setup))
	checker := azurite.NewCounter(nil)
	client, err := srv.NewClient(table, &aztables.ClientOptions{ClientOptions: policy.ClientOptions{Transport: checker}})
	require.NoError(b, err)
	store := newStore(b, layout, client)
	for s := range series {
		require.NoError(b, store.Write(context.Background(), fmt.Sprintf("s%d", s), points...))
	}
	f := &queryFixture{store: store, checker: checker}
	fixtures[key] = f
	return f
}

// BenchmarkQuery reads 2 h and 24 h of a day at 1 Hz.
func BenchmarkQuery(b *testing.B) {
	day := series1Hz(1, 86400, time.Second)
	for _, layout := range []string{"basic", "advanced", "chunked"} {
		for _, span := range []time.Duration{2 * time.Hour, 24 * time.Hour} {
			b.Run(fmt.Sprintf("%s/%s", layout, fmt.Sprintf("%dh", int(span.Hours()))), func(b *testing.B) {
				f := fixture(b, layout+"/day", layout, 1, day)
				from := benchStart.Add(6 * time.Hour)
				if span == 24*time.Hour {
					from = benchStart
				}
				before, cpu := f.checker.Stats(), itest.CPUTime()
				n := 0
				for b.Loop() {
					for _, err := range f.store.Query(context.Background(), "s0", from, from.Add(span)) {
						if err != nil {
							b.Fatal(err)
						}
						n++
					}
				}
				readMetrics(b, before, f.checker.Stats(), n, itest.CPUTime()-cpu)
			})
		}
	}
}

// BenchmarkQueryMany reads 40 series over 2 h, each a point every 10 s (720 points a series).
func BenchmarkQueryMany(b *testing.B) {
	const seriesCount = 40
	data := series1Hz(2, 720, 10*time.Second)
	names := make([]string, seriesCount)
	for i := range names {
		names[i] = fmt.Sprintf("s%d", i)
	}
	for _, layout := range []string{"basic", "advanced", "chunked"} {
		b.Run(layout, func(b *testing.B) {
			f := fixture(b, layout+"/many", layout, seriesCount, data)
			before, cpu := f.checker.Stats(), itest.CPUTime()
			n := 0
			for b.Loop() {
				for _, err := range f.store.QueryMany(context.Background(), names, benchStart, benchStart.Add(2*time.Hour)) {
					if err != nil {
						b.Fatal(err)
					}
					n++
				}
			}
			readMetrics(b, before, f.checker.Stats(), n, itest.CPUTime()-cpu)
		})
	}
}

// BenchmarkQueryPage pages through a day at 1 Hz, 500 points a page.
func BenchmarkQueryPage(b *testing.B) {
	day := series1Hz(1, 86400, time.Second)
	for _, layout := range []string{"basic", "advanced", "chunked"} {
		b.Run(layout, func(b *testing.B) {
			f := fixture(b, layout+"/day", layout, 1, day)
			before, cpu := f.checker.Stats(), itest.CPUTime()
			n := 0
			for b.Loop() {
				for token := ""; ; {
					page, err := f.store.QueryPage(context.Background(), "s0", benchStart, benchStart.Add(24*time.Hour), 500, token)
					if err != nil {
						b.Fatal(err)
					}
					n += len(page.Points)
					if token = page.Next; token == "" {
						break
					}
				}
			}
			readMetrics(b, before, f.checker.Stats(), n, itest.CPUTime()-cpu)
		})
	}
}

// BenchmarkLatest reads the 100 newest points of a series written up to now (an hour at
// 1 Hz): a dashboard's "current value".
func BenchmarkLatest(b *testing.B) {
	for _, layout := range []string{"basic", "advanced", "chunked"} {
		b.Run(layout, func(b *testing.B) {
			now := time.Now()
			hour := make([]tablets.Point, 3600)
			for i := range hour {
				hour[i] = tablets.Point{Time: now.Add(time.Duration(i-3600) * time.Second), Value: float64(i)}
			}
			f := fixture(b, layout+"/now", layout, 1, hour)
			before, cpu := f.checker.Stats(), itest.CPUTime()
			n := 0
			for b.Loop() {
				pts, err := f.store.Latest(context.Background(), "s0", 100)
				if err != nil || len(pts) != 100 {
					b.Fatal(len(pts), err)
				}
				n += len(pts)
			}
			readMetrics(b, before, f.checker.Stats(), n, itest.CPUTime()-cpu)
		})
	}
}

// storedKinds are series of a day at 1 Hz whose values compress differently.
var storedKinds = []struct {
	name  string
	value func(i int, rng *rand.Rand) float64
}{
	{"demo", func(i int, rng *rand.Rand) float64 { // the demo's 2-decimal gauge
		v := 20 + 5*math.Sin(2*math.Pi*float64(i)/86400) + 0.5*math.Sin(2*math.Pi*float64(i)/600) + rng.NormFloat64()*0.2
		return math.Round(v*100) / 100
	}},
	{"counter", func(i int, _ *rand.Rand) float64 { return float64(i) }},
	{"constant", func(int, *rand.Rand) float64 { return 42.5 }},
	{"random", func(_ int, rng *rand.Rand) float64 { return rng.Float64() }},
}

// promXORBytes is the size of Prometheus' XOR chunks (tsdb/chunkenc, 120 samples a chunk as
// Prometheus cuts them) holding the same points: the anchor for bytes a point.
func promXORBytes(points []tablets.Point) int {
	size := 0
	var c *promchunk.XORChunk
	var app promchunk.Appender
	for i, p := range points {
		if i%120 == 0 {
			if c != nil {
				size += len(c.Bytes())
			}
			c = promchunk.NewXORChunk()
			app, _ = c.Appender()
		}
		app.Append(p.Time.UnixMilli(), p.Value)
	}
	if c != nil {
		size += len(c.Bytes())
	}
	return size
}

// BenchmarkStoredBytes writes a day at 1 Hz of each kind of series in one Write and reports
// the bytes stored a point (the entities' JSON, base64 included) and, as the anchor, the
// bytes a point of Prometheus' XOR chunks of the same points (no keys, no base64).
func BenchmarkStoredBytes(b *testing.B) {
	for _, kind := range storedKinds {
		rng := rand.New(rand.NewPCG(1, 2))
		points := make([]tablets.Point, 86400)
		for i := range points {
			points[i] = tablets.Point{Time: benchStart.Add(time.Duration(i) * time.Second), Value: kind.value(i, rng)}
		}
		for _, layout := range []string{"advanced", "chunked"} {
			b.Run(kind.name+"/"+layout, func(b *testing.B) {
				var bytes int64
				var cpu time.Duration
				for b.Loop() {
					b.StopTimer()
					client, checker := azurite.NewTable(b, &azurite.TableOptions{CountOnly: true})
					store := newStore(b, layout, client)
					b.StartTimer()
					before := itest.CPUTime()
					require.NoError(b, store.Write(context.Background(), "s", points...))
					cpu += itest.CPUTime() - before
					bytes += checker.Stats().EntityBytes
				}
				n := float64(b.N * len(points))
				b.ReportMetric(float64(bytes)/n, "bytes/point")
				b.ReportMetric(float64(promXORBytes(points))/float64(len(points)), "prom-xor-bytes/point")
				b.ReportMetric(float64(cpu.Nanoseconds())/n, "cpu-ns/point")
			})
		}
	}
}
