package changelog_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets/internal/testkit/dbtest"
	"github.com/seed71701133/tablets/tsdb/internal/changelog"
)

// Two logs (a database's raw log, which counts staging reads, and its index log, which does
// not), read together: every period's state of both, a point read each (a want twice read
// once), a period without an entity at generation 0; then known to each log's States as if
// each had read them itself, and a want a state known serves reads nothing.
func TestStatesTogether(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	ctx := context.Background()
	svc, checker := dbtest.NewService(t)
	name := logTable(t, svc)
	var count atomic.Uint64
	count.Store(3)
	raw := changelog.New(svc.NewClient(name), func(p uint64) string { return fmt.Sprintf("%012d", p) }, count.Load)
	index := changelog.New(svc.NewClient(name), func(p uint64) string { return fmt.Sprintf("i%012d", p) }, nil)
	const p1, p2, p3 = 1716422400, 1717027200, 1717632000
	record := func(log *changelog.Log, p uint64, times int) {
		for i := range times {
			require.NoError(t, log.Record(ctx, map[uint64]changelog.Range{p: {From: int64(i), To: int64(i + 1)}}))
		}
	}
	record(raw, p1, 2)
	record(raw, p2, 1)
	record(index, p1, 3)

	began := changelog.Begin(ctx)
	checker.Reset()
	states, err := changelog.StatesTogether(began, []changelog.Want{
		{Log: raw, Period: p1}, {Log: raw, Period: p2}, {Log: raw, Period: p3},
		{Log: index, Period: p1}, {Log: index, Period: p2}, {Log: raw, Period: p1}})
	require.NoError(t, err)
	require.EqualValues(t, 5, checker.Stats().Requests, "a point read a log and period")
	gens := make([]uint64, len(states))
	for i, s := range states {
		gens[i] = s.Gen()
	}
	require.Equal(t, []uint64{2, 1, 0, 3, 0, 2}, gens, "each want's state (a period without an entity: generation 0)")

	// Known to each log, for what it was read after.
	s, err := raw.StateAfter(ctx, p2, 3)
	require.NoError(t, err)
	require.EqualValues(t, 1, s.Gen())
	s, err = index.State(began, p1) // the read began before the states were read
	require.NoError(t, err)
	require.EqualValues(t, 3, s.Gen())
	require.EqualValues(t, 5, checker.Stats().Requests, "no request more")
	states, err = changelog.StatesTogether(began, []changelog.Want{{Log: raw, Period: p3}, {Log: index, Period: p2}})
	require.NoError(t, err)
	require.Len(t, states, 2)
	require.EqualValues(t, 5, checker.Stats().Requests, "wants the states known serve: nothing read")

	// After a later staging read, the raw log's are read again; the index log's are not, in
	// a read that began before.
	count.Store(4)
	record(raw, p2, 1)
	states, err = changelog.StatesTogether(began, []changelog.Want{{Log: raw, Period: p2}, {Log: index, Period: p1}})
	require.NoError(t, err)
	require.EqualValues(t, 2, states[0].Gen(), "the raw log's change since")
	require.EqualValues(t, 3, states[1].Gen())

	// 20 periods: 20 point reads, maxTogether at once.
	var wants []changelog.Want
	for i := range 20 {
		p := uint64(p3 + (i+1)*604800)
		if i%3 == 0 {
			record(raw, p, 1)
		}
		wants = append(wants, changelog.Want{Log: raw, Period: p})
	}
	count.Store(5)
	checker.Reset()
	states, err = changelog.StatesTogether(ctx, wants)
	require.NoError(t, err)
	require.EqualValues(t, 20, checker.Stats().Requests, "a point read a period")
	for i, s := range states {
		want := uint64(0)
		if i%3 == 0 {
			want = 1
		}
		require.Equal(t, want, s.Gen(), "period %d", i)
	}
	require.Empty(t, checker.Violations())
}
