package tsdb

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/chunked"
	"github.com/seed71701133/tablets/internal/testkit/clock"
	"github.com/seed71701133/tablets/internal/testkit/itest"
	"github.com/seed71701133/tablets/tsdb"
)

// The maintenance after a staged ingest costs requests per table, not per series: 2,000
// series x 1 hour at a 15 s scrape, written as Prometheus sends them (a WriteMany of one
// sample of each series), then Fold, Compact and Rollup. Compact finds nothing to merge
// with one scan; Rollup writes each series' blocks, a transaction per tier table, after a
// few scans. The tiers answer exactly what the points say.
func TestTSDBMaintenanceCost(t *testing.T) {
	if testing.Short() {
		t.Skip("2,000 series on Azurite")
	}
	const series, scrape = 2000, 15 * time.Second
	ctx := context.Background()
	start := time.Date(2024, 9, 2, 10, 0, 0, 0, time.UTC)
	clock := clock.New(start)
	db, _, checker := newDB(t, &tsdb.Options{Now: clock.Now,
		Layout: func(c *aztables.Client) (tablets.Store, error) { return chunked.New(c, nil) }})
	names := make([]string, series)
	for s := range names {
		names[s] = fmt.Sprintf("up{instance=\"host%04d\"}", s)
	}
	value := func(s, i int) float64 { return float64((i*7+s)%1000) / 4 }

	samples := 0
	for i := range int(time.Hour / scrape) {
		at := start.Add(time.Duration(i) * scrape)
		clock.Add(at.Sub(clock.Now()))
		batch := make([]tsdb.SeriesPoints, series)
		for s, name := range names {
			batch[s] = tsdb.SeriesPoints{Series: name, Points: []tablets.Point{{Time: at, Value: value(s, i)}}}
		}
		require.NoError(t, db.WriteMany(ctx, batch))
		samples += series
	}
	stage := func(what string, do func() error) int64 {
		before := checker.Stats()
		began := time.Now()
		require.NoError(t, do(), what)
		after := checker.Stats()
		n := after.Requests - before.Requests
		t.Logf("%s: %d queries, %d transactions, %d other, %d calls", what, after.Queries-before.Queries, after.Batches-before.Batches,
			after.Other-before.Other, after.Calls-before.Calls)
		t.Logf("%-8s %6d requests, %.3f a series, %.4f a sample (%v)", what, n, float64(n)/series, float64(n)/float64(samples),
			time.Since(began).Round(time.Millisecond))
		return n
	}
	ingest := checker.Stats().Requests
	t.Logf("ingest   %6d requests, %.4f a sample", ingest, float64(ingest)/float64(samples))

	clock.Add(2 * time.Hour) // every arrival bucket foldable, every window sealed
	fold := stage("fold", func() error {
		r, err := db.Fold(ctx)
		if err == nil && r.Points != samples {
			err = fmt.Errorf("folded %d points, want %d", r.Points, samples)
		}
		return err
	})
	from, to := start, start.Add(time.Hour)
	compact := stage("compact", func() error { return db.Compact(ctx, from, to) })
	rollup := stage("rollup", func() error { return db.Rollup(ctx, from, to) })
	total := ingest + fold + compact + rollup
	t.Logf("total    %6d requests, %.4f a sample", total, float64(total)/float64(samples))

	tierTables := int64(len(db.Options().Tiers)) // the hour lies in one table of each tier
	require.Less(t, compact, int64(10), "a table whose partitions hold one chunk each costs its scan only")
	require.LessOrEqual(t, rollup, tierTables*series+30,
		"a transaction per tier table and series, and a few scans (not reads per series)")

	// The tiers hold the points exactly: ten series, at both tiers' steps, read from the tiers.
	for s := range 10 {
		var pts []tablets.Point
		for i := range int(time.Hour / scrape) {
			pts = append(pts, tablets.Point{Time: start.Add(time.Duration(i) * scrape), Value: value(s, i)})
		}
		for _, step := range []time.Duration{time.Minute, time.Hour} {
			before := checker.Stats().Requests
			got := itest.CollectWindows(t, db.Aggregate(ctx, names[s:s+1], from, to, step, nil))
			itest.RequireWindows(t, itest.ModelWindows(pts, from, to, step), got, fmt.Sprintf("%s at %v", names[s], step))
			require.LessOrEqual(t, checker.Stats().Requests-before, int64(3), "read from the tier")
		}
	}
}
