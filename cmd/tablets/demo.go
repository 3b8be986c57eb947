package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	mrand "math/rand/v2"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/spf13/cobra"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/azurite/runner"
	"github.com/seed71701133/tablets/tsdb"
)

const demoSeries = "sensor-1"

func (a *app) demoCommand() *cobra.Command {
	var (
		conn       connFlags
		hours      float64
		basicHours float64
		dbDays     int
		layoutsArg []string
		local      bool
	)
	cmd := &cobra.Command{
		Use:   "demo [--hours 24] [--basic-hours H]",
		Short: "Write and read a day at 1 Hz with each layout; compare their cost",
		Long: `Write a day of one series at 1 Hz (86,400 points) with each store layout (basic,
advanced, chunked), read the last 2 hours and the whole day back, check every point, and
print a table of what each operation cost: points, HTTP requests (retries included), table
entities written or read, HTTP body bytes sent and received, bytes stored per point,
elapsed time and points per second.

Without a connection string or account URL, the demo starts a local Azurite (installed from
npm into the user cache the first time, which needs Node.js 20+, npm and the npm
registry), in memory on a free port of 127.0.0.1, and stops it at the end. With one, it
works in new tables with unique names (tabletsdemo...) and deletes them at the end, also
when interrupted with Ctrl-C.

On a 2-core machine the basic layout writes 3,000 to 10,000 points/s to Azurite, so its
full day takes 10 to 30 seconds and the whole demo 20 to 50; --basic-hours gives the basic
layout a shorter span (the table says what each row measured).`,
		Example: `  tablets demo
  tablets demo --hours 2
  AZURE_TABLES_CONNECTION_STRING='...' tablets demo`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if hours <= 0 || hours > 24*366 {
				return usageErrorf(cmd, "--hours must be in (0, 8784]")
			}
			if basicHours < 0 || basicHours > 24*366 {
				return usageErrorf(cmd, "--basic-hours must be in [0, 8784]")
			}
			var defs []layoutDef
			for _, name := range layoutsArg {
				d, err := findLayout(name)
				if err != nil {
					return usageErrorf(cmd, "%v", err)
				}
				defs = append(defs, d)
			}
			c, ok, err := conn.resolve(cmd, a.env)
			if err != nil {
				return err
			}
			if local {
				if conn.connectionString != "" || conn.accountURL != "" {
					return usageErrorf(cmd, "--local and an account are exclusive")
				}
				ok = false
			}
			if dbDays < 0 || dbDays > 366 {
				return usageErrorf(cmd, "--db-days must be in [0, 366]")
			}
			return a.demo(cmd.Context(), c, ok, defs, hours, basicHours, dbDays)
		},
	}
	addConnFlags(cmd, &conn)
	f := cmd.Flags()
	f.Float64Var(&hours, "hours", 24, "hours of 1 Hz data each layout writes")
	f.Float64Var(&basicHours, "basic-hours", 0, "hours the basic layout writes (0: --hours)")
	f.IntVar(&dbDays, "db-days", 7, "days of 1 Hz data the database part writes, then reads at a 1-hour step\nfrom the raw points and from its rollup tier (0: skip it)")
	f.StringSliceVar(&layoutsArg, "layouts", layoutNames(), "layouts to run")
	f.BoolVar(&local, "local", false, "use a local Azurite even if $"+envConnectionString+" or $"+envAccountURL+" is set")
	return cmd
}

// demoRow is one line of the demo's table.
type demoRow struct {
	op, layout string
	points     int
	c          counts
	elapsed    time.Duration
}

func (a *app) demo(ctx context.Context, conn connFlags, haveAccount bool, defs []layoutDef, hours, basicHours float64, dbDays int) (err error) {
	where := ""
	if !haveAccount {
		fmt.Fprintln(a.stderr, "no connection string or account URL: starting a local Azurite (in memory; the first run installs it from npm)...")
		t0 := time.Now()
		var srv *runner.Server
		if srv, err = runner.Start(ctx); err != nil {
			return err
		}
		defer func() {
			if serr := srv.Stop(); serr != nil && err == nil {
				err = serr
			}
		}()
		fmt.Fprintf(a.stderr, "Azurite is up on 127.0.0.1:%d (%s)\n", srv.Port, humanDuration(time.Since(t0)))
		conn = connFlags{connectionString: srv.ConnectionString}
		where = fmt.Sprintf("local Azurite at %s (in memory)", srv.Endpoint)
	} else {
		where = conn.describe()
	}

	// Requests go counter -> network (the counter measures what each operation costs).
	ctr := &counter{next: runner.DefaultTransport()}
	sc, err := conn.serviceClient(ctr)
	if err != nil {
		return err
	}
	admin, err := conn.serviceClient(nil) // creates and deletes tables, uncounted
	if err != nil {
		return err
	}

	suffix := randomHex(4)
	var tables []string
	defer func() {
		// Delete the tables even when interrupted: on a context that is not canceled.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		for _, t := range tables {
			_, derr := admin.NewClient(t).Delete(cctx, nil)
			var re *azcore.ResponseError
			if derr != nil && !(errors.As(derr, &re) && re.StatusCode == http.StatusNotFound) {
				fmt.Fprintf(a.stderr, "could not delete demo table %s: %s\n", t, oneLine(derr))
			}
		}
	}()

	// Yesterday, 00:00 UTC; in the first hour of a day, the day before: the database part
	// reads the hour tier's windows up to the day's end, trusted only once sealed, an hour
	// after their end (tsdb.DefaultSealDelay).
	day := time.Now().UTC().Add(-tsdb.DefaultSealDelay).Truncate(24 * time.Hour).Add(-24 * time.Hour)
	var rows []demoRow
	var descriptions []string
	for _, def := range defs {
		h := hours
		if def.name == "basic" && basicHours > 0 {
			h = basicHours
		}
		table := "tabletsdemo" + def.name + suffix
		tables = append(tables, table) // first: an interrupted create may still have created it
		if err := tablets.EnsureTable(ctx, admin.NewClient(table)); err != nil {
			return fmt.Errorf("create table %s: %w", table, err)
		}
		store, err := def.open(sc.NewClient(table), layoutOptions{})
		if err != nil {
			return err
		}
		descriptions = append(descriptions, fmt.Sprintf("  %-9s %s", def.name+":", def.describe(store)))
		r, err := a.demoLayout(ctx, def.name, store, ctr, day, h)
		rows = append(rows, r...)
		if err != nil {
			return err
		}
	}
	fmt.Fprintf(a.stdout, "tablets demo: series %q at 1 Hz from %s, on %s\n", demoSeries, day.Format("2006-01-02 15:04 MST"), where)
	fmt.Fprintf(a.stdout, "%s\n\n", strings.Join(descriptions, "\n"))
	// Right-aligned numbers; the two text columns padded to be left-aligned.
	opW, storeW := len("operation"), len("store")
	for _, r := range rows {
		opW, storeW = max(opW, len(r.op)), max(storeW, len(r.layout))
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%-*s\t%-*s\tpoints\trequests\tentities\tbytes sent\tbytes received\tstored/point\telapsed\tpoints/s\t\n", opW, "operation", storeW, "store")
	// Side by side: the layouts' rows of one operation together.
	var ops []string
	for _, r := range rows {
		if !contains(ops, r.op) {
			ops = append(ops, r.op)
		}
	}
	for _, op := range ops {
		for _, r := range rows {
			if r.op != op {
				continue
			}
			entities := r.c.EntitiesSent + r.c.EntitiesReceived
			stored := ""
			if r.c.EntityBytes > 0 {
				stored = fmt.Sprintf("%.1f B", float64(r.c.EntityBytes)/float64(r.points))
			}
			fmt.Fprintf(tw, "%-*s\t%-*s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", opW, r.op, storeW, r.layout, thousands(int64(r.points)),
				thousands(r.c.Requests), thousands(entities), humanBytes(r.c.BytesSent), humanBytes(r.c.BytesReceived), stored,
				humanDuration(r.elapsed), thousands(int64(float64(r.points)/max(r.elapsed.Seconds(), 1e-9))))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(a.stdout)
	if c := comparison(rows); c != "" {
		fmt.Fprintln(a.stdout, c)
	}
	if dbDays > 0 {
		dbName := "tabletsdemo" + suffix
		defer a.dropDatabaseTables(admin, dbName)
		if err := a.demoDatabase(ctx, sc, ctr, dbName, day, dbDays); err != nil {
			return err
		}
	}
	fmt.Fprintln(a.stdout, "requests: HTTP requests sent, retries included; entities: table entities written or read;")
	fmt.Fprintln(a.stdout, "bytes: HTTP bodies; stored/point: the entities' JSON written (what the table keeps and bills,")
	fmt.Fprintln(a.stdout, "base64 included) over the points; elapsed: wall time of the store calls; points/s: points / elapsed.")
	fmt.Fprintln(a.stdout, "Every point read back was checked against the point written.")
	return nil
}

// comparison summarizes advanced against basic, when both ran the same operations.
func comparison(rows []demoRow) string {
	find := func(op, layout string) (demoRow, bool) {
		for _, r := range rows {
			if r.op == op && r.layout == layout {
				return r, true
			}
		}
		return demoRow{}, false
	}
	var out []string
	for _, pair := range [][2]string{{"advanced", "basic"}, {"chunked", "advanced"}} {
		var lines []string
		for _, r := range rows {
			if r.layout != pair[1] {
				continue
			}
			better, ok := find(r.op, pair[0])
			if !ok || better.points != r.points || better.c.Requests == 0 || better.elapsed <= 0 {
				continue
			}
			line := fmt.Sprintf("  %-10s %5.1fx fewer requests, %5.1fx fewer bytes, %5.1fx faster",
				r.op+":", float64(r.c.Requests)/float64(better.c.Requests),
				float64(r.c.BytesSent+r.c.BytesReceived)/max(float64(better.c.BytesSent+better.c.BytesReceived), 1),
				r.elapsed.Seconds()/better.elapsed.Seconds())
			if better.c.EntityBytes > 0 {
				line += fmt.Sprintf(", %5.1fx fewer bytes stored", float64(r.c.EntityBytes)/float64(better.c.EntityBytes))
			}
			lines = append(lines, line)
		}
		if len(lines) > 0 {
			out = append(out, pair[0]+" vs "+pair[1]+":\n"+strings.Join(lines, "\n")+"\n")
		}
	}
	return strings.Join(out, "")
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// demoValue is the demo series: a daily cycle, a 10-minute ripple and noise, to 2 decimals
// like a real sensor.
func demoValue(i int, rng *mrand.Rand) float64 {
	v := 20 + 5*math.Sin(2*math.Pi*float64(i)/86400) + 0.5*math.Sin(2*math.Pi*float64(i)/600) + rng.NormFloat64()*0.2
	return math.Round(v*100) / 100
}

// demoLayout writes hours of 1 Hz points from day with store, then queries the last 2 hours
// and everything, checking every point, and returns the measurements.
func (a *app) demoLayout(ctx context.Context, name string, store tablets.Store, ctr *counter, day time.Time, hours float64) ([]demoRow, error) {
	n := int(math.Round(hours * 3600))
	rng := mrand.New(mrand.NewPCG(1, 2))
	pts := make([]tablets.Point, n)
	for i := range pts {
		pts[i] = tablets.Point{Time: day.Add(time.Duration(i) * time.Second), Value: demoValue(i, rng)}
	}
	end := day.Add(time.Duration(n) * time.Second)
	var rows []demoRow

	// Write an hour per call: the advanced layout's partitions are hours.
	const chunk = 3600
	fmt.Fprintf(a.stderr, "%s: writing %s points...\n", name, thousands(int64(n)))
	bar := a.newProgress(int64(n), "write "+name, false)
	before, t0 := ctr.snapshot(), time.Now()
	for off := 0; off < n; off += chunk {
		part := pts[off:min(off+chunk, n)]
		if err := store.Write(ctx, demoSeries, part...); err != nil {
			bar.Done()
			return rows, fmt.Errorf("write: %w", err)
		}
		bar.Add(len(part))
		if written, ok := ctx.Value(demoWrittenKey{}).(func(string, int)); ok {
			written(name, off+len(part))
		}
	}
	bar.Done()
	rows = append(rows, demoRow{op: "write " + spanName(n), layout: name, points: n,
		c: ctr.snapshot().sub(before), elapsed: time.Since(t0)})

	spans := []time.Duration{2 * time.Hour, time.Duration(n) * time.Second}
	if spans[1] <= spans[0] {
		spans = spans[1:] // the last 2 hours are everything
	}
	for _, span := range spans {
		from := end.Add(-span)
		first := int(from.Sub(day) / time.Second)
		before, t0 := ctr.snapshot(), time.Now()
		got := 0
		for p, err := range store.Query(ctx, demoSeries, from, end) {
			if err != nil {
				return rows, fmt.Errorf("query: %w", err)
			}
			want := pts[min(first+got, n-1)]
			if first+got >= n || !p.Time.Equal(want.Time) || p.Value != want.Value {
				return rows, fmt.Errorf("%s: query: point %d is (%s, %v), want (%s, %v)", name, got,
					fmtTime(p.Time), p.Value, fmtTime(want.Time), want.Value)
			}
			got++
		}
		elapsed := time.Since(t0)
		if got != n-first {
			return rows, fmt.Errorf("%s: query [%s, %s): %d points, want %d", name, fmtTime(from), fmtTime(end), got, n-first)
		}
		rows = append(rows, demoRow{op: "query " + spanName(n-first), layout: name, points: got,
			c: ctr.snapshot().sub(before), elapsed: elapsed})
	}
	return rows, nil
}

// demoWrittenKey is the context key of a function that the demo calls after each write that
// succeeded, with the layout and the number of points it has stored so far: tests use it to
// interrupt the demo at a known point.
type demoWrittenKey struct{}

// withDemoWritten returns ctx carrying written (see demoWrittenKey).
func withDemoWritten(ctx context.Context, written func(layout string, points int)) context.Context {
	return context.WithValue(ctx, demoWrittenKey{}, written)
}

// spanName prints a span of seconds as hours: 24h, 1.5h, 20m.
func spanName(seconds int) string {
	d := time.Duration(seconds) * time.Second
	if d%time.Hour == 0 {
		return fmt.Sprintf("%dh", d/time.Hour)
	}
	if d < time.Hour && d%time.Minute == 0 {
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return strings.TrimSuffix(fmt.Sprintf("%.1fh", d.Hours()), ".0h")
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
