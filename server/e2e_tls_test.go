package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seed71701133/tablets/internal/testkit/azurite"
	"github.com/seed71701133/tablets/internal/testkit/promrun"
	"github.com/seed71701133/tablets/server"
)

// TestE2ETLS has a real Prometheus (2.42) remote-write to tablets over mutual TLS (a CA
// generated here, remote_write tls_config ca_file, cert_file and key_file; the web config
// requires and verifies a client certificate) with basic auth (a bcrypt hash in the web config),
// and checks that its samples are stored and read back through the query API (over TLS, with
// the password), that Prometheus failed no sample, that a wrong password or none is 401 on
// the real server, and that /metrics is on the internal listener only.
func TestE2ETLS(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test: needs Azurite and Prometheus; skipped under -short")
	}
	promrun.Need(t)
	azurite.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	p := newTestPKI(t)
	cfgFile := filepath.Join(p.dir, "web.yml")
	writeAtomic(t, cfgFile, p.webConfig(t, true, map[string]string{"prometheus": "s3cret"}))
	srv, _, _ := newServer(t, nil, nil)
	s := serve(t, srv, true, &server.ServeOptions{WebConfigFile: cfgFile})
	base := "https://" + s.public

	prom := promrun.Start(t, promrun.Config{
		SelfScrapeJob: "prometheus",
		RemoteWrite: []promrun.RemoteWrite{{
			URL: base + "/api/v1/write", Name: "tablets-tls",
			BasicAuth: &promrun.BasicAuth{Username: "prometheus", Password: "s3cret"},
			TLSCAFile: p.caFile, TLSCertFile: p.clientCert, TLSKeyFile: p.clientKey,
		}},
	})
	if _, err := prom.WaitFor(ctx, `up{job="prometheus"}`); err != nil {
		t.Fatal(err)
	}

	// Tablets answers what Prometheus wrote, over TLS with the password.
	c := tlsClient(p, &p.client)
	query := base + "/api/v1/query?" + url.Values{"query": {`up{job="prometheus"}`}}.Encode()
	var got []json.RawMessage
	for got == nil {
		code, body, err := get(t, c, query, "prometheus", "s3cret")
		if err != nil || code != http.StatusOK {
			t.Fatalf("query over TLS: %d %q %v", code, body, err)
		}
		var r struct {
			Data struct{ Result []json.RawMessage } `json:"data"`
		}
		if err := json.Unmarshal([]byte(body), &r); err != nil {
			t.Fatalf("query answer %q: %v", body, err)
		}
		if len(r.Data.Result) > 0 {
			got = r.Data.Result
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no sample of up{job=\"prometheus\"} stored: Prometheus log:\n%s", prom.Log())
		case <-time.After(500 * time.Millisecond): // polls what Prometheus sends every second
		}
	}
	if len(got) != 1 || !strings.Contains(string(got[0]), `"1"]`) {
		t.Errorf("up{job=\"prometheus\"} in tablets: %s, want one series at 1", got)
	}
	ws := srv.WriteStats()
	if ws.Requests[http.StatusNoContent] == 0 || ws.SamplesWritten == 0 {
		t.Errorf("remote write stats %+v: want 204s and samples written", ws)
	}
	failed, err := prom.Query(ctx, `prometheus_remote_storage_samples_failed_total`, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range failed {
		if f.Value.V != 0 {
			t.Errorf("Prometheus failed %v samples to tablets: log:\n%s", f.Value.V, prom.Log())
		}
	}

	// The same server refuses a wrong password, or none, before the handler.
	writes := ws.Requests
	for _, cred := range [][2]string{{"prometheus", "wrong"}, {"", ""}} {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/api/v1/write", strings.NewReader("not a write"))
		if err != nil {
			t.Fatal(err)
		}
		if cred[0] != "" {
			req.SetBasicAuth(cred[0], cred[1])
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("write with user %q password %q: %d, want 401", cred[0], cred[1], resp.StatusCode)
		}
	}
	if after := srv.WriteStats().Requests; after[http.StatusBadRequest] != writes[http.StatusBadRequest] {
		t.Errorf("an unauthenticated write reached the handler: 400s %d -> %d", writes[http.StatusBadRequest], after[http.StatusBadRequest])
	}

	// Without a client certificate, the TLS handshake itself fails, password or not.
	if _, _, err := get(t, tlsClient(p, nil), query, "prometheus", "s3cret"); err == nil {
		t.Error("a query without a client certificate was answered")
	}

	// /metrics: on the internal listener, in plain HTTP and without credentials; not public.
	code, body, err := get(t, &http.Client{Timeout: 30 * time.Second}, "http://"+s.internal+"/metrics", "", "")
	if err != nil || code != http.StatusOK || !strings.Contains(body, "tablets_") {
		t.Errorf("internal /metrics: %d %v (%d bytes)", code, err, len(body))
	}
	if code, _, err := get(t, c, base+"/metrics", "prometheus", "s3cret"); err != nil || code != http.StatusNotFound {
		t.Errorf("public /metrics: %d %v, want 404", code, err)
	}
	if code, _, err := get(t, &http.Client{Timeout: 30 * time.Second}, "http://"+s.internal+"/-/ready", "", ""); err != nil || code != http.StatusOK {
		t.Errorf("internal /-/ready: %d %v, want 200", code, err)
	}
}
