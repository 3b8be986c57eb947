package tsdb

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/chunked"
	"github.com/seed71701133/tablets/internal/testkit/azurite"
)

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
	name := fmt.Sprintf("kr%d", rand.Uint32())
	checker := azurite.NewChecker(nil, func(v string) { t.Errorf("Azure limit violated: %s", v) })
	raw := &tableReads{next: checker}
	svc, err := azurite.Shared(t).NewServiceClient(&aztables.ClientOptions{ClientOptions: policy.ClientOptions{Transport: raw}})
	require.NoError(t, err)
	db, err := Open(ctx, svc, name, &Options{Tiers: []Tier{}, Now: func() time.Time { return now },
		Layout: func(c *aztables.Client) (tablets.Store, error) { return chunked.New(c, nil) }})
	require.NoError(t, err)
	p := db.names.PeriodOf(base)
	raw.table = db.names.RawTable(p)
	require.Equal(t, p, db.names.PeriodOf(now), "the test's range is in one raw period")
	t.Cleanup(func() {
		for _, table := range []string{name + "m", name + "w", db.names.RawTable(p), db.names.IndexTable(p), db.names.HistTable(p)} {
			_, _ = svc.DeleteTable(context.Background(), table, nil)
		}
	})

	want := map[string][]string{} // of dense_total, by label i: "t:v"
	var folded, staged []SeriesPoints
	for i := range 200 {
		metric := "dense_total"
		if i >= 160 {
			metric = "other"
		}
		label := fmt.Sprintf("%03d", i)
		key, err := db.SeriesOf(ctx, Labels{{Name: "__name__", Value: metric}, {Name: "i", Value: label}})
		require.NoError(t, err)
		var pts []tablets.Point
		for j := range 16 { // every 15 minutes for 4 hours, across midnight
			at := base.Add(time.Duration(j)*15*time.Minute + time.Duration(i)*time.Second)
			pts = append(pts, tablets.Point{Time: at, Value: float64(i*100 + j)})
			if metric == "dense_total" {
				want[label] = append(want[label], fmt.Sprintf("%d:%v", at.UnixMilli(), float64(i*100+j)))
			}
		}
		folded = append(folded, SeriesPoints{Series: key, Points: pts[:12]})
		staged = append(staged, SeriesPoints{Series: key, Points: pts[12:]})
	}
	require.NoError(t, db.WriteMany(ctx, folded))
	_, err = db.Fold(ctx)
	require.NoError(t, err)
	require.NoError(t, db.WriteMany(ctx, staged))

	read := func(q *Queryable, from time.Time) (map[string][]string, []Labels, int64) {
		raw.n.Store(0)
		got := map[string][]string{}
		var order []Labels
		for s, err := range q.Querier(from, now).Select(ctx, nil, Matcher{Type: MatchEqual, Name: "__name__", Value: "dense_total"}) {
			require.NoError(t, err)
			order = append(order, s.Labels)
			it := s.Iterator()
			for it.Next() {
				x := it.At()
				got[s.Labels.Get("i")] = append(got[s.Labels.Get("i")], fmt.Sprintf("%d:%v", x.T, x.F))
			}
			require.NoError(t, it.Err())
		}
		return got, order, raw.n.Load()
	}
	q, err := db.Queryable(&QueryOptions{DisableTiers: true})
	require.NoError(t, err)
	got, order, queries := read(q, base)
	require.Equal(t, want, got)
	require.True(t, slices.IsSortedFunc(order, CompareLabels), "series in labels' order")
	// One unit (160 series: three batches of 64 hold a chunk or two a series within half a
	// page, costModel.keyRangeBatch), one query of the raw table.
	require.Equal(t, int64(1), queries, "raw table queries")

	// Over seven days, the same: the raw tables begin the day before, and the estimate of
	// a series' chunks counts from there (from seven days back, eight days' partitions a
	// series made a batch a unit: three queries).
	got, _, queries = read(q, now.Add(-7*24*time.Hour))
	require.Equal(t, want, got, "over seven days")
	require.Equal(t, int64(1), queries, "raw table queries over seven days")

	// BatchSize 16, set: ten units, each one query by the range of its keys (by their
	// clauses across midnight, five queries each).
	q16, err := db.Queryable(&QueryOptions{DisableTiers: true, BatchSize: 16})
	require.NoError(t, err)
	got, order, queries = read(q16, base)
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
	var clock atomic.Int64 // the writes' arrival, then a time the Fold folds them by
	clock.Store(now.UnixNano())
	name := fmt.Sprintf("kc%d", rand.Uint32())
	checker := azurite.NewChecker(nil, func(v string) { t.Errorf("Azure limit violated: %s", v) })
	raw := &tableReads{next: checker}
	svc, err := azurite.Shared(t).NewServiceClient(&aztables.ClientOptions{ClientOptions: policy.ClientOptions{Transport: raw}})
	require.NoError(t, err)
	opts := &Options{Tiers: []Tier{}, Now: func() time.Time { return time.Unix(0, clock.Load()).UTC() },
		Layout: func(c *aztables.Client) (tablets.Store, error) { return chunked.New(c, nil) }}
	db, err := Open(ctx, svc, name, opts)
	require.NoError(t, err)
	p := db.names.PeriodOf(base)
	require.Equal(t, begun, db.names.Start(p), "the raw period began days before the samples")
	require.Equal(t, p, db.names.PeriodOf(now))
	raw.table = db.names.RawTable(p)
	t.Cleanup(func() {
		for _, table := range []string{name + "m", name + "w", db.names.RawTable(p), db.names.IndexTable(p), db.names.HistTable(p)} {
			_, _ = svc.DeleteTable(context.Background(), table, nil)
		}
	})

	want := map[string][]string{}
	var all []SeriesPoints
	for i := range 200 {
		metric := "dense_total"
		if i >= 160 {
			metric = "other"
		}
		label := fmt.Sprintf("%03d", i)
		key, err := db.SeriesOf(ctx, Labels{{Name: "__name__", Value: metric}, {Name: "i", Value: label}})
		require.NoError(t, err)
		var pts []tablets.Point
		for j := range 16 { // every 15 minutes for 4 hours
			at := base.Add(time.Duration(j)*15*time.Minute + time.Duration(i)*time.Second)
			pts = append(pts, tablets.Point{Time: at, Value: float64(i*100 + j)})
			if metric == "dense_total" {
				want[label] = append(want[label], fmt.Sprintf("%d:%v", at.UnixMilli(), float64(i*100+j)))
			}
		}
		all = append(all, SeriesPoints{Series: key, Points: pts})
	}
	require.NoError(t, db.WriteMany(ctx, all))
	clock.Store(now.Add(30 * time.Minute).UnixNano())
	rep, err := db.Fold(ctx)
	require.NoError(t, err)
	require.Equal(t, 200*16, rep.Points, "points folded")
	require.NoError(t, err)

	// Other processes, their caches empty: each knows no table and no log yet.
	read := func(db *DB, metric string, from time.Time) (map[string][]string, int64) {
		q, err := db.Queryable(&QueryOptions{DisableTiers: true})
		require.NoError(t, err)
		raw.n.Store(0)
		got := map[string][]string{}
		for s, err := range q.Querier(from, now).Select(ctx, nil, Matcher{Type: MatchEqual, Name: "__name__", Value: metric}) {
			require.NoError(t, err)
			it := s.Iterator()
			for it.Next() {
				x := it.At()
				got[s.Labels.Get("i")] = append(got[s.Labels.Get("i")], fmt.Sprintf("%d:%v", x.T, x.F))
			}
			require.NoError(t, it.Err())
		}
		return got, raw.n.Load()
	}
	reader := func() *DB {
		o := *opts
		o.RawCache = NewRawCache(DefaultRawCacheBytes)
		db, err := Open(ctx, svc, name, &o)
		require.NoError(t, err)
		return db
	}
	weekAgo := now.Add(-7 * 24 * time.Hour)
	got, queries := read(reader(), "dense_total", weekAgo)
	require.Equal(t, want, got, "a read knowing no log")
	require.Greater(t, queries, int64(1), "raw table queries of a read knowing no log, sized by the days since the period began")

	// A read of other series (40, by their clauses) reads the period's log, which the
	// read over seven days then sizes by.
	r := reader()
	_, _ = read(r, "other", now.Add(-time.Hour))
	got, queries = read(r, "dense_total", weekAgo)
	require.Equal(t, want, got, "a read knowing the log")
	require.Equal(t, int64(1), queries, "raw table queries of a read knowing the log, sized by the samples' four hours")
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
	var clock atomic.Int64
	clock.Store(now.UnixNano())
	name := fmt.Sprintf("kn%d", rand.Uint32())
	checker := azurite.NewChecker(nil, func(v string) { t.Errorf("Azure limit violated: %s", v) })
	before := &tableReads{next: checker} // the reads of the period before's raw table
	svc, err := azurite.Shared(t).NewServiceClient(&aztables.ClientOptions{ClientOptions: policy.ClientOptions{Transport: before}})
	require.NoError(t, err)
	opts := &Options{Tiers: []Tier{}, Now: func() time.Time { return time.Unix(0, clock.Load()).UTC() },
		Layout: func(c *aztables.Client) (tablets.Store, error) { return chunked.New(c, nil) }}
	writer, err := Open(ctx, svc, name, opts)
	require.NoError(t, err)
	p := writer.names.PeriodOf(base)
	require.Equal(t, begun, writer.names.Start(p))
	p0 := writer.names.PeriodOf(begun.Add(-time.Second))
	before.table = writer.names.RawTable(p0)
	t.Cleanup(func() {
		for _, table := range []string{name + "m", name + "w", writer.names.RawTable(p), writer.names.IndexTable(p), writer.names.HistTable(p),
			writer.names.RawTable(p0), writer.names.IndexTable(p0), writer.names.HistTable(p0)} {
			_, _ = svc.DeleteTable(context.Background(), table, nil)
		}
	})

	want := map[string][]string{}
	var all []SeriesPoints
	keys := map[string]string{}
	for i := range 160 {
		label := fmt.Sprintf("%03d", i)
		key, err := writer.SeriesOf(ctx, Labels{{Name: "__name__", Value: "dense_total"}, {Name: "i", Value: label}})
		require.NoError(t, err)
		keys[label] = key
		var pts []tablets.Point
		for j := range 4 { // every 15 minutes for an hour
			at := base.Add(time.Duration(j)*15*time.Minute + time.Duration(i)*time.Second)
			pts = append(pts, tablets.Point{Time: at, Value: float64(i*100 + j)})
			want[label] = append(want[label], fmt.Sprintf("%d:%v", at.UnixMilli(), float64(i*100+j)))
		}
		all = append(all, SeriesPoints{Series: key, Points: pts})
	}
	require.NoError(t, writer.WriteMany(ctx, all))
	clock.Store(now.Add(30 * time.Minute).UnixNano())
	_, err = writer.Fold(ctx)
	require.NoError(t, err)

	o := *opts
	o.RawCache = NewRawCache(DefaultRawCacheBytes)
	reader, err := Open(ctx, svc, name, &o)
	require.NoError(t, err)
	q, err := reader.Queryable(&QueryOptions{DisableTiers: true})
	require.NoError(t, err)
	read := func() (map[string][]string, int64) {
		before.n.Store(0)
		got := map[string][]string{}
		for s, err := range q.Querier(now.Add(-7*24*time.Hour), now).Select(ctx, nil, Matcher{Type: MatchEqual, Name: "__name__", Value: "dense_total"}) {
			require.NoError(t, err)
			it := s.Iterator()
			for it.Next() {
				x := it.At()
				got[s.Labels.Get("i")] = append(got[s.Labels.Get("i")], fmt.Sprintf("%d:%v", x.T, x.F))
			}
			require.NoError(t, it.Err())
		}
		return got, before.n.Load()
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
	require.Equal(t, p0, writer.names.PeriodOf(late))
	require.NoError(t, writer.WriteMany(ctx, []SeriesPoints{{Series: keys["007"], Points: []tablets.Point{{Time: late, Value: -1}}}}))
	want["007"] = append([]string{fmt.Sprintf("%d:%v", late.UnixMilli(), -1.0)}, want["007"]...)
	got, _ = read()
	require.Equal(t, want, got, "a point staged in the period before")
	clock.Store(now.Add(time.Hour).UnixNano())
	rep, err := writer.Fold(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, rep.Points, "the late point folded")
	got, queries = read()
	require.Equal(t, want, got, "the point folded into the period before's table")
	require.Positive(t, queries, "queries of the period before's table once its log moved")
}
