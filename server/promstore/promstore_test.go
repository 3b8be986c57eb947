package promstore

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/testkit/tablefake"
	"github.com/seed71701133/tablets/tsdb"
)

// staleNaN is Prometheus' staleness marker.
const staleNaN = 0x7ff0000000000002

func TestNewValidates(t *testing.T) {
	_, err := New(nil, nil)
	require.ErrorIs(t, err, tablets.ErrInvalidOptions)
	svc, err := aztables.NewServiceClientWithNoCredential("http://127.0.0.1:10002/devstoreaccount1", &aztables.ClientOptions{
		ClientOptions: policy.ClientOptions{Transport: tablefake.New(), Retry: policy.RetryOptions{MaxRetries: -1}}})
	require.NoError(t, err)
	db, err := tsdb.Open(context.Background(), svc, "promstorenew", nil)
	require.NoError(t, err)
	for _, o := range []Options{{BatchSize: -1}, {Concurrency: -1}, {LookbackDelta: -1}, {MinTierStep: -1}, {RawBytesPerSample: -1}, {RawBytesPerSample: math.NaN()}, {RawBytesPerSample: math.Inf(1)}} {
		_, err := New(db, &o)
		require.ErrorIs(t, err, tablets.ErrInvalidOptions, "%+v", o)
	}
	q, err := New(db, nil)
	require.NoError(t, err)
	require.Equal(t, Options{LookbackDelta: DefaultLookbackDelta}, q.opts)
}

func TestTimeRange(t *testing.T) {
	from, to, ok := timeRange(1000, 1999)
	require.True(t, ok)
	require.Equal(t, time.UnixMilli(1000).UTC(), from)
	require.Equal(t, time.UnixMilli(2000).UTC(), to, "maxt is inclusive: to is maxt+1ms")

	from, to, ok = timeRange(5, 5)
	require.True(t, ok)
	require.Equal(t, time.Millisecond, to.Sub(from))

	_, _, ok = timeRange(6, 5)
	require.False(t, ok)

	// Prometheus' "all time": clamped to what tablets stores.
	from, to, ok = timeRange(math.MinInt64, math.MaxInt64)
	require.True(t, ok)
	require.Equal(t, tablets.MinTime, from)
	require.Equal(t, tablets.MaxTime, to)

	_, _, ok = timeRange(math.MinInt64, -1)
	require.False(t, ok, "before the epoch nothing is stored")
}

func TestMatcherConversion(t *testing.T) {
	for _, typ := range []labels.MatchType{labels.MatchEqual, labels.MatchNotEqual, labels.MatchRegexp, labels.MatchNotRegexp} {
		m := labels.MustNewMatcher(typ, "job", "a|b")
		tm, err := MatcherToTSDB(m)
		require.NoError(t, err)
		require.Equal(t, "job", tm.Name)
		require.Equal(t, "a|b", tm.Value)
		require.Equal(t, m.Type.String(), tm.Type.String(), "same operator")
		back, err := MatcherFromTSDB(tm)
		require.NoError(t, err)
		require.Equal(t, m.String(), back.String())
	}
	_, err := MatcherToTSDB(&labels.Matcher{Type: labels.MatchType(9), Name: "a"})
	require.ErrorIs(t, err, tablets.ErrInvalidMatcher)
	_, err = MatcherFromTSDB(tsdb.Matcher{Type: tsdb.MatchType(9), Name: "a"})
	require.ErrorIs(t, err, tablets.ErrInvalidMatcher)
}

func TestLabelsConversion(t *testing.T) {
	ls := labels.FromStrings("__name__", "up", "job", "a", "zone", "z\n\"1\"")
	tl := LabelsToTSDB(ls)
	require.Equal(t, tsdb.LabelsFromStrings("__name__", "up", "job", "a", "zone", "z\n\"1\""), tl)
	require.NoError(t, tl.Validate())
	require.True(t, labels.Equal(ls, LabelsFromTSDB(tl)))
}

func TestSelective(t *testing.T) {
	require.False(t, selective(nil))
	require.False(t, selective([]*labels.Matcher{labels.MustNewMatcher(labels.MatchRegexp, "a", ".*"), labels.MustNewMatcher(labels.MatchEqual, "b", "")}))
	require.True(t, selective([]*labels.Matcher{labels.MustNewMatcher(labels.MatchRegexp, "a", ".*"), labels.MustNewMatcher(labels.MatchRegexp, "b", ".+")}))
	require.True(t, selective([]*labels.Matcher{labels.MustNewMatcher(labels.MatchNotEqual, "a", "")}))
}

// samplesOf reads an iterator's samples as (time, float bits) pairs.
func samplesOf(t *testing.T, it chunkenc.Iterator) [][2]int64 {
	t.Helper()
	var out [][2]int64
	for it.Next() == chunkenc.ValFloat {
		ts, v := it.At()
		require.Equal(t, ts, it.AtT())
		out = append(out, [2]int64{ts, int64(math.Float64bits(v))})
	}
	require.NoError(t, it.Err())
	return out
}

func TestMemSeries(t *testing.T) {
	s := &memSeries{}
	s.append(1, 1)
	s.append(2, math.Float64frombits(staleNaN))
	s.append(2, 5) // same millisecond: the later point wins
	s.append(3, math.Float64frombits(staleNaN))
	s.append(3, math.Inf(-1))
	s.append(3, math.Float64frombits(staleNaN))
	s.append(1, 9) // out of order: dropped
	s.flush()
	require.Equal(t, 3, s.n)
	require.Equal(t, [][2]int64{
		{1, int64(math.Float64bits(1))},
		{2, int64(math.Float64bits(5))},
		{3, staleNaN},
	}, samplesOf(t, s.Iterator(nil)))
}

func TestMemSeriesManyChunks(t *testing.T) {
	s := &memSeries{}
	n := 2*maxChunkSamples + 10
	for i := range n {
		s.append(int64(i)*10, float64(i)*0.5)
	}
	s.flush()
	require.Len(t, s.chunks, 3)
	got := samplesOf(t, s.Iterator(nil))
	require.Len(t, got, n)
	for i, g := range got {
		require.Equal(t, [2]int64{int64(i) * 10, int64(math.Float64bits(float64(i) * 0.5))}, g)
	}
	it := s.Iterator(nil)
	require.Equal(t, chunkenc.ValFloat, it.Seek(int64(maxChunkSamples)*10+5))
	ts, v := it.At()
	require.Equal(t, int64(maxChunkSamples+1)*10, ts)
	require.Equal(t, float64(maxChunkSamples+1)*0.5, v)
	require.Equal(t, chunkenc.ValNone, it.Seek(int64(n)*10))
}
