package promrun

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/seed71701133/tablets/internal/proc"
)

// Alertmanager: Debian's prometheus-alertmanager package (bookworm: 0.25), for the
// end-to-end tests of rules. Unlike Prometheus it is installed system-wide (`apt-get install
// prometheus-alertmanager`; .ci/run does): Debian's build reads its default notification
// template from /usr/share/prometheus/alertmanager, so an unpacked copy elsewhere does not
// start. No service is started (a container's policy-rc.d denies it; the tests run their
// own, on free ports).
const (
	// AlertmanagerPackage is the Debian package, and its binary's name.
	AlertmanagerPackage = "prometheus-alertmanager"
	// AlertmanagerVersionPrefix pins its version.
	AlertmanagerVersionPrefix = "0.25."
)

var (
	amMu  sync.Mutex
	amBin string
)

// InstallAlertmanager returns the path of the pinned Alertmanager's binary; if none is on
// PATH and this process is root, it installs Debian's package with apt-get first.
func InstallAlertmanager(ctx context.Context) (string, error) {
	amMu.Lock()
	defer amMu.Unlock()
	if amBin != "" {
		return amBin, nil
	}
	p, err := exec.LookPath(AlertmanagerPackage)
	if err != nil {
		if os.Geteuid() != 0 {
			return "", fmt.Errorf("promrun: %s is not installed: run `apt-get install %s` as root", AlertmanagerPackage, AlertmanagerPackage)
		}
		cmd := exec.CommandContext(ctx, "apt-get", "install", "-y", "-qq", "--no-install-recommends", AlertmanagerPackage)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("promrun: `apt-get install %s` failed (run `apt-get update` first?): %w\n%s", AlertmanagerPackage, err, out)
		}
		if p, err = exec.LookPath(AlertmanagerPackage); err != nil {
			return "", fmt.Errorf("promrun: %s installed but not on PATH: %w", AlertmanagerPackage, err)
		}
	}
	v, err := binaryVersion(ctx, p)
	if err != nil {
		return "", fmt.Errorf("promrun: %w", err)
	}
	if !strings.HasPrefix(v, AlertmanagerVersionPrefix) {
		return "", fmt.Errorf("promrun: %s is version %s, want %s*", p, v, AlertmanagerVersionPrefix)
	}
	amBin = p
	return p, nil
}

// Alertmanager is a running Alertmanager.
type Alertmanager struct {
	// URL is its base URL, http://127.0.0.1:PORT.
	URL  string
	proc *proc.Process
}

// StartAlertmanager runs an Alertmanager with the configuration config (YAML) in dir, on a
// free loopback port, clustering off, and waits until it is ready.
func StartAlertmanager(ctx context.Context, dir, config string) (*Alertmanager, error) {
	bin, err := InstallAlertmanager(ctx)
	if err != nil {
		return nil, err
	}
	cfgFile := filepath.Join(dir, "alertmanager.yml")
	if err := os.WriteFile(cfgFile, []byte(config), 0o644); err != nil {
		return nil, err
	}
	return proc.OnFreePort(startAttempts, func(port int) (*Alertmanager, error) {
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		a := &Alertmanager{URL: "http://" + addr}
		a.proc, err = proc.Start(bin, []string{"--config.file=" + cfgFile, "--storage.path=" + filepath.Join(dir, "data"),
			"--web.listen-address=" + addr, "--cluster.listen-address="},
			&proc.Options{Dir: dir, LogFile: filepath.Join(dir, "alertmanager.log"), TailBytes: 64 << 10, PortInUse: "address already in use"})
		if err != nil {
			return nil, fmt.Errorf("promrun: %w", err)
		}
		if err := a.proc.WaitReady(ctx, StartTimeout, func(ctx context.Context) bool {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.URL+"/-/ready", nil)
			if err != nil {
				return false
			}
			resp, err := readyProbe.Do(req)
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		}); err != nil {
			_ = a.proc.Stop(0)
			return nil, fmt.Errorf("promrun: %w", err)
		}
		return a, nil
	})
}

// Log is the end of its output.
func (a *Alertmanager) Log() string { return a.proc.Output() }

// Stop stops it.
func (a *Alertmanager) Stop() error { return a.proc.Stop(StopTimeout) }

// NeedAlertmanager installs the pinned Alertmanager, skipping under -short and failing
// the test if it cannot.
func NeedAlertmanager(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: needs Alertmanager; skipped under -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), InstallTimeout)
	defer cancel()
	if _, err := InstallAlertmanager(ctx); err != nil {
		t.Fatalf("install Alertmanager (.ci/run installs it: apt-get install %s): %v", AlertmanagerPackage, err)
	}
}

// RunAlertmanager starts an Alertmanager for the test, stopped at its end (its log shown
// if the test failed).
func RunAlertmanager(t testing.TB, config string) *Alertmanager {
	t.Helper()
	NeedAlertmanager(t)
	ctx, cancel := context.WithTimeout(context.Background(), InstallTimeout)
	defer cancel()
	dir := t.TempDir()
	a, err := StartAlertmanager(ctx, dir, config)
	if err != nil {
		t.Fatalf("start Alertmanager: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("Alertmanager log:\n%s", a.Log())
		}
		_ = a.Stop()
	})
	return a
}
