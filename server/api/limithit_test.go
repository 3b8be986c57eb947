package api

import (
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// limitHits records Options.LimitHit's calls.
type limitHits struct {
	mu   sync.Mutex
	hits []string
}

func (h *limitHits) hit(limit string) {
	h.mu.Lock()
	h.hits = append(h.hits, limit)
	h.mu.Unlock()
}

func (h *limitHits) get() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.hits...)
}

func TestLimitHitSamplesAndSeries(t *testing.T) {
	hits := &limitHits{}
	_, srv := newServer(t, testStore(), &Options{MaxSamples: 100, MaxSeriesPerSelect: 2, LimitHit: hits.hit})
	at := ts(t0 + duration)
	code, r, body := do(t, srv, http.MethodGet, "/api/v1/query_range", url.Values{
		"query": {`http_requests_total{job="api"}`}, "start": {ts(t0)}, "end": {at}, "step": {"15"}})
	require.Equal(t, http.StatusUnprocessableEntity, code, "%s", body)
	require.Equal(t, "execution", r.ErrorType)
	require.Contains(t, r.Error, "query processing would load too many samples into memory")
	require.Equal(t, []string{LimitMaxSamplesPerQuery}, hits.get())

	code, _, body = do(t, srv, http.MethodGet, "/api/v1/series", url.Values{"match[]": {"http_requests_total"}})
	require.Equal(t, http.StatusUnprocessableEntity, code, "%s", body)
	require.Equal(t, []string{LimitMaxSamplesPerQuery, LimitMaxSeriesPerSelect}, hits.get())

	// Bad input hits no limit.
	code, _, _ = do(t, srv, http.MethodGet, "/api/v1/query", url.Values{"query": {"rate(up[5m]"}})
	require.Equal(t, http.StatusBadRequest, code)
	ok(t, srv, http.MethodGet, "/api/v1/query", url.Values{"query": {"up"}, "time": {at}})
	require.Len(t, hits.get(), 2)
}

// A timeout is the limit's when the limit set it, not when the request's own timeout
// parameter was shorter; a wait for a slot that times out is max_concurrent_queries.
func TestLimitHitTimeouts(t *testing.T) {
	m := blockingStore()
	hits := &limitHits{}
	_, srv := newServer(t, m, &Options{Timeout: 50 * time.Millisecond, LimitHit: hits.hit})
	releaseOnCleanup(t, m)
	code, _, body := do(t, srv, http.MethodGet, "/api/v1/series", url.Values{"match[]": {"up"}, "timeout": {"0.01"}})
	require.Equal(t, http.StatusServiceUnavailable, code, "%s", body)
	require.Empty(t, hits.get(), "the client's own timeout is no limit")
	code, _, body = do(t, srv, http.MethodGet, "/api/v1/series", url.Values{"match[]": {"up"}})
	require.Equal(t, http.StatusServiceUnavailable, code, "%s", body)
	require.Equal(t, []string{LimitQueryTimeout}, hits.get())

	m = blockingStore()
	m.stubborn = true // the first query holds its slot past its timeout, until released
	hits = &limitHits{}
	_, srv = newServer(t, m, &Options{MaxConcurrency: 1, Timeout: 50 * time.Millisecond, LimitHit: hits.hit})
	release := releaseOnCleanup(t, m)
	first := make(chan int, 1)
	go func() {
		code, _, _ := do(t, srv, http.MethodGet, "/api/v1/query", url.Values{"query": {"up"}, "time": {ts(t0)}})
		first <- code
	}()
	<-m.entered
	code, r, body := do(t, srv, http.MethodGet, "/api/v1/query_range", url.Values{"query": {"up"}, "start": {ts(t0)}, "end": {ts(t0 + 60)}, "step": {"15"}})
	require.Equal(t, http.StatusServiceUnavailable, code, "%s", body)
	require.Equal(t, "query timed out in query queue", r.Error)
	require.Equal(t, []string{LimitMaxConcurrentQueries}, hits.get())
	release()
	<-first
}
