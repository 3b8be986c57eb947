package tiercost

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/dbtest"
	"github.com/seed71701133/tablets/tsdb"
)

// nonSketch are the fields of a window but its quantiles and histograms.
const nonSketch = tsdb.FieldSum | tsdb.FieldMin | tsdb.FieldMax | tsdb.FieldFirst | tsdb.FieldLast

// A minute window of a regular counter or gauge (a point every 15 s) costs at most 12 bytes
// on the wire for all its columns but the sketch; the sketch is read only with
// FieldQuantiles, and a field not asked for is not read.
func TestWindowBytes(t *testing.T) {
	ctx := context.Background()
	db, _, checker := dbtest.NewDB(t, &tsdb.Options{RawPeriod: 24 * time.Hour})
	day := pastDay()
	end := day.Add(24 * time.Hour)
	rng := rand.New(rand.NewPCG(21, 1))
	series := map[string][]tablets.Point{
		"counter": counterPoints(rng, day, end, 15*time.Second),
		"gauge":   gaugePoints(rng, day, end, 15*time.Second),
	}
	writeAll(t, db, series)
	require.NoError(t, db.Rollup(ctx, day, end))

	for _, s := range []string{"counter", "gauge"} {
		want := modelWindows(series[s], day, end, time.Minute)
		read := func(f tsdb.Fields) cost {
			var got []tsdb.Window
			c := measure(checker, func() {
				got = collect(t, db.Aggregate(ctx, []string{s}, day, end, time.Minute, &tsdb.AggregateOptions{Fields: f}))
			})
			requireWindows(t, want, got, f, s)
			t.Logf("%s, a day at 1 m, fields %#x: %d requests, %d bytes, %.2f bytes a window", s, uint16(f), c.requests, c.bytes,
				float64(c.bytes)/float64(len(want)))
			return c
		}
		sum := read(tsdb.FieldSum)
		all := read(nonSketch)
		quantiles := read(nonSketch | tsdb.FieldQuantiles)
		require.LessOrEqual(t, float64(all.bytes)/float64(len(want)), 12.0, "%s: the non-sketch columns of a window", s)
		require.Less(t, sum.bytes, all.bytes, "%s: the columns not asked for are not read", s)
		require.Less(t, all.bytes, quantiles.bytes, "%s: the sketches are read only for the quantiles", s)
		require.Equal(t, all.requests, quantiles.requests, s)
	}
}

// An Aggregate at a 5, 15 or 30-minute step reads the minute tier's windows, merged: the
// same requests and bytes as at a minute over the same range, and the model's windows.
func TestSubHourSteps(t *testing.T) {
	ctx := context.Background()
	db, _, checker := dbtest.NewDB(t, &tsdb.Options{RawPeriod: 24 * time.Hour})
	day := pastDay()
	end := day.Add(24 * time.Hour)
	rng := rand.New(rand.NewPCG(21, 2))
	series := map[string][]tablets.Point{}
	var all []tablets.Point
	for _, s := range []string{"c1", "c2", "g1"} { // name order: between equal times, g1's is First and Last
		if s[0] == 'c' {
			series[s] = counterPoints(rng, day, end, 15*time.Second)
		} else {
			series[s] = gaugePoints(rng, day, end, 15*time.Second)
		}
		all = append(all, series[s]...)
	}
	writeAll(t, db, series)
	require.NoError(t, db.Rollup(ctx, day, end))
	names := []string{"c1", "c2", "g1"}
	// From 00:10 to 23:20: cut by neither a 5, 15 nor 30-minute window, not a whole block.
	from, to := day.Add(10*time.Minute), end.Add(-40*time.Minute)
	var minute cost
	for _, step := range []time.Duration{time.Minute, 5 * time.Minute, 15 * time.Minute, 30 * time.Minute} {
		var got []tsdb.Window
		c := measure(checker, func() { got = collect(t, db.Aggregate(ctx, names, from, to, step, nil)) })
		requireWindows(t, modelWindows(all, from, to, step), got, tsdb.AllFields, step.String())
		t.Logf("3 series, 23h10 at %v: %d requests, %d bytes", step, c.requests, c.bytes)
		if step == time.Minute {
			minute = c
			continue
		}
		require.Equal(t, minute, c, "at %v as at a minute", step)
	}
}
