package tsdb

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/batch"
	"github.com/seed71701133/tablets/internal/testkit/clock"
	"github.com/seed71701133/tablets/internal/testkit/dbtest"
	"github.com/seed71701133/tablets/tsdb"
)

// Reads right after a burst (issue 36): a Prometheus catching up sends hours of samples at
// once, so that they sit unfolded in one staging bucket, and a remote read of some series
// then reads them one series at a time. Every series reads back exactly; the test logs what
// the reads cost. TABLETS_BURST_SERIES and TABLETS_BURST_READS set the size (default 1,000
// series, 40 reads; the case is 10,000 and 500).
func TestTSDBReadAfterBurst(t *testing.T) {
	ctx := context.Background()
	series, reads := envInt(t, "TABLETS_BURST_SERIES", 1000), envInt(t, "TABLETS_BURST_READS", 40)
	base := time.Date(2024, 5, 23, 10, 0, 0, 0, time.UTC)
	const scrapes = 2 * 60 * 4 // 2 h at 15 s
	arrival := base.Add(2*time.Hour + 30*time.Second)
	clk := clock.New(arrival) // every request arrives within the burst: one bucket
	opts := stagingOptions(clk)
	opts.StagingCache = tsdb.NewStagingCache(tsdb.DefaultStagingCacheBytes * 4)
	opts.RawCache = tsdb.NewRawCache(tsdb.DefaultRawCacheBytes * 4)
	db, _, checker := dbtest.NewDB(t, opts)

	names := make([]string, series)
	for i := range names {
		names[i] = fmt.Sprintf("burst.%05d", i)
	}
	// As remote write sends them: requests of 2,000 samples, 500 series by 4 scrapes.
	type request struct{ lo, hi, scrape int }
	var reqs []request
	for s := 0; s < scrapes; s += 4 {
		for lo := 0; lo < series; lo += 500 {
			reqs = append(reqs, request{lo, min(lo+500, series), s})
		}
	}
	value := func(i, s int) float64 { return float64(i*100000 + s*7) }
	start := time.Now()
	for _, err := range batch.Run(ctx, 8, len(reqs), func(ctx context.Context, k int) error {
		r := reqs[k]
		var w []tsdb.SeriesPoints
		for i := r.lo; i < r.hi; i++ {
			var pts []tablets.Point
			for s := r.scrape; s < r.scrape+4; s++ {
				pts = append(pts, tablets.Point{Time: base.Add(time.Duration(s) * 15 * time.Second), Value: value(i, s)})
			}
			w = append(w, tsdb.SeriesPoints{Series: names[i], Points: pts})
		}
		return db.WriteMany(ctx, w)
	}) {
		require.NoError(t, err)
	}
	st := checker.Stats()
	t.Logf("burst: %d series, %d samples in %d requests in %s", series, series*scrapes, st.Requests, time.Since(start).Round(time.Millisecond))

	q, err := db.Queryable(nil)
	require.NoError(t, err)
	checker.Reset()
	start = time.Now()
	for k := range reads {
		i := k * series / reads
		var got []tablets.Point
		for s, err := range q.Querier(base, arrival).Read(ctx, tsdb.FloatSamples, names[i]) {
			require.NoError(t, err)
			it := s.Iterator()
			for it.Next() {
				got = append(got, tablets.Point{Time: time.UnixMilli(it.At().T).UTC(), Value: it.At().F})
			}
			require.NoError(t, it.Err())
		}
		require.Len(t, got, scrapes, names[i])
		for s, p := range got {
			require.Equal(t, tablets.Point{Time: base.Add(time.Duration(s) * 15 * time.Second), Value: value(i, s)}, p, names[i])
		}
	}
	st = checker.Stats()
	elapsed := time.Since(start)
	t.Logf("%d reads of a series each, before any fold: %s (%s a read), %d requests, %d bytes read (%d a read)",
		reads, elapsed.Round(time.Millisecond), (elapsed / time.Duration(reads)).Round(time.Millisecond), st.Requests, st.ResponseBytes, st.ResponseBytes/int64(reads))
}

// envInt is the positive integer of an environment variable, or def.
func envInt(t *testing.T, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	require.NoError(t, err, name)
	require.Positive(t, n, name)
	return n
}
