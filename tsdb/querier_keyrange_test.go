package tsdb

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/chunked"
	"github.com/seed71701133/tablets/filter"
	"github.com/seed71701133/tablets/internal/testkit/azurite"
	"github.com/seed71701133/tablets/tsdb/internal/changelog"
)

// keyRangeDB is a chunked database on Azurite for the tests of reads by ranges of keys: no
// tiers, its clock the test's (clock), its requests checked against Azure's limits and
// counted by reads (the queries of the table it is set to). Its tables of the periods of
// the times given are deleted at the end.
type keyRangeDB struct {
	*DB
	svc   *aztables.ServiceClient
	name  string
	opts  *Options
	reads *tableReads
	clock atomic.Int64 // Unix nanoseconds
}

func newKeyRangeDB(t testing.TB, prefix string, now time.Time, periodsOf ...time.Time) *keyRangeDB {
	t.Helper()
	k := &keyRangeDB{name: fmt.Sprintf("%s%d", prefix, rand.Uint32())}
	k.clock.Store(now.UnixNano())
	checker := azurite.NewChecker(nil, func(v string) { t.Errorf("Azure limit violated: %s", v) })
	k.reads = &tableReads{next: checker}
	var err error
	k.svc, err = azurite.Shared(t).NewServiceClient(&aztables.ClientOptions{ClientOptions: policy.ClientOptions{Transport: k.reads}})
	require.NoError(t, err)
	k.opts = &Options{Tiers: []Tier{}, Now: func() time.Time { return time.Unix(0, k.clock.Load()).UTC() },
		Layout: func(c *aztables.Client) (tablets.Store, error) { return chunked.New(c, nil) }}
	k.DB = k.open(t, false)
	t.Cleanup(func() {
		tables := []string{k.name + "m", k.name + "w"}
		for _, at := range periodsOf {
			p := k.names.PeriodOf(at)
			tables = append(tables, k.names.RawTable(p), k.names.IndexTable(p), k.names.HistTable(p))
		}
		// And the tiers' tables, of whichever period.
		f := filter.And(filter.Ge("TableName", k.name+"t"), filter.Lt("TableName", k.name+"u")).String()
		for p := k.svc.NewListTablesPager(&aztables.ListTablesOptions{Filter: &f}); p.More(); {
			page, err := p.NextPage(context.Background())
			if err != nil {
				break
			}
			for _, tb := range page.Tables {
				tables = append(tables, *tb.Name)
			}
		}
		for _, table := range tables {
			_, _ = k.svc.DeleteTable(context.Background(), table, nil)
		}
	})
	return k
}

// open opens the database again, as another process would (its caches empty), with a raw
// cache if rawCache.
func (k *keyRangeDB) open(t testing.TB, rawCache bool) *DB {
	t.Helper()
	o := *k.opts
	if rawCache {
		o.RawCache = NewRawCache(DefaultRawCacheBytes)
	}
	db, err := Open(context.Background(), k.svc, k.name, &o)
	require.NoError(t, err)
	return db
}

// denseSeries registers n series, label i "000" on, the first dense of them dense_total and
// the others other, and returns count points of each from base, every apart (a series a
// second after the one before, value i*100+j), their keys by label i, and what a read of
// dense_total gives, by label i ("t:v").
func denseSeries(t testing.TB, db *DB, n, dense int, base time.Time, count int, every time.Duration) (points []SeriesPoints, keys map[string]string, want map[string][]string) {
	t.Helper()
	keys, want = map[string]string{}, map[string][]string{}
	for i := range n {
		metric := "dense_total"
		if i >= dense {
			metric = "other"
		}
		label := fmt.Sprintf("%03d", i)
		key, err := db.SeriesOf(context.Background(), Labels{{Name: "__name__", Value: metric}, {Name: "i", Value: label}})
		require.NoError(t, err)
		keys[label] = key
		var pts []tablets.Point
		for j := range count {
			at := base.Add(time.Duration(j)*every + time.Duration(i)*time.Second)
			pts = append(pts, tablets.Point{Time: at, Value: float64(i*100 + j)})
			if metric == "dense_total" {
				want[label] = append(want[label], fmt.Sprintf("%d:%v", at.UnixMilli(), float64(i*100+j)))
			}
		}
		points = append(points, SeriesPoints{Series: key, Points: pts})
	}
	return points, keys, want
}

// selectMetric reads metric's series in [from, to) with q: their samples by label i ("t:v"),
// their labels in the order given, and the queries of k.reads' table meanwhile.
func (k *keyRangeDB) selectMetric(t testing.TB, q *Queryable, metric string, from, to time.Time) (map[string][]string, []Labels, int64) {
	t.Helper()
	return k.selectHinted(t, q, nil, metric, from, to)
}

// selectHinted is selectMetric with hints.
func (k *keyRangeDB) selectHinted(t testing.TB, q *Queryable, hints *SelectHints, metric string, from, to time.Time) (map[string][]string, []Labels, int64) {
	t.Helper()
	k.reads.n.Store(0)
	k.reads.Trace()
	got := map[string][]string{}
	var order []Labels
	for s, err := range q.Querier(from, to).Select(context.Background(), hints, Matcher{Type: MatchEqual, Name: "__name__", Value: metric}) {
		require.NoError(t, err)
		order = append(order, s.Labels)
		it := s.Iterator()
		for it.Next() {
			x := it.At()
			got[s.Labels.Get("i")] = append(got[s.Labels.Get("i")], fmt.Sprintf("%d:%v", x.T, x.F))
		}
		require.NoError(t, it.Err())
	}
	return got, order, k.reads.n.Load()
}

// A Select of many series (160 of a database's 200) reads by the ranges of keys its units
// span: one query of the raw table a unit, across midnight too (where the series' own
// clauses take five a batch of 16), some points still staged; and it gives every series
// exactly, in labels' order. With BatchSize left to its default, a unit holds as many
// batches as half a page of chunks (all 160 series: one query), over six hours and over
// seven days of a database of a day; a BatchSize set is kept (ten units of 16).
func TestSelectManyByKeyRange(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	ctx := context.Background()
	base := querierBase.Add(46 * time.Hour) // two hours to midnight, in a raw period begun that day
	now := base.Add(4 * time.Hour)
	k := newKeyRangeDB(t, "kr", now, base)
	p := k.names.PeriodOf(base)
	k.reads.table = k.names.RawTable(p)
	require.Equal(t, p, k.names.PeriodOf(now), "the test's range is in one raw period")

	// Every 15 minutes for 4 hours, across midnight: 3 hours folded, the last staged.
	all, _, want := denseSeries(t, k.DB, 200, 160, base, 16, 15*time.Minute)
	var folded, staged []SeriesPoints
	for _, sp := range all {
		folded = append(folded, SeriesPoints{Series: sp.Series, Points: sp.Points[:12]})
		staged = append(staged, SeriesPoints{Series: sp.Series, Points: sp.Points[12:]})
	}
	require.NoError(t, k.WriteMany(ctx, folded))
	_, err := k.Fold(ctx)
	require.NoError(t, err)
	require.NoError(t, k.WriteMany(ctx, staged))

	q, err := k.Queryable(&QueryOptions{DisableTiers: true})
	require.NoError(t, err)
	got, order, queries := k.selectMetric(t, q, "dense_total", base, now)
	require.Equal(t, want, got)
	require.True(t, slices.IsSortedFunc(order, CompareLabels), "series in labels' order")
	// One unit (160 series: three batches of 64 hold a chunk or two a series within half a
	// page, costModel.keyRangeBatch), one query of the raw table.
	require.Equal(t, int64(1), queries, "raw table queries")

	// Over seven days, the same: the raw tables begin the day before, and the estimate of
	// a series' chunks counts from there (from seven days back, eight days' partitions a
	// series made a batch a unit: three queries).
	got, _, queries = k.selectMetric(t, q, "dense_total", now.Add(-7*24*time.Hour), now)
	require.Equal(t, want, got, "over seven days")
	require.Equal(t, int64(1), queries, "raw table queries over seven days")

	// BatchSize 16, set: ten units, each one query by the range of its keys (by their
	// clauses across midnight, five queries each).
	q16, err := k.Queryable(&QueryOptions{DisableTiers: true, BatchSize: 16})
	require.NoError(t, err)
	got, order, queries = k.selectMetric(t, q16, "dense_total", base, now)
	require.Equal(t, want, got, "BatchSize 16")
	require.True(t, slices.IsSortedFunc(order, CompareLabels), "series in labels' order")
	require.LessOrEqual(t, queries, int64(10), "raw table queries of ten units")
	require.Greater(t, queries, int64(1), "raw table queries of ten units")
}

// A Select over seven days of a database whose samples began hours ago, in a raw period
// begun days before them, is sized by the samples once the period's change log was read
// (changelog.State.Hull: every change it had began at the first sample): one raw query for
// 160 series, where the first read, which knows no log yet and sizes by the days since
// the period began, cuts more. Every sample is exact both times.
func TestSelectKeyRangeSizedByChanges(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	ctx := context.Background()
	begun := querierBase.Add(24 * time.Hour) // a raw period (seven days) begins
	base := begun.Add(4*24*time.Hour + 10*time.Hour)
	now := base.Add(4 * time.Hour)
	k := newKeyRangeDB(t, "kc", now, base)
	p := k.names.PeriodOf(base)
	require.Equal(t, begun, k.names.Start(p), "the raw period began days before the samples")
	require.Equal(t, p, k.names.PeriodOf(now))
	k.reads.table = k.names.RawTable(p)

	all, _, want := denseSeries(t, k.DB, 200, 160, base, 16, 15*time.Minute) // 4 hours
	require.NoError(t, k.WriteMany(ctx, all))
	k.clock.Store(now.Add(30 * time.Minute).UnixNano()) // the Fold folds them
	rep, err := k.Fold(ctx)
	require.NoError(t, err)
	require.Equal(t, 200*16, rep.Points, "points folded")
	// More changes than the log's ranges keep (as the many direct writes of a backfill
	// make): the hull the log's entity keeps still says where the samples begin.
	for i := range changelog.Kept + 6 {
		at := base.Add(time.Duration(i) * time.Minute)
		require.NoError(t, k.changes.Record(ctx, map[uint64]changelog.Range{p: {From: at.UnixMilli(), To: at.Add(time.Minute).UnixMilli()}}))
	}

	// Other processes, their caches empty: each knows no table and no log yet.
	weekAgo := now.Add(-7 * 24 * time.Hour)
	q, err := k.open(t, true).Queryable(&QueryOptions{DisableTiers: true})
	require.NoError(t, err)
	got, _, queries := k.selectMetric(t, q, "dense_total", weekAgo, now)
	require.Equal(t, want, got, "a read knowing no log")
	require.Greater(t, queries, int64(1), "raw table queries of a read knowing no log, sized by the days since the period began")

	// A read of other series (40, by their clauses) reads the period's log, which the
	// read over seven days then sizes by.
	q, err = k.open(t, true).Queryable(&QueryOptions{DisableTiers: true})
	require.NoError(t, err)
	_, _, _ = k.selectMetric(t, q, "other", now.Add(-time.Hour), now)
	got, _, queries = k.selectMetric(t, q, "dense_total", weekAgo, now)
	require.Equal(t, want, got, "a read knowing the log")
	require.Equal(t, int64(1), queries, "raw table queries of a read knowing the log, sized by the samples' four hours:\n%s", k.reads.Trace())
}

// A raw period whose log had no change has no table: a read of a range reaching into it
// (a 7-day panel of a database of days) finds it gone once, and caches it empty at
// generation 0 (package raw's cache), so that the next read asks nothing of it. A point
// written there later, by another process, shows in the next read all the same: staged,
// then folded (its change recorded, and the period read again).
func TestSelectCachesTableNeverMade(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	ctx := context.Background()
	begun := querierBase.Add(24 * time.Hour) // a raw period (seven days) begins
	base := begun.Add(2*24*time.Hour + 10*time.Hour)
	now := base.Add(time.Hour)
	p0 := begun.Add(-time.Second) // in the period before
	k := newKeyRangeDB(t, "kn", now, base, p0)
	require.Equal(t, begun, k.names.Start(k.names.PeriodOf(base)))
	k.reads.table = k.names.RawTable(k.names.PeriodOf(p0)) // the period before's

	all, keys, want := denseSeries(t, k.DB, 160, 160, base, 4, 15*time.Minute) // an hour
	require.NoError(t, k.WriteMany(ctx, all))
	k.clock.Store(now.Add(30 * time.Minute).UnixNano())
	_, err := k.Fold(ctx)
	require.NoError(t, err)

	q, err := k.open(t, true).Queryable(&QueryOptions{DisableTiers: true})
	require.NoError(t, err)
	read := func() (map[string][]string, int64) {
		got, _, queries := k.selectMetric(t, q, "dense_total", now.Add(-7*24*time.Hour), now)
		return got, queries
	}
	got, queries := read()
	require.Equal(t, want, got, "the first read")
	require.Positive(t, queries, "queries of the period before's table, which was never made")
	got, queries = read()
	require.Equal(t, want, got, "the second read")
	require.Zero(t, queries, "queries of the period before's table, known empty at generation 0")

	// Another process writes a point in the period before: staged, it shows; folded into
	// the table it makes there, it shows again (the period's log moved: read again).
	late := base.Add(-3 * 24 * time.Hour)
	require.Equal(t, k.names.PeriodOf(p0), k.names.PeriodOf(late))
	require.NoError(t, k.WriteMany(ctx, []SeriesPoints{{Series: keys["007"], Points: []tablets.Point{{Time: late, Value: -1}}}}))
	want["007"] = append([]string{fmt.Sprintf("%d:%v", late.UnixMilli(), -1.0)}, want["007"]...)
	got, _ = read()
	require.Equal(t, want, got, "a point staged in the period before")
	k.clock.Store(now.Add(time.Hour).UnixNano())
	rep, err := k.Fold(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, rep.Points, "the late point folded")
	got, queries = read()
	require.Equal(t, want, got, "the point folded into the period before's table")
	require.Positive(t, queries, "queries of the period before's table once its log moved")
}

// BenchmarkSelectWeekOfYoungDatabase: a dashboard of a database 40 minutes old, in a raw
// period begun days before (TABLETS_BENCH_SERIES series, 2,000 by default, a point every
// 15 s, folded every minute as a server does): a Select of all of them over the last hour
// and over the last seven days, by a process that read the hour before the week (as a
// dashboard's panels come), first (its caches empty) and again (refresh). Per Select: the
// account's requests and bytes, counted at the transport, and the raw table's queries.
func BenchmarkSelectWeekOfYoungDatabase(b *testing.B) {
	ctx := context.Background()
	begun := querierBase.Add(24 * time.Hour) // a raw period (seven days) begins
	base := begun.Add(4*24*time.Hour + 10*time.Hour)
	now := base.Add(41 * time.Minute)
	k := newKeyRangeDB(b, "kb", base, base, begun.Add(-time.Second))
	k.reads.table = k.names.RawTable(k.names.PeriodOf(base))
	n := 2000
	if v, err := strconv.Atoi(os.Getenv("TABLETS_BENCH_SERIES")); err == nil && v > 0 {
		n = v
	}
	all, _, _ := denseSeries(b, k.DB, n, n, base, 160, 15*time.Second)
	for m := range 40 { // a minute's points, then a Fold of what is sealed
		var batch []SeriesPoints
		for _, sp := range all {
			batch = append(batch, SeriesPoints{Series: sp.Series, Points: sp.Points[4*m : 4*m+4]})
		}
		k.clock.Store(base.Add(time.Duration(m)*time.Minute + 59*time.Second).UnixNano())
		require.NoError(b, k.WriteMany(ctx, batch))
		k.clock.Store(base.Add(time.Duration(m+1)*time.Minute + 30*time.Second).UnixNano())
		_, err := k.Fold(ctx)
		require.NoError(b, err)
	}
	checker := k.reads.next.(*azurite.Checker)
	report := func(b *testing.B, st azurite.Stats, queries int64) {
		n := float64(b.N)
		b.ReportMetric(float64(st.Requests)/n, "account-requests/op")
		b.ReportMetric(float64(st.RequestBytes+st.ResponseBytes)/n, "account-bytes/op")
		b.ReportMetric(float64(queries)/n, "raw-queries/op")
	}
	spans := []struct {
		name string
		span time.Duration
	}{{"1h", time.Hour}, {"7d", 7 * 24 * time.Hour}}
	b.Run("first", func(b *testing.B) {
		for _, sp := range spans {
			b.Run(sp.name, func(b *testing.B) {
				var st azurite.Stats
				var queries int64
				for range b.N {
					b.StopTimer()
					q, err := k.open(b, true).Queryable(nil)
					require.NoError(b, err)
					if sp.name == "7d" { // the hour's panel came first
						_, _, _ = k.selectMetric(b, q, "dense_total", now.Add(-time.Hour), now)
					}
					checker.Reset()
					b.StartTimer()
					_, _, n := k.selectMetric(b, q, "dense_total", now.Add(-sp.span), now)
					b.StopTimer()
					queries += n
					st = addCheckerStats(st, checker.Stats())
				}
				report(b, st, queries)
			})
		}
	})
	q, err := k.open(b, true).Queryable(nil)
	require.NoError(b, err)
	b.Run("refresh", func(b *testing.B) {
		for _, sp := range spans {
			b.Run(sp.name, func(b *testing.B) {
				_, _, _ = k.selectMetric(b, q, "dense_total", now.Add(-sp.span), now) // the first
				checker.Reset()
				var queries int64
				b.ResetTimer()
				for range b.N {
					_, _, n := k.selectMetric(b, q, "dense_total", now.Add(-sp.span), now)
					queries += n
				}
				b.StopTimer()
				report(b, checker.Stats(), queries)
			})
		}
	})
}

// addCheckerStats sums the counts of two Stats.
func addCheckerStats(a, b azurite.Stats) azurite.Stats {
	a.Requests += b.Requests
	a.RequestBytes += b.RequestBytes
	a.ResponseBytes += b.ResponseBytes
	return a
}

// A Select through an index cache gives its series in labels' order: from one period's
// index (the cache keeps a query's label sets sorted, and the Select takes them as they
// are), and from two, the second adding series between the first's (sorted again), on the
// read that fills the cache and on the one that hits it, the same series as a DB without.
func TestSelectOrderFromIndexCache(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	ctx := context.Background()
	const week = 7 * 24 * time.Hour
	second := time.Unix(querierBase.Unix()/int64(week/time.Second)*int64(week/time.Second), 0).UTC().Add(week)
	base, now := second.Add(-2*time.Hour), second.Add(2*time.Hour)
	k := newKeyRangeDB(t, "ko", now, base, second)
	require.NotEqual(t, k.names.PeriodOf(base), k.names.PeriodOf(second), "the range spans two raw periods")
	var first, both []SeriesPoints
	for i := range 200 {
		key, err := k.SeriesOf(ctx, Labels{{Name: "__name__", Value: "ord_total"}, {Name: "i", Value: fmt.Sprintf("%03d", i)}})
		require.NoError(t, err)
		if i%2 == 0 { // the first period's index holds the even ones
			first = append(first, SeriesPoints{Series: key, Points: []tablets.Point{{Time: base.Add(time.Minute), Value: 1}}})
		}
		both = append(both, SeriesPoints{Series: key, Points: []tablets.Point{{Time: second.Add(time.Minute), Value: 2}}})
	}
	require.NoError(t, k.WriteMany(ctx, first))
	require.NoError(t, k.WriteMany(ctx, both))
	_, err := k.Fold(ctx)
	require.NoError(t, err)

	o := *k.opts
	o.IndexCache = NewIndexCache(1 << 20)
	cached, err := Open(ctx, k.svc, k.name, &o)
	require.NoError(t, err)
	for _, r := range [][2]time.Time{{second, now}, {base, now}} {
		uq, err := k.Queryable(&QueryOptions{DisableTiers: true})
		require.NoError(t, err)
		want, wantOrder, _ := k.selectMetric(t, uq, "ord_total", r[0], r[1])
		require.True(t, slices.IsSortedFunc(wantOrder, CompareLabels))
		q, err := cached.Queryable(&QueryOptions{DisableTiers: true})
		require.NoError(t, err)
		for read := range 2 { // fills the cache, then hits it
			var infos []Labels
			for s, err := range cached.Select(ctx, r[0], r[1], Matcher{Type: MatchEqual, Name: "__name__", Value: "ord_total"}) {
				require.NoError(t, err)
				infos = append(infos, s.Labels)
			}
			require.Len(t, infos, 200, "read %d of %v: the index's answer, each series once", read, r)
			require.True(t, slices.IsSortedFunc(infos, CompareLabels), "read %d of %v: the index's answer in labels' order", read, r)
			got, order, _ := k.selectMetric(t, q, "ord_total", r[0], r[1])
			require.Equal(t, want, got, "read %d of %v", read, r)
			require.Len(t, order, 200)
			require.True(t, slices.IsSortedFunc(order, CompareLabels), "read %d of %v: series in labels' order", read, r)
		}
	}
	require.Positive(t, o.IndexCache.Stats().Hits)
}
