package tsdb

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/testkit/clock"
	"github.com/seed71701133/tablets/tsdb"
)

// A process just started (a server restarted, another replica) writes the series the last
// one served: it reads the period's index once, and writes neither their label sets nor
// their index entries again, nor records an index change that would make every process's
// cached index reads read again. Series the index does not list are still registered and
// listed, flagged when they have histograms.
func TestTSDBRestartRegistersOnlyNewSeries(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2024, 5, 20, 12, 0, 0, 0, time.UTC)
	clock := clock.New(now)
	opts := stagingOptions(clock)
	a, svc, checker := newDB(t, opts)

	const known, fresh = 1200, 150 // 30 metrics of 40 series, then 150 more
	set := func(i int) tsdb.Labels {
		return tsdb.LabelsFromStrings(tsdb.MetricName, fmt.Sprintf("metric_%02d", i%30), "instance", fmt.Sprintf("host-%04d:9100", i), "job", "node")
	}
	var sets []tsdb.Labels
	for i := range known + fresh {
		sets = append(sets, set(i))
	}
	// write registers sets[from:to] in db and writes a point of each at at (the first 50 of
	// the range a histogram sample instead).
	write := func(db *tsdb.DB, from, to int, at time.Time) []string {
		keys, err := db.SeriesOfMany(ctx, sets[from:to])
		require.NoError(t, err)
		var points []tsdb.SeriesPoints
		var hists []tsdb.SeriesHistograms
		for i, k := range keys {
			if i < 50 {
				hists = append(hists, tsdb.SeriesHistograms{Series: k, Histograms: []tsdb.HistogramPoint{stagedHistSample(at, i, 0)}})
				continue
			}
			points = append(points, tsdb.SeriesPoints{Series: k, Points: []tablets.Point{{Time: at, Value: float64(i)}}})
		}
		require.NoError(t, db.WriteSamples(ctx, points, hists))
		return keys
	}
	first := write(a, 0, known, now.Add(-time.Minute))

	// What the same write costs the process that knows the series: its points' writes.
	checker.Reset()
	write(a, 0, known, now.Add(-50*time.Second))
	warm := checker.Stats()

	// A process just started: the same write costs a read of the index more (its first page,
	// then, as there are more than 1,000 entries, the index again in 17 ranges of keys at
	// once: a request each), no registry or index write (2,400 operations before), and no
	// change recorded.
	b, err := tsdb.Open(ctx, svc, a.Name(), opts)
	require.NoError(t, err)
	indexLog := func() string {
		return logEntity(t, svc, a.Name(), fmt.Sprintf("i%012d", now.Truncate(24*time.Hour).Unix()))
	}
	logBefore := indexLog()
	checker.Reset()
	again := write(b, 0, known, now.Add(-40*time.Second))
	restarted := checker.Stats()
	require.Equal(t, first, again)
	t.Logf("the write of %d known series: %d requests, %d transactions of %d operations by the process that knew them; %d, %d and %d just started",
		known, warm.Requests, warm.Batches, warm.BatchOperations, restarted.Requests, restarted.Batches, restarted.BatchOperations)
	require.Equal(t, warm.BatchOperations, restarted.BatchOperations, "the points' writes only")
	require.Equal(t, warm.Batches, restarted.Batches)
	require.Equal(t, warm.EntityWrites, restarted.EntityWrites)
	// Besides the index's read, a process just started reads whether the period's raw table
	// was dropped, and makes sure of its tables (requests of neither kind).
	require.Equal(t, warm.Queries+1+1+17, restarted.Queries, "one read of the period's index")
	require.Equal(t, logBefore, indexLog(), "no index change recorded")

	// Concurrent writes of a process just started share its one read of the index.
	c, err := tsdb.Open(ctx, svc, a.Name(), opts)
	require.NoError(t, err)
	checker.Reset()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			_, err := c.SeriesOfMany(ctx, sets[w*150:(w+1)*150])
			require.NoError(t, err)
		})
	}
	wg.Wait()
	shared := checker.Stats()
	require.Equal(t, int64(1+17), shared.Requests, "one read of the index, no registration")

	// New series among known ones: only they are registered and listed (histograms flagged).
	checker.Reset()
	keys := write(c, known-100, known+fresh, now.Add(-30*time.Second))
	require.Equal(t, warm.BatchOperations+fresh+(fresh+50), checker.Stats().BatchOperations,
		"the points, and the new series' label sets and index entries, the 50 known ones' flags")
	for _, k := range keys[100:] {
		require.NotContains(t, first, k)
	}
	require.NotEqual(t, logBefore, indexLog(), "the new series' listing is recorded")
	var found []string
	hist := map[string]bool{}
	for s, err := range b.Select(ctx, now.Add(-time.Hour), now, tsdb.Matcher{Type: tsdb.MatchEqual, Name: "job", Value: "node"}) {
		require.NoError(t, err)
		found = append(found, s.Series)
		hist[s.Series] = s.Histograms
	}
	require.Len(t, found, known+fresh, "every series, the new ones too")
	for i, k := range keys {
		require.Equal(t, i < 50, hist[k], "series %d of the last write: flagged only with histograms", i)
	}
	for i, k := range first[:50] {
		require.True(t, hist[k], "series %d: flagged by the first write", i)
	}
	require.Empty(t, checker.Violations())
}

// logEntity is the entity of a change log (RowKey key of the catalog's "changes" partition)
// as stored, or "" if there is none.
func logEntity(t *testing.T, svc *aztables.ServiceClient, db, key string) string {
	resp, err := svc.NewClient(db+"m").GetEntity(context.Background(), "changes", key, nil)
	var re *azcore.ResponseError
	if errors.As(err, &re) && re.StatusCode == http.StatusNotFound {
		return ""
	}
	require.NoError(t, err)
	return string(resp.Value)
}
