package remote

import (
	"context"
	"math"
	"net/http"
	"slices"
	"testing"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/prompb"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/util/annotations"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/server/promconv"
)

// smp is a sample of any kind, for storage.NewListSeries.
type smp struct {
	t  int64
	f  float64
	h  *histogram.Histogram
	fh *histogram.FloatHistogram
}

func (s smp) T() int64                      { return s.t }
func (s smp) F() float64                    { return s.f }
func (s smp) H() *histogram.Histogram       { return s.h }
func (s smp) FH() *histogram.FloatHistogram { return s.fh }
func (s smp) Type() chunkenc.ValueType {
	switch {
	case s.h != nil:
		return chunkenc.ValHistogram
	case s.fh != nil:
		return chunkenc.ValFloatHistogram
	}
	return chunkenc.ValFloat
}
func (s smp) Copy() chunks.Sample {
	c := s
	if s.h != nil {
		c.h = s.h.Copy()
	}
	if s.fh != nil {
		c.fh = s.fh.Copy()
	}
	return c
}

func fsmp(t int64, v float64) smp                  { return smp{t: t, f: v} }
func hsmp(t int64, h *tablets.Histogram) smp       { return smp{t: t, h: promconv.ToProm(h)} }
func fhsmp(t int64, h *tablets.FloatHistogram) smp { return smp{t: t, fh: promconv.FloatToProm(h)} }
func withCount(h *tablets.Histogram, f func(*tablets.Histogram)) *tablets.Histogram {
	c := *h
	f(&c)
	return &c
}

// listQueryable is a storage.Queryable over series of any kind of samples, in memory,
// sorted by labels when asked to.
type listQueryable struct {
	series map[string][]chunks.Sample // by labels' String, {a="b", ...}
	lsets  map[string]labels.Labels
}

func newListQueryable() *listQueryable {
	return &listQueryable{series: map[string][]chunks.Sample{}, lsets: map[string]labels.Labels{}}
}

func (q *listQueryable) add(lset labels.Labels, samples ...smp) {
	for _, s := range samples {
		q.series[lset.String()] = append(q.series[lset.String()], s)
	}
	q.lsets[lset.String()] = lset
}

func (q *listQueryable) Querier(mint, maxt int64) (storage.Querier, error) {
	return &listQuerier{q, mint, maxt}, nil
}

type listQuerier struct {
	q          *listQueryable
	mint, maxt int64
}

func (l *listQuerier) Select(_ context.Context, _ bool, _ *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
	var out []storage.Series
	for key, lset := range l.q.lsets {
		ok := true
		for _, m := range ms {
			ok = ok && m.Matches(lset.Get(m.Name))
		}
		if !ok {
			continue
		}
		var in []chunks.Sample
		for _, s := range l.q.series[key] {
			if s.T() >= l.mint && s.T() <= l.maxt {
				in = append(in, s)
			}
		}
		out = append(out, storage.NewListSeries(lset, in))
	}
	// Always sorted: remote read asks for it.
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if labels.Compare(out[j].Labels(), out[i].Labels()) < 0 {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return &memSet{series: out, i: -1}
}

func (l *listQuerier) LabelValues(context.Context, string, *storage.LabelHints, ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	return nil, nil, nil
}

func (l *listQuerier) LabelNames(context.Context, *storage.LabelHints, ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	return nil, nil, nil
}

func (l *listQuerier) Close() error { return nil }

var (
	latLabels   = labels.FromStrings("__name__", "lat", "job", "a")
	mixedLabels = labels.FromStrings("__name__", "mixed")
	manyLabels  = labels.FromStrings("__name__", "many")
)

// histStore holds: lat, integer histograms through a schema change, a staleness marker,
// custom buckets and a change of their bounds, then float samples, then float histograms
// (custom ones too); mixed, switching kinds back and forth; many, 250 histograms of one
// layout (chunks of 120 samples), one with a counter reset.
func histStore() *listQueryable {
	q := newListQueryable()
	hInt2 := withCount(hInt, func(h *tablets.Histogram) { h.Count, h.Sum, h.PositiveBuckets = 15, 130, []int64{2, 2, -1} })
	hCustom2 := withCount(hCustom, func(h *tablets.Histogram) { h.CustomValues = []float64{0.1, 0.5, 1, 10} })
	q.add(latLabels,
		hsmp(1000, hInt), hsmp(2000, hInt2), hsmp(3000, hMinSchema), hsmp(4000, hStale), hsmp(5000, hCustom), hsmp(6000, hCustom2),
		fsmp(7000, 1.5), fsmp(8000, math.Float64frombits(value.StaleNaN)),
		fhsmp(9000, hFloat), fhsmp(10000, hCustomFloat), fhsmp(11000, hStaleFloat))
	q.add(mixedLabels, fsmp(1000, 1), hsmp(2000, hCustom), fsmp(3000, 2), fhsmp(4000, hCustomFloat), hsmp(5000, hCustom))
	for i := range 250 {
		n := uint64(i)
		if i >= 200 {
			n = uint64(i - 200) // a counter reset at 200
		}
		q.add(manyLabels, hsmp(int64(i)*15_000, &tablets.Histogram{Schema: 1, Count: 3 * n, Sum: float64(n),
			PositiveSpans: []tablets.HistogramSpan{{Offset: 0, Length: 2}}, PositiveBuckets: []int64{int64(n), int64(n)}, ZeroCount: n}))
	}
	return q
}

// samplesOf iterates a series (any kinds) into smp values, histograms copied.
func samplesOf(t testing.TB, it chunkenc.Iterator) []smp {
	t.Helper()
	var out []smp
	for vt := it.Next(); vt != chunkenc.ValNone; vt = it.Next() {
		switch vt {
		case chunkenc.ValFloat:
			ts, v := it.At()
			out = append(out, fsmp(ts, v))
		case chunkenc.ValHistogram:
			ts, h := it.AtHistogram(nil)
			out = append(out, smp{t: ts, h: h.Copy()})
		case chunkenc.ValFloatHistogram:
			ts, h := it.AtFloatHistogram(nil)
			out = append(out, smp{t: ts, fh: h.Copy()})
		}
	}
	require.NoError(t, it.Err())
	return out
}

// requireSameSamplesOf compares samples of any kind: floats bit for bit, histograms field
// for field (histogram.Equals: Sum bit for bit) with their custom bounds and counter reset
// hint; with chunked, as Prometheus reads them back from chunks (empty buckets a recoding
// added compacted away, and the counter reset hint, which a chunk keeps for its first
// sample only, left out).
func requireSameSamplesOf(t testing.TB, want, got []smp, chunked bool) {
	t.Helper()
	require.Len(t, got, len(want))
	for i := range want {
		w, g := want[i], got[i]
		require.Equal(t, w.t, g.t, "sample %d", i)
		require.Equal(t, w.Type(), g.Type(), "sample %d at %d", i, w.t)
		switch w.Type() {
		case chunkenc.ValFloat:
			require.Equal(t, math.Float64bits(w.f), math.Float64bits(g.f), "sample %d at %d", i, w.t)
		case chunkenc.ValHistogram:
			wh, gh := w.h.Copy(), g.h.Copy()
			require.True(t, slices.Equal(wh.CustomValues, gh.CustomValues), "sample %d at %d: custom bounds %v, want %v", i, w.t, gh.CustomValues, wh.CustomValues)
			if chunked {
				wh, gh = wh.Compact(0), gh.Compact(0)
			} else {
				require.Equal(t, wh.CounterResetHint, gh.CounterResetHint, "sample %d at %d: counter reset hint", i, w.t)
			}
			require.True(t, wh.Equals(gh), "sample %d at %d: %v, want %v", i, w.t, gh, wh)
		case chunkenc.ValFloatHistogram:
			wh, gh := w.fh.Copy(), g.fh.Copy()
			require.True(t, slices.Equal(wh.CustomValues, gh.CustomValues), "sample %d at %d: custom bounds %v, want %v", i, w.t, gh.CustomValues, wh.CustomValues)
			if chunked {
				wh, gh = wh.Compact(0), gh.Compact(0)
			} else {
				require.Equal(t, wh.CounterResetHint, gh.CounterResetHint, "sample %d at %d: counter reset hint", i, w.t)
			}
			require.True(t, wh.Equals(gh), "sample %d at %d: %v, want %v", i, w.t, gh, wh)
		}
	}
}

func (q *listQueryable) want(lset labels.Labels, mint, maxt int64) []smp {
	var out []smp
	for _, s := range q.series[lset.String()] {
		if s.T() >= mint && s.T() <= maxt {
			out = append(out, s.(smp))
		}
	}
	return out
}

// TestReadHistogramsSamples: a SAMPLES answer holds the histograms in TimeSeries.Histograms,
// exactly (counter reset hints and custom bounds included), as Prometheus' own decoding
// (remote.FromQueryResult: prompb.Histogram's ToIntHistogram and ToFloatHistogram) reads
// them.
func TestReadHistogramsSamples(t *testing.T) {
	store := histStore()
	h := newRead(t, store, nil)
	req := &prompb.ReadRequest{Queries: []*prompb.Query{{StartTimestampMs: 0, EndTimestampMs: 10_000,
		Matchers: []*prompb.LabelMatcher{{Type: prompb.LabelMatcher_RE, Name: "__name__", Value: "lat|mixed"}}}}}
	w := postRead(t, h, readRequest(t, req))
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	data, err := snappy.Decode(nil, w.Body.Bytes())
	require.NoError(t, err)
	var resp prompb.ReadResponse
	require.NoError(t, resp.Unmarshal(data))
	require.Len(t, resp.Results, 1)
	ts := resp.Results[0].Timeseries
	require.Len(t, ts, 2)
	// Custom bounds are in the protobuf (prompb.FromIntHistogram alone leaves them out).
	assert.Equal(t, []float64{0.1, 0.5, 1, 5}, ts[0].Histograms[4].CustomValues)
	assert.Equal(t, []float64{-1, 2}, ts[0].Histograms[7].CustomValues)
	assert.Len(t, ts[0].Histograms, 8)
	assert.Len(t, ts[0].Samples, 2)

	for i, lset := range []labels.Labels{latLabels, mixedLabels} {
		require.Equal(t, lset, labelsOfProm(ts[i].Labels))
		requireSameSamplesOf(t, store.want(lset, 0, 10_000), fromPromTimeSeries(ts[i]), false)
	}
	assert.Equal(t, uint64(10+5), h.Stats().SamplesSent)
}

// fromPromTimeSeries is what Prometheus' remote-read client (remote.FromQueryResult) makes
// of a SAMPLES answer's series: its samples and histograms, merged by time.
func fromPromTimeSeries(ts *prompb.TimeSeries) []smp {
	var out []smp
	fi, hi := 0, 0
	for fi < len(ts.Samples) || hi < len(ts.Histograms) {
		if hi == len(ts.Histograms) || fi < len(ts.Samples) && ts.Samples[fi].Timestamp < ts.Histograms[hi].Timestamp {
			out = append(out, fsmp(ts.Samples[fi].Timestamp, ts.Samples[fi].Value))
			fi++
			continue
		}
		h := ts.Histograms[hi]
		if h.IsFloatHistogram() {
			out = append(out, smp{t: h.Timestamp, fh: h.ToFloatHistogram()})
		} else {
			out = append(out, smp{t: h.Timestamp, h: h.ToIntHistogram()})
		}
		hi++
	}
	return out
}

// decodeStreamed reads a streamed answer as Prometheus' remote-read client does
// (remote.NewChunkedSeriesSet): frames (CRC checked), each chunk decoded by
// chunkenc.FromData with its type as the encoding; the samples of each series by labels.
func decodeStreamed(t testing.TB, body []byte) (map[string][]smp, map[string][]prompb.Chunk) {
	t.Helper()
	samples, chunksOf := map[string][]smp{}, map[string][]prompb.Chunk{}
	for _, f := range readFrames(t, body) {
		for _, cs := range f.ChunkedSeries {
			key := labelsOfProm(cs.Labels).String()
			for _, c := range cs.Chunks {
				chk, err := chunkenc.FromData(chunkenc.Encoding(c.Type), c.Data)
				require.NoError(t, err, "series %s", key)
				got := samplesOf(t, chk.Iterator(nil))
				require.NotEmpty(t, got)
				assert.Equal(t, c.MinTimeMs, got[0].t, "series %s: chunk MinTimeMs", key)
				assert.Equal(t, c.MaxTimeMs, got[len(got)-1].t, "series %s: chunk MaxTimeMs", key)
				samples[key] = append(samples[key], got...)
				chunksOf[key] = append(chunksOf[key], c)
			}
		}
	}
	return samples, chunksOf
}

// TestReadHistogramsStreamed: STREAMED_XOR_CHUNKS answers HISTOGRAM and FLOAT_HISTOGRAM
// chunks that Prometheus' decoding reads back into the samples stored, custom bounds
// included; the chunks are exactly those Prometheus' own encoder cuts
// (storage.NewSeriesToChunkEncoder), byte for byte: a run of one kind a chunk, at most 120
// samples, and a new chunk at a schema change, a bounds change or a counter reset.
func TestReadHistogramsStreamed(t *testing.T) {
	store := histStore()
	h := newRead(t, store, nil)
	w := postRead(t, h, readRequest(t, &prompb.ReadRequest{
		Queries:               []*prompb.Query{{StartTimestampMs: 0, EndTimestampMs: 1 << 40, Matchers: []*prompb.LabelMatcher{{Type: prompb.LabelMatcher_RE, Name: "__name__", Value: ".+"}}}},
		AcceptedResponseTypes: []prompb.ReadRequest_ResponseType{prompb.ReadRequest_STREAMED_XOR_CHUNKS},
	}))
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	samples, got := decodeStreamed(t, w.Body.Bytes())
	require.Len(t, samples, 3)
	for key, lset := range store.lsets {
		requireSameSamplesOf(t, store.want(lset, 0, 1<<40), samples[key], true)
	}
	// Custom bounds survive the chunks (the stale marker between has none).
	assert.Equal(t, []float64{0.1, 0.5, 1, 5}, samples[latLabels.String()][4].h.CustomValues)
	assert.Equal(t, []float64{0.1, 0.5, 1, 10}, samples[latLabels.String()][5].h.CustomValues)
	assert.Equal(t, []float64{-1, 2}, samples[latLabels.String()][9].fh.CustomValues)
	assert.Equal(t, uint64(11+5+250), h.Stats().SamplesSent)

	// The chunks themselves, against Prometheus' encoder's.
	wantTypes := map[string][]prompb.Chunk_Encoding{
		// hInt, hInt2 | schema change: hMinSchema, stale | custom: hCustom | other bounds:
		// hCustom2 | floats | float histograms: hFloat | custom bounds: hCustomFloat, stale
		latLabels.String(): {prompb.Chunk_HISTOGRAM, prompb.Chunk_HISTOGRAM, prompb.Chunk_HISTOGRAM, prompb.Chunk_HISTOGRAM,
			prompb.Chunk_XOR, prompb.Chunk_FLOAT_HISTOGRAM, prompb.Chunk_FLOAT_HISTOGRAM},
		mixedLabels.String(): {prompb.Chunk_XOR, prompb.Chunk_HISTOGRAM, prompb.Chunk_XOR, prompb.Chunk_FLOAT_HISTOGRAM, prompb.Chunk_HISTOGRAM},
		// 120, 80 (the counter reset), 50.
		manyLabels.String(): {prompb.Chunk_HISTOGRAM, prompb.Chunk_HISTOGRAM, prompb.Chunk_HISTOGRAM},
	}
	for key, lset := range store.lsets {
		var types []prompb.Chunk_Encoding
		for _, c := range got[key] {
			types = append(types, c.Type)
		}
		assert.Equal(t, wantTypes[key], types, "series %s", key)

		theirs := storage.NewSeriesToChunkEncoder(storage.NewListSeries(lset, store.series[key])).Iterator(nil)
		i := 0
		for theirs.Next() {
			m := theirs.At()
			require.Less(t, i, len(got[key]), "series %s: fewer chunks than Prometheus cuts", key)
			c := got[key][i]
			assert.Equal(t, chunkTypes[m.Chunk.Encoding()], c.Type, "series %s chunk %d", key, i)
			assert.Equal(t, m.MinTime, c.MinTimeMs, "series %s chunk %d", key, i)
			assert.Equal(t, m.MaxTime, c.MaxTimeMs, "series %s chunk %d", key, i)
			assert.Equal(t, m.Chunk.Bytes(), c.Data, "series %s chunk %d", key, i)
			i++
		}
		require.NoError(t, theirs.Err())
		assert.Len(t, got[key], i, "series %s", key)
	}
	var many []int
	for _, c := range got[manyLabels.String()] {
		chk, err := chunkenc.FromData(chunkenc.EncHistogram, c.Data)
		require.NoError(t, err)
		many = append(many, chk.NumSamples())
	}
	assert.Equal(t, []int{120, 80, 50}, many)
}

func labelsOfProm(ls []prompb.Label) labels.Labels {
	b := labels.NewScratchBuilder(len(ls))
	for _, l := range ls {
		b.Add(l.Name, l.Value)
	}
	return b.Labels()
}

// TestReadHistogramsLeavesTheStorageAlone: encoding chunks (whose appenders rewrite the
// spans of histograms they recode) does not change the samples the storage holds.
func TestReadHistogramsLeavesTheStorageAlone(t *testing.T) {
	q := newListQueryable()
	wide := &tablets.Histogram{Schema: 0, Count: 3, PositiveSpans: []tablets.HistogramSpan{{Offset: 0, Length: 3}}, PositiveBuckets: []int64{0, 1, 1}}
	narrow := &tablets.Histogram{Schema: 0, Count: 3, PositiveSpans: []tablets.HistogramSpan{{Offset: 1, Length: 2}}, PositiveBuckets: []int64{1, 1}}
	wider := &tablets.Histogram{Schema: 0, Count: 5, PositiveSpans: []tablets.HistogramSpan{{Offset: 0, Length: 3}}, PositiveBuckets: []int64{0, 2, 1}}
	q.add(latLabels, hsmp(1, wide), hsmp(2, narrow), hsmp(3, wider))
	before := q.want(latLabels, 0, 10)
	var copies []smp
	for _, s := range before {
		copies = append(copies, s.Copy().(smp))
	}
	var chunksOut []prompb.Chunk
	qr, err := q.Querier(0, 10)
	require.NoError(t, err)
	set := qr.Select(context.Background(), true, nil, labels.MustNewMatcher(labels.MatchEqual, "__name__", "lat"))
	require.True(t, set.Next())
	require.NoError(t, encodeChunks(set.At().Iterator(nil), func(c prompb.Chunk, _ int) error { chunksOut = append(chunksOut, c); return nil }))
	require.Len(t, chunksOut, 1, "a narrower layout fits the chunk (backward inserts)")
	requireSameSamplesOf(t, copies, q.want(latLabels, 0, 10), false)
}
