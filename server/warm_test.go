package server_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/testkit/azurite"
	"github.com/seed71701133/tablets/internal/testkit/dbtest"
	"github.com/seed71701133/tablets/server"
	"github.com/seed71701133/tablets/tsdb"
)

// Run warms the raw cache up when it starts (task warm): the points of the last WarmCache
// are in the cache before any query, and the first query over them is answered from it
// (every series a hit, none read from a raw table).
func TestServerRunWarmsTheRawCache(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	ctx := context.Background()
	checker := azurite.NewChecker(nil, func(v string) { t.Errorf("Azure limit violated: %s", v) })
	svc, err := azurite.Shared(t).NewServiceClient(&aztables.ClientOptions{ClientOptions: policy.ClientOptions{Transport: checker}})
	require.NoError(t, err)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "warm" + hex.EncodeToString(b)
	cache := tsdb.NewRawCache(tsdb.DefaultRawCacheBytes)
	db, err := tsdb.Open(ctx, svc, name, &tsdb.Options{Layout: chunkedLayout, DirectWrites: true, RawCache: cache})
	require.NoError(t, err)
	dbtest.DropOnCleanup(t, name)

	now := time.Now().UTC()
	var batch []tsdb.SeriesPoints
	for i := range 10 {
		key, err := db.SeriesOf(ctx, tsdb.Labels{{Name: "__name__", Value: "warm_total"}, {Name: "i", Value: strconv.Itoa(i)}})
		require.NoError(t, err)
		var pts []tablets.Point
		for j := range 20 {
			pts = append(pts, tablets.Point{Time: now.Add(-40*time.Minute + time.Duration(j)*time.Minute).Truncate(time.Second), Value: float64(j)})
		}
		batch = append(batch, tsdb.SeriesPoints{Series: key, Points: pts})
	}
	require.NoError(t, db.WriteMany(ctx, batch))
	require.Zero(t, cache.Stats().Entries, "nothing cached before the warm-up")

	base := serveAndRun(t, db, &server.Options{FoldEvery: -1, RollupEvery: -1, CompactEvery: -1, RetainEvery: -1, WarmCache: 2 * time.Hour})
	warmRuns := func() int { return backgroundRuns(t, base, server.TaskWarm, "ok") }
	require.Eventually(t, func() bool { return warmRuns() == 1 }, time.Minute, 10*time.Millisecond, "the warm-up's run")
	require.Equal(t, 10, cache.Stats().Entries, "the 10 series warmed")
	require.Zero(t, cache.Stats().Hits)

	out := getJSON(t, base+"/api/v1/query", url.Values{"query": {"count_over_time(warm_total[1h])"}, "time": {strconv.FormatInt(now.Unix(), 10)}})
	result := out["data"].(map[string]any)["result"].([]any)
	require.Len(t, result, 10)
	for _, r := range result {
		require.Equal(t, "20", r.(map[string]any)["value"].([]any)[1], "every point of the series")
	}
	stats := cache.Stats()
	t.Logf("%+v", stats)
	require.EqualValues(t, 10, stats.Hits, "the query's series, from the warm-up's entries")
	require.Zero(t, stats.Misses, "series read from a raw table")
	require.Equal(t, 1, warmRuns(), "a warm-up once, at start")
}
