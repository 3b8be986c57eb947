package main

import (
	"context"
	"fmt"
	"math"
	mrand "math/rand/v2"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/tsdb"
)

// demoDatabase writes days of the demo series at 1 Hz into a tsdb database, rolls it up, and
// reads it at a 1-hour step (mean and p99) from the raw points and from the hour tier, side
// by side.
func (a *app) demoDatabase(ctx context.Context, sc *aztables.ServiceClient, ctr *counter, name string, day time.Time, days int) error {
	db, err := tsdb.Open(ctx, sc, name, nil)
	if err != nil {
		return err
	}
	raw, err := tsdb.Open(ctx, sc, name, &tsdb.Options{Tiers: []tsdb.Tier{}}) // no tiers: reads raw points
	if err != nil {
		return err
	}
	n := days * 86400
	from := day.Add(24*time.Hour - time.Duration(n)*time.Second) // ending where the day ends
	to := from.Add(time.Duration(n) * time.Second)
	fmt.Fprintf(a.stderr, "database: writing %s points (%d days at 1 Hz) and rolling them up...\n", thousands(int64(n)), days)
	rng := mrand.New(mrand.NewPCG(3, 4))
	for off := 0; off < n; off += 86400 {
		pts := make([]tablets.Point, min(86400, n-off))
		for i := range pts {
			pts[i] = tablets.Point{Time: from.Add(time.Duration(off+i) * time.Second), Value: demoValue(off+i, rng)}
		}
		if err := db.Write(ctx, demoSeries, pts...); err != nil {
			return fmt.Errorf("database: write: %w", err)
		}
	}
	before, t0 := ctr.snapshot(), time.Now()
	if err := db.Rollup(ctx, from, to); err != nil {
		return fmt.Errorf("database: rollup: %w", err)
	}
	rollup, rollupTime := ctr.snapshot().sub(before), time.Since(t0)

	type read struct {
		name    string
		c       counts
		elapsed time.Duration
		mean    float64
		p99     float64
		windows int
	}
	var reads []read
	for _, r := range []struct {
		name string
		db   *tsdb.DB
	}{{"raw points", raw}, {"hour tier", db}} {
		before, t0 := ctr.snapshot(), time.Now()
		rd := read{name: r.name}
		for w, err := range r.db.Aggregate(ctx, []string{demoSeries}, from, to, time.Hour, nil) {
			if err != nil {
				return fmt.Errorf("database: aggregate: %w", err)
			}
			rd.windows++
			rd.mean += w.Mean()
			rd.p99 = math.Max(rd.p99, w.Quantile(0.99))
		}
		rd.c, rd.elapsed = ctr.snapshot().sub(before), time.Since(t0)
		rd.mean /= float64(max(rd.windows, 1))
		reads = append(reads, rd)
	}
	fmt.Fprintf(a.stdout, "tsdb database %q: %d days at 1 Hz, rolled up in %s (%s requests, %s points/s)\n",
		name, days, humanDuration(rollupTime), thousands(rollup.Requests), thousands(int64(float64(n)/max(rollupTime.Seconds(), 1e-9))))
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%-*s\twindows\trequests\tbytes received\telapsed\tmean of means\tmax p99\t\n", len("1h windows from the raw points"), "Aggregate, 1h step")
	for _, r := range reads {
		fmt.Fprintf(tw, "%-*s\t%d\t%s\t%s\t%s\t%.3f\t%.3f\t\n", len("1h windows from the raw points"), "1h windows from the "+r.name,
			r.windows, thousands(r.c.Requests), humanBytes(r.c.BytesReceived), humanDuration(r.elapsed), r.mean, r.p99)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(a.stdout, "(the same windows: means exact, p99 within the sketches' 1% accuracy)")
	fmt.Fprintln(a.stdout)
	return nil
}

// dropDatabaseTables deletes every table of a demo database, also when interrupted.
func (a *app) dropDatabaseTables(admin *aztables.ServiceClient, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for p := admin.NewListTablesPager(nil); p.More(); {
		page, err := p.NextPage(ctx)
		if err != nil {
			fmt.Fprintf(a.stderr, "could not list the demo database's tables: %s\n", oneLine(err))
			return
		}
		for _, t := range page.Tables {
			if t.Name != nil && strings.HasPrefix(*t.Name, name) {
				if _, err := admin.DeleteTable(ctx, *t.Name, nil); err != nil {
					fmt.Fprintf(a.stderr, "could not delete demo table %s: %s\n", *t.Name, oneLine(err))
				}
			}
		}
	}
}
