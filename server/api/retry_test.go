package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
)

// serveRetried answers one request of a's handler inside the test's bubble: the pauses
// between tries pass on its fake clock. It returns the status, the decoded body and how
// long the request took on that clock.
func serveRetried(t *testing.T, a *API, path string, params url.Values) (int, response, time.Duration) {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(params.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	rec := httptest.NewRecorder()
	began := time.Now()
	a.Handler().ServeHTTP(rec, req)
	took := time.Since(began)
	var r response
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &r), "%s", rec.Body)
	return rec.Code, r, took
}

// TestUnavailableAccountTriedAgain: a request whose account is unavailable is tried again
// after RetryPause, the pause doubling, within the request's one deadline, and answered
// once the account is back; other errors, and RetryPause < 0, are answered at once.
func TestUnavailableAccountTriedAgain(t *testing.T) {
	throttled := fmt.Errorf("expanding series: %w", fmt.Errorf("%w: ServerBusy", tablets.ErrThrottled))
	newAPI := func(t *testing.T, m *memStore, o *Options) (*API, *prometheus.Registry) {
		t.Helper()
		reg := prometheus.NewRegistry()
		o.Registerer = reg
		o.Now = func() time.Time { return time.Unix(t0+duration, 0) }
		a, err := New(m, o)
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, a.Close()) })
		return a, reg
	}
	retries := func(t *testing.T, reg *prometheus.Registry) float64 {
		t.Helper()
		mfs, err := reg.Gather()
		require.NoError(t, err)
		for _, mf := range mfs {
			if mf.GetName() == "tablets_query_retries_total" {
				return mf.GetMetric()[0].GetCounter().GetValue()
			}
		}
		t.Fatal("no tablets_query_retries_total")
		return 0
	}
	query := url.Values{"query": {"up"}, "time": {ts(t0 + duration)}}

	t.Run("answered once the account is back", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			m := testStore()
			m.selectErr, m.failFor = throttled, 2
			a, reg := newAPI(t, m, &Options{})
			want, _ := newAPI(t, testStore(), &Options{})
			code, r, took := serveRetried(t, a, "/api/v1/query", query)
			require.Equal(t, http.StatusOK, code, "%+v", r)
			_, wantR, _ := serveRetried(t, want, "/api/v1/query", query)
			require.JSONEq(t, string(wantR.Data), string(r.Data))
			require.Equal(t, 3, m.selects)
			require.Equal(t, 3*time.Second, took) // pauses of 1s, then 2s
			require.Equal(t, 2.0, retries(t, reg))
		})
	})
	t.Run("within the request's timeout", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			m := testStore()
			m.selectErr = throttled
			a, reg := newAPI(t, m, &Options{})
			// Tries at 0, 1s and 3s; a pause of 4s would leave less than its own time
			// before the deadline at 10s.
			q := url.Values{"query": {"up"}, "time": {ts(t0 + duration)}, "timeout": {"10s"}}
			code, r, took := serveRetried(t, a, "/api/v1/query", q)
			require.Equal(t, http.StatusServiceUnavailable, code)
			require.Equal(t, "unavailable", r.ErrorType)
			require.Contains(t, r.Error, "ServerBusy")
			require.Equal(t, 3, m.selects)
			require.Equal(t, 3*time.Second, took)
			require.Equal(t, 2.0, retries(t, reg))
		})
	})
	t.Run("every try shares the request's deadline", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			m := testStore()
			m.selectErr, m.failFor = throttled, 1
			m.block = make(chan struct{}) // the second try waits for its deadline
			a, _ := newAPI(t, m, &Options{})
			q := url.Values{"query": {"up"}, "time": {ts(t0 + duration)}, "timeout": {"10s"}}
			code, r, took := serveRetried(t, a, "/api/v1/query", q)
			require.Equal(t, http.StatusServiceUnavailable, code)
			require.Equal(t, "timeout", r.ErrorType)
			require.Equal(t, 10*time.Second, took, "the second try ends at the first one's deadline")
		})
	})
	t.Run("the series and label endpoints too", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			m := testStore()
			m.selectErr, m.failFor = throttled, 1
			a, _ := newAPI(t, m, &Options{})
			code, r, took := serveRetried(t, a, "/api/v1/series", url.Values{"match[]": {"up"}})
			require.Equal(t, http.StatusOK, code, "%+v", r)
			require.Equal(t, time.Second, took)
		})
	})
	t.Run("not what a try cannot change", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			m := testStore()
			m.selectErr = fmt.Errorf("%w: no tier for step", tablets.ErrInvalidOptions)
			a, reg := newAPI(t, m, &Options{})
			code, _, took := serveRetried(t, a, "/api/v1/query", query)
			require.Equal(t, http.StatusBadRequest, code)
			require.Equal(t, 1, m.selects)
			require.Zero(t, took)
			require.Zero(t, retries(t, reg))
		})
	})
	t.Run("never with a negative RetryPause", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			m := testStore()
			m.selectErr = throttled
			a, _ := newAPI(t, m, &Options{RetryPause: -1})
			code, r, took := serveRetried(t, a, "/api/v1/query", query)
			require.Equal(t, http.StatusServiceUnavailable, code)
			require.Equal(t, "unavailable", r.ErrorType)
			require.Equal(t, 1, m.selects)
			require.Zero(t, took)
		})
	})
}
