package storetest

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
)

// LatestHistory is a series whose newest points are far from now, at fixed times: the shapes
// Latest must find within the budget anywhere (60 requests, 1 MiB for n up to 100).
type LatestHistory struct {
	Name   string
	Points []tablets.Point // oldest first
}

// LatestHistories are the fixed histories of the Latest cost tests:
//   - "day-2025": a day at 1 Hz, 2025-11-01 (a year before the issue was filed), nothing after;
//   - "daily-2024": a point a day for a year from 2024-11-01, then nothing.
func LatestHistories() []LatestHistory {
	day := oneHz(time.Date(2025, 11, 1, 0, 0, 0, 0, time.UTC), 86400)
	// Values of full precision, as measurements are: a row of them is as large as rows get.
	rng := rand.New(rand.NewPCG(2025, 11))
	for i := range day {
		day[i].Value = 20 + rng.NormFloat64()
	}
	daily := make([]tablets.Point, 365)
	for i := range daily {
		daily[i] = tablets.Point{Time: time.Date(2024, 11, 1+i, 12, 0, 0, 0, time.UTC), Value: float64(i) + 0.5}
	}
	return []LatestHistory{{"day-2025", day}, {"daily-2024", daily}}
}

// testLatestHistoryCost writes each of LatestHistories and checks Latest(1) and Latest(100)
// of it: exact, and within 60 requests and 1 MiB each.
func testLatestHistoryCost(t *testing.T, h CostHarness) {
	ctx := context.Background()
	s, usage := h.NewMeteredStore(t)
	histories := LatestHistories()
	for _, hist := range histories {
		require.NoError(t, s.Write(ctx, hist.Name, hist.Points...))
	}
	for _, hist := range histories {
		for _, n := range []int{1, 100} {
			before := usage()
			got, err := s.Latest(ctx, hist.Name, n)
			require.NoError(t, err)
			cost := usage().sub(before)
			want := slices.Clone(hist.Points[len(hist.Points)-n:])
			slices.Reverse(want)
			requirePoints(t, want, got, "Latest(%q, %d)", hist.Name, n)
			t.Logf("%s: Latest(%d) of %s: %v", h.Name(), n, hist.Name, cost)
			require.LessOrEqual(t, cost.Requests, latestAnywhere.Requests, "Latest(%d) requests, %s", n, hist.Name)
			require.LessOrEqual(t, cost.ResponseBytes, latestAnywhere.ResponseBytes, "Latest(%d) bytes, %s", n, hist.Name)
		}
	}
}
