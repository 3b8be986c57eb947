package tsdb

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
)

// A speculative read takes the database as the process last found it, beside the
// PrepareRead that checks it: it holds while nothing changed, and no longer once another
// process staged a point, wrote one directly (a late point, a new series), whatever the
// speculation took; a process that never listed the staging table does not speculate.
func TestSpeculateHoldsUntilAChange(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	ctx := context.Background()
	fx := newProcessesFixture(t, "spec")
	writer, direct, reader, checker, a, now := fx.writer, fx.direct, fx.reader, fx.checker, fx.a, fx.now
	from, to := now.Add(-time.Hour), now.Add(time.Minute)
	q, err := reader.Queryable(nil)
	require.NoError(t, err)
	selectAll := func(ctx context.Context) (map[string]int, error) {
		got := map[string]int{}
		for s, err := range q.Querier(from, to).Select(ctx, nil, Matcher{Type: MatchEqual, Name: MetricName, Value: "m"}) {
			if err != nil {
				return nil, err
			}
			got[s.Labels.Get("k")], _ = s.Len()
		}
		return got, nil
	}
	// read is a read prepared, then its Select: what a read after the refresh finds.
	read := func() map[string]int {
		t.Helper()
		rctx := reader.BeginRead(ctx)
		require.NoError(t, reader.PrepareRead(rctx, from, to))
		got, err := selectAll(rctx)
		require.NoError(t, err)
		return got
	}
	// speculate is a speculative read, its Select beside (here: before) its PrepareRead.
	speculate := func() (map[string]int, bool, error) {
		t.Helper()
		rctx := reader.BeginRead(ctx)
		sctx, holds, ok := reader.Speculate(rctx)
		require.True(t, ok, "the listing known")
		got, err := selectAll(sctx)
		require.NoError(t, reader.PrepareRead(rctx, from, to))
		return got, holds(), err
	}

	_, _, ok := reader.Speculate(reader.BeginRead(ctx))
	require.False(t, ok, "nothing listed yet: nothing to speculate on")
	require.Equal(t, map[string]int{"a": 60}, read())
	read()
	checker.Reset()
	got, held, err := speculate()
	require.NoError(t, err)
	require.True(t, held, "nothing changed")
	require.Equal(t, map[string]int{"a": 60}, got)
	require.Equal(t, int64(1), checker.Stats().Requests, "the staging listing alone")
	got, held, err = speculate()
	require.NoError(t, err)
	require.True(t, held)
	require.Equal(t, map[string]int{"a": 60}, got)

	// A speculation whose context ended (its check found the database changed: the query
	// API stops it) stops reading, though all it reads is cached: its Select ends with the
	// context's error, not with an answer.
	cctx, cancel := context.WithCancel(reader.BeginRead(ctx))
	sctx, _, ok := reader.Speculate(cctx)
	require.True(t, ok)
	cancel()
	_, err = selectAll(sctx)
	require.ErrorIs(t, err, context.Canceled)

	// Another process stages a point: the speculation took the listing before the refresh
	// that found it.
	app := writer.Appender()
	app.AppendPoints(a, tablets.Point{Time: now, Value: 5})
	require.NoError(t, app.Commit(ctx))
	got, held, err = speculate()
	require.NoError(t, err)
	require.False(t, held, "a point staged since")
	require.Equal(t, map[string]int{"a": 60}, got, "the speculation's, thrown away")
	require.Equal(t, map[string]int{"a": 61}, read())
	_, held, _ = speculate()
	require.True(t, held, "the change known: nothing since")

	// A late point written directly (the raw log and the logs' mark change), then a new
	// series (the index log).
	require.NoError(t, direct.Write(ctx, a, tablets.Point{Time: from.Add(30 * time.Second), Value: 2}))
	_, held, err = speculate()
	require.NoError(t, err)
	require.False(t, held, "a late point written directly")
	require.Equal(t, map[string]int{"a": 62}, read())
	b, err := direct.SeriesOf(ctx, LabelsFromStrings(MetricName, "m", "k", "b"))
	require.NoError(t, err)
	require.NoError(t, direct.Write(ctx, b, tablets.Point{Time: now.Add(-time.Minute), Value: 3}))
	_, held, err = speculate()
	require.NoError(t, err)
	require.False(t, held, "a new series")
	require.Equal(t, map[string]int{"a": 62, "b": 1}, read())
	got, held, err = speculate()
	require.NoError(t, err)
	require.True(t, held)
	require.Equal(t, map[string]int{"a": 62, "b": 1}, got)
}
