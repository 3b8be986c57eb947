package promstore

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/testkit/dbtest"
	"github.com/seed71701133/tablets/tsdb"
)

// minuteTier is the tiers of the databases of these tests.
var minuteTier = []tsdb.Tier{{Step: time.Minute}}

// rolledUpHours makes a database of raw periods of an hour and a minute tier holding n
// counters (job "a", "b"...; the i-th growing by 15(i+1) every 15 s) from 6 to 3 hours
// before now (the hour, truncated), rolled up.
func rolledUpHours(t *testing.T, n int) (writer *tsdb.DB, svc *aztables.ServiceClient, now, from, to time.Time) {
	t.Helper()
	writer, svc, _ = dbtest.NewDB(t, &tsdb.Options{Layout: chunkedLayout, RawPeriod: time.Hour, Tiers: minuteTier})
	now = time.Now().UTC().Truncate(time.Hour)
	from, to = now.Add(-6*time.Hour), now.Add(-3*time.Hour)
	sets := make([]labels.Labels, n)
	pts := make([][]tablets.Point, n)
	for i := range sets {
		sets[i] = labels.FromStrings("__name__", "requests_total", "job", string(rune('a'+i)))
		c := 0.0
		for at := from; at.Before(to); at = at.Add(15 * time.Second) {
			pts[i] = append(pts[i], tablets.Point{Time: at, Value: c})
			c += float64(i+1) * 15
		}
	}
	write(t, writer, sets, pts)
	require.NoError(t, writer.Rollup(context.Background(), from, to))
	return writer, svc, now, from, to
}

// With MinTierStep, the minute tier answers only where Retain dropped the raw points: a
// dashboard over raw points reads them, and the same query after the raw tables are gone
// reads the tier, with about the same answer. Without MinTierStep, a Select the estimate
// finds cheaper raw also reads the tier once the raw points are gone.
func TestTierWhereRawIsGone(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	ctx := context.Background()
	writer, svc, now, from, to := rolledUpHours(t, 2)
	db, err := tsdb.Open(ctx, svc, writer.Name(), &tsdb.Options{Layout: chunkedLayout, RawPeriod: time.Hour, RawRetention: 2 * time.Hour, Tiers: minuteTier})
	require.NoError(t, err)
	q, err := New(db, &Options{MinTierStep: time.Hour})
	require.NoError(t, err)
	byCost, err := New(db, &Options{MaxResolution: tsdb.AnyResolution}) // approximate answers where cheaper
	require.NoError(t, err)
	engine := promql.NewEngine(promql.EngineOpts{MaxSamples: 5e7, Timeout: time.Minute, LookbackDelta: 5 * time.Minute})
	run := func(q *Queryable) promql.Matrix {
		return rangeMatrix(t, engine, q, `sum by (job) (rate(requests_total[10m]))`, from.Add(time.Hour), to.Add(-time.Minute), time.Hour)
	}
	rawAnswer := run(q)
	require.Equal(t, Stats{RawSelects: 1, Series: 2, Samples: q.Stats().Samples}, paths(q.Stats()), "raw points present: read them")
	require.Len(t, rawAnswer, 2)
	run(byCost)
	before := byCost.Stats()
	require.Equal(t, uint64(1), before.RawSelects+before.TierSelects)

	dropped, err := db.Retain(ctx, now)
	require.NoError(t, err)
	require.NotEmpty(t, dropped)
	tierAnswer := run(q)
	require.EqualValues(t, 1, q.Stats().TierSelects, "raw points gone: the tier")
	require.EqualValues(t, 1, q.Stats().RawGoneSelects)
	require.Len(t, tierAnswer, 2)
	require.Equal(t, tierAnswer, run(byCost))
	after := byCost.Stats()
	require.Equal(t, before.TierSelects+1, after.TierSelects, "raw points gone: the tier, whatever the estimate")
	require.Equal(t, before.RawCheaperSelects, after.RawGoneSelects, "raw points gone where raw was estimated cheaper")
	for i := range rawAnswer {
		require.Equal(t, rawAnswer[i].Metric, tierAnswer[i].Metric)
		require.Equal(t, len(rawAnswer[i].Floats), len(tierAnswer[i].Floats))
		for j, p := range rawAnswer[i].Floats {
			got := tierAnswer[i].Floats[j]
			require.Equal(t, p.T, got.T)
			require.InDelta(t, p.F, got.F, math.Abs(p.F)*0.02, "job %d step %d: rate %v from raw, %v from the tier", i, j, p.F, got.F)
		}
	}
}

// Another server's Retain drops the raw points a warm server read: the warm server's next
// query finds the tables gone, learns the drop from the catalog and plans again, and reads
// the tier there, with about the raw answer (it answered nothing before: the tables' listing
// it held still had them).
func TestTierWhereAnotherServerDroppedRaw(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	ctx := context.Background()
	writer, svc, now, from, to := rolledUpHours(t, 1)
	warm, err := tsdb.Open(ctx, svc, writer.Name(), &tsdb.Options{Layout: chunkedLayout, RawPeriod: time.Hour, Tiers: minuteTier})
	require.NoError(t, err)
	q, err := New(warm, &Options{MinTierStep: time.Hour})
	require.NoError(t, err)
	engine := promql.NewEngine(promql.EngineOpts{MaxSamples: 5e7, Timeout: time.Minute, LookbackDelta: 5 * time.Minute})
	run := func() (float64, Stats) {
		before := q.Stats()
		m := rangeMatrix(t, engine, q, `sum by (job) (rate(requests_total[10m]))`, from.Add(time.Hour), to.Add(-time.Minute), time.Hour)
		after := q.Stats()
		v := math.NaN()
		if len(m) > 0 {
			v = m[0].Floats[0].F
		}
		return v, Stats{RawSelects: after.RawSelects - before.RawSelects, TierSelects: after.TierSelects - before.TierSelects,
			RawGoneSelects: after.RawGoneSelects - before.RawGoneSelects}
	}
	rawFirst, st := run()
	require.Equal(t, Stats{RawSelects: 1}, st, "raw points present: read them")

	other, err := tsdb.Open(ctx, svc, writer.Name(), &tsdb.Options{Layout: chunkedLayout, RawPeriod: time.Hour, RawRetention: 2 * time.Hour, Tiers: minuteTier})
	require.NoError(t, err)
	dropped, err := other.Retain(ctx, now)
	require.NoError(t, err)
	require.NotEmpty(t, dropped)

	tierFirst, st := run()
	require.Equal(t, Stats{RawSelects: 1, TierSelects: 1, RawGoneSelects: 1}, st, "raw tables found gone: planned again, the tier")
	require.InDelta(t, rawFirst, tierFirst, rawFirst*0.02, "the first step's rate from the tier")
	again, st := run()
	require.Equal(t, Stats{TierSelects: 1, RawGoneSelects: 1}, st, "the tier")
	require.Equal(t, tierFirst, again)
}
