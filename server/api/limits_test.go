package api

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestMaxSeriesPerSelect(t *testing.T) {
	m := testStore()
	_, srv := newServer(t, m, &Options{MaxSeriesPerSelect: 2})
	at := ts(t0 + duration)
	// http_requests_total has 3 series: over the limit in every endpoint that selects.
	for _, c := range []struct {
		path   string
		params url.Values
	}{
		{"/api/v1/query", url.Values{"query": {"sum(rate(http_requests_total[5m]))"}, "time": {at}}},
		{"/api/v1/query_range", url.Values{"query": {"http_requests_total"}, "start": {ts(t0)}, "end": {at}, "step": {"60"}}},
		{"/api/v1/series", url.Values{"match[]": {"http_requests_total"}}},
	} {
		code, r, body := do(t, srv, http.MethodGet, c.path, c.params)
		require.Equal(t, http.StatusUnprocessableEntity, code, "%s: %s", c.path, body)
		require.Equal(t, "execution", r.ErrorType)
		// The engine prefixes what a Select fails with.
		require.Regexp(t, `^(expanding series: )?query processing would select too many series: selector \{__name__="http_requests_total"\} matches more than the limit of 2 series in one selection$`, r.Error)
	}
	// Two series per selector are allowed, also twice in one query.
	v := decodeVector(t, ok(t, srv, http.MethodGet, "/api/v1/query", url.Values{
		"query": {`http_requests_total{job="api"} + on(instance) http_requests_total{job="api"}`}, "time": {at}}))
	require.Len(t, v, 2)
	r := ok(t, srv, http.MethodGet, "/api/v1/series", url.Values{"match[]": {`http_requests_total{job="api"}`}})
	require.JSONEq(t, `[{"__name__":"http_requests_total","instance":"a","job":"api"},{"__name__":"http_requests_total","instance":"b","job":"api"}]`, string(r.Data))
}

// TestQueueTimeout: with every slot taken and no timeout parameter, a query waits for a
// slot no longer than Options.Timeout, then answers as the engine does for its own queue.
func TestQueueTimeout(t *testing.T) {
	m := blockingStore()
	m.stubborn = true // the first query holds its slot past its timeout, until released
	_, srv := newServer(t, m, &Options{MaxConcurrency: 1, Timeout: 50 * time.Millisecond})
	release := releaseOnCleanup(t, m)
	first := make(chan int, 1)
	go func() {
		code, _, _ := do(t, srv, http.MethodGet, "/api/v1/query", url.Values{"query": {"up"}, "time": {ts(t0)}})
		first <- code
	}()
	<-m.entered
	for _, path := range []string{"/api/v1/query", "/api/v1/query_range"} {
		code, r, body := do(t, srv, http.MethodGet, path, url.Values{"query": {"up"}, "start": {ts(t0)}, "end": {ts(t0 + 60)}, "step": {"15"}})
		require.Equal(t, http.StatusServiceUnavailable, code, "body: %s", body)
		require.Equal(t, "timeout", r.ErrorType)
		require.Equal(t, "query timed out in query queue", r.Error)
	}
	m.mu.Lock()
	require.Equal(t, 1, m.selects) // the waiting queries never reached the storage
	m.mu.Unlock()
	release()
	require.Equal(t, http.StatusServiceUnavailable, <-first) // past its timeout too
}

// TestGzipSameBytes: a gzip answer decompresses to exactly the plain one, for a success
// large enough to be compressed and for an error.
func TestGzipSameBytes(t *testing.T) {
	_, srv := newServer(t, testStore(), nil)
	get := func(u string, encoding string) (*http.Response, []byte) {
		req, err := http.NewRequest(http.MethodGet, u, nil)
		require.NoError(t, err)
		req.Header.Set("Accept-Encoding", encoding) // set by hand: the transport then does not decompress
		resp, err := srv.Client().Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp, b
	}
	for _, params := range []url.Values{
		{"query": {"http_requests_total"}, "start": {ts(t0)}, "end": {ts(t0 + duration)}, "step": {"15"}},
		{"query": {"rate(nope[5m]) +"}, "start": {ts(t0)}, "end": {ts(t0 + duration)}, "step": {"15"}},
	} {
		u := srv.URL + "/api/v1/query_range?" + params.Encode()
		plainResp, plain := get(u, "identity")
		require.Empty(t, plainResp.Header.Get("Content-Encoding"))
		gzResp, compressed := get(u, "gzip, deflate, br") // as Grafana sends it
		require.Equal(t, plainResp.StatusCode, gzResp.StatusCode)
		require.Equal(t, "Accept-Encoding", gzResp.Header.Get("Vary"))
		if len(plain) < gzipMinSize {
			require.Equal(t, plain, compressed, "a small body goes plain")
			continue
		}
		require.Equal(t, "gzip", gzResp.Header.Get("Content-Encoding"))
		zr, err := gzip.NewReader(bytes.NewReader(compressed))
		require.NoError(t, err)
		decoded, err := io.ReadAll(zr)
		require.NoError(t, err)
		require.Equal(t, plain, decoded)
		require.Less(t, len(compressed)*3, len(plain), "a matrix compresses over threefold")
		t.Logf("query_range of 3 series x 241 points: %d bytes plain, %d gzip", len(plain), len(compressed))
	}
}

// TestMetadataTimeout: Options.Timeout bounds the series and label endpoints too.
func TestMetadataTimeout(t *testing.T) {
	m := blockingStore()
	_, srv := newServer(t, m, &Options{Timeout: 30 * time.Millisecond})
	releaseOnCleanup(t, m)
	for _, path := range []string{"/api/v1/series", "/api/v1/labels", "/api/v1/label/job/values"} {
		code, r, body := do(t, srv, http.MethodGet, path, url.Values{"match[]": {"up"}})
		require.Equal(t, http.StatusServiceUnavailable, code, "%s: %s", path, body)
		require.Equal(t, "timeout", r.ErrorType)
	}
}
