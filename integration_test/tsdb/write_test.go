package tsdb

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/testkit/clock"
	"github.com/seed71701133/tablets/internal/testkit/itest"
	"github.com/seed71701133/tablets/tsdb"
)

// WriteMany with a batch mixing good series, expired points (older than the retention by the
// clock, and in a period Retain dropped), points of invalid times and a series of an invalid
// name stores exactly the good points, and names exactly the others with their sentinels.
func TestTSDBWriteManyRejects(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2024, 5, 20, 12, 30, 0, 0, time.UTC)
	clock := clock.New(now)
	db, svc, checker := newDB(t, &tsdb.Options{RawPeriod: time.Hour, RawRetention: 48 * time.Hour, Tiers: []tsdb.Tier{}, Now: clock.Now})

	// A period 30 hours back, within the retention by the clock, but dropped by a Retain run
	// as if a day later.
	droppedAt := now.Add(-30 * time.Hour)
	require.NoError(t, db.Write(ctx, "seed", tablets.Point{Time: droppedAt, Value: 0}))
	dropped, err := db.Retain(ctx, now.Add(24*time.Hour))
	require.NoError(t, err)
	require.Contains(t, dropped, db.Name()+"r"+itoa(droppedAt.Truncate(time.Hour).Unix()))

	p := func(at time.Time, v float64) tablets.Point { return tablets.Point{Time: at, Value: v} }
	good1 := []tablets.Point{p(now.Add(-time.Hour), 1), p(now.Add(-time.Minute), 2)}
	good2 := []tablets.Point{p(now.Add(-47*time.Hour), 3)}
	expired := p(now.Add(-49*time.Hour), 4)
	inDropped := p(droppedAt.Add(time.Minute), 5)
	badTime := p(time.Date(1969, 12, 31, 0, 0, 0, 0, time.UTC), 6)
	keep := p(now.Add(-2*time.Hour), 7)
	batch := []tsdb.SeriesPoints{
		{Series: "good1", Points: good1},
		{Series: "good2", Points: good2},
		{Series: "expired", Points: []tablets.Point{expired}},
		{Series: "dropped", Points: []tablets.Point{inDropped}},
		{Series: "badtime", Points: []tablets.Point{badTime}},
		{Series: "bad/name", Points: []tablets.Point{keep}},
		{Series: "mixed", Points: []tablets.Point{expired, keep, badTime, inDropped}},
	}
	checker.Reset()
	err = db.WriteMany(ctx, batch)
	require.Error(t, err)
	var first *tablets.WriteError
	require.ErrorAs(t, err, &first)

	type reject struct {
		series string
		cause  error
		failed []tablets.Point
	}
	var got []reject
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var we *tablets.WriteError
		require.ErrorAs(t, e, &we)
		require.Equal(t, -1, we.Index)
		require.False(t, errors.Is(we, tablets.ErrThrottled))
		cause := error(nil)
		for _, s := range []error{tablets.ErrInvalidSeries, tablets.ErrInvalidTime, tsdb.ErrExpired} {
			if errors.Is(we, s) {
				require.Nil(t, cause, "two sentinels in %v", we)
				cause = s
			}
		}
		require.NotNil(t, cause, "no sentinel in %v", we)
		got = append(got, reject{we.Series, cause, we.Failed})
	}
	want := []reject{
		{"expired", tsdb.ErrExpired, []tablets.Point{expired}},
		{"dropped", tsdb.ErrExpired, []tablets.Point{inDropped}},
		{"badtime", tablets.ErrInvalidTime, []tablets.Point{badTime}},
		{"bad/name", tablets.ErrInvalidSeries, []tablets.Point{keep}},
		{"mixed", tablets.ErrInvalidTime, []tablets.Point{badTime}},
		{"mixed", tsdb.ErrExpired, []tablets.Point{expired}},
		{"mixed", tsdb.ErrExpired, []tablets.Point{inDropped}},
	}
	require.Equal(t, want, got)

	// Exactly the good points are stored, in every series.
	stored := map[string][]tablets.Point{}
	for _, s := range []string{"good1", "good2", "expired", "dropped", "badtime", "mixed"} {
		for pt, err := range db.Query(ctx, s, now.Add(-72*time.Hour), now.Add(time.Hour)) {
			require.NoError(t, err)
			stored[s] = append(stored[s], pt)
		}
	}
	require.Equal(t, map[string][]tablets.Point{"good1": good1, "good2": good2, "mixed": {keep}}, utcPoints(stored))

	// The dropped period's table was not made again.
	for pager := svc.NewListTablesPager(nil); pager.More(); {
		page, err := pager.NextPage(ctx)
		require.NoError(t, err)
		for _, tb := range page.Tables {
			require.False(t, slices.Contains(dropped, *tb.Name) && strings.Contains(*tb.Name, "r"), "dropped table %s made again", *tb.Name)
		}
	}
}

func utcPoints(m map[string][]tablets.Point) map[string][]tablets.Point {
	for _, pts := range m {
		for i := range pts {
			pts[i].Time = pts[i].Time.UTC()
		}
	}
	return m
}

// Windows are trusted once sealed by the roller's clock: a Rollup an hour and a half after a
// block's first window ends seals that window only; a later Rollup seals the rest. Aggregate
// reads the tier where sealed and the raw points elsewhere, with the same answer.
func TestTSDBSealDelay(t *testing.T) {
	ctx := context.Background()
	day := time.Date(2024, 5, 2, 0, 0, 0, 0, time.UTC)
	clock := clock.New(day.Add(2*time.Hour + 30*time.Minute))
	db, _, checker := newDB(t, &tsdb.Options{RawPeriod: 24 * time.Hour, Tiers: []tsdb.Tier{{Step: time.Hour}}, Now: clock.Now})
	var pts []tablets.Point
	for i := range 120 {
		pts = append(pts, tablets.Point{Time: day.Add(time.Duration(i) * time.Minute), Value: float64(i % 17)})
	}
	require.NoError(t, db.Write(ctx, "s", pts...))
	require.NoError(t, db.Rollup(ctx, day, day.Add(2*time.Hour)))
	_, err := db.RollupFlagged(ctx) // the slice of the points older than the seal delay, marked dirty
	require.NoError(t, err)
	// Every Aggregate reads the dirty markers (one query) and the staged points (one: a
	// staged point unseals its window), then the tier.
	aggregate := func(from, to time.Time) int64 {
		t.Helper()
		before := checker.Stats().Requests
		got := itest.CollectWindows(t, db.Aggregate(ctx, []string{"s"}, from, to, time.Hour, nil))
		itest.RequireWindows(t, itest.ModelWindows(pts, from, to, time.Hour), got, "Aggregate")
		return checker.Stats().Requests - before
	}
	require.Equal(t, int64(3), aggregate(day, day.Add(time.Hour)), "the first hour is sealed: the tier alone")
	// Raw: the points, and a query finding no histogram table (a request a period).
	require.Equal(t, int64(5), aggregate(day.Add(time.Hour), day.Add(2*time.Hour)), "the second is not: the tier, then the raw points")

	clock.Add(30 * time.Minute)
	require.Equal(t, int64(5), aggregate(day.Add(time.Hour), day.Add(2*time.Hour)), "sealing is the Rollup's time, not the reader's")
	require.NoError(t, db.Rollup(ctx, day, day.Add(2*time.Hour)))
	require.Equal(t, int64(3), aggregate(day, day.Add(2*time.Hour)), "both sealed after a Rollup an hour after the second's end")
}
