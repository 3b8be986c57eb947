package tsdb

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/testkit/azurite"
	"github.com/seed71701133/tablets/internal/testkit/clock"
	"github.com/seed71701133/tablets/internal/testkit/dbtest"
	"github.com/seed71701133/tablets/tsdb"
)

// A live panel over 210 series of floats and 20 of native histograms, refreshed every minute by a server whose caches are warm
// while another server ingests and folds: after a Fold, the refresh takes the folded
// samples into its raw cache from the staging entities it had cached (the Fold's receipt
// in the raw change log names them), instead of reading the folded minutes of every series
// back from the raw table (a request per 13 series). Every refresh equals a reader's without
// caches, also where the receipt cannot be used: a staged point rewriting a time the raw
// table holds, a Delete before the Fold, entities written and folded between two
// refreshes.
func TestTSDBFoldReceipts(t *testing.T) {
	ctx := context.Background()
	base := time.Date(2024, 5, 23, 0, 0, 0, 0, time.UTC) // a raw period's start (a day)
	clk := clock.New(base.Add(19 * time.Hour))
	opts, db, checker, other, fresh := warmAndPlainServers(t, clk)

	keys := seriesNumbered(t, other, "req", 210)
	// And 20 series of native histograms.
	histKeys := seriesNumbered(t, other, "lat", 20)
	// scrape writes every series' sample at the clock's time, as a remote write does (one
	// a series: staged), and moves the clock 15 s on.
	scraped := 0
	scrape := func() {
		t.Helper()
		at := clk.Now()
		batch := make([]tsdb.SeriesPoints, len(keys))
		for i, k := range keys {
			batch[i] = tsdb.SeriesPoints{Series: k, Points: []tablets.Point{{Time: at, Value: float64(at.Unix()%100000) + float64(i)}}}
		}
		hists := make([]tsdb.SeriesHistograms, len(histKeys))
		for i, k := range histKeys {
			h := hp(at, intHist(uint64(scraped+i)))
			if (scraped+i)%2 == 1 {
				h = fhp(at, floatHist(float64(scraped+i)+0.5))
			}
			hists[i] = tsdb.SeriesHistograms{Series: k, Histograms: []tsdb.HistogramPoint{h}}
		}
		require.NoError(t, other.WriteSamples(ctx, batch, hists))
		scraped++
		clk.Add(15 * time.Second)
	}
	// The entries a fold is taken into: a float series' raw samples; a histogram series'
	// histogram samples and its (empty) float points, which a read of it reads too.
	all := len(keys) + 2*len(histKeys)
	fold := func() int {
		t.Helper()
		rep, err := other.Fold(ctx)
		require.NoError(t, err)
		return rep.Entities
	}
	for range 4 * 60 { // an hour
		scrape()
	}
	fold()

	// refresh is the query API's read of the last hour: its requests and how many series
	// took in a Fold.
	refresh := func(what string) (int64, int64) {
		t.Helper()
		return refreshHour(ctx, t, db, fresh(), opts.RawCache, checker, clk, what, tsdb.Matcher{Type: tsdb.MatchRegexp, Name: tsdb.MetricName, Value: "req|lat"})
	}
	refresh("first")
	refresh("warm")

	// 25 minutes of a live panel refreshed every minute, beside the scrapes and the Folds.
	folds := 0
	for minute := range 25 {
		for range 4 {
			scrape()
		}
		if fold() > 0 {
			folds++
			n, took := refresh(fmt.Sprintf("minute %d, after a fold", minute))
			require.Equal(t, int64(all), took, "every series took the fold in")
			require.LessOrEqual(t, n, int64(6), "no raw read: the listing, the new entities, the logs")
			continue
		}
		refresh(fmt.Sprintf("minute %d", minute))
	}
	require.GreaterOrEqual(t, folds, 2)

	// A staged point rewriting a time the raw table holds, then its fold: that series reads
	// the table (which value the table keeps is the writes' priorities'), the others not.
	at := clk.Now().Add(-50 * time.Minute).Truncate(15 * time.Second)
	require.NoError(t, other.WriteMany(ctx, []tsdb.SeriesPoints{{Series: keys[3], Points: []tablets.Point{{Time: at, Value: -3}}}}))
	refresh("after a rewrite of a folded time")
	for fold() == 0 {
		for range 4 {
			scrape()
		}
		refresh("a minute more")
	}
	missed := foldMisses(opts.RawCache)
	_, took := refresh("after the rewrite's fold")
	require.Equal(t, int64(all-1), took, "all but the rewritten series")
	require.Equal(t, map[tsdb.RawFoldMiss]int64{tsdb.RawFoldMisses[3]: 1}, foldMisses(opts.RawCache).since(missed), "the rewritten series missed by overlap")

	// A Delete, then a Fold: the Delete's change has no receipt, so the fold's minutes are
	// read from the table.
	require.NoError(t, other.Delete(ctx, keys[5], at.Add(-time.Minute), at.Add(time.Minute)))
	for fold() == 0 {
		for range 4 {
			scrape()
		}
	}
	misses := opts.RawCache.Stats().Misses
	missed = foldMisses(opts.RawCache)
	_, took = refresh("after a delete and a fold")
	require.Zero(t, took)
	require.GreaterOrEqual(t, opts.RawCache.Stats().Misses-misses, uint64(len(keys)), "every float series read again from the table")
	byLog := foldMisses(opts.RawCache).since(missed)
	require.GreaterOrEqual(t, byLog[tsdb.RawFoldMisses[0]], int64(len(keys)), "missed by the log: %v", byLog)

	// Entities written and folded between two refreshes: this server never listed them.
	for range 4 * 20 {
		scrape()
	}
	require.NotZero(t, fold())
	missed = foldMisses(opts.RawCache)
	_, took = refresh("after 20 minutes unseen and a fold")
	require.Zero(t, took)
	byReceipt := foldMisses(opts.RawCache).since(missed)
	require.Equal(t, []tsdb.RawFoldMiss{tsdb.RawFoldMisses[1]}, slices.Collect(maps.Keys(byReceipt)), "missed by the receipt alone: %v", byReceipt)
	require.GreaterOrEqual(t, byReceipt[tsdb.RawFoldMisses[1]], int64(len(keys)))
	refresh("and again")
}

// rawFoldMisses is a RawCache's FoldMisses by reason, at one time.
type rawFoldMisses map[tsdb.RawFoldMiss]int64

func foldMisses(c *tsdb.RawCache) rawFoldMisses {
	m := rawFoldMisses{}
	for _, r := range tsdb.RawFoldMisses {
		m[r] = c.FoldMisses(r)
	}
	return m
}

// since is the reasons that grew after before, by how much.
func (m rawFoldMisses) since(before rawFoldMisses) map[tsdb.RawFoldMiss]int64 {
	out := map[tsdb.RawFoldMiss]int64{}
	for r, n := range m {
		if d := n - before[r]; d != 0 {
			out[r] = d
		}
	}
	return out
}

// A server that folds keeps what its Folds wrote (the staging cache aside): its raw cache
// takes each of its own Folds in without reading the folded minutes back, also when it
// holds none of the entities the Fold moved (it has no staging cache here), and when they
// were written and folded between two of its refreshes. Another server's Fold it reads as
// before. Every refresh equals a reader's without caches.
func TestTSDBFoldKeepsWhatItWrote(t *testing.T) {
	ctx := context.Background()
	base := time.Date(2024, 5, 23, 0, 0, 0, 0, time.UTC) // a raw period's start (a day)
	clk := clock.New(base.Add(19 * time.Hour))
	opts := stagingOptions(clk)
	opts.RawCache = tsdb.NewRawCache(64 << 20)
	db, svc, checker := dbtest.NewDB(t, opts)
	plain := *stagingOptions(clk)
	other := reopen(t, svc, db.Name(), plain)
	fresh := func() *tsdb.DB { return reopen(t, svc, db.Name(), plain) }

	keys := seriesNumbered(t, db, "req", 120)
	scrape := func(minutes int) {
		t.Helper()
		for range 4 * minutes {
			at := clk.Now()
			batch := make([]tsdb.SeriesPoints, len(keys))
			for i, k := range keys {
				batch[i] = tsdb.SeriesPoints{Series: k, Points: []tablets.Point{{Time: at, Value: float64(at.Unix()%100000) + float64(i)}}}
			}
			require.NoError(t, db.WriteMany(ctx, batch))
			clk.Add(15 * time.Second)
		}
	}
	fold := func(by *tsdb.DB) {
		t.Helper()
		rep, err := by.Fold(ctx)
		require.NoError(t, err)
		require.Positive(t, rep.Entities)
	}
	refresh := func(what string) (int64, int64) {
		t.Helper()
		return refreshHour(ctx, t, db, fresh(), opts.RawCache, checker, clk, what, tsdb.Matcher{Type: tsdb.MatchEqual, Name: tsdb.MetricName, Value: "req"})
	}
	scrape(60)
	fold(db)
	refresh("first")
	refresh("warm")

	scrape(20)
	fold(db)
	_, took := refresh("after its own fold")
	require.Equal(t, int64(len(keys)), took, "every series took the fold in, from what the fold wrote")
	misses := opts.RawCache.Stats().Misses
	refresh("again")
	require.Zero(t, opts.RawCache.Stats().Misses-misses)

	// Written and folded between two refreshes: never listed, still taken in.
	scrape(20)
	fold(db)
	scrape(20)
	fold(db)
	n, took := refresh("after two folds unseen")
	require.Equal(t, int64(len(keys)), took)
	require.LessOrEqual(t, n, int64(8), "no raw read")
	kept, bytes := db.FoldsKept()
	require.Equal(t, 3, kept, "its last 3 folds of 4")
	require.Positive(t, bytes)
	kept, _ = other.FoldsKept()
	require.Zero(t, kept, "a DB without a raw cache keeps none")

	// Another server's fold: this one reads the folded minutes back.
	scrape(20)
	fold(other)
	misses = opts.RawCache.Stats().Misses
	_, took = refresh("after another's fold")
	require.Zero(t, took)
	require.GreaterOrEqual(t, opts.RawCache.Stats().Misses-misses, uint64(len(keys)))
}

// seriesNumbered registers n series of metric in d, numbered by label i (0 to n-1), with
// the labels extra besides (name, value, ...), and returns their keys in that order.
func seriesNumbered(t *testing.T, d *tsdb.DB, metric string, n int, extra ...string) []string {
	t.Helper()
	keys := make([]string, n)
	for i := range keys {
		k, err := d.SeriesOf(context.Background(), tsdb.LabelsFromStrings(append([]string{tsdb.MetricName, metric, "i", fmt.Sprint(i)}, extra...)...))
		require.NoError(t, err)
		keys[i] = k
	}
	return keys
}

// warmAndPlainServers opens a new database at clk's time as db, a server with a raw, a
// staging and an index cache (opts), and beside it other, a server of the same database
// without caches; fresh opens a reader without caches. checker counts db's requests.
func warmAndPlainServers(t *testing.T, clk *clock.Clock) (opts *tsdb.Options, db *tsdb.DB, checker *azurite.Checker, other *tsdb.DB, fresh func() *tsdb.DB) {
	t.Helper()
	opts = stagingOptions(clk)
	opts.RawCache = tsdb.NewRawCache(64 << 20)
	opts.StagingCache = tsdb.NewStagingCache(64 << 20)
	opts.IndexCache = tsdb.NewIndexCache(16 << 20)
	db, svc, checker := dbtest.NewDB(t, opts)
	plain := *stagingOptions(clk)
	other = reopen(t, svc, db.Name(), plain)
	return opts, db, checker, other, func() *tsdb.DB { return reopen(t, svc, db.Name(), plain) }
}

// refreshHour is the query API's read of the last hour of the series match selects, by db
// (begun, a mark, the Select), checked against fresh's (a reader without caches): it
// returns its requests and how many series took in a Fold (cache's).
func refreshHour(ctx context.Context, t *testing.T, db, fresh *tsdb.DB, cache *tsdb.RawCache, checker *azurite.Checker, clk *clock.Clock,
	what string, match tsdb.Matcher) (requests, took int64) {
	t.Helper()
	to := clk.Now()
	from := to.Add(-time.Hour)
	want := selectSamples(ctx, t, fresh, nil, from, to, match)
	foldedIn := cache.FoldedIn()
	rctx := db.BeginRead(ctx)
	checker.Reset()
	_, err := db.ReadMark(rctx, from, to)
	require.NoError(t, err)
	got := selectSamples(rctx, t, db, nil, from, to, match)
	requests = checker.Stats().Requests
	require.Equal(t, want, got, what)
	took = cache.FoldedIn() - foldedIn
	t.Logf("%s: %d requests, %d series took in a fold", what, requests, took)
	return requests, took
}

// A server keeps its own staged writes whole, and its panels over some of their series
// find those through the staging cache's series index; another server's Fold of them is
// taken in through the same index (staging.FoldedFloats), each batch looking at its own
// series' records only, not at every series of every entity the Fold moved. Every refresh
// equals a reader's without caches.
func TestTSDBFoldReceiptsThroughTheSeriesIndex(t *testing.T) {
	ctx := context.Background()
	base := time.Date(2024, 5, 23, 0, 0, 0, 0, time.UTC) // a raw period's start (a day)
	clk := clock.New(base.Add(19 * time.Hour))
	opts, db, checker, other, fresh := warmAndPlainServers(t, clk)

	keys := make([]string, 300)
	for i := range keys {
		k, err := db.SeriesOf(ctx, tsdb.LabelsFromStrings(tsdb.MetricName, "req", "i", fmt.Sprint(i), "half", fmt.Sprint(i%2)))
		require.NoError(t, err)
		keys[i] = k
	}
	scrape := func(minutes int) {
		t.Helper()
		for range 4 * minutes {
			at := clk.Now()
			batch := make([]tsdb.SeriesPoints, len(keys))
			for i, k := range keys {
				batch[i] = tsdb.SeriesPoints{Series: k, Points: []tablets.Point{{Time: at, Value: float64(at.Unix()%100000) + float64(i)}}}
			}
			require.NoError(t, db.WriteMany(ctx, batch))
			clk.Add(15 * time.Second)
		}
	}
	refresh := func(what string) (int64, int64) {
		t.Helper()
		return refreshHour(ctx, t, db, fresh(), opts.RawCache, checker, clk, what, tsdb.Matcher{Type: tsdb.MatchEqual, Name: "half", Value: "0"})
	}
	scrape(60)
	_, err := other.Fold(ctx)
	require.NoError(t, err)
	refresh("first")
	refresh("warm")
	folds := 0
	for minute := range 25 {
		scrape(1)
		rep, err := other.Fold(ctx)
		require.NoError(t, err)
		if rep.Entities == 0 {
			refresh(fmt.Sprintf("minute %d", minute))
			continue
		}
		folds++
		n, took := refresh(fmt.Sprintf("minute %d, after another server's fold", minute))
		require.Equal(t, int64(len(keys)/2), took, "every series of the panel took the fold in")
		require.LessOrEqual(t, n, int64(6), "no raw read: the listing, the logs")
	}
	require.GreaterOrEqual(t, folds, 2)
}
