package tiers

import (
	"context"
	"fmt"
	"net/http"
	"strings"
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

// A batched Rollup (chunked raw tables, several series, staged points) that meets another
// process's write of a series' block between its read of the blocks and its write of that
// series' (a late point written and rolled up meanwhile) fails that series' write, over a
// block that existed (its ETag changed: 412) or not (it appeared: 409); the series is rolled
// up again by itself, and the block stored in the end holds the late point.
func TestTSDBRollupScanRace(t *testing.T) {
	for _, existing := range []bool{true, false} {
		t.Run(fmt.Sprintf("block existed %v", existing), func(t *testing.T) {
			ctx := context.Background()
			opts := &tsdb.Options{RawPeriod: 24 * time.Hour, Layout: chunkedLayout}
			db, svc, _ := newDB(t, opts)
			var r, q []tablets.Point
			for i := range 120 {
				r = append(r, tablets.Point{Time: itest.RollupBase.Add(time.Duration(i) * time.Minute), Value: float64(i)})
			}
			for i := range 10 { // staged: too few for a write of their own
				q = append(q, tablets.Point{Time: itest.RollupBase.Add(time.Duration(i)*7*time.Minute + time.Second), Value: float64(-i)})
			}
			require.NoError(t, db.WriteMany(ctx, []tsdb.SeriesPoints{{Series: "r", Points: r}, {Series: "q", Points: q}}))
			if existing {
				require.NoError(t, db.Rollup(ctx, itest.RollupBase, itest.RollupBase.Add(2*time.Hour)))
				// A point more, so that the next Rollup has r's block to write.
				more := tablets.Point{Time: itest.RollupBase.Add(90*time.Minute + 20*time.Second), Value: 0.5}
				require.NoError(t, db.Write(ctx, "r", more))
				r = append(r, more)
			}

			// Through a hooked client, the Rollup meets a Write and another process's
			// Rollup just before it writes r's blocks of the minute tier.
			h := &itest.Hooked{}
			checker := azurite.NewChecker(nil, func(v string) { t.Errorf("Azure limit violated: %s", v) })
			h.Next = checker
			hsvc, err := azurite.Shared(t).NewServiceClient(&aztables.ClientOptions{ClientOptions: policy.ClientOptions{
				Transport: h, Retry: azurite.TestRetryOptions()}})
			require.NoError(t, err)
			hdb, err := tsdb.Open(ctx, hsvc, db.Name(), opts)
			require.NoError(t, err)
			late := tablets.Point{Time: itest.RollupBase.Add(30*time.Minute + 15*time.Second), Value: -7.5}
			injected := false
			h.Arm(func(req *http.Request) bool {
				body := string(itest.PeekBody(req))
				return itest.IsBatch(req) && strings.Contains(body, "t60p") && strings.Contains(body, `"PartitionKey":"r"`)
			}, func() {
				injected = true
				require.NoError(t, db.Write(ctx, "r", late))
				require.NoError(t, db.Rollup(ctx, itest.RollupBase, itest.RollupBase.Add(2*time.Hour)))
			}, nil)
			before := checker.Stats()
			require.NoError(t, hdb.Rollup(ctx, itest.RollupBase, itest.RollupBase.Add(2*time.Hour)))
			require.True(t, injected)
			// The batched read, then r again by itself: its blocks and raw points.
			require.Greater(t, checker.Stats().Queries-before.Queries, int64(4), "r rolled up again by itself")

			// The blocks of the minute tier, read raw: r's holds the late point, q's its
			// staged points.
			all := map[string][]tablets.Point{"r": append(r, late), "q": q}
			for series, pts := range all {
				windows, _ := columnarWindows(t, tierEntities(t, svc, db, time.Minute, itest.RollupBase, itest.RollupBase.Add(time.Hour), series), time.Minute)
				requireColumnar(t, windows, pts, itest.RollupBase, itest.RollupBase.Add(2*time.Hour), time.Minute, series+"'s minutes")
			}

			// Both series, from the tiers, as their points say (q's still staged).
			for series, pts := range all {
				for _, step := range []time.Duration{time.Minute, time.Hour} {
					got := itest.CollectWindows(t, hdb.Aggregate(ctx, []string{series}, itest.RollupBase, itest.RollupBase.Add(2*time.Hour), step, nil))
					itest.RequireWindows(t, itest.ModelWindows(pts, itest.RollupBase, itest.RollupBase.Add(2*time.Hour), step), got, series+" at "+step.String())
				}
			}
		})
	}
}

// A batched Rollup of series in several groups (a 1 s tier makes 61 columnar blocks a series
// over a day's slice, 60 of 24 minutes and one of 14 days of hours: 57 series a group), names whose keys sort apart from their names, raw tables of an
// hour (a day's slice spans several), points written directly, folded and still staged: the
// tiers hold what the points say. A late point then rolled up again shows too.
func TestTSDBRollupScanGroups(t *testing.T) {
	ctx := context.Background()
	tiers := []tsdb.Tier{{Step: time.Second}, {Step: time.Hour}}
	base := time.Date(2024, 8, 5, 22, 30, 0, 0, time.UTC) // into the next day: two slices
	clock := clock.New(base.Add(48 * time.Hour))
	db, _, checker := newDB(t, &tsdb.Options{RawPeriod: time.Hour, Tiers: tiers, Layout: chunkedLayout, Now: clock.Now})
	var names []string
	var all []tablets.Point
	write := func(batch []tsdb.SeriesPoints) {
		require.NoError(t, db.WriteMany(ctx, batch))
		for _, sp := range batch {
			all = append(all, sp.Points...)
		}
	}
	var folded, direct, staged []tsdb.SeriesPoints
	for s := range 70 {
		name := fmt.Sprintf("m%02d", s)
		switch s {
		case 0:
			name = "cpu"
		case 1:
			name = "cpu_total" // its keys sort before cpu's
		case 2:
			name = "a|b"
		case 3:
			name = "x\U0001F600" // before x\uE000 in UTF-16
		case 4:
			name = "x\uE000"
		}
		names = append(names, name)
		ms := time.Duration(s) * time.Millisecond
		var few, late []tablets.Point
		for i := range 3 {
			few = append(few, tablets.Point{Time: base.Add(time.Duration(i*(s+1))*37*time.Second + ms), Value: float64(s*1000 + i)})
			late = append(late, tablets.Point{Time: base.Add(3*time.Hour + time.Duration(i*(s+1))*time.Second + ms), Value: float64(-s - i)})
		}
		folded = append(folded, tsdb.SeriesPoints{Series: name, Points: few})
		staged = append(staged, tsdb.SeriesPoints{Series: name, Points: late})
		if s%10 == 0 { // 22:30 to 00:10: written directly into the tables of 22:00 and 23:00
			var many []tablets.Point
			for i := range 400 {
				many = append(many, tablets.Point{Time: base.Add(time.Duration(i)*15*time.Second + 500*time.Millisecond + ms), Value: float64(i % 17)})
			}
			direct = append(direct, tsdb.SeriesPoints{Series: name, Points: many})
		}
	}
	write(folded)
	write(direct)
	clock.Add(20 * time.Minute) // the writes' arrival bucket is foldable
	r, err := db.Fold(ctx)
	require.NoError(t, err)
	require.Equal(t, 70*3+7*40, r.Points, "the few points of each series, and of the 7 direct series the last 40 (00:00 to 00:10)")
	write(staged)
	from, to := base.Truncate(24*time.Hour), base.Truncate(24*time.Hour).Add(48*time.Hour)
	check := func(what string) {
		for _, step := range []time.Duration{time.Second, time.Hour} {
			got := itest.CollectWindows(t, db.Aggregate(ctx, names, from, to, step, nil))
			itest.RequireWindows(t, itest.ModelWindows(all, from, to, step), got, what+" at "+step.String())
		}
	}
	rollup := func(what string) (transactions, requests int64) {
		before := checker.Stats()
		require.NoError(t, db.Rollup(ctx, from, to))
		after := checker.Stats()
		queries, requests := after.Queries-before.Queries, after.Requests-before.Requests
		transactions = after.Batches - before.Batches
		t.Logf("Rollup of %d series in 2 groups, %s: %d requests (%d transactions, %d queries)", len(names), what,
			requests, after.Batches-before.Batches, queries)
		// The index, and per slice and group: 2 tier tables, staging, a raw table an hour.
		// A series rolled up by itself would read its blocks and points: 4 queries more.
		require.LessOrEqual(t, queries, int64(40), "no series read by itself")
		return transactions, requests
	}
	_, first := rollup("the first")
	check("after Rollup")

	late := tablets.Point{Time: base.Add(10*time.Minute + 500*time.Millisecond), Value: 0.5}
	require.NoError(t, db.Write(ctx, "x\uE000", late))
	all = append(all, late)
	txns, again := rollup("again after a late point")
	require.LessOrEqual(t, again, first+5)
	require.Equal(t, int64(2), txns, "the late point's blocks alone: of seconds, and of hours")
	check("after a late point, rolled up again")
}
