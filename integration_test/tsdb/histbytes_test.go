package tsdb

// Stored bytes per histogram sample, tablets' histogram chunks (internal/histenc) against
// Prometheus' own (tsdb/chunkenc HistogramChunk) for the same samples: a 20-bucket latency
// histogram scraped every 15 s, cut into chunks of 120 samples as Prometheus' head cuts
// them. Issue #20's target: at most 1.5 times Prometheus' bytes. No Azurite is needed.
//
//	go test -run TestHistogramBytes -v ./integration_test/tsdb/
//	go test -run '^$' -bench BenchmarkHistogramChunks ./integration_test/tsdb/

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/prometheus/prometheus/model/histogram"
	promchunk "github.com/prometheus/prometheus/tsdb/chunkenc"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/histenc"
	"github.com/seed71701133/tablets/server/promconv"
)

// promSamplesPerChunk is how many samples Prometheus' head puts in a chunk.
const promSamplesPerChunk = 120

// latencyCase is a latency histogram of 20 buckets: its observations are log-normal around
// median seconds, arriving as a Poisson process of rate a second (or of a rate that varies).
type latencyCase struct {
	name     string
	schema   int32     // 3, or tablets.CustomBucketsSchema with bounds
	bounds   []float64 // 19 upper bounds, +Inf implied: 20 buckets
	median   float64
	sigma    float64 // of the log of the latency
	rate     float64
	burst    float64 // the rate varies from scrape to scrape by about exp(burst·N(0,1))
	jitterMS int     // scrape times off the 15 s grid by up to this (Prometheus aligns them: 0)
}

var classicBounds = []float64{0.001, 0.0025, 0.005, 0.0075, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 25, 50}

var latencyCases = []latencyCase{
	{name: "schema3_50rps", schema: 3, median: 0.1, sigma: 0.4, rate: 50},
	{name: "schema3_2rps", schema: 3, median: 0.1, sigma: 0.4, rate: 2},
	{name: "schema3_1000rps_jitter", schema: 3, median: 0.1, sigma: 0.4, rate: 1000, jitterMS: 5},
	{name: "schema3_1000rps_bursty", schema: 3, median: 0.1, sigma: 0.4, rate: 1000, burst: 0.3},
	{name: "custom_50rps", schema: tablets.CustomBucketsSchema, bounds: classicBounds, median: 0.1, sigma: 1.2, rate: 50},
	{name: "custom_1000rps", schema: tablets.CustomBucketsSchema, bounds: classicBounds, median: 0.1, sigma: 1.2, rate: 1000},
}

// samples scrapes the histogram n times, at ms units, with a fixed seed.
func (c latencyCase) samples(n int) []histenc.Sample {
	rng := rand.New(rand.NewPCG(20, uint64(len(c.name))))
	const buckets = 20
	// Exponential: the 20 buckets around the median; an observation outside goes to the
	// nearest one, so that the layout stays 20 buckets.
	first := int(math.Ceil(math.Log2(c.median)*math.Exp2(float64(c.schema)))) - buckets/2
	var counts [buckets]int64
	var sum float64
	out := make([]histenc.Sample, n)
	unit := uint64(1_700_000_000_000)
	for i := range out {
		rate := c.rate * math.Exp(c.burst*rng.NormFloat64())
		arrivals := int(math.Max(0, math.Round(rate*15+math.Sqrt(rate*15)*rng.NormFloat64())))
		for range arrivals {
			v := c.median * math.Exp(c.sigma*rng.NormFloat64())
			sum += v
			counts[c.bucket(v, first)]++
		}
		h := &tablets.Histogram{Schema: c.schema, Sum: sum, PositiveSpans: []tablets.HistogramSpan{{Offset: int32(first), Length: buckets}}}
		if c.bounds != nil {
			h.PositiveSpans[0].Offset = 0
			h.CustomValues = c.bounds
		} else {
			h.ZeroThreshold = 0x1p-128
		}
		var prev int64
		for _, n := range counts {
			h.PositiveBuckets = append(h.PositiveBuckets, n-prev)
			prev = n
			h.Count += uint64(n)
		}
		jitter := 0
		if c.jitterMS > 0 {
			jitter = rng.IntN(2*c.jitterMS+1) - c.jitterMS
		}
		out[i] = histenc.Sample{Unit: unit + uint64(i*15000+jitter), H: h}
	}
	return out
}

func (c latencyCase) bucket(v float64, first int) int {
	if c.bounds == nil {
		idx := int(math.Ceil(math.Log2(v)*math.Exp2(float64(c.schema)))) - first
		return min(max(idx, 0), 19)
	}
	for i, b := range c.bounds {
		if v <= b {
			return i
		}
	}
	return len(c.bounds)
}

// ourChunks encodes samples in chunks of per samples.
func ourChunks(samples []histenc.Sample, per int) [][]byte {
	var chunks [][]byte
	for start := 0; start < len(samples); start += per {
		chunks = append(chunks, histenc.Append(nil, samples[start:min(start+per, len(samples))]))
	}
	return chunks
}

// promChunks encodes samples with Prometheus' histogram chunks, 120 samples each unless
// the appender cuts sooner.
func promChunks(samples []histenc.Sample) ([][]byte, error) {
	var chunks [][]byte
	for start := 0; start < len(samples); start += promSamplesPerChunk {
		var c promchunk.Chunk = promchunk.NewHistogramChunk()
		app, err := c.Appender()
		if err != nil {
			return nil, err
		}
		for _, s := range samples[start:min(start+promSamplesPerChunk, len(samples))] {
			next, recoded, nextApp, err := app.(*promchunk.HistogramAppender).AppendHistogram(nil, int64(s.Unit), promconv.ToProm(s.H), false)
			if err != nil {
				return nil, err
			}
			if next != nil {
				if !recoded {
					chunks = append(chunks, c.Bytes())
				}
				c = next
			}
			app = nextApp
		}
		chunks = append(chunks, c.Bytes())
	}
	return chunks, nil
}

func totalBytes(chunks [][]byte) int {
	n := 0
	for _, c := range chunks {
		n += len(c)
	}
	return n
}

// promDecode decodes Prometheus chunks back to histograms.
func promDecode(chunks [][]byte) ([]*histogram.Histogram, error) {
	var out []*histogram.Histogram
	for _, b := range chunks {
		c, err := promchunk.FromData(promchunk.EncHistogram, b)
		if err != nil {
			return nil, err
		}
		it := c.Iterator(nil)
		for it.Next() == promchunk.ValHistogram {
			_, h := it.AtHistogram(nil)
			out = append(out, h)
		}
		if it.Err() != nil {
			return nil, it.Err()
		}
	}
	return out, nil
}

// TestHistogramBytes asserts the target: histenc's bytes per sample are at most
// 1.5 times Prometheus' for the same samples in chunks of the same 120 samples. Both
// decode back to the samples, which makes the comparison one of equals.
func TestHistogramBytes(t *testing.T) {
	const n = 10 * promSamplesPerChunk
	for _, c := range latencyCases {
		t.Run(c.name, func(t *testing.T) {
			samples := c.samples(n)
			ours := ourChunks(samples, promSamplesPerChunk)
			theirs, err := promChunks(samples)
			if err != nil {
				t.Fatal(err)
			}
			checkBothDecode(t, samples, ours, theirs)
			ourPer := float64(totalBytes(ours)) / n
			theirPer := float64(totalBytes(theirs)) / n
			long := float64(len(histenc.Append(nil, samples))) / n
			t.Logf("bytes/sample: histenc %.2f (one chunk of %d: %.2f), Prometheus %.2f (%d chunks); ratio %.3f",
				ourPer, n, long, theirPer, len(theirs), ourPer/theirPer)
			if ourPer > 1.5*theirPer {
				t.Errorf("histenc %.2f bytes/sample, over 1.5 × Prometheus' %.2f", ourPer, theirPer)
			}
		})
	}
}

func checkBothDecode(t *testing.T, samples []histenc.Sample, ours, theirs [][]byte) {
	t.Helper()
	var got []histenc.Sample
	for _, chunk := range ours {
		if err := histenc.Decode(chunk, func(s histenc.Sample) { got = append(got, s) }); err != nil {
			t.Fatal(err)
		}
	}
	promGot, err := promDecode(theirs)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(samples) || len(promGot) != len(samples) {
		t.Fatalf("%d samples, histenc decoded %d, Prometheus %d", len(samples), len(got), len(promGot))
	}
	for i, s := range samples {
		// Prometheus sets the hint on decoding; the rest must be equal.
		promGot[i].CounterResetHint = histogram.UnknownCounterReset
		if want := promconv.ToProm(s.H); !reflect.DeepEqual(got[i], s) || !reflect.DeepEqual(promGot[i], want) {
			t.Fatalf("sample %d: histenc %+v, Prometheus %+v, want %+v", i, got[i].H, promGot[i], want)
		}
	}
}

// promFloatChunks is promChunks for float histograms.
func promFloatChunks(samples []histenc.Sample) ([][]byte, error) {
	var chunks [][]byte
	for start := 0; start < len(samples); start += promSamplesPerChunk {
		var c promchunk.Chunk = promchunk.NewFloatHistogramChunk()
		app, err := c.Appender()
		if err != nil {
			return nil, err
		}
		for _, s := range samples[start:min(start+promSamplesPerChunk, len(samples))] {
			next, recoded, nextApp, err := app.(*promchunk.FloatHistogramAppender).AppendFloatHistogram(nil, int64(s.Unit), promconv.FloatToProm(s.FH), false)
			if err != nil {
				return nil, err
			}
			if next != nil {
				if !recoded {
					chunks = append(chunks, c.Bytes())
				}
				c = next
			}
			app = nextApp
		}
		chunks = append(chunks, c.Bytes())
	}
	return chunks, nil
}

// floatSamples turns integer samples into float ones: their counts as floats (what
// Prometheus' own float histograms of a counter hold), or their rates over the last minute,
// per second (what a recording rule of rate() stores: fractions, a gauge histogram).
func floatSamples(samples []histenc.Sample, rate bool) []histenc.Sample {
	out := make([]histenc.Sample, len(samples))
	for i, s := range samples {
		fh := promconv.ToProm(s.H).ToFloat(nil)
		if rate {
			prev := promconv.ToProm(samples[max(i-4, 0)].H).ToFloat(nil)
			fh.CounterResetHint, prev.CounterResetHint = histogram.GaugeType, histogram.GaugeType
			fh.Sub(prev)
			fh.Mul(1.0 / 60)
			fh.CounterResetHint = histogram.GaugeType
		}
		out[i] = histenc.Sample{Unit: s.Unit, FH: promconv.FloatFromProm(fh)}
	}
	return out
}

// TestFloatHistogramBytes compares float histogram chunks, whole counts and rates, with
// Prometheus' float histogram chunks (measured; the target is for integer ones, and
// is asserted here too).
func TestFloatHistogramBytes(t *testing.T) {
	const n = 10 * promSamplesPerChunk
	for _, c := range []latencyCase{latencyCases[0], latencyCases[4]} {
		for _, rate := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/rate=%v", c.name, rate), func(t *testing.T) {
				samples := floatSamples(c.samples(n), rate)
				ours := ourChunks(samples, promSamplesPerChunk)
				theirs, err := promFloatChunks(samples)
				if err != nil {
					t.Fatal(err)
				}
				var got []histenc.Sample
				for _, chunk := range ours {
					if err := histenc.Decode(chunk, func(s histenc.Sample) { got = append(got, s) }); err != nil {
						t.Fatal(err)
					}
				}
				if !reflect.DeepEqual(got, samples) {
					t.Fatal("histenc does not decode the samples")
				}
				ourPer, theirPer := float64(totalBytes(ours))/n, float64(totalBytes(theirs))/n
				t.Logf("bytes/sample: histenc %.2f, Prometheus %.2f (%d chunks); ratio %.3f", ourPer, theirPer, len(theirs), ourPer/theirPer)
				if ourPer > 1.5*theirPer {
					t.Errorf("histenc %.2f bytes/sample, over 1.5 × Prometheus' %.2f", ourPer, theirPer)
				}
			})
		}
	}
}

// BenchmarkHistogramChunks reports bytes/sample and encode and decode ns/sample of both
// codecs on the cases of TestHistogramBytes.
func BenchmarkHistogramChunks(b *testing.B) {
	const n = 10 * promSamplesPerChunk
	for _, c := range latencyCases {
		samples := c.samples(n)
		b.Run(fmt.Sprintf("%s/histenc", c.name), func(b *testing.B) {
			var chunks [][]byte
			b.ResetTimer()
			for b.Loop() {
				chunks = ourChunks(samples, promSamplesPerChunk)
				for _, chunk := range chunks {
					if err := histenc.Decode(chunk, func(histenc.Sample) {}); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(totalBytes(chunks))/n, "bytes/sample")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/sample")
		})
		b.Run(fmt.Sprintf("%s/prometheus", c.name), func(b *testing.B) {
			var chunks [][]byte
			b.ResetTimer()
			for b.Loop() {
				var err error
				if chunks, err = promChunks(samples); err != nil {
					b.Fatal(err)
				}
				if _, err := promDecode(chunks); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(totalBytes(chunks))/n, "bytes/sample")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/sample")
		})
	}
}
