package reliability

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/maintain/schedule"
	"github.com/seed71701133/tablets/internal/testkit/azurite"
	"github.com/seed71701133/tablets/internal/testkit/dbtest"
	"github.com/seed71701133/tablets/internal/testkit/fault"
	"github.com/seed71701133/tablets/internal/testkit/itest"
	"github.com/seed71701133/tablets/tsdb"
)

// tsdb's Rollup under faults (from the tiers' tests, here for the package timeout: a day at
// 1 Hz of 40 series through lost replies takes minutes).

// Rollup is safe under lost replies (a retried write finds the ETag changed and starts
// again) and beside another Rollup; the maintenance scheduler's rollup keeps the tiers
// current. 40 series, a day at 1 Hz: Rollup reads each series' raw rows once.
func TestTSDBRollupReliability(t *testing.T) {
	ctx := context.Background()
	srv := azurite.Shared(t)
	name := "rel" + strconv.FormatInt(time.Now().UnixNano()%1e9, 10)
	lossy, err := srv.NewServiceClient(&aztables.ClientOptions{ClientOptions: policy.ClientOptions{
		Transport: fault.New(azurite.DefaultTransport(), fault.Options{Seed: 3, LoseReply: 0.2}),
		Retry:     policy.RetryOptions{MaxRetries: 20, RetryDelay: time.Millisecond, MaxRetryDelay: 5 * time.Millisecond}}})
	require.NoError(t, err)
	t.Cleanup(func() { dropTables(t, name) })
	db, err := tsdb.Open(ctx, lossy, name, &tsdb.Options{RawPeriod: 24 * time.Hour})
	require.NoError(t, err)
	day := time.Date(2024, 6, 10, 0, 0, 0, 0, time.UTC)
	var names []string
	var all []tablets.Point
	for s := range 40 {
		n := fmt.Sprintf("s%02d", s) // in name order: between equal times, the later name's value is First and Last
		names = append(names, n)
		var pts []tablets.Point
		for i := range 86400 {
			pts = append(pts, tablets.Point{Time: day.Add(time.Duration(i) * time.Second), Value: float64((i*7 + s) % 1000)})
		}
		require.NoError(t, db.Write(ctx, n, pts...))
		all = append(all, pts...)
	}
	// Two Rollups at once, through lost replies.
	other, err := tsdb.Open(ctx, lossy, name, &tsdb.Options{RawPeriod: 24 * time.Hour})
	require.NoError(t, err)
	start := time.Now()
	errs := make(chan error, 2)
	for _, d := range []*tsdb.DB{db, other} {
		go func() { errs <- d.Rollup(ctx, day, day.Add(24*time.Hour)) }()
	}
	require.NoError(t, <-errs)
	require.NoError(t, <-errs)
	t.Logf("two concurrent Rollups of a day of 40 series at 1 Hz through 20%% lost replies: %.0f points/s", float64(len(all))/time.Since(start).Seconds())
	got := itest.CollectWindows(t, db.Aggregate(ctx, names, day, day.Add(24*time.Hour), time.Hour, nil))
	itest.RequireWindows(t, itest.ModelWindows(all, day, day.Add(24*time.Hour), time.Hour), got, "after Rollups through lost replies")

	// The scheduler's rollup (and its rollup of dirty slices) picks up a series written
	// later, once sealed.
	db2, _, checker := dbtest.NewDB(t, &tsdb.Options{RawPeriod: 24 * time.Hour, SealDelay: 10 * time.Minute, DirectWrites: true}) // in the raw tables at once: no staged point unseals the hour
	old := time.Now().Add(-3 * time.Hour).Truncate(time.Hour)
	var pts []tablets.Point
	for i := range 60 {
		pts = append(pts, tablets.Point{Time: old.Add(time.Duration(i) * time.Minute), Value: float64(i)})
	}
	require.NoError(t, db2.Write(ctx, "k", pts...))
	// Bad options are refused before any request. (A rollup's catch-up within the seal
	// delay is not bad: the scheduler starts it at the seal, schedule's TestPlan.)
	before := checker.Stats().Requests
	_, err = schedule.Tasks(db2, schedule.Options{RollupEvery: time.Second, RollupCatchUp: -time.Hour})
	require.ErrorIs(t, err, tablets.ErrInvalidOptions, "a negative catch-up of the rollup")
	_, err = schedule.Tasks(db2, schedule.Options{CompactEvery: time.Second, CompactCatchUp: -time.Hour})
	require.ErrorIs(t, err, tablets.ErrInvalidOptions, "a negative catch-up of the compaction")
	require.Equal(t, before, checker.Stats().Requests, "refused before any request")
	runs, stop := itest.Schedule(t, db2, schedule.Options{RollupEvery: 20 * time.Millisecond, RollupCatchUp: 6 * time.Hour}, schedule.Rollup)
	runs.WaitCovered(t, old, old.Add(time.Hour))
	stop()
	// The write's dirty marker is the rollup of dirty slices' to clear (the loop's range is
	// not whole slices), which runs on its own ticks, and may not have reached it when the
	// rollup's progress did (CI saw the hour read raw, 5 requests): its step once more,
	// as the scheduler calls it, so that the count does not race its tick.
	_, err = db2.RollupFlagged(ctx)
	require.NoError(t, err)
	before = checker.Stats().Requests
	w := itest.CollectWindows(t, db2.Aggregate(ctx, []string{"k"}, old, old.Add(time.Hour), time.Hour, nil))
	require.Len(t, w, 1)
	require.Equal(t, uint64(60), w[0].Count)
	require.Equal(t, int64(3), checker.Stats().Requests-before, "the hour is read from the tier the scheduler's rollup made, the dirty markers (none) and the staged points (none)")
}

// dropTables deletes the tables whose names start with prefix.
func dropTables(t *testing.T, prefix string) {
	admin, err := azurite.Shared(t).NewServiceClient(nil)
	if err != nil {
		return
	}
	for p := admin.NewListTablesPager(nil); p.More(); {
		page, err := p.NextPage(context.Background())
		if err != nil {
			return
		}
		for _, tb := range page.Tables {
			if strings.HasPrefix(*tb.Name, prefix) {
				_, _ = admin.DeleteTable(context.Background(), *tb.Name, nil)
			}
		}
	}
}
