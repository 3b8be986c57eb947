package tsdb

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/chunked"
	"github.com/seed71701133/tablets/internal/batch"
	"github.com/seed71701133/tablets/internal/testkit/azurite"
	"github.com/seed71701133/tablets/internal/testkit/clock"
	"github.com/seed71701133/tablets/internal/testkit/dbtest"
	"github.com/seed71701133/tablets/internal/testkit/fault"
	"github.com/seed71701133/tablets/internal/testkit/itest"
	"github.com/seed71701133/tablets/tsdb"
	"github.com/seed71701133/tablets/writer"
)

func chunkedLayout(c *aztables.Client) (tablets.Store, error) { return chunked.New(c, nil) }

// stagingOptions are a chunked database's (the layout that stages) on clock.
func stagingOptions(clock *clock.Clock) *tsdb.Options {
	return &tsdb.Options{RawPeriod: 24 * time.Hour, Tiers: []tsdb.Tier{}, Layout: chunkedLayout, Now: clock.Now}
}

// staleMarker is Prometheus' staleness marker: a NaN whose bits must survive.
var staleMarker = math.Float64frombits(0x7ff0000000000002)

// promLoad writes series at a scrape interval as Prometheus' remote write sends them: each
// request a shard of the series, one sample each. It returns every point written, by series.
func promLoad(t testing.TB, db *tsdb.DB, clock *clock.Clock, names []string, start time.Time, scrapes int, interval time.Duration, perRequest, inFlight int) map[string][]tablets.Point {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	written := map[string][]tablets.Point{}
	for s := range scrapes {
		at := start.Add(time.Duration(s) * interval)
		clock.Set(at.Add(time.Second))
		var reqs [][]tsdb.SeriesPoints
		for lo := 0; lo < len(names); lo += perRequest {
			var req []tsdb.SeriesPoints
			for _, n := range names[lo:min(lo+perRequest, len(names))] {
				ms := at.Add(time.Duration(rng.IntN(1000)) * time.Millisecond)
				v := float64(s*7 + len(n))
				if rng.IntN(50) == 0 {
					v = staleMarker
				} else if rng.IntN(3) == 0 {
					v = rng.Float64() * 100
				}
				p := tablets.Point{Time: ms, Value: v}
				req = append(req, tsdb.SeriesPoints{Series: n, Points: []tablets.Point{p}})
				written[n] = append(written[n], p)
			}
			reqs = append(reqs, req)
		}
		for _, err := range batch.Run(ctx, inFlight, len(reqs), func(ctx context.Context, i int) error {
			return db.WriteMany(ctx, reqs[i])
		}) {
			require.NoError(t, err)
		}
	}
	return written
}

// seriesNames registers n label sets of 10 metrics (as a scrape of 20 targets) and returns
// their series keys.
func seriesNames(t testing.TB, db *tsdb.DB, n int) []string {
	sets := make([]tsdb.Labels, n)
	for i := range sets {
		sets[i] = tsdb.LabelsFromStrings("__name__", fmt.Sprintf("metric_%d", i%10), "job", "node",
			"instance", fmt.Sprintf("host-%d:9100", i/10%20), "id", fmt.Sprint(i))
	}
	keys, err := db.SeriesOfMany(context.Background(), sets)
	require.NoError(t, err)
	return keys
}

// requireSeriesPoints checks that every series reads back exactly, bit for bit.
func requireSeriesPoints(t *testing.T, db *tsdb.DB, want map[string][]tablets.Point, from, to time.Time, what string) {
	t.Helper()
	ctx := context.Background()
	names := slices.Sorted(maps.Keys(want))
	got := map[string][]tablets.Point{}
	for sp, err := range db.QueryMany(ctx, names, from, to) {
		require.NoError(t, err)
		got[sp.Series] = append(got[sp.Series], sp.Point)
	}
	for _, n := range names {
		w := slices.Clone(want[n])
		slices.SortStableFunc(w, func(a, b tablets.Point) int { return a.Time.Compare(b.Time) })
		itest.RequireSamePoints(t, w, got[n], fmt.Sprintf("%s: %s", what, n))
	}
}

// The cost of staged ingest, counted at the transport: 2,000 series at a 15 s scrape for an
// hour, 500 samples a request (a quarter of Prometheus' 2,000, to keep the test short: a
// transaction holds a request, so the cost a sample is four times the benchmark's), then a
// read of one series over the hour, then Fold.
func TestTSDBStagedIngestCost(t *testing.T) {
	clock := new(clock.Clock)
	db, _, checker := dbtest.NewDB(t, stagingOptions(clock))
	names := seriesNames(t, db, 2000)
	registry := checker.Stats()
	t.Logf("registering %d label sets: %d requests", len(names), registry.Requests)
	checker.Reset()
	start := time.Date(2025, 3, 10, 9, 0, 0, 0, time.UTC)
	const scrapes = 240
	written := promLoad(t, db, clock, names, start, scrapes, 15*time.Second, 500, 4)
	ingest := checker.Stats()
	samples := len(names) * scrapes
	perSample := float64(ingest.Requests) / float64(samples)
	t.Logf("ingest: %d samples in %d requests (%d batches, %d queries, %d other): %.5f requests a sample, %.1f bytes a sample sent",
		samples, ingest.Requests, ingest.Batches, ingest.Queries, ingest.Other, perSample, float64(ingest.RequestBytes)/float64(samples))
	// A request of 500 samples is one transaction, and the staging mark after it (the
	// writes made at once share one: docs/format.md, "The staging mark"); the index and
	// tables cost a few more.
	require.Less(t, perSample, 2.1/500)

	// One series over the (unfolded) hour reads its partition's column only.
	checker.Reset()
	end := start.Add(scrapes * 15 * time.Second)
	var got []tablets.Point
	for p, err := range db.Query(context.Background(), names[7], start, end) {
		require.NoError(t, err)
		got = append(got, p)
	}
	read := checker.Stats()
	itest.RequireSamePoints(t, written[names[7]], got, "unfolded")
	t.Logf("one series over the unfolded hour: %d requests, %d bytes read", read.Requests, read.ResponseBytes)
	require.LessOrEqual(t, read.Requests, int64(3), "the staging query (one page of 960 entities) and the raw table")
	require.Less(t, read.ResponseBytes, ingest.RequestBytes/40, "its column: about 1/128 of the hour's staged bytes, and the entities' keys")

	// Fold: a transaction per series, a few queries, and the deletes.
	checker.Reset()
	clock.Set(end.Add(20 * time.Minute))
	rep, err := db.Fold(context.Background())
	require.NoError(t, err)
	fold := checker.Stats()
	t.Logf("fold: %+v in %d requests (%d batches)", rep, fold.Requests, fold.Batches)
	require.Equal(t, samples, rep.Points)
	require.Equal(t, len(names), rep.Series)
	require.Less(t, fold.Requests, int64(len(names))+int64(rep.Entities)/50+20)
	t.Logf("ingest and fold: %.5f requests a sample", float64(ingest.Requests+fold.Requests)/float64(samples))

	// Everything reads back from the raw tables, and the staging table is empty.
	checker.Reset()
	requireSeriesPoints(t, db, written, start, end, "folded")
	rep, err = db.Fold(context.Background())
	require.NoError(t, err)
	require.Zero(t, rep.Entities, "nothing left to fold")
}

// Two handles, as two servers: what one acknowledges the other reads at once, staged, and
// after the other folds it.
func TestTSDBStagedTwoHandles(t *testing.T) {
	clock := new(clock.Clock)
	a, svc, _ := dbtest.NewDB(t, stagingOptions(clock))
	b, err := tsdb.Open(context.Background(), svc, a.Name(), stagingOptions(clock))
	require.NoError(t, err)
	ctx := context.Background()
	start := time.Date(2025, 3, 10, 9, 0, 0, 0, time.UTC)
	want := map[string][]tablets.Point{}
	for i := range 20 {
		at := start.Add(time.Duration(i) * 15 * time.Second)
		clock.Set(at)
		var req []tsdb.SeriesPoints
		for s := range 30 {
			p := tablets.Point{Time: at, Value: float64(i*100 + s)}
			name := fmt.Sprintf("s%02d", s)
			req = append(req, tsdb.SeriesPoints{Series: name, Points: []tablets.Point{p}})
			want[name] = append(want[name], p)
		}
		w, r := a, b
		if i%2 == 1 {
			w, r = b, a
		}
		require.NoError(t, w.WriteMany(ctx, req))
		requireSeriesPoints(t, r, want, start, at.Add(time.Second), fmt.Sprintf("write %d, read on the other handle", i))
	}
	clock.Add(time.Hour)
	_, err = a.Fold(ctx)
	require.NoError(t, err)
	requireSeriesPoints(t, b, want, start, start.Add(time.Hour), "folded by the other handle")
}

// Two folders race beside a writer, through lost replies and failed requests: every point
// written is read back exactly once, with the last value written to its time.
func TestTSDBStagedFoldRace(t *testing.T) {
	ctx := context.Background()
	srv := azurite.Shared(t)
	clock := new(clock.Clock)
	start := time.Date(2025, 3, 10, 9, 0, 0, 0, time.UTC)
	clock.Set(start)
	newLossy := func(seed int64) *aztables.ServiceClient {
		svc, err := srv.NewServiceClient(&aztables.ClientOptions{ClientOptions: policy.ClientOptions{
			Transport: azurite.NewChecker(fault.New(azurite.DefaultTransport(), fault.Options{Seed: seed, FailBefore: 0.05, LoseReply: 0.15}), func(v string) {
				t.Errorf("Azure limit violated: %s", v)
			}),
			Retry: policy.RetryOptions{MaxRetries: 20, RetryDelay: time.Millisecond, MaxRetryDelay: 5 * time.Millisecond}}})
		require.NoError(t, err)
		return svc
	}
	writer, _, _ := dbtest.NewDB(t, stagingOptions(clock))
	w, err := tsdb.Open(ctx, newLossy(1), writer.Name(), stagingOptions(clock))
	require.NoError(t, err)
	f1, err := tsdb.Open(ctx, newLossy(2), writer.Name(), stagingOptions(clock))
	require.NoError(t, err)
	f2, err := tsdb.Open(ctx, newLossy(3), writer.Name(), stagingOptions(clock))
	require.NoError(t, err)

	want := map[string]map[int64]float64{}
	var folds atomic.Int64
	folded := make(chan struct{}, 1) // a fold folded something
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, f := range []*tsdb.DB{f1, f2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if rep, err := f.Fold(ctx); err == nil && rep.Entities > 0 {
					folds.Add(1)
					select {
					case folded <- struct{}{}:
					default:
					}
				}
			}
		}()
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range 60 {
		clock.Add(time.Minute) // a new arrival bucket every ten writes: earlier ones fold
		var req []tsdb.SeriesPoints
		for s := range 40 {
			name := fmt.Sprintf("r%02d", s)
			if want[name] == nil {
				want[name] = map[int64]float64{}
			}
			var pts []tablets.Point
			for range 2 {
				// Times repeat across writes: the last write of a time must win.
				ms := start.Add(time.Duration(rng.IntN(120)) * time.Second).UnixMilli()
				v := float64(i*1000 + s)
				pts = append(pts, tablets.Point{Time: time.UnixMilli(ms).UTC(), Value: v})
				want[name][ms] = v
			}
			req = append(req, tsdb.SeriesPoints{Series: name, Points: pts})
		}
		for {
			err := w.WriteMany(ctx, req)
			if err == nil {
				break
			}
			t.Logf("write %d failed, written again: %v", i, err)
		}
		if i == 30 || i == 45 { // the folders fold beside the writer, whatever the machine's load
			select {
			case <-folded:
			case <-time.After(time.Minute):
				t.Fatalf("no fold folded anything in a minute")
			}
		}
	}
	close(stop)
	wg.Wait()
	clock.Add(time.Hour)
	_, err = writer.Fold(ctx)
	require.NoError(t, err)
	t.Logf("%d folds folded entities beside the writer", folds.Load())
	require.Positive(t, folds.Load())
	expect := map[string][]tablets.Point{}
	for name, m := range want {
		for ms, v := range m {
			expect[name] = append(expect[name], tablets.Point{Time: time.UnixMilli(ms).UTC(), Value: v})
		}
	}
	requireSeriesPoints(t, writer, expect, start, start.Add(time.Hour), "after racing folds")
}

// A database written before staging (every point in the raw tables, as DirectWrites writes)
// reads the same after the upgrade; the new writes stage, override the old values of the
// times they write again, and fold.
func TestTSDBStagingUpgrade(t *testing.T) {
	ctx := context.Background()
	clock := new(clock.Clock)
	start := time.Date(2025, 3, 10, 9, 0, 0, 0, time.UTC)
	clock.Set(start)
	oldOpts := stagingOptions(clock)
	oldOpts.DirectWrites = true
	old, svc, _ := dbtest.NewDB(t, oldOpts)
	want := map[string][]tablets.Point{}
	for s := range 5 {
		name := fmt.Sprintf("u%d", s)
		for i := range 10 {
			p := tablets.Point{Time: start.Add(time.Duration(i) * time.Minute), Value: float64(i)}
			require.NoError(t, old.WriteMany(ctx, []tsdb.SeriesPoints{{Series: name, Points: []tablets.Point{p}}}))
			want[name] = append(want[name], p)
		}
	}
	requireSeriesPoints(t, old, want, start, start.Add(time.Hour), "before the upgrade")
	staged, err := old.Fold(ctx)
	require.NoError(t, err)
	require.Zero(t, staged.Entities, "the old path stages nothing")

	upgraded, err := tsdb.Open(ctx, svc, old.Name(), stagingOptions(clock))
	require.NoError(t, err)
	requireSeriesPoints(t, upgraded, want, start, start.Add(time.Hour), "after the upgrade")
	clock.Add(time.Hour)
	for name := range want {
		p := tablets.Point{Time: start.Add(3 * time.Minute), Value: -1}
		require.NoError(t, upgraded.WriteMany(ctx, []tsdb.SeriesPoints{{Series: name, Points: []tablets.Point{p}}}))
		want[name][3] = p
	}
	requireSeriesPoints(t, upgraded, want, start, start.Add(time.Hour), "a new staged write over an old time")
	clock.Add(time.Hour)
	rep, err := upgraded.Fold(ctx)
	require.NoError(t, err)
	require.Equal(t, len(want), rep.Points)
	requireSeriesPoints(t, upgraded, want, start, start.Add(time.Hour), "folded over the old chunks")
}

// dying is a transport that fails every request after the first alive ones since armed, as
// if the process had died there.
type dying struct {
	next  policy.Transporter
	alive atomic.Int64 // requests left; negative: not armed
	sent  atomic.Int64
}

func (d *dying) Do(req *http.Request) (*http.Response, error) {
	if d.alive.Load() >= 0 && d.alive.Add(-1) < 0 {
		return nil, errors.New("dying: the process is gone")
	}
	d.sent.Add(1)
	return d.next.Do(req)
}

// A Fold killed after each of its requests in turn loses nothing and shows nothing twice:
// after every death, a reader sees every point written, with its last value; a Fold after
// the lease of the dead one ended finishes the work.
func TestTSDBStagedFoldKilledAtEveryStep(t *testing.T) {
	ctx := context.Background()
	clock := new(clock.Clock)
	start := time.Date(2025, 3, 10, 9, 0, 0, 0, time.UTC)
	clock.Set(start)
	db, _, _ := dbtest.NewDB(t, stagingOptions(clock))
	d := &dying{next: azurite.DefaultTransport()}
	d.alive.Store(-1)
	srv := azurite.Shared(t)
	svc, err := srv.NewServiceClient(&aztables.ClientOptions{ClientOptions: policy.ClientOptions{Transport: d,
		Retry: policy.RetryOptions{MaxRetries: -1}}})
	require.NoError(t, err)
	want := map[string][]tablets.Point{}
	write := func(i int) {
		var req []tsdb.SeriesPoints
		for s := range 12 {
			name := fmt.Sprintf("k%02d", s)
			// Every write rewrites the time of the one before it, and adds one.
			pts := []tablets.Point{{Time: start.Add(time.Duration(i) * time.Second), Value: float64(i*100 + s)}}
			if i > 0 {
				pts = append(pts, tablets.Point{Time: start.Add(time.Duration(i-1) * time.Second), Value: -float64(i*100 + s)})
				want[name][len(want[name])-1] = pts[1]
			}
			want[name] = append(want[name], pts[0])
			req = append(req, tsdb.SeriesPoints{Series: name, Points: pts})
		}
		require.NoError(t, db.WriteMany(ctx, req))
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
		requireSeriesPoints(t, db, want, start, start.Add(time.Hour), fmt.Sprintf("after a fold killed after %d requests", k))
		if err == nil {
			steps = k
			break
		}
	}
	t.Logf("a fold of 12 series killed after each of its first %d requests", steps)
	require.Greater(t, steps, 8)
	rep, err := db.Fold(ctx)
	require.NoError(t, err)
	require.Zero(t, rep.Entities, "the fold that lived folded everything")
	requireSeriesPoints(t, db, want, start, start.Add(time.Hour), "at the end")
}

// Backfill into a rolled-up day, staged: the late points flag their windows, Aggregate
// answers the model before any fold, and after Fold and Rollup (what tablets maintain runs)
// it still does, from the tiers.
func TestTSDBStagedBackfillThenMaintain(t *testing.T) {
	ctx := context.Background()
	clock := new(clock.Clock)
	day := time.Date(2025, 3, 10, 0, 0, 0, 0, time.UTC)
	opts := stagingOptions(clock)
	opts.Tiers = nil // the default tiers: a minute and an hour
	db, _, checker := dbtest.NewDB(t, opts)
	names := []string{"b0", "b1", "b2"}
	var all []tablets.Point
	writeAt := func(now time.Time, from, to time.Time, step time.Duration, value func(i int) float64) {
		clock.Set(now)
		var req []tsdb.SeriesPoints
		for s, n := range names {
			var pts []tablets.Point
			for i, at := 0, from; at.Before(to); i, at = i+1, at.Add(step) {
				pts = append(pts, tablets.Point{Time: at.Add(time.Duration(s) * time.Second), Value: value(i)})
			}
			all = append(all, pts...)
			req = append(req, tsdb.SeriesPoints{Series: n, Points: pts})
		}
		require.NoError(t, db.WriteMany(ctx, req))
	}
	// A day as it happens: 30 minutes a write, a point a minute (staged: under 100).
	for h := range 48 {
		from := day.Add(time.Duration(h) * 30 * time.Minute)
		writeAt(from.Add(30*time.Minute), from, from.Add(30*time.Minute), time.Minute, func(i int) float64 { return float64(h*30 + i) })
	}
	clock.Set(day.Add(26 * time.Hour))
	_, err := db.Fold(ctx)
	require.NoError(t, err)
	require.NoError(t, db.Rollup(ctx, day, day.Add(24*time.Hour)))

	// A day later, a backfill of 20 s points into hours 5 and 6 of that day, 20 minutes a
	// write (60 points a series: staged), flagged.
	checker.Reset()
	for w := range 6 {
		from := day.Add(5*time.Hour + 10*time.Second + time.Duration(w)*20*time.Minute)
		writeAt(day.Add(30*time.Hour), from, from.Add(20*time.Minute), 20*time.Second, func(i int) float64 { return -float64(w*60 + i) })
	}
	require.Equal(t, int64(6), checker.Stats().Batches, "a transaction a write: the late points flag nothing yet")
	model := itest.ModelWindows(all, day, day.Add(24*time.Hour), time.Hour)
	itest.RequireWindows(t, model, itest.CollectWindows(t, db.Aggregate(ctx, names, day, day.Add(24*time.Hour), time.Hour, nil)), "backfilled, staged")
	// A rollup meanwhile sees the staged points too.
	require.NoError(t, db.Rollup(ctx, day, day.Add(24*time.Hour)))
	itest.RequireWindows(t, model, itest.CollectWindows(t, db.Aggregate(ctx, names, day, day.Add(24*time.Hour), time.Hour, nil)), "rolled up while staged")

	// maintain: fold (which flags the windows of the late points), then roll up again; the
	// tiers answer, cheaply.
	clock.Set(day.Add(32 * time.Hour))
	checker.Reset()
	rep, err := db.Fold(ctx)
	require.NoError(t, err)
	require.Equal(t, len(names)*6*60, rep.Points)
	t.Logf("fold of %d series' late points: %d requests", len(names), checker.Stats().Requests)
	itest.RequireWindows(t, model, itest.CollectWindows(t, db.Aggregate(ctx, names, day, day.Add(24*time.Hour), time.Hour, nil)), "folded, flagged")
	_, err = db.RollupFlagged(ctx) // the slices the fold marked dirty
	require.NoError(t, err)
	checker.Reset()
	itest.RequireWindows(t, model, itest.CollectWindows(t, db.Aggregate(ctx, names, day, day.Add(24*time.Hour), time.Hour, nil)), "after fold and rollup")
	t.Logf("Aggregate of a day of 3 series at an hour after maintain: %d requests", checker.Stats().Requests)
	require.LessOrEqual(t, checker.Stats().Requests, int64(3), "the hour tier's blocks, the dirty markers and the staging query, no raw read")
}

var _ writer.ManySink = (*tsdb.DB)(nil) // a Writer over a DB writes a flush in one WriteMany

// A staging transaction that fails reports exactly the caller's points it held: times
// finer than a millisecond and points overwritten in the same call included, so that
// writing the failed points again stores what the call meant.
func TestTSDBStagedWriteErrorExact(t *testing.T) {
	ctx := context.Background()
	var failing atomic.Bool
	srv := azurite.Shared(t)
	lossy, err := srv.NewServiceClient(&aztables.ClientOptions{ClientOptions: policy.ClientOptions{
		Transport: fault.New(azurite.DefaultTransport(), fault.Options{Seed: 1, FailBefore: 1,
			Match: func(req *http.Request) bool { return failing.Load() && strings.HasSuffix(req.URL.Path, "$batch") }}),
		Retry: policy.RetryOptions{MaxRetries: 1, RetryDelay: time.Millisecond}}})
	require.NoError(t, err)
	clock := clock.New(time.Date(2025, 3, 10, 9, 0, 0, 0, time.UTC))
	db, _, _ := dbtest.NewDB(t, stagingOptions(clock))
	w, err := tsdb.Open(ctx, lossy, db.Name(), stagingOptions(clock))
	require.NoError(t, err)
	at := clock.Now()
	pts := []tablets.Point{
		{Time: at.Add(100 * time.Microsecond), Value: 1},
		{Time: at.Add(300 * time.Microsecond), Value: 2}, // the same millisecond: overwrites 1
		{Time: at.Add(time.Second), Value: 3},
	}
	require.NoError(t, w.WriteMany(ctx, []tsdb.SeriesPoints{{Series: "warm", Points: []tablets.Point{{Time: at, Value: 0}}}}))
	failing.Store(true)
	err = w.WriteMany(ctx, []tsdb.SeriesPoints{{Series: "x", Points: pts}, {Series: "y", Points: pts[2:]}})
	failing.Store(false)
	var wes []*tablets.WriteError
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var we *tablets.WriteError
		require.ErrorAs(t, e, &we)
		wes = append(wes, we)
	}
	require.Len(t, wes, 2)
	got := map[string][]tablets.Point{wes[0].Series: wes[0].Failed, wes[1].Series: wes[1].Failed}
	require.Equal(t, pts, got["x"])
	require.Equal(t, pts[2:], got["y"])
	require.NotZero(t, wes[0].Status, "the service's answer")
	require.NoError(t, w.WriteMany(ctx, []tsdb.SeriesPoints{{Series: "x", Points: got["x"]}, {Series: "y", Points: got["y"]}}))
	requireSeriesPoints(t, db, map[string][]tablets.Point{
		"x": {{Time: at, Value: 2}, {Time: at.Add(time.Second), Value: 3}}, "y": pts[2:]}, at, at.Add(time.Minute), "written again")
}
