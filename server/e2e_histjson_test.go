package server_test

import (
	"encoding/json"
	"fmt"
	"math"
	mrand "math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/promql/parser/posrange"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"

	"github.com/seed71701133/tablets/internal/testkit/promrun"
	"github.com/seed71701133/tablets/server/remote"
)

// jsonRaw is the undecoded data of an API answer.
type jsonRaw = json.RawMessage

// decodeHistMatrix decodes the data of an instant query of a range selector: a matrix whose
// series hold histogram samples only.
func decodeHistMatrix(data []byte) (rawHistograms, error) {
	var r struct {
		ResultType string `json:"resultType"`
		Result     []struct {
			Metric     promrun.Labels    `json:"metric"`
			Values     []json.RawMessage `json:"values"`
			Histograms []histSample      `json:"histograms"`
		} `json:"result"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, err
	}
	if r.ResultType != "matrix" {
		return nil, fmt.Errorf("result type %q, want matrix", r.ResultType)
	}
	out := rawHistograms{}
	for _, s := range r.Result {
		k := s.Metric.String()
		if len(s.Values) > 0 {
			return nil, fmt.Errorf("series %s: %d float samples", k, len(s.Values))
		}
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("series %s twice", k)
		}
		out[k] = s.Histograms
	}
	return out, nil
}

// UnmarshalJSON decodes [<unix seconds>, {"count": "..", "sum": "..", "buckets": [[rule,
// "lower", "upper", "count"], ...]}].
func (h *histSample) UnmarshalJSON(b []byte) error {
	var raw [2]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return fmt.Errorf("histogram sample %.200s: %w", b, err)
	}
	var ts json.Number
	if err := json.Unmarshal(raw[0], &ts); err != nil {
		return fmt.Errorf("histogram sample %.200s: timestamp: %w", b, err)
	}
	sec, err := ts.Float64()
	if err != nil {
		return fmt.Errorf("histogram sample %.200s: timestamp: %w", b, err)
	}
	h.T = int64(math.Round(sec * 1000))
	var body struct {
		Count   string              `json:"count"`
		Sum     string              `json:"sum"`
		Buckets [][]json.RawMessage `json:"buckets"`
	}
	if err := json.Unmarshal(raw[1], &body); err != nil {
		return fmt.Errorf("histogram sample %.200s: %w", b, err)
	}
	if h.Count, err = strconv.ParseFloat(body.Count, 64); err != nil {
		return fmt.Errorf("histogram sample %.200s: count: %w", b, err)
	}
	if h.Sum, err = strconv.ParseFloat(body.Sum, 64); err != nil {
		return fmt.Errorf("histogram sample %.200s: sum: %w", b, err)
	}
	h.Buckets = nil
	for _, rb := range body.Buckets {
		if len(rb) != 4 {
			return fmt.Errorf("histogram sample %.200s: bucket of %d elements", b, len(rb))
		}
		var bk histBucket
		if err := json.Unmarshal(rb[0], &bk.Rule); err != nil {
			return fmt.Errorf("histogram sample %.200s: bucket rule: %w", b, err)
		}
		for i, dst := range []*float64{&bk.Lower, &bk.Upper, &bk.Count} {
			var s string
			if err := json.Unmarshal(rb[i+1], &s); err != nil {
				return fmt.Errorf("histogram sample %.200s: bucket: %w", b, err)
			}
			if *dst, err = strconv.ParseFloat(s, 64); err != nil {
				return fmt.Errorf("histogram sample %.200s: bucket: %w", b, err)
			}
		}
		h.Buckets = append(h.Buckets, bk)
	}
	return nil
}

func (h histSample) String() string {
	return fmt.Sprintf("%d: count %v sum %v %v", h.T, h.Count, h.Sum, h.Buckets)
}

// sameHist says whether two rendered samples are the same, bit for bit.
func sameHist(a, b histSample) bool {
	bits := math.Float64bits
	if a.T != b.T || bits(a.Count) != bits(b.Count) || bits(a.Sum) != bits(b.Sum) || len(a.Buckets) != len(b.Buckets) {
		return false
	}
	for i, x := range a.Buckets {
		y := b.Buckets[i]
		if x.Rule != y.Rule || bits(x.Lower) != bits(y.Lower) || bits(x.Upper) != bits(y.Upper) || bits(x.Count) != bits(y.Count) {
			return false
		}
	}
	return true
}

// diffHistograms lists the differences between two reads of raw histogram samples (at most
// limit lines).
func diffHistograms(want, got rawHistograms, limit int) []string {
	var d []string
	add := func(format string, args ...any) {
		if len(d) < limit {
			d = append(d, fmt.Sprintf(format, args...))
		} else if len(d) == limit {
			d = append(d, "...")
		}
	}
	for _, k := range sortedKeys(want) {
		g, ok := got[k]
		if !ok {
			add("missing series %s (%d histogram samples)", k, len(want[k]))
			continue
		}
		w := want[k]
		for i := 0; i < max(len(w), len(g)); i++ {
			switch {
			case i >= len(g):
				add("%s: missing %d histogram samples from %v", k, len(w)-i, w[i])
			case i >= len(w):
				add("%s: %d extra histogram samples from %v", k, len(g)-i, g[i])
			case !sameHist(w[i], g[i]):
				add("%s: histogram sample %d is %v, want %v", k, i, g[i], w[i])
			default:
				continue
			}
			break
		}
	}
	for _, k := range sortedKeys(got) {
		if _, ok := want[k]; !ok {
			add("extra series %s (%d histogram samples)", k, len(got[k]))
		}
	}
	return d
}

// maxRelDiff is the largest relative difference between the values two answers have at the
// same series and time (NaN and infinite values left out).
func maxRelDiff(a, b promrun.Matrix) float64 {
	at := map[string]map[int64]float64{}
	for _, s := range a {
		m := map[int64]float64{}
		for _, p := range s.Values {
			m[p.T] = p.V
		}
		at[s.Metric.String()] = m
	}
	worst := 0.0
	for _, s := range b {
		for _, p := range s.Values {
			v, ok := at[s.Metric.String()][p.T]
			if !ok || !finiteValue(v) || !finiteValue(p.V) || v == p.V {
				continue
			}
			worst = max(worst, math.Abs(v-p.V)/math.Max(math.Abs(v), math.Abs(p.V)))
		}
	}
	return worst
}

func finiteValue(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// writtenSamples counts the samples a server stored by remote write, histogram samples
// included.
func writtenSamples(ws remote.WriteStats) uint64 { return ws.SamplesWritten + ws.HistogramsWritten }

// rejectedSamples counts the samples a server refused as invalid, histogram samples
// included.
func rejectedSamples(ws remote.WriteStats) uint64 { return ws.SamplesRejected + ws.HistogramsRejected }

// TestHistLogInterpolated checks the conversion of Prometheus 2.42's histogram_quantile
// answers (linear within the bucket: its code, copied in quantile242) into Prometheus 3's
// (promql.HistogramQuantile), on random histograms with negative, zero and positive buckets.
func TestHistLogInterpolated(t *testing.T) {
	rnd := mrand.New(mrand.NewPCG(7, 8))
	converted := 0
	for range 200 {
		schema := int32(rnd.IntN(9) - 1)
		zt := 1e-12 // below every bucket, as a real histogram's zero threshold is
		h := &histogram.FloatHistogram{Schema: schema, ZeroThreshold: zt, ZeroCount: float64(rnd.IntN(3)),
			PositiveSpans: []histogram.Span{{Offset: int32(rnd.IntN(20) - 10), Length: 6}, {Offset: 3, Length: 4}},
			NegativeSpans: []histogram.Span{{Offset: int32(rnd.IntN(20) - 10), Length: 3}}}
		for range 10 {
			h.PositiveBuckets = append(h.PositiveBuckets, float64(rnd.IntN(50)))
		}
		for range 3 {
			h.NegativeBuckets = append(h.NegativeBuckets, float64(rnd.IntN(5)))
		}
		h.Count = h.ZeroCount
		for _, c := range append(slices.Clone(h.PositiveBuckets), h.NegativeBuckets...) {
			h.Count += c
		}
		h.Sum = 1 // not NaN: no NaN observations
		for _, q := range []float64{0.01, 0.1, 0.25, 0.5, 0.9, 0.99} {
			old := quantile242(q, h)
			want, _ := promql.HistogramQuantile(q, h, "", posrange.PositionRange{})
			got := histLogInterpolated(old, schema, zt)
			if !sameValue(want, got, 1e-9) {
				t.Fatalf("schema %d q %g: 2.42 answered %v, converted %v, Prometheus 3 answers %v (%v)", schema, q, old, got, want, h)
			}
			if old != got {
				converted++
			}
		}
	}
	if converted == 0 {
		t.Error("no answer needed converting: the test shows nothing")
	}
}

// quantile242 is histogram_quantile of a native histogram in Prometheus 2.42
// (promql/quantile.go at v2.42.0, for histograms without NaN observations).
func quantile242(q float64, h *histogram.FloatHistogram) float64 {
	if q < 0 {
		return math.Inf(-1)
	}
	if q > 1 {
		return math.Inf(+1)
	}
	if h.Count == 0 || math.IsNaN(q) {
		return math.NaN()
	}
	var (
		bucket histogram.Bucket[float64]
		count  float64
		it     = h.AllBucketIterator()
		rank   = q * h.Count
	)
	for it.Next() {
		bucket = it.At()
		count += bucket.Count
		if count >= rank {
			break
		}
	}
	if bucket.Lower < 0 && bucket.Upper > 0 {
		if len(h.NegativeBuckets) == 0 && len(h.PositiveBuckets) > 0 {
			bucket.Lower = 0
		} else if len(h.PositiveBuckets) == 0 && len(h.NegativeBuckets) > 0 {
			bucket.Upper = 0
		}
	}
	if count > h.Count {
		count = h.Count
	}
	if count < rank {
		return bucket.Upper
	}
	rank -= count - bucket.Count
	return bucket.Lower + (bucket.Upper-bucket.Lower)*(rank/bucket.Count)
}

// floatHistogram rebuilds the sample as a float histogram of schema from its rendered
// buckets (which give their bounds, hence their indexes); the zero threshold is the zero
// bucket's, or zt if it is empty (not rendered).
func (h histSample) floatHistogram(schema int32, zt float64) (*histogram.FloatHistogram, error) {
	fh := &histogram.FloatHistogram{Schema: schema, ZeroThreshold: zt, Count: h.Count, Sum: h.Sum}
	per := math.Exp2(float64(schema))
	type idxCount struct {
		idx   int32
		count float64
	}
	var pos, neg []idxCount
	for _, b := range h.Buckets {
		switch {
		case b.Rule == 3 && b.Lower < 0 && b.Upper > 0:
			fh.ZeroThreshold, fh.ZeroCount = b.Upper, b.Count
		case b.Rule == 0 && b.Lower >= 0:
			pos = append(pos, idxCount{int32(math.Round(math.Log2(b.Upper) * per)), b.Count})
		case b.Rule == 1 && b.Upper <= 0:
			neg = append(neg, idxCount{int32(math.Round(math.Log2(-b.Lower) * per)), b.Count})
		default:
			return nil, fmt.Errorf("bucket %+v of an exponential histogram", b)
		}
	}
	build := func(bs []idxCount) ([]histogram.Span, []float64) {
		slices.SortFunc(bs, func(a, b idxCount) int { return int(a.idx - b.idx) })
		var spans []histogram.Span
		var counts []float64
		next := int32(0)
		for i, b := range bs {
			if i == 0 || b.idx != next {
				off := b.idx
				if i > 0 {
					off = b.idx - next
				}
				spans = append(spans, histogram.Span{Offset: off, Length: 0})
			}
			spans[len(spans)-1].Length++
			counts = append(counts, b.count)
			next = b.idx + 1
		}
		return spans, counts
	}
	fh.PositiveSpans, fh.PositiveBuckets = build(pos)
	fh.NegativeSpans, fh.NegativeBuckets = build(neg)
	if err := fh.Validate(); err != nil {
		return nil, fmt.Errorf("rebuilt %v: %w", fh, err)
	}
	return fh, nil
}

// newHistRefEngine is Prometheus 3's engine (see refEngine) over P1's raw histogram samples,
// and a staleness marker at stale[series] for those series.
func newHistRefEngine(t *testing.T, raw rawHistograms, schema int32, stale map[string]int64) *refEngine {
	t.Helper()
	var q refQueryable
	for k, ss := range raw {
		ls, err := parser.ParseMetric(k)
		if err != nil {
			t.Fatalf("series %s: %v", k, err)
		}
		samples := make([]chunks.Sample, len(ss))
		for i, s := range ss {
			fh, err := s.floatHistogram(schema, prometheus.DefNativeHistogramZeroThreshold)
			if err != nil {
				t.Fatalf("series %s: sample %v: %v", k, s, err)
			}
			samples[i] = histRefSample{t: s.T, fh: fh}
		}
		if at, ok := stale[k]; ok {
			if len(ss) > 0 && ss[len(ss)-1].T >= at {
				t.Fatalf("series %s: staleness marker at %d, not after the last sample %v", k, at, ss[len(ss)-1])
			}
			samples = append(samples, histRefSample{t: at, fh: &histogram.FloatHistogram{Schema: schema, Sum: math.Float64frombits(value.StaleNaN)}})
		}
		q = append(q, storage.NewListSeries(ls, samples))
	}
	slices.SortFunc(q, func(a, b storage.Series) int { return labels.Compare(a.Labels(), b.Labels()) })
	ref := newRefEngine(&rawSeries{})
	ref.q = q
	return ref
}

type histRefSample struct {
	t  int64
	fh *histogram.FloatHistogram
}

func (s histRefSample) T() int64                      { return s.t }
func (s histRefSample) F() float64                    { return 0 }
func (s histRefSample) H() *histogram.Histogram       { return nil }
func (s histRefSample) FH() *histogram.FloatHistogram { return s.fh }
func (s histRefSample) Type() chunkenc.ValueType      { return chunkenc.ValFloatHistogram }
func (s histRefSample) Copy() chunks.Sample           { return histRefSample{t: s.t, fh: s.fh.Copy()} }

// TestHistRebuild renders random histograms as the query API does (non-empty buckets with
// their boundary rules) and checks that floatHistogram rebuilds them.
func TestHistRebuild(t *testing.T) {
	rnd := mrand.New(mrand.NewPCG(9, 10))
	for range 100 {
		schema := int32(rnd.IntN(9) - 1)
		h := &histogram.FloatHistogram{Schema: schema, ZeroThreshold: 1e-12, ZeroCount: float64(rnd.IntN(2)), Sum: 3,
			PositiveSpans: []histogram.Span{{Offset: int32(rnd.IntN(20) - 10), Length: 4}, {Offset: int32(rnd.IntN(3)), Length: 3}},
			NegativeSpans: []histogram.Span{{Offset: int32(rnd.IntN(20) - 10), Length: 2}}}
		for range 7 {
			h.PositiveBuckets = append(h.PositiveBuckets, float64(rnd.IntN(3)))
		}
		h.NegativeBuckets = []float64{float64(rnd.IntN(3)), 1}
		h.Count = h.ZeroCount + 1
		for _, c := range append(slices.Clone(h.PositiveBuckets), h.NegativeBuckets[0]) {
			h.Count += c
		}
		s := histSample{T: 1, Count: h.Count, Sum: h.Sum}
		for it := h.AllBucketIterator(); it.Next(); {
			b := it.At()
			if b.Count == 0 {
				continue
			}
			rule := map[[2]bool]int{{false, true}: 0, {true, false}: 1, {false, false}: 2, {true, true}: 3}[[2]bool{b.LowerInclusive, b.UpperInclusive}]
			s.Buckets = append(s.Buckets, histBucket{Rule: rule, Lower: b.Lower, Upper: b.Upper, Count: b.Count})
		}
		got, err := s.floatHistogram(schema, 1e-12)
		if err != nil {
			t.Fatalf("%v: %v", h, err)
		}
		if want := h.Copy().Compact(0); !got.Equals(want) {
			t.Fatalf("rebuilt %v, want %v", got, want)
		}
	}
}
