package api

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets/server/internal/resolution"
	"github.com/seed71701133/tablets/server/internal/results"
)

// markedStore is a memStore that takes marks (a Marker, as promstore.Queryable is): a mark
// is the number of changes recorded when it was taken, and holds an earlier one while no
// change recorded since touches its range.
type markedStore struct {
	*memStore
	marks      atomic.Int64 // ReadMark calls
	mu         sync.Mutex
	changes    [][2]int64 // [from, to) milliseconds, in order
	prefetches []prefetch // PrefetchStaged calls
}

func (s *markedStore) ReadMark(_ context.Context, from, to time.Time) (results.Mark, error) {
	s.marks.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	return fakeMark{s: s, from: from.UnixMilli(), to: to.UnixMilli(), gen: len(s.changes)}, nil
}

// PrefetchStaged records what it was asked for (a stagedPrefetcher, as promstore.Queryable
// is): the range, and each selector's matchers as printed.
func (s *markedStore) PrefetchStaged(_ context.Context, from, to time.Time, selectors [][]*labels.Matcher) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var printed []string
	for _, ms := range selectors {
		var each []string
		for _, m := range ms {
			each = append(each, m.String())
		}
		printed = append(printed, strings.Join(each, ","))
	}
	s.prefetches = append(s.prefetches, prefetch{from: from.UnixMilli(), to: to.UnixMilli(), selectors: printed})
}

// prefetch is a call of PrefetchStaged: [from, to) in milliseconds, the selectors printed.
type prefetch struct {
	from, to  int64
	selectors []string
}

// ExactReads: raw samples unless the query asks for tiers (as promstore's default).
func (s *markedStore) ExactReads(ctx context.Context) bool {
	r := resolution.From(ctx)
	return r == 0 || r == resolution.Raw
}

// change sets the value of series ls at t (milliseconds), adding the sample if it has
// none there, and records the change.
func (s *markedStore) change(ls labels.Labels, t int64, v float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.series {
		sr := &s.series[i]
		if labels.Equal(sr.lset, ls) {
			j, found := slices.BinarySearch(sr.ts, t)
			if found {
				sr.vs = slices.Clone(sr.vs)
				sr.vs[j] = v
			} else {
				sr.ts, sr.vs = slices.Insert(slices.Clone(sr.ts), j, t), slices.Insert(slices.Clone(sr.vs), j, v)
			}
		}
	}
	s.changes = append(s.changes, [2]int64{t, t + 1})
}

type fakeMark struct {
	s        *markedStore
	from, to int64
	gen      int
}

func (m fakeMark) Holds(since results.Mark) bool {
	o, ok := since.(fakeMark)
	if !ok || o.s != m.s || o.from < m.from || o.to > m.to || o.gen > m.gen {
		return false
	}
	m.s.mu.Lock()
	defer m.s.mu.Unlock()
	for _, c := range m.s.changes[o.gen:m.gen] {
		if c[0] < o.to && c[1] > o.from {
			return false
		}
	}
	return true
}

func (m fakeMark) Sub(from, to time.Time) results.Mark {
	f, t := max(m.from, from.UnixMilli()), min(m.to, to.UnixMilli())
	return fakeMark{s: m.s, from: f, to: max(f, t), gen: m.gen}
}

// clock is a settable Options.Now.
type clock struct{ now atomic.Int64 } // Unix seconds

func (c *clock) Now() time.Time { return time.Unix(c.now.Load(), 0) }

// cachePair serves m twice on one clock: with a results cache, and without (the reference
// answers).
type cachePair struct {
	store          *markedStore
	clock          *clock
	cache          *results.Cache
	cached, direct *httptest.Server
}

func newCachePair(t *testing.T, m *memStore, now int64) *cachePair {
	p := &cachePair{store: &markedStore{memStore: m}, clock: &clock{}, cache: results.New(64 << 20)}
	p.clock.now.Store(now)
	p.cached = serveAPI(t, p.store, &Options{Now: p.clock.Now, ResultsCache: p.cache})
	p.direct = serveAPI(t, p.store.memStore, &Options{Now: p.clock.Now})
	return p
}

func serveAPI(t *testing.T, q storage.Queryable, opts *Options) *httptest.Server {
	a, err := New(q, opts)
	require.NoError(t, err)
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(func() {
		srv.Close()
		require.NoError(t, a.Close())
	})
	return srv
}

// ask sends a range query to both servers and requires the same bytes: it returns the
// cached server's answer and the hints of its Selects.
func (p *cachePair) ask(t *testing.T, params url.Values) ([]byte, []storage.SelectHints) {
	t.Helper()
	code, _, want := do(t, p.direct, http.MethodGet, "/api/v1/query_range", params)
	p.store.mu.Lock()
	p.store.hints = nil
	p.store.mu.Unlock()
	gotCode, _, got := do(t, p.cached, http.MethodGet, "/api/v1/query_range", params)
	require.Equal(t, code, gotCode)
	require.Equal(t, string(want), string(got), "%v", params)
	p.store.mu.Lock()
	defer p.store.mu.Unlock()
	return got, slices.Clone(p.store.hints)
}

func rangeQuery(query string, start, end, step int64) url.Values {
	return url.Values{"query": {query}, "start": {ts(start)}, "end": {ts(end)}, "step": {strconv.FormatInt(step, 10)}}
}

// A refreshed panel (now, start and end a step on) computes only the steps after those the
// cache kept: the steps from the last one before the previous freshness horizon (a minute)
// on. Its answer is the engine's over the whole range, byte for byte.
func TestResultsCacheRefresh(t *testing.T) {
	const step = 60
	p := newCachePair(t, testStore(), t0+3000)
	query := `sum by (job) (rate(http_requests_total[5m]))`
	start, end := t0+600, t0+3000
	_, hints := p.ask(t, rangeQuery(query, start, end, step))
	require.Len(t, hints, 1)
	require.Equal(t, start*1000-300_000+1, hints[0].Start, "the first answer computes every step")
	require.Equal(t, results.Stats{Misses: 1, Entries: 1}, withoutBytes(p.cache.Stats()))

	for i := range int64(5) {
		p.clock.now.Add(step)
		start, end = start+step, end+step
		_, hints = p.ask(t, rangeQuery(query, start, end, step))
		// Kept: the steps before the previous horizon, now-step-1m: the last is end-step-1m-1m
		// (the horizon is on a step, which is fresh).
		firstComputed := end - step - 60
		require.Len(t, hints, 1, "refresh %d", i)
		require.Equal(t, firstComputed*1000-300_000+1, hints[0].Start, "refresh %d computes from %d on", i, firstComputed)
		require.Equal(t, end*1000, hints[0].End)
	}
	st := p.cache.Stats()
	require.Equal(t, uint64(5), st.Hits)
	require.Equal(t, uint64(1), st.Misses)
	require.Equal(t, 1, st.Entries)
	require.Positive(t, st.Bytes)

	// The same request again computes only the fresh steps.
	_, hints = p.ask(t, rangeQuery(query, start, end, step))
	require.Len(t, hints, 1)
	require.Equal(t, (end-60)*1000-300_000+1, hints[0].Start)
}

// Beside its mark, a cached range query has the staged samples of the steps it computes
// prefetched: every step's on a first answer, the fresh ones' on a refresh, for each
// selector of the query; the range is the one the engine then reads.
func TestResultsCachePrefetchesStaged(t *testing.T) {
	const step = 60
	p := newCachePair(t, testStore(), t0+3000)
	query := `sum by (job) (rate(http_requests_total[5m])) / on (job) group_left sum by (job) (rate(http_requests_total{job="api"}[5m]))`
	start, end := t0+600, t0+3000
	last := func() prefetch {
		p.store.mu.Lock()
		defer p.store.mu.Unlock()
		require.NotEmpty(t, p.store.prefetches)
		pf := p.store.prefetches[len(p.store.prefetches)-1]
		p.store.prefetches = nil
		return pf
	}
	for i := range 3 {
		_, hints := p.ask(t, rangeQuery(query, start, end, step))
		pf := last()
		require.Equal(t, []string{`__name__="http_requests_total"`, `job="api",__name__="http_requests_total"`}, pf.selectors, "answer %d", i)
		require.Equal(t, hints[0].Start, pf.from, "answer %d: from the first step computed, less the range", i)
		require.Equal(t, hints[0].End+1, pf.to, "answer %d", i)
		if i == 0 {
			require.Equal(t, start*1000-300_000+1, pf.from, "a first answer: every step")
		} else {
			require.Equal(t, (end-step-60)*1000-300_000+1, pf.from, "a refresh: the fresh steps")
		}
		p.clock.now.Add(step)
		start, end = start+step, end+step
	}
}

func withoutBytes(s results.Stats) results.Stats {
	s.Bytes = 0
	return s
}

// A change of a sample in the range a cached answer read (any server's: its mark no longer
// holds) has the next request compute every step again, and answer with the change.
func TestResultsCacheChangedMarkRecomputes(t *testing.T) {
	p := newCachePair(t, testStore(), t0+3000)
	query := `sum by (job) (rate(http_requests_total[5m]))`
	params := rangeQuery(query, t0+600, t0+3000, 60)
	first, _ := p.ask(t, params)
	_, hints := p.ask(t, params)
	require.Equal(t, (t0+3000-60)*1000-300_000+1, hints[0].Start, "warm: only the fresh steps")

	// A late sample far before the horizon: counter "a" jumps at t0+1000.
	p.store.change(labels.FromStrings("__name__", "http_requests_total", "job", "api", "instance", "a"), (t0+1000)*1000, 1e6)
	changed, hints := p.ask(t, params) // the same bytes as the engine's answer now
	require.NotEqual(t, string(first), string(changed), "the change shows")
	require.Len(t, hints, 1)
	require.Equal(t, (t0+600)*1000-300_000+1, hints[0].Start, "every step computed again")
	require.Equal(t, uint64(2), p.cache.Stats().Misses, "the second miss")

	// Then cached again.
	_, hints = p.ask(t, params)
	require.Equal(t, (t0+3000-60)*1000-300_000+1, hints[0].Start)
}

// A write a little late, into the samples of the young steps kept (after the settled
// horizon, 5 minutes, and before the fresh one, 1 minute), has only those computed again:
// the settled steps stand by their own mark. One into a settled step's samples has every
// step computed again. Every answer is the engine's, byte for byte.
func TestResultsCacheLateWriteSpoilsYoungSteps(t *testing.T) {
	p := newCachePair(t, testStore(), t0+3000)
	query := `sum by (job) (rate(http_requests_total[5m]))`
	params := rangeQuery(query, t0+600, t0+3000, 60)
	p.ask(t, params)
	// Kept: the steps up to t0+2880 (before now-1m); settled: up to t0+2640 (before now-5m).
	_, hints := p.ask(t, params)
	require.Len(t, hints, 1)
	require.Equal(t, (t0+2940)*1000-300_000+1, hints[0].Start, "warm: only the fresh steps")

	series := labels.FromStrings("__name__", "http_requests_total", "job", "api", "instance", "a")
	p.store.change(series, (t0+2800)*1000, 1e6) // read by the steps t0+2820 on: young ones
	_, hints = p.ask(t, params)
	require.Len(t, hints, 1)
	require.Equal(t, (t0+2700)*1000-300_000+1, hints[0].Start, "the steps after the settled ones computed again")
	require.Equal(t, results.Stats{Hits: 2, Misses: 1, Entries: 1}, withoutBytes(p.cache.Stats()))
	_, hints = p.ask(t, params)
	require.Equal(t, (t0+2940)*1000-300_000+1, hints[0].Start, "then the whole extent stands again")

	p.store.change(series, (t0+2000)*1000, 2e6) // read by settled steps
	_, hints = p.ask(t, params)
	require.Equal(t, (t0+600)*1000-300_000+1, hints[0].Start, "every step computed again")
	require.Equal(t, uint64(2), p.cache.Stats().Misses)

	// A minute on, the steps that were young and stood are settled as of the newest mark:
	// a late write into the steps now young spares them.
	p.clock.now.Add(60)
	params = rangeQuery(query, t0+660, t0+3060, 60)
	_, hints = p.ask(t, params)
	require.Equal(t, (t0+2940)*1000-300_000+1, hints[0].Start, "a refresh: the steps after those kept")
	p.store.change(series, (t0+2860)*1000, 3e6) // read by the steps t0+2880 on
	_, hints = p.ask(t, params)
	require.Equal(t, (t0+2760)*1000-300_000+1, hints[0].Start, "the steps after the settled ones (now-5m) computed again")

	// A panel zoomed in on young steps, after a late write into them: what still stands
	// (the settled steps) ends before its first step, and it computes all of its own.
	p.ask(t, params)
	p.store.change(series, (t0+2870)*1000, 4e6)
	_, hints = p.ask(t, rangeQuery(query, t0+2820, t0+3060, 60))
	require.Len(t, hints, 1)
	require.Equal(t, (t0+2820)*1000-300_000+1, hints[0].Start, "every step of its own, once")
}

// A request that starts before the cached steps (a panel zoomed out) computes those before
// them and those after, and takes the rest from the cache.
func TestResultsCacheComputesBothEnds(t *testing.T) {
	p := newCachePair(t, testStore(), t0+3600)
	query := `rate(http_requests_total[2m]) * 2`
	p.ask(t, rangeQuery(query, t0+1800, t0+3000, 30))
	_, hints := p.ask(t, rangeQuery(query, t0+600, t0+3600, 30))
	require.Len(t, hints, 2)
	require.Equal(t, (t0+600)*1000-120_000+1, hints[0].Start)
	require.Equal(t, (t0+1800-30)*1000, hints[0].End, "before the cached steps")
	require.Equal(t, (t0+3000+30)*1000-120_000+1, hints[1].Start, "after them")
	require.Equal(t, (t0+3600)*1000, hints[1].End)
}

// The queries of the API's other tests (floats, staleness, native histograms, mixed
// series, annotations), refreshed as a dashboard does, a step at a time and by jumps, with
// limits: every answer is the engine's, byte for byte.
func TestResultsCacheAnswersAsEngine(t *testing.T) {
	queries := []string{
		`http_requests_total`, `rate(http_requests_total[5m])`, `sum by (job) (rate(http_requests_total[1m]))`,
		`temperature`, `temperature offset 10m`, `temperature offset -10m`, `max_over_time(temperature[10m:1m])`,
		`histogram_quantile(0.9, sum by (le) (rate(req_duration_seconds_bucket[5m])))`, `time()`, `vector(1)`,
		`topk(2, http_requests_total)`, `rate(temperature[5m])`, // an info annotation: not a counter
		`up{"http.status"="200"}`,
	}
	queries = append(queries, histQueries...)
	m := testStore()
	for _, s := range histData() {
		m.addMixed(s.lset, s.samples)
	}
	p := newCachePair(t, m, t0+1500)
	for _, q := range queries {
		p.clock.now.Store(t0 + 1500)
		for _, move := range []int64{0, 15, 60, 0, 600, 45, 1200} {
			p.clock.now.Add(move)
			now := p.clock.now.Load()
			for _, step := range []int64{15, 60} {
				start := (now - 1500) / step * step
				params := rangeQuery(q, start, now/step*step, step)
				p.ask(t, params)
				params.Set("limit", "1")
				p.ask(t, params)
			}
		}
	}
	require.Positive(t, p.cache.Stats().Hits)
}

// Not cached: a query with an @ modifier, start() or end(); stats asked for; tiers asked
// for; an answer with warnings; a range all fresh. Each asked twice computes all its steps
// both times.
func TestResultsCacheNotCached(t *testing.T) {
	m := testStore()
	m.add(labels.FromStrings("__name__", "warned"), []int64{t0 * 1000, (t0 + 60) * 1000}, []float64{1, 2})
	p := newCachePair(t, m, t0+3600)
	for _, c := range []struct {
		name   string
		params url.Values
	}{
		{"@", rangeQuery(`rate(http_requests_total[5m] @ 1700001000)`, t0+600, t0+3600, 60)},
		{"@ end()", rangeQuery(`rate(http_requests_total[5m] @ end())`, t0+600, t0+3600, 60)},
		{"subquery @ start()", rangeQuery(`max_over_time(temperature[10m:1m] @ start())`, t0+600, t0+3600, 60)},
		{"stats", func() url.Values { v := rangeQuery(`up`, t0+600, t0+3600, 60); v.Set("stats", "all"); return v }()},
		{"tiers", func() url.Values {
			v := rangeQuery(`up`, t0+600, t0+3600, 60)
			v.Set("max_source_resolution", "1h")
			return v
		}()},
		{"warnings", rangeQuery(`rate(temperature[5m])`, t0+600, t0+3600, 60)}, // info: not a counter
		{"fresh", rangeQuery(`up`, t0+3600-60, t0+3600, 30)},
	} {
		marks := p.store.marks.Load()
		entries := p.cache.Stats().Entries
		for range 2 {
			if c.name == "stats" { // stats differ in their timings: the bodies are not compared
				p.store.mu.Lock()
				p.store.hints = nil
				p.store.mu.Unlock()
				ok(t, p.cached, http.MethodGet, "/api/v1/query_range", c.params)
				p.store.mu.Lock()
				require.Equal(t, (t0+600)*1000-300_000+1, p.store.hints[0].Start, c.name)
				p.store.mu.Unlock()
				continue
			}
			_, hints := p.ask(t, c.params)
			require.NotEmpty(t, hints, c.name)
			if !strings.Contains(c.name, "@") { // those read at their @ time
				start, _ := strconv.ParseInt(c.params.Get("start"), 10, 64)
				require.LessOrEqual(t, hints[0].Start, start*1000, "%s: every step computed", c.name)
			}
		}
		require.Equal(t, entries, p.cache.Stats().Entries, "%s: nothing kept", c.name)
		if c.name != "warnings" { // its mark was taken: that it was an answer with warnings shows after
			require.Equal(t, marks, p.store.marks.Load(), "%s: no mark taken", c.name)
		}
	}
}

// Many clients refreshing panels at once (run with -race) all get the engine's answers.
func TestResultsCacheConcurrent(t *testing.T) {
	p := newCachePair(t, testStore(), t0+3600)
	queries := []string{`sum by (job) (rate(http_requests_total[5m]))`, `temperature`, `up`}
	get := func(srv *httptest.Server, params url.Values) (string, error) {
		resp, err := srv.Client().Get(srv.URL + "/api/v1/query_range?" + params.Encode())
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Go(func() {
			for i := range 20 {
				q := queries[(g+i)%len(queries)]
				end := t0 + 2400 + int64(i%4)*60
				params := rangeQuery(q, end-1800, end, 60)
				want, err := get(p.direct, params)
				if err != nil {
					t.Error(err)
					return
				}
				got, err := get(p.cached, params)
				if err != nil {
					t.Error(err)
					return
				}
				if got != want {
					t.Errorf("%v: got %s, want %s", params, got, want)
				}
			}
		})
	}
	wg.Wait()
	require.Positive(t, p.cache.Stats().Hits)
}

// begunStore is a markedStore whose reads begin (a readBeginner, as promstore.Queryable):
// an instant query then has its reads prepared.
type begunStore struct{ *markedStore }

func (begunStore) BeginRead(ctx context.Context) context.Context { return ctx }

// An instant query over a store whose reads begin takes a read mark of its data range
// beforehand (the staging listing and the logs its Selects then take), with its staged
// entities prefetched beside it; a query that reads nothing takes none, and a store whose
// reads do not begin none either.
func TestInstantQueryPreparesReads(t *testing.T) {
	store := &markedStore{memStore: testStore()}
	srv := serveAPI(t, begunStore{store}, &Options{})
	instant := func(query string) {
		t.Helper()
		code, _, body := do(t, srv, http.MethodGet, "/api/v1/query", url.Values{"query": {query}, "time": {ts(t0 + 1800)}})
		require.Equal(t, http.StatusOK, code, "%s", body)
	}
	instant(`sum by (job) (rate(http_requests_total{job="api"}[2m]))`)
	require.EqualValues(t, 1, store.marks.Load(), "a mark")
	store.mu.Lock()
	require.Len(t, store.prefetches, 1)
	pf := store.prefetches[0]
	store.prefetches = nil
	store.mu.Unlock()
	require.Equal(t, []string{`job="api",__name__="http_requests_total"`}, pf.selectors)
	require.Equal(t, (t0+1800)*1000-120_000+1, pf.from, "the data range: the range selector's")
	require.Equal(t, (t0+1800)*1000+1, pf.to)

	instant(`time()`)
	require.EqualValues(t, 1, store.marks.Load(), "nothing read: no mark")

	plain := &markedStore{memStore: testStore()}
	srv = serveAPI(t, plain, &Options{})
	instant(`http_requests_total`)
	require.Zero(t, plain.marks.Load(), "reads that do not begin: no mark")
}
