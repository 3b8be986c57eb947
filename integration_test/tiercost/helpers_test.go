// Package tiercost measures what Aggregate reads of the rollup tiers, on Azurite, every
// request through the limit Checker: requests and response bytes, logged and asserted. It is
// the tiers' subject (integration_test/tiers) in its own test binary: its tests write up to
// a year of data and take minutes, and with the tiers' behaviour tests the package would
// come near Go's 10-minute package timeout on a loaded 2-core machine.
package tiercost

import (
	"context"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/testkit/azurite"
	"github.com/seed71701133/tablets/internal/testkit/dbtest"
	"github.com/seed71701133/tablets/tsdb"
)

func TestMain(m *testing.M) { azurite.Main(m) }

// cost is what a read cost at the transport.
type cost struct{ requests, bytes int64 }

// measure is the cost of f, counted by checker.
func measure(checker *azurite.Checker, f func()) cost {
	before := checker.Stats()
	f()
	after := checker.Stats()
	return cost{after.Requests - before.Requests, after.ResponseBytes - before.ResponseBytes}
}

// The series of the cost targets (the codec's test series are the same): a point every
// 15 s, from a seeded generator.

// counterPoints is a regular counter: it grows by rng.IntN(100) a scrape.
func counterPoints(rng *rand.Rand, from, to time.Time, every time.Duration) []tablets.Point {
	var pts []tablets.Point
	v := 0.0
	for t := from; t.Before(to); t = t.Add(every) {
		v += float64(rng.IntN(100))
		pts = append(pts, tablets.Point{Time: t, Value: v})
	}
	return pts
}

// gaugePoints is a regular gauge: 50 + 10 sin (an hour's period) + noise, 2 decimals.
func gaugePoints(rng *rand.Rand, from, to time.Time, every time.Duration) []tablets.Point {
	var pts []tablets.Point
	for t := from; t.Before(to); t = t.Add(every) {
		v := 50 + 10*math.Sin(2*math.Pi*float64(t.Unix()%3600)/3600) + rng.NormFloat64()
		pts = append(pts, tablets.Point{Time: t, Value: math.Round(v*100) / 100})
	}
	return pts
}

// memoryPoints is a narrow gauge, as a process' memory: 1e9 bytes ± 0.5%, whole bytes;
// noisy, the same ± 50%.
func memoryPoints(rng *rand.Rand, from, to time.Time, every time.Duration, spread float64) []tablets.Point {
	var pts []tablets.Point
	for t := from; t.Before(to); t = t.Add(every) {
		pts = append(pts, tablets.Point{Time: t, Value: math.Round(1e9 * (1 + spread*(2*rng.Float64()-1)))})
	}
	return pts
}

// model is a window computed from all its points.
type model struct {
	start                      time.Time
	count                      uint64
	sum, min, max, first, last float64
	firstT, lastT              time.Time
	values                     []float64
}

// modelWindows are the windows of step of pts (of several series: between equal times,
// the later in pts is First and Last) in [from, to).
func modelWindows(pts []tablets.Point, from, to time.Time, step time.Duration) []*model {
	byStart := map[time.Time]*model{}
	for _, p := range pts {
		if p.Time.Before(from) || !p.Time.Before(to) {
			continue
		}
		ws := p.Time.Truncate(step)
		w := byStart[ws]
		if w == nil {
			w = &model{start: ws, min: math.Inf(1), max: math.Inf(-1)}
			byStart[ws] = w
		}
		w.count++
		w.sum += p.Value
		w.min, w.max = min(w.min, p.Value), max(w.max, p.Value)
		if w.count == 1 || !p.Time.After(w.firstT) {
			w.first, w.firstT = p.Value, p.Time
		}
		if w.count == 1 || !p.Time.Before(w.lastT) {
			w.last, w.lastT = p.Value, p.Time
		}
		w.values = append(w.values, p.Value)
	}
	var out []*model
	for _, w := range byStart {
		slices.Sort(w.values)
		out = append(out, w)
	}
	slices.SortFunc(out, func(a, b *model) int { return a.start.Compare(b.start) })
	return out
}

// requireWindows compares windows with the model in the fields f: Count always, Min, Max,
// First, Last exactly, Sum to float addition, quantiles within 1%; the fields not asked
// for must be zero (quantiles NaN).
func requireWindows(t *testing.T, want []*model, got []tsdb.Window, f tsdb.Fields, what string) {
	t.Helper()
	require.Len(t, got, len(want), what)
	for i, m := range want {
		g := got[i]
		at := fmt.Sprintf("%s: window %v", what, m.start)
		require.True(t, m.start.Equal(g.Start), "%s starts %v", at, g.Start)
		require.Equal(t, m.count, g.Count, "%s count", at)
		field := func(bit tsdb.Fields, want, got float64, name string) {
			if f&bit == 0 {
				want = 0
			}
			require.Equal(t, want, got, "%s %s", at, name)
		}
		field(tsdb.FieldMin|tsdb.FieldQuantiles, m.min, g.Min, "min")
		field(tsdb.FieldMax|tsdb.FieldQuantiles, m.max, g.Max, "max")
		field(tsdb.FieldFirst, m.first, g.First, "first")
		field(tsdb.FieldLast, m.last, g.Last, "last")
		if f&tsdb.FieldSum != 0 {
			require.InDelta(t, m.sum, g.Sum, 1e-9*math.Max(1, math.Abs(m.sum)), "%s sum", at)
		} else {
			require.Zero(t, g.Sum, "%s sum", at)
		}
		for _, q := range []float64{0.5, 0.99} {
			if f&tsdb.FieldQuantiles == 0 {
				require.True(t, math.IsNaN(g.Quantile(q)), "%s q%v without FieldQuantiles", at, q)
				continue
			}
			exact := m.values[int(q*float64(len(m.values)-1))]
			require.InDelta(t, exact, g.Quantile(q), 0.0100001*math.Abs(exact)+1e-12, "%s q%v", at, q)
		}
	}
}

// collect gathers Aggregate's windows.
func collect(t testing.TB, seq func(func(tsdb.Window, error) bool)) []tsdb.Window {
	t.Helper()
	var out []tsdb.Window
	for w, err := range seq {
		require.NoError(t, err)
		out = append(out, w)
	}
	return out
}

// newLiveDB opens a fresh database, and a second handle on it to write with, as if the
// points arrived live: its SealDelay exceeds their age, so its writes mark no slice dirty.
// (A write of points older than the seal delay marks their slices dirty, and a reader reads
// a dirty slice raw until RollupFlagged recomputes it: the cost tests measure the tiers.)
func newLiveDB(t testing.TB, opts tsdb.Options) (db, writer *tsdb.DB, checker *azurite.Checker) {
	t.Helper()
	db, svc, checker := dbtest.NewDB(t, &opts)
	opts.SealDelay = 3 * 365 * 24 * time.Hour
	writer, err := tsdb.Open(context.Background(), svc, db.Name(), &opts)
	require.NoError(t, err)
	return db, writer, checker
}

// writeAll writes the points of each series (WriteMany, a few series a call).
func writeAll(t testing.TB, db *tsdb.DB, series map[string][]tablets.Point) {
	t.Helper()
	var batch []tsdb.SeriesPoints
	flush := func() {
		require.NoError(t, db.WriteMany(context.Background(), batch))
		batch = batch[:0]
	}
	for _, s := range slices.Sorted(maps.Keys(series)) {
		batch = append(batch, tsdb.SeriesPoints{Series: s, Points: series[s]})
		if len(batch) == 10 {
			flush()
		}
	}
	if len(batch) > 0 {
		flush()
	}
}

// pastDay is the start of the day two days ago: its windows are sealed by a Rollup now.
func pastDay() time.Time { return time.Now().UTC().Truncate(24 * time.Hour).Add(-48 * time.Hour) }
