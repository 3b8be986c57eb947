package tsdb

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/chunkenc"
	"github.com/seed71701133/tablets/internal/testkit/azurite"
)

// A Select from the raw cache takes the cached segments that lie whole in its range as the
// cache keeps them, encoded (raw.FloatRun), and decodes only those a staged point falls
// among, to merge it: the answer is every bit an uncached process' answer, a staged point
// between two cached ones and one replacing a cached one (the later write) included.
func TestSelectTakesCachedRunsWhole(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	ctx := context.Background()
	base := querierBase.Add(46 * time.Hour)
	now := base.Add(4 * time.Hour)
	k := newKeyRangeDB(t, "ru", now, base)
	k.reads.table = k.names.RawTable(k.names.PeriodOf(base))
	const points, every = 600, 15 * time.Second // 2.5 hours: five segments of the cache
	keys := []string{seriesOfLabel(t, k.DB, "dense_total", "000"), seriesOfLabel(t, k.DB, "dense_total", "001")}
	var all []SeriesPoints
	for j, key := range keys {
		pts := make([]tablets.Point, points)
		for i := range pts {
			pts[i] = tablets.Point{Time: base.Add(time.Duration(i) * every), Value: float64(j*1000+i) + 0.25}
		}
		all = append(all, SeriesPoints{Series: key, Points: pts})
	}
	require.NoError(t, k.WriteMany(ctx, all)) // 100 points or more a series: into the raw table directly

	db := k.open(t, true)
	q, err := db.Queryable(&QueryOptions{DisableTiers: true})
	require.NoError(t, err)
	// From inside the first segment to inside the last.
	from, to := base.Add(30*every), base.Add(560*every)
	first, _, reads := k.selectMetric(t, q, "dense_total", from, to)
	require.Positive(t, reads, "the first Select reads the table")
	require.Len(t, first["000"], 530)

	// Staged late writes: a point between two of 000's third segment (points 256 to 383),
	// and one replacing a point of 001's fourth (384 to 511).
	between, replaced := base.Add(300*every+7*time.Second), base.Add(450*every)
	require.NoError(t, k.WriteMany(ctx, []SeriesPoints{
		{Series: keys[0], Points: []tablets.Point{{Time: between, Value: -7}}},
		{Series: keys[1], Points: []tablets.Point{{Time: replaced, Value: -1}}},
	}))
	truthQ, err := k.open(t, false).Queryable(&QueryOptions{DisableTiers: true})
	require.NoError(t, err)
	truth, _, _ := k.selectMetric(t, truthQ, "dense_total", from, to)
	require.Len(t, truth["000"], 531, "the point between, added")
	require.Len(t, truth["001"], 530, "the point replaced")
	require.Contains(t, truth["001"], fmt.Sprintf("%d:-1", replaced.UnixMilli()))
	require.Contains(t, truth["000"], fmt.Sprintf("%d:-7", between.UnixMilli()))

	// The Series hold their floats in chunks: the cached segments taken whole (the entry's,
	// of 128 points from where the first Select began) and, where a staged point fell, the
	// segment decoded, merged and encoded again. Without runs, the Select's plain budget would
	// hold every point plain, in no chunk.
	k.reads.n.Store(0)
	type chunk struct{ n, first, last int }
	chunks := map[string][]chunk{}
	got := map[string][]string{}
	for s, err := range q.Querier(from, to).Select(ctx, nil, Matcher{Type: MatchEqual, Name: "__name__", Value: "dense_total"}) {
		require.NoError(t, err)
		for _, c := range s.chunks {
			n, first, last, err := chunkenc.Header(c)
			require.NoError(t, err)
			pointOf := func(ms uint64) int { return int(time.UnixMilli(int64(ms)).Sub(base) / every) }
			chunks[s.Labels.Get("i")] = append(chunks[s.Labels.Get("i")], chunk{n, pointOf(first), pointOf(last)})
		}
		for it := s.Iterator(); it.Next(); {
			x := it.At()
			got[s.Labels.Get("i")] = append(got[s.Labels.Get("i")], fmt.Sprintf("%d:%v", x.T, x.F))
		}
	}
	require.Zero(t, k.reads.n.Load(), "raw table queries of the cached Select")
	require.Equal(t, truth, got, "the cached Select's answer")
	segments := func(merged, n int) []chunk {
		out := []chunk{{128, 30, 157}, {128, 158, 285}, {128, 286, 413}, {128, 414, 541}, {18, 542, 559}}
		out[merged].n = n
		return out
	}
	require.Equal(t, map[string][]chunk{"000": segments(2, 129), "001": segments(3, 128)}, chunks, "the Series' chunks")
}

// BenchmarkSelectCachedRaw: a refreshed panel whose answer is not kept (a new panel, a rule,
// a remote read) over series the raw cache holds: a Select of 2,000 series over an hour
// at 15 s, from the raw cache (and the index cache), every sample iterated as the engine does. Per Select: the time
// a sample, and the account's requests (the change log and the staging listing only).
func BenchmarkSelectCachedRaw(b *testing.B) {
	ctx := context.Background()
	base := querierBase.Add(46 * time.Hour)
	now := base.Add(2 * time.Hour)
	k := newKeyRangeDB(b, "rb", now, base)
	const series, points, every = 2000, 480, 15 * time.Second
	var all []SeriesPoints
	for i := range series {
		key, err := k.SeriesOf(ctx, Labels{{Name: "__name__", Value: "bench_total"}, {Name: "i", Value: fmt.Sprintf("%04d", i)}})
		require.NoError(b, err)
		pts := make([]tablets.Point, points)
		for j := range pts {
			pts[j] = tablets.Point{Time: base.Add(time.Duration(j) * every), Value: float64(i*points + j*3)}
		}
		all = append(all, SeriesPoints{Series: key, Points: pts})
	}
	require.NoError(b, k.WriteMany(ctx, all))
	q, err := k.openCached(b).Queryable(&QueryOptions{DisableTiers: true})
	require.NoError(b, err)
	from, to := now.Add(-time.Hour-5*time.Minute), now // a 1-hour panel's rate over 5m
	read := func() (n int) {
		for s, err := range q.Querier(from, to).Select(ctx, nil, Matcher{Type: MatchEqual, Name: "__name__", Value: "bench_total"}) {
			require.NoError(b, err)
			for it := s.Iterator(); it.Next(); {
				n++
			}
		}
		return n
	}
	read() // fills the cache
	checker := k.reads.next.(*azurite.Checker)
	checker.Reset()
	samples := 0
	b.ResetTimer()
	for range b.N {
		samples += read()
	}
	b.StopTimer()
	st := checker.Stats()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(samples), "ns/sample")
	b.ReportMetric(float64(st.Requests)/float64(b.N), "account-requests/op")
	b.ReportMetric(float64(st.RequestBytes+st.ResponseBytes)/float64(b.N), "account-bytes/op")
}
