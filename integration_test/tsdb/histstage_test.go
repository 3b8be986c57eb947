package tsdb

import (
	"context"
	"fmt"
	"maps"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/testkit/azurite"
	"github.com/seed71701133/tablets/internal/testkit/clock"
	"github.com/seed71701133/tablets/internal/testkit/dbtest"
	"github.com/seed71701133/tablets/internal/testkit/fault"
	"github.com/seed71701133/tablets/tsdb"
)

// stagedHistSample is sample i of series s in a staging test: integer, float, custom-bucket
// histograms and staleness markers (Prometheus' stale NaN as the sum), by turns.
func stagedHistSample(at time.Time, s, i int) tsdb.HistogramPoint {
	switch (s + i) % 5 {
	case 0:
		return hp(at, intHist(uint64(10*i+s+1)))
	case 1:
		return fhp(at, floatHist(float64(i)+0.25+float64(s)))
	case 2:
		return hp(at, customHist(uint64(i+s)))
	case 3:
		stale := intHist(0)
		stale.Sum = math.Float64frombits(0x7ff0000000000002)
		return hp(at, stale)
	default:
		fstale := floatHist(0)
		fstale.Sum = math.Float64frombits(0x7ff0000000000002)
		return fhp(at, fstale)
	}
}

// requireSeriesHists checks that every series reads back exactly, by a Querier's Read of
// histograms.
func requireSeriesHists(t *testing.T, db *tsdb.DB, want map[string][]tsdb.HistogramPoint, from, to time.Time, what string) {
	t.Helper()
	names := slices.Sorted(maps.Keys(want))
	got := readHists(t, db, from, to, names...)
	for _, n := range names {
		w := slices.Clone(want[n])
		slices.SortStableFunc(w, func(a, b tsdb.HistogramPoint) int { return a.Time.Compare(b.Time) })
		require.Len(t, got[n], len(w), "%s: %s", what, n)
		requireSamples(t, w, got[n])
	}
}

// stagedHistTables counts the entities of the staging table and of the histogram table of
// start's period.
func stagedHistTables(t *testing.T, svc *aztables.ServiceClient, db *tsdb.DB, start time.Time) (staged, chunks int) {
	return countEntities(t, svc, db.Name()+"w"), countEntities(t, svc, db.Name()+"h"+itoa(periodOf(db, start)))
}

// A remote write of 2,000 series of one histogram sample each costs a transaction or two
// once the series are listed, not one a series; the samples read back exactly, staged and
// after Fold, which writes a transaction per series and leaves the staging table empty.
func TestTSDBStagedHistogramsCost(t *testing.T) {
	ctx := context.Background()
	clock := new(clock.Clock)
	db, svc, checker := dbtest.NewDB(t, stagingOptions(clock))
	names := seriesNames(t, db, 2000)
	start := time.Date(2025, 3, 10, 9, 0, 0, 0, time.UTC)
	want := map[string][]tsdb.HistogramPoint{}
	write := func(scrape int) {
		at := start.Add(time.Duration(scrape) * 15 * time.Second)
		clock.Set(at.Add(time.Second))
		req := make([]tsdb.SeriesHistograms, len(names))
		for s, n := range names {
			p := stagedHistSample(at.Add(time.Duration(s%1000)*time.Millisecond), s, scrape)
			req[s] = tsdb.SeriesHistograms{Series: n, Histograms: []tsdb.HistogramPoint{p}}
			want[n] = append(want[n], p)
		}
		require.NoError(t, db.WriteSamples(ctx, nil, req))
	}
	checker.Reset()
	write(0)
	first := checker.Stats()
	t.Logf("first write of 2,000 series: %d requests (%d transactions), %d bytes sent", first.Requests, first.Batches, first.RequestBytes)
	checker.Reset()
	write(1)
	second := checker.Stats()
	t.Logf("second write: %d requests (%d transactions), %d bytes sent (%.1f a sample)", second.Requests, second.Batches, second.RequestBytes, float64(second.RequestBytes)/2000)
	require.Equal(t, int64(2), second.Requests, "the series listed: one transaction of staging entities, and the staging mark after it")
	require.Equal(t, int64(1), second.Batches)
	// The first write lists the series (a transaction per index partition and 100 series)
	// and makes the tables: the staging itself is still one transaction.
	require.Less(t, first.Batches, int64(2000/100+10))
	staged, chunks := stagedHistTables(t, svc, db, start)
	require.Equal(t, 0, chunks, "nothing in the histogram table before Fold")
	t.Logf("staging entities: %d", staged)

	// One series' read: the staging query selects its column, then the histogram table.
	checker.Reset()
	requireSamples(t, want[names[7]], queryHist(t, db, names[7], start, start.Add(time.Hour)))
	read := checker.Stats()
	t.Logf("one series, unfolded: %d requests, %d bytes read", read.Requests, read.ResponseBytes)
	require.LessOrEqual(t, read.Requests, int64(2))
	requireSeriesHists(t, db, want, start, start.Add(time.Hour), "staged")
	// A float read sees no histogram sample, nor reads a histogram entity.
	checker.Reset()
	for _, err := range db.Query(ctx, names[7], start, start.Add(time.Hour)) {
		require.NoError(t, err)
		t.Fatal("a staged histogram sample read as a float point")
	}
	require.Less(t, checker.Stats().ResponseBytes, int64(2000), "the staging query matched no histogram entity")

	checker.Reset()
	clock.Add(time.Hour)
	rep, err := db.Fold(ctx)
	require.NoError(t, err)
	fold := checker.Stats()
	t.Logf("fold: %+v in %d requests (%d transactions)", rep, fold.Requests, fold.Batches)
	require.Equal(t, 4000, rep.Points)
	require.Equal(t, 2000, rep.Series)
	require.Less(t, fold.Requests, int64(2000+20))
	staged, chunks = stagedHistTables(t, svc, db, start)
	require.Equal(t, 0, staged)
	require.Equal(t, 2000, chunks, "a chunk a series")
	requireSeriesHists(t, db, want, start, start.Add(time.Hour), "folded")
}

// A staged sample wins its millisecond over the histogram table's, before Fold and after
// (Fold writes it with its write's priority), and Delete removes staged samples too.
func TestTSDBStagedHistogramsWinAndDelete(t *testing.T) {
	ctx := context.Background()
	clock := new(clock.Clock)
	start := time.Date(2025, 3, 10, 9, 0, 0, 0, time.UTC)
	clock.Set(start.Add(time.Hour))
	db, svc, _ := dbtest.NewDB(t, stagingOptions(clock))
	// 150 samples: written directly into the histogram table.
	var direct []tsdb.HistogramPoint
	for i := range 150 {
		direct = append(direct, hp(start.Add(time.Duration(i)*time.Second), intHist(uint64(i+1))))
	}
	require.NoError(t, db.WriteSamples(ctx, nil, []tsdb.SeriesHistograms{{Series: "w", Histograms: direct}, {Series: "keep", Histograms: direct[:3]}}))
	staged, chunks := stagedHistTables(t, svc, db, start)
	require.Equal(t, 1, staged, "keep's three samples")
	require.Equal(t, 1, chunks, "w's chunk")
	// Times 10 and 20 s again, and a new one: staged.
	again := []tsdb.HistogramPoint{hp(direct[10].Time, customHist(1000)), fhp(direct[20].Time, floatHist(0.5)), hp(start.Add(200*time.Second), intHist(7))}
	require.NoError(t, db.WriteSamples(ctx, nil, []tsdb.SeriesHistograms{{Series: "w", Histograms: again}}))
	want := slices.Clone(direct)
	want[10], want[20] = again[0], again[1]
	want = append(want, again[2])
	requireSamples(t, want, queryHist(t, db, "w", start, start.Add(time.Hour)))

	clock.Add(time.Hour)
	rep, err := db.Fold(ctx)
	require.NoError(t, err)
	require.Equal(t, 6, rep.Points)
	requireSamples(t, want, queryHist(t, db, "w", start, start.Add(time.Hour)))

	// Staged again, then deleted with the table's samples of the range: keep's stay.
	late := []tsdb.HistogramPoint{hp(start.Add(100*time.Millisecond), intHist(3)), hp(start.Add(30*time.Second), intHist(4)), hp(start.Add(300*time.Second), intHist(5))}
	require.NoError(t, db.WriteSamples(ctx, nil, []tsdb.SeriesHistograms{{Series: "w", Histograms: late}, {Series: "keep", Histograms: late[:1]}}))
	require.NoError(t, db.Delete(ctx, "w", start.Add(50*time.Millisecond), start.Add(250*time.Second)))
	var left []tsdb.HistogramPoint
	for _, p := range append(want, late...) {
		if p.Time.Before(start.Add(50*time.Millisecond)) || !p.Time.Before(start.Add(250*time.Second)) {
			left = append(left, p)
		}
	}
	slices.SortStableFunc(left, func(a, b tsdb.HistogramPoint) int { return a.Time.Compare(b.Time) })
	requireSamples(t, left, queryHist(t, db, "w", start, start.Add(time.Hour)))
	keep := []tsdb.HistogramPoint{direct[0], late[0], direct[1], direct[2]}
	requireSamples(t, keep, queryHist(t, db, "keep", start, start.Add(time.Hour)))
	clock.Add(time.Hour)
	_, err = db.Fold(ctx)
	require.NoError(t, err)
	requireSamples(t, left, queryHist(t, db, "w", start, start.Add(time.Hour)))
	requireSamples(t, keep, queryHist(t, db, "keep", start, start.Add(time.Hour)))
}

// A Fold of float and histogram staging entities of one bucket, killed after each of its
// requests in turn, loses nothing and shows nothing twice: after every death both kinds read
// back with the last write of each time; a Fold after the dead one's lease finishes.
func TestTSDBStagedHistogramsFoldKilledAtEveryStep(t *testing.T) {
	ctx := context.Background()
	clock := new(clock.Clock)
	start := time.Date(2025, 3, 10, 9, 0, 0, 0, time.UTC)
	clock.Set(start)
	db, _, _ := dbtest.NewDB(t, stagingOptions(clock))
	d := &dying{next: azurite.DefaultTransport()}
	d.alive.Store(-1)
	svc, err := azurite.Shared(t).NewServiceClient(&aztables.ClientOptions{ClientOptions: policy.ClientOptions{Transport: d,
		Retry: policy.RetryOptions{MaxRetries: -1}}})
	require.NoError(t, err)
	wantPoints := map[string][]tablets.Point{}
	wantHists := map[string][]tsdb.HistogramPoint{}
	write := func(i int) {
		var points []tsdb.SeriesPoints
		var hists []tsdb.SeriesHistograms
		for s := range 6 {
			name := fmt.Sprintf("k%02d", s)
			// Every write rewrites the time of the one before it, and adds one.
			at := start.Add(time.Duration(i) * time.Second)
			pts := []tablets.Point{{Time: at, Value: float64(i*100 + s)}}
			hs := []tsdb.HistogramPoint{stagedHistSample(at, s, i)}
			if i > 0 {
				prev := start.Add(time.Duration(i-1) * time.Second)
				pts = append(pts, tablets.Point{Time: prev, Value: -float64(i*100 + s)})
				hs = append(hs, hp(prev, customHist(uint64(i*100+s))))
				wantPoints[name][len(wantPoints[name])-1] = pts[1]
				wantHists[name][len(wantHists[name])-1] = hs[1]
			}
			wantPoints[name] = append(wantPoints[name], pts[0])
			wantHists[name] = append(wantHists[name], hs[0])
			points = append(points, tsdb.SeriesPoints{Series: name, Points: pts})
			hists = append(hists, tsdb.SeriesHistograms{Series: name, Histograms: hs})
		}
		require.NoError(t, db.WriteMany(ctx, points))
		require.NoError(t, db.WriteSamples(ctx, nil, hists))
	}
	steps := 0
	for k := 0; ; k++ {
		write(k)
		clock.Add(20 * time.Minute) // what was written is foldable, and the dead fold's lease ended
		folder, err := tsdb.Open(ctx, svc, db.Name(), stagingOptions(clock))
		require.NoError(t, err)
		d.alive.Store(int64(k))
		_, err = folder.Fold(ctx)
		d.alive.Store(-1)
		what := fmt.Sprintf("after a fold killed after %d requests", k)
		requireSeriesPoints(t, db, wantPoints, start, start.Add(time.Hour), what)
		requireSeriesHists(t, db, wantHists, start, start.Add(time.Hour), what)
		if err == nil {
			steps = k
			break
		}
	}
	t.Logf("a fold of 6 series' points and histograms killed after each of its first %d requests", steps)
	require.Greater(t, steps, 8)
	rep, err := db.Fold(ctx)
	require.NoError(t, err)
	require.Zero(t, rep.Entities, "the fold that lived folded everything")
	requireSeriesPoints(t, db, wantPoints, start, start.Add(time.Hour), "at the end")
	requireSeriesHists(t, db, wantHists, start, start.Add(time.Hour), "at the end")
}

// histWindowsOf aggregates series by step and returns the histogram part of each window.
func histWindowsOf(t *testing.T, db *tsdb.DB, series []string, from, to time.Time, step time.Duration) []tsdb.Window {
	t.Helper()
	var out []tsdb.Window
	for w, err := range db.Aggregate(context.Background(), series, from, to, step, nil) {
		require.NoError(t, err)
		out = append(out, tsdb.Window{Start: w.Start, HistogramCount: w.HistogramCount, Histogram: w.Histogram,
			HistogramConflict: w.HistogramConflict, FirstHistogram: w.FirstHistogram, LastHistogram: w.LastHistogram})
	}
	return out
}

// The tiers see staged histogram samples as they see staged points: Rollup reads them (with
// the staged points, one query), Aggregate reads raw a window holding a staged sample (a late
// one, staged after the window was rolled up, is in no tier window until Fold flags it), and
// after Fold the windows come from the tier (Fold flags only the late sample's). Each answer is that of a database
// that writes every sample directly.
func TestTSDBStagedHistogramsTiers(t *testing.T) {
	ctx := context.Background()
	clock := new(clock.Clock)
	start := time.Date(2025, 3, 10, 9, 0, 0, 0, time.UTC)
	opts := func(direct bool) *tsdb.Options {
		return &tsdb.Options{RawPeriod: 24 * time.Hour, Layout: chunkedLayout, Now: clock.Now, DirectWrites: direct}
	}
	staged, _, checker := dbtest.NewDB(t, opts(false))
	direct, _, _ := dbtest.NewDB(t, opts(true))
	series := []string{"lat_a", "lat_b", "lat_c"}
	write := func(at time.Time, n int) {
		var req []tsdb.SeriesHistograms
		for s, name := range series {
			req = append(req, tsdb.SeriesHistograms{Series: name, Histograms: []tsdb.HistogramPoint{hp(at, latencyHist(n+s))}})
		}
		for _, db := range []*tsdb.DB{staged, direct} {
			require.NoError(t, db.WriteSamples(ctx, nil, req))
		}
	}
	for i := range 60 { // an hour, a sample a minute
		at := start.Add(time.Duration(i) * time.Minute)
		clock.Set(at.Add(time.Second))
		write(at, 2*i)
		if i != 1 {
			continue
		}
		// A float point of each series too, on time: the blocks of a series exist whatever
		// Rollup finds of its histograms, so that a Rollup that missed the staged samples
		// would show once they are folded.
		for _, db := range []*tsdb.DB{staged, direct} {
			var req []tsdb.SeriesPoints
			for _, name := range series {
				req = append(req, tsdb.SeriesPoints{Series: name, Points: []tablets.Point{{Time: at.Add(500 * time.Millisecond), Value: 1}}})
			}
			require.NoError(t, db.WriteMany(ctx, req))
		}
	}
	end := start.Add(time.Hour)
	same := func(what string) {
		t.Helper()
		for _, step := range []time.Duration{time.Minute, time.Hour} {
			want := histWindowsOf(t, direct, series, start, end, step)
			require.NotEmpty(t, want)
			require.Equal(t, want, histWindowsOf(t, staged, series, start, end, step), "%s, step %v", what, step)
		}
	}
	same("staged, nothing rolled up")
	clock.Set(end.Add(2 * time.Hour)) // the hour sealed
	checker.Reset()
	require.NoError(t, staged.Rollup(ctx, start, end))
	t.Logf("rollup of 3 staged series: %d requests (%d queries)", checker.Stats().Requests, checker.Stats().Queries)
	require.NoError(t, direct.Rollup(ctx, start, end))
	same("staged, rolled up")

	// A late sample into the rolled-up hour, rewriting a minute's: staged, then folded.
	late := start.Add(30*time.Minute + 500*time.Millisecond)
	write(late, 1000)
	same("a late sample staged")
	clock.Add(time.Hour)
	rep, err := staged.Fold(ctx)
	require.NoError(t, err)
	require.Equal(t, 3*60+3+3, rep.Points, "the hour's samples, the late ones and the float points")
	same("folded")
	require.NoError(t, staged.Rollup(ctx, start, end))
	require.NoError(t, direct.Rollup(ctx, start, end))
	same("folded and rolled up again")
}

// A failed staging transaction lists exactly the histogram samples it held, all the
// arguments of each millisecond, for every series; written again, they read back with the
// later argument of a millisecond.
func TestTSDBStagedHistogramsWriteErrorExact(t *testing.T) {
	ctx := context.Background()
	var failing atomic.Bool
	lossy, err := azurite.Shared(t).NewServiceClient(&aztables.ClientOptions{ClientOptions: policy.ClientOptions{
		Transport: fault.New(azurite.DefaultTransport(), fault.Options{Seed: 1, FailBefore: 1,
			Match: func(req *http.Request) bool { return failing.Load() && strings.HasSuffix(req.URL.Path, "$batch") }}),
		Retry: policy.RetryOptions{MaxRetries: 1, RetryDelay: time.Millisecond}}})
	require.NoError(t, err)
	clock := clock.New(time.Date(2025, 3, 10, 9, 0, 0, 0, time.UTC))
	db, _, _ := dbtest.NewDB(t, stagingOptions(clock))
	w, err := tsdb.Open(ctx, lossy, db.Name(), stagingOptions(clock))
	require.NoError(t, err)
	at := clock.Now()
	hs := []tsdb.HistogramPoint{
		hp(at.Add(100*time.Microsecond), intHist(1)),
		fhp(at.Add(300*time.Microsecond), floatHist(2)), // the same millisecond: overwrites the first
		hp(at.Add(time.Second), customHist(3)),
	}
	// The series listed, and the tables made, first: only the staging transaction fails.
	warm := []tsdb.SeriesHistograms{{Series: "x", Histograms: hs[2:]}, {Series: "y", Histograms: hs[2:]}}
	require.NoError(t, w.WriteSamples(ctx, nil, warm))
	failing.Store(true)
	err = w.WriteSamples(ctx, nil, []tsdb.SeriesHistograms{{Series: "x", Histograms: hs}, {Series: "y", Histograms: hs[2:]}})
	failing.Store(false)
	var wes []*tablets.WriteError
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var we *tablets.WriteError
		require.ErrorAs(t, e, &we)
		wes = append(wes, we)
	}
	require.Len(t, wes, 2)
	got := map[string][]tsdb.HistogramPoint{wes[0].Series: wes[0].FailedHistograms, wes[1].Series: wes[1].FailedHistograms}
	require.Equal(t, hs, got["x"])
	require.Equal(t, hs[2:], got["y"])
	require.NotZero(t, wes[0].Status, "the service's answer")
	require.NoError(t, w.WriteSamples(ctx, nil, []tsdb.SeriesHistograms{{Series: "x", Histograms: got["x"]}, {Series: "y", Histograms: got["y"]}}))
	requireSeriesHists(t, db, map[string][]tsdb.HistogramPoint{
		"x": {fhp(at, floatHist(2)), hs[2]}, "y": hs[2:]}, at, at.Add(time.Minute), "written again")
}

// What one handle stages the other reads at once, even in a period whose table it does not
// know of (its listing of the tables, fresh, is older than the table): as staged points.
func TestTSDBStagedHistogramsOtherHandleNewPeriod(t *testing.T) {
	ctx := context.Background()
	clock := clock.New(time.Date(2025, 3, 10, 9, 0, 0, 0, time.UTC))
	opts := func() *tsdb.Options {
		o := stagingOptions(clock)
		o.RawPeriod = time.Hour
		return o
	}
	a, svc, _ := dbtest.NewDB(t, opts())
	b, err := tsdb.Open(ctx, svc, a.Name(), opts())
	require.NoError(t, err)
	from, to := clock.Now().Add(-24*time.Hour), clock.Now().Add(24*time.Hour)
	require.Empty(t, queryHist(t, b, "s", from, to), "nothing yet: b lists the tables")
	at := clock.Now().Add(5 * time.Hour) // a period of its own, unknown to b
	want := []tsdb.HistogramPoint{hp(at, intHist(5)), fhp(at.Add(time.Second), floatHist(1.5))}
	require.NoError(t, a.WriteSamples(ctx, nil, []tsdb.SeriesHistograms{{Series: "s", Histograms: want}}))
	requireSamples(t, want, queryHist(t, b, "s", from, to))
}
