package tsdb

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/testkit/clock"
	"github.com/seed71701133/tablets/internal/testkit/dbtest"
	"github.com/seed71701133/tablets/tsdb"
)

// A server keeps the staging table's listing and asks only for the entities written since;
// what another server deletes (a Delete that empties an entity, a Fold) shows in its next
// read, through the staging log, although no entity was written since.
func TestTSDBStagingListing(t *testing.T) {
	ctx := context.Background()
	base := time.Date(2024, 5, 23, 10, 0, 0, 0, time.UTC)
	clk := clock.New(base.Add(10 * time.Minute))
	opts := stagingOptions(clk)
	opts.StagingCache = tsdb.NewStagingCache(64 << 20)
	db, svc, checker := dbtest.NewDB(t, opts)
	other := reopen(t, svc, db.Name(), *stagingOptions(clk))

	read := func(series string) []tablets.Point {
		t.Helper()
		var out []tablets.Point
		for p, err := range db.Query(ctx, series, base, base.Add(time.Hour)) {
			require.NoError(t, err)
			out = append(out, p)
		}
		return out
	}
	p := func(sec int, v float64) tablets.Point {
		return tablets.Point{Time: base.Add(time.Duration(sec) * time.Second), Value: v}
	}
	require.NoError(t, db.Write(ctx, "a", p(0, 1), p(15, 2)))
	require.NoError(t, other.Write(ctx, "b", p(0, 3)))
	require.Equal(t, []tablets.Point{p(0, 1), p(15, 2)}, read("a"))
	require.Equal(t, []tablets.Point{p(0, 3)}, read("b"))

	// Nothing written since: the refresh lists nothing (the staging log's entity only).
	checker.Reset()
	require.Equal(t, []tablets.Point{p(0, 3)}, read("b"))
	t.Logf("a refresh: %d requests, %d bytes", checker.Stats().Requests, checker.Stats().ResponseBytes)

	// Another server's write shows.
	require.NoError(t, other.Write(ctx, "b", p(30, 4)))
	require.Equal(t, []tablets.Point{p(0, 3), p(30, 4)}, read("b"))

	// Another server's delete of b's first point empties that entity (it is deleted, not
	// rewritten: no entity is written): the staging log says so.
	require.NoError(t, other.Delete(ctx, "b", base, base.Add(10*time.Second)))
	require.Equal(t, []tablets.Point{p(30, 4)}, read("b"), "after another server's delete")

	// Its fold empties the staging table; a point written directly after it, at a folded
	// time, is the answer (not the folded entity's, were it still listed).
	clk.Add(time.Hour)
	_, err := other.Fold(ctx)
	require.NoError(t, err)
	var direct []tablets.Point
	for i := range 150 {
		direct = append(direct, p(i, -float64(i)))
	}
	require.NoError(t, other.Write(ctx, "a", direct...))
	got := read("a")
	require.Equal(t, direct[0], got[0], "after another server's fold and direct write")
	require.Equal(t, direct[15], got[15])
}

// Reads of one series each fetch their column of every entity of their range, until an
// entity was fetched by wholeAfter (3) reads: the next fetches it whole and keeps its
// columns as read, so that later reads of other series fetch nothing of it.
func TestTSDBStagingWholeAfterColumns(t *testing.T) {
	ctx := context.Background()
	base := time.Date(2024, 5, 23, 10, 0, 0, 0, time.UTC)
	clk := clock.New(base.Add(10 * time.Minute))
	opts := stagingOptions(clk)
	opts.StagingCache = tsdb.NewStagingCache(64 << 20)
	db, svc, checker := dbtest.NewDB(t, opts)
	// The writes are another server's (this one would have cached its own as written).
	writerOpts := *opts
	writerOpts.StagingCache = nil
	writer, err := tsdb.Open(ctx, svc, db.Name(), &writerOpts)
	require.NoError(t, err)

	// 200 series in 10 writes: 10 entities, each holding every series.
	names := make([]string, 200)
	for i := range names {
		names[i] = "s" + itoa(int64(i))
	}
	value := func(i, w int) float64 { return float64(i*100 + w) }
	for w := range 10 {
		var batch []tsdb.SeriesPoints
		for i, n := range names {
			batch = append(batch, tsdb.SeriesPoints{Series: n, Points: []tablets.Point{{Time: base.Add(time.Duration(w) * time.Minute), Value: value(i, w)}}})
		}
		require.NoError(t, writer.WriteMany(ctx, batch))
	}
	readCost := func(i int) int64 {
		t.Helper()
		checker.Reset()
		var got []tablets.Point
		for p, err := range db.Query(ctx, names[i], base, base.Add(time.Hour)) {
			require.NoError(t, err)
			got = append(got, p)
		}
		require.Len(t, got, 10)
		for w, p := range got {
			require.Equal(t, value(i, w), p.Value)
		}
		return checker.Stats().Requests
	}
	// Series of distinct columns, each read once (the first read fills nothing: it is the
	// query of every entity without a listing, see staging.Cache).
	var costs []int64
	for _, i := range []int{0, 1, 2, 3, 4, 5, 6} {
		costs = append(costs, readCost(i))
	}
	t.Logf("requests of reads of series 0 to 6: %v", costs)
	// Reads 2 to 4 fetch a column (the listing, the fetch); read 5 fetches the entities
	// whole; 6 and 7 fetch nothing but list.
	require.Equal(t, costs[1], costs[2])
	require.Equal(t, costs[1]-1, costs[5], "a read of another column after the whole fetch fetches nothing")
	require.Equal(t, costs[5], costs[6])
}

// listingGate holds, once armed, the first request of a read that is not to the staging
// table until one to the staging table arrives (or a few seconds pass), and says whether
// one did: whether the read asked for the staging listing while its first other request
// was in flight.
type listingGate struct {
	next    policy.Transporter
	staging string // the staging table's name

	mu        sync.Mutex
	armed     bool
	held      bool          // the first other request was held
	stagingIn chan struct{} // closed when a staging request arrives while armed
	overlap   bool
}

func (g *listingGate) arm() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.armed, g.held, g.overlap, g.stagingIn = true, false, false, make(chan struct{})
}

func (g *listingGate) Do(req *http.Request) (*http.Response, error) {
	g.mu.Lock()
	armed, in := g.armed, g.stagingIn
	isStaging := strings.Contains(req.URL.Path, "/"+g.staging+"(") || strings.HasSuffix(req.URL.Path, "/"+g.staging)
	hold := false
	switch {
	case !armed:
	case isStaging:
		select {
		case <-in:
		default:
			close(in)
		}
	case !g.held:
		g.held, hold = true, true
	}
	g.mu.Unlock()
	if hold {
		select {
		case <-in:
			g.mu.Lock()
			g.overlap = true
			g.mu.Unlock()
		case <-time.After(3 * time.Second):
		}
	}
	return g.next.Do(req)
}

// A Select asks for the staging listing's refresh beside its read of the series index, not
// after it: with the index's request held, the listing's request still arrives. (The two
// are one round trip of the account instead of two: the floor of a refreshed panel.)
func TestTSDBSelectListsStagingBesideIndex(t *testing.T) {
	ctx := context.Background()
	base := time.Date(2024, 5, 23, 10, 0, 0, 0, time.UTC)
	clk := clock.New(base.Add(10 * time.Minute))
	opts := stagingOptions(clk)
	opts.StagingCache = tsdb.NewStagingCache(64 << 20)
	first, _, _ := dbtest.NewDB(t, opts)
	gate := &listingGate{staging: first.Name() + "w"}
	db := reopenWith(t, first.Name(), opts, func(next policy.Transporter) policy.Transporter { gate.next = next; return gate })
	key, err := db.SeriesOf(ctx, tsdb.LabelsFromStrings(tsdb.MetricName, "up", "job", "a"))
	require.NoError(t, err)
	require.NoError(t, db.Write(ctx, key, tablets.Point{Time: base, Value: 1}))
	q, err := db.Queryable(nil)
	require.NoError(t, err)
	sel := func() int {
		n := 0
		for s, err := range q.Querier(base, base.Add(time.Hour)).Select(ctx, nil, tsdb.Matcher{Type: tsdb.MatchEqual, Name: "job", Value: "a"}) {
			require.NoError(t, err)
			samples, _ := s.Len()
			n += samples
		}
		return n
	}
	require.Equal(t, 1, sel(), "the staged point (the read fills the staging cache)")
	require.NoError(t, db.Write(ctx, key, tablets.Point{Time: base.Add(15 * time.Second), Value: 2}))
	gate.arm()
	began := time.Now()
	require.Equal(t, 2, sel(), "the point staged since")
	t.Logf("the Select took %v", time.Since(began))
	gate.mu.Lock()
	defer gate.mu.Unlock()
	require.True(t, gate.held, "a request other than the staging table's")
	require.True(t, gate.overlap, "the staging listing's request arrived while the index's was held")
}
