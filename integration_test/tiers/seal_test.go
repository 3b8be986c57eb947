package tiers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/maintain/schedule"
	"github.com/seed71701133/tablets/internal/testkit/clock"
	"github.com/seed71701133/tablets/internal/testkit/itest"
	"github.com/seed71701133/tablets/tsdb"
)

// sealDay is the first day of the tests of sealing.
var sealDay = time.Date(2024, 6, 1, 0, 0, 0, 0, time.UTC)

// minutePoints are a point a minute of series s in [from, to), at offset into the minute,
// values varying by series and time.
func minutePoints(s int, from, to time.Time, offset time.Duration) []tablets.Point {
	var pts []tablets.Point
	for t := from; t.Before(to); t = t.Add(time.Minute) {
		m := int(t.Sub(sealDay) / time.Minute)
		pts = append(pts, tablets.Point{Time: t.Add(offset), Value: float64((m*37+s*11)%500) / 4})
	}
	return pts
}

// dirtyMarkers lists the RowKeys of the catalog's dirty markers of db.
func dirtyMarkers(t *testing.T, svc *aztables.ServiceClient, db *tsdb.DB) []string {
	t.Helper()
	f := "PartitionKey eq 'dirty'"
	var out []string
	for p := svc.NewClient(db.Name() + "m").NewListEntitiesPager(&aztables.ListEntitiesOptions{Filter: &f}); p.More(); {
		page, err := p.NextPage(context.Background())
		require.NoError(t, err)
		for _, e := range page.Entities {
			var ent aztables.EDMEntity
			require.NoError(t, ent.UnmarshalJSON(e))
			out = append(out, ent.RowKey)
		}
	}
	return out
}

// The user scenario: 4 days of 3 series written as they happened, 2 of them rolled
// up (the rollup's progress recorded there, as the server's loop records it), late points
// backfilled into a rolled-up day of one series, then Retain drops all 4 days. Every
// hourly window of the 4 days is the model's, from the tiers: the backfilled day holds the
// late points (240 where 180 were written, then 60 more), the days never rolled up are
// rolled up by Retain before it drops them. No marker is left.
func TestTSDBRetainRollsUpFirst(t *testing.T) {
	ctx := context.Background()
	clk := clock.New(sealDay)
	db, svc, checker := newDB(t, &tsdb.Options{RawPeriod: 24 * time.Hour, RawRetention: 48 * time.Hour, DirectWrites: true, Now: clk.Now})
	names := []string{"a", "b", "c"}
	end := sealDay.Add(96 * time.Hour)
	var all []tablets.Point
	for i, s := range names {
		pts := minutePoints(i, sealDay, end, 0)
		require.NoError(t, db.Write(ctx, s, pts...)) // ahead of the clock: none late
		all = append(all, pts...)
	}
	require.Empty(t, dirtyMarkers(t, svc, db), "points written as they happen mark nothing")

	clk.Add(50 * time.Hour) // the first 2 days are sealed
	require.NoError(t, db.Rollup(ctx, sealDay, sealDay.Add(48*time.Hour)))
	require.NoError(t, db.Tasks().SetCovered(ctx, tsdb.TaskRollup, sealDay.Add(48*time.Hour)))

	late := minutePoints(1, sealDay.Add(24*time.Hour), sealDay.Add(48*time.Hour), 30*time.Second)
	require.NoError(t, db.Write(ctx, "b", late...))
	all = append(all, late...)
	require.Equal(t, []string{fmt.Sprintf("%012d|b", sealDay.Add(24*time.Hour).Unix())}, dirtyMarkers(t, svc, db))

	clk.Add(96 * time.Hour) // every day is past the raw retention
	before := checker.Stats()
	dropped, err := db.Retain(ctx, clk.Now())
	require.NoError(t, err)
	st := checker.Stats()
	t.Logf("Retain of 4 days (2 rolled up, 1 marked dirty) of 3 series: %d requests, %d bytes sent, %d received",
		st.Requests-before.Requests, st.RequestBytes-before.RequestBytes, st.ResponseBytes-before.ResponseBytes)
	for d := range 4 {
		require.Contains(t, dropped, db.Name()+"r"+fmt.Sprint(sealDay.Add(time.Duration(d)*24*time.Hour).Unix()))
	}
	require.Empty(t, dirtyMarkers(t, svc, db), "Retain deletes the markers of the periods it drops")

	got := itest.CollectWindows(t, db.Aggregate(ctx, names, sealDay, end, time.Hour, nil))
	want := itest.ModelWindows(all, sealDay, end, time.Hour)
	require.Len(t, want, 96)
	require.Equal(t, uint64(240), want[30].Count, "the model: 180 written, 60 backfilled")
	itest.RequireWindows(t, want, got, "after Retain")

	// Another process (which knows of no drop) rolling the dropped days up again, by a
	// clock before their retention's end too, leaves their windows: the catalog says they
	// are dropped.
	for _, now := range []time.Time{clk.Now(), sealDay.Add(50 * time.Hour)} {
		c := clock.New(now)
		other, err := tsdb.Open(ctx, svc, db.Name(), &tsdb.Options{RawPeriod: 24 * time.Hour, RawRetention: 48 * time.Hour, Now: c.Now})
		require.NoError(t, err)
		require.NoError(t, other.Rollup(ctx, sealDay, end))
		itest.RequireWindows(t, want, itest.CollectWindows(t, db.Aggregate(ctx, names, sealDay, end, time.Hour, nil)), "after another Rollup at "+now.String())
	}

	// A marker left in a dropped day (as by a write that got in after Retain's last look):
	// RollupFlagged of another process deletes it, and leaves the windows.
	marker := fmt.Sprintf(`{"PartitionKey":"dirty","RowKey":"%012d|b","V":1,"V@odata.type":"Edm.Double"}`, sealDay.Add(24*time.Hour).Unix())
	_, err = svc.NewClient(db.Name()+"m").UpsertEntity(ctx, []byte(marker), nil)
	require.NoError(t, err)
	other, err := tsdb.Open(ctx, svc, db.Name(), &tsdb.Options{RawPeriod: 24 * time.Hour, RawRetention: 48 * time.Hour, Now: clk.Now})
	require.NoError(t, err)
	n, err := other.RollupFlagged(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Empty(t, dirtyMarkers(t, svc, db))
	itest.RequireWindows(t, want, itest.CollectWindows(t, db.Aggregate(ctx, names, sealDay, end, time.Hour, nil)), "after RollupFlagged of a dropped day")
}

// A Retain killed between recording a period dropped and dropping its table, run again,
// drops it and leaves the tier windows it rolled up.
func TestTSDBRetainKilled(t *testing.T) {
	ctx := context.Background()
	clock := clock.New(sealDay)
	h := &itest.Hooked{}
	db, svc, _ := newDB(t, &tsdb.Options{RawPeriod: 24 * time.Hour, RawRetention: 24 * time.Hour, DirectWrites: true, Now: clock.Now})
	hdb, _ := newHookedDBOpts(t, db.Name(), h, &tsdb.Options{RawPeriod: 24 * time.Hour, RawRetention: 24 * time.Hour, DirectWrites: true, Now: clock.Now})
	end := sealDay.Add(48 * time.Hour)
	pts := minutePoints(0, sealDay, end, 0)
	require.NoError(t, db.Write(ctx, "k", pts...))
	clock.Add(26 * time.Hour)
	late := minutePoints(0, sealDay.Add(3*time.Hour), sealDay.Add(4*time.Hour), 20*time.Second)
	require.NoError(t, db.Write(ctx, "k", late...))
	require.Len(t, dirtyMarkers(t, svc, db), 1)
	clock.Add(48 * time.Hour) // both days are past the raw retention

	killed, cancel := context.WithCancel(ctx)
	h.Arm(func(r *http.Request) bool {
		return r.Method == http.MethodDelete && strings.Contains(r.URL.Path, "Tables(")
	}, cancel, nil)
	_, err := hdb.Retain(killed, clock.Now())
	require.ErrorIs(t, err, context.Canceled, "killed as it drops the first table")

	dropped, err := db.Retain(ctx, clock.Now())
	require.NoError(t, err)
	require.Contains(t, dropped, db.Name()+"r"+fmt.Sprint(sealDay.Unix()))
	require.Empty(t, dirtyMarkers(t, svc, db))
	all := append(slices.Clone(pts), late...)
	got := itest.CollectWindows(t, db.Aggregate(ctx, []string{"k"}, sealDay, end, time.Hour, nil))
	itest.RequireWindows(t, itest.ModelWindows(all, sealDay, end, time.Hour), got, "after a killed Retain and another")
}

// newHookedDBOpts opens the database name again with opts, through a hookable transport.
func newHookedDBOpts(t *testing.T, name string, h *itest.Hooked, opts *tsdb.Options) (*tsdb.DB, *aztables.ServiceClient) {
	t.Helper()
	_, svc := newHookedDB(t, name, h)
	db, err := tsdb.Open(context.Background(), svc, name, opts)
	require.NoError(t, err)
	return db, svc
}

// RollupFlagged rolls up the marked slices and deletes their markers; a run killed before
// its deletes leaves every marker, and the next does the work; a marker written again while
// its slice was being rolled up (a later late point) stays, and the reader reads that slice
// raw until the next run. A Rollup of the range clears the markers too.
func TestTSDBRollupFlagged(t *testing.T) {
	ctx := context.Background()
	h := &itest.Hooked{}
	db, svc, checker := newDB(t, &tsdb.Options{RawPeriod: 24 * time.Hour, DirectWrites: true})
	hdb, _ := newHookedDBOpts(t, db.Name(), h, &tsdb.Options{RawPeriod: 24 * time.Hour, DirectWrites: true})
	end := sealDay.Add(48 * time.Hour)
	var all []tablets.Point
	write := func() {
		for i, s := range []string{"f", "g"} {
			pts := minutePoints(i, sealDay, end, 0)
			require.NoError(t, db.Write(ctx, s, pts...)) // years late: both days marked, both series
			all = append(all, pts...)
		}
		require.Len(t, dirtyMarkers(t, svc, db), 4)
	}
	write()
	require.NoError(t, db.Rollup(ctx, sealDay, end))
	require.Empty(t, dirtyMarkers(t, svc, db), "Rollup clears the markers of its range")
	all = nil
	write() // the same points again: marked again

	// Killed at its first delete of markers: every marker stays.
	killed, cancel := context.WithCancel(ctx)
	h.Arm(func(r *http.Request) bool {
		body := string(itest.PeekBody(r))
		return itest.IsBatch(r) && strings.Contains(body, "DELETE ") && strings.Contains(body, "PartitionKey='dirty'")
	}, cancel, nil)
	n, err := hdb.RollupFlagged(killed)
	require.True(t, errors.Is(err, context.Canceled), "%v", err)
	require.Zero(t, n)
	require.Len(t, dirtyMarkers(t, svc, db), 4, "a killed run leaves the markers")

	// A late point of g written while the run rolls up g's second day, once it has read its
	// raw points: its marker stays.
	extra := tablets.Point{Time: sealDay.Add(26*time.Hour + 10*time.Second), Value: -3.25}
	day1 := db.Name() + "r" + fmt.Sprint(sealDay.Add(24*time.Hour).Unix())
	h.Arm(func(r *http.Request) bool {
		return r.Method == http.MethodGet && strings.Contains(r.URL.Path, day1) && strings.Contains(r.URL.Query().Get("$filter"), "'g|")
	}, nil, func() { require.NoError(t, db.Write(ctx, "g", extra)) })
	n, err = hdb.RollupFlagged(ctx)
	require.NoError(t, err)
	all = append(all, extra)
	require.Equal(t, 3, n, "the marker rewritten during its rollup stays")
	require.Equal(t, []string{fmt.Sprintf("%012d|g", sealDay.Add(24*time.Hour).Unix())}, dirtyMarkers(t, svc, db))
	w := itest.CollectWindows(t, db.Aggregate(ctx, []string{"g"}, sealDay.Add(26*time.Hour), sealDay.Add(27*time.Hour), time.Hour, nil))
	require.Len(t, w, 1)
	require.Equal(t, uint64(61), w[0].Count, "the marked slice is read raw")
	require.Equal(t, -3.25, w[0].Min)

	before := checker.Stats()
	n, err = db.RollupFlagged(ctx)
	require.NoError(t, err)
	st := checker.Stats()
	t.Logf("RollupFlagged of 1 marked slice (a day of minutes): %d requests, %d bytes sent, %d received",
		st.Requests-before.Requests, st.RequestBytes-before.RequestBytes, st.ResponseBytes-before.ResponseBytes)
	require.Equal(t, 1, n)
	require.Empty(t, dirtyMarkers(t, svc, db))
	got := itest.CollectWindows(t, db.Aggregate(ctx, []string{"f", "g"}, sealDay, end, time.Hour, nil))
	itest.RequireWindows(t, itest.ModelWindows(all, sealDay, end, time.Hour), got, "after RollupFlagged")
	before = checker.Stats()
	n, err = db.RollupFlagged(ctx)
	require.NoError(t, err)
	require.Zero(t, n)
	require.Equal(t, int64(1), checker.Stats().Requests-before.Requests, "nothing marked: one query")
}

// A 6-hour outage of every roller, then a backfill of points a day old, then Retain: the
// windows of the dropped day are the model's, from the tiers (counts, sums, min, max exact,
// quantiles within the accuracy), at an hour and at a minute. The rollers are the
// maintenance scheduler's rollup (and rollup of dirty slices), the server's loops, on a clock
// the test advances as the writers write; a new process catches up from the progress the
// last one recorded.
func TestTSDBOutageBackfillRetain(t *testing.T) {
	ctx := context.Background()
	clock := clock.New(sealDay.Add(time.Hour))
	opts := &tsdb.Options{RawPeriod: 24 * time.Hour, RawRetention: 36 * time.Hour, DirectWrites: true, Now: clock.Now}
	db, svc, checker := newDB(t, opts)
	names := []string{"o1", "o2", "o3"}
	var all []tablets.Point
	written := sealDay
	writeUpTo := func(to time.Time) { // as the points happen: ahead of the clock, none late
		if !to.After(written) {
			return
		}
		for i, s := range names {
			pts := minutePoints(i, written, to, 0)
			require.NoError(t, db.Write(ctx, s, pts...))
			all = append(all, pts...)
		}
		written = to
	}
	roller := func(d *tsdb.DB) (*itest.LoopRuns, func()) { // on the database's clock
		return itest.Schedule(t, d, schedule.Options{RollupEvery: 10 * time.Millisecond, RollupCatchUp: 24 * time.Hour}, schedule.Rollup)
	}
	// Hours 0 to 12 rolled up as they seal, 3 hours at a time: the clock moves on once the
	// points are written, then the roller covers up to the seal.
	runs, stop := roller(db)
	writeUpTo(sealDay.Add(6 * time.Hour))
	covered := sealDay
	for h := 3; h <= 12; h += 3 {
		clock.Add(3 * time.Hour) // now h+1
		runs.WaitCovered(t, covered, sealDay.Add(time.Duration(h)*time.Hour))
		covered = sealDay.Add(time.Duration(h) * time.Hour)
		writeUpTo(sealDay.Add(time.Duration(h+6) * time.Hour))
	}
	stop()
	stored, ok, err := db.Tasks().Covered(ctx, tsdb.TaskRollup)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, covered, stored)

	// Every roller is down 6 hours; the writers go on. Another process's roller catches up.
	writeUpTo(sealDay.Add(24 * time.Hour))
	clock.Add(6 * time.Hour) // 19:00
	other, err := tsdb.Open(ctx, svc, db.Name(), opts)
	require.NoError(t, err)
	runs, stop = roller(other)
	first := <-runs.C
	require.NoError(t, first.Err)
	require.Equal(t, covered, first.From, "the first run starts at the progress, not its lookback")
	if first.To.Before(sealDay.Add(18 * time.Hour)) {
		runs.WaitCovered(t, first.To, sealDay.Add(18*time.Hour))
	}
	covered = sealDay.Add(18 * time.Hour)
	for h := 18; h <= 30; h += 3 {
		if h > 18 {
			runs.WaitCovered(t, covered, sealDay.Add(time.Duration(h)*time.Hour))
			covered = sealDay.Add(time.Duration(h) * time.Hour)
		}
		writeUpTo(sealDay.Add(time.Duration(h+6) * time.Hour))
		clock.Add(3 * time.Hour)
	}
	stop()

	// A backfill of points a day old, into two series of the first day, then every roller
	// is down again until Retain.
	for i, s := range names[:2] {
		late := minutePoints(10+i, sealDay.Add(6*time.Hour), sealDay.Add(14*time.Hour), 45*time.Second)
		require.NoError(t, db.Write(ctx, s, late...))
		all = append(all, late...)
	}
	require.Len(t, dirtyMarkers(t, svc, db), 2)
	clock.Add(27 * time.Hour) // day 0 is past the raw retention, day 1 not yet
	before := checker.Stats()
	dropped, err := other.Retain(ctx, clock.Now())
	require.NoError(t, err)
	st := checker.Stats()
	t.Logf("Retain of a day of 3 series with 2 marked slices: %d requests, %d bytes received", st.Requests-before.Requests, st.ResponseBytes-before.ResponseBytes)
	require.Equal(t, []string{db.Name() + "r" + fmt.Sprint(sealDay.Unix())}, dropped)
	require.Empty(t, dirtyMarkers(t, svc, db))

	day0 := sealDay.Add(24 * time.Hour)
	for _, step := range []time.Duration{time.Hour, time.Minute} {
		got := itest.CollectWindows(t, db.Aggregate(ctx, names, sealDay, day0, step, nil))
		want := itest.ModelWindows(all, sealDay, day0, step)
		require.Len(t, want, int(24*time.Hour/step))
		itest.RequireWindows(t, want, got, "the dropped day at "+step.String())
	}
	var total uint64
	for _, w := range itest.ModelWindows(all, sealDay, day0, 24*time.Hour) {
		total += w.Count
	}
	require.Equal(t, uint64(3*1440+2*480), total, "the model holds the backfill")
}
