package tsdb

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net/http"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/testkit/clock"
	"github.com/seed71701133/tablets/internal/testkit/dbtest"
	"github.com/seed71701133/tablets/tsdb"
)

// appenderLoad is a remote-write-shaped load: floats of series [0, floats), histograms of
// series [hists0, len(names)), one sample each a scrape, the series of both kinds holding a
// float and a histogram at different milliseconds.
type appenderLoad struct {
	names          []string
	floats, hists0 int
	start          time.Time
}

func (l appenderLoad) scrape(i int) ([]tsdb.SeriesPoints, []tsdb.SeriesHistograms) {
	at := l.start.Add(time.Duration(i) * 15 * time.Second)
	var pts []tsdb.SeriesPoints
	var hs []tsdb.SeriesHistograms
	for s, n := range l.names {
		if s < l.floats {
			pts = append(pts, tsdb.SeriesPoints{Series: n, Points: []tablets.Point{{Time: at.Add(time.Duration(s%1000) * time.Millisecond), Value: float64(i*10000 + s)}}})
		}
		if s >= l.hists0 {
			hs = append(hs, tsdb.SeriesHistograms{Series: n, Histograms: []tsdb.HistogramPoint{stagedHistSample(at.Add(time.Duration(s%1000+1)*time.Millisecond), s, i)}})
		}
	}
	return pts, hs
}

// A remote write of floats and histograms costs the transactions of one staging write: the
// Appender (WriteSamples) stages both kinds in the same transactions and lists a series new
// to the period once, where a write of each kind (WriteMany, then WriteSamples of the
// histograms) costs two staging writes and lists a series of both kinds twice. The samples read back, and Select flags exactly the series
// with histograms.
func TestTSDBAppenderMixedCost(t *testing.T) {
	ctx := context.Background()
	clock := new(clock.Clock)
	start := time.Date(2025, 3, 10, 9, 0, 0, 0, time.UTC)
	clock.Set(start.Add(time.Second))
	db, _, checker := dbtest.NewDB(t, stagingOptions(clock))
	old, _, oldChecker := dbtest.NewDB(t, stagingOptions(clock))
	// 2,000 series of 10 metrics: floats of 1,200, histograms of 1,200, 400 with both.
	load := appenderLoad{names: seriesNames(t, db, 2000), floats: 1200, hists0: 800, start: start}
	require.Equal(t, load.names, seriesNames(t, old, 2000))
	checker.Reset()
	oldChecker.Reset()

	wantPoints := map[string][]tablets.Point{}
	wantHists := map[string][]tsdb.HistogramPoint{}
	type cost struct{ requests, batches int64 }
	write := func(i int) (appender, twoCalls cost) {
		pts, hs := load.scrape(i)
		for _, sp := range pts {
			wantPoints[sp.Series] = append(wantPoints[sp.Series], sp.Points...)
		}
		for _, sh := range hs {
			wantHists[sh.Series] = append(wantHists[sh.Series], sh.Histograms...)
		}
		clock.Set(start.Add(time.Duration(i)*15*time.Second + time.Second))
		checker.Reset()
		require.NoError(t, db.WriteSamples(ctx, pts, hs))
		st := checker.Stats()
		appender = cost{st.Requests, st.Batches}
		oldChecker.Reset()
		require.NoError(t, old.WriteMany(ctx, pts))
		require.NoError(t, old.WriteSamples(ctx, nil, hs))
		st = oldChecker.Stats()
		return appender, cost{st.Requests, st.Batches}
	}

	// New to the period: the index entries (a transaction per metric partition and 100
	// series), then one staging transaction for both kinds.
	first, firstOld := write(0)
	t.Logf("first write (1,200 float and 1,200 histogram series, new): one commit %d requests (%d transactions); a write of each kind %d (%d)",
		first.requests, first.batches, firstOld.requests, firstOld.batches)
	// Each metric (a partition) has 120 float series, 120 histogram series, 200 distinct.
	require.Equal(t, int64(10*2+1), first.batches, "200 series a metric: 2 index transactions each, and one staging transaction")
	require.Equal(t, int64(10*(2+2)+2), firstOld.batches, "two registrations and two staging writes")
	second, secondOld := write(1)
	t.Logf("second write: one commit %d requests (%d transactions); a write of each kind %d (%d)",
		second.requests, second.batches, secondOld.requests, secondOld.batches)
	// And after its transactions, the staging mark (docs/format.md, "The staging mark").
	require.Equal(t, cost{2, 1}, second, "the series listed: one transaction of float and histogram staging entities, and the mark")
	require.Equal(t, cost{4, 2}, secondOld)

	from, to := start, start.Add(time.Hour)
	requireSeriesPoints(t, db, wantPoints, from, to, "staged floats")
	requireSeriesHists(t, db, wantHists, from, to, "staged histograms")
	flagged := map[string]bool{}
	for s, err := range db.Select(ctx, from, to, tsdb.Matcher{Type: tsdb.MatchRegexp, Name: "__name__", Value: "metric_.*"}) {
		require.NoError(t, err)
		flagged[s.Series] = s.Histograms
	}
	require.Len(t, flagged, 2000)
	for s, n := range load.names {
		require.Equal(t, s >= load.hists0, flagged[n], "series %d flagged as having histograms", s)
	}

	// Fold moves both kinds; they read back the same.
	clock.Add(time.Hour)
	rep, err := db.Fold(ctx)
	require.NoError(t, err)
	require.Equal(t, 2*(1200+1200), rep.Points)
	requireSeriesPoints(t, db, wantPoints, from, to, "folded floats")
	requireSeriesHists(t, db, wantHists, from, to, "folded histograms")
}

// stageSlot is tsdb's staging slot of a series: the top byte of its key's FNV-1a.
func stageSlot(series string) int {
	h := fnv.New64a()
	h.Write([]byte(series))
	return int(h.Sum64() >> 56)
}

// A commit whose staging transaction of one partition fails lists exactly the samples of
// both kinds of the series of that partition (float points in Failed, histograms in
// FailedHistograms, a WriteError each), with the service's answer; everything else is
// stored, the series written directly included. Writing the failed samples again stores
// them.
func TestTSDBAppenderStagingFailureListsBothKinds(t *testing.T) {
	ctx := context.Background()
	clock := new(clock.Clock)
	start := time.Date(2025, 3, 10, 9, 0, 0, 0, time.UTC)
	clock.Set(start.Add(time.Minute))
	opts := stagingOptions(clock)
	opts.StagingPartitions = 2
	db, _, _ := dbtest.NewDB(t, opts)
	names := seriesNames(t, db, 40)
	bucket := start.Truncate(10 * time.Minute).Unix()
	fault := &histFault{match: fmt.Sprintf(`"PartitionKey":"%012d-80"`, bucket)}
	faulty := reopenWith(t, db.Name(), opts, func(next policy.Transporter) policy.Transporter { fault.next = next; return fault })

	a := faulty.Appender()
	wantPoints := map[string][]tablets.Point{}
	wantHists := map[string][]tsdb.HistogramPoint{}
	lostPoints := map[string][]tablets.Point{}
	lostHists := map[string][]tsdb.HistogramPoint{}
	for s, n := range names {
		at := start.Add(time.Duration(s) * time.Millisecond)
		pts := []tablets.Point{{Time: at, Value: float64(s)}, {Time: at.Add(time.Second), Value: float64(-s)}}
		hs := []tsdb.HistogramPoint{stagedHistSample(at.Add(2*time.Second), s, 0), stagedHistSample(at.Add(3*time.Second), s, 1)}
		a.AppendPoints(n, pts...)
		a.AppendHistograms(n, hs...)
		wantPoints[n], wantHists[n] = pts, hs
		if stageSlot(n) >= 0x80 {
			lostPoints[n], lostHists[n] = pts, hs
		}
	}
	require.NotEmpty(t, lostPoints, "some series in the failing partition")
	require.Less(t, len(lostPoints), len(names), "some in the other")
	// Two series written directly (100 samples or more): stored whatever their slot.
	var many []tablets.Point
	var manyHists []tsdb.HistogramPoint
	for i := range 120 {
		many = append(many, tablets.Point{Time: start.Add(time.Duration(i) * time.Second), Value: float64(i)})
		manyHists = append(manyHists, hp(start.Add(time.Duration(i)*time.Second+time.Millisecond), intHist(uint64(i+1))))
	}
	a.AppendPoints("direct", many...)
	a.AppendHistograms("direct", manyHists...)
	wantPoints["direct"], wantHists["direct"] = many, manyHists

	err := a.Commit(ctx)
	require.Error(t, err)
	require.ErrorIs(t, err, tablets.ErrThrottled)
	gotPoints := map[string][]tablets.Point{}
	gotHists := map[string][]tsdb.HistogramPoint{}
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var we *tablets.WriteError
		require.ErrorAs(t, e, &we)
		require.Equal(t, http.StatusServiceUnavailable, we.Status, "%v", we)
		require.Equal(t, "ServerBusy", we.Code)
		require.True(t, len(we.Failed) == 0 || len(we.FailedHistograms) == 0, "one kind a WriteError: %v", we)
		gotPoints[we.Series] = append(gotPoints[we.Series], we.Failed...)
		gotHists[we.Series] = append(gotHists[we.Series], we.FailedHistograms...)
	}
	for n := range gotPoints {
		if len(gotPoints[n]) == 0 {
			delete(gotPoints, n)
		}
		if len(gotHists[n]) == 0 {
			delete(gotHists, n)
		}
	}
	require.Equal(t, lostPoints, gotPoints, "exactly the float points of the failed transaction")
	require.Equal(t, lostHists, gotHists, "exactly the histogram samples of the failed transaction")

	// The rest is stored.
	from, to := start, start.Add(time.Hour)
	stored := func(all map[string][]tablets.Point, lost map[string][]tablets.Point) map[string][]tablets.Point {
		out := map[string][]tablets.Point{}
		for n, pts := range all {
			if lost[n] == nil {
				out[n] = pts
			}
		}
		return out
	}
	requireSeriesPoints(t, db, stored(wantPoints, lostPoints), from, to, "stored floats")
	storedHists := map[string][]tsdb.HistogramPoint{}
	for n, hs := range wantHists {
		if lostHists[n] == nil {
			storedHists[n] = hs
		}
	}
	requireSeriesHists(t, db, storedHists, from, to, "stored histograms")
	for n := range lostPoints {
		require.Empty(t, queryHist(t, db, n, from, to), "%s: a histogram of the failed transaction stored", n)
	}

	// The caller writes again exactly what the error listed: everything is stored.
	retry := db.Appender()
	for n, pts := range gotPoints {
		retry.AppendPoints(n, pts...)
	}
	for n, hs := range gotHists {
		retry.AppendHistograms(n, hs...)
	}
	require.NoError(t, retry.Commit(ctx))
	requireSeriesPoints(t, db, wantPoints, from, to, "all floats")
	requireSeriesHists(t, db, wantHists, from, to, "all histograms")
}

// A commit's rejects are typed and exact, for both kinds, in the order appended, before any
// request; the good samples of the same commit are stored. A commit of rejects only sends
// nothing.
func TestTSDBAppenderRejects(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2025, 3, 10, 12, 0, 0, 0, time.UTC)
	clock := clock.New(now)
	opts := stagingOptions(clock)
	opts.RawPeriod = time.Hour
	opts.RawRetention = 24 * time.Hour
	db, _, checker := dbtest.NewDB(t, opts)

	good := tablets.Point{Time: now.Add(-time.Minute), Value: 1}
	goodH := hp(now.Add(-time.Minute), intHist(2))
	badTime := tablets.Point{Time: time.Date(1960, 1, 1, 0, 0, 0, 0, time.UTC), Value: 3}
	badTimeH := hp(time.Date(1960, 1, 1, 0, 0, 0, 0, time.UTC), intHist(4))
	expired := tablets.Point{Time: now.Add(-25 * time.Hour), Value: 5}
	expiredH := hp(now.Add(-25*time.Hour), intHist(6))
	invalidH := tsdb.HistogramPoint{Time: now.Add(-time.Second)} // no histogram

	type reject struct {
		series string
		cause  error
		failed []tablets.Point
		hists  []tsdb.HistogramPoint
	}
	rejects := func(err error) []reject {
		t.Helper()
		var out []reject
		for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
			var we *tablets.WriteError
			require.ErrorAs(t, e, &we)
			require.Equal(t, -1, we.Index)
			require.Zero(t, we.Status)
			require.False(t, errors.Is(we, tablets.ErrThrottled))
			var cause error
			for _, s := range []error{tablets.ErrInvalidSeries, tablets.ErrInvalidHistogram, tablets.ErrInvalidTime, tsdb.ErrExpired} {
				if errors.Is(we, s) {
					require.Nil(t, cause, "two sentinels in %v", we)
					cause = s
				}
			}
			require.NotNil(t, cause, "no sentinel in %v", we)
			out = append(out, reject{we.Series, cause, we.Failed, we.FailedHistograms})
		}
		return out
	}

	// Rejects only: no request.
	a := db.Appender()
	a.AppendHistograms("h", invalidH, badTimeH, expiredH)
	a.AppendPoints("bad/name", good)
	a.AppendHistograms("bad/name", goodH)
	a.AppendPoints("f", badTime, expired)
	checker.Reset()
	err := a.Commit(ctx)
	require.Equal(t, int64(0), checker.Stats().Requests, "rejects only: nothing sent")
	require.Equal(t, []reject{
		{"h", tablets.ErrInvalidHistogram, nil, []tsdb.HistogramPoint{invalidH}},
		{"h", tablets.ErrInvalidTime, nil, []tsdb.HistogramPoint{badTimeH}},
		{"h", tsdb.ErrExpired, nil, []tsdb.HistogramPoint{expiredH}},
		{"bad/name", tablets.ErrInvalidSeries, []tablets.Point{good}, nil},
		{"bad/name", tablets.ErrInvalidSeries, nil, []tsdb.HistogramPoint{goodH}},
		{"f", tablets.ErrInvalidTime, []tablets.Point{badTime}, nil},
		{"f", tsdb.ErrExpired, []tablets.Point{expired}, nil},
	}, rejects(err))
	require.NoError(t, a.Commit(ctx), "a Commit empties the Appender")

	// Mixed: the good samples of both kinds are stored, the others named.
	a.AppendPoints("m", expired, good, badTime)
	a.AppendHistograms("m", goodH, invalidH)
	require.Equal(t, []reject{
		{"m", tablets.ErrInvalidTime, []tablets.Point{badTime}, nil},
		{"m", tsdb.ErrExpired, []tablets.Point{expired}, nil},
		{"m", tablets.ErrInvalidHistogram, nil, []tsdb.HistogramPoint{invalidH}},
	}, rejects(a.Commit(ctx)))
	requireSeriesPoints(t, db, map[string][]tablets.Point{"m": {good}}, now.Add(-time.Hour), now, "m's float")
	requireSamples(t, []tsdb.HistogramPoint{goodH}, queryHist(t, db, "m", now.Add(-time.Hour), now))

	// Rollback drops what was appended.
	a.AppendPoints("r", good)
	a.Rollback()
	checker.Reset()
	require.NoError(t, a.Commit(ctx))
	require.Equal(t, int64(0), checker.Stats().Requests)
}
