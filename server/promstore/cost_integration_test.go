package promstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/dbtest"
	"github.com/seed71701133/tablets/tsdb"
)

// The estimate against the bytes measured at the transport, over ranges from an hour to
// three days of 20 counters scraped every 15 s (integral increments, as
// BenchmarkDashboard's): raw wins the short ranges (the tier's day blocks are read whole),
// the minute tier the long ones, and a Queryable of the default options reads the path that
// costs fewer bytes, or one within a quarter of it where the two are close. The table it
// logs is docs/tiers.md's.
func TestCostChoiceMeasured(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	ctx := context.Background()
	db, _, checker := dbtest.NewDB(t, &tsdb.Options{Layout: chunkedLayout})
	const days = 3
	sets := make([]labels.Labels, 20)
	pts := make([][]tablets.Point, len(sets))
	rng := rand.New(rand.NewPCG(1, 1))
	for i := range sets {
		sets[i] = labels.FromStrings("__name__", "cost_requests_total", "job", fmt.Sprintf("job%d", i%4), "instance", fmt.Sprintf("i%d", i))
		v := 0.0
		for at := base; at.Before(base.Add(days * 24 * time.Hour)); at = at.Add(15 * time.Second) {
			v += float64(rng.IntN(100))
			pts[i] = append(pts[i], tablets.Point{Time: at, Value: v})
		}
	}
	write(t, db, sets, pts)
	end := base.Add(days * 24 * time.Hour)
	require.NoError(t, db.Rollup(ctx, base, end))

	sel := labels.MustNewMatcher(labels.MatchEqual, "__name__", "cost_requests_total")
	read := func(q *Queryable, from time.Time) (int64, int64) {
		t.Helper()
		querier, err := q.Querier(ms(from), ms(end)-1)
		require.NoError(t, err)
		defer querier.Close()
		checker.Reset()
		hints := &storage.SelectHints{Start: ms(from), End: ms(end) - 1, Step: time.Hour.Milliseconds(), Range: (5 * time.Minute).Milliseconds(), Func: "rate"}
		got := collect(t, querier.Select(ctx, false, hints, sel))
		require.Len(t, got, len(sets))
		st := checker.Stats()
		return st.Requests, st.ResponseBytes
	}
	t.Logf("%-6s %22s %22s %24s %s", "range", "raw (requests, bytes)", "tier (requests, bytes)", "estimates (raw, tier)", "default reads")
	rawWon, tierWon := 0, 0
	for _, rng := range []time.Duration{time.Hour, 2 * time.Hour, 4 * time.Hour, 8 * time.Hour, 12 * time.Hour, 24 * time.Hour, 48 * time.Hour, 72 * time.Hour} {
		from := end.Add(-rng)
		raw, err := New(db, &Options{DisableTiers: true})
		require.NoError(t, err)
		tier, err := New(db, &Options{PreferTiers: true})
		require.NoError(t, err)
		byCost, err := New(db, nil)
		require.NoError(t, err)
		rawReq, rawBytes := read(raw, from)
		tierReq, tierBytes := read(tier, from)
		_, costBytes := read(byCost, from)
		require.EqualValues(t, 1, tier.Stats().TierSelects)
		st := byCost.Stats()
		path, chosen, other := "raw", rawBytes, tierBytes
		if st.TierSelects == 1 {
			path, chosen, other = "tier", tierBytes, rawBytes
		}
		t.Logf("%-6v %10d %11d %10d %11d %12d %11d   %s", rng, rawReq, rawBytes, tierReq, tierBytes, st.EstimatedRawBytes, st.EstimatedTierBytes, path)
		require.Equal(t, chosen, costBytes, "%v: the chosen path's bytes", rng)
		require.LessOrEqual(t, float64(chosen), 1.25*float64(other), "%v: read %s", rng, path)
		if rawBytes < tierBytes {
			rawWon++
		} else {
			tierWon++
		}
	}
	require.Positive(t, rawWon, "raw is cheaper for some ranges")
	require.Positive(t, tierWon, "the tier for others")
}
