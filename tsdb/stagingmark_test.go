package tsdb

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/testkit/azurite"
)

// A warm reader's refresh that finds the staging mark as its last listing found it is
// that point read alone: no query of the staging table. Every change another process
// makes shows in the next refresh all the same, which then lists: a staged point, a late
// point written directly (the raw log), a new series (the index log), a Delete (the
// staging log), a Fold (the folds' log, then the staging log). Without the mark's write
// after a staged write, the staged point would not show.
func TestStagingMarkStandsForTheListing(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	ctx := context.Background()
	now := time.Date(2025, 3, 10, 9, 0, 0, 0, time.UTC)
	writer, svc, checker := stagingDB(t, "smark", &now)
	o := writer.opts
	o.DirectWrites = true
	direct, err := Open(ctx, svc, writer.Name(), &o)
	require.NoError(t, err)
	requests := &requestLog{next: checker}
	rsvc, err := azurite.Shared(t).NewServiceClient(&aztables.ClientOptions{ClientOptions: policy.ClientOptions{Transport: requests}})
	require.NoError(t, err)
	o = writer.opts
	o.StagingCache, o.IndexCache, o.RawCache = NewStagingCache(64<<20), NewIndexCache(64<<20), NewRawCache(64<<20)
	reader, err := Open(ctx, rsvc, writer.Name(), &o)
	require.NoError(t, err)

	a, err := writer.SeriesOf(ctx, LabelsFromStrings(MetricName, "m", "k", "a"))
	require.NoError(t, err)
	app := writer.Appender()
	for ts := now.Add(-time.Hour); ts.Before(now); ts = ts.Add(time.Minute) {
		app.AppendPoints(a, tablets.Point{Time: ts, Value: 1})
	}
	require.NoError(t, app.Commit(ctx))

	from, to := now.Add(-2*time.Hour), now.Add(time.Hour)
	q, err := reader.Queryable(nil)
	require.NoError(t, err)
	// refresh is a query's read, its requests, and whether one of them queried the staging
	// table (a listing) and one read the mark.
	read := func() (got map[string]int, listed, pointRead bool, reqs []string, err error) {
		requests.reset()
		rctx := reader.BeginRead(ctx)
		if err := reader.PrepareRead(rctx, from, to); err != nil {
			return nil, false, false, nil, err
		}
		got = map[string]int{}
		for s, err := range q.Querier(from, to).Select(rctx, nil, Matcher{Type: MatchEqual, Name: MetricName, Value: "m"}) {
			if err != nil {
				return nil, false, false, nil, err
			}
			got[s.Labels.Get("k")], _ = s.Len()
		}
		staging := "/" + reader.names.Staging()
		reqs = requests.take()
		for _, r := range reqs {
			listed = listed || strings.HasPrefix(r, "GET "+staging+"()")
			pointRead = pointRead || r == "GET "+staging+"(PartitionKey='!changes',RowKey='m')"
		}
		return got, listed, pointRead, reqs, nil
	}
	refresh := func() (got map[string]int, listed, pointRead bool, reqs []string) {
		t.Helper()
		got, listed, pointRead, reqs, err := read()
		require.NoError(t, err)
		return got, listed, pointRead, reqs
	}
	// still refreshes until the refresh is the mark's point read alone, and returns what
	// it read.
	still := func() map[string]int {
		t.Helper()
		for range 3 {
			got, listed, pointRead, reqs := refresh()
			if pointRead && !listed {
				require.Len(t, reqs, 1, "the point read alone")
				return got
			}
		}
		t.Fatal("no refresh took the listing on the staging mark's point read")
		return nil
	}
	// changed refreshes once after a change: it must list (the mark moved) and find want.
	changed := func(what string, want map[string]int) {
		t.Helper()
		got, listed, _, _ := refresh()
		require.True(t, listed, "%s: the mark moved, the refresh lists", what)
		require.Equal(t, want, got, what)
	}

	got, listed, _, _ := refresh()
	require.True(t, listed)
	require.Equal(t, map[string]int{"a": 60}, got)
	require.Equal(t, map[string]int{"a": 60}, still())
	requests.reset()
	rctx := reader.BeginRead(ctx)
	require.NoError(t, reader.PrepareRead(rctx, from, to))
	require.Equal(t, []string{"GET /" + reader.names.Staging() + "(PartitionKey='!changes',RowKey='m')"}, requests.take(),
		"a refresh that finds nothing changed: one point read")

	// Another process stages a point.
	app = writer.Appender()
	app.AppendPoints(a, tablets.Point{Time: now, Value: 5})
	require.NoError(t, app.Commit(ctx))
	changed("a staged point", map[string]int{"a": 61})
	still()

	// A late point, written directly: the raw log, its logs' mark, and the staging mark.
	require.NoError(t, direct.Write(ctx, a, tablets.Point{Time: now.Add(-90 * time.Minute), Value: 2}))
	changed("a late point", map[string]int{"a": 62})
	still()

	// A new series, written directly: the index log.
	b, err := direct.SeriesOf(ctx, LabelsFromStrings(MetricName, "m", "k", "b"))
	require.NoError(t, err)
	require.NoError(t, direct.Write(ctx, b, tablets.Point{Time: now.Add(-time.Minute), Value: 3}))
	changed("a new series", map[string]int{"a": 62, "b": 1})
	still()

	// A Delete of staged points (the staging log).
	require.NoError(t, writer.Delete(ctx, a, now.Add(-10*time.Minute), now.Add(time.Second)))
	changed("a delete", map[string]int{"a": 51, "b": 1})
	still()

	// A Fold: the points move to the raw tables, the staging entities go. The reader
	// refreshes as the Fold is about to record in the folds' log, after its raw log's
	// record and mark (twice: the second finds
	// nothing new), then as its first delete is sent: that refresh must list (the folds'
	// log moved, and the mark with it), and the one after it finds nothing new again. The
	// next after the Fold must list: the staging log moved after the deletes, and the mark
	// with it.
	staging := "/" + writer.names.Staging()
	hooked := &requestLog{next: checker}
	var pre, mid struct {
		done, listed bool
		err          error
	}
	twice := func(into *struct {
		done, listed bool
		err          error
	}) {
		into.done = true
		if _, into.listed, _, _, into.err = read(); into.err == nil {
			_, _, _, _, into.err = read()
		}
	}
	hooked.before = func(req *http.Request, body []byte) {
		path, _ := url.PathUnescape(req.URL.EscapedPath())
		switch {
		case !pre.done && strings.HasSuffix(path, staging+"(PartitionKey='~folds',RowKey='b')"): // its Record's read
			twice(&pre)
		case pre.done && !mid.done && req.Method == http.MethodPost && strings.HasSuffix(path, "/$batch") &&
			strings.Contains(string(body), "DELETE ") && strings.Contains(string(body), staging+"("):
			twice(&mid)
		}
	}
	fsvc, err := azurite.Shared(t).NewServiceClient(&aztables.ClientOptions{ClientOptions: policy.ClientOptions{Transport: hooked}})
	require.NoError(t, err)
	o = writer.opts
	folder, err := Open(ctx, fsvc, writer.Name(), &o)
	require.NoError(t, err)
	now = now.Add(time.Hour)
	rep, err := folder.Fold(ctx)
	require.NoError(t, err)
	require.NotZero(t, rep.Entities, "folded")
	require.True(t, pre.done && mid.done, "the Fold recorded in the folds' log and deleted")
	require.NoError(t, pre.err)
	require.NoError(t, mid.err)
	require.True(t, mid.listed, "the refresh after the folds' log's record lists")
	changed("a fold", map[string]int{"a": 51, "b": 1})
	require.Equal(t, map[string]int{"a": 51, "b": 1}, still())
}

// requestLog records each request it forwards, as its method and unescaped path.
type requestLog struct {
	next policy.Transporter
	// before, when set, is called with each request and its body before it is sent.
	before func(req *http.Request, body []byte)
	mu     sync.Mutex
	reqs   []string
}

func (r *requestLog) Do(req *http.Request) (*http.Response, error) {
	if r.before != nil {
		var body []byte
		if req.Body != nil {
			b, err := io.ReadAll(req.Body)
			if err != nil {
				return nil, err
			}
			body = b
			// Given back whole, for the transport below and for a retry (as itest.PeekBody
			// does: this package's tests cannot import itest, which imports tsdb).
			req.Body = io.NopCloser(bytes.NewReader(b))
			if req.GetBody != nil {
				req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
			}
		}
		r.before(req, body)
	}
	path, err := url.PathUnescape(req.URL.EscapedPath())
	if err != nil {
		path = req.URL.Path
	}
	// The account's name (Azurite's path style) is not the table's.
	if i := strings.Index(path[1:], "/"); i >= 0 {
		path = path[1+i:]
	}
	r.mu.Lock()
	r.reqs = append(r.reqs, req.Method+" "+path)
	r.mu.Unlock()
	return r.next.Do(req)
}

func (r *requestLog) reset() { r.take() }

// take returns the requests recorded since the last take, and forgets them.
func (r *requestLog) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.reqs
	r.reqs = nil
	return out
}
