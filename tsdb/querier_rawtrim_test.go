package tsdb

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
)

// The raw cache keeps of a series what its reads still ask for: after a Select of 7 hours,
// 20 minutes of refreshes of the last hour alone, and a change that grows the entry, the
// hours no read asked for since go (whole segments), and the cache's bytes with them. The
// answers stay every bit an uncached process's; a Select of the 7 hours again reads the
// table for what went.
func TestRawCacheKeepsWhatReadsAsk(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	ctx := context.Background()
	base := querierBase.Add(24 * time.Hour) // a raw period's first day
	const every = 15 * time.Second
	end := base.Add(7 * time.Hour)
	k := newKeyRangeDB(t, "tr", end, base)
	k.reads.table = k.names.RawTable(k.names.PeriodOf(base))
	keys := []string{seriesOfLabel(t, k.DB, "trim_total", "000"), seriesOfLabel(t, k.DB, "trim_total", "001")}
	write := func(from, to time.Time) {
		var all []SeriesPoints
		for j, key := range keys {
			var pts []tablets.Point
			for at := from; at.Before(to); at = at.Add(every) {
				pts = append(pts, tablets.Point{Time: at, Value: float64(j*1e6) + float64(at.Sub(base)/every)})
			}
			all = append(all, SeriesPoints{Series: key, Points: pts})
		}
		require.NoError(t, k.WriteMany(ctx, all)) // 100 points or more a series: into the raw table
	}
	write(base, end)

	db := k.open(t, true)
	q, err := db.Queryable(&QueryOptions{DisableTiers: true})
	require.NoError(t, err)
	truth := func(from, to time.Time) map[string][]string {
		tq, err := k.open(t, false).Queryable(&QueryOptions{DisableTiers: true})
		require.NoError(t, err)
		got, _, _ := k.selectMetric(t, tq, "trim_total", from, to)
		return got
	}
	got, _, reads := k.selectMetric(t, q, "trim_total", base, end)
	require.Positive(t, reads, "the first Select reads the table")
	require.Len(t, got["000"], 7*240)
	whole := db.opts.RawCache.Stats().Bytes

	// A panel of the last hour, refreshed every 30 s for two windows of reads and more.
	now := end
	for range 2*int(20*time.Minute/(30*time.Second)) + 2 {
		now = now.Add(30 * time.Second)
		k.clock.Store(now.UnixNano())
		_, _, reads := k.selectMetric(t, q, "trim_total", now.Add(-time.Hour), now)
		require.Zero(t, reads, "a refresh of the hour, from the cache")
	}
	// Half an hour more written (a change of the table), then the refresh that takes it.
	write(end, now)
	got, _, reads = k.selectMetric(t, q, "trim_total", now.Add(-time.Hour), now)
	require.Positive(t, reads, "the refresh reads what changed")
	require.Equal(t, truth(now.Add(-time.Hour), now), got, "the refresh's answer")
	trimmed := db.opts.RawCache.Stats().Bytes
	require.Less(t, trimmed, whole/2, "the cache's bytes once the hours no read asks for went (7 hours' %d)", whole)

	// The 7 hours asked for again: read from the table where they went, every sample there.
	got, _, reads = k.selectMetric(t, q, "trim_total", base, now)
	require.Positive(t, reads, "the hours that went, read again")
	require.Equal(t, truth(base, now), got, "the 7 hours' answer")
	require.Len(t, got["000"], int(now.Sub(base)/every))
}
