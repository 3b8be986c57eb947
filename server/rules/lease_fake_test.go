package rules

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/rules"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets/server/remote"
)

// fakeLeaseTable is a LeaseTable in memory, behaving as the service: an ETag per write,
// a Timestamp of the write and a Date of each reply (a whole second) by the clock, which
// under synctest is the bubble's.
type fakeLeaseTable struct {
	mu       sync.Mutex
	rows     map[string]fakeRow
	n        int
	requests atomic.Int64
}

type fakeRow struct {
	body []byte
	etag string
	at   time.Time
}

func newFakeLeaseTable() *fakeLeaseTable { return &fakeLeaseTable{rows: map[string]fakeRow{}} }

func keysOf(body []byte) string {
	var k struct{ PartitionKey, RowKey string }
	_ = json.Unmarshal(body, &k)
	return k.PartitionKey + "|" + k.RowKey
}

func (f *fakeLeaseTable) Get(_ context.Context, pk, rk string) ([]byte, string, time.Time, error) {
	f.requests.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.rows[pk+"|"+rk]
	if !ok {
		return nil, "", time.Time{}, fmt.Errorf("%w: %s", ErrLeaseNotFound, rk)
	}
	body := fmt.Appendf(nil, `{"odata.etag":%q,"Timestamp":%q,`, r.etag, r.at.UTC().Format(time.RFC3339Nano))
	body = append(body, r.body[1:]...)
	return body, r.etag, time.Now().UTC().Truncate(time.Second), nil
}

func (f *fakeLeaseTable) put(body []byte) string {
	f.n++
	etag := fmt.Sprintf(`W/"%d"`, f.n)
	f.rows[keysOf(body)] = fakeRow{body: append([]byte(nil), body...), etag: etag, at: time.Now()}
	return etag
}

func (f *fakeLeaseTable) Insert(_ context.Context, body []byte) (string, error) {
	f.requests.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.rows[keysOf(body)]; ok {
		return "", fmt.Errorf("%w: exists", ErrLeaseConflict)
	}
	return f.put(body), nil
}

func (f *fakeLeaseTable) Replace(_ context.Context, body []byte, etag string) (string, error) {
	f.requests.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	if r, ok := f.rows[keysOf(body)]; !ok || r.etag != etag {
		return "", fmt.Errorf("%w: 412", ErrLeaseConflict)
	}
	return f.put(body), nil
}

// record returns the lease of the group name of file as stored.
func (f *fakeLeaseTable) record(t *testing.T, file, name string) leaseRecord {
	t.Helper()
	body, _, _, err := f.Get(context.Background(), LeasePartition, LeaseRowKey(file, name))
	require.NoError(t, err)
	r, err := decodeLease(body)
	require.NoError(t, err)
	return r
}

// errKilled is the error of every request of a server killed (or cut off).
var errKilled = errors.New("killed")

// tableView is one server's view of the table: cut, its requests fail; loseReplies > 0,
// that many writes are applied and answered with an error (a reply lost).
type tableView struct {
	t           *fakeLeaseTable
	cut         *atomic.Bool
	loseReplies atomic.Int32
}

func (v *tableView) Get(ctx context.Context, pk, rk string) ([]byte, string, time.Time, error) {
	if v.cut.Load() {
		return nil, "", time.Time{}, errKilled
	}
	return v.t.Get(ctx, pk, rk)
}

func (v *tableView) Insert(ctx context.Context, body []byte) (string, error) {
	if v.cut.Load() {
		return "", errKilled
	}
	etag, err := v.t.Insert(ctx, body)
	if err == nil && v.loseReplies.Add(-1) >= 0 {
		return "", errors.New("reply lost")
	}
	return etag, err
}

func (v *tableView) Replace(ctx context.Context, body []byte, etag string) (string, error) {
	if v.cut.Load() {
		return "", errKilled
	}
	etag, err := v.t.Replace(ctx, body, etag)
	if err == nil && v.loseReplies.Add(-1) >= 0 {
		return "", errors.New("reply lost")
	}
	return etag, err
}

// sampleWrite is a sample a server wrote.
type sampleWrite struct {
	who    string
	series string
	t      int64
	f      float64
}

// writeLog records the samples every server writes into one store.
type writeLog struct {
	mu     sync.Mutex
	writes []sampleWrite
}

func (l *writeLog) of(metric string) []sampleWrite {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []sampleWrite
	for _, w := range l.writes {
		if w.series == metric {
			out = append(out, w)
		}
	}
	return out
}

// loggedWriter is a server's Writer into the shared store, logging what it writes; cut, it
// fails.
type loggedWriter struct {
	who   string
	store *memStore
	log   *writeLog
	cut   *atomic.Bool
}

func (w *loggedWriter) WriteTimeSeries(ctx context.Context, tss []prompb.TimeSeries) (remote.Written, error) {
	if w.cut.Load() {
		return remote.Written{}, errKilled
	}
	w.log.mu.Lock()
	for _, ts := range tss {
		name := ""
		for _, l := range ts.Labels {
			if l.Name == labels.MetricName {
				name = l.Value
			}
		}
		for _, s := range ts.Samples {
			w.log.writes = append(w.log.writes, sampleWrite{who: w.who, series: name, t: s.Timestamp, f: s.Value})
		}
	}
	w.log.mu.Unlock()
	return w.store.WriteTimeSeries(ctx, tss)
}

// leaseServer is one server of a lease test: a manager over the shared store and table.
type leaseServer struct {
	name string
	m    *Manager
	view *tableView
	am   *fakeAlertmanager
	reg  *prometheus.Registry
	cut  atomic.Bool // everything fails: writes, notifications, the lease table
	// tableCut: only the lease table fails (a holder that reaches the data but not its
	// lease: it must stop evaluating before another may take the group).
	tableCut atomic.Bool
	stop     context.CancelFunc
	done     chan error
	ended    bool
}

func newLeaseServer(t *testing.T, name string, store *memStore, table *fakeLeaseTable, log *writeLog, min time.Duration, files ...string) *leaseServer {
	t.Helper()
	s := &leaseServer{name: name, am: &fakeAlertmanager{}, reg: prometheus.NewRegistry()}
	s.view = &tableView{t: table, cut: &s.tableCut}
	engine := promql.NewEngine(promql.EngineOpts{MaxSamples: 1e6, Timeout: time.Minute, LookbackDelta: 5 * time.Minute})
	m, err := New(&Options{
		Files:         files,
		QueryFunc:     rules.EngineQueryFunc(engine, store),
		Queryable:     store,
		Writer:        &loggedWriter{who: name, store: store, log: log, cut: &s.cut},
		ExternalURL:   "http://" + name + ":9201",
		Alertmanagers: []string{"http://am.example:9093"},
		Registerer:    s.reg,
		Lease:         &LeaseOptions{Table: s.view, Holder: name, Min: min},
	})
	require.NoError(t, err)
	m.do = func(ctx context.Context, c *http.Client, req *http.Request) (*http.Response, error) {
		if s.cut.Load() {
			return nil, errKilled
		}
		return s.am.do(ctx, c, req)
	}
	s.m = m
	return s
}

func (s *leaseServer) start(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	s.stop, s.done, s.ended = cancel, make(chan error, 1), false
	go func() { s.done <- s.m.Run(ctx) }()
	t.Cleanup(func() { s.shutdown(t) })
}

// shutdown stops the server as SIGTERM would: its leases released.
func (s *leaseServer) shutdown(t *testing.T) {
	if s.ended {
		return
	}
	s.ended = true
	s.stop()
	require.NoError(t, <-s.done)
}

// kill stops the server as SIGKILL would: from now on nothing it does reaches the account
// or Alertmanager.
func (s *leaseServer) kill(t *testing.T) {
	s.cut.Store(true)
	s.tableCut.Store(true)
	s.shutdown(t)
}

func (s *leaseServer) holds(file, name string) bool { return s.m.leases.holds(file, name) }

// metric is the value of a metric of the server without labels (or the sum over them).
func (s *leaseServer) metric(t *testing.T, name string) float64 {
	t.Helper()
	mfs, err := s.reg.Gather()
	require.NoError(t, err)
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			switch {
			case m.Gauge != nil:
				sum += m.GetGauge().GetValue()
			case m.Counter != nil:
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// holderOf returns the server holding the group's lease, failing unless exactly one does.
func holderOf(t *testing.T, file, group string, servers ...*leaseServer) *leaseServer {
	t.Helper()
	var held []*leaseServer
	for _, s := range servers {
		if s.holds(file, group) {
			held = append(held, s)
		}
	}
	require.Len(t, held, 1, "exactly one server holds the lease")
	return held[0]
}

// checkOnce checks that every timestamp of metric was written once, by one server, and
// returns the timestamps in order.
func checkOnce(t *testing.T, log *writeLog, metric string) []sampleWrite {
	t.Helper()
	ws := log.of(metric)
	seen := map[int64]string{}
	for _, w := range ws {
		require.Empty(t, seen[w.t], "%s at %v written by %s and by %s", metric, time.UnixMilli(w.t).UTC(), seen[w.t], w.who)
		seen[w.t] = w.who
	}
	slices.SortFunc(ws, func(a, b sampleWrite) int { return compareInt64(a.t, b.t) })
	return ws
}
