package tsdb

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/testkit/azurite"
	"github.com/seed71701133/tablets/internal/testkit/clock"
	"github.com/seed71701133/tablets/internal/testkit/dbtest"
	"github.com/seed71701133/tablets/internal/testkit/itest"
	"github.com/seed71701133/tablets/internal/testkit/storetest"
	"github.com/seed71701133/tablets/tsdb"
)

// newDB opens a database with a fresh name on the shared Azurite, every request through a
// checking transport, and drops its tables when the test ends.
func newDB(t *testing.T, opts *tsdb.Options) (*tsdb.DB, *aztables.ServiceClient, *azurite.Checker) {
	return dbtest.NewDB(t, opts)
}

// tsdbHarness runs the conformance suite on a database's raw tables, written directly: of
// the format of a database made now (chunked at a millisecond), or of the advanced layout
// (a database made before tsdb recorded its format).
type tsdbHarness struct {
	period   time.Duration
	advanced bool
}

func (h tsdbHarness) Name() string {
	if h.advanced {
		return "tsdb-raw-advanced-" + h.period.String()
	}
	return "tsdb-raw-" + h.period.String()
}

func (h tsdbHarness) Resolution() time.Duration {
	if h.advanced {
		return time.Second // advanced's
	}
	return time.Millisecond
}

func (h tsdbHarness) NewStore(t *testing.T) (tablets.Store, func() int64) {
	opts := &tsdb.Options{RawPeriod: h.period, DirectWrites: true}
	if h.advanced {
		opts.Layout = advancedLayout
	}
	db, _, checker := newDB(t, opts)
	return db, func() int64 { return checker.Stats().Requests }
}

// stagedHarness runs the conformance suite on a chunked database that stages its writes:
// read from the staging table (folded false), or folded into the raw tables after every
// write (the clock moved 20 minutes on first, so that the write is foldable at once).
type stagedHarness struct{ folded bool }

func (h stagedHarness) Name() string {
	if h.folded {
		return "tsdb-staged-folded"
	}
	return "tsdb-staged"
}
func (h stagedHarness) Resolution() time.Duration { return time.Millisecond }
func (h stagedHarness) NewStore(t *testing.T) (tablets.Store, func() int64) {
	clock := clock.New(time.Now())
	db, _, checker := newDB(t, stagingOptions(clock))
	if !h.folded {
		return db, func() int64 { return checker.Stats().Requests }
	}
	return foldingStore{db, clock}, func() int64 { return checker.Stats().Requests }
}

// foldingStore folds after every write that succeeds.
type foldingStore struct {
	*tsdb.DB
	clock *clock.Clock
}

func (s foldingStore) Write(ctx context.Context, series string, points ...tablets.Point) error {
	if err := s.DB.Write(ctx, series, points...); err != nil || len(points) == 0 {
		return err
	}
	s.clock.Add(20 * time.Minute)
	_, err := s.DB.Fold(ctx)
	return err
}

// The raw tables of a database behave as one store: the whole conformance suite, with
// periods of a day and of an hour (data across many tables), and over the staging table,
// folded and not.
func TestTSDBConformance(t *testing.T) {
	for _, h := range []tsdbHarness{{period: 24 * time.Hour}, {period: time.Hour, advanced: true}} {
		t.Run(h.Name(), func(t *testing.T) {
			t.Parallel()
			storetest.RunConformanceTests(t, h)
		})
	}
	for _, folded := range []bool{false, true} {
		h := stagedHarness{folded}
		t.Run(h.Name(), func(t *testing.T) {
			t.Parallel()
			storetest.RunConformanceTests(t, h)
		})
	}
}

func TestTSDBOptions(t *testing.T) {
	srv := azurite.Shared(t)
	svc, err := srv.NewServiceClient(nil)
	require.NoError(t, err)
	ctx := context.Background()
	for name, c := range map[string]struct {
		name string
		opts tsdb.Options
	}{
		"too short a name":        {"ab", tsdb.Options{}},
		"too long a name":         {strings.Repeat("a", 41), tsdb.Options{}},
		"a digit first":           {"1abc", tsdb.Options{}},
		"a dash":                  {"ab-c", tsdb.Options{}},
		"an underscore":           {"ab_c", tsdb.Options{}},
		"a period under a second": {"abc", tsdb.Options{RawPeriod: time.Millisecond}},
		"a period of 1.5 s":       {"abc", tsdb.Options{RawPeriod: 1500 * time.Millisecond}},
		"a negative retention":    {"abc", tsdb.Options{RawRetention: -time.Hour}},
		"a layout that cannot be": {"abc", tsdb.Options{Layout: func(*aztables.Client) (tablets.Store, error) { return nil, tablets.ErrInvalidOptions }}},
	} {
		_, err := tsdb.Open(ctx, svc, c.name, &c.opts)
		require.ErrorIs(t, err, tablets.ErrInvalidOptions, name)
	}
	_, err = tsdb.Open(ctx, nil, "abc", nil)
	require.ErrorIs(t, err, tablets.ErrInvalidOptions)
}

// Retain drops whole raw tables, one request each, once their span is older than the
// retention; writes there are ErrExpired and send nothing; reads return what remains; a
// dropped period's table is never created again, even once the clock would allow it.
func TestTSDBRetention(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2024, 5, 20, 12, 0, 0, 0, time.UTC)
	clock := clock.New(now)
	db, svc, checker := newDB(t, &tsdb.Options{RawPeriod: time.Hour, RawRetention: 48 * time.Hour, Now: clock.Now})
	var pts []tablets.Point
	for h := 1; h <= 72; h++ { // an hour a table, the oldest two days back... and then some
		at := now.Add(-time.Duration(h)*time.Hour + 30*time.Minute)
		if at.Before(now.Add(-47 * time.Hour)) {
			continue // older than the retention: a Write would refuse it
		}
		pts = append(pts, tablets.Point{Time: at, Value: float64(h)})
	}
	require.NoError(t, db.Write(ctx, "cpu", pts...))
	before := checker.Stats()
	// Retain "three days later": the tables whose whole hour ended 48 h before that go.
	later := now.Add(24 * time.Hour)
	dropped, err := db.Retain(ctx, later)
	require.NoError(t, err)
	require.NotEmpty(t, dropped)
	deletes := checker.Stats().Other - before.Other
	t.Logf("dropped %d tables in %d table requests", len(dropped), deletes)
	require.LessOrEqual(t, deletes, int64(len(dropped))+4,
		"one request a table, one to list the raw tables and one the minute tier's, and the 2 tier tables the rollup before the drops makes")

	remaining := itest.CollectPoints(t, db.Query(ctx, "cpu", now.Add(-72*time.Hour), now.Add(time.Hour)))
	for _, p := range remaining {
		require.True(t, p.Time.After(later.Add(-49*time.Hour)), "a point of a dropped period came back: %v", p.Time)
	}
	require.NotEmpty(t, remaining)
	require.Less(t, len(remaining), len(pts))
	gone, err := db.Series(ctx, now.Add(-72*time.Hour), later.Add(-49*time.Hour))
	require.NoError(t, err)
	require.Empty(t, gone, "a dropped period's index goes with it")
	kept, err := db.Series(ctx, now.Add(-24*time.Hour), now)
	require.NoError(t, err)
	require.Equal(t, []string{"cpu"}, kept)

	// A write into a dropped period: ErrExpired, nothing sent, the table not recreated.
	old := pts[len(pts)-1] // the oldest point, in a dropped period
	before = checker.Stats()
	err = db.Write(ctx, "cpu", old)
	require.ErrorIs(t, err, tsdb.ErrExpired)
	require.Equal(t, before.Batches, checker.Stats().Batches)
	exists := false
	for p := svc.NewListTablesPager(nil); p.More(); {
		page, err := p.NextPage(ctx)
		require.NoError(t, err)
		for _, tb := range page.Tables {
			exists = exists || strings.HasSuffix(*tb.Name, dropped[0][len(db.Name()):])
		}
	}
	require.False(t, exists, "a dropped table was created again")

	// Another process (no cache) refuses it too, from the catalog.
	other, err := tsdb.Open(ctx, svc, db.Name(), &tsdb.Options{RawPeriod: time.Hour})
	require.NoError(t, err)
	require.ErrorIs(t, other.Write(ctx, "cpu", old), tsdb.ErrExpired)

	// Older than the retention by the clock: refused before any request.
	before = checker.Stats()
	require.ErrorIs(t, db.Write(ctx, "cpu", tablets.Point{Time: now.Add(-48*time.Hour - time.Nanosecond), Value: 1}), tsdb.ErrExpired)
	require.Equal(t, before.Requests, checker.Stats().Requests)
}

// A Write lists its series in its periods' indexes once: Series reads them back for a range;
// a second write of a series in a period costs nothing more; another process (no cache)
// registers again, harmlessly; Retain drops a period's index with its points.
func TestTSDBSeriesIndex(t *testing.T) {
	ctx := context.Background()
	db, svc, checker := newDB(t, &tsdb.Options{RawPeriod: time.Hour})
	base := time.Date(2024, 5, 17, 10, 0, 0, 0, time.UTC)
	at := func(h int) tablets.Point {
		return tablets.Point{Time: base.Add(time.Duration(h)*time.Hour + time.Minute), Value: float64(h)}
	}
	require.NoError(t, db.Write(ctx, "cpu", at(0), at(1)))
	require.NoError(t, db.Write(ctx, "mem", at(1)))
	require.ErrorIs(t, db.Write(ctx, "disk/0", at(2)), tablets.ErrInvalidSeries, "a bad name is refused")
	before := checker.Stats()
	require.NoError(t, db.Write(ctx, "cpu", at(0)))
	require.Equal(t, before.EntityWrites+1, checker.Stats().EntityWrites, "a registered series costs no index write: the staging mark only")

	list := func(from, to int) []string {
		got, err := db.Series(ctx, base.Add(time.Duration(from)*time.Hour), base.Add(time.Duration(to)*time.Hour))
		require.NoError(t, err)
		return got
	}
	require.Equal(t, []string{"cpu"}, list(0, 1))
	require.Equal(t, []string{"cpu", "mem"}, list(1, 2))
	require.Equal(t, []string{"cpu", "mem"}, list(0, 3))
	require.Empty(t, list(2, 3))
	require.Empty(t, list(5, 9))

	other, err := tsdb.Open(ctx, svc, db.Name(), &tsdb.Options{RawPeriod: time.Hour})
	require.NoError(t, err)
	require.NoError(t, other.Write(ctx, "mem", at(1)))
	require.Equal(t, []string{"cpu", "mem"}, list(1, 2))
}
