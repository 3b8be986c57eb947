package server_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/chunked"
	"github.com/seed71701133/tablets/internal/testkit/azurite"
	"github.com/seed71701133/tablets/internal/testkit/dbtest"
	"github.com/seed71701133/tablets/internal/testkit/fault"
	"github.com/seed71701133/tablets/internal/testkit/rwgen"
	"github.com/seed71701133/tablets/server"
	"github.com/seed71701133/tablets/tsdb"
)

func chunkedLayout(c *aztables.Client) (tablets.Store, error) { return chunked.New(c, nil) }

// newServer serves a fresh chunked database on the shared Azurite, every request through the
// limit Checker and then wrap (nil: none), with no background loops.
func newServer(t testing.TB, wrap func(policy.Transporter) policy.Transporter, opts *server.Options) (*server.Server, *httptest.Server, *azurite.Checker) {
	db, _, checker := openDB(t, wrap)
	o := server.Options{FoldEvery: -1, RollupEvery: -1, CompactEvery: -1, RetainEvery: -1}
	if opts != nil {
		o = *opts
	}
	s, err := server.New(db, &o)
	require.NoError(t, err)
	hs := httptest.NewServer(s)
	t.Cleanup(func() { hs.Close(); _ = s.Close() })
	return s, hs, checker
}

// openDB opens a fresh chunked database on the shared Azurite, every request through the
// limit Checker and then wrap (nil: none), and returns it with its name.
func openDB(t testing.TB, wrap func(policy.Transporter) policy.Transporter) (*tsdb.DB, string, *azurite.Checker) {
	srv := azurite.Shared(t)
	checker := azurite.NewChecker(nil, func(v string) { t.Errorf("Azure limit violated: %s", v) })
	var transport policy.Transporter = checker
	if wrap != nil {
		transport = wrap(checker)
	}
	svc, err := srv.NewServiceClient(&aztables.ClientOptions{ClientOptions: policy.ClientOptions{
		Transport: transport, Retry: azurite.TestRetryOptions(), PerCallPolicies: []policy.Policy{runtime.NewRequestIDPolicy()}}})
	require.NoError(t, err)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "srv" + hex.EncodeToString(b)
	db, err := tsdb.Open(context.Background(), svc, name, &tsdb.Options{Layout: chunkedLayout})
	require.NoError(t, err)
	dbtest.DropOnCleanup(t, name)
	return db, name, checker
}

func getJSON(t *testing.T, u string, params url.Values) map[string]any {
	t.Helper()
	resp, err := http.Get(u + "?" + params.Encode())
	require.NoError(t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	var out map[string]any
	require.NoError(t, json.Unmarshal(body, &out), string(body))
	require.Equal(t, "success", out["status"])
	return out
}

// Samples remote-written come back through the query API, the index lists them, and
// /metrics, /-/healthy and /-/ready answer.
func TestServerEndpoints(t *testing.T) {
	s, hs, _ := newServer(t, nil, nil)
	start := time.Now().Add(-10 * time.Minute).Truncate(time.Minute)
	res, err := rwgen.Run(context.Background(), rwgen.Config{URL: hs.URL + "/api/v1/write", Series: 30, Metrics: 3,
		SamplesPerRequest: 60, Shards: 2, Interval: 15 * time.Second, Requests: 10, Start: start})
	require.NoError(t, err)
	require.Equal(t, map[int]int64{http.StatusNoContent: 20}, res.Status)
	require.EqualValues(t, 1200, res.Samples)
	require.EqualValues(t, 1200, s.WriteStats().SamplesWritten)

	// Each of the 30 series got 40 samples, a counter, 15 s apart from start.
	out := getJSON(t, hs.URL+"/api/v1/query", url.Values{"query": {"count_over_time(rwgen_metric_1[1h])"}, "time": {start.Add(20 * time.Minute).Format(time.RFC3339)}})
	result := out["data"].(map[string]any)["result"].([]any)
	require.Len(t, result, 10, "series 1, 4, 7, ... of metric 1")
	for _, r := range result {
		require.Equal(t, "40", r.(map[string]any)["value"].([]any)[1])
	}
	series := getJSON(t, hs.URL+"/api/v1/series", url.Values{"match[]": {`{job="rwgen",__name__=~"rwgen_metric_[02]"}`}, "start": {start.Add(-time.Hour).Format(time.RFC3339)}})
	require.Len(t, series["data"], 20)
	values := getJSON(t, hs.URL+"/api/v1/label/__name__/values", nil)
	require.Equal(t, []any{"rwgen_metric_0", "rwgen_metric_1", "rwgen_metric_2"}, values["data"])

	for path, want := range map[string]string{"/-/healthy": "Healthy", "/-/ready": "Ready",
		"/metrics": "tablets_remote_write_samples_written_total 1200"} {
		resp, err := http.Get(hs.URL + path)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, path)
		require.Contains(t, string(body), want, path)
	}
	resp, err := http.Get(hs.URL + "/metrics")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Contains(t, string(body), `tablets_http_requests_total{code="204",handler="write"} 20`)
	require.Contains(t, string(body), `tablets_http_requests_total{code="200",handler="GET /api/v1/series"} 1`)
}

// A slow account pushes back on the sender: the samples being stored never exceed the
// limit, requests wait instead, and every sample is stored in the end.
func TestServerBoundedUnderSlowAccount(t *testing.T) {
	const limit = 1000
	s, hs, _ := newServer(t, func(next policy.Transporter) policy.Transporter {
		return fault.New(next, fault.Options{Latency: 30 * time.Millisecond})
	}, &server.Options{MaxSamplesInFlight: limit, RollupEvery: -1, CompactEvery: -1, RetainEvery: -1})
	var maxInFlight, maxWaiting atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			st := s.WriteStats()
			if st.SamplesInFlight > maxInFlight.Load() {
				maxInFlight.Store(st.SamplesInFlight)
			}
			if int64(st.RequestsWaiting) > maxWaiting.Load() {
				maxWaiting.Store(int64(st.RequestsWaiting))
			}
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	res, err := rwgen.Run(context.Background(), rwgen.Config{URL: hs.URL + "/api/v1/write", Series: 400, Metrics: 4,
		SamplesPerRequest: 400, Shards: 8, Interval: 10 * time.Second, Requests: 3, Start: time.Now().Add(-time.Hour)})
	close(stop)
	wg.Wait()
	require.NoError(t, err)
	require.Equal(t, map[int]int64{http.StatusNoContent: 24}, res.Status)
	require.LessOrEqual(t, maxInFlight.Load(), int64(limit), "samples in flight")
	require.Positive(t, maxWaiting.Load(), "8 senders of 400 samples against a limit of 1,000: some wait")
	require.EqualValues(t, 9600, s.WriteStats().SamplesWritten)
	t.Logf("at most %d samples in flight (limit %d), up to %d requests waiting", maxInFlight.Load(), limit, maxWaiting.Load())
}

// Bad input gets a 400 and sends nothing to the account.
func TestServerBadQueries(t *testing.T) {
	_, hs, checker := newServer(t, nil, nil)
	before := checker.Stats().Requests
	for _, q := range []url.Values{
		{"query": {"sum(("}},
		{"query": {`{job=""}`}},
		{"query": {`up{job=~"(unclosed"}`}},
		{"query": {"up"}, "time": {"yesterday"}},
	} {
		resp, err := http.Get(hs.URL + "/api/v1/query?" + q.Encode())
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%v: %s", q, body)
		require.True(t, strings.Contains(string(body), `"errorType":"bad_data"`), string(body))
	}
	require.Equal(t, before, checker.Stats().Requests)
}

// Run rolls up and compacts on a real account: chunks written minutes apart three hours ago
// are merged, and their hour is read from the tier in one request. The clock is fixed: each
// loop's first run covers its catch-up horizon, and later runs have nothing new to cover.
func TestServerRunRollsUpAndCompacts(t *testing.T) {
	ctx := context.Background()
	db, name, checker := openDB(t, nil)
	_, err := server.New(db, &server.Options{RollupCatchUp: -time.Hour})
	require.ErrorIs(t, err, tablets.ErrInvalidOptions)

	now := time.Now().UTC() // as the loops log it: no monotonic reading
	hour := now.Truncate(time.Hour).Add(-3 * time.Hour)
	// Written directly, a chunk a write (as before staging, or by a writer of many points).
	svc, err := azurite.Shared(t).NewServiceClient(nil)
	require.NoError(t, err)
	direct, err := tsdb.Open(ctx, svc, name, &tsdb.Options{Layout: chunkedLayout, DirectWrites: true})
	require.NoError(t, err)
	for i := range 20 { // 20 writes: 20 chunks
		require.NoError(t, direct.Write(ctx, "k", tablets.Point{Time: hour.Add(time.Duration(3*i) * time.Minute), Value: float64(i)}))
	}
	raw := rawTable(t, name, db, hour)
	require.Equal(t, 20, entityCount(t, raw))

	sealed := now.Add(-tsdb.DefaultSealDelay).Truncate(server.DefaultRollupGrain) // whole quarters of an hour
	covered := runLoopsUntil(t, db, now, map[string]time.Time{"rollup": sealed, "compact": now})
	require.Equal(t, sealed, covered["rollup"].to)
	require.Equal(t, now, covered["compact"].to)
	// The progress is in the database, to the millisecond.
	for task, c := range covered {
		stored, ok, err := db.Tasks().Covered(ctx, task)
		require.NoError(t, err)
		require.True(t, ok, task)
		require.Equal(t, c.to.Truncate(time.Millisecond), stored, task)
	}
	require.Equal(t, 1, entityCount(t, raw), "20 chunks compacted into one")
	dirty := "PartitionKey eq 'dirty'"
	page, err := svc.NewClient(name + "m").NewListEntitiesPager(&aztables.ListEntitiesOptions{Filter: &dirty}).NextPage(ctx)
	require.NoError(t, err)
	require.Empty(t, page.Entities, "the rollup cleared the dirty markers of the late writes")
	before := checker.Stats().Requests
	var w []tsdb.Window
	for win, err := range db.Aggregate(ctx, []string{"k"}, hour, hour.Add(time.Hour), time.Hour, nil) {
		require.NoError(t, err)
		w = append(w, win)
	}
	require.Len(t, w, 1)
	require.Equal(t, uint64(20), w[0].Count)
	require.Equal(t, int64(3), checker.Stats().Requests-before,
		"the hour is read from the tier the loop made (and the staging table and the dirty markers, which hold none of it)")
}

// A compaction just after midnight compacts the day before again: a fold may have written
// its last points after the compaction that crossed midnight.
func TestServerCompactsDayBeforeAfterMidnight(t *testing.T) {
	ctx := context.Background()
	db, name, _ := openDB(t, nil)
	midnight := time.Now().UTC().Truncate(24 * time.Hour)
	now := midnight.Add(30 * time.Minute)
	// Written directly, a chunk a write, as a fold writes a series' points of a day.
	svc, err := azurite.Shared(t).NewServiceClient(nil)
	require.NoError(t, err)
	direct, err := tsdb.Open(ctx, svc, name, &tsdb.Options{Layout: chunkedLayout, DirectWrites: true})
	require.NoError(t, err)
	for i := range 20 { // 20 writes into the day before: 20 chunks
		require.NoError(t, direct.Write(ctx, "k", tablets.Point{Time: midnight.Add(-10*time.Minute + time.Duration(i)*10*time.Second), Value: float64(i)}))
	}
	raw := rawTable(t, name, db, midnight.Add(-time.Minute))
	require.Equal(t, 20, entityCount(t, raw))
	// The last compaction ended at 00:25: the next covers [00:25, 00:30), and the fold
	// interval and a quarter of an hour before it.
	require.NoError(t, db.Tasks().SetCovered(ctx, tsdb.TaskCompact, now.Add(-5*time.Minute)))
	require.NoError(t, db.Tasks().SetCovered(ctx, tsdb.TaskRollup, now))
	covered := runLoopsUntil(t, db, now, map[string]time.Time{"compact": now})
	require.Equal(t, loopDone{task: "compact", from: now.Add(-5 * time.Minute), to: now}, covered["compact"])
	require.Equal(t, 1, entityCount(t, raw), "the day before compacted")
}

// While another server holds the compaction lease, this one's compaction runs count as busy
// (tablets_background_runs_total{result="busy"}) and leave the progress where it was: the
// holder covers the range and saves how far it got. Once the lease is released, the next
// run compacts, and saves its progress.
func TestServerLeavesTheCompactionToTheLeaseHolder(t *testing.T) {
	ctx := context.Background()
	db, name, _ := openDB(t, nil)
	svc, err := azurite.Shared(t).NewServiceClient(nil)
	require.NoError(t, err)
	catalog := svc.NewClient(name + "m")
	// Another process's lease, as docs/format.md has it, for an hour.
	until := strconv.FormatFloat(float64(time.Now().Add(time.Hour).UnixMilli()), 'e', -1, 64)
	_, err = catalog.UpsertEntity(ctx, []byte(`{"PartitionKey":"compact","RowKey":"lease","U":`+until+`,"H":"another server"}`), nil)
	require.NoError(t, err)
	now := time.Now().UTC().Truncate(time.Second)
	require.NoError(t, db.Tasks().SetCovered(ctx, tsdb.TaskCompact, now.Add(-5*time.Minute)))

	base := serveAndRun(t, db, &server.Options{FoldEvery: -1, RollupEvery: -1, CompactEvery: 10 * time.Millisecond, RetainEvery: -1,
		Now: func() time.Time { return now }})
	runs := func(result string) int { return backgroundRuns(t, base, "compact", result) }
	require.Eventually(t, func() bool { return runs("busy") >= 3 }, time.Minute, 10*time.Millisecond, "compaction runs finding the lease busy")
	require.Zero(t, runs("ok"))
	require.Zero(t, runs("error"))
	covered, _, err := db.Tasks().Covered(ctx, tsdb.TaskCompact)
	require.NoError(t, err)
	require.Equal(t, now.Add(-5*time.Minute), covered.UTC(), "the progress while another holds the lease")

	_, err = catalog.DeleteEntity(ctx, "compact", "lease", nil)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return runs("ok") >= 1 }, time.Minute, 10*time.Millisecond, "a compaction run once the lease is released")
	// Up to now: in one run, or in two when the range crosses midnight (compaction works
	// whole days, a slice a run).
	require.Eventually(t, func() bool {
		covered, _, err = db.Tasks().Covered(ctx, tsdb.TaskCompact)
		return err == nil && covered.UTC().Equal(now)
	}, time.Minute, 10*time.Millisecond, "the progress once the lease is released: not up to now")
}

// While another server holds the lease of the rollup of dirty slices, this one's runs of
// it count as busy and leave the markers to the holder; once the lease is released, the
// next run rolls the slice up and clears its marker. (Three servers that each rolled up
// every dirty slice after a backfill, and then sent the deletes of the markers the first
// had cleared one a request, held the account for minutes in the 3-server soak.)
func TestServerLeavesTheDirtySlicesToTheLeaseHolder(t *testing.T) {
	ctx := context.Background()
	db, name, _ := openDB(t, nil)
	svc, err := azurite.Shared(t).NewServiceClient(nil)
	require.NoError(t, err)
	catalog := svc.NewClient(name + "m")
	until := strconv.FormatFloat(float64(time.Now().Add(time.Hour).UnixMilli()), 'e', -1, 64)
	_, err = catalog.UpsertEntity(ctx, []byte(`{"PartitionKey":"flagged","RowKey":"lease","U":`+until+`,"H":"another server"}`), nil)
	require.NoError(t, err)
	// A late point, older than the seal delay: its write marks its slice dirty.
	writer, err := tsdb.Open(ctx, svc, name, &tsdb.Options{Layout: chunkedLayout, DirectWrites: true})
	require.NoError(t, err)
	require.NoError(t, writer.Write(ctx, "late", tablets.Point{Time: time.Now().Add(-2 * time.Hour).Truncate(time.Millisecond), Value: 1}))
	markers := func() int {
		filter := "PartitionKey eq 'dirty'"
		n := 0
		for p := catalog.NewListEntitiesPager(&aztables.ListEntitiesOptions{Filter: &filter}); p.More(); {
			page, err := p.NextPage(ctx)
			require.NoError(t, err)
			n += len(page.Entities)
		}
		return n
	}
	require.Equal(t, 1, markers(), "the late write's marker")
	now := time.Now().UTC().Truncate(time.Second)
	require.NoError(t, db.Tasks().SetCovered(ctx, tsdb.TaskRollup, now)) // the rollup loop has nothing to cover

	base := serveAndRun(t, db, &server.Options{FoldEvery: -1, RollupEvery: 10 * time.Millisecond, CompactEvery: -1, RetainEvery: -1,
		Now: func() time.Time { return now }})
	runs := func(result string) int { return backgroundRuns(t, base, "flagged", result) }
	require.Eventually(t, func() bool { return runs("busy") >= 3 }, time.Minute, 10*time.Millisecond, "runs finding the lease busy")
	require.Zero(t, runs("ok"))
	require.Zero(t, runs("error"))
	require.Equal(t, 1, markers(), "the marker while another holds the lease")

	_, err = catalog.DeleteEntity(ctx, "flagged", "lease", nil)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return runs("ok") >= 1 }, time.Minute, 10*time.Millisecond, "a run once the lease is released")
	require.Zero(t, markers(), "the marker once the slice is rolled up")
}

// Run folds what writes staged, on its own timer: the staging table empties into the raw
// tables, the log says what was folded, and the fold's covered-until gauge is the arrival
// time folded through.
func TestServerFolds(t *testing.T) {
	ctx := context.Background()
	db, name, _ := openDB(t, nil)
	svc, err := azurite.Shared(t).NewServiceClient(nil)
	require.NoError(t, err)
	// A writer whose clock is half an hour behind: its arrival bucket is foldable now.
	writer, err := tsdb.Open(ctx, svc, name, &tsdb.Options{Layout: chunkedLayout, Now: func() time.Time { return time.Now().Add(-30 * time.Minute) }})
	require.NoError(t, err)
	at := time.Now().UTC().Add(-2 * time.Hour).Truncate(time.Millisecond)
	var batch []tsdb.SeriesPoints
	for i := range 10 {
		batch = append(batch, tsdb.SeriesPoints{Series: "s" + strconv.Itoa(i),
			Points: []tablets.Point{{Time: at, Value: float64(i)}, {Time: at.Add(time.Second), Value: float64(-i)}}})
	}
	require.NoError(t, writer.WriteMany(ctx, batch))
	staging := svc.NewClient(name + "w")
	require.NotZero(t, entityCount(t, staging), "staged")

	folded := make(chan slog.Record, 4)
	s, err := server.New(db, &server.Options{FoldEvery: 10 * time.Millisecond, RollupEvery: -1, CompactEvery: -1, RetainEvery: -1,
		Logger: slog.New(&messageHandler{message: "folded staged points", records: folded})})
	require.NoError(t, err)
	hs := httptest.NewServer(s)
	defer hs.Close()
	runCtx, stop := context.WithCancel(ctx)
	stopped := make(chan error, 1)
	go func() { stopped <- s.Run(runCtx) }()
	var r slog.Record
	select {
	case r = <-folded:
	case <-time.After(60 * time.Second):
		t.Fatal("no fold in a minute")
	}
	stop()
	require.NoError(t, <-stopped)
	attrs := map[string]slog.Value{}
	r.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value; return true })
	require.Equal(t, int64(20), attrs["points"].Int64())
	require.Equal(t, int64(10), attrs["series"].Int64())
	through := attrs["through"].Time()
	require.Zero(t, entityCount(t, staging), "folded, then deleted")

	resp, err := http.Get(hs.URL + "/metrics")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	gauge := regexp.MustCompile(`(?m)^tablets_background_covered_until_seconds\{task="fold"\} (\S+)$`).FindSubmatch(body)
	require.NotNil(t, gauge, "%s", body)
	secs, err := strconv.ParseFloat(string(gauge[1]), 64)
	require.NoError(t, err)
	require.Equal(t, float64(through.Unix()), secs)
	require.Contains(t, string(body), `tablets_background_runs_total{result="ok",task="fold"}`)

	var got []tablets.Point
	for p, err := range db.Query(ctx, "s3", at, at.Add(time.Minute)) {
		require.NoError(t, err)
		got = append(got, p)
	}
	require.Equal(t, batch[3].Points, got)
}

// messageHandler passes on the records with a message.
type messageHandler struct {
	message string
	records chan<- slog.Record
}

func (h *messageHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *messageHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *messageHandler) WithGroup(string) slog.Handler            { return h }
func (h *messageHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.message {
		select {
		case h.records <- r.Clone():
		default:
		}
	}
	return nil
}

// A server restarted two days later starts its rollup and compaction where the last one
// stopped (their progress in the database), not at their catch-up horizons.
func TestServerRunResumes(t *testing.T) {
	ctx := context.Background()
	db, _, _ := openDB(t, nil)
	stopped := time.Now().UTC().Add(-48 * time.Hour).Truncate(time.Millisecond)
	for _, task := range []string{tsdb.TaskRollup, tsdb.TaskCompact} {
		require.NoError(t, db.Tasks().SetCovered(ctx, task, stopped))
	}
	now := time.Now().UTC()
	first := map[string]loopDone{}
	runLoopsUntil(t, db, now, map[string]time.Time{"rollup": stopped, "compact": stopped}, first)
	for _, task := range []string{"rollup", "compact"} {
		require.Equal(t, stopped, first[task].from, "%s: from the stored progress, not %v ago", task, server.DefaultCompactCatchUp)
	}
}

// runLoopsUntil runs a server's loops on db with the clock fixed at now (rollup and
// compaction every 10 ms, no fold, no retention) until each task in until has covered
// up to its time; it returns each task's last run before then. first (if given) gets each
// task's first run.
func runLoopsUntil(t *testing.T, db *tsdb.DB, now time.Time, until map[string]time.Time, first ...map[string]loopDone) map[string]loopDone {
	t.Helper()
	done := make(chan loopDone, 16)
	s, err := server.New(db, &server.Options{RollupEvery: 10 * time.Millisecond, CompactEvery: 10 * time.Millisecond, RetainEvery: -1,
		Now: func() time.Time { return now }, Logger: slog.New(&doneHandler{done: done})})
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- s.Run(runCtx) }()
	covered := map[string]loopDone{}
	deadline := time.After(60 * time.Second)
	for waiting := true; waiting; {
		select {
		case d := <-done:
			if _, seen := covered[d.task]; !seen && len(first) > 0 {
				first[0][d.task] = d
			}
			covered[d.task] = d
		case <-deadline:
			t.Fatalf("the loops covered only %v", covered)
		}
		waiting = false
		for task, to := range until {
			waiting = waiting || covered[task].to.Before(to)
		}
	}
	stop()
	require.NoError(t, <-stopped)
	return covered
}

// serveAndRun makes a server of db with opts, serves it over HTTP and runs its loops until
// the test ends (the loops stopped without an error); it returns the server's base URL.
func serveAndRun(t *testing.T, db *tsdb.DB, opts *server.Options) string {
	t.Helper()
	s, err := server.New(db, opts)
	require.NoError(t, err)
	hs := httptest.NewServer(s)
	runCtx, stop := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- s.Run(runCtx) }()
	t.Cleanup(func() {
		stop()
		require.NoError(t, <-stopped)
		hs.Close()
	})
	return hs.URL
}

// backgroundRuns is tablets_background_runs_total of task and result in the /metrics of the
// server at base (0 when absent).
func backgroundRuns(t *testing.T, base, task, result string) int {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := regexp.MustCompile(`(?m)^tablets_background_runs_total\{result="` + result + `",task="` + task + `"\} (\d+)$`).FindSubmatch(body)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// loopDone is a background loop's successful run, as its debug log says.
type loopDone struct {
	task     string
	from, to time.Time
}

// doneHandler passes on the server's "background ... done" records.
type doneHandler struct{ done chan<- loopDone }

func (h *doneHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *doneHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *doneHandler) WithGroup(string) slog.Handler            { return h }
func (h *doneHandler) Handle(_ context.Context, r slog.Record) error {
	task, ok := strings.CutSuffix(strings.TrimPrefix(r.Message, "background "), " done")
	if !ok {
		return nil
	}
	d := loopDone{task: task}
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "from":
			d.from = a.Value.Time()
		case "to":
			d.to = a.Value.Time()
		}
		return true
	})
	select {
	case h.done <- d:
	default: // the test has what it waits for: later runs cover nothing
	}
	return nil
}

// rawTable is the raw table of db (named name) holding t (docs/format.md: name, "r", the
// period's start in Unix seconds).
func rawTable(t *testing.T, name string, db *tsdb.DB, at time.Time) *aztables.Client {
	admin, err := azurite.Shared(t).NewServiceClient(nil)
	require.NoError(t, err)
	period := int64(db.Options().RawPeriod / time.Second)
	return admin.NewClient(name + "r" + strconv.FormatInt(at.Unix()/period*period, 10))
}

func entityCount(t *testing.T, client *aztables.Client) int {
	sel := "PartitionKey,RowKey"
	notLog := "PartitionKey ne '!changes' and PartitionKey ne '~folds'" // a staging table's logs' entities hold no samples
	n := 0
	for p := client.NewListEntitiesPager(&aztables.ListEntitiesOptions{Select: &sel, Filter: &notLog}); p.More(); {
		page, err := p.NextPage(context.Background())
		require.NoError(t, err)
		n += len(page.Entities)
	}
	return n
}
