package server_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/testkit/azurite"
	"github.com/seed71701133/tablets/internal/testkit/dbtest"
	"github.com/seed71701133/tablets/server"
	"github.com/seed71701133/tablets/server/api"
	"github.com/seed71701133/tablets/tsdb"
)

// sharedDB is a database on Azurite (through the limit Checker) for the tests of results
// caches across servers: they start as many servers on it as they need (background loops
// off) and ask each the same range panel.
type sharedDB struct {
	t       *testing.T
	svc     *aztables.ServiceClient
	checker *azurite.Checker
	name    string
	now     time.Time         // the last sample's time, to the second
	keys    map[string]string // the series keys by their label k
	panel   url.Values        // the range query's parameters
}

// newSharedDB makes a database named prefix and random hex (dropped at the test's end)
// and a panel of query over its last two hours at a minute's step. Samples come with write.
func newSharedDB(t *testing.T, prefix, query string) *sharedDB {
	svc, checker := dbtest.NewService(t)
	rnd := make([]byte, 6)
	_, _ = rand.Read(rnd)
	f := &sharedDB{t: t, svc: svc, checker: checker, name: prefix + hex.EncodeToString(rnd),
		now: time.Now().Truncate(time.Second), keys: map[string]string{}}
	dbtest.DropOnCleanup(t, f.name)
	const step = 60
	end := f.now.Unix() / step * step
	f.panel = url.Values{"query": {query}, "start": {strconv.FormatInt(end-2*3600+step, 10)},
		"end": {strconv.FormatInt(end, 10)}, "step": {strconv.Itoa(step)}}
	return f
}

// open opens the database (the chunked layout) with the clock now, nil for the real one.
func (f *sharedDB) open(now func() time.Time) *tsdb.DB {
	db, err := tsdb.Open(context.Background(), f.svc, f.name, &tsdb.Options{Layout: chunkedLayout, Now: now})
	require.NoError(f.t, err)
	return db
}

// serve starts a server on a DB of its own with cache as its results cache (nil: none),
// keeping its answers in the database when keep is set; closed at the test's end.
func (f *sharedDB) serve(cache *server.ResultsCache, keep bool) *server.Server {
	s, err := server.New(f.open(nil), &server.Options{FoldEvery: -1, RollupEvery: -1, CompactEvery: -1, RetainEvery: -1,
		Query: &api.Options{ResultsCache: cache, KeepAnswers: keep}})
	require.NoError(f.t, err)
	f.t.Cleanup(func() { _ = s.Close() })
	return s
}

// write appends, through db, 100 series of metric m (label k: "a", "b", then 2 to 99),
// a sample every 15 s over the two hours before f.now, and records their keys.
func (f *sharedDB) write(db *tsdb.DB) {
	ctx := context.Background()
	app := db.Appender()
	for i := range 100 {
		k := strconv.Itoa(i)
		if i < 2 {
			k = []string{"a", "b"}[i]
		}
		key, err := db.SeriesOf(ctx, tsdb.LabelsFromStrings("__name__", "m", "k", k))
		require.NoError(f.t, err)
		f.keys[k] = key
		var pts []tablets.Point
		for ts := f.now.Add(-2 * time.Hour); !ts.After(f.now); ts = ts.Add(15 * time.Second) {
			pts = append(pts, tablets.Point{Time: ts, Value: float64(ts.Unix() % 1000)})
		}
		app.AppendPoints(key, pts...)
	}
	require.NoError(f.t, app.Commit(ctx))
}

// ask asks s the panel and returns its answer (the body of a 200) and the samples s's
// queries read for it.
func (f *sharedDB) ask(s *server.Server) (answer string, samples uint64) {
	f.t.Helper()
	before := s.Queryable().Stats().Samples
	req := httptest.NewRequest(http.MethodGet, "/api/v1/query_range?"+f.panel.Encode(), nil)
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	require.Equal(f.t, http.StatusOK, rec.Code, rec.Body.String())
	return rec.Body.String(), s.Queryable().Stats().Samples - before
}

// fresh is the answer of a server just started, without a results cache, and the samples
// it read.
func (f *sharedDB) fresh() (string, uint64) { return f.ask(f.serve(nil, false)) }
