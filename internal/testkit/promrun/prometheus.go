package promrun

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/seed71701133/tablets/internal/proc"
)

// StartTimeout bounds how long [StartServer] waits for a started Prometheus to become ready
// (the install, if needed, is bounded only by the context).
var StartTimeout = 60 * time.Second

// StopTimeout bounds how long [Prometheus.Stop] waits after SIGTERM before it kills.
var StopTimeout = 15 * time.Second

// startAttempts is how many free ports StartServer tries when another process takes the port
// between our probe and Prometheus's listen.
const startAttempts = 5

// readyLine is what Prometheus logs once it serves queries.
const readyLine = "Server is ready to receive web requests"

// Prometheus is a running Prometheus server. Stop it with [Prometheus.Stop] ([Start] does so
// when the test ends).
type Prometheus struct {
	// Bin is the installation it runs from.
	Bin *Binaries
	// Addr is its listen address, 127.0.0.1:PORT.
	Addr string
	// Dir holds its ConfigFile (prometheus.yml), its TSDB (data/) and its LogFile
	// (prometheus.log, its stdout and stderr).
	Dir, ConfigFile, LogFile string

	client *http.Client
	proc   *proc.Process

	mu  sync.Mutex
	cfg Config
}

// StartServer installs Prometheus if needed (see [Install]), writes cfg as dir/prometheus.yml
// and starts Prometheus on a free port of 127.0.0.1 with its TSDB in dir/data (kept if it
// exists: a restart on the same dir finds its data) and its output in dir/prometheus.log. It returns once Prometheus is ready (/-/ready), waiting at most
// [StartTimeout]. ctx bounds the install and the startup, not the server's life: call
// [Prometheus.Stop]. On Linux the server is also killed if this process dies.
//
// Prometheus 2.42 applies scrape targets (hence the first scrape) about 5 s after it starts:
// its discovery manager sends updates every 5 s.
//
// The flags are --config.file, --storage.tsdb.path, --web.listen-address,
// --web.enable-lifecycle (for [Prometheus.Reload]), --web.local-assets,
// --web.console.templates and --web.console.libraries (pointing into the unpacked package: it
// does not need them to start or to answer the API, but its defaults point to /usr/share and
// /etc), --storage.remote.flush-deadline=2s (so that it does not wait a minute on shutdown
// for a remote-write endpoint that is gone), then cfg.Args; a flag in cfg.Args replaces the
// harness's flag of the same name.
func StartServer(ctx context.Context, dir string, cfg Config) (*Prometheus, error) {
	bin, err := Install(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := cfg.YAML("127.0.0.1:9090"); err != nil { // fail before the port dance
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("promrun: %w", err)
	}
	attempt := 0
	p, err := proc.OnFreePort(startAttempts, func(port int) (*Prometheus, error) {
		if attempt++; attempt > 1 {
			// Drop what the failed attempt wrote (the port is part of the self-scrape series).
			if err := os.RemoveAll(filepath.Join(dir, "data")); err != nil {
				return nil, fmt.Errorf("promrun: %w", err)
			}
		}
		return startOn(ctx, bin, dir, cfg, port)
	})
	return p, err
}

func startOn(ctx context.Context, bin *Binaries, dir string, cfg Config, port int) (*Prometheus, error) {
	p := &Prometheus{
		Bin:        bin,
		Addr:       net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		Dir:        dir,
		ConfigFile: filepath.Join(dir, "prometheus.yml"),
		LogFile:    filepath.Join(dir, "prometheus.log"),
		client:     &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 16}},
		cfg:        cfg,
	}
	if err := p.writeConfig(cfg); err != nil {
		return nil, err
	}
	args := mergeFlags([]string{
		"--config.file=" + p.ConfigFile,
		"--storage.tsdb.path=" + filepath.Join(dir, "data"),
		"--web.listen-address=" + p.Addr,
		"--web.enable-lifecycle",
		"--web.local-assets=" + bin.WebAssets(),
		"--web.console.templates=" + bin.ConsoleTemplates(),
		"--web.console.libraries=" + bin.ConsoleLibraries(),
		"--storage.remote.flush-deadline=2s",
	}, cfg.Args)
	var err error
	p.proc, err = proc.Start(bin.Prometheus, args, &proc.Options{
		Dir: dir, LogFile: p.LogFile, TailBytes: 64 << 10, PortInUse: "address already in use"})
	if err != nil {
		return nil, fmt.Errorf("promrun: %w", err)
	}
	if err := p.proc.WaitReady(ctx, StartTimeout, p.ready); err != nil {
		_ = p.proc.Stop(0)
		return nil, fmt.Errorf("promrun: %w", err)
	}
	return p, nil
}

// mergeFlags returns base followed by extra, without the flags of base that extra sets
// (Prometheus's flag parser rejects a repeated flag).
func mergeFlags(base, extra []string) []string {
	name := func(f string) string {
		f = strings.TrimLeft(f, "-")
		if i := strings.IndexByte(f, '='); i >= 0 {
			f = f[:i]
		}
		return strings.TrimPrefix(f, "no-")
	}
	set := map[string]bool{}
	for _, f := range extra {
		if strings.HasPrefix(f, "-") {
			set[name(f)] = true
		}
	}
	var out []string
	for _, f := range base {
		if !set[name(f)] {
			out = append(out, f)
		}
	}
	return append(out, extra...)
}

func (p *Prometheus) writeConfig(cfg Config) error {
	y, err := cfg.YAML(p.Addr)
	if err != nil {
		return err
	}
	if err := os.WriteFile(p.ConfigFile, y, 0o644); err != nil {
		return fmt.Errorf("promrun: %w", err)
	}
	return nil
}

// ready reports whether Prometheus has logged that it is ready (so that an answer is known
// to come from our process) and answers 200 on /-/ready.
func (p *Prometheus) ready(ctx context.Context) bool {
	if !p.proc.OutputContains(readyLine) {
		return false
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL()+"/-/ready", nil)
	if err != nil {
		return false
	}
	resp, err := readyProbe.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// readyProbe asks /-/ready without keeping connections.
var readyProbe = &http.Client{Timeout: time.Second, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}

// URL returns the server's base URL, http://127.0.0.1:PORT.
func (p *Prometheus) URL() string { return "http://" + p.Addr }

// Config returns the configuration the server runs with.
func (p *Prometheus) Config() Config {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cfg
}

// Reload rewrites the configuration file from cfg and makes Prometheus reload it
// (POST /-/reload). cfg.Args are ignored: flags cannot change without a restart.
func (p *Prometheus) Reload(ctx context.Context, cfg Config) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.writeConfig(cfg); err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.URL()+"/-/reload", nil)
	if err != nil {
		return fmt.Errorf("promrun: %w", err)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return fmt.Errorf("promrun: reload: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("promrun: reload: %s: %s", resp.Status, bytes.TrimSpace(body))
	}
	p.cfg = cfg
	return nil
}

// Log returns the last 64 KiB of Prometheus's output (all of it is in LogFile).
func (p *Prometheus) Log() string { return p.proc.Output() }

// Args returns Prometheus's command line, the program first.
func (p *Prometheus) Args() []string { return p.proc.Args() }

// Exited reports whether the process has exited.
func (p *Prometheus) Exited() bool { return p.proc.Exited() }

// Stop stops Prometheus: SIGTERM, then, after [StopTimeout], SIGKILL to its process group. It
// returns an error if Prometheus had already exited on its own, or exited with an error. Stop
// is idempotent.
func (p *Prometheus) Stop() error {
	if err := p.proc.Stop(StopTimeout); err != nil {
		return fmt.Errorf("promrun: %w", err)
	}
	return nil
}
