package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/testkit/azurite"
	"github.com/seed71701133/tablets/server"
)

// Two servers on one database: A answers a panel with a results cache, B writes. After B
// writes a late sample into the range A cached (staged), then 100 (into the raw table
// directly), then deletes a range of a series, A's answer is each time a fresh server's
// (without a results cache), not the one it gave before. A's refresh of the panel reads the
// samples of its fresh steps only, and about the requests of a server without the cache
// (whose raw chunks hold hours: the bytes are the same).
func TestResultsCacheTwoServers(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	ctx := context.Background()
	f := newSharedDB(t, "res", `max_over_time(m{k=~"a|b|1.*"}[2m])`)
	cache := server.NewResultsCache(16 << 20)
	a := f.serve(cache, false)
	b := f.serve(nil, false)
	f.write(b.DB()) // B writes
	now, keys, checker := f.now, f.keys, f.checker
	ask := func(s *server.Server) string {
		t.Helper()
		answer, _ := f.ask(s)
		return answer
	}
	// fresh is the answer of a server just started, without a results cache.
	fresh := func() string { return ask(f.serve(nil, false)) }

	first := ask(a)
	require.Equal(t, fresh(), first)
	refresh := func(s *server.Server) (samples uint64, cost azurite.Stats) {
		before := s.Queryable().Stats().Samples
		checker.Reset()
		require.Equal(t, first, ask(s), "the refresh answers as the first time")
		return s.Queryable().Stats().Samples - before, checker.Stats()
	}
	cachedSamples, cached := refresh(a)
	c := f.serve(nil, false)
	ask(c) // its first answer
	uncachedSamples, uncached := refresh(c)
	t.Logf("refresh: with the results cache %d samples read, %d requests, %d bytes; without %d samples, %d requests, %d bytes",
		cachedSamples, cached.Requests, cached.RequestBytes+cached.ResponseBytes, uncachedSamples, uncached.Requests, uncached.RequestBytes+uncached.ResponseBytes)
	// The refresh computes the steps after the last one before the previous horizon: it
	// reads their samples (7 of the 120 minutes, and the 2m range before) and a mark.
	require.Less(t, 10*cachedSamples, uncachedSamples, "the refresh reads the samples of the fresh steps only")
	// A raw chunk holds hours of a series: reading minutes of it reads it all. The mark is
	// a listing and a change log a period.
	require.LessOrEqual(t, cached.Requests, uncached.Requests+3)
	require.Equal(t, uint64(1), cache.Stats().Hits)

	// B writes a late sample an hour and a half back, far before the freshness horizon.
	late := now.Add(-90*time.Minute + 7*time.Second)
	require.NoError(t, b.DB().Write(ctx, keys["a"], tablets.Point{Time: late, Value: 1e6}))
	afterWrite := ask(a)
	require.NotEqual(t, first, afterWrite, "the late sample shows")
	require.Equal(t, fresh(), afterWrite)
	require.Equal(t, afterWrite, ask(a), "cached again")

	// B writes 100 samples into the raw table directly (an Appender stages fewer).
	var pts []tablets.Point
	for i := range 100 {
		pts = append(pts, tablets.Point{Time: now.Add(-110*time.Minute + time.Duration(i)*15*time.Second), Value: -float64(i)})
	}
	require.NoError(t, b.DB().Write(ctx, keys["a"], pts...))
	afterDirect := ask(a)
	require.NotEqual(t, afterWrite, afterDirect, "the samples written directly show")
	require.Equal(t, fresh(), afterDirect)
	afterWrite = afterDirect

	// B deletes twenty minutes of series b.
	require.NoError(t, b.DB().Delete(ctx, keys["b"], now.Add(-80*time.Minute), now.Add(-60*time.Minute)))
	afterDelete := ask(a)
	require.NotEqual(t, afterWrite, afterDelete, "the deletion shows")
	require.Equal(t, fresh(), afterDelete)
	st := cache.Stats()
	require.Equal(t, uint64(2), st.Hits, "the refresh and the answer after the write")
	require.Equal(t, uint64(4), st.Misses, "the first answer, after each write, after the delete")

	// A server an hour ahead folds every staged sample into the raw tables: A's answer
	// stands, from the cache (its listing knew the entities the fold moved).
	folder := f.open(func() time.Time { return time.Now().Add(time.Hour) })
	folded, err := folder.Fold(ctx)
	require.NoError(t, err)
	require.Positive(t, folded.Points)
	require.Equal(t, afterDelete, ask(a), "the fold changes no answer")
	require.Equal(t, uint64(3), cache.Stats().Hits, "the answer after the fold, from the cache")

	// B stages a late sample, which is folded before A asks again: it shows.
	require.NoError(t, b.DB().Write(ctx, keys["a"], tablets.Point{Time: now.Add(-70*time.Minute + 7*time.Second), Value: 2e6}))
	_, err = folder.Fold(ctx)
	require.NoError(t, err)
	afterFold := ask(a)
	require.NotEqual(t, afterDelete, afterFold, "the sample folded since shows")
	require.Equal(t, fresh(), afterFold)
	require.Equal(t, uint64(5), cache.Stats().Misses)
}
