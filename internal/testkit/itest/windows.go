package itest

import (
	"context"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/tsdb"
)

// RollupBase is the day the rollup tests write from (in the past, so every window is sealed).
var RollupBase = time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)

// ModelWindow is a window computed from all its points.
type ModelWindow struct {
	Start                      time.Time
	Count                      uint64
	Sum, Min, Max, First, Last float64
	FirstT, LastT              time.Time
	Values                     []float64 // sorted
}

// ModelWindows are the windows of step of the points in [from, to), by start.
func ModelWindows(pts []tablets.Point, from, to time.Time, step time.Duration) []*ModelWindow {
	byStart := map[time.Time]*ModelWindow{}
	for _, p := range pts {
		if p.Time.Before(from) || !p.Time.Before(to) {
			continue
		}
		ws := time.Unix(0, 0).UTC().Add(p.Time.Sub(time.Unix(0, 0)) / step * step)
		w := byStart[ws]
		if w == nil {
			w = &ModelWindow{Start: ws, Min: math.Inf(1), Max: math.Inf(-1)}
			byStart[ws] = w
		}
		w.Count++
		w.Sum += p.Value
		w.Min, w.Max = min(w.Min, p.Value), max(w.Max, p.Value)
		if w.Count == 1 || !p.Time.After(w.FirstT) {
			w.First, w.FirstT = p.Value, p.Time
		}
		if w.Count == 1 || !p.Time.Before(w.LastT) {
			w.Last, w.LastT = p.Value, p.Time
		}
		w.Values = append(w.Values, p.Value)
	}
	var out []*ModelWindow
	for _, w := range byStart {
		slices.Sort(w.Values)
		out = append(out, w)
	}
	slices.SortFunc(out, func(a, b *ModelWindow) int { return a.Start.Compare(b.Start) })
	return out
}

// CollectWindows is every window of seq, failing t on an error.
func CollectWindows(t *testing.T, seq func(yield func(tsdb.Window, error) bool)) []tsdb.Window {
	t.Helper()
	var out []tsdb.Window
	for w, err := range seq {
		require.NoError(t, err)
		out = append(out, w)
	}
	return out
}

// RequireWindows compares Aggregate's windows with the model: Count, Min, Max, First, Last
// exactly, Sum to float addition, quantiles within the relative accuracy.
func RequireWindows(t *testing.T, want []*ModelWindow, got []tsdb.Window, what string) {
	t.Helper()
	require.Len(t, got, len(want), what)
	for i, m := range want {
		g := got[i]
		require.True(t, m.Start.Equal(g.Start), "%s: window %d starts %v, want %v", what, i, g.Start, m.Start)
		require.Equal(t, m.Count, g.Count, "%s: window %v count", what, m.Start)
		require.Equal(t, m.Min, g.Min, "%s: window %v min", what, m.Start)
		require.Equal(t, m.Max, g.Max, "%s: window %v max", what, m.Start)
		require.Equal(t, m.First, g.First, "%s: window %v first", what, m.Start)
		require.Equal(t, m.Last, g.Last, "%s: window %v last", what, m.Start)
		require.InDelta(t, m.Sum, g.Sum, 1e-9*math.Max(1, math.Abs(m.Sum)), "%s: window %v sum", what, m.Start)
		for _, q := range []float64{0, 0.5, 0.9, 0.99, 1} {
			exact := m.Values[int(q*float64(len(m.Values)-1))]
			require.InDelta(t, exact, g.Quantile(q), 0.0100001*math.Abs(exact)+1e-12, "%s: window %v q%v", what, m.Start, q)
		}
	}
}

// ScrapeOnce writes the i-th scrape at at of the series names, one point each (series s:
// i*(s+1)+s), as one WriteMany, and appends the points to written.
func ScrapeOnce(t *testing.T, db *tsdb.DB, names []string, i int, at time.Time, written map[string][]tablets.Point) {
	t.Helper()
	batch := make([]tsdb.SeriesPoints, len(names))
	for s, name := range names {
		p := tablets.Point{Time: at, Value: float64(i*(s+1) + s)}
		batch[s] = tsdb.SeriesPoints{Series: name, Points: []tablets.Point{p}}
		written[name] = append(written[name], p)
	}
	require.NoError(t, db.WriteMany(context.Background(), batch))
}
