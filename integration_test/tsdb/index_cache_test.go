package tsdb

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/testkit/clock"
	"github.com/seed71701133/tablets/internal/testkit/dbtest"
	"github.com/seed71701133/tablets/tsdb"
)

// A Grafana variable (the label values of job among a metric's series) and a query's
// Select read a period's label sets once: again, they read the period's index change log
// (one request), while no series was registered there since. A series another server
// registers, and an index another server's Retain drops, show in the next Select.
func TestTSDBIndexCache(t *testing.T) {
	ctx := context.Background()
	base := time.Date(2024, 5, 23, 0, 0, 0, 0, time.UTC)
	clk := clock.New(base.Add(6 * time.Hour))
	opts := stagingOptions(clk)
	opts.IndexCache = tsdb.NewIndexCache(16 << 20)
	db, svc, checker := dbtest.NewDB(t, opts)
	open := func(o tsdb.Options) *tsdb.DB { return reopen(t, svc, db.Name(), o) }
	plain := *stagingOptions(clk)
	other := open(plain)

	write := func(d *tsdb.DB, jobs, instances int, at time.Time) {
		t.Helper()
		var sets []tsdb.Labels
		for j := range jobs {
			for i := range instances {
				for _, code := range []string{"200", "404", "500"} {
					sets = append(sets, tsdb.LabelsFromStrings(tsdb.MetricName, "http_requests_total", "job", fmt.Sprintf("job%02d", j),
						"instance", fmt.Sprintf("10.0.%d.%d:9100", j, i), "code", code, "handler", "/api/v1/query_range"))
				}
			}
		}
		keys, err := d.SeriesOfMany(ctx, sets)
		require.NoError(t, err)
		var batch []tsdb.SeriesPoints
		for _, k := range keys {
			batch = append(batch, tsdb.SeriesPoints{Series: k, Points: []tablets.Point{{Time: at, Value: 1}}})
		}
		require.NoError(t, d.WriteMany(ctx, batch))
	}
	write(other, 20, 10, base.Add(time.Hour)) // 600 series
	metric := tsdb.Matcher{Type: tsdb.MatchEqual, Name: tsdb.MetricName, Value: "http_requests_total"}
	variable := func(d *tsdb.DB) []string {
		t.Helper()
		values, err := d.LabelValues(ctx, "job", base, clk.Now(), metric)
		require.NoError(t, err)
		return values
	}
	cost := func(what string) readCost {
		t.Helper()
		want := variable(open(plain))
		checker.Reset()
		got := variable(db)
		st := checker.Stats()
		require.Equal(t, want, got, what)
		t.Logf("%s: %d requests, %d bytes read", what, st.Requests, st.ResponseBytes)
		return readCost{st.Requests, st.ResponseBytes}
	}
	first := cost("the variable, first")
	require.Len(t, variable(db), 20)
	again := cost("the variable, again")
	require.LessOrEqual(t, again.requests, int64(2), "a Grafana variable: 2 requests at most")
	require.LessOrEqual(t, again.bytes, int64(20_000), "and 20 KB")
	require.Less(t, again.bytes*20, first.bytes)
	require.NotZero(t, opts.IndexCache.Stats().Hits)

	// Another server registers a new job's series: the next Select reads the index again.
	var sets []tsdb.Labels
	sets = append(sets, tsdb.LabelsFromStrings(tsdb.MetricName, "http_requests_total", "job", "new", "instance", "x:1", "code", "200", "handler", "/"))
	keys, err := other.SeriesOfMany(ctx, sets)
	require.NoError(t, err)
	require.NoError(t, other.Write(ctx, keys[0], tablets.Point{Time: base.Add(2 * time.Hour), Value: 1}))
	cost("after another server's new series")
	require.Contains(t, variable(db), "new")
	cost("after it, again")

	// Another server's Retain drops the period's index (and its raw table): no job is left.
	clk.Set(base.Add(3 * 24 * time.Hour))
	retainOpts := plain
	retainOpts.RawRetention = 24 * time.Hour
	_, err = open(retainOpts).Retain(ctx, clk.Now())
	require.NoError(t, err)
	cost("after another server's retention")
	require.Empty(t, variable(db))
}

// A rollup lists every series of its periods at each run (DB.Series). With an index cache,
// a listing is kept at the generation of the period's index log: the next reads the log
// alone (a point read), and a series another server registered since is listed again.
func TestTSDBSeriesListingCached(t *testing.T) {
	ctx := context.Background()
	base, clk, plain, other, svc := newListingDB(t)
	write := func(from, n int) {
		t.Helper()
		for i := from; i < from+n; i++ {
			k, err := other.SeriesOf(ctx, tsdb.LabelsFromStrings(tsdb.MetricName, "m", "i", fmt.Sprint(i)))
			require.NoError(t, err)
			require.NoError(t, other.Write(ctx, k, tablets.Point{Time: base.Add(time.Hour), Value: 1}))
		}
	}
	write(0, 30)
	db, index := reopenIndexCached(t, other, plain)
	want := func() []string {
		t.Helper()
		s, err := reopen(t, svc, other.Name(), plain).Series(ctx, base, clk.Now())
		require.NoError(t, err)
		return s
	}
	list := func(what string) []string {
		t.Helper()
		s, err := db.Series(ctx, base, clk.Now())
		require.NoError(t, err)
		require.Equal(t, want(), s, what)
		return s
	}
	require.Len(t, list("first"), 30)
	require.Positive(t, index.take(), "the first lists the index")
	require.Len(t, list("again"), 30)
	require.Zero(t, index.take(), "unchanged: the index log alone, from the catalog")
	write(30, 2) // another server's new series
	require.Len(t, list("after another server's registrations"), 32)
	require.Positive(t, index.take(), "the log changed: listed again")
}

// tableRequests counts the requests whose path holds table.
type tableRequests struct {
	next  policy.Transporter
	table string
	n     atomic.Int64
}

func (r *tableRequests) Do(req *http.Request) (*http.Response, error) {
	if strings.Contains(req.URL.Path, r.table) {
		r.n.Add(1)
	}
	return r.next.Do(req)
}

// take returns the count since the last take.
func (r *tableRequests) take() int64 { return r.n.Swap(0) }

// A listing of more than a quarter of the index cache is not kept (it would drop the label
// sets the queries use): 3,000 series in a cache of 1 MiB are listed again each time.
func TestTSDBSeriesListingTooLargeNotCached(t *testing.T) {
	ctx := context.Background()
	base, clk, plain, other, _ := newListingDB(t)
	sets := make([]tsdb.Labels, 3000)
	for i := range sets {
		sets[i] = tsdb.LabelsFromStrings(tsdb.MetricName, "m", "i", fmt.Sprint(i))
	}
	keys, err := other.SeriesOfMany(ctx, sets)
	require.NoError(t, err)
	var batch []tsdb.SeriesPoints
	for _, k := range keys {
		batch = append(batch, tsdb.SeriesPoints{Series: k, Points: []tablets.Point{{Time: base.Add(time.Hour), Value: 1}}})
	}
	require.NoError(t, other.WriteMany(ctx, batch))
	db, index := reopenIndexCached(t, other, plain)
	for range 2 {
		s, err := db.Series(ctx, base, clk.Now())
		require.NoError(t, err)
		require.Len(t, s, 3000)
		require.Positive(t, index.take(), "listed each time")
	}
}

// newListingDB is the database of the series-listing tests, with staging, on a clock 6
// hours past base, and its options (without an index cache).
func newListingDB(t *testing.T) (base time.Time, clk *clock.Clock, plain tsdb.Options, db *tsdb.DB, svc *aztables.ServiceClient) {
	base = time.Date(2024, 5, 23, 0, 0, 0, 0, time.UTC)
	clk = clock.New(base.Add(6 * time.Hour))
	plain = *stagingOptions(clk)
	db, svc, _ = dbtest.NewDB(t, &plain)
	return base, clk, plain, db, svc
}

// reopenIndexCached opens db's database again with plain's options and an index cache of
// 1 MiB, and counts its requests to the index table.
func reopenIndexCached(t *testing.T, db *tsdb.DB, plain tsdb.Options) (*tsdb.DB, *tableRequests) {
	index := &tableRequests{table: "/" + db.Name() + "i"}
	opts := plain
	opts.IndexCache = tsdb.NewIndexCache(1 << 20)
	return reopenWith(t, db.Name(), &opts, func(next policy.Transporter) policy.Transporter { index.next = next; return index }), index
}
