package tiercost

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/testkit/clock"
	"github.com/seed71701133/tablets/internal/testkit/dbtest"
	"github.com/seed71701133/tablets/tsdb"
)

// AggregateSeries yields each series' windows apart, equal to its model and to Aggregate of
// that series alone, from the tier where rolled up (a day) and from the raw points after; a late
// point in a rolled-up window shows at once; the fields not asked for are zero.
func TestAggregateSeriesApart(t *testing.T) {
	ctx := context.Background()
	db, writer, checker := newLiveDB(t, tsdb.Options{RawPeriod: 24 * time.Hour, DirectWrites: true})
	day := pastDay()
	end := day.Add(36 * time.Hour)
	rng := rand.New(rand.NewPCG(21, 4))
	series := map[string][]tablets.Point{}
	names := []string{"s3", "s1", "s2"} // AggregateSeries yields in this order
	for i, s := range names {
		if i%2 == 0 {
			series[s] = counterPoints(rng, day, end, 15*time.Second)
		} else {
			series[s] = gaugePoints(rng, day, end, 15*time.Second)
		}
	}
	writeAll(t, writer, series)
	require.NoError(t, db.Rollup(ctx, day, day.Add(24*time.Hour))) // the last 12 hours stay raw

	check := func(what string, f tsdb.Fields) cost {
		t.Helper()
		opts := &tsdb.AggregateOptions{Fields: f}
		got := map[string][]tsdb.Window{}
		var order []string
		c := measure(checker, func() {
			for w, err := range db.AggregateSeries(ctx, append(names, "s1"), day.Add(7*time.Minute), end, 30*time.Minute, opts) {
				require.NoError(t, err)
				if len(order) == 0 || order[len(order)-1] != w.Series {
					order = append(order, w.Series)
				}
				got[w.Series] = append(got[w.Series], w.Window)
			}
		})
		require.Equal(t, names, order, "%s: the series in the order asked, each once", what)
		for _, s := range names {
			requireWindows(t, modelWindows(series[s], day.Add(7*time.Minute), end, 30*time.Minute), got[s], f, what+" "+s)
			alone := collect(t, db.Aggregate(ctx, []string{s}, day.Add(7*time.Minute), end, 30*time.Minute, opts))
			require.Equal(t, len(alone), len(got[s]))
			for i := range alone {
				require.Equal(t, alone[i].Count, got[s][i].Count)
				require.Equal(t, alone[i].Last, got[s][i].Last)
				require.Equal(t, alone[i].Sum, got[s][i].Sum)
			}
		}
		t.Logf("%s: 3 series apart, 24 of 36 hours rolled up: %d requests, %d bytes", what, c.requests, c.bytes)
		return c
	}
	all := check("all fields", tsdb.AllFields)
	check("last", tsdb.FieldLast)
	check("sum and quantiles", tsdb.FieldSum|tsdb.FieldQuantiles)

	// A late point marks its slice of s1 dirty: read raw, until RollupFlagged.
	late := tablets.Point{Time: day.Add(3*time.Hour + 7*time.Second), Value: -1000}
	require.NoError(t, db.Write(ctx, "s1", late))
	series["s1"] = append(series["s1"], late)
	dirty := check("after a late point", tsdb.AllFields)
	require.Greater(t, dirty.requests, all.requests, "the dirty slice of s1 is read raw")
	n, err := db.RollupFlagged(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n, "one marker")
	require.Equal(t, all.requests, check("after RollupFlagged", tsdb.AllFields).requests, "the slice is clean again")

	errs := 0
	c := measure(checker, func() {
		for _, err := range db.Aggregate(ctx, names, day, end, time.Minute, &tsdb.AggregateOptions{Fields: 1 << 12}) {
			require.ErrorIs(t, err, tablets.ErrInvalidOptions, "an unknown field")
			errs++
		}
	})
	require.Equal(t, 1, errs)
	require.Zero(t, c.requests, "bad options are refused before any request")
}

// Where the raw points are gone, the tier's windows are the last word, sealed or not: a day
// rolled up before its last windows were sealed, whose raw table is then dropped, answers
// from the tier whole.
func TestAggregateWhereRawIsGone(t *testing.T) {
	ctx := context.Background()
	day := pastDay()
	end := day.Add(24 * time.Hour)
	clk := clock.New(end.Add(10 * time.Minute)) // the last hour of the day is not sealed yet
	opts := &tsdb.Options{RawPeriod: 24 * time.Hour, Now: clk.Now}
	db, svc, _ := dbtest.NewDB(t, opts)
	rng := rand.New(rand.NewPCG(21, 5))
	pts := gaugePoints(rng, day, end, 15*time.Second)
	require.NoError(t, db.Write(ctx, "g", pts...))
	require.NoError(t, db.Rollup(ctx, day, end))
	want := modelWindows(pts, day, end, time.Hour)
	requireWindows(t, want, collect(t, db.Aggregate(ctx, []string{"g"}, day, end, time.Hour, nil)), tsdb.AllFields, "before the drop")

	// The raw table goes (as another process' Retain would drop it); a new handle lists the
	// tables afresh.
	_, err := svc.DeleteTable(ctx, db.Name()+"r"+strconv.FormatInt(day.Unix(), 10), nil)
	require.NoError(t, err)
	other, err := tsdb.Open(ctx, svc, db.Name(), opts)
	require.NoError(t, err)
	requireWindows(t, want, collect(t, other.Aggregate(ctx, []string{"g"}, day, end, time.Hour, nil)), tsdb.AllFields, "after the drop")
}

// More series than two filters hold are read by a scan of the tier's partitions from the
// first name to the last; when a page holds mostly other series (1,200 between the asked
// ones here), the names not reached yet are read by filters: the answer is the model's,
// and the requests are the dirty markers', the scan's first page and 3 filters (the 15 "z"
// series, 6 a filter in the packed layout; a scan to the end would read a page per 1,000
// other series; see the unit test of the block read for the pages).
func TestAggregateManySeriesScan(t *testing.T) {
	ctx := context.Background()
	// One tier, an hour: a block a series (Rollup's cost is its block writes).
	db, writer, checker := newLiveDB(t, tsdb.Options{RawPeriod: 24 * time.Hour, DirectWrites: true, Tiers: []tsdb.Tier{{Step: time.Hour}}})
	day := pastDay()
	end := day.Add(24 * time.Hour)
	rng := rand.New(rand.NewPCG(21, 6))
	series := map[string][]tablets.Point{}
	var asked []string
	for i := range 15 {
		for _, prefix := range []string{"a", "z"} {
			name := fmt.Sprintf("%s%02d", prefix, i)
			series[name] = gaugePoints(rng, day, end, time.Minute)
			asked = append(asked, name)
		}
	}
	for i := range 1200 {
		series[fmt.Sprintf("m%04d", i)] = gaugePoints(rng, day, end, time.Hour)
	}
	writeAll(t, writer, series)
	require.NoError(t, db.Rollup(ctx, day, end))
	for _, step := range []time.Duration{time.Hour, 3 * time.Hour} {
		var got []tsdb.Window
		c := measure(checker, func() { got = collect(t, db.Aggregate(ctx, asked, day, end, step, nil)) })
		requireWindows(t, modelWindowsByName(series, asked, day, end, step), got, tsdb.AllFields, step.String())
		t.Logf("30 of 1,230 series, a day at %v: %d requests, %d bytes", step, c.requests, c.bytes)
		require.Equal(t, int64(1+1+1+3), c.requests, "at %v: the dirty markers, the staged points, the scan's first page, 3 filters", step)
	}
}

// modelWindowsByName are the windows of the named series merged in name order (between
// equal times, the later name's value is First and Last).
func modelWindowsByName(series map[string][]tablets.Point, names []string, from, to time.Time, step time.Duration) []*model {
	sorted := slices.Sorted(slices.Values(names))
	var pts []tablets.Point
	for _, s := range sorted {
		pts = append(pts, series[s]...)
	}
	return modelWindows(pts, from, to, step)
}
