package tsdb_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/testkit/dbtest"
	"github.com/seed71701133/tablets/tsdb"
)

// An answer one process keeps is read back by another, whole (an answer of 10,000 series,
// several of the entity's binary properties), and its mark holds in the other's mark
// taken later, until a write into its range; another key has none. A key over 4 KiB is an
// error before any request. Answers().Expire deletes the answers written before AnswerLife
// ago, and none younger; a database that never kept one has none to expire.
func TestKeptAnswers(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	ctx := context.Background()
	a, svc, checker := dbtest.NewDB(t, nil)
	// The other process: no answer kept yet, no table of them.
	expired, err := a.Answers().Expire(ctx, time.Now())
	require.NoError(t, err)
	require.Zero(t, expired)
	b, err := tsdb.Open(ctx, svc, a.Name(), nil)
	require.NoError(t, err)

	now := time.Now().Truncate(time.Minute)
	from, to := now.Add(-time.Hour), now
	series, err := a.SeriesOf(ctx, tsdb.LabelsFromStrings("__name__", "m", "k", "a"))
	require.NoError(t, err)
	app := a.Appender()
	for ts := from; ts.Before(to); ts = ts.Add(time.Minute) {
		app.AppendPoints(series, tablets.Point{Time: ts, Value: float64(ts.Unix())})
	}
	require.NoError(t, app.Commit(ctx))

	mark, err := a.ReadMark(ctx, from, to)
	require.NoError(t, err)
	answer := tsdb.KeptAnswer{First: from.UnixMilli(), Last: to.UnixMilli(), LastSettled: from.UnixMilli(), Mark: mark,
		Settled: mark.Sub(from, from.Add(time.Minute)), HasSettled: true}
	for i := range 10000 {
		answer.Series = append(answer.Series, tsdb.AnswerSeries{Labels: tsdb.LabelsFromStrings("i", strconv.Itoa(i)),
			Times: []int64{from.UnixMilli(), to.UnixMilli()}, Values: []float64{float64(i), -float64(i) / 3}})
	}
	checker.Reset()
	require.NoError(t, a.Answers().Keep(ctx, "sum(m)", answer))
	require.Equal(t, int64(3), checker.Stats().Requests, "the upsert, the table made, the upsert again")

	checker.Reset()
	got, ok, err := b.Answers().Kept(ctx, "sum(m)")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, int64(1), checker.Stats().Requests)
	require.Equal(t, [3]int64{answer.First, answer.Last, answer.LastSettled}, [3]int64{got.First, got.Last, got.LastSettled})
	require.True(t, got.HasSettled)
	require.Len(t, got.Series, len(answer.Series))
	for i, s := range answer.Series {
		require.Equal(t, s, got.Series[i])
	}
	later, err := b.ReadMark(ctx, from, to)
	require.NoError(t, err)
	require.True(t, later.Holds(got.Mark), "nothing changed: the kept mark holds in another process")
	require.True(t, later.Holds(got.Settled), "and its settled mark")

	_, ok, err = b.Answers().Kept(ctx, "sum(n)")
	require.NoError(t, err)
	require.False(t, ok, "another key")

	// A late point, written by the first process: the kept mark no longer holds.
	require.NoError(t, a.Write(ctx, series, tablets.Point{Time: from.Add(90 * time.Second), Value: -1}))
	afterWrite, err := b.ReadMark(ctx, from, to)
	require.NoError(t, err)
	require.False(t, afterWrite.Holds(got.Mark), "the late point spoils the kept answer")

	checker.Reset()
	err = a.Answers().Keep(ctx, strings.Repeat("x", 4097), answer)
	require.True(t, errors.Is(err, tsdb.ErrAnswerTooLarge), "%v", err)
	require.Zero(t, checker.Stats().Requests)

	expired, err = b.Answers().Expire(ctx, time.Now())
	require.NoError(t, err)
	require.Zero(t, expired, "written just now")
	expired, err = b.Answers().Expire(ctx, time.Now().Add(tsdb.AnswerLife+time.Minute))
	require.NoError(t, err)
	require.Equal(t, 1, expired)
	_, ok, err = a.Answers().Kept(ctx, "sum(m)")
	require.NoError(t, err)
	require.False(t, ok, "expired")
}
