package chunkenc

import (
	"math/rand/v2"
	"testing"

	prom "github.com/prometheus/prometheus/tsdb/chunkenc"
)

// The benchmarks report, for a day of points at 1 Hz (times in ms):
//
//	bytes/point       the size of one chunk of all the points
//	prom-bytes/point  Prometheus' XOR chunks of the same points, 120 samples a chunk as
//	                  Prometheus cuts them (its chunk header counts samples in a uint16, so a
//	                  day does not fit in one), sizes summed
//	ns/point          encode or decode CPU time
//
// Run them with:
//
//	go test -run '^$' -bench . -count 6 ./internal/chunkenc | tee new.txt; benchstat new.txt

const benchPoints = 86400

func benchSeries() []series {
	rng := rand.New(rand.NewPCG(9, 10))
	day := regular(benchPoints, epochMs, second)
	return []series{
		{"counter", day, counterValues(benchPoints)},
		{"constant", day, constValues(benchPoints, 42.5)},
		{"demo", day, demoValues(benchPoints)},
		{"random", day, randomValues(benchPoints, 11)},
		{"irregular", jittered(benchPoints, rng), demoValues(benchPoints)},
	}
}

func BenchmarkEncode(b *testing.B) {
	for _, s := range benchSeries() {
		b.Run(s.name, func(b *testing.B) {
			var chunk []byte
			for b.Loop() {
				chunk = Append(chunk[:0], s.times, s.values)
			}
			reportPerPoint(b, len(s.times))
			b.ReportMetric(float64(len(chunk))/float64(len(s.times)), "bytes/point")
			b.ReportMetric(float64(promXORSize(s.times, s.values))/float64(len(s.times)), "prom-bytes/point")
		})
	}
}

func BenchmarkDecode(b *testing.B) {
	for _, s := range benchSeries() {
		b.Run(s.name, func(b *testing.B) {
			chunk := Append(nil, s.times, s.values)
			var sum float64
			for b.Loop() {
				if err := Decode(chunk, func(_ uint64, v float64) { sum += v }); err != nil {
					b.Fatal(err)
				}
			}
			reportPerPoint(b, len(s.times))
		})
	}
}

// BenchmarkAppendLimit fills one Azure Table binary property (64 KiB) from a day of points.
func BenchmarkAppendLimit(b *testing.B) {
	const maxBytes = 64 << 10
	for _, s := range benchSeries() {
		b.Run(s.name, func(b *testing.B) {
			var chunk []byte
			var n int
			for b.Loop() {
				chunk, n = AppendLimit(chunk[:0], s.times, s.values, maxBytes)
			}
			reportPerPoint(b, n)
			b.ReportMetric(float64(n), "points")
			b.ReportMetric(float64(len(chunk))/float64(n), "bytes/point")
		})
	}
}

// BenchmarkPromXOR is the anchor: Prometheus' XOR chunks (120 samples each) on the same
// points, encode and decode.
func BenchmarkPromXOR(b *testing.B) {
	for _, s := range benchSeries() {
		b.Run("encode/"+s.name, func(b *testing.B) {
			for b.Loop() {
				promXORChunks(s.times, s.values)
			}
			reportPerPoint(b, len(s.times))
		})
		b.Run("decode/"+s.name, func(b *testing.B) {
			chunks := promXORChunks(s.times, s.values)
			var sum float64
			var it prom.Iterator
			for b.Loop() {
				for _, c := range chunks {
					it = c.Iterator(it)
					for it.Next() != prom.ValNone {
						_, v := it.At()
						sum += v
					}
				}
			}
			reportPerPoint(b, len(s.times))
		})
	}
}

// reportPerPoint reports the CPU time of one point; call it after the b.Loop loop.
func reportPerPoint(b *testing.B, points int) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(points), "ns/point")
}

// promSamplesPerChunk is Prometheus' target chunk length for float samples.
const promSamplesPerChunk = 120

func promXORChunks(times []uint64, values []float64) []*prom.XORChunk {
	var chunks []*prom.XORChunk
	var app prom.Appender
	for i := range times {
		if i%promSamplesPerChunk == 0 {
			c := prom.NewXORChunk()
			var err error
			if app, err = c.Appender(); err != nil {
				panic(err)
			}
			chunks = append(chunks, c)
		}
		app.Append(int64(times[i]), values[i])
	}
	return chunks
}

func promXORSize(times []uint64, values []float64) int {
	size := 0
	for _, c := range promXORChunks(times, values) {
		size += len(c.Bytes())
	}
	return size
}
