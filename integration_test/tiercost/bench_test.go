package tiercost

import (
	"context"
	"testing"
	"time"

	"github.com/seed71701133/tablets/tsdb"
)

// BenchmarkAggregate: Aggregate and AggregateSeries of 20 counters scraped every 15 s over
// 7 days (BenchmarkDashboard's), rolled up: requests, response bytes and bytes a window
// (of a series) of one read, by case; and QueryMany of the raw points for reference (its
// bytes/window: a series' minute).
func BenchmarkAggregate(b *testing.B) {
	ctx := context.Background()
	end := time.Now().UTC().Add(-2 * time.Hour).Truncate(time.Hour)
	start := end.Add(-7 * 24 * time.Hour)
	db, checker, names := dashboardData(b, start, end)
	for _, c := range []struct {
		name     string
		series   []string
		from     time.Duration // before end
		step     time.Duration
		fields   tsdb.Fields
		apart    bool
		raw      bool
		sWindows int // windows of a series the read yields, by series
	}{
		{name: "1-series-1d-1m-nonsketch", series: names[:1], from: 24 * time.Hour, step: time.Minute, fields: nonSketch, sWindows: 1440},
		{name: "1-series-1d-1m-quantiles", series: names[:1], from: 24 * time.Hour, step: time.Minute, fields: nonSketch | tsdb.FieldQuantiles, sWindows: 1440},
		{name: "1-series-1d-5m", series: names[:1], from: 24 * time.Hour, step: 5 * time.Minute, sWindows: 1440},
		{name: "20-series-7d-1m-last-apart", series: names, from: 7 * 24 * time.Hour, step: time.Minute, fields: tsdb.FieldLast, apart: true, sWindows: 7 * 1440},
		{name: "20-series-7d-1h-merged", series: names, from: 7 * 24 * time.Hour, step: time.Hour, sWindows: 7 * 24},
		{name: "20-series-7d-raw-QueryMany", series: names, from: 7 * 24 * time.Hour, raw: true, sWindows: 7 * 1440},
	} {
		b.Run(c.name, func(b *testing.B) {
			from := end.Add(-c.from)
			opts := &tsdb.AggregateOptions{Fields: c.fields}
			checker.Reset()
			b.ResetTimer()
			for range b.N {
				switch {
				case c.raw:
					for _, err := range db.QueryMany(ctx, c.series, from, end) {
						if err != nil {
							b.Fatal(err)
						}
					}
				case c.apart:
					for _, err := range db.AggregateSeries(ctx, c.series, from, end, c.step, opts) {
						if err != nil {
							b.Fatal(err)
						}
					}
				default:
					for _, err := range db.Aggregate(ctx, c.series, from, end, c.step, opts) {
						if err != nil {
							b.Fatal(err)
						}
					}
				}
			}
			b.StopTimer()
			st := checker.Stats()
			n := float64(b.N)
			b.ReportMetric(float64(st.Requests)/n, "requests/op")
			b.ReportMetric(float64(st.ResponseBytes)/n, "bytes/op")
			b.ReportMetric(float64(st.ResponseBytes)/n/float64(c.sWindows*len(c.series)), "bytes/window")
		})
	}
}
