package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets/internal/testkit/azurite"
	"github.com/seed71701133/tablets/internal/testkit/dbtest"
	"github.com/seed71701133/tablets/server"
	"github.com/seed71701133/tablets/server/rules"
	"github.com/seed71701133/tablets/tsdb"
)

// The lease table over Azurite (through the limit Checker): not found, insert, a second
// insert refused, a read with the Timestamp and the reply's Date (the service's clock), a
// replace on a stale ETag refused, on the current one done.
func TestRuleLeaseTableOnAzurite(t *testing.T) {
	db, _, checker := dbtest.NewDB(t, &tsdb.Options{Layout: chunkedLayout})
	table := rules.NewLeaseTable(db.CatalogClient(), nil)
	ctx := context.Background()
	rk := rules.LeaseRowKey("/rules/a.yml", "g")
	_, _, _, err := table.Get(ctx, rules.LeasePartition, rk)
	require.ErrorIs(t, err, rules.ErrLeaseNotFound)
	body := func(holder string) []byte {
		return []byte(`{"PartitionKey":"rulelease","RowKey":"` + rk + `","V":1,"V@odata.type":"Edm.Double","H":"` + holder +
			`","L":30000,"L@odata.type":"Edm.Double","T":0,"T@odata.type":"Edm.Double","F":"/rules/a.yml","N":"g"}`)
	}
	before := time.Now()
	etag, err := table.Insert(ctx, body("a"))
	require.NoError(t, err)
	_, err = table.Insert(ctx, body("b"))
	require.ErrorIs(t, err, rules.ErrLeaseConflict)
	got, getETag, now, err := table.Get(ctx, rules.LeasePartition, rk)
	require.NoError(t, err)
	require.Equal(t, etag, getETag)
	require.WithinDuration(t, time.Now(), now, 2*time.Second, "the reply's Date")
	var e struct {
		Timestamp time.Time
		H         string
	}
	require.NoError(t, json.Unmarshal(got, &e))
	require.Equal(t, "a", e.H)
	require.WithinDuration(t, before, e.Timestamp, 2*time.Second, "the entity's Timestamp")
	t.Logf("Date %s, Timestamp %s", now.Format(time.RFC3339Nano), e.Timestamp.Format(time.RFC3339Nano))
	etag2, err := table.Replace(ctx, body("b"), etag)
	require.NoError(t, err)
	_, err = table.Replace(ctx, body("c"), etag)
	require.ErrorIs(t, err, rules.ErrLeaseConflict)
	_, err = table.Replace(ctx, body("c"), etag2)
	require.NoError(t, err)
	require.Empty(t, checker.Violations())
}

// TestRulesLeaseTwoServers: two servers on one database (each its own client, Checker and
// database handle, as two processes) evaluate one rule file with leases: one evaluates,
// the other reads the lease once an interval; the account requests of each are measured.
// Then the holder shuts down: the other takes the group at its next slot, the alert stays
// firing, and every slot's recorded sample is there, once.
func TestRulesLeaseTwoServers(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Azurite; skipped under -short")
	}
	file := filepath.Join(t.TempDir(), "r.yml")
	require.NoError(t, os.WriteFile(file, []byte(`
groups:
  - name: lease
    interval: 1s
    rules:
      - record: lease:one
        expr: vector(1)
      - alert: Always
        expr: vector(1) > 0
        for: 2s
`), 0o644))
	sink := &alertSink{}
	am := httptest.NewServer(sink)
	defer am.Close()
	db1, name, checker1 := openDB(t, nil)
	checker2 := azurite.NewChecker(nil, func(v string) { t.Errorf("Azure limit violated: %s", v) })
	svc2, err := azurite.Shared(t).NewServiceClient(&aztables.ClientOptions{ClientOptions: policy.ClientOptions{
		Transport: checker2, Retry: azurite.TestRetryOptions(), PerCallPolicies: []policy.Policy{runtime.NewRequestIDPolicy()}}})
	require.NoError(t, err)
	db2, err := tsdb.Open(context.Background(), svc2, name, &tsdb.Options{Layout: chunkedLayout})
	require.NoError(t, err)

	type node struct {
		name    string
		s       *server.Server
		hs      *httptest.Server
		checker *azurite.Checker
		stop    context.CancelFunc
		done    chan error
	}
	var nodes []*node
	for i, db := range []*tsdb.DB{db1, db2} {
		s, err := server.New(db, &server.Options{FoldEvery: -1, RollupEvery: -1, CompactEvery: -1, RetainEvery: -1,
			Rules: &rules.Options{Files: []string{file}, Alertmanagers: []string{am.URL}, ForGracePeriod: time.Second,
				Lease: &rules.LeaseOptions{Min: 2 * time.Second, Holder: "node" + strconv.Itoa(i)}}})
		require.NoError(t, err)
		n := &node{name: "node" + strconv.Itoa(i), s: s, hs: httptest.NewServer(s), checker: []*azurite.Checker{checker1, checker2}[i]}
		ctx, cancel := context.WithCancel(context.Background())
		n.stop, n.done = cancel, make(chan error, 1)
		go func() { n.done <- s.Run(ctx) }()
		t.Cleanup(func() { n.stop(); <-n.done; n.hs.Close(); _ = s.Close() })
		nodes = append(nodes, n)
	}
	key := file + ";lease"
	held := func(n *node) bool {
		return scrapeMetric(t, n.hs.URL, `tablets_rule_group_lease_held{rule_group="`+key+`"}`) == "1"
	}
	iterations := func(n *node) float64 {
		v, _ := strconv.ParseFloat(scrapeMetric(t, n.hs.URL, `prometheus_rule_group_iterations_total{rule_group="`+key+`"}`), 64)
		return v
	}
	deadline := time.Now().Add(30 * time.Second)
	var holder, other *node
	for holder == nil {
		require.True(t, time.Now().Before(deadline), "no server took the lease")
		for i, n := range nodes {
			if held(n) {
				holder, other = n, nodes[1-i]
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(3 * time.Second) // the alert fires
	require.False(t, held(other))

	// The account requests: of the holder an evaluation, of the other an interval.
	h0, o0, e0 := holder.checker.Stats().Requests, other.checker.Stats().Requests, iterations(holder)
	time.Sleep(5 * time.Second)
	h1, o1, e1 := holder.checker.Stats().Requests, other.checker.Stats().Requests, iterations(holder)
	require.Greater(t, e1, e0)
	require.Equal(t, 0.0, iterations(other), "the other server evaluates nothing")
	t.Logf("account requests: the holder %.1f an evaluation of a group of 2 rules (its lease's write included), the other %.1f an interval (its read of the lease)",
		float64(h1-h0)/(e1-e0), float64(o1-o0)/(e1-e0))
	// Both servers answer with the holder's state (the other's from the lease it read).
	for _, n := range []*node{holder, other} {
		status, body := (tenantClient{base: n.hs.URL}).do(t, "GET", "/api/v1/rules", nil, nil)
		require.Equal(t, 200, status)
		require.Contains(t, string(body), `"health":"ok"`, n.name)
		require.NotContains(t, string(body), `"health":"unknown"`, n.name)
		status, body = (tenantClient{base: n.hs.URL}).do(t, "GET", "/api/v1/alerts", nil, nil)
		require.Equal(t, 200, status)
		require.Contains(t, string(body), `"state":"firing"`, n.name)
		require.Contains(t, string(body), `"alertname":"Always"`, n.name)
	}

	// The holder shuts down: its lease released, the other takes the group at once.
	stopped := time.Now()
	holder.stop()
	require.NoError(t, <-holder.done)
	holder.stop, holder.done = func() {}, make(chan error, 1)
	holder.done <- nil
	for !held(other) {
		require.Less(t, time.Since(stopped), 5*time.Second, "not taken over within 5 s of the release")
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("taken over %s after the holder's shutdown", time.Since(stopped).Round(time.Millisecond))
	time.Sleep(3 * time.Second)

	// Each slot once: 1 s apart, but for the handover (at most 2 s).
	data, err := tabletsAPI(context.Background(), other.hs.URL, url.Values{"query": {"lease:one[1m]"}})
	require.NoError(t, err)
	var res struct {
		Result []struct {
			Values [][2]any `json:"values"`
		} `json:"result"`
	}
	require.NoError(t, json.Unmarshal(data, &res))
	require.Len(t, res.Result, 1)
	var ts []int64
	for _, v := range res.Result[0].Values {
		ts = append(ts, int64(v[0].(float64)*1000))
	}
	require.True(t, slices.IsSorted(ts))
	for i := 1; i < len(ts); i++ {
		require.Greater(t, ts[i], ts[i-1])
		require.LessOrEqual(t, ts[i]-ts[i-1], int64(2000), "a gap at %s", time.UnixMilli(ts[i]).UTC())
		require.Equal(t, int64(0), (ts[i]-ts[0])%1000, "one slot a second")
	}
	for _, p := range sink.all() {
		for _, a := range p.Alerts {
			require.True(t, a.EndsAt.After(stopped), "no resolved notification")
		}
	}
}

// scrapeMetric reads one sample of the server's /metrics ("" if there is none).
func scrapeMetric(t *testing.T, base, name string) string {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return v
		}
	}
	return ""
}
