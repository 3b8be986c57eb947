package index

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets/tsdb/internal/catalog"
	"github.com/seed71701133/tablets/tsdb/internal/labels"
	"github.com/seed71701133/tablets/tsdb/internal/naming"
	"github.com/seed71701133/tablets/tsdb/internal/tables"
)

// slowIndex answers every query with one plain series, s1, once release is closed: an
// account too busy to answer the read of the index soon.
type slowIndex struct {
	release chan struct{}
	queries atomic.Int64
}

func (s *slowIndex) Do(req *http.Request) (*http.Response, error) {
	s.queries.Add(1)
	select {
	case <-s.release:
	case <-req.Context().Done():
		return nil, req.Context().Err()
	}
	return &http.Response{StatusCode: http.StatusOK, Request: req,
		Header: http.Header{"Content-Type": {"application/json;odata=nometadata"}},
		Body:   io.NopCloser(strings.NewReader(`{"value":[{"RowKey":"s1"}]}`))}, nil
}

// A registration waits for the read of the index at most primeWait: an account too busy to
// answer it soon delays the writes that long, not longer. The read goes on, once for all
// callers, and the registrations after it know what it listed.
func TestPrimeWaitsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := &slowIndex{release: make(chan struct{})}
		svc, err := aztables.NewServiceClientWithNoCredential("http://127.0.0.1:10002/devstoreaccount1", &aztables.ClientOptions{
			ClientOptions: policy.ClientOptions{Transport: fake, Retry: policy.RetryOptions{MaxRetries: -1}}})
		if err != nil {
			t.Fatal(err)
		}
		names := naming.Names{Base: "db", Period: 24 * time.Hour}
		cat := catalog.New(svc.NewClient(names.Catalog()), 100)
		x := New(svc, names, cat, tables.NewPeriods(svc, names, cat, nil), 100, nil, nil)
		const p = 86400
		ctx := context.Background()

		began := time.Now()
		x.Prime(ctx, p)
		if waited := time.Since(began); waited != primeWait {
			t.Fatalf("Prime returned after %s, want primeWait (%s)", waited, primeWait)
		}
		if x.listed.known(p, idOf("s1")) {
			t.Fatal("s1 known before the index answered")
		}
		x.Prime(ctx, p) // waits for the same read
		if n := fake.queries.Load(); n != 1 {
			t.Fatalf("%d reads of the index, want 1", n)
		}

		close(fake.release)
		synctest.Wait()
		if !x.listed.known(p, idOf("s1")) {
			t.Fatal("s1 not known once the index answered")
		}
		began = time.Now()
		x.Prime(ctx, p)
		if time.Since(began) != 0 || fake.queries.Load() != 1 {
			t.Fatal("a period read already is read again, or waited for")
		}
	})
}

// The ranges of a large index's read select every key exactly once: label sets' keys of
// every second character, and plain series' keys on either side of them.
func TestPrimeRangesCoverEveryKey(t *testing.T) {
	keys := []string{"", "a", "k", "l", "l/", "latency", "lg", "lz", "m", "zz", "\u00e9t\u00e9"}
	for _, c := range "0123456789abcdef" {
		keys = append(keys, labels.KeyPrefix+string(c)+strings.Repeat("0", 31), labels.KeyPrefix+string(c)+strings.Repeat("f", 31))
	}
	for _, k := range keys {
		n := 0
		for _, f := range primeRanges {
			if f.Eval(map[string]string{"RowKey": k}) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("key %q: in %d ranges, want 1", k, n)
		}
	}
}
