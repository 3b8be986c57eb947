package tsdb

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/testkit/clock"
	"github.com/seed71701133/tablets/tsdb"
)

// A remote read of one series, warm: Select by metric name and the series' points cost the
// index query, the staging table's and one raw data query, no listing of the tables. A second handle (another
// process) that never saw the tables pays the same for a range of one period, and sees at
// once a table the first handle created after it listed.
func TestTSDBReadCost(t *testing.T) {
	ctx := context.Background()
	day := time.Date(2024, 5, 17, 0, 0, 0, 0, time.UTC)
	clock := clock.New(day.Add(36 * time.Hour))
	opts := &tsdb.Options{DirectWrites: true, RawPeriod: 24 * time.Hour, Tiers: []tsdb.Tier{}, Now: clock.Now}
	db, svc, checker := newDB(t, opts)
	key, err := db.SeriesOf(ctx, tsdb.LabelsFromStrings(tsdb.MetricName, "up", "job", "api"))
	require.NoError(t, err)
	other, err := db.SeriesOf(ctx, tsdb.LabelsFromStrings(tsdb.MetricName, "down", "job", "api"))
	require.NoError(t, err)
	var pts []tablets.Point
	for i := range 60 {
		pts = append(pts, tablets.Point{Time: day.Add(10*time.Hour + time.Duration(i)*time.Minute), Value: float64(i)})
	}
	require.NoError(t, db.WriteMany(ctx, []tsdb.SeriesPoints{{Series: key, Points: pts}, {Series: other, Points: pts[:5]}}))

	from, to := day.Add(9*time.Hour), day.Add(12*time.Hour)
	read := func(db *tsdb.DB) (int, int) {
		var keys []string
		for s, err := range db.Select(ctx, from, to, tsdb.Matcher{Type: tsdb.MatchEqual, Name: tsdb.MetricName, Value: "up"}) {
			require.NoError(t, err)
			keys = append(keys, s.Series)
		}
		n := 0
		for _, err := range db.QueryMany(ctx, keys, from, to) {
			require.NoError(t, err)
			n++
		}
		return len(keys), n
	}
	checker.Reset()
	series, points := read(db)
	warm := checker.Stats()
	require.Equal(t, 1, series)
	require.Equal(t, len(pts), points)
	t.Logf("warm read of one series (Select by name, then its points): %d requests, %d bytes sent, %d bytes received",
		warm.Requests, warm.RequestBytes, warm.ResponseBytes)
	require.Equal(t, int64(3), warm.Requests, "the index query, the staged points and one data query")
	require.Equal(t, int64(3), warm.Queries)

	// Another process, cold: the range's one period is queried directly, index and raw.
	cold, err := tsdb.Open(ctx, svc, db.Name(), opts)
	require.NoError(t, err)
	checker.Reset()
	series, points = read(cold)
	require.Equal(t, 1, series)
	require.Equal(t, len(pts), points)
	require.Equal(t, int64(3), checker.Stats().Requests, "a cold handle, a range of one period")

	// The cold handle lists the tables for a wide range; then the first handle writes in new
	// periods. A read of one such period sees it at once (queried directly); a wide read trusts
	// the listing for a minute (the documented staleness), then lists again.
	wideFrom, wideTo := day.Add(-10*24*time.Hour), day.Add(10*24*time.Hour)
	count := func(db *tsdb.DB, from, to time.Time) int {
		n := 0
		for _, err := range db.Query(ctx, key, from, to) {
			require.NoError(t, err)
			n++
		}
		return n
	}
	require.Equal(t, len(pts), count(cold, wideFrom, wideTo))
	a := day.Add(5*24*time.Hour + time.Hour)
	require.NoError(t, db.Write(ctx, key, tablets.Point{Time: a, Value: -1}))
	require.Equal(t, 1, count(cold, a.Truncate(24*time.Hour), a.Add(time.Hour)), "a new period, read directly")
	b := day.Add(-5 * 24 * time.Hour)
	require.NoError(t, db.Write(ctx, key, tablets.Point{Time: b, Value: -2}))
	require.Equal(t, len(pts)+1, count(cold, wideFrom, wideTo), "within the minute, the wide read trusts its listing")
	clock.Add(time.Minute)
	require.Equal(t, len(pts)+2, count(cold, wideFrom, wideTo), "a minute later, listed again")
}
