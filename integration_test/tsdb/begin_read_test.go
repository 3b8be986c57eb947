package tsdb

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/testkit/clock"
	"github.com/seed71701133/tablets/internal/testkit/dbtest"
	"github.com/seed71701133/tablets/tsdb"
)

// A refreshed query, as the query API makes it (DB.BeginRead, a read mark, then the
// Select), with warm caches: the mark and the Select list the staging table once, and
// read no change log while the listings find the logs' mark as it was (the states read
// before stand; else the raw and index logs beside the listing:
// TestTSDBReadMarkLogsBesideListing), where each used to read its own; and the batches of
// a Select share the raw log's read. A Select that fetches the entities staged since (a
// late point) reads every entity the listing has: the raw log's state stands for it (a
// second request, the fetch, not a third).
// What another server changed before the read began (a late staged point, its fold, a
// direct write, a delete, a new series) shows in it, as in a reader without caches.
func TestTSDBBeginReadShares(t *testing.T) {
	ctx := context.Background()
	base := time.Date(2024, 5, 23, 0, 0, 0, 0, time.UTC) // a raw period's start (a day)
	clk := clock.New(base.Add(20 * time.Hour))
	opts := withCaches(*stagingOptions(clk))
	db, svc, checker := dbtest.NewDB(t, &opts)
	plain := *stagingOptions(clk)
	other := reopen(t, svc, db.Name(), plain)
	fresh := func() *tsdb.DB { return reopen(t, svc, db.Name(), plain) }

	// 40 series of an hour at 15 s, three batches of a Select (BatchSize 16), the last
	// minutes of it staged.
	keys, write := memSeries(t, other)
	from, to := base.Add(19*time.Hour), base.Add(20*time.Hour)
	for at := from; at.Before(to.Add(-5 * time.Minute)); at = at.Add(15 * time.Second) {
		write(at, float64(at.Unix()))
	}
	clk.Set(base.Add(21 * time.Hour)) // the hour closed: folded into the raw table
	_, err := other.Fold(ctx)
	require.NoError(t, err)
	for at := to.Add(-5 * time.Minute); at.Before(to); at = at.Add(15 * time.Second) {
		write(at, float64(at.Unix())) // late, staged
	}

	queryOpts := &tsdb.QueryOptions{BatchSize: 16}
	selectAll := func(ctx context.Context, d *tsdb.DB) map[string][]tsdb.Sample {
		t.Helper()
		return selectSamples(ctx, t, d, queryOpts, from, to, tsdb.Matcher{Type: tsdb.MatchEqual, Name: tsdb.MetricName, Value: "mem"})
	}
	// refresh is the query API's read: begun, a mark, then the Select. It returns its
	// requests.
	refresh := func(what string, began bool) int64 {
		t.Helper()
		want := selectAll(ctx, fresh())
		rctx := ctx
		if began {
			rctx = db.BeginRead(ctx)
		}
		checker.Reset()
		_, err := db.ReadMark(rctx, from, to)
		require.NoError(t, err)
		got := selectAll(rctx, db)
		n := checker.Stats().Requests
		require.Equal(t, want, got, what)
		t.Logf("%s: %d requests", what, n)
		return n
	}
	refresh("first", true)
	refresh("warm", true)
	clk.Add(30 * time.Second) // past the staging listing's margin
	require.Greater(t, refresh("not begun: the mark's and the Select's own", false), int64(3))
	require.Equal(t, int64(1), refresh("refreshed", true), "the listing: the logs' mark stands, and the logs' states read before with it")

	// Another server's changes, each before the read began.
	write(to.Add(-10*time.Second), -1) // a late point
	// The refresh before found nothing changed: this one reads the staging mark first
	// (docs/format.md, "The staging mark"), finds it moved, and lists.
	require.Equal(t, int64(3), refresh("after another server's late point", true),
		"the staging mark, the listing and the new entity: a staged write records in no log, and the logs' mark stands")
	clk.Add(time.Hour) // its fold
	_, err = other.Fold(ctx)
	require.NoError(t, err)
	refresh("after another server's fold", true)
	var backfill []tablets.Point
	for i := range 150 {
		backfill = append(backfill, tablets.Point{Time: from.Add(time.Duration(i) * time.Second), Value: -2})
	}
	require.NoError(t, other.Write(ctx, keys[7], backfill...))
	refresh("after another server's direct write", true)
	require.NoError(t, other.Delete(ctx, keys[8], from.Add(10*time.Minute), from.Add(20*time.Minute)))
	refresh("after another server's delete", true)
	k, err := other.SeriesOf(ctx, tsdb.LabelsFromStrings(tsdb.MetricName, "mem", "i", "new"))
	require.NoError(t, err)
	require.NoError(t, other.Write(ctx, k, tablets.Point{Time: from.Add(time.Minute), Value: 5}))
	refresh("after another server's new series", true)
	clk.Add(30 * time.Second)
	require.Equal(t, int64(1), refresh("and refreshed again", true), "the mark stands again")
}

// withCaches is o with a server's caches: raw, staging and index.
func withCaches(o tsdb.Options) tsdb.Options {
	o.RawCache = tsdb.NewRawCache(64 << 20)
	o.StagingCache = tsdb.NewStagingCache(64 << 20)
	o.IndexCache = tsdb.NewIndexCache(16 << 20)
	return o
}

// selectSamples is what a Querier of d over [from, to) selects by matchers: each series'
// samples, by its labels.
func selectSamples(ctx context.Context, t *testing.T, d *tsdb.DB, opts *tsdb.QueryOptions, from, to time.Time, matchers ...tsdb.Matcher) map[string][]tsdb.Sample {
	t.Helper()
	q, err := d.Queryable(opts)
	require.NoError(t, err)
	out := map[string][]tsdb.Sample{}
	for s, err := range q.Querier(from, to).Select(ctx, nil, matchers...) {
		require.NoError(t, err)
		for it := s.Iterator(); it.Next(); {
			out[s.Labels.String()] = append(out[s.Labels.String()], it.At())
		}
	}
	return out
}

// A Fold by another server between a refreshed query's listing and its Select's fetch of
// the entity staged since: the fetch finds the entity gone, so the Select reads the raw
// log again (the mark's was read before the Fold) and takes the point from the raw table.
// Nothing is lost, though every other entity came from the cache.
func TestTSDBBeginReadFoldBeforeFetch(t *testing.T) {
	ctx := context.Background()
	base := time.Date(2024, 5, 23, 0, 0, 0, 0, time.UTC) // a raw period's start (a day)
	clk := clock.New(base.Add(20 * time.Hour))
	plain := *stagingOptions(clk)
	other, svc, _ := dbtest.NewDB(t, &plain)
	fresh := func() *tsdb.DB { return reopen(t, svc, other.Name(), plain) }
	opts := withCaches(plain)
	hook := &foldBeforeFetch{staging: "/" + other.Name() + "w(", fold: func() (int, error) {
		st, err := other.Fold(ctx)
		return st.Entities, err
	}}
	db := reopenWith(t, other.Name(), &opts, func(next policy.Transporter) policy.Transporter { hook.next = next; return hook })

	keys, write := memSeries(t, other)
	from, to := base.Add(19*time.Hour), base.Add(20*time.Hour)
	for at := to.Add(-10 * time.Minute); at.Before(to.Add(-time.Minute)); at = at.Add(15 * time.Second) {
		write(at, float64(at.Unix())) // staged
	}
	mem := tsdb.Matcher{Type: tsdb.MatchEqual, Name: tsdb.MetricName, Value: "mem"}
	refresh := func(what string) {
		t.Helper()
		rctx := db.BeginRead(ctx)
		_, err := db.ReadMark(rctx, from, to)
		require.NoError(t, err)
		hook.armed.Store(what == "folded before the fetch")
		got := selectSamples(rctx, t, db, nil, from, to, mem)
		require.Equal(t, selectSamples(ctx, t, fresh(), nil, from, to, mem), got, what)
	}
	refresh("warm") // every entity cached, and the raw table's (empty) range
	write(to.Add(-30*time.Second), -1)
	clk.Add(2 * time.Hour) // every bucket closed: the Fold takes them all
	refresh("folded before the fetch")
	require.False(t, hook.armed.Load(), "the Select fetched the new entity")
	require.Positive(t, hook.folded, "the Fold moved the staged entities")
	require.Len(t, selectSamples(ctx, t, fresh(), nil, to.Add(-time.Minute), to, mem), len(keys), "the late point of each series, in the answer")
}

// foldBeforeFetch runs a Fold before the first request to the staging table once armed:
// after a read mark, a Select's fetch of what the cache lacks.
type foldBeforeFetch struct {
	next    policy.Transporter
	staging string // what the paths of the staging table's queries hold
	fold    func() (int, error)
	armed   atomic.Bool
	folded  int
}

func (f *foldBeforeFetch) Do(req *http.Request) (*http.Response, error) {
	if strings.Contains(req.URL.Path, f.staging) && f.armed.CompareAndSwap(true, false) {
		n, err := f.fold()
		if err != nil {
			return nil, err
		}
		f.folded = n
	}
	return f.next.Do(req)
}

// A refreshed query whose staged entities changed since (a late point), and whose logs'
// mark moved (a new series), with the staged entities its Selects read prefetched beside
// its read mark (PrefetchStaged): the fetch of the new entity is under way while the mark
// reads the raw log, rather than after it, in as many requests as without (the listing,
// the raw and index logs, the fetch, the index the new series changed), and the Select
// answers the same. It reads nothing on a server just started, nor the index
// for a selector the index cache lacks, or without an index cache.
func TestTSDBPrefetchStagedBesideMark(t *testing.T) {
	ctx := context.Background()
	base := time.Date(2024, 5, 23, 0, 0, 0, 0, time.UTC) // a raw period's start (a day)
	clk := clock.New(base.Add(20 * time.Hour))
	plain := *stagingOptions(clk)
	other, svc, _ := dbtest.NewDB(t, &plain)
	fresh := func() *tsdb.DB { return reopen(t, svc, other.Name(), plain) }
	opts := withCaches(plain)
	probe := &fetchBesideLog{catalog: "/" + other.Name() + "m(", staging: "/" + other.Name() + "w("}
	db := reopenWith(t, other.Name(), &opts, func(next policy.Transporter) policy.Transporter { probe.next = next; return probe })

	_, write := memSeries(t, other)
	from, to := base.Add(19*time.Hour), base.Add(20*time.Hour)
	for at := to.Add(-10 * time.Minute); at.Before(to.Add(-time.Minute)); at = at.Add(15 * time.Second) {
		write(at, float64(at.Unix())) // staged
	}
	mem := []tsdb.Matcher{{Type: tsdb.MatchEqual, Name: tsdb.MetricName, Value: "mem"}}
	refresh := func(what string, prefetch, fetches bool) int64 {
		t.Helper()
		t0 := time.Now()
		rctx := db.BeginRead(ctx)
		probe.begin(fetches)
		var wg sync.WaitGroup
		if prefetch {
			wg.Go(func() {
				assert.NoError(t, db.PrefetchStaged(rctx, from, to, mem, []tsdb.Matcher{{Type: tsdb.MatchEqual, Name: "i", Value: ""}}))
			})
		}
		_, err := db.ReadMark(rctx, from, to)
		require.NoError(t, err)
		wg.Wait()
		got := selectSamples(rctx, t, db, nil, from, to, mem...)
		n := probe.requests.Load()
		t.Logf("%s: %d requests, %v", what, n, time.Since(t0))
		require.Equal(t, selectSamples(ctx, t, fresh(), nil, from, to, mem...), got, what)
		return n
	}
	probe.begin(false)
	require.NoError(t, db.PrefetchStaged(db.BeginRead(ctx), from, to, mem))
	require.Zero(t, probe.requests.Load(), "a server just started (its staging cache cold): nothing")
	refresh("first", false, false)
	refresh("warm", false, false)
	probe.begin(false)
	require.NoError(t, db.PrefetchStaged(db.BeginRead(ctx), from, to, []tsdb.Matcher{{Type: tsdb.MatchEqual, Name: tsdb.MetricName, Value: "other"}}))
	require.Zero(t, probe.requests.Load(), "a selector whose label sets the index cache lacks: no index read")
	noIndexCache := opts
	noIndexCache.IndexCache = nil
	probe2 := &fetchBesideLog{catalog: probe.catalog, staging: probe.staging}
	db2 := reopenWith(t, other.Name(), &noIndexCache, func(next policy.Transporter) policy.Transporter { probe2.next = next; return probe2 })
	selectSamples(ctx, t, db2, nil, from, to, mem...) // its staging cache warm
	probe2.begin(false)
	require.NoError(t, db2.PrefetchStaged(db2.BeginRead(ctx), from, to, mem))
	require.Zero(t, probe2.requests.Load(), "without an index cache: no index read")
	write(to.Add(-30*time.Second), -1) // a late point: a new entity
	// And a change recorded in a log (a new series' index entries), which moves the logs'
	// mark: the mark reads the logs again.
	newSeries := seriesNumbered(t, other, "other", 1)
	require.NoError(t, other.Write(ctx, newSeries[0], tablets.Point{Time: to.Add(-30 * time.Second), Value: 1}))
	clk.Add(30 * time.Second) // past the staging listing's margin
	require.Equal(t, int64(6), refresh("prefetched", true, true),
		"the staging mark (moved), the listing, the two logs, the new entity, the index (a new series in its period)")
	require.True(t, probe.overlapped.Load(), "the new entity fetched while the mark read the raw log")
	refresh("refreshed again", true, false)
	require.Equal(t, int64(1), refresh("and again", true, false), "nothing new: nothing fetched, and the logs' mark stands")
}

// fetchBesideLog counts the requests, and once begun with wait (a fetch to come), holds the
// read of the change logs until a fetch of staging entities has arrived (or a few seconds
// passed): overlapped says whether one did, before the read or while it was held.
type fetchBesideLog struct {
	next             policy.Transporter
	catalog, staging string // what the paths of the catalog's and the staging table's queries hold
	requests         atomic.Int64
	overlapped       atomic.Bool
	mu               sync.Mutex
	wait             bool
	fetched          chan struct{}
}

func (f *fetchBesideLog) begin(wait bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests.Store(0)
	f.overlapped.Store(false)
	f.wait, f.fetched = wait, make(chan struct{})
}

func (f *fetchBesideLog) Do(req *http.Request) (*http.Response, error) {
	f.requests.Add(1)
	f.mu.Lock()
	wait, fetched := f.wait, f.fetched
	isFetch := strings.Contains(req.URL.Path, f.staging) && strings.Contains(req.URL.Query().Get("$filter"), "RowKey ge")
	if isFetch && wait {
		select {
		case <-fetched:
		default:
			close(fetched) // the first fetch: the logs' read, under way or to come, goes on
		}
	}
	f.mu.Unlock()
	if wait && strings.Contains(req.URL.Path, f.catalog) && strings.Contains(req.URL.Path, "PartitionKey='changes'") { // a log's point read
		select {
		case <-fetched:
			f.overlapped.Store(true)
		case <-time.After(3 * time.Second):
		}
	}
	return f.next.Do(req)
}

// memSeries registers 40 series "mem" (label i) in d, and returns their keys and a write of
// a point of each at a time, each series' value v plus its number.
func memSeries(t *testing.T, d *tsdb.DB) ([]string, func(at time.Time, v float64)) {
	t.Helper()
	ctx := context.Background()
	keys := seriesNumbered(t, d, "mem", 40)
	return keys, func(at time.Time, v float64) {
		t.Helper()
		batch := make([]tsdb.SeriesPoints, len(keys))
		for i, k := range keys {
			batch[i] = tsdb.SeriesPoints{Series: k, Points: []tablets.Point{{Time: at, Value: v + float64(i)}}}
		}
		require.NoError(t, d.WriteMany(ctx, batch))
	}
}

// A refreshed query's read mark reads no raw log while the listings find the logs' mark as
// it was: the state read before stands (and a Select alone's). A Fold by another server
// that records in the raw log after that state was read and deletes its entities before
// the listing reads them: the listing finds the logs' mark moved (the Fold's record
// rewrites it before the Fold deletes), so the mark reads the raw log after the listing,
// and the answer has every point. (When the listing before found it moved, the mark reads the logs beside the
// listing, once a listing before the read began found the folds' log where the query's
// finds it: TestTSDBBeginReadShares counts those.)
func TestTSDBReadMarkLogsBesideListing(t *testing.T) {
	ctx := context.Background()
	base := time.Date(2024, 5, 23, 0, 0, 0, 0, time.UTC) // a raw period's start (a day)
	clk := clock.New(base.Add(20 * time.Hour))
	plain := *stagingOptions(clk)
	other, svc, _ := dbtest.NewDB(t, &plain)
	fresh := func() *tsdb.DB { return reopen(t, svc, other.Name(), plain) }
	opts := withCaches(plain)
	hook := &listingBesideLogs{staging: "/" + other.Name() + "w()", catalog: "/" + other.Name() + "m("}
	db := reopenWith(t, other.Name(), &opts, func(next policy.Transporter) policy.Transporter { hook.next = next; return hook })

	_, write := memSeries(t, other)
	from, to := base.Add(19*time.Hour), base.Add(20*time.Hour)
	for at := from; at.Before(to.Add(-time.Minute)); at = at.Add(15 * time.Second) {
		write(at, float64(at.Unix())) // staged
	}
	mem := tsdb.Matcher{Type: tsdb.MatchEqual, Name: tsdb.MetricName, Value: "mem"}
	// refresh is the query API's read (begun, a mark, then the Select), or with alone a
	// Select alone (a remote read's, a rule's).
	alone := false
	refresh := func(what string, during func()) (beside bool, rawLogReads int) {
		t.Helper()
		want := selectSamples(ctx, t, fresh(), nil, from, to, mem)
		hook.arm(during)
		rctx := ctx
		if !alone {
			rctx = db.BeginRead(ctx)
			_, err := db.ReadMark(rctx, from, to)
			require.NoError(t, err)
		}
		got := selectSamples(rctx, t, db, nil, from, to, mem)
		beside, rawLogReads = hook.disarm()
		samples := func(m map[string][]tsdb.Sample) (n int) {
			for _, s := range m {
				n += len(s)
			}
			return n
		}
		require.Equal(t, samples(want), samples(got), what)
		require.Equal(t, want, got, what)
		require.Len(t, got, 40, what)
		return beside, rawLogReads
	}
	refresh("first", nil)
	refresh("warm", nil)
	clk.Add(30 * time.Second) // past the staging listing's margin
	refresh("the logs' mark found as it was", nil)
	_, reads := refresh("refreshed", nil)
	require.Zero(t, reads, "the raw log's state read before stands")

	clk.Add(2 * time.Hour) // every bucket closed: the Fold takes them all
	folded := 0
	_, reads = refresh("a Fold between the logs' state and the listing", func() {
		rep, err := other.Fold(ctx)
		require.NoError(t, err)
		folded = rep.Entities
	})
	require.Positive(t, folded, "the Fold moved the staged entities")
	require.Equal(t, 1, reads, "the raw log read after the listing")

	clk.Add(30 * time.Second)
	refresh("refreshed after the Fold", nil)
	refresh("and again", nil)
	_, reads = refresh("and again, the mark as it was", nil)
	require.Zero(t, reads, "the raw log's state read before stands")

	// A Select alone reads the raw log beside its listing too, and again after it when a
	// Fold recorded in the folds' log meanwhile.
	alone = true
	for at := to.Add(-time.Minute); at.Before(to); at = at.Add(15 * time.Second) {
		write(at, float64(at.Unix())) // staged again
	}
	refresh("a Select alone, warm", nil)
	clk.Add(30 * time.Second)
	refresh("a Select alone", nil)
	_, reads = refresh("a Select alone, the mark as it was", nil)
	require.Zero(t, reads, "the Select's raw log state read before stands")
	clk.Add(2 * time.Hour)
	folded = 0
	_, reads = refresh("a Select alone, a Fold between the log's state and the listing", func() {
		rep, err := other.Fold(ctx)
		require.NoError(t, err)
		folded = rep.Entities
	})
	require.Positive(t, folded, "the Fold moved the staged entities")
	require.Equal(t, 1, reads, "the Select's raw log read after the listing")
}

// listingBesideLogs holds a read's staging listing, once armed, until a point read of a
// raw change log has been answered (listingHold at most: while the logs' mark stands
// none comes), then runs during (if set) before it sends the listing: the logs' read
// beside the listing reads them first. It counts the raw logs' point reads.
type listingBesideLogs struct {
	next             policy.Transporter
	staging, catalog string // what the paths of the staging table's queries and of the catalog's requests hold
	mu               sync.Mutex
	armed            bool
	during           func()
	logRead          chan struct{} // closed when a raw log's read was answered
	beside           bool
	rawLogReads      int
}

// listingHold is how long listingBesideLogs holds a listing for a raw log's read.
const listingHold = 300 * time.Millisecond

func (l *listingBesideLogs) arm(during func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.armed, l.during, l.logRead, l.beside, l.rawLogReads = true, during, make(chan struct{}), false, 0
}

// disarm returns whether the listing held saw a raw log's read answered first, and the
// raw logs' reads since arm.
func (l *listingBesideLogs) disarm() (beside bool, rawLogReads int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.armed = false
	return l.beside, l.rawLogReads
}

func (l *listingBesideLogs) Do(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet {
		return l.next.Do(req)
	}
	if strings.Contains(req.URL.Path, l.catalog+"PartitionKey='changes',RowKey='00") { // a raw log's (the index's are 'i…')
		resp, err := l.next.Do(req)
		l.mu.Lock()
		l.rawLogReads++
		if l.armed && !l.beside {
			select {
			case <-l.logRead:
			default:
				close(l.logRead)
			}
		}
		l.mu.Unlock()
		return resp, err
	}
	// A refresh after one that found nothing changed reads the staging mark first (and
	// lists only when it moved): the change comes before that read, as before a listing.
	if strings.HasSuffix(req.URL.Path, strings.TrimSuffix(l.staging, "()")+"(PartitionKey='!changes',RowKey='m')") {
		l.mu.Lock()
		armed, during := l.armed, l.during
		l.during = nil
		l.mu.Unlock()
		if armed && during != nil {
			during()
		}
	}
	if strings.Contains(req.URL.Path, l.staging) && strings.HasPrefix(req.URL.Query().Get("$select"), "PartitionKey,RowKey,T,U") {
		l.mu.Lock()
		armed, logRead, during := l.armed, l.logRead, l.during
		l.during = nil
		l.mu.Unlock()
		if armed && logRead != nil {
			select {
			case <-logRead:
				l.mu.Lock()
				l.beside = true
				l.mu.Unlock()
			case <-time.After(listingHold):
			}
			if during != nil {
				during()
			}
		}
	}
	return l.next.Do(req)
}
