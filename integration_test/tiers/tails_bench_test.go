package tiers

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/testkit/azurite"
	"github.com/seed71701133/tablets/internal/testkit/clock"
	"github.com/seed71701133/tablets/internal/testkit/dbtest"
	"github.com/seed71701133/tablets/tsdb"
)

// BenchmarkTSDBRollupTails is what the maintenance loop's rollup of a quarter of an hour's
// windows costs, at the transport, for 1,000 series at a 60 s scrape: a run that writes
// tails (an op: the next quarter of the segment, up to 14), and the run that completes the
// segment and splices them into the blocks: what every run cost before tails (it read and
// rewrote every series' day block of minutes). Account time is Azurite's (Stats.Busy).
//
//	go test -run '^$' -bench TSDBRollupTails -benchtime 8x ./integration_test/tiers/
func BenchmarkTSDBRollupTails(b *testing.B) {
	const series, scrape, quarter = 1000, time.Minute, 15 * time.Minute
	ctx := context.Background()
	segment := time.Date(2024, 9, 2, 12, 0, 0, 0, time.UTC) // 4 hours of minutes from here
	clock := clock.New(segment.Add(5*time.Hour + time.Minute))
	db, _, checker := dbtest.NewDB(b, &tsdb.Options{RawPeriod: 24 * time.Hour, Layout: chunkedLayout, Now: clock.Now})
	batch := make([]tsdb.SeriesPoints, series)
	for s := range batch {
		batch[s].Series = fmt.Sprintf("requests_total{instance=\"host%04d\"}", s)
		for at := segment; at.Before(segment.Add(4 * time.Hour)); at = at.Add(scrape) {
			batch[s].Points = append(batch[s].Points, tablets.Point{Time: at, Value: float64(at.Unix()%7919 + int64(s))})
		}
	}
	if err := db.WriteMany(ctx, batch); err != nil {
		b.Fatal(err)
	}
	// The segment's first quarter: the tail at the day's block's start, none there yet.
	if err := db.Rollup(ctx, segment, segment.Add(quarter)); err != nil {
		b.Fatal(err)
	}
	report := func(s azurite.Stats, runs int, prefix string) {
		n := float64(runs)
		b.ReportMetric(float64(s.Requests)/n, prefix+"requests/op")
		b.ReportMetric(float64(s.RequestBytes)/1e3/n, prefix+"sent-KB/op")
		b.ReportMetric(float64(s.ResponseBytes)/1e3/n, prefix+"read-KB/op")
		b.ReportMetric(float64(s.Busy.Milliseconds())/n, prefix+"account-ms/op")
	}
	mark := segment.Add(quarter)
	checker.Reset()
	b.ResetTimer()
	tails := 0
	for i := 0; i < b.N && i < 14; i++ {
		// As the maintenance loop runs: the seal delay after the quarter's end.
		clock.Set(mark.Add(quarter + time.Hour + time.Second))
		if err := db.Rollup(ctx, mark, mark.Add(quarter)); err != nil {
			b.Fatal(err)
		}
		mark = mark.Add(quarter)
		tails++
	}
	b.StopTimer()
	report(checker.Stats(), tails, "tail-")
	clock.Set(segment.Add(5*time.Hour + time.Minute))
	checker.Reset()
	if err := db.Rollup(ctx, mark, segment.Add(4*time.Hour)); err != nil {
		b.Fatal(err)
	}
	report(checker.Stats(), 1, "splice-")
}
