package api

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/stretchr/testify/require"
)

// speculatingStore is a begunStore that speculates (a speculator, as promstore.Queryable
// is): a speculative read finds no series at all (or fails, as fails says), so that an
// answer tells which read gave it; its check holds as holds says. Where blocks says, a
// speculative read waits for its context to end, an hour at most, and stopped records
// that it did (started that one began).
type speculatingStore struct {
	begunStore
	holds, fails, blocks, started, stopped atomic.Bool
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
		if q.s.blocks.Load() {
			q.s.started.Store(true)
			select {
			case <-ctx.Done():
				q.s.stopped.Store(true)
				return storage.ErrSeriesSet(ctx.Err())
			case <-time.After(10 * time.Second): // well within the query's timeout
			}
		}
		if q.s.fails.Load() {
			return storage.ErrSeriesSet(errors.New("not known"))
		}
		return storage.EmptySeriesSet()
	}
	return q.Querier.Select(ctx, sortSeries, hints, ms...)
}

// An instant query over a store that speculates is answered by a speculative read when its
// check holds, and again, by a read as any other, when it does not: the answer is never
// the speculation's then. After a check that did not hold, the next query does not
// speculate; it checks, and the one after a check that held speculates again. A query that
// reads nothing does not speculate.
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
	const speculated = `{"resultType":"vector","result":[]}`
	store.holds.Store(true)
	require.JSONEq(t, speculated, string(instant(`sum(http_requests_total)`).Data), "the speculation's answer")
	require.Equal(t, 1, count("held"))

	store.holds.Store(false)
	resp := instant(`sum(http_requests_total)`)
	require.Contains(t, string(resp.Data), `"value":[`, "the answer of the read after the check, not the speculation's")
	require.Equal(t, 1, count("spoilt"))

	// The database changed at the last check: the next queries check first, and answer after.
	resp = instant(`sum(http_requests_total)`)
	require.Contains(t, string(resp.Data), `"value":[`, "no speculation after a check that found the database changed")
	require.Equal(t, 1, count("skipped"))
	store.holds.Store(true)
	resp = instant(`sum(http_requests_total)`)
	require.Contains(t, string(resp.Data), `"value":[`, "no speculation after a check that found the database changed")
	require.Equal(t, 2, count("skipped"))
	require.JSONEq(t, speculated, string(instant(`sum(http_requests_total)`).Data),
		"a speculation's answer again, after a check that found nothing changed")
	require.Equal(t, 2, count("held"))

	store.fails.Store(true)
	resp = instant(`sum(http_requests_total)`)
	require.Contains(t, string(resp.Data), `"value":[`, "a failed speculation's query answered again")
	require.Equal(t, 1, count("failed"))

	instant(`time()`)
	require.Equal(t, 6, count("held")+count("spoilt")+count("failed")+count("skipped"), "nothing read: no speculation")
}

// A speculation whose check finds the database changed is stopped then, not run to its end
// before the query is answered again: its Selects' context ends. (Its Select here would
// otherwise wait 10 s of the bubble's clock, and the query answer after it all the same.)
func TestSpoiltSpeculationStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &speculatingStore{begunStore: begunStore{&markedStore{memStore: testStore()}}}
		store.blocks.Store(true)
		a, err := New(store, &Options{})
		require.NoError(t, err)
		defer func() { require.NoError(t, a.Close()) }()
		rec := httptest.NewRecorder()
		q := url.Values{"query": {`sum(http_requests_total)`}, "time": {ts(t0 + 1800)}}
		a.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/v1/query?"+q.Encode(), nil))
		require.Equal(t, http.StatusOK, rec.Code, "%s", rec.Body)
		require.Contains(t, rec.Body.String(), `"value":[`, "the answer of the read after the check")
		// The check may end the speculation before the engine reaches its Select (the
		// engine checks its context first): then no Select began. One that began must
		// have seen its context end, and without the stop one always begins.
		require.True(t, !store.started.Load() || store.stopped.Load(), "the speculation's Select saw its context end")
		require.Equal(t, 1, int(testutil.ToFloat64(a.speculations.WithLabelValues("spoilt"))))
	})
}
