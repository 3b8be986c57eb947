package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/server"
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
	f := newSharedDB(t, "kept", `sum by (k) (max_over_time(m{k=~"a|b|1.*"}[2m]))`)
	keeping := func() (*server.Server, *server.ResultsCache) {
		cache := server.NewResultsCache(16 << 20)
		return f.serve(cache, true), cache
	}
	w := f.serve(nil, false) // the writer
	f.write(w.DB())
	now, keys, ask, fresh := f.now, f.keys, f.ask, f.fresh
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
	f.checker.Reset()
	got, samples := ask(b)
	require.Equal(t, first, got)
	t.Logf("B's first answer from A's kept answer: %d samples read (a fresh server %d), %d requests", samples, freshSamples, f.checker.Stats().Requests)
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
	folder := f.open(func() time.Time { return time.Now().Add(time.Hour) })
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
