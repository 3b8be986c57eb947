package tsdb

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A database younger than a panel's range: its raw period began days before its first
// sample, and the period before has no table (nothing was ever written there). Raw samples
// are not gone there, so a 7-day Select a tier could serve only approximately (an instant
// selector in an aggregation, at a 10-minute step) reads raw, exactly, and the estimates of
// a read over the seven days count the hour the samples hold.
func TestSelectYoungDatabaseReadsRaw(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	ctx := context.Background()
	begun := querierBase.Add(24 * time.Hour) // a raw period (seven days) begins
	base := begun.Add(3*24*time.Hour + 10*time.Hour)
	now := base.Add(90 * time.Minute)
	weekAgo := now.Add(-7 * 24 * time.Hour)
	k := newKeyRangeDB(t, "ky", now, base, weekAgo)
	require.Less(t, weekAgo, begun, "the range reaches into the period before, never made")
	k.opts.Tiers = []Tier{{Step: time.Minute}}
	db := k.open(t, false)

	all, _, want := denseSeries(t, db, 40, 40, base, 240, 15*time.Second) // an hour
	require.NoError(t, db.WriteMany(ctx, all))
	k.clock.Store(now.UnixNano())
	_, err := db.Fold(ctx)
	require.NoError(t, err)
	require.NoError(t, db.Rollup(ctx, base, now.Add(-30*time.Minute)))

	hints := &SelectHints{Step: 10 * time.Minute, Func: "avg"}
	read := func(q *Queryable) map[string][]string {
		got := map[string][]string{}
		for s, err := range q.Querier(weekAgo, now).Select(ctx, hints, Matcher{Type: MatchEqual, Name: "__name__", Value: "dense_total"}) {
			require.NoError(t, err)
			it := s.Iterator()
			for it.Next() {
				x := it.At()
				got[s.Labels.Get("i")] = append(got[s.Labels.Get("i")], fmt.Sprintf("%d:%v", x.T, x.F))
			}
			require.NoError(t, it.Err())
		}
		return got
	}
	q, err := k.open(t, true).Queryable(nil)
	require.NoError(t, err)
	require.Equal(t, want, read(q), "every raw sample, exactly")
	st := q.Stats()
	require.Equal(t, uint64(1), st.RawSelects, "raw, not a tier")
	require.Zero(t, st.TierSelects)
	require.Zero(t, st.RawGoneSelects, "nothing was dropped: raw samples are not gone before the first table")

	// The estimates of a read of the seven days count from where the changes of the
	// period's log begin (the Fold's, at the samples' hour), which the Select read.
	dataFrom, err := q.estimateFrom(ctx, weekAgo, now)
	require.NoError(t, err)
	require.False(t, dataFrom.After(base), "from %v, the first sample at %v", dataFrom, base)
	require.True(t, dataFrom.After(base.Add(-time.Hour)), "from %v, the first sample at %v", dataFrom, base)
	again, err := q.estimateFrom(ctx, begun.Add(time.Hour), now)
	require.NoError(t, err)
	require.Equal(t, dataFrom, again)
}
