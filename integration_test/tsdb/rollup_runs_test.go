package tsdb

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/testkit/azurite"
	"github.com/seed71701133/tablets/internal/testkit/clock"
	"github.com/seed71701133/tablets/internal/testkit/itest"
	"github.com/seed71701133/tablets/tsdb"
)

// The maintenance loop's rollups, a minute apart as `tablets soak` runs them, write each
// window once, when it seals: a run writes a block a series for the minute tier, and the
// hour tier's only at the run that seals an hour (a Rollup of whole days rewrote both tiers'
// blocks at every run, for the windows not sealed yet); the series share a partition of
// the packed layout, so a tier's 100 blocks go in one transaction. A late point's dirty marker
// outlives the runs, which do not recompute its window, and RollupFlagged clears it. Every
// sealed window then reads from the tiers exactly what the points say.
func TestTSDBRollupRunsWriteSealedWindows(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	const series, scrape = 100, 15 * time.Second
	ctx := context.Background()
	start := time.Date(2024, 9, 2, 10, 0, 0, 0, time.UTC)
	clock := clock.New(start)
	db, _, checker := newDB(t, &tsdb.Options{RawPeriod: 24 * time.Hour, Layout: chunkedLayout, Now: clock.Now})
	seal := db.Options().SealDelay
	require.Equal(t, []time.Duration{time.Minute, time.Hour}, []time.Duration{db.Options().Tiers[0].Step, db.Options().Tiers[1].Step})
	names := make([]string, series)
	for s := range names {
		names[s] = fmt.Sprintf("requests_total{instance=\"host%03d\"}", s)
	}
	written := map[string][]tablets.Point{}
	mark := start                       // the loop's progress: everything before is rolled up
	var minuteRuns, hourRuns [][2]int64 // transactions, blocks written
	var runs azurite.Stats              // of every run, summed
	late := start.Add(10*time.Minute + 7*time.Second)
	for i := range int((2*time.Hour + 10*time.Minute) / scrape) {
		at := start.Add(time.Duration(i) * scrape)
		clock.Set(at.Add(time.Second))
		itest.ScrapeOnce(t, db, names, i, at, written)
		if i%40 == 39 {
			_, err := db.Fold(ctx)
			require.NoError(t, err)
		}
		now := clock.Now()
		if now.Sub(start) == 90*time.Minute+time.Second {
			// A late point into a window rolled up and sealed: a marker for RollupFlagged.
			p := tablets.Point{Time: late, Value: -1}
			require.NoError(t, db.Write(ctx, names[7], p))
			written[names[7]] = append(written[names[7]], p)
		}
		to := now.Add(-seal)
		if i%4 != 3 || !to.After(mark) {
			continue
		}
		// A tick of the loop: the range from its mark to the seal delay before now.
		before := checker.Stats()
		require.NoError(t, db.Rollup(ctx, mark, to))
		after := checker.Stats()
		txns := [2]int64{after.Batches - before.Batches, after.BatchOperations - before.BatchOperations}
		runs.Requests += after.Requests - before.Requests
		runs.RequestBytes += after.RequestBytes - before.RequestBytes
		runs.ResponseBytes += after.ResponseBytes - before.ResponseBytes
		// A window seals when the range reaches its end.
		switch {
		case to.Truncate(time.Hour).After(mark):
			hourRuns = append(hourRuns, txns)
		case to.Truncate(time.Minute).After(mark):
			minuteRuns = append(minuteRuns, txns)
		default:
			require.Zero(t, txns[0], "a run that seals no window writes nothing")
		}
		mark = to
	}
	t.Logf("rollup runs: %d requests, %.1f MB sent, %.1f MB read", runs.Requests, float64(runs.RequestBytes)/1e6, float64(runs.ResponseBytes)/1e6)
	t.Logf("rollup runs: %d sealing minutes only, transactions %v; %d sealing an hour, %v", len(minuteRuns), minuteRuns, len(hourRuns), hourRuns)
	require.GreaterOrEqual(t, len(minuteRuns), 60)
	require.Len(t, hourRuns, 1)
	for _, n := range minuteRuns {
		require.Equal(t, [2]int64{1, series}, n, "a run sealing minutes writes the minute tier's blocks only, in a transaction")
	}
	require.Equal(t, [2]int64{2, 2 * series}, hourRuns[0], "the run sealing an hour writes both tiers' blocks, a transaction each")

	sealed := mark.Truncate(time.Minute)
	flagged, err := db.RollupFlagged(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, flagged, "the late point's marker outlived the runs")
	for _, s := range []int{0, 7, 99} {
		for _, step := range []time.Duration{time.Minute, time.Hour} {
			to := sealed.Truncate(step)
			before := checker.Stats().Requests
			got := itest.CollectWindows(t, db.Aggregate(ctx, names[s:s+1], start, to, step, nil))
			itest.RequireWindows(t, itest.ModelWindows(written[names[s]], start, to, step), got, fmt.Sprintf("%s at %v", names[s], step))
			require.LessOrEqual(t, checker.Stats().Requests-before, int64(3), "read from the tier")
		}
	}
}
