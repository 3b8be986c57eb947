package tiers

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/testkit/azurite"
	"github.com/seed71701133/tablets/internal/testkit/clock"
	"github.com/seed71701133/tablets/internal/testkit/itest"
	"github.com/seed71701133/tablets/tsdb"
)

// The maintenance loop's rollups of a quarter of an hour's sealed windows (the server's
// RollupGrain) write them as tails (docs/format.md, "Tails"): they read no block of the
// minute tier, only the keys of the block at its span's start, and write a tail and a
// guard a series. The rollup that completes a segment (4 hours of minutes) splices the
// tails into the block: one entity a series is left. Every window reads from the tiers
// exactly what the points say, before the splice and after. A quarter rolled up again
// replaces its tails.
//
// A tail that meets another server's splice of its span (late points into the tail's
// windows, written into their raw table and rolled up by RollupFlagged, which clears their
// marker, between the tail's raw read and its write) fails, its series rolled up again by
// itself: the late points show. The same where the span had no block yet, and the tail was
// to be written at its start.
func TestTSDBRollupTails(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	for _, race := range []string{"", "guarded", "first"} {
		t.Run("race "+race, func(t *testing.T) { testRollupTails(t, race) })
	}
}

func testRollupTails(t *testing.T, race string) {
	const series, scrape, quarter = 20, 30 * time.Second, 15 * time.Minute
	ctx := context.Background()
	start := time.Date(2024, 9, 2, 10, 0, 0, 0, time.UTC)
	clock := clock.New(start)
	opts := &tsdb.Options{RawPeriod: 24 * time.Hour, Layout: chunkedLayout, Now: clock.Now}
	db, svc, _ := newDB(t, opts)
	seal := db.Options().SealDelay
	// The rollups through a second handle, whose tier reads are counted and whose writes of
	// the minute tier a race may meet.
	hooked := &itest.Hooked{}
	var minuteReads atomic.Int64 // bytes of the replies to queries of the minute tier
	rcheck := azurite.NewChecker(nil, func(v string) { t.Errorf("Azure limit violated: %s", v) })
	hooked.Next = itest.ReplyHook{Next: rcheck,
		Hook: func(req *http.Request, body []byte) {
			if req.Method == http.MethodGet && strings.Contains(req.URL.Path, "t60p") {
				minuteReads.Add(int64(len(body)))
			}
		}}
	rsvc, err := azurite.Shared(t).NewServiceClient(&aztables.ClientOptions{ClientOptions: policy.ClientOptions{
		Transport: hooked, Retry: azurite.TestRetryOptions()}})
	require.NoError(t, err)
	rdb, err := tsdb.Open(ctx, rsvc, db.Name(), opts)
	require.NoError(t, err)

	names := make([]string, series)
	for s := range names {
		names[s] = fmt.Sprintf("requests_total{instance=\"host%03d\"}", s)
	}
	written := map[string][]tablets.Point{}
	mark := start
	var tailReads, spliceReads []int64
	raced := false
	for i := range int((3*time.Hour + 20*time.Minute) / scrape) {
		at := start.Add(time.Duration(i) * scrape)
		clock.Set(at.Add(time.Second))
		itest.ScrapeOnce(t, db, names, i, at, written)
		if i%20 == 19 {
			_, err := db.Fold(ctx)
			require.NoError(t, err)
		}
		to := clock.Now().Add(-seal).Truncate(quarter)
		if !to.After(mark) {
			continue
		}
		// The run of the quarter [mark, to), its windows sealed.
		if (race == "guarded" && to.Equal(start.Add(90*time.Minute))) || (race == "first" && to.Equal(start.Add(quarter))) {
			// 100 late points, written directly into their raw table (tsdb's directPoints),
			// their slice marked dirty.
			var late []tablets.Point
			for k := range 100 {
				late = append(late, tablets.Point{Time: mark.Add(5*time.Minute + 7*time.Second + time.Duration(k)*time.Millisecond), Value: -1 - float64(k)})
			}
			hooked.Arm(func(req *http.Request) bool {
				return itest.IsBatch(req) && strings.Contains(string(itest.PeekBody(req)), "t60p")
			}, func() {
				raced = true
				require.NoError(t, db.WriteMany(ctx, []tsdb.SeriesPoints{{Series: names[7], Points: late}}))
				flagged, err := db.RollupFlagged(ctx)
				require.NoError(t, err)
				require.Equal(t, 1, flagged)
			}, nil)
			written[names[7]] = append(written[names[7]], late...)
		}
		minuteEntities := func() int { return len(tierEntities(t, svc, db, time.Minute, start, to, names[3])) }
		before := minuteReads.Load()
		stored := minuteEntities()
		require.NoError(t, rdb.Rollup(ctx, mark, to))
		read := minuteReads.Load() - before
		switch after := minuteEntities(); {
		case to.Equal(start.Add(2 * time.Hour)): // 12:00, a segment's end
			spliceReads = append(spliceReads, read)
			require.Greater(t, stored, 1, "the segment's tails beside the block")
			require.Equal(t, 1, after, "the tails spliced into the block")
		case race != "":
		case to.Equal(start.Add(quarter)):
			require.Equal(t, [2]int{0, 1}, [2]int{stored, after}, "the first tail, at the span's start")
		default:
			tailReads = append(tailReads, read)
			require.Equal(t, stored+1, after, "a tail more")
			if to.Equal(start.Add(time.Hour)) {
				// The same quarter again (a run after a crash): its tails replaced, no
				// series rolled up again by itself.
				before := rcheck.Stats()
				require.NoError(t, rdb.Rollup(ctx, mark, to))
				require.Equal(t, after, minuteEntities())
				require.Less(t, rcheck.Stats().Queries-before.Queries, int64(series), "no series by itself")
			}
		}
		mark = to
		// Every sealed window from the tiers, as the points say.
		for _, s := range []int{0, 7, 19} {
			for _, step := range []time.Duration{time.Minute, time.Hour} {
				to := mark.Truncate(step)
				got := itest.CollectWindows(t, db.Aggregate(ctx, names[s:s+1], start, to, step, nil))
				itest.RequireWindows(t, itest.ModelWindows(written[names[s]], start, to, step), got, fmt.Sprintf("%s at %v to %v", names[s], step, to))
			}
		}
	}
	require.Equal(t, race != "", raced)
	require.Len(t, spliceReads, 1)
	if race != "" {
		return
	}
	require.Len(t, tailReads, 7)
	t.Logf("the minute tier's bytes read by the tail runs %v, by the splice %v", tailReads, spliceReads)
	for _, n := range tailReads {
		require.Less(t, 4*n, spliceReads[0], "a tail run reads the keys of %d blocks", series)
	}
}
