package promrun

import (
	"context"
	"os"
	"testing"
	"time"
)

// InstallTimeout bounds the install (download and unpack) done by [Start] and [Need].
var InstallTimeout = 5 * time.Minute

// Need returns the installed Prometheus binaries, installing them if needed. Under
// `go test -short` it skips the test; otherwise a failed install fails the test (it never
// skips).
func Need(t testing.TB) *Binaries {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: needs Prometheus; skipped under -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), InstallTimeout)
	defer cancel()
	b, err := Install(ctx)
	if err != nil {
		t.Fatalf("install Prometheus: %v", err)
	}
	return b
}

// Start starts a Prometheus configured by cfg in a directory of t.TempDir() (see
// [StartServer]) and stops it when the test ends. Under `go test -short` it skips the test;
// otherwise a failure to install or start Prometheus fails the test. When the test fails, or
// Prometheus does not stop cleanly, the end of its log is logged.
func Start(t testing.TB, cfg Config) *Prometheus {
	t.Helper()
	Need(t)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), InstallTimeout)
	defer cancel()
	p, err := StartServer(ctx, dir, cfg)
	if err != nil {
		t.Fatalf("start Prometheus: %v", err)
	}
	t.Cleanup(func() {
		err := p.Stop()
		if err != nil {
			t.Errorf("stop Prometheus: %v", err) // the error holds the log
		} else if t.Failed() {
			t.Logf("Prometheus log (%s):\n%s", p.LogFile, p.Log())
			if y, err := os.ReadFile(p.ConfigFile); err == nil {
				t.Logf("Prometheus config (%s):\n%s", p.ConfigFile, y)
			}
		}
	})
	return p
}
