package remote

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/chunked"
	"github.com/seed71701133/tablets/internal/testkit/dbtest"
	"github.com/seed71701133/tablets/server/promstore"
	"github.com/seed71701133/tablets/tsdb"
)

// Native histograms through remote write 1.0 and 2.0 into a real database on Azurite, read
// back exactly (every kind, custom bounds, hints, staleness markers), next to float samples
// of the same series; an invalid histogram is a 400 and the rest is stored.
func TestIntegrationWriteHistogramsToDB(t *testing.T) {
	db, _, _ := dbtest.NewDB(t, &tsdb.Options{Layout: func(c *aztables.Client) (tablets.Store, error) { return chunked.New(c, nil) }})
	ctx := context.Background()
	h := newWrite(t, db, nil)
	base := time.Now().Add(-time.Hour).Truncate(time.Minute).UnixMilli()
	at := func(d int64, hist any) tablets.HistogramPoint { return hp(base+d, hist) }

	lat := []tablets.HistogramPoint{at(0, hInt), at(15_000, hMinSchema), at(30_000, hMaxSchema), at(45_000, hFloat),
		at(60_000, hCustom), at(75_000, hCustomFloat), at(90_000, hStale), at(105_000, hStaleFloat)}
	v1 := &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
		{Labels: v1Labels("__name__", "lat", "job", "api"), Histograms: toV1(lat[:4]...)},
		{Labels: v1Labels("__name__", "mixed"), Samples: []prompb.Sample{{Timestamp: base, Value: 1}}, Histograms: toV1(at(1, hCustom))},
	}}
	w := post(t, h, "", "snappy", encodeV1(t, v1))
	require.Equal(t, http.StatusNoContent, w.Code, w.Body.String())

	b := newV2()
	b.series(nil, "__name__", "lat", "job", "api").Histograms = toV2(lat[4:]...)
	b.series([]writev2.Sample{{Timestamp: base + 2, Value: 2}}, "__name__", "mixed").Histograms = toV2(at(3, hFloat))
	w = post(t, h, ctV2, "snappy", b.encode(t))
	require.Equal(t, http.StatusNoContent, w.Code, w.Body.String())
	assert.Equal(t, "1", w.Header().Get(HeaderSamplesWritten))
	assert.Equal(t, "5", w.Header().Get(HeaderHistogramsWritten))

	// Again: idempotent (what a retry does).
	require.Equal(t, http.StatusNoContent, post(t, h, "", "snappy", encodeV1(t, v1)).Code)

	// A bad histogram among good ones: 400, the good ones and the floats stored.
	bad := &tablets.Histogram{Schema: tablets.CustomBucketsSchema, Count: 1, PositiveSpans: []tablets.HistogramSpan{{Offset: 0, Length: 1}},
		PositiveBuckets: []int64{1}, CustomValues: []float64{2, 1}}
	b = newV2()
	b.series([]writev2.Sample{{Timestamp: base + 4, Value: 4}}, "__name__", "mixed").Histograms = toV2(at(5, bad), at(6, hInt))
	w = post(t, h, ctV2, "snappy", b.encode(t))
	require.Equal(t, http.StatusBadRequest, w.Code, w.Body.String())
	assert.Contains(t, w.Body.String(), "series mixed{}: histogram at")
	assert.Contains(t, w.Body.String(), "custom bounds are not strictly increasing")
	assert.Equal(t, "1", w.Header().Get(HeaderSamplesWritten))
	assert.Equal(t, "1", w.Header().Get(HeaderHistogramsWritten))

	from, to := time.UnixMilli(base-1000), time.UnixMilli(base+200_000)
	found := map[string]tsdb.SeriesInfo{}
	for s, err := range db.Select(ctx, from, to, tsdb.Matcher{Type: tsdb.MatchRegexp, Name: tsdb.MetricName, Value: "lat|mixed"}) {
		require.NoError(t, err)
		found[s.Labels.String()] = s
	}
	require.Len(t, found, 2)
	for name, want := range map[string][]tablets.HistogramPoint{
		`lat{job="api"}`: lat,
		`mixed{}`:        {at(1, hCustom), at(3, hFloat), at(6, hInt)},
	} {
		s, ok := found[name]
		require.True(t, ok, "series %s not found", name)
		assert.True(t, s.Histograms, "series %s: Select says it has histograms", name)
		requireSameHistograms(t, want, readHistograms(t, db, s.Series, from, to))
	}
	var floats []tablets.Point
	for p, err := range db.Query(ctx, found[`mixed{}`].Series, from, to) {
		require.NoError(t, err)
		floats = append(floats, p)
	}
	requireSamePoints(t, []tablets.Point{pt(base, 1), pt(base+2, 2), pt(base+4, 4)}, floats)
}

// Histograms older than the raw retention are a 400 naming them; the others are stored.
func TestIntegrationWriteHistogramsExpired(t *testing.T) {
	now := time.Date(2026, 3, 4, 12, 0, 0, 0, time.UTC)
	db, _, _ := dbtest.NewDB(t, &tsdb.Options{RawRetention: 24 * time.Hour, Now: func() time.Time { return now }})
	h := newWrite(t, db, nil)
	fresh, old := now.Add(-time.Hour).UnixMilli(), now.Add(-25*time.Hour).UnixMilli()
	b := newV2()
	b.series(nil, "__name__", "lat").Histograms = toV2(hp(old, hInt), hp(fresh, hCustom))
	w := post(t, h, ctV2, "snappy", b.encode(t))
	require.Equal(t, http.StatusBadRequest, w.Code, w.Body.String())
	assert.Equal(t, "1", w.Header().Get(HeaderHistogramsWritten))
	assert.Contains(t, w.Body.String(), "stored 0 of 0 float samples and 1 of 2 histogram samples; 1 histogram samples rejected: series lat{}: 1 histogram samples: ")
	assert.Contains(t, w.Body.String(), tsdb.ErrExpired.Error())
	st := h.Stats()
	assert.Equal(t, uint64(1), st.HistogramsRejected)
	assert.Equal(t, uint64(1), st.HistogramsWritten)
}

// Histograms written by remote write come back by remote read over the server's Queryable
// (promstore) exactly: SAMPLES with their custom bounds and hints, and streamed chunks that
// Prometheus' decoding reads into the same samples, floats of the same series between.
func TestIntegrationHistogramsRoundTrip(t *testing.T) {
	db, _, _ := dbtest.NewDB(t, &tsdb.Options{Layout: func(c *aztables.Client) (tablets.Store, error) { return chunked.New(c, nil) }})
	wh := newWrite(t, db, nil)
	q, err := promstore.New(db, nil)
	require.NoError(t, err)
	rh := newRead(t, q, nil)
	base := time.Now().Add(-time.Hour).Truncate(time.Minute).UnixMilli()
	at := func(d int64, hist any) tablets.HistogramPoint { return hp(base+d, hist) }
	hInt2 := withCount(hInt, func(h *tablets.Histogram) { h.Count, h.Sum, h.PositiveBuckets = 15, 130, []int64{2, 2, -1} })
	hCustom2 := withCount(hCustom, func(h *tablets.Histogram) { h.CustomValues = []float64{0.1, 0.5, 1, 10} })
	written := []tablets.HistogramPoint{at(0, hInt), at(15_000, hInt2), at(30_000, hMinSchema), at(45_000, hStale),
		at(60_000, hCustom), at(75_000, hCustom2), at(120_000, hFloat), at(135_000, hCustomFloat), at(150_000, hStaleFloat)}
	w := post(t, wh, "", "snappy", encodeV1(t, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{
		Labels:     v1Labels("__name__", "lat", "job", "api"),
		Samples:    []prompb.Sample{{Timestamp: base + 90_000, Value: 1.5}, {Timestamp: base + 105_000, Value: staleNaN}},
		Histograms: toV1(written...),
	}}}))
	require.Equal(t, http.StatusNoContent, w.Code, w.Body.String())

	var want []smp
	for i, p := range written {
		if i == 6 {
			want = append(want, fsmp(base+90_000, 1.5), fsmp(base+105_000, staleNaN))
		}
		if p.H != nil {
			want = append(want, hsmp(p.Time.UnixMilli(), p.H))
		} else {
			want = append(want, fhsmp(p.Time.UnixMilli(), p.FH))
		}
	}
	query := &prompb.Query{StartTimestampMs: base - 1000, EndTimestampMs: base + 200_000, Matchers: []*prompb.LabelMatcher{eq("__name__", "lat")}}

	w = postRead(t, rh, readRequest(t, &prompb.ReadRequest{Queries: []*prompb.Query{query}}))
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	data, err := snappy.Decode(nil, w.Body.Bytes())
	require.NoError(t, err)
	var resp prompb.ReadResponse
	require.NoError(t, resp.Unmarshal(data))
	require.Len(t, resp.Results, 1)
	require.Len(t, resp.Results[0].Timeseries, 1)
	requireSameSamplesOf(t, want, fromPromTimeSeries(resp.Results[0].Timeseries[0]), false)

	w = postRead(t, rh, readRequest(t, &prompb.ReadRequest{Queries: []*prompb.Query{query},
		AcceptedResponseTypes: []prompb.ReadRequest_ResponseType{prompb.ReadRequest_STREAMED_XOR_CHUNKS}}))
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	samples, chunksOf := decodeStreamed(t, w.Body.Bytes())
	require.Len(t, samples, 1)
	for key, got := range samples {
		requireSameSamplesOf(t, want, got, true)
		assert.Len(t, chunksOf[key], 7, "int, int | schema change, stale | custom | other bounds | floats | float | float custom, stale")
	}
}

// A remote write of float and histogram samples costs the transactions of one staging write:
// once its series are listed, one transaction for 200 float and 200 histogram series (100
// of them holding both), their entities sharing it. Both kinds read back.
func TestIntegrationWriteMixedOneStagingWrite(t *testing.T) {
	db, _, checker := dbtest.NewDB(t, &tsdb.Options{Layout: func(c *aztables.Client) (tablets.Store, error) { return chunked.New(c, nil) }})
	ctx := context.Background()
	h := newWrite(t, db, nil)
	base := time.Now().Add(-time.Minute).Truncate(time.Second).UnixMilli()
	request := func(scrape int64) []byte {
		b := newV2()
		for s := range 300 {
			name := []string{"__name__", "mixed_metric", "id", strconv.Itoa(s)}
			ts := b.series(nil, name...)
			if s < 200 {
				ts.Samples = []writev2.Sample{{Timestamp: base + scrape*15_000, Value: float64(s)}}
			}
			if s >= 100 {
				ts.Histograms = toV2(hp(base+scrape*15_000+1, hInt))
			}
		}
		return b.encode(t)
	}
	w := post(t, h, ctV2, "snappy", request(0))
	require.Equal(t, http.StatusNoContent, w.Code, w.Body.String())
	checker.Reset()
	w = post(t, h, ctV2, "snappy", request(1))
	require.Equal(t, http.StatusNoContent, w.Code, w.Body.String())
	assert.Equal(t, "200", w.Header().Get(HeaderSamplesWritten))
	assert.Equal(t, "200", w.Header().Get(HeaderHistogramsWritten))
	st := checker.Stats()
	t.Logf("second request: %d requests, %d transactions, %d bytes", st.Requests, st.Batches, st.RequestBytes)
	require.Equal(t, int64(2), st.Requests, "one staging transaction for both kinds, and the staging mark after it")
	require.Equal(t, int64(1), st.Batches)

	from, to := time.UnixMilli(base-1000), time.UnixMilli(base+60_000)
	n := 0
	for s, err := range db.Select(ctx, from, to, tsdb.Matcher{Type: tsdb.MatchEqual, Name: tsdb.MetricName, Value: "mixed_metric"}) {
		require.NoError(t, err)
		id, err := strconv.Atoi(s.Labels.Get("id"))
		require.NoError(t, err)
		assert.Equal(t, id >= 100, s.Histograms, "series %d flagged", id)
		var floats []tablets.Point
		for p, err := range db.Query(ctx, s.Series, from, to) {
			require.NoError(t, err)
			floats = append(floats, p)
		}
		hists := readHistograms(t, db, s.Series, from, to)
		if id < 200 {
			requireSamePoints(t, []tablets.Point{pt(base, float64(id)), pt(base+15_000, float64(id))}, floats)
		} else {
			assert.Empty(t, floats)
		}
		if id >= 100 {
			requireSameHistograms(t, []tablets.HistogramPoint{hp(base+1, hInt), hp(base+15_001, hInt)}, hists)
		} else {
			assert.Empty(t, hists)
		}
		n++
	}
	require.Equal(t, 300, n)
}

// readHistograms reads the histogram samples of series in [from, to) with a Querier's Read of
// histograms, oldest first.
func readHistograms(t *testing.T, db *tsdb.DB, series string, from, to time.Time) []tablets.HistogramPoint {
	t.Helper()
	q, err := db.Queryable(nil)
	require.NoError(t, err)
	var out []tablets.HistogramPoint
	for s, err := range q.Querier(from, to).Read(context.Background(), tsdb.HistogramSamples, series) {
		require.NoError(t, err)
		for it := s.Iterator(); it.Next(); {
			x := it.At()
			out = append(out, tablets.HistogramPoint{Time: time.UnixMilli(x.T).UTC(), H: x.H, FH: x.FH})
		}
	}
	return out
}
