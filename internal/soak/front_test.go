package soak

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// echoBackend answers every request with its name and what it received: method, path,
// query, the headers the soak's clients send, and the body.
func echoBackend(t *testing.T, name string) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("X-Backend", name)
		fmt.Fprintf(w, "%s %s %s?%s tenant=%s auth=%s encoding=%s body=%s",
			name, r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get(tenantHeader), r.Header.Get("Authorization"),
			r.Header.Get("Content-Encoding"), body)
	}))
	t.Cleanup(s.Close)
	return s
}

// frontClient bounds a request: a front that hung on a backend would fail the test with a
// timeout instead of hanging it.
var frontClient = &http.Client{Timeout: 30 * time.Second}

func frontDo(t *testing.T, method, u, tenant, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(tenantHeader, tenant)
	req.Header.Set("Authorization", "Bearer t0ken")
	req.Header.Set("Content-Encoding", "snappy")
	resp, err := frontClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(got)
}

func TestFrontRoundRobin(t *testing.T) {
	a, b := echoBackend(t, "a"), echoBackend(t, "b")
	f, err := NewFront([]string{a.URL, b.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	// One client's consecutive requests alternate between the backends, each forwarded
	// whole: method, path, query, tenant, authorization, encoding and body.
	for i, want := range []string{"a", "b", "a", "b", "a", "b"} {
		body := fmt.Sprintf("request %d", i)
		code, got := frontDo(t, http.MethodPost, f.URL()+"/api/v1/query_range?x=1", "soak1", body)
		if code != http.StatusOK {
			t.Fatalf("request %d: HTTP %d: %s", i, code, got)
		}
		if wantGot := want + " POST /api/v1/query_range?x=1 tenant=soak1 auth=Bearer t0ken encoding=snappy body=" + body; got != wantGot {
			t.Fatalf("request %d: got %q, want %q", i, got, wantGot)
		}
	}
	if r := f.Routed(); r[0] != 3 || r[1] != 3 {
		t.Errorf("routed %v, want [3 3]", r)
	}

	// Many clients at once: still in turn, so the counts differ by one at most.
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 25 {
				if code, got := frontDo(t, http.MethodGet, f.URL()+"/metrics", "", ""); code != http.StatusOK {
					t.Errorf("HTTP %d: %s", code, got)
				}
			}
		})
	}
	wg.Wait()
	if r := f.Routed(); r[0]+r[1] != 206 || r[0]-r[1] > 1 || r[1]-r[0] > 1 {
		t.Errorf("routed %v of 206 requests, want them in turn", r)
	}

	// New backends (a restart of the servers): the same URL, the new servers only, the
	// counts restarted.
	c := echoBackend(t, "c")
	if err := f.SetBackends([]string{c.URL}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, got := frontDo(t, http.MethodGet, f.URL()+"/-/ready", "", ""); !strings.HasPrefix(got, "c GET /-/ready") {
			t.Fatalf("after SetBackends: %q", got)
		}
	}
	if r := f.Routed(); len(r) != 1 || r[0] != 2 {
		t.Errorf("routed %v after SetBackends, want [2]", r)
	}
	if err := f.SetBackends(nil); err == nil {
		t.Error("SetBackends took no backend")
	}
}

// A backend that is down answers 502 at once, as a load balancer does; the next request
// goes to the next backend, which answers.
func TestFrontBackendDown(t *testing.T) {
	up := echoBackend(t, "up")
	down := httptest.NewServer(http.NotFoundHandler())
	downURL := down.URL
	down.Close() // its port now refuses connections

	f, err := NewFront([]string{downURL, up.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	code, got := frontDo(t, http.MethodPost, f.URL()+"/api/v1/write", "soak0", "samples")
	if code != http.StatusBadGateway || !strings.Contains(got, "front: ") {
		t.Errorf("a backend down: HTTP %d %q, want 502 from the front", code, got)
	}
	if code, got := frontDo(t, http.MethodPost, f.URL()+"/api/v1/write", "soak0", "samples"); code != http.StatusOK || !strings.HasPrefix(got, "up POST /api/v1/write") {
		t.Errorf("the next request: HTTP %d %q, want the backend up", code, got)
	}
}
