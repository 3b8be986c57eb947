package storetest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
)

// Usage is what a store's client has exchanged so far, counted at the HTTP transport:
// requests as the store made them (azcore's retries of one request count once: a loaded
// machine must not fail a cost test), response bytes of every attempt.
type Usage struct {
	Requests      int64
	ResponseBytes int64
}

func (u Usage) sub(v Usage) Usage {
	return Usage{u.Requests - v.Requests, u.ResponseBytes - v.ResponseBytes}
}

func (u Usage) String() string {
	return fmt.Sprintf("%d requests, %.1f KB", u.Requests, float64(u.ResponseBytes)/1e3)
}

// CostHarness makes stores whose traffic is measured, for RunCostTests.
type CostHarness interface {
	Harness
	// NewMeteredStore returns a store on a fresh table and a function that reports what its
	// client has sent and received so far.
	NewMeteredStore(t *testing.T) (tablets.Store, func() Usage)
	// LatestBudget is the most Latest(n) may cost, for n up to 100, when the series' newest
	// point is within the last day.
	LatestBudget() Usage
}

// Costs every layout must meet wherever the newest point is.
var latestAnywhere = Usage{Requests: 60, ResponseBytes: 1 << 20}

// RunCostTests checks that reads cost about what they return and that names cost nothing
// extra, counting requests and response bytes at the transport. It needs a resolution of at
// most one second (the data is at 1 Hz).
func RunCostTests(t *testing.T, h CostHarness) {
	require.LessOrEqual(t, h.Resolution(), time.Second, "RunCostTests writes data at 1 Hz")
	t.Run(h.Name(), func(t *testing.T) {
		t.Run("QueryPageCostsAboutAQuery", func(t *testing.T) { testQueryPageCost(t, h) })
		t.Run("LatestCostsWhatItReturns", func(t *testing.T) { testLatestCost(t, h) })
		t.Run("LatestOfOldHistoryWithinBudget", func(t *testing.T) { testLatestHistoryCost(t, h) })
		t.Run("QuotesInNamesCostNothing", func(t *testing.T) { testQuoteCost(t, h) })
	})
}

// RunLatestCostTests checks only what Latest costs (RunCostTests checks it too), for stores
// whose other costs are not yet within the layouts' budgets.
func RunLatestCostTests(t *testing.T, h CostHarness) {
	require.LessOrEqual(t, h.Resolution(), time.Second, "RunLatestCostTests writes data at 1 Hz")
	t.Run(h.Name(), func(t *testing.T) {
		t.Run("LatestCostsWhatItReturns", func(t *testing.T) { testLatestCost(t, h) })
		t.Run("LatestOfOldHistoryWithinBudget", func(t *testing.T) { testLatestHistoryCost(t, h) })
	})
}

// oneHz returns n points at 1 Hz from start (aligned to the second), values i.
func oneHz(start time.Time, n int) []tablets.Point {
	start = start.Truncate(time.Second)
	pts := make([]tablets.Point, n)
	for i := range pts {
		pts[i] = tablets.Point{Time: start.Add(time.Duration(i) * time.Second), Value: float64(i)}
	}
	return pts
}

func collect(t *testing.T, seq func(yield func(tablets.Point, error) bool)) []tablets.Point {
	var out []tablets.Point
	for p, err := range seq {
		require.NoError(t, err)
		out = append(out, p)
	}
	return out
}

// QueryPage through 6 hours at 1 Hz (44 pages), limit 500: at most twice the bytes of one
// Query of them, and at most a request per page plus one for the (single) sub-query.
func testQueryPageCost(t *testing.T, h CostHarness) {
	ctx := context.Background()
	s, usage := h.NewMeteredStore(t)
	start := time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC)
	points := oneHz(start, 6*3600)
	require.NoError(t, s.Write(ctx, "cpu", points...))
	from, to := start, start.Add(6*time.Hour)

	before := usage()
	all := collect(t, s.Query(ctx, "cpu", from, to))
	query := usage().sub(before)
	requirePoints(t, points, all, "Query of the 6 hours")

	before = usage()
	var paged []tablets.Point
	pages := 0
	for token := ""; ; {
		page, err := s.QueryPage(ctx, "cpu", from, to, 500, token)
		require.NoError(t, err)
		pages++
		paged = append(paged, page.Points...)
		if token = page.Next; token == "" {
			break
		}
	}
	paging := usage().sub(before)
	requirePoints(t, points, paged, "QueryPage through the 6 hours")
	t.Logf("Query of 6 hours: %v; QueryPage (limit 500): %d pages, %v", query, pages, paging)
	require.LessOrEqual(t, paging.ResponseBytes, 2*query.ResponseBytes, "QueryPage bytes against Query bytes")
	require.LessOrEqual(t, paging.Requests, int64(pages)+1, "QueryPage: a request per page plus one per sub-query")
}

// Latest(n) for n in 1, 10, 100 with the newest point now, an hour ago, a year ago, in
// 1970, in 9999 and a day in the future: always right; within the layout's budget when the
// newest point is within the last day, and within 60 requests and 1 MB anywhere.
func testLatestCost(t *testing.T, h CostHarness) {
	ctx := context.Background()
	s, usage := h.NewMeteredStore(t)
	now := time.Now().UTC()
	const span = 7200 // two hours at 1 Hz a series
	placements := []struct {
		name  string
		start time.Time // of the first point
	}{
		{"now", now.Add(-span * time.Second)},
		{"an hour ago", now.Add(-time.Hour - span*time.Second)},
		{"a year ago", now.AddDate(-1, 0, 0).Add(-span * time.Second)},
		{"in 1970", tablets.MinTime},
		{"in 9999", tablets.MaxTime.Add(-span * time.Second)},
		{"a day in the future", now.Add(24*time.Hour - span*time.Second)},
	}
	data := map[string][]tablets.Point{}
	for _, p := range placements {
		data[p.name] = oneHz(p.start.Add(time.Second), span)
		require.NoError(t, s.Write(ctx, p.name, data[p.name]...))
	}
	budget := h.LatestBudget()
	for _, p := range placements {
		for _, n := range []int{1, 10, 100} {
			before := usage()
			got, err := s.Latest(ctx, p.name, n)
			require.NoError(t, err)
			cost := usage().sub(before)
			want := slices.Clone(data[p.name][span-n:])
			slices.Reverse(want)
			requirePoints(t, want, got, "Latest(%q, %d)", p.name, n)
			t.Logf("%s: Latest(%d), newest point %s: %v", h.Name(), n, p.name, cost)
			limit := latestAnywhere
			if p.name == "now" || p.name == "an hour ago" { // within the last day
				limit = budget
			}
			require.LessOrEqual(t, cost.Requests, limit.Requests, "Latest(%d) requests, newest point %s", n, p.name)
			require.LessOrEqual(t, cost.ResponseBytes, limit.ResponseBytes, "Latest(%d) bytes, newest point %s", n, p.name)
		}
	}
}

// A series with a quote writes in as many requests as any other.
func testQuoteCost(t *testing.T, h CostHarness) {
	ctx := context.Background()
	s, usage := h.NewMeteredStore(t)
	start := time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC)
	pts := oneHz(start, 2*3600)
	var costs []Usage
	for _, name := range []string{"OBrien", "O'Brien", "O''Brien'"} {
		before := usage()
		require.NoError(t, s.Write(ctx, name, pts...))
		costs = append(costs, usage().sub(before))
		requirePoints(t, pts, collect(t, s.Query(ctx, name, start, start.Add(2*time.Hour))), "Query(%q)", name)
	}
	t.Logf("2 h at 1 Hz written to OBrien, O'Brien, O''Brien': %d, %d, %d requests", costs[0].Requests, costs[1].Requests, costs[2].Requests)
	require.Equal(t, costs[0].Requests, costs[1].Requests, "requests to write O'Brien")
	require.Equal(t, costs[0].Requests, costs[2].Requests, "requests to write O''Brien'")
}
