package rules

import (
	"context"
	"math"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/rules"
	"github.com/prometheus/prometheus/storage"
	"github.com/stretchr/testify/require"
)

// countingQueryable counts the Selects that reach q, by their matchers.
type countingQueryable struct {
	q  storage.Queryable
	mu sync.Mutex
	n  map[string]int
}

func (c *countingQueryable) Querier(mint, maxt int64) (storage.Querier, error) {
	q, err := c.q.Querier(mint, maxt)
	return &countingQuerier{Querier: q, c: c}, err
}

func (c *countingQueryable) count(ms string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[ms]
}

type countingQuerier struct {
	storage.Querier
	c *countingQueryable
}

func (q *countingQuerier) Select(ctx context.Context, sortSeries bool, hints *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
	q.c.mu.Lock()
	key := ""
	for _, m := range ms {
		key += m.String() // each of these tests selects by name alone
	}
	q.c.n[key]++
	q.c.mu.Unlock()
	set := q.Querier.Select(ctx, sortSeries, hints, ms...)
	if hints == nil || hints.Step != 0 || hints.Range != 0 || hints.Func == "series" {
		return set
	}
	// An instant selector's: each series' latest sample only, as tablets' storage gives
	// the engine's (tsdb.SelectHints.Latest).
	var latest []storage.Series
	for set.Next() {
		samples, err := storage.ExpandSamples(set.At().Iterator(nil), nil)
		if err != nil {
			return storage.ErrSeriesSet(err)
		}
		latest = append(latest, storage.NewListSeries(set.At().Labels(), samples[max(len(samples)-1, 0):]))
	}
	if set.Err() != nil {
		return storage.ErrSeriesSet(set.Err())
	}
	return &listSet{series: latest}
}

// The rules of one evaluation of a group read each selection once, and a rule sees what
// the rules before it in the evaluation wrote: b:before reads a:sum before a:sum is
// recorded, a:double after (its own evaluation's value, not the one b:before read).
func TestSharedReads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		writeFile(t, dir, "r.yml", `
groups:
  - name: g
    interval: 10s
    rules:
      - record: b:before
        expr: count(a:sum)
      - record: a:sum
        expr: sum(x)
      - record: a:max
        expr: max(x)
      - record: a:rate
        expr: sum(rate(x[5m]))
      - record: a:double
        expr: a:sum * 2
      - record: a:plus
        expr: a:sum + 1
`)
		store, reg := newMemStore(), prometheus.NewRegistry()
		counting := &countingQueryable{q: store, n: map[string]int{}}
		shared := NewSharedReads()
		engine := promql.NewEngine(promql.EngineOpts{MaxSamples: 1e6, Timeout: time.Minute, LookbackDelta: 5 * time.Minute})
		m, err := New(&Options{Files: []string{filepath.Join(dir, "r.yml")}, QueryFunc: rules.EngineQueryFunc(engine, shared.Queryable(counting)),
			Queryable: store, Writer: store, Registerer: reg, SharedReads: shared})
		require.NoError(t, err)
		start := time.Now()
		// x grows by 1 every 5 s, so that each evaluation records another sum. It starts a
		// minute before the rules do, so that every evaluation (the first may come within 5 s
		// of start: the group's offset hashes its file's path) finds two samples to rate.
		feed(store, start.Add(-time.Minute), 260*time.Second, func(at time.Duration) float64 { return at.Seconds() / 5 })
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- m.Run(ctx) }()
		time.Sleep(95 * time.Second)
		synctest.Wait()
		cancel()
		require.NoError(t, <-done)

		byTime := func(name string) map[int64]float64 {
			out := map[int64]float64{}
			for _, ss := range store.samples(labels.MustNewMatcher(labels.MatchEqual, "__name__", name)) {
				for _, s := range ss {
					out[s.t] = s.f
				}
			}
			return out
		}
		sums, doubles, pluses := byTime("a:sum"), byTime("a:double"), byTime("a:plus")
		evaluations := len(sums)
		require.GreaterOrEqual(t, evaluations, 8)
		require.Len(t, doubles, evaluations)
		require.Len(t, pluses, evaluations)
		changed := 0
		for ts, sum := range sums {
			require.Equal(t, 2*sum, doubles[ts], "a:double at %d: this evaluation's a:sum, written before it", ts)
			require.Equal(t, sum+1, pluses[ts], "a:plus at %d", ts)
			if prev, ok := sums[ts-10_000]; ok && prev != sum {
				changed++
			}
		}
		require.Positive(t, changed, "a:sum changes between evaluations (else the test could not tell)")
		// The rate of each evaluation, from x's samples of 5 minutes: not from the latest
		// sample the instant selectors of sum and max read.
		rates := byTime("a:rate")
		require.Len(t, rates, evaluations)
		for _, v := range rates {
			require.False(t, math.IsNaN(v))
		}

		// x: read twice an evaluation (sum and max share the latest samples, rate reads its
		// range); a:sum twice (before its rule wrote it, then after: a:double and a:plus
		// share the second read).
		require.Equal(t, 2*evaluations, counting.count(`__name__="x"`))
		require.Equal(t, 2*evaluations, counting.count(`__name__="a:sum"`))
		require.Equal(t, float64(2*evaluations), testutil.ToFloat64(shared.shared))
		require.Equal(t, float64(4*evaluations), testutil.ToFloat64(shared.read))
	})
}

// Without an evaluation (a query of the API through the same Queryable), nothing is shared.
func TestSharedReadsOnlyWithinEvaluations(t *testing.T) {
	store := newMemStore()
	store.add(labels.FromStrings("__name__", "x"), memSample{t: 1000, f: 1})
	counting := &countingQueryable{q: store, n: map[string]int{}}
	shared := NewSharedReads()
	engine := promql.NewEngine(promql.EngineOpts{MaxSamples: 1e6, Timeout: time.Minute, LookbackDelta: 5 * time.Minute})
	query := rules.EngineQueryFunc(engine, shared.Queryable(counting))
	for _, ctx := range []context.Context{t.Context(), t.Context()} {
		v, err := query(ctx, "max(x)", time.UnixMilli(2000))
		require.NoError(t, err)
		require.Len(t, v, 1)
	}
	require.Equal(t, 2, counting.count(`__name__="x"`))

	// Within one evaluation: once; a failed Select is not kept.
	ctx := withEvaluation(t.Context())
	for range 2 {
		_, err := query(ctx, "max(x)", time.UnixMilli(2000))
		require.NoError(t, err)
	}
	require.Equal(t, 3, counting.count(`__name__="x"`))
	cancelled, cancel := context.WithCancel(withEvaluation(t.Context()))
	cancel()
	_, err := query(cancelled, "min(x)", time.UnixMilli(2000))
	require.Error(t, err)
}
