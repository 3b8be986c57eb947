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

// A read mark holds while nothing a read of its range answers changed, and stops holding
// at the first change of it another server makes: a staged point, a direct write, a
// delete, a retention. Changes outside the range leave it holding, and so does a fold of
// what the mark read (the fold moves it into the raw tables as a read answered it), when
// this server's listings knew the entities the fold moved; a fold of a point staged after
// the mark does not.
func TestTSDBReadMark(t *testing.T) {
	ctx := context.Background()
	base := time.Date(2024, 5, 23, 0, 0, 0, 0, time.UTC) // a raw period's start (a day)
	clk := clock.New(base.Add(47 * time.Hour))
	db, svc, checker := dbtest.NewDB(t, stagingOptions(clk))
	other := reopen(t, svc, db.Name(), *stagingOptions(clk))

	// The marked range: hours 20 to 30 (two periods). Series have points in both days.
	from, to := base.Add(20*time.Hour), base.Add(30*time.Hour)
	var pts []tablets.Point
	for m := range 2 * 24 * 60 {
		pts = append(pts, tablets.Point{Time: base.Add(time.Duration(m) * time.Minute), Value: float64(m)})
	}
	require.NoError(t, other.Write(ctx, "a", pts...))

	mark := func() tsdb.ReadMark {
		t.Helper()
		checker.Reset()
		m, err := db.ReadMark(ctx, from, to)
		require.NoError(t, err)
		st := checker.Stats()
		t.Logf("a mark: %d requests, %d bytes", st.Requests, st.ResponseBytes)
		// A listing of the entities written since (with the staging log), the raw log of
		// each of two periods; after a Fold or a Delete, a listing of them all; before the
		// listing, when the refresh before found nothing changed, the staging mark's read.
		require.LessOrEqual(t, st.Requests, int64(5))
		return m
	}
	// holds checks whether a mark taken now holds since, and returns the new mark.
	holds := func(since tsdb.ReadMark, want bool, what string) tsdb.ReadMark {
		t.Helper()
		m := mark()
		require.Equal(t, want, m.Holds(since), what)
		return m
	}
	m := mark()
	m = holds(m, true, "nothing changed")

	// Outside the range: a point staged at hour 40, a direct write at hours 35-37.
	require.NoError(t, other.Write(ctx, "a", tablets.Point{Time: base.Add(40 * time.Hour), Value: 1}))
	var outside []tablets.Point
	for i := range 150 {
		outside = append(outside, tablets.Point{Time: base.Add(35*time.Hour + time.Duration(i)*time.Second), Value: 2})
	}
	require.NoError(t, other.Write(ctx, "b", outside...))
	m = holds(m, true, "changes outside the range")

	// A point staged in the range, by another server.
	require.NoError(t, other.Write(ctx, "a", tablets.Point{Time: base.Add(25*time.Hour + time.Second), Value: -1}))
	m = holds(m, false, "a staged point in the range")
	m = holds(m, true, "again")

	// Its fold (the staging entities leave; the raw log records): what the mark read
	// stands, in the raw tables.
	clk.Add(time.Hour)
	_, err := other.Fold(ctx)
	require.NoError(t, err)
	m = holds(m, true, "the fold of what the mark read")

	// A point staged in the range after the mark, folded before the next: it changed the
	// answer, and the fold's receipt names an entity the mark did not have (which this
	// server listed, in a mark of another range: it knows what the fold moved).
	require.NoError(t, other.Write(ctx, "a", tablets.Point{Time: base.Add(25*time.Hour + 2*time.Second), Value: -2}))
	_, err = db.ReadMark(ctx, base, base.Add(time.Hour))
	require.NoError(t, err)
	clk.Add(time.Hour)
	_, err = other.Fold(ctx)
	require.NoError(t, err)
	m = holds(m, false, "a point staged and folded since the mark")
	m = holds(m, true, "again")

	// A fold a server's listings never knew the entities of: it cannot tell what moved.
	require.NoError(t, other.Write(ctx, "a", tablets.Point{Time: base.Add(25*time.Hour + 3*time.Second), Value: -3}))
	m = holds(m, false, "a staged point in the range")
	clk.Add(time.Hour)
	_, err = other.Fold(ctx)
	require.NoError(t, err)
	started := reopen(t, svc, db.Name(), *stagingOptions(clk)) // a server started after the fold
	later, err := started.ReadMark(ctx, from, to)
	require.NoError(t, err)
	require.False(t, later.Holds(m), "a fold the server's listings did not know")
	m = holds(m, true, "the fold, to the server that listed its entities")

	// A direct write into the range (150 points of a new series: a backfill).
	var backfill []tablets.Point
	for i := range 150 {
		backfill = append(backfill, tablets.Point{Time: base.Add(21*time.Hour + time.Duration(i)*time.Second), Value: 3})
	}
	require.NoError(t, other.Write(ctx, "c", backfill...))
	m = holds(m, false, "a direct write")

	// A part of the range keeps its own mark: a delete in the second day leaves the first
	// day's part holding.
	firstDay := m.Sub(from, base.Add(24*time.Hour))
	require.NoError(t, other.Delete(ctx, "a", base.Add(26*time.Hour), base.Add(27*time.Hour)))
	now := mark()
	require.False(t, now.Holds(m), "a delete")
	require.True(t, now.Holds(firstDay), "the part the delete did not touch")
	require.False(t, now.Holds(m.Sub(base.Add(24*time.Hour), to)), "the part it touched")
	m = now

	// A retention that drops the first day.
	clk.Set(base.Add(48*time.Hour + time.Minute))
	retain := *stagingOptions(clk)
	retain.RawRetention = 24 * time.Hour
	_, err = reopen(t, svc, db.Name(), retain).Retain(ctx, clk.Now())
	require.NoError(t, err)
	holds(m, false, "a retention")
}

// A Sub of a Sub over another range has no listing to sum: it holds nothing, even
// unchanged; over its own range it is the Sub.
func TestTSDBReadMarkSubOfSub(t *testing.T) {
	ctx := context.Background()
	base := time.Date(2024, 5, 23, 0, 0, 0, 0, time.UTC)
	clk := clock.New(base.Add(47 * time.Hour))
	db, _, _ := dbtest.NewDB(t, stagingOptions(clk))
	require.NoError(t, db.Write(ctx, "a", tablets.Point{Time: base.Add(2 * time.Hour), Value: 1})) // staged
	m, err := db.ReadMark(ctx, base, base.Add(10*time.Hour))
	require.NoError(t, err)
	sub := m.Sub(base, base.Add(5*time.Hour))
	later, err := db.ReadMark(ctx, base, base.Add(10*time.Hour))
	require.NoError(t, err)
	require.True(t, later.Holds(sub))
	require.True(t, later.Holds(sub.Sub(base, base.Add(5*time.Hour))), "a Sub over its own range")
	require.False(t, later.Holds(sub.Sub(base.Add(3*time.Hour), base.Add(5*time.Hour))), "a Sub of a Sub over another range")
}

// A mark of a range over two periods reads their raw logs at once, a point read each, and
// (of a read that began, with an index cache) the index log's too: the Select after it
// reads no log. A query of the catalog's logs would be one request, but on Azurite a query
// scans the whole catalog (the label-set registry too).
func TestTSDBReadMarkLogsAtOnce(t *testing.T) {
	ctx := context.Background()
	base := time.Date(2024, 5, 23, 0, 0, 0, 0, time.UTC) // a raw period's start (a day)
	clk := clock.New(base.Add(47 * time.Hour))
	plain := *stagingOptions(clk)
	other, _, _ := dbtest.NewDB(t, &plain)
	require.NoError(t, other.Write(ctx, "a", tablets.Point{Time: base.Add(20 * time.Hour), Value: 1},
		tablets.Point{Time: base.Add(30 * time.Hour), Value: 2}))
	_, err := other.SeriesOf(ctx, tsdb.LabelsFromStrings(tsdb.MetricName, "m"))
	require.NoError(t, err)
	logs := &logReads{catalog: "/" + other.Name() + "m("}
	opts := plain
	opts.IndexCache = tsdb.NewIndexCache(1 << 20)
	db := reopenWith(t, other.Name(), &opts, func(next policy.Transporter) policy.Transporter { logs.next = next; return logs })
	from, to := base.Add(20*time.Hour), base.Add(30*time.Hour)

	logs.holdUntil(2)
	_, err = db.ReadMark(ctx, from, to)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"PartitionKey='changes',RowKey='001716422400')", "PartitionKey='changes',RowKey='001716508800')"}, logs.take(),
		"both periods' raw logs, a point read each")
	require.Zero(t, logs.alone(), "the two under way at once")

	rctx := db.BeginRead(ctx)
	logs.holdUntil(4)
	_, err = db.ReadMark(rctx, from, to)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"PartitionKey='changes',RowKey='001716422400')", "PartitionKey='changes',RowKey='001716508800')",
		"PartitionKey='changes',RowKey='i001716422400')", "PartitionKey='changes',RowKey='i001716508800')"}, logs.take(),
		"the raw and index logs of both periods")
	require.Zero(t, logs.alone(), "the four under way at once")
	for range db.Select(rctx, from, to, tsdb.Matcher{Type: tsdb.MatchEqual, Name: tsdb.MetricName, Value: "m"}) {
	}
	require.Empty(t, logs.take(), "the Select after it reads no log")
}

// logReads records the requests to the catalog that read change logs: a query's filter, a
// point read's keys. After holdUntil(n), each such read waits (10 s at most) until n of
// them are under way; alone counts those that waited in vain.
type logReads struct {
	next    policy.Transporter
	catalog string // what the paths of the catalog's requests hold
	mu      sync.Mutex
	filters []string
	hold    int           // reads to wait for (0: none)
	arrived int           // of the reads held
	all     chan struct{} // closed once hold reads arrived
	lonely  int
}

func (l *logReads) Do(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodGet && strings.Contains(req.URL.Path, l.catalog) {
		what := req.URL.Query().Get("$filter") // a query's filter, or a point read's keys
		if !strings.HasSuffix(req.URL.Path, "()") {
			what = req.URL.Path[strings.Index(req.URL.Path, l.catalog)+len(l.catalog):]
		}
		if strings.Contains(what, "'changes'") {
			l.mu.Lock()
			l.filters = append(l.filters, what)
			var all chan struct{}
			if l.hold > 0 {
				all = l.all
				if l.arrived++; l.arrived == l.hold {
					close(l.all)
				}
			}
			l.mu.Unlock()
			if all != nil {
				select {
				case <-all:
				case <-time.After(10 * time.Second):
					l.mu.Lock()
					l.lonely++
					l.mu.Unlock()
				}
			}
		}
	}
	return l.next.Do(req)
}

// holdUntil has the next n log reads wait for each other.
func (l *logReads) holdUntil(n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.hold, l.arrived, l.all, l.lonely = n, 0, make(chan struct{}), 0
}

// alone is how many reads held waited in vain for the others.
func (l *logReads) alone() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lonely
}

// take returns the filters recorded since the last take.
func (l *logReads) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.filters
	l.filters = nil
	return out
}
