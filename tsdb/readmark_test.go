package tsdb

import (
	"context"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/priority"
	"github.com/seed71701133/tablets/internal/testkit/azurite"
	"github.com/seed71701133/tablets/tsdb/internal/changelog"
	"github.com/seed71701133/tablets/tsdb/internal/raw"
)

// A refreshed query of a process with warm caches reads no change log while the logs'
// mark stands: its read mark and Select cost the staging listing alone, and the mark holds.
// Another process's change recorded in a log shows in the next query all the same: a late
// point written directly (the raw log: the mark no longer holds, the point is read), a new
// series (the index log: the Select finds it). A change recorded without the mark (a
// process killed between the two) shows once the listing is made whole again
// (listingRenewal), or at the next recorded change.
func TestReadMarkReadsNoLogWhileTheMarkStands(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	ctx := context.Background()
	fx := newProcessesFixture(t, "mark")
	direct, reader, checker, a, now, svc := fx.direct, fx.reader, fx.checker, fx.a, fx.now, fx.svc
	from, to := now.Add(-time.Hour), now.Add(time.Minute)

	q, err := reader.Queryable(nil)
	require.NoError(t, err)
	// refresh is a query's read: its mark, then a Select of m's series; their samples.
	refresh := func() (ReadMark, map[string]int) {
		t.Helper()
		rctx := reader.BeginRead(ctx)
		m, err := reader.ReadMark(rctx, from, to)
		require.NoError(t, err)
		got := map[string]int{}
		for s, err := range q.Querier(from, to).Select(rctx, nil, Matcher{Type: MatchEqual, Name: MetricName, Value: "m"}) {
			require.NoError(t, err)
			got[s.Labels.Get("k")], _ = s.Len()
		}
		return m, got
	}
	first, got := refresh()
	require.Equal(t, map[string]int{"a": 60}, got)
	// Two refreshes more: the listings find the mark as it was, and the states read after
	// the first of them stand for the last.
	refresh()
	refresh()
	checker.Reset()
	m, got := refresh()
	require.Equal(t, map[string]int{"a": 60}, got)
	require.True(t, m.Holds(first))
	require.Equal(t, int64(1), checker.Stats().Requests, "the staging listing alone")

	// A late point, written directly by another process: the raw log, and the mark.
	require.NoError(t, direct.Write(ctx, a, tablets.Point{Time: from.Add(30 * time.Second), Value: 2}))
	checker.Reset()
	m, got = refresh()
	require.False(t, m.Holds(first), "the late point spoils what was read")
	require.Equal(t, map[string]int{"a": 61}, got)
	require.Greater(t, checker.Stats().Requests, int64(1), "the logs read again")

	// A new series, written directly: the index log, and the mark.
	b, err := direct.SeriesOf(ctx, LabelsFromStrings(MetricName, "m", "k", "b"))
	require.NoError(t, err)
	require.NoError(t, direct.Write(ctx, b, tablets.Point{Time: now.Add(-time.Minute), Value: 3}))
	_, got = refresh()
	require.Equal(t, map[string]int{"a": 61, "b": 1}, got)
	for range 2 {
		refresh()
	}
	checker.Reset()
	before, _ := refresh()
	require.Equal(t, int64(1), checker.Stats().Requests, "the mark stands again: the listing alone")

	// A change recorded without the mark: a process killed between the two. The listings
	// find the mark as it was, and the read mark's states stand, until the listing is made
	// whole again, as the staging table's own log leaves a Fold's or Delete's change.
	p := reader.names.PeriodOf(from)
	_, err = direct.floats.Write(ctx, p, a, []tablets.Point{{Time: from.Add(90 * time.Second), Value: 4}}, priority.Next())
	require.NoError(t, err)
	unmarked := changelog.New(svc.NewClient(reader.names.Catalog()), raw.LogKey, nil)
	require.NoError(t, unmarked.Record(ctx, map[uint64]changelog.Range{p: {From: from.UnixMilli(), To: from.UnixMilli() + 1}}))
	m, _ = refresh()
	require.True(t, m.Holds(before), "unmarked: not seen by the next refresh (at most a listingRenewal)")
	// The next recorded change marks: both show.
	require.NoError(t, direct.Write(ctx, b, tablets.Point{Time: now.Add(-2 * time.Minute), Value: 5}))
	m, got = refresh()
	require.False(t, m.Holds(before))
	require.Equal(t, map[string]int{"a": 62, "b": 2}, got)
}

// PrepareRead takes for a query's Selects what ReadMark does, without a mark: a warm
// reader's refresh is its listing alone, and a change another process made shows in the
// next (a late point written directly, a new series).
func TestPrepareReadServesTheSelects(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	ctx := context.Background()
	fx := newProcessesFixture(t, "prep")
	direct, reader, checker, a, now := fx.direct, fx.reader, fx.checker, fx.a, fx.now
	from, to := now.Add(-time.Hour), now.Add(time.Minute)
	q, err := reader.Queryable(nil)
	require.NoError(t, err)
	refresh := func() map[string]int {
		t.Helper()
		rctx := reader.BeginRead(ctx)
		require.NoError(t, reader.PrepareRead(rctx, from, to))
		got := map[string]int{}
		for s, err := range q.Querier(from, to).Select(rctx, nil, Matcher{Type: MatchEqual, Name: MetricName, Value: "m"}) {
			require.NoError(t, err)
			got[s.Labels.Get("k")], _ = s.Len()
		}
		return got
	}
	require.Equal(t, map[string]int{"a": 60}, refresh())
	refresh()
	refresh()
	checker.Reset()
	require.Equal(t, map[string]int{"a": 60}, refresh())
	require.Equal(t, int64(1), checker.Stats().Requests, "the staging listing alone")

	require.NoError(t, direct.Write(ctx, a, tablets.Point{Time: from.Add(30 * time.Second), Value: 2}))
	require.Equal(t, map[string]int{"a": 61}, refresh(), "the late point")
	b, err := direct.SeriesOf(ctx, LabelsFromStrings(MetricName, "m", "k", "b"))
	require.NoError(t, err)
	require.NoError(t, direct.Write(ctx, b, tablets.Point{Time: now.Add(-time.Minute), Value: 3}))
	require.Equal(t, map[string]int{"a": 61, "b": 1}, refresh(), "the new series")
	checker.Reset()
	refresh()
	require.Equal(t, int64(1), checker.Stats().Requests, "the listing alone again")
}

// processesFixture is a database and three processes of it on one account: writer stages
// its writes, direct writes directly, reader reads with every cache; series a
// (m{k="a"}) holds a point staged every minute of the hour before now.
type processesFixture struct {
	writer, direct, reader *DB
	svc                    *aztables.ServiceClient
	checker                *azurite.Checker
	a                      string
	now                    time.Time
}

func newProcessesFixture(t *testing.T, prefix string) processesFixture {
	t.Helper()
	ctx := context.Background()
	fx := processesFixture{now: time.Date(2025, 3, 10, 9, 0, 0, 0, time.UTC)}
	fx.writer, fx.svc, fx.checker = stagingDB(t, prefix, &fx.now)
	o := fx.writer.opts
	o.DirectWrites = true
	var err error
	fx.direct, err = Open(ctx, fx.svc, fx.writer.Name(), &o)
	require.NoError(t, err)
	o = fx.writer.opts
	o.StagingCache, o.IndexCache, o.RawCache = NewStagingCache(64<<20), NewIndexCache(64<<20), NewRawCache(64<<20)
	fx.reader, err = Open(ctx, fx.svc, fx.writer.Name(), &o)
	require.NoError(t, err)
	fx.a, err = fx.writer.SeriesOf(ctx, LabelsFromStrings(MetricName, "m", "k", "a"))
	require.NoError(t, err)
	app := fx.writer.Appender()
	for ts := fx.now.Add(-time.Hour); ts.Before(fx.now); ts = ts.Add(time.Minute) {
		app.AppendPoints(fx.a, tablets.Point{Time: ts, Value: 1})
	}
	require.NoError(t, app.Commit(ctx))
	return fx
}
