package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets/internal/testkit/fault"
	"github.com/seed71701133/tablets/internal/testkit/rwgen"
	"github.com/seed71701133/tablets/server"
	"github.com/seed71701133/tablets/server/api"
)

// queryStatus sends an instant query and returns the status code and the envelope.
func queryStatus(t *testing.T, base string, params url.Values) (int, map[string]any) {
	t.Helper()
	resp, err := http.Get(base + "/api/v1/query?" + params.Encode())
	require.NoError(t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var out map[string]any
	require.NoError(t, json.Unmarshal(body, &out), string(body))
	return resp.StatusCode, out
}

// The query limits of server.Options reach the engine and the database's Selects: over the
// samples or the series limit the answer is 422 execution, as Prometheus answers its sample
// limit; within them the same server answers.
func TestServerQueryLimits(t *testing.T) {
	_, hs, checker := newServer(t, nil, &server.Options{FoldEvery: -1, RollupEvery: -1, CompactEvery: -1, RetainEvery: -1,
		Query: &api.Options{MaxSamples: 50, MaxSeriesPerSelect: 5}})
	start := time.Now().Add(-10 * time.Minute).Truncate(time.Minute)
	res, err := rwgen.Run(context.Background(), rwgen.Config{URL: hs.URL + "/api/v1/write", Series: 30, Metrics: 3,
		SamplesPerRequest: 60, Shards: 2, Interval: 15 * time.Second, Requests: 10, Start: start})
	require.NoError(t, err)
	require.EqualValues(t, 1200, res.Samples)
	at := start.Add(10 * time.Minute).Format(time.RFC3339)

	for _, c := range []struct {
		name, query string
		code        int
		errType     string
		message     string
	}{
		{"samples over the limit", `rwgen_metric_1{instance=~"host-(1|4):9100"}[1h]`, 422, "execution",
			"query processing would load too many samples into memory in query execution"},
		{"series over the limit", "sum(rwgen_metric_1)", 422, "execution",
			`expanding series: query processing would select too many series: selector {__name__="rwgen_metric_1"} matches more than the limit of 5 series in one selection`},
		{"within both", `count_over_time(rwgen_metric_1{instance="host-1:9100"}[1h])`, 200, "", ""},
		{"five series", `rwgen_metric_1{instance=~"host-(1|4|7|10|13):9100"}`, 200, "", ""},
	} {
		before := checker.Stats().Requests
		code, out := queryStatus(t, hs.URL, url.Values{"query": {c.query}, "time": {at}})
		require.Equal(t, c.code, code, "%s: %v", c.name, out)
		if c.code != 200 {
			require.Equal(t, c.errType, out["errorType"], c.name)
			require.Equal(t, c.message, out["error"], c.name)
		}
		t.Logf("%s: %d, %d requests to the account", c.name, code, checker.Stats().Requests-before)
	}
	resp, err := http.Get(hs.URL + "/api/v1/series?" + url.Values{"match[]": {"rwgen_metric_2"}, "start": {start.Add(-time.Hour).Format(time.RFC3339)}}.Encode())
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, "the series endpoint's Select is bounded too")
}

// A query over Options.Query.Timeout on a slow account answers 503 timeout, however the
// deadline is met (in the engine or inside a request to the account).
func TestServerQueryTimeout(t *testing.T) {
	_, hs, _ := newServer(t, func(next policy.Transporter) policy.Transporter {
		return fault.New(next, fault.Options{Latency: 200 * time.Millisecond})
	}, &server.Options{FoldEvery: -1, RollupEvery: -1, CompactEvery: -1, RetainEvery: -1,
		Query: &api.Options{Timeout: 50 * time.Millisecond}})
	code, out := queryStatus(t, hs.URL, url.Values{"query": {"sum(rate(anything[5m]))"}})
	require.Equal(t, http.StatusServiceUnavailable, code, "%v", out)
	require.Equal(t, "timeout", out["errorType"])
}
