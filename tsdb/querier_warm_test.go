package tsdb

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
)

// A warm-up scans the raw table once, by ranges of keys, and caches every series' points
// as the reads of a dashboard would: the Selects after it (of two metrics, the whole range)
// answer exactly without a query of the raw table. A point written after the warm-up (a
// late write, recorded in the change log) is read again, not hidden by the warm entry.
func TestWarmAnswersTheFirstSelects(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	ctx := context.Background()
	k, base, now, want := foldedDense(t, "wm")
	truth, _, _ := k.selectMetric(t, mustQueryable(t, k.DB), "other", base, now) // uncached
	require.Len(t, truth, 40)

	db := k.openCached(t)
	_, err := db.Warm(ctx, now.Add(time.Minute))
	require.ErrorIs(t, err, tablets.ErrInvalidTime, "a warm-up from after now")

	k.reads.n.Store(0)
	k.reads.second = k.names.IndexTable(k.names.PeriodOf(now))
	rep, err := db.Warm(ctx, base)
	require.NoError(t, err)
	scans := k.reads.n.Load()
	require.Positive(t, k.reads.nSecond.Load(), "the index read into the registrations")
	t.Logf("warm-up: %+v in %d queries of the raw table", rep, scans)
	require.Equal(t, WarmReport{Series: 200, Points: 200 * 16, Bytes: rep.Bytes, Metrics: 2}, rep, "every series, every point, not full; both metrics")
	require.Positive(t, rep.Bytes)
	require.EqualValues(t, db.opts.RawCache.Stats().Bytes, rep.Bytes, "the bytes the cache holds, all the warm-up's")
	require.LessOrEqual(t, scans, int64(2), "one scan of the table (200 series, a page)")

	// The table holds nothing older than the day of base, the first of its period: the
	// entries begin at the period's start, and a read from there (a 7-day panel's) hits.
	periodStart := k.names.Start(k.names.PeriodOf(base))
	require.True(t, periodStart.Before(base))
	q := mustQueryable(t, db)
	k.reads.n.Store(0)
	k.reads.nSecond.Store(0)
	got, err := selectDense(ctx, q, periodStart, now)
	require.NoError(t, err)
	require.Equal(t, want, got)
	require.Zero(t, k.reads.n.Load(), "raw table queries of dense_total after the warm-up")
	others, _, reads := k.selectMetric(t, q, "other", periodStart, now)
	require.Equal(t, truth, others)
	require.Zero(t, reads, "raw table queries of other after the warm-up")
	require.Zero(t, k.reads.nSecond.Load(), "index queries of the Selects after the warm-up")
	require.EqualValues(t, 2, db.opts.IndexCache.Stats().Hits, "each metric's Select, from the cache")
	require.EqualValues(t, 200, db.opts.RawCache.Stats().Hits)

	// A second warm-up finds every series held and caches none again.
	again, err := db.Warm(ctx, base)
	require.NoError(t, err)
	require.Zero(t, again.Series, "series the cache held already")

	// A late point into the raw table (a direct write records its change) is read.
	late := base.Add(90*time.Minute + 7*time.Second)
	key := seriesOfLabel(t, db, "dense_total", "005")
	require.NoError(t, db.Write(ctx, key, tablets.Point{Time: late, Value: -1}))
	got, err = selectDense(ctx, q, base, now)
	require.NoError(t, err)
	require.Contains(t, got["005"], fmt.Sprintf("%d:-1", late.UnixMilli()), "the late point, past the warm entry")
	require.Len(t, got["005"], 17)

	// The registrations were primed: a write of the 200 series (which a process that did
	// not know them would prime its registrations for) reads no index.
	k.reads.nSecond.Store(0)
	var batch []SeriesPoints
	for i := range 200 {
		metric := "dense_total"
		if i >= 160 {
			metric = "other"
		}
		batch = append(batch, SeriesPoints{Series: seriesOfLabel(t, db, metric, fmt.Sprintf("%03d", i)), Points: []tablets.Point{{Time: now.Add(-time.Minute), Value: 1}}})
	}
	require.NoError(t, db.WriteMany(ctx, batch))
	require.Zero(t, k.reads.nSecond.Load(), "index queries of a write of series the warm-up primed")

	// A series registered after the warm-up shows in the next Select: the index log moved
	// past the warmed label sets' generation.
	fresh := seriesOfLabel(t, db, "dense_total", "new")
	require.NoError(t, db.WriteMany(ctx, []SeriesPoints{{Series: fresh, Points: []tablets.Point{{Time: now.Add(-time.Minute), Value: 7}}}}))
	got, err = selectDense(ctx, q, periodStart, now)
	require.NoError(t, err)
	require.Equal(t, []string{fmt.Sprintf("%d:7", now.Add(-time.Minute).UnixMilli())}, got["new"], "the series registered after the warm-up")
}

// openCached opens the database again with a raw cache and an index cache.
func (k *keyRangeDB) openCached(t testing.TB) *DB {
	t.Helper()
	o := *k.opts
	o.RawCache, o.IndexCache = NewRawCache(DefaultRawCacheBytes), NewIndexCache(DefaultIndexCacheBytes)
	db, err := Open(context.Background(), k.svc, k.name, &o)
	require.NoError(t, err)
	return db
}

// seriesOfLabel is the key of metric's series of label i.
func seriesOfLabel(t *testing.T, db *DB, metric, i string) string {
	t.Helper()
	key, err := db.SeriesOf(context.Background(), Labels{{Name: "__name__", Value: metric}, {Name: "i", Value: i}})
	require.NoError(t, err)
	return key
}

// Without a raw cache a warm-up caches no samples, and reads nothing but the index (of a
// database without series: one query, of a table that does not exist).
func TestWarmWithoutCache(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	k := newKeyRangeDB(t, "wn", querierBase.Add(time.Hour))
	before := k.reads.all.Load()
	rep, err := k.Warm(context.Background(), querierBase)
	require.NoError(t, err)
	require.Zero(t, rep)
	require.Equal(t, before+1, k.reads.all.Load(), "requests of a warm-up without a cache")
}

// A warm-up from a time in a day after the table's first (the table holds older chunks)
// caches from that time only: a read from further back reads the table, exactly.
func TestWarmOfAnOlderTable(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	ctx := context.Background()
	k, base, now, want := foldedDense(t, "wo")
	db := k.open(t, true)
	late := now.Add(-30 * time.Minute) // after midnight: base's day holds older chunks
	require.NotEqual(t, base.Truncate(24*time.Hour), late.Truncate(24*time.Hour))
	rep, err := db.Warm(ctx, late)
	require.NoError(t, err)
	require.Equal(t, 200, rep.Series)
	require.Less(t, rep.Points, 200*16, "the points from late on only")

	q := mustQueryable(t, db)
	k.reads.n.Store(0)
	got, err := selectDense(ctx, q, late, now)
	require.NoError(t, err)
	require.Zero(t, k.reads.n.Load(), "raw table queries of the warmed range")
	for i, pts := range got {
		require.Subset(t, want[i], pts)
	}
	got, err = selectDense(ctx, q, base, now)
	require.NoError(t, err)
	require.Equal(t, want, got, "the whole range, read where the warm-up did not cache")
	require.Positive(t, k.reads.n.Load(), "raw table queries of the range before the warm-up's")
}

// A table whose chunks all lie in days after its period's first (a database begun in the
// middle of a period) is warmed from its period's start: a read from there (a 7-day
// panel's) hits, without a query of the table.
func TestWarmOfAYoungTable(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	ctx := context.Background()
	k, base, now, want := foldedDenseFrom(t, "wy", querierBase.Add(58*time.Hour)) // the period's second day, 10:00
	periodStart := k.names.Start(k.names.PeriodOf(base))
	require.Equal(t, 24*time.Hour, base.Truncate(24*time.Hour).Sub(periodStart), "base in the period's second day")
	db := k.open(t, true)
	rep, err := db.Warm(ctx, now.Add(-time.Hour))
	require.NoError(t, err)
	require.Equal(t, WarmReport{Series: 200, Points: 200 * 16, Bytes: rep.Bytes}, rep, "every point of the partition, older than from too (no index cache)")

	q := mustQueryable(t, db)
	k.reads.n.Store(0)
	got, err := selectDense(ctx, q, periodStart, now)
	require.NoError(t, err)
	require.Equal(t, want, got)
	require.Zero(t, k.reads.n.Load(), "raw table queries of the period after the warm-up")
}

// A warm-up brings the staged entities of the last warmStaged into the staging cache, whole,
// with one query of the table and a listing: a Select of the staged minutes after it
// fetches none of them (it lists only what was written since), and answers exactly. A
// write by another process after the warm-up (new entities) is fetched by the next Select,
// and only it.
func TestWarmFillsTheStagingCache(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	ctx := context.Background()
	now := querierBase.Add(47 * time.Hour)
	base := now.Add(-40 * time.Minute)
	k := newKeyRangeDB(t, "ws", now, base)
	k.reads.table = k.name + "w" // the staging table
	all, keys, want := denseSeries(t, k.DB, 120, 100, base, 8, 5*time.Minute)
	require.NoError(t, k.WriteMany(ctx, all)) // staged: the clock is past none of their buckets
	db, q := k.openStagingCached(t)

	fetches := k.countStagingFetches()
	rep, err := db.Warm(ctx, now.Add(-2*time.Hour))
	require.NoError(t, err)
	require.Positive(t, rep.Staged, "staging entities warmed")
	require.Equal(t, [2]int{1, 0}, fetches(), "the warm-up's fetches whole and of columns: one query of the table")
	warmed := db.opts.StagingCache.Stats().Bytes
	require.Positive(t, warmed)

	got, err := selectDense(ctx, q, base, now)
	require.NoError(t, err)
	require.Equal(t, want, got)
	require.Equal(t, [2]int{0, 0}, fetches(), "fetches whole and of columns of the Select after the warm-up")

	// Another process writes a point of a series: its entity is new, fetched by the next
	// Select, and the point is in the answer.
	late := now.Add(-time.Minute)
	require.NoError(t, k.WriteMany(ctx, []SeriesPoints{{Series: keys["007"], Points: []tablets.Point{{Time: late, Value: -7}}}}))
	got, err = selectDense(ctx, q, base, now)
	require.NoError(t, err)
	require.Equal(t, append(slices.Clone(want["007"]), fmt.Sprintf("%d:-7", late.UnixMilli())), got["007"], "the point written after the warm-up")
	f := fetches()
	require.Equal(t, 1, f[0]+f[1], "fetches of the Select after another process's write: its entity's")

	// Staged samples older than warmStaged are left to the queries: a database whose
	// staged samples all are warms none of them.
	k2 := newKeyRangeDB(t, "wo", now, base)
	old, _, _ := denseSeries(t, k2.DB, 20, 20, now.Add(-3*time.Hour), 4, 5*time.Minute)
	require.NoError(t, k2.WriteMany(ctx, old))
	db2, _ := k2.openStagingCached(t)
	rep, err = db2.Warm(ctx, now.Add(-4*time.Hour))
	require.NoError(t, err)
	require.Zero(t, rep.Staged, "staging entities warmed, of samples older than warmStaged")
	require.Zero(t, db2.opts.StagingCache.Stats().Bytes)
}

// A warm-up reads the histogram samples of the series the index found with histogram
// samples (their tables have no scan), and the same series' float points (none): a Select
// of them after it, over the last hour, reads neither table, and answers as a process
// without caches does.
func TestWarmReadsHistogramSeries(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	ctx := context.Background()
	now := time.Date(2024, 5, 23, 20, 0, 0, 0, time.UTC)
	k := newKeyRangeDB(t, "wh", now, now)
	var hists []SeriesHistograms
	for i := range 3 {
		key := seriesOfLabel(t, k.DB, "lat", fmt.Sprint(i))
		var hs []HistogramPoint
		for j := range 120 { // written directly: 100 samples or more a series
			n := uint64(j + 1)
			hs = append(hs, HistogramPoint{Time: now.Add(time.Duration(j-120) * time.Minute),
				H: &Histogram{Count: n, Sum: float64(n) / 2, ZeroThreshold: 0.001, ZeroCount: n}})
		}
		hists = append(hists, SeriesHistograms{Series: key, Histograms: hs})
	}
	// And a float series: the period's raw table exists, as in any database with floats.
	var pts []tablets.Point
	for j := range 120 {
		pts = append(pts, tablets.Point{Time: now.Add(time.Duration(j-120) * time.Minute), Value: float64(j)})
	}
	floats := []SeriesPoints{{Series: seriesOfLabel(t, k.DB, "up", "0"), Points: pts}}
	require.NoError(t, k.DB.WriteSamples(ctx, floats, hists))
	read := func(q *Queryable) map[string][]string {
		got := map[string][]string{}
		for s, err := range q.Querier(now.Add(-time.Hour), now).Select(ctx, nil, Matcher{Type: MatchEqual, Name: "__name__", Value: "lat"}) {
			require.NoError(t, err)
			for it := s.Iterator(); it.Next(); {
				x := it.At()
				require.NotNil(t, x.H)
				got[s.Labels.Get("i")] = append(got[s.Labels.Get("i")], fmt.Sprintf("%d:%d", x.T, x.H.Count))
			}
		}
		return got
	}
	truth := read(mustQueryable(t, k.open(t, false)))
	require.Len(t, truth, 3)
	require.Len(t, truth["0"], 60)

	db := k.openCached(t)
	rep, err := db.Warm(ctx, now.Add(-2*time.Hour))
	require.NoError(t, err)
	require.Equal(t, 3, rep.HistSeries)
	require.Equal(t, 3*120, rep.HistSamples)
	require.Positive(t, rep.HistBytes)
	p := k.names.PeriodOf(now)
	k.reads.table, k.reads.second = k.names.HistTable(p), k.names.RawTable(p)
	k.reads.n.Store(0)
	k.reads.nSecond.Store(0)
	require.Equal(t, truth, read(mustQueryable(t, db)))
	require.Zero(t, k.reads.n.Load(), "histogram table queries after the warm-up")
	require.Zero(t, k.reads.nSecond.Load(), "raw table queries after the warm-up")

	// Without it, the same Select reads both.
	cold := k.openCached(t)
	require.Equal(t, truth, read(mustQueryable(t, cold)))
	require.Positive(t, k.reads.n.Load(), "histogram table queries without the warm-up")
	require.Positive(t, k.reads.nSecond.Load(), "raw table queries without the warm-up")
}
