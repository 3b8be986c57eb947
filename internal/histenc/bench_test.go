package histenc

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/seed71701133/tablets"
)

// latencySamples is n scrapes, 15 s apart in ms, of a 20-bucket schema-3 latency
// histogram: log-normal latencies around 100 ms arriving at rate a second, the rate itself
// varying from scrape to scrape by a factor of about exp(burst·N(0,1)).
func latencySamples(n int, rate, burst float64, seed uint64) []Sample {
	rng := rand.New(rand.NewPCG(20, seed))
	first := int(math.Ceil(math.Log2(0.1)*8)) - 10
	var counts [20]int64
	var sum float64
	out := make([]Sample, n)
	for i := range out {
		r := rate * math.Exp(burst*rng.NormFloat64())
		arrivals := int(math.Max(0, math.Round(r*15+math.Sqrt(r*15)*rng.NormFloat64())))
		for range arrivals {
			v := 0.1 * math.Exp(0.4*rng.NormFloat64())
			sum += v
			idx := int(math.Ceil(math.Log2(v)*8)) - first
			counts[min(max(idx, 0), 19)]++
		}
		h := &tablets.Histogram{Schema: 3, ZeroThreshold: 0x1p-128, Sum: sum, PositiveSpans: []tablets.HistogramSpan{{Offset: int32(first), Length: 20}}}
		var prev int64
		for _, c := range counts {
			h.PositiveBuckets = append(h.PositiveBuckets, c-prev)
			prev = c
			h.Count += uint64(c)
		}
		out[i] = Sample{Unit: 1_700_000_000_000 + uint64(i)*15000, H: h}
	}
	return out
}

// The benchmarks report bytes/sample and ns/sample for chunks of 120 samples (Prometheus'
// cut); integration_test/tsdb/histbytes_test.go compares them with Prometheus' chunks.
func BenchmarkAppend(b *testing.B) {
	for _, c := range benchCases() {
		b.Run(c.name, func(b *testing.B) {
			var size int
			for b.Loop() {
				size = 0
				for i := 0; i < len(c.samples); i += 120 {
					size += len(Append(nil, c.samples[i:min(i+120, len(c.samples))]))
				}
			}
			n := float64(len(c.samples))
			b.ReportMetric(float64(size)/n, "bytes/sample")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/sample")
		})
	}
}

func BenchmarkDecode(b *testing.B) {
	for _, c := range benchCases() {
		var chunks [][]byte
		for i := 0; i < len(c.samples); i += 120 {
			chunks = append(chunks, Append(nil, c.samples[i:min(i+120, len(c.samples))]))
		}
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				for _, chunk := range chunks {
					if err := Decode(chunk, func(Sample) {}); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(c.samples)), "ns/sample")
		})
	}
}

type benchCase struct {
	name    string
	samples []Sample
}

func benchCases() []benchCase {
	return []benchCase{
		{"latency_50rps", latencySamples(1200, 50, 0, 1)},
		{"latency_1000rps_bursty", latencySamples(1200, 1000, 0.3, 2)},
		{"random", newRandomSeries(3).take(1200)},
	}
}
