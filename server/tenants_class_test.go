package server

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/prompb"

	"github.com/seed71701133/tablets/internal/reqlimit"
	"github.com/seed71701133/tablets/internal/testkit/tablefake"
	"github.com/seed71701133/tablets/server/limits"
)

// classRecorder counts the account requests of each class it passes to next.
type classRecorder struct {
	next policy.Transporter

	mu                        sync.Mutex
	ingest, other, background int
}

func (c *classRecorder) Do(req *http.Request) (*http.Response, error) {
	c.mu.Lock()
	switch {
	case reqlimit.IsIngest(req.Context()):
		c.ingest++
	case reqlimit.IsBackground(req.Context()):
		c.background++
	default:
		c.other++
	}
	c.mu.Unlock()
	return c.next.Do(req)
}

func (c *classRecorder) take() (ingest, other, background int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ingest, other, background = c.ingest, c.other, c.background
	c.ingest, c.other, c.background = 0, 0, 0
	return
}

// A remote write's requests to the account, the tenant database's creation on its first
// write included, are ingest (reqlimit.Ingest: they may take every request in flight); a
// query's are not.
func TestTenantsWritesAreIngest(t *testing.T) {
	ctx := context.Background()
	rec := &classRecorder{next: tablefake.New()}
	svc, err := aztables.NewServiceClientWithNoCredential("http://127.0.0.1:10002/devstoreaccount1", &aztables.ClientOptions{
		ClientOptions: policy.ClientOptions{Transport: rec, Retry: policy.RetryOptions{MaxRetries: -1}}})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := limits.Parse([]byte("tenants:\n  allow: [teama]\n"), limits.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	front, err := NewTenants(ctx, svc, "classes", &TenantsOptions{Limits: func() *limits.Config { return cfg },
		Server: &Options{FoldEvery: -1, RollupEvery: -1, CompactEvery: -1, RetainEvery: -1}})
	if err != nil {
		t.Fatal(err)
	}
	defer front.Close()
	rec.take()

	now := time.Now().UnixMilli()
	wr := &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{
		Labels:  []prompb.Label{{Name: "__name__", Value: "up"}, {Name: "job", Value: "a"}},
		Samples: []prompb.Sample{{Value: 1, Timestamp: now - 1000}, {Value: 2, Timestamp: now}},
	}}}
	raw, err := wr.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest(http.MethodPost, "/api/v1/write", bytes.NewReader(snappy.Encode(nil, raw)))
	r.Header.Set("Content-Type", "application/x-protobuf")
	r.Header.Set("Content-Encoding", "snappy")
	r.Header.Set(TenantHeader, "teama")
	w := httptest.NewRecorder()
	front.ServeHTTP(w, r)
	if w.Code != http.StatusNoContent {
		t.Fatalf("remote write: %d %s", w.Code, w.Body)
	}
	if ingest, other, background := rec.take(); ingest == 0 || other != 0 || background != 0 {
		t.Errorf("a remote write's requests: %d ingest, %d other, %d background; want all ingest", ingest, other, background)
	}

	q := httptest.NewRequest(http.MethodGet, "/api/v1/query?query=up", nil)
	q.Header.Set(TenantHeader, "teama")
	w = httptest.NewRecorder()
	front.ServeHTTP(w, q)
	if w.Code != http.StatusOK {
		t.Fatalf("query: %d %s", w.Code, w.Body)
	}
	if ingest, other, _ := rec.take(); ingest != 0 || other == 0 {
		t.Errorf("a query's requests: %d ingest, %d other; want none ingest", ingest, other)
	}
}
