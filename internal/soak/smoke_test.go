package soak

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/seed71701133/tablets/internal/testkit/azurite"
)

// TestSoakSmoke runs a short soak (a backfill of 30m, 120 samples a series: the server
// writes them into the raw tables directly; then 40s at 250 samples/s, a 5s outage at 15s)
// of the tablets command built from this tree, in front of an Azurite reached through
// Azure's limit Checker, and requires every acknowledged sample, backfilled or not, read
// back and no cross-tenant answer. It runs two servers on the one database behind the
// round-robin front (both restarted after the backfill), so that the writes, queries and
// read-back of a tenant alternate between them: a sample one server acknowledged and the
// other did not read back would be missing.
// Its RSS and goroutine targets are not asserted: 40s has no steady state.
func TestSoakSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("a soak of about a minute: skipped under -short")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go command to build tablets with: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "tablets")
	if out, err := exec.CommandContext(t.Context(), goBin, "build", "-o", bin, "github.com/seed71701133/tablets/cmd/tablets").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	az, err := azurite.Start(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer az.Stop()

	// The server reaches Azurite through a reverse proxy that checks every request against
	// Azure's limits (the server is another process: its own transport cannot be wrapped).
	var mu sync.Mutex
	var violations []string
	checker := azurite.NewChecker(nil, func(v string) {
		mu.Lock()
		violations = append(violations, v)
		mu.Unlock()
	})
	target, err := url.Parse(az.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	checking := httptest.NewServer(&httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.Out.URL.Scheme, r.Out.URL.Host = target.Scheme, target.Host
			r.Out.RequestURI = "" // the checker sends it with an http.Client
		},
		Transport: roundTripFunc(checker.Do),
		ErrorLog:  log.New(io.Discard, "", 0), // requests the server cancels as it stops
	})
	defer checking.Close()
	cs := fmt.Sprintf("DefaultEndpointsProtocol=http;AccountName=%s;AccountKey=%s;TableEndpoint=%s/%s;",
		"devstoreaccount1", "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==", checking.URL, "devstoreaccount1")

	tenants := 1
	if ok, err := serveHasTenants(t.Context(), bin); err != nil {
		t.Fatal(err)
	} else if ok {
		tenants = 2
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	// 250 samples/s: about 1,900 series a tenant (of two) scraped every 15s, each read back,
	// the backfill in many requests of 2,000 samples: the paths of 500/s (its staging
	// partitions too), at half the writing and reading back.
	// A quarter hour of backfill: 60 samples a series, in requests of 2,000 (half the CPU of
	// the half hour it was, for CI's budget; the paths are the same).
	const duration, rate, backfill = 40 * time.Second, 250, 15 * time.Minute
	rep, err := Run(ctx, Config{
		Duration: duration, Tenants: tenants, Rate: rate, OutageAt: 15 * time.Second, Outage: 5 * time.Second,
		Backfill: backfill, Settle: 20 * time.Second, Servers: 2, // the load starts while the background work catches up
		ConnectionString: cs, Tablets: bin, Dir: t.TempDir(), Progress: t.Output(), Drain: 2 * time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteText(t.Output()); err != nil {
		t.Fatal(err)
	}
	// The targets of correctness; not the growth's (too short a run) nor the dashboards'
	// latency (CI's machine).
	judged := map[string]bool{"samples acknowledged": true, "acknowledged samples read back": true, "cross-tenant answers": true}
	for _, target := range rep.Targets {
		if judged[target.Name] {
			delete(judged, target.Name)
			if !target.OK {
				t.Errorf("%s: %s", target.Name, target.Value)
			}
		}
	}
	if len(judged) > 0 {
		t.Errorf("no targets %v in the report", judged)
	}
	if len(rep.PerTenant) != tenants || rep.Queries["1h"].Queries == 0 || rep.Queries["7d"].Queries == 0 || len(rep.Points) < 3 {
		t.Errorf("tenants %d, queries %+v, %d points", len(rep.PerTenant), rep.Queries, len(rep.Points))
	}
	for _, p := range rep.Points {
		if len(p.Servers) != 2 {
			t.Fatalf("a point of %d servers", len(p.Servers))
		}
	}
	if rep.Servers != 2 || len(rep.PerServer) != 2 {
		t.Fatalf("%d servers, %d reported", rep.Servers, len(rep.PerServer))
	}
	for i, s := range rep.PerServer {
		// Each server of the load took its turn of the requests and reached the account.
		if s.Routed == 0 || s.AccountRequests == 0 || s.RSS.First == 0 {
			t.Errorf("server %d: %d requests routed, %d account requests, RSS %d", i, s.Routed, s.AccountRequests, s.RSS.First)
		}
	}
	for tenant, tr := range rep.PerTenant {
		w := tr.Writes
		if w.Acked-w.BackfillAcked < int64(0.75*rate*duration.Seconds())/int64(tenants) { // less the partial first and last scrapes
			t.Errorf("tenant %s: %d samples of the load acknowledged", tenant, w.Acked-w.BackfillAcked)
		}
		if want := int64(rep.Series) * int64(backfill/(15*time.Second)); w.Backfilled != want || w.BackfillAcked != want {
			t.Errorf("tenant %s: %d samples backfilled, %d acknowledged, want %d", tenant, w.Backfilled, w.BackfillAcked, want)
		}
		if tr.Readback.SeriesChecked != rep.Series || tr.Readback.Samples < w.Acked {
			t.Errorf("tenant %s: %d of %d series read back, %d samples of %d acknowledged", tenant, tr.Readback.SeriesChecked, rep.Series, tr.Readback.Samples, w.Acked)
		}
	}
	if checker.Stats().Requests == 0 {
		t.Error("no request went through the checker")
	}
	mu.Lock()
	defer mu.Unlock()
	for _, v := range violations {
		t.Errorf("Azure would reject: %s", v)
	}
}
