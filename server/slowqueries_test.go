package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/reqlimit"
	"github.com/seed71701133/tablets/internal/testkit/rwgen"
	"github.com/seed71701133/tablets/server"
)

// records are the JSON log records written so far whose msg is msg.
func (s *syncBuffer) records(t *testing.T, msg string) []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, line := range bytes.Split(bytes.TrimSpace(s.b.Bytes()), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var r map[string]any
		require.NoError(t, json.Unmarshal(line, &r), string(line))
		if r["msg"] == msg {
			out = append(out, r)
		}
	}
	return out
}

// A query API request taking at least Options.SlowQueries is logged with its parameters and
// what the account did for it: the requests sent in its context (as many as the limit
// Checker saw while it ran, nothing else running), and the bytes they answered. A request
// quicker than the threshold is not logged.
func TestSlowQueryLog(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	var logged syncBuffer
	var limited *reqlimit.Transport
	wrap := func(next policy.Transporter) policy.Transporter {
		limited = reqlimit.New(next, 8)
		return limited
	}
	opts := &server.Options{FoldEvery: -1, RollupEvery: -1, CompactEvery: -1, RetainEvery: -1,
		SlowQueries: time.Nanosecond, Logger: slog.New(slog.NewJSONHandler(&logged, nil))}
	_, hs, checker := newServer(t, wrap, opts)
	start := time.Now().Add(-10 * time.Minute).Truncate(time.Minute)
	_, err := rwgen.Run(context.Background(), rwgen.Config{URL: hs.URL + "/api/v1/write", Series: 30, Metrics: 3,
		SamplesPerRequest: 60, Shards: 2, Interval: 15 * time.Second, Requests: 10, Start: start})
	require.NoError(t, err)
	require.Empty(t, logged.records(t, "slow query"), "remote write is not the query API")

	checker.Reset()
	params := url.Values{"query": {"sum(rate(rwgen_metric_1[5m]))"}, "start": {start.Format(time.RFC3339)},
		"end": {start.Add(10 * time.Minute).Format(time.RFC3339)}, "step": {"60"}}
	getJSON(t, hs.URL+"/api/v1/query_range", params)
	stats := checker.Stats()
	require.Positive(t, stats.Requests, "a first query reads the account")

	got := logged.records(t, "slow query")
	require.Len(t, got, 1)
	r := got[0]
	require.Equal(t, "INFO", r["level"])
	require.Contains(t, r["handler"], "/api/v1/query_range")
	require.EqualValues(t, http.StatusOK, r["code"])
	require.Equal(t, params.Get("query"), r["query"])
	require.Equal(t, params.Get("start"), r["start"])
	require.Equal(t, params.Get("step"), r["step"])
	require.EqualValues(t, stats.Requests, r["account_requests"], "the requests of the query's context: all the Checker saw")
	require.EqualValues(t, stats.ResponseBytes, r["account_bytes"])
	require.Positive(t, r["took"])
	require.Regexp(t, `^(GET|POST) \S+$`, r["account_slowest_kind"], "the slowest request's method and table")
	require.Positive(t, r["account_slowest"])
	require.LessOrEqual(t, r["account_slowest"], r["account_held"], "one request's hold within the sum of them all")
	require.Contains(t, r, "reads_joined")
	require.Contains(t, r, "budget_wait")
	require.Contains(t, r, "engine_queue")

	// A request quicker than the threshold is not logged.
	_, hs2, _ := newServer(t, nil, &server.Options{FoldEvery: -1, RollupEvery: -1, CompactEvery: -1, RetainEvery: -1,
		SlowQueries: time.Hour, Logger: slog.New(slog.NewJSONHandler(&logged, nil))})
	getJSON(t, hs2.URL+"/api/v1/query", url.Values{"query": {"1"}})
	require.Len(t, logged.records(t, "slow query"), 1)

	db, _, _ := openDB(t, nil)
	_, err = server.New(db, &server.Options{SlowQueries: -time.Second})
	require.ErrorIs(t, err, tablets.ErrInvalidOptions)
}
