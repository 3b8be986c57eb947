package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/seed71701133/tablets/internal/testkit/dbtest"
	"github.com/seed71701133/tablets/server/limits"
)

// /-/ready answers 503 while Run's warm-up of the caches goes on (held here behind a
// background job that takes the front's one slot), as Prometheus' does while it replays
// its log, and 200 before Run and once the warm-up is over; a tenant opened after the
// front was ready warms up behind a front that stays ready.
func TestReadyWaitsForTheWarmUp(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	svc, _ := dbtest.NewService(t)
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	base := "wr" + hex.EncodeToString(b)
	dbtest.DropOnCleanup(t, base)
	srv := loopsOff
	cfg := &limits.Config{Tenants: limits.Tenants{Allow: []string{"late"}}}
	front, err := NewTenants(context.Background(), svc, base, &TenantsOptions{MaxBackgroundJobs: 1, Server: &srv,
		Limits: func() *limits.Config { return cfg }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = front.Close() })
	ready := func(h http.Handler) (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/-/ready", nil))
		body, _ := io.ReadAll(rec.Result().Body)
		return rec.Code, string(body)
	}
	if code, body := ready(front); code != http.StatusOK {
		t.Fatalf("/-/ready before Run: %d %q, want 200", code, body)
	}

	// hold takes the front's one job slot until the returned func is called.
	hold := func() func() {
		release, held := make(chan struct{}), make(chan struct{})
		go func() {
			_ = front.jobs.do(context.Background(), func() error { close(held); <-release; return nil })
		}()
		<-held
		return func() { close(release) }
	}
	release := hold()
	runFront(t, front)
	eventually(t, "the warm-up waits for its turn", func() bool { _, waiting := front.jobs.State(); return waiting == 1 && front.started.Load() })
	for name, h := range map[string]http.Handler{"the front": front, "the default tenant's server": front.def} {
		if code, body := ready(h); code != http.StatusServiceUnavailable || !strings.Contains(body, "warming its caches up") {
			t.Errorf("/-/ready of %s during the warm-up: %d %q, want 503, warming", name, code, body)
		}
	}
	release()
	eventually(t, "ready after the warm-up", func() bool { code, _ := ready(front); return code == http.StatusOK })
	if code, body := ready(front.def); code != http.StatusOK {
		t.Errorf("/-/ready of the default tenant's server after its warm-up: %d %q", code, body)
	}

	// A tenant opened now warms up behind a front that stays ready.
	release = hold()
	defer release()
	late, err := front.open(context.Background(), "late")
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the late tenant's warm-up waits for its turn", func() bool { _, waiting := front.jobs.State(); return waiting == 1 })
	if !late.warmingUp() {
		t.Error("the late tenant is not warming up")
	}
	if code, body := ready(front); code != http.StatusOK {
		t.Errorf("/-/ready of the front while a tenant opened later warms up: %d %q, want 200", code, body)
	}
}
