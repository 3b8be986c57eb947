package promstore

import (
	"context"
	"fmt"
	"math/rand/v2"

	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/advanced"
	"github.com/seed71701133/tablets/basic"
	"github.com/seed71701133/tablets/internal/testkit/dbtest"
	"github.com/seed71701133/tablets/tsdb"
)

// The estimate against the bytes measured at the transport, over ranges from an hour to
// three days of 20 counters scraped every 15 s (integral increments, as
// BenchmarkDashboard's) and of 20 gauges sampled every 2 minutes: a Queryable of the default
// options reads the path that costs fewer bytes, or one within a quarter of it where the
// two are close. Chunks and blocks are read whole (a day each): the minute tier wins for the
// counters whatever the range, raw for the sparse gauges. The table it logs is
// docs/tiers.md's.
func TestCostChoiceMeasured(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	ctx := context.Background()
	db, _, checker := dbtest.NewDB(t, &tsdb.Options{Layout: chunkedLayout})
	const days = 3
	end := base.Add(days * 24 * time.Hour)
	rng := rand.New(rand.NewPCG(1, 1))
	var sets []labels.Labels
	var pts [][]tablets.Point
	for i := range 40 {
		name, every := "cost_requests_total", 15*time.Second
		if i >= 20 {
			name, every = "cost_temperature", 2*time.Minute
		}
		sets = append(sets, labels.FromStrings("__name__", name, "job", fmt.Sprintf("job%d", i%4), "instance", fmt.Sprintf("i%d", i)))
		var ps []tablets.Point
		v := 0.0
		for at := base; at.Before(end); at = at.Add(every) {
			if i < 20 {
				v += float64(rng.IntN(100))
			} else {
				v = 20 + float64(rng.IntN(100))/10
			}
			ps = append(ps, tablets.Point{Time: at, Value: v})
		}
		pts = append(pts, ps)
	}
	write(t, db, sets, pts)
	require.NoError(t, db.Rollup(ctx, base, end))
	// As the rollup loops do: the slices the late points marked dirty are rolled up again.
	_, err := db.RollupFlagged(ctx)
	require.NoError(t, err)

	read := func(q *Queryable, metric string, from time.Time) (int64, int64) {
		t.Helper()
		querier, err := q.Querier(ms(from), ms(end)-1)
		require.NoError(t, err)
		defer querier.Close()
		checker.Reset()
		hints := &storage.SelectHints{Start: ms(from), End: ms(end) - 1, Step: time.Hour.Milliseconds(), Range: (10 * time.Minute).Milliseconds(), Func: "max_over_time"}
		got := collect(t, querier.Select(ctx, false, hints, labels.MustNewMatcher(labels.MatchEqual, "__name__", metric)))
		require.Len(t, got, 20)
		st := checker.Stats()
		return st.Requests, st.ResponseBytes
	}
	// Without the rollup loops' progress in the catalog, the estimate counts on no tier
	// window (Aggregate would read every window raw): raw.
	noProgress, err := New(db, &Options{MaxResolution: tsdb.AnyResolution})
	require.NoError(t, err)
	read(noProgress, "cost_requests_total", base)
	require.Equal(t, Stats{RawSelects: 1, RawCheaperSelects: 1, Series: 20, Samples: noProgress.Stats().Samples}, paths(noProgress.Stats()))
	require.NoError(t, db.Tasks().SetCovered(ctx, tsdb.TaskRollup, end))

	t.Logf("%-19s %-6s %22s %22s %24s %s", "series", "range", "raw (requests, bytes)", "tier (requests, bytes)", "estimates (raw, tier)", "default reads")
	rawWon, tierWon := 0, 0
	for _, metric := range []string{"cost_requests_total", "cost_temperature"} {
		for _, rng := range []time.Duration{time.Hour, 6 * time.Hour, 24 * time.Hour, 48 * time.Hour, 72 * time.Hour} {
			from := end.Add(-rng)
			raw, err := New(db, &Options{DisableTiers: true})
			require.NoError(t, err)
			tier, err := New(db, &Options{PreferTiers: true})
			require.NoError(t, err)
			byCost, err := New(db, &Options{MaxResolution: tsdb.AnyResolution}) // approximate answers where cheaper
			require.NoError(t, err)
			// The sample rate as the Queryable learns it from what it read.
			read(byCost, metric, end.Add(-time.Hour))
			rawReq, rawBytes := read(raw, metric, from)
			tierReq, tierBytes := read(tier, metric, from)
			before := byCost.Stats()
			_, costBytes := read(byCost, metric, from)
			require.EqualValues(t, 1, tier.Stats().TierSelects)
			st := byCost.Stats()
			path, chosen, other := "raw", rawBytes, tierBytes
			if st.TierSelects > before.TierSelects {
				path, chosen, other = "tier", tierBytes, rawBytes
			}
			t.Logf("%-19s %-6v %10d %11d %10d %11d %12d %11d   %s", metric, rng, rawReq, rawBytes, tierReq, tierBytes,
				st.EstimatedRawBytes-before.EstimatedRawBytes, st.EstimatedTierBytes-before.EstimatedTierBytes, path)
			// The rate it learned from what it read, raw samples or the windows' counts.
			perSecond := 1.0 / 15
			if metric == "cost_temperature" {
				perSecond = 1.0 / 120
			}
			require.InEpsilon(t, perSecond, st.SamplesPerSecond, 0.1, "%s %v: read %s", metric, rng, path)
			require.LessOrEqual(t, float64(chosen), 1.25*float64(other), "%s %v: read %s", metric, rng, path)
			require.LessOrEqual(t, float64(costBytes), 1.25*float64(min(rawBytes, tierBytes)), "%s %v: read %s", metric, rng, path)
			if rawBytes < tierBytes {
				rawWon++
			} else {
				tierWon++
			}
		}
	}
	require.Positive(t, rawWon, "raw is cheaper for some")
	require.Positive(t, tierWon, "the tier for others")
}

// The bytes a raw sample costs in a reply, by layout, as the estimate takes them: measured
// on 10 counters scraped every 15 s for 6 hours (integral increments), read whole.
func TestRawBytesPerSampleMeasured(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	for _, c := range []struct {
		name   string
		layout func(*aztables.Client) (tablets.Store, error)
		want   float64 // what tsdb's estimate takes a sample of the layout to cost (querier_cost.go)
	}{
		{"chunked", chunkedLayout, 1.5},
		{"advanced", func(c *aztables.Client) (tablets.Store, error) { return advanced.New(c, nil) }, 27},
		{"basic", func(c *aztables.Client) (tablets.Store, error) { return basic.New(c, nil) }, 150},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			db, _, checker := dbtest.NewDB(t, &tsdb.Options{Layout: c.layout, Tiers: []tsdb.Tier{}})
			rng := rand.New(rand.NewPCG(3, 4))
			sets := make([]labels.Labels, 10)
			pts := make([][]tablets.Point, len(sets))
			end := base.Add(6 * time.Hour)
			for i := range sets {
				sets[i] = labels.FromStrings("__name__", "bytes_total", "instance", fmt.Sprintf("i%d", i))
				v := 0.0
				for at := base; at.Before(end); at = at.Add(15 * time.Second) {
					v += float64(rng.IntN(100))
					pts[i] = append(pts[i], tablets.Point{Time: at, Value: v})
				}
			}
			write(t, db, sets, pts)
			q, err := New(db, &Options{DisableTiers: true})
			require.NoError(t, err)
			querier, err := q.Querier(ms(base), ms(end)-1)
			require.NoError(t, err)
			defer querier.Close()
			checker.Reset()
			got := collect(t, querier.Select(ctx, false, nil, labels.MustNewMatcher(labels.MatchEqual, "__name__", "bytes_total")))
			require.Len(t, got, len(sets))
			st := checker.Stats()
			samples := len(sets) * len(pts[0])
			perSample := float64(st.ResponseBytes) / float64(samples)
			want := c.want
			t.Logf("%s: %d samples, %d requests, %d bytes: %.2f bytes a sample (the estimate takes %.1f)", c.name, samples, st.Requests, st.ResponseBytes, perSample, want)
			require.InEpsilon(t, want, perSample, 0.35)
		})
	}
}
