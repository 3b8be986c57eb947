package server_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/testkit/dbtest"
	"github.com/seed71701133/tablets/server"
	"github.com/seed71701133/tablets/server/api"
	"github.com/seed71701133/tablets/tsdb"
)

// Servers on one database keep their answers in it (api.Options.KeepAnswers): a server
// whose caches are empty answers a panel another server answered from the answer that
// server kept, reading the samples of the fresh steps only, where a server without it
// reads them all. A late point, a delete, samples written directly and a fold, each made
// by another server, show in the next answer of a server that finds the kept answer, as
// in a fresh server's (without a results cache): a kept answer whose mark no longer holds
// is computed again, and kept again.
func TestKeptAnswersAcrossServers(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	ctx := context.Background()
	svc, checker := dbtest.NewService(t)
	rnd := make([]byte, 6)
	_, _ = rand.Read(rnd)
	name := "kept" + hex.EncodeToString(rnd)
	dbtest.DropOnCleanup(t, name)
	open := func() *tsdb.DB {
		db, err := tsdb.Open(ctx, svc, name, &tsdb.Options{Layout: chunkedLayout})
		require.NoError(t, err)
		return db
	}
	serve := func(cache *server.ResultsCache) *server.Server {
		s, err := server.New(open(), &server.Options{FoldEvery: -1, RollupEvery: -1, CompactEvery: -1, RetainEvery: -1,
			Query: &api.Options{ResultsCache: cache, KeepAnswers: cache != nil}})
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	keeping := func() (*server.Server, *server.ResultsCache) {
		cache := server.NewResultsCache(16 << 20)
		return serve(cache), cache
	}
	w := serve(nil) // the writer

	// 100 series, a sample every 15 s over the last two hours.
	now := time.Now().Truncate(time.Second)
	keys := map[string]string{}
	app := w.DB().Appender()
	for i := range 100 {
		k := strconv.Itoa(i)
		if i < 2 {
			k = []string{"a", "b"}[i]
		}
		key, err := w.DB().SeriesOf(ctx, tsdb.LabelsFromStrings("__name__", "m", "k", k))
		require.NoError(t, err)
		keys[k] = key
		var pts []tablets.Point
		for ts := now.Add(-2 * time.Hour); !ts.After(now); ts = ts.Add(15 * time.Second) {
			pts = append(pts, tablets.Point{Time: ts, Value: float64(ts.Unix() % 1000)})
		}
		app.AppendPoints(key, pts...)
	}
	require.NoError(t, app.Commit(ctx))

	const step = 60
	end := now.Unix() / step * step
	params := url.Values{"query": {`sum by (k) (max_over_time(m{k=~"a|b|1.*"}[2m]))`}, "start": {strconv.FormatInt(end-2*3600+step, 10)},
		"end": {strconv.FormatInt(end, 10)}, "step": {strconv.Itoa(step)}}
	ask := func(s *server.Server) (answer string, samples uint64) {
		t.Helper()
		before := s.Queryable().Stats().Samples
		req := httptest.NewRequest(http.MethodGet, "/api/v1/query_range?"+params.Encode(), nil)
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		return rec.Body.String(), s.Queryable().Stats().Samples - before
	}
	// fresh is the answer of a server just started, without a results cache, and the
	// samples it read.
	fresh := func() (string, uint64) { return ask(serve(nil)) }
	// kept waits for cache's server to have kept n answers (they are kept in the
	// background, after the answer).
	kept := func(cache *server.ResultsCache, n uint64) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for cache.SharedStats().Kept < n {
			require.Zero(t, cache.SharedStats().Failed, "a keep failed")
			require.True(t, time.Now().Before(deadline), "%d answers kept, want %d", cache.SharedStats().Kept, n)
			time.Sleep(10 * time.Millisecond)
		}
	}

	a, cacheA := keeping()
	first, _ := ask(a)
	want, freshSamples := fresh()
	require.Equal(t, want, first)
	kept(cacheA, 1)
	require.Equal(t, uint64(1), cacheA.SharedStats().Misses, "A found no answer kept")

	// B, its caches empty, answers from A's kept answer: one request more than A's refresh
	// would send (the kept answer's read), and the samples of the fresh steps only.
	b, cacheB := keeping()
	checker.Reset()
	got, samples := ask(b)
	require.Equal(t, first, got)
	t.Logf("B's first answer from A's kept answer: %d samples read (a fresh server %d), %d requests", samples, freshSamples, checker.Stats().Requests)
	require.Less(t, 10*samples, freshSamples, "B computed the fresh steps only")
	st := cacheB.SharedStats()
	require.Equal(t, uint64(1), st.Hits)
	require.Zero(t, st.Misses)
	require.Zero(t, st.Kept, "an answer found kept is not kept again for a minute")

	// changed checks that a server whose caches are empty (found kept answer, spoilt) and
	// B (its own answer, spoilt) answer as a fresh server after a change another server
	// made, and that the one computed whole is kept again.
	changed := func(what string, change func()) {
		t.Helper()
		before, _ := fresh()
		change()
		want, _ := fresh()
		require.NotEqual(t, before, want, "%s shows", what)
		c, cacheC := keeping()
		got, _ := ask(c)
		require.Equal(t, want, got, "after %s, a server that found the kept answer", what)
		require.Equal(t, uint64(1), cacheC.SharedStats().Misses, "after %s, the kept answer no longer holds", what)
		kept(cacheC, 1)
		got, _ = ask(b)
		require.Equal(t, want, got, "after %s, B", what)
	}
	changed("a late sample", func() {
		require.NoError(t, w.DB().Write(ctx, keys["a"], tablets.Point{Time: now.Add(-90*time.Minute + 7*time.Second), Value: 1e6}))
	})
	changed("a delete", func() {
		require.NoError(t, w.DB().Delete(ctx, keys["b"], now.Add(-80*time.Minute), now.Add(-60*time.Minute)))
	})
	var direct []tablets.Point
	for i := range 100 {
		direct = append(direct, tablets.Point{Time: now.Add(-110*time.Minute + time.Duration(i)*15*time.Second), Value: -float64(i)})
	}
	changed("samples written directly", func() { require.NoError(t, w.DB().Write(ctx, keys["a"], direct...)) })

	// A server an hour ahead folds every staged sample into the raw tables: the answers
	// stand, from a kept answer or recomputed.
	folder, err := tsdb.Open(ctx, svc, name, &tsdb.Options{Layout: chunkedLayout, Now: func() time.Time { return time.Now().Add(time.Hour) }})
	require.NoError(t, err)
	want, _ = fresh()
	folded, err := folder.Fold(ctx)
	require.NoError(t, err)
	require.Positive(t, folded.Points)
	d, _ := keeping()
	got, _ = ask(d)
	require.Equal(t, want, got, "after the fold, a server that found the kept answer")
	got, _ = ask(b)
	require.Equal(t, want, got, "after the fold, B")
}
