package main

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/seed71701133/tablets/internal/reqlimit"
	"github.com/seed71701133/tablets/tsdb"
)

// tableMeter counts the requests sent to the account by class (ingest, query, background),
// by background task (fold, compact, rollup, flagged, retain: reqlimit.TaskOf; none for
// the other classes) and by the role of the table each names (tsdb.TableRole: staging,
// raw, tier, ...; "batch" for an entity group transaction, whose tables are in its body;
// "tables" for the table service's own): the requests, the response bytes read and the seconds from sending to
// the end of the response. It sits below the request limit, so that its seconds are the
// account's time, not the wait for a slot: where a slow read spent it.
type tableMeter struct {
	next policy.Transporter
	mu   sync.Mutex
	by   map[tableKey]*tableCounts
}

type tableKey struct{ class, task, table string }

type tableCounts struct {
	requests, received int64
	seconds            float64
}

// tableOf is the role of the table a request to the table service names: its path's last
// segment, before the keys or the parentheses of a query.
func tableOf(u *url.URL) string {
	p := u.Path
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		p = p[i+1:]
	}
	if i := strings.IndexByte(p, '('); i >= 0 {
		p = p[:i]
	}
	if p, err := url.PathUnescape(p); err == nil {
		switch p {
		case "$batch":
			return "batch"
		case "Tables":
			return "tables"
		}
		if r := tsdb.TableRole(p); r != "" {
			return r
		}
	}
	return "other"
}

// classOfRequest is the class of req's requests, and its background task.
func classOfRequest(req *http.Request) (class, task string) {
	switch ctx := req.Context(); {
	case reqlimit.IsIngest(ctx):
		return "ingest", ""
	case reqlimit.IsBackground(ctx):
		return "background", reqlimit.TaskOf(ctx)
	}
	return "query", ""
}

func (m *tableMeter) Do(req *http.Request) (*http.Response, error) {
	class, task := classOfRequest(req)
	key := tableKey{class, task, tableOf(req.URL)}
	began := time.Now()
	resp, err := m.next.Do(req)
	if err != nil || resp == nil || resp.Body == nil {
		m.add(key, 0, time.Since(began))
		return resp, err
	}
	resp.Body = &meteredBody{ReadCloser: resp.Body, done: func(n int64) { m.add(key, n, time.Since(began)) }}
	return resp, nil
}

func (m *tableMeter) add(k tableKey, received int64, took time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.by == nil {
		m.by = map[tableKey]*tableCounts{}
	}
	c := m.by[k]
	if c == nil {
		c = &tableCounts{}
		m.by[k] = c
	}
	c.requests++
	c.received += received
	c.seconds += took.Seconds()
}

// meteredBody counts a response body's bytes and calls done once, at its end or Close.
type meteredBody struct {
	io.ReadCloser
	n    int64
	once sync.Once
	done func(received int64)
}

func (b *meteredBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n += int64(n)
	if err != nil {
		b.once.Do(func() { b.done(b.n) })
	}
	return n, err
}

func (b *meteredBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(func() { b.done(b.n) })
	return err
}

var (
	tableRequestsDesc = prometheus.NewDesc("tablets_account_table_requests_total",
		"Requests to the storage account by class, background task (fold, compact, rollup, flagged, retain) and the role of the table they name (staging, raw, tier, index, histograms, catalog, answers; batch: a transaction; tables: the table service's).", []string{"class", "task", "table"}, nil)
	tableReceivedDesc = prometheus.NewDesc("tablets_account_table_received_bytes_total",
		"Response body bytes from the storage account by class, background task and table role.", []string{"class", "task", "table"}, nil)
	tableSecondsDesc = prometheus.NewDesc("tablets_account_table_seconds_total",
		"Seconds from sending requests to the storage account to the end of their responses, by class, background task and table role (after the wait for a slot).", []string{"class", "task", "table"}, nil)
)

func (m *tableMeter) Describe(ch chan<- *prometheus.Desc) {
	ch <- tableRequestsDesc
	ch <- tableReceivedDesc
	ch <- tableSecondsDesc
}

func (m *tableMeter) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, c := range m.by {
		ch <- prometheus.MustNewConstMetric(tableRequestsDesc, prometheus.CounterValue, float64(c.requests), k.class, k.task, k.table)
		ch <- prometheus.MustNewConstMetric(tableReceivedDesc, prometheus.CounterValue, float64(c.received), k.class, k.task, k.table)
		ch <- prometheus.MustNewConstMetric(tableSecondsDesc, prometheus.CounterValue, c.seconds, k.class, k.task, k.table)
	}
}
