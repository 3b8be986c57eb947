package tsdb

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/seed71701133/tablets/internal/reqlimit"
	"github.com/stretchr/testify/require"
)

// Two Selects of the same series over the same range at once (the panels of a dashboard
// opened together, over one metric) read the raw table once: the second waits for the
// first's read under way and takes the series from the cache, and both give every sample
// exactly. The first's raw query (its prefetch's, which its own read of the tables after
// its staged read joins too) is held until the second waits for it as well (or 5 s pass,
// and the second reads the table itself: the test fails).
func TestConcurrentSelectsShareRawReads(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	ctx := context.Background()
	k, base, now, want := foldedDense(t, "sh")

	db := k.open(t, true) // a server's, with a raw cache
	q, err := db.Queryable(&QueryOptions{DisableTiers: true})
	require.NoError(t, err)
	held, hold := holdFirst(func() bool { return db.opts.RawCache.Shared() >= 2*160 })
	k.reads.before = func(*http.Request) { hold() }
	k.reads.n.Store(0)
	selectAll := func() (map[string][]string, error) { return selectDense(ctx, q, base, now) }
	var first map[string][]string
	var firstErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		first, firstErr = selectAll()
	}()
	<-held // the first is reading the raw table
	tallied, tally := reqlimit.WithTally(ctx)
	second, err := selectDense(tallied, q, base, now)
	require.NoError(t, err)
	<-done
	require.NoError(t, firstErr)
	require.Equal(t, want, first, "the first Select")
	require.Equal(t, want, second, "the second Select, from the first's read")
	require.Positive(t, tally.Counts().Joined, "the second's wait for the first's read, in its slow-query line")
	require.Equal(t, int64(1), k.reads.n.Load(), "raw table queries of both Selects (one alone takes 1)")
	require.Equal(t, int64(2*160), db.opts.RawCache.Shared(), "series the first's and the second's reads of the tables took from the first's prefetch")
}

// A Select over a longer range of the series another Select is reading now (a metric's
// 7-day panel asked as its 1-hour panel reads) reads itself only the times before the
// other's read, and takes the rest from it: both give every sample exactly, the second's
// query of the raw table ends where the first's begins, and a third Select over the longer
// range then finds every series cached whole (no query of the table).
func TestConcurrentSelectsShareTheTailOfARead(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	ctx := context.Background()
	k, base, now, want := foldedDense(t, "st")
	recent := base.Add(2 * time.Hour)
	wantRecent := map[string][]string{}
	for i, pts := range want {
		wantRecent[i] = pts[8:] // 16 points 15 minutes apart: the last 8 are from recent on
	}

	db := k.open(t, true)
	q, err := db.Queryable(&QueryOptions{DisableTiers: true})
	require.NoError(t, err)
	// Held until the first's own read of the tables and the second's both wait for it.
	held, hold := holdFirst(func() bool { return db.opts.RawCache.Shared() >= 2*160 })
	var filters []string
	var mu sync.Mutex
	k.reads.before = func(r *http.Request) {
		mu.Lock()
		filters = append(filters, r.URL.Query().Get("$filter"))
		mu.Unlock()
		hold()
	}
	k.reads.n.Store(0)
	var first map[string][]string
	var firstErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		first, firstErr = selectDense(ctx, q, recent, now)
	}()
	<-held // the first is reading the raw table from recent on
	second, err := selectDense(ctx, q, base, now)
	require.NoError(t, err)
	<-done
	require.NoError(t, firstErr)
	require.Equal(t, wantRecent, first, "the first Select, of the last 2 hours")
	require.Equal(t, want, second, "the second Select, of 4 hours: its first 2 read, the rest the first's")
	require.Equal(t, int64(2), k.reads.n.Load(), "raw table queries of both Selects")
	require.Equal(t, int64(2*160), db.opts.RawCache.Shared(), "series the first's read of the tables and the second took from the first's prefetch")
	require.Len(t, filters, 2)
	// The second's query ends where the first's begins (the filter compares the chunks'
	// start, a RowKey of its Unix milliseconds).
	recentKey := regexp.MustCompile(`RowKey lt '0*` + fmt.Sprint(recent.UnixMilli()) + `'`)
	require.Regexp(t, recentKey, filters[1], "the second's query of the raw table")

	k.reads.before = nil
	k.reads.n.Store(0)
	third, err := selectDense(ctx, q, base, now)
	require.NoError(t, err)
	require.Equal(t, want, third)
	require.Zero(t, k.reads.n.Load(), "raw table queries of a third Select of the 4 hours")

	// When the read the second waits for fails, the second reads the rest itself.
	db = k.open(t, true)
	q, err = db.Queryable(&QueryOptions{DisableTiers: true})
	require.NoError(t, err)
	firstCtx, cancelFirst := context.WithCancel(ctx)
	defer cancelFirst()
	held, hold = holdFirst(func() bool { return db.opts.RawCache.Shared() >= 2*160 })
	k.reads.before = func(*http.Request) {
		hold()
		cancelFirst() // a no-op for the second's: the first's query then fails
	}
	k.reads.n.Store(0)
	done = make(chan struct{})
	go func() {
		defer close(done)
		_, firstErr = selectDense(firstCtx, q, recent, now)
	}()
	<-held
	second, err = selectDense(ctx, q, base, now)
	require.NoError(t, err)
	<-done
	require.ErrorIs(t, firstErr, context.Canceled)
	require.Equal(t, want, second, "the second Select, the first's read failed")
	require.Equal(t, int64(3), k.reads.n.Load(), "raw table queries: the first's, the second's head, then its whole read")
}

// Two Selects of the same staged series at once read each staging entity once: on a server
// whose staging cache is cold, the second waits for the first's query of the whole table;
// once warm, for the first's fetches of the partitions it lacks too (new entities). The
// first's first fetch is held until the second waits for it (or 5 s pass: the test fails),
// and both give every sample exactly.
func TestConcurrentSelectsShareStagingFetches(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	ctx := context.Background()
	base := querierBase.Add(46 * time.Hour)
	now := base.Add(2 * time.Hour)
	k := newKeyRangeDB(t, "sf", now, base)
	k.reads.table = k.name + "w"
	// Two batches of writes of 100 series, an hour apart: staged, each in its own entities.
	all, _, want := denseSeries(t, k.DB, 100, 100, base, 8, 15*time.Minute)
	first, second := make([]SeriesPoints, len(all)), make([]SeriesPoints, len(all))
	for i, sp := range all {
		first[i] = SeriesPoints{Series: sp.Series, Points: sp.Points[:4]}
		second[i] = SeriesPoints{Series: sp.Series, Points: sp.Points[4:]}
	}
	require.NoError(t, k.WriteMany(ctx, first))
	firstWant := map[string][]string{}
	for label, pts := range want {
		firstWant[label] = pts[:4]
	}

	db, q := k.openStagingCached(t)

	// fetches are the staging queries of columns (not the listings), by their filter.
	var mu sync.Mutex
	var fetches []string
	isFetch := regexp.MustCompile(`,V,c[0-9]`)
	twice := func() (a, b map[string][]string) {
		t.Helper()
		mu.Lock()
		fetches = nil
		mu.Unlock()
		shared := db.opts.StagingCache.Shared()
		held, hold := holdFirst(func() bool { return db.opts.StagingCache.Shared() > shared })
		k.reads.before = func(req *http.Request) {
			sel, _ := url.QueryUnescape(req.URL.Query().Get("$select"))
			if !isFetch.MatchString(sel) {
				return
			}
			mu.Lock()
			fetches = append(fetches, req.URL.Query().Get("$filter"))
			mu.Unlock()
			hold()
		}
		defer func() { k.reads.before = nil }()
		var errA error
		done := make(chan struct{})
		go func() {
			defer close(done)
			a, errA = selectDense(ctx, q, base, now)
		}()
		<-held // the first is fetching
		b, err := selectDense(ctx, q, base, now)
		require.NoError(t, err)
		<-done
		require.NoError(t, errA)
		require.Greater(t, db.opts.StagingCache.Shared(), shared, "fetches the second waited for")
		return a, b
	}

	a, b := twice()
	require.Equal(t, firstWant, a, "the first Select, cold")
	require.Equal(t, firstWant, b, "the second Select, cold, from the first's read")
	require.Len(t, fetches, 1, "staging fetches of both Selects on a cold cache: the first's query of the table")

	require.NoError(t, k.WriteMany(ctx, second)) // new entities, which a listing finds
	a, b = twice()
	require.Equal(t, want, a, "the first Select, warm")
	require.Equal(t, want, b, "the second Select, warm, from the first's fetches")
	require.NotEmpty(t, fetches)
	seen := map[string]bool{}
	for _, f := range fetches {
		require.False(t, seen[f], "a partition fetched twice: %s", f)
		seen[f] = true
	}
}

// foldedDense is a keyRangeDB (k.reads counting its raw table's queries) of 200 series, 160
// of them dense_total with 16 points 15 minutes apart from base (two hours before the
// second midnight of a raw period), folded into the raw table; now (the clock) is 4 hours
// after base; want is what a read of dense_total gives (selectDense).
func foldedDense(t *testing.T, prefix string) (k *keyRangeDB, base, now time.Time, want map[string][]string) {
	t.Helper()
	return foldedDenseFrom(t, prefix, querierBase.Add(46*time.Hour))
}

// foldedDenseFrom is foldedDense from base.
func foldedDenseFrom(t *testing.T, prefix string, base time.Time) (k *keyRangeDB, _, now time.Time, want map[string][]string) {
	t.Helper()
	ctx := context.Background()
	now = base.Add(4 * time.Hour)
	k = newKeyRangeDB(t, prefix, now, base)
	k.reads.table = k.names.RawTable(k.names.PeriodOf(base))
	all, _, want := denseSeries(t, k.DB, 200, 160, base, 16, 15*time.Minute)
	require.NoError(t, k.WriteMany(ctx, all))
	// Folded 20 minutes after the writes: a Fold leaves the arrival buckets of the last
	// minutes staged, the writes' among them at their own time.
	k.clock.Store(now.Add(20 * time.Minute).UnixNano())
	rep, err := k.Fold(ctx)
	require.NoError(t, err)
	require.Equal(t, 200, rep.Series, "series folded into the raw table")
	k.clock.Store(now.UnixNano())
	return k, base, now, want
}

// selectDense is the samples of dense_total in [from, to) by label i ("t:v").
func selectDense(ctx context.Context, q *Queryable, from, to time.Time) (map[string][]string, error) {
	got := map[string][]string{}
	for s, err := range q.Querier(from, to).Select(ctx, nil, Matcher{Type: MatchEqual, Name: "__name__", Value: "dense_total"}) {
		if err != nil {
			return nil, err
		}
		for it := s.Iterator(); it.Next(); {
			x := it.At()
			got[s.Labels.Get("i")] = append(got[s.Labels.Get("i")], fmt.Sprintf("%d:%v", x.T, x.F))
		}
	}
	return got, nil
}

// A cached staging read of most of the columns (600 series: about 220 of 240) fetches the
// entities whole, and a later read of other series then takes them from the cache: no
// fetch, only the listing.
func TestStagingReadOfMostColumnsFetchesWhole(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	ctx := context.Background()
	base := querierBase.Add(46 * time.Hour)
	now := base.Add(time.Hour)
	k := newKeyRangeDB(t, "sw", now, base)
	k.reads.table = k.name + "w"
	all, _, want := denseSeries(t, k.DB, 700, 600, base, 4, 10*time.Minute)
	require.NoError(t, k.WriteMany(ctx, all))
	_, q := k.openStagingCached(t)

	fetches := k.countStagingFetches()
	got, err := selectDense(ctx, q, base, now)
	require.NoError(t, err)
	require.Equal(t, want, got)
	require.Equal(t, [2]int{1, 0}, fetches(), "fetches whole and of columns, reading 600 series")

	// The other 100 series' columns are in the cache.
	n := 0
	for s, err := range q.Querier(base, now).Select(ctx, nil, Matcher{Type: MatchEqual, Name: "__name__", Value: "other"}) {
		require.NoError(t, err)
		for it := s.Iterator(); it.Next(); {
			n++
		}
	}
	require.Equal(t, 400, n, "samples of the other series")
	require.Equal(t, [2]int{0, 0}, fetches(), "fetches whole and of columns, reading the other 100 series")
}

// countStagingFetches counts k's queries of its reads' table (the staging table's) that
// fetch entities: whole (no $select) and of some columns. The func returns both since the
// last call.
func (k *keyRangeDB) countStagingFetches() func() [2]int {
	var mu sync.Mutex
	var whole, columns int
	isFetch := regexp.MustCompile(`,V,c[0-9]`)
	k.reads.before = func(req *http.Request) {
		sel := req.URL.Query().Get("$select")
		mu.Lock()
		defer mu.Unlock()
		switch {
		case sel == "":
			whole++
		case isFetch.MatchString(sel):
			columns++
		}
	}
	return func() [2]int {
		mu.Lock()
		defer mu.Unlock()
		f := [2]int{whole, columns}
		whole, columns = 0, 0
		return f
	}
}

// openStagingCached opens the database again with a staging cache (a server's), and its
// Queryable of raw samples.
func (k *keyRangeDB) openStagingCached(t *testing.T) (*DB, *Queryable) {
	t.Helper()
	o := *k.opts
	o.StagingCache = NewStagingCache(DefaultStagingCacheBytes)
	db, err := Open(context.Background(), k.svc, k.name, &o)
	require.NoError(t, err)
	q, err := db.Queryable(&QueryOptions{DisableTiers: true})
	require.NoError(t, err)
	return db, q
}

// holdFirst returns a channel closed by the first call of hold, and hold: its first call
// waits until waited says another read waits for this one (or 5 s pass), its others
// return at once.
func holdFirst(waited func() bool) (held chan struct{}, hold func()) {
	held = make(chan struct{})
	var once sync.Once
	return held, func() {
		once.Do(func() {
			close(held)
			for deadline := time.Now().Add(5 * time.Second); !waited() && time.Now().Before(deadline); {
				time.Sleep(time.Millisecond)
			}
		})
	}
}
