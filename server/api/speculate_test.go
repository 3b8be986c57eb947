package api

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/stretchr/testify/require"
)

// speculatingStore is a begunStore that speculates (a speculator, as promstore.Queryable
// is): a speculative read finds no series at all (or fails, as fails says), so that an
// answer tells which read gave it; its check holds as holds says.
type speculatingStore struct {
	begunStore
	holds, fails atomic.Bool
}

// speculativeKey marks a speculatingStore's speculative contexts.
type speculativeKey struct{}

func (s *speculatingStore) Speculate(ctx context.Context) (context.Context, func() bool, bool) {
	return context.WithValue(ctx, speculativeKey{}, true), s.holds.Load, true
}

func (s *speculatingStore) Querier(mint, maxt int64) (storage.Querier, error) {
	q, err := s.begunStore.Querier(mint, maxt)
	return speculatingQuerier{q, s}, err
}

type speculatingQuerier struct {
	storage.Querier
	s *speculatingStore
}

func (q speculatingQuerier) Select(ctx context.Context, sortSeries bool, hints *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
	if ctx.Value(speculativeKey{}) != nil {
		if q.s.fails.Load() {
			return storage.ErrSeriesSet(errors.New("not known"))
		}
		return storage.EmptySeriesSet()
	}
	return q.Querier.Select(ctx, sortSeries, hints, ms...)
}

// An instant query over a store that speculates is answered by a speculative read when its
// check holds, and again, by a read as any other, when it does not: the answer is never
// the speculation's then. A query that reads nothing does not speculate.
func TestInstantQuerySpeculates(t *testing.T) {
	store := &speculatingStore{begunStore: begunStore{&markedStore{memStore: testStore()}}}
	a, err := New(store, &Options{})
	require.NoError(t, err)
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(func() {
		srv.Close()
		require.NoError(t, a.Close())
	})
	instant := func(query string) response {
		t.Helper()
		code, resp, body := do(t, srv, http.MethodGet, "/api/v1/query", url.Values{"query": {query}, "time": {ts(t0 + 1800)}})
		require.Equal(t, http.StatusOK, code, "%s", body)
		return resp
	}
	count := func(outcome string) int {
		return int(testutil.ToFloat64(a.speculations.WithLabelValues(outcome)))
	}
	store.holds.Store(true)
	require.JSONEq(t, `{"resultType":"vector","result":[]}`, string(instant(`sum(http_requests_total)`).Data),
		"the speculation's answer")
	require.Equal(t, 1, count("held"))

	store.holds.Store(false)
	resp := instant(`sum(http_requests_total)`)
	require.Contains(t, string(resp.Data), `"value":[`, "the answer of the read after the check, not the speculation's")
	require.Equal(t, 1, count("spoilt"))

	store.holds.Store(true)
	store.fails.Store(true)
	resp = instant(`sum(http_requests_total)`)
	require.Contains(t, string(resp.Data), `"value":[`, "a failed speculation's query answered again")
	require.Equal(t, 1, count("failed"))

	instant(`time()`)
	require.Equal(t, 3, count("held")+count("spoilt")+count("failed"), "nothing read: no speculation")
}
