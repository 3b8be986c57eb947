package promrun

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
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

	client  *http.Client
	cmd     *exec.Cmd
	logFile *os.File
	log     *tailBuffer
	done    chan struct{} // closed when the process has exited; waitErr is then set
	waitErr error

	mu       sync.Mutex
	cfg      Config
	stopOnce sync.Once
	stopErr  error
}

var errPortInUse = errors.New("port in use")

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
	for attempt := 1; ; attempt++ {
		port, err := freePort()
		if err != nil {
			return nil, fmt.Errorf("promrun: find a free port: %w", err)
		}
		if attempt > 1 {
			// Drop what the failed attempt wrote (the port is part of the self-scrape series).
			if err := os.RemoveAll(filepath.Join(dir, "data")); err != nil {
				return nil, fmt.Errorf("promrun: %w", err)
			}
		}
		p, err := startOn(ctx, bin, dir, cfg, port)
		if err == nil {
			return p, nil
		}
		if !errors.Is(err, errPortInUse) || attempt == startAttempts {
			return nil, err
		}
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func startOn(ctx context.Context, bin *Binaries, dir string, cfg Config, port int) (*Prometheus, error) {
	p := &Prometheus{
		Bin:        bin,
		Addr:       net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		Dir:        dir,
		ConfigFile: filepath.Join(dir, "prometheus.yml"),
		LogFile:    filepath.Join(dir, "prometheus.log"),
		client:     &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 16}},
		log:        &tailBuffer{max: 64 << 10},
		done:       make(chan struct{}),
		cfg:        cfg,
	}
	if err := p.writeConfig(cfg); err != nil {
		return nil, err
	}
	lf, err := os.Create(p.LogFile)
	if err != nil {
		return nil, fmt.Errorf("promrun: %w", err)
	}
	p.logFile = lf

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
	// Not CommandContext: ctx bounds the startup only, the server outlives it.
	cmd := exec.Command(bin.Prometheus, args...)
	cmd.Dir = dir
	out := io.MultiWriter(lf, p.log)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.WaitDelay = 2 * time.Second
	setProcAttr(cmd)
	p.cmd = cmd
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, fmt.Errorf("promrun: start %s: %w", bin.Prometheus, err)
	}
	go func() {
		p.waitErr = cmd.Wait()
		p.logFile.Close()
		close(p.done)
	}()
	if err := p.waitReady(ctx); err != nil {
		_ = p.Stop()
		return nil, err
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

func (p *Prometheus) cmdline() string {
	return p.cmd.Path + " " + strings.Join(p.cmd.Args[1:], " ")
}

// waitReady waits until Prometheus answers 200 on /-/ready and has logged that it is ready
// (so that the answer is known to come from our process).
func (p *Prometheus) waitReady(ctx context.Context) error {
	deadline := time.NewTimer(StartTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	probe := &http.Client{Timeout: time.Second, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	for {
		select {
		case <-p.done:
			if strings.Contains(p.log.String(), "address already in use") {
				return fmt.Errorf("promrun: %w: %s", errPortInUse, p.Addr)
			}
			return fmt.Errorf("promrun: `%s` exited during startup (%v); output:\n%s", p.cmdline(), p.waitErr, p.log.String())
		case <-ctx.Done():
			return fmt.Errorf("promrun: waiting for `%s` to become ready: %w; output so far:\n%s", p.cmdline(), ctx.Err(), p.log.String())
		case <-deadline.C:
			return fmt.Errorf("promrun: `%s` was not ready on %s within %s; output:\n%s", p.cmdline(), p.Addr, StartTimeout, p.log.String())
		case <-tick.C:
		}
		if !strings.Contains(p.log.String(), readyLine) {
			continue
		}
		resp, err := probe.Get(p.URL() + "/-/ready")
		if err != nil {
			continue
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return nil
		}
	}
}

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
func (p *Prometheus) Log() string { return p.log.String() }

// Exited reports whether the process has exited.
func (p *Prometheus) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Stop stops Prometheus: SIGTERM, then, after [StopTimeout], SIGKILL to its process group. It
// returns an error if Prometheus had already exited on its own, or exited with an error. Stop
// is idempotent.
func (p *Prometheus) Stop() error {
	p.stopOnce.Do(func() {
		select {
		case <-p.done:
			p.stopErr = fmt.Errorf("promrun: prometheus exited before Stop (%v); output:\n%s", p.waitErr, p.log.String())
			return
		default:
		}
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			p.kill()
		}
		select {
		case <-p.done:
			if p.waitErr != nil {
				p.stopErr = fmt.Errorf("promrun: prometheus exited with %v after SIGTERM; output:\n%s", p.waitErr, p.log.String())
			}
			return
		case <-time.After(StopTimeout):
		}
		p.kill()
		select {
		case <-p.done:
			p.stopErr = fmt.Errorf("promrun: prometheus ignored SIGTERM for %s and was killed; output:\n%s", StopTimeout, p.log.String())
		case <-time.After(10 * time.Second):
			p.stopErr = fmt.Errorf("promrun: pid %d did not exit after SIGKILL", p.cmd.Process.Pid)
		}
	})
	return p.stopErr
}

func (p *Prometheus) kill() { killProc(p.cmd) }

// tailBuffer is an io.Writer that keeps the last max bytes written. It is safe for
// concurrent use.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf bytes.Buffer
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Write(p)
	if b.buf.Len() > 2*b.max {
		keep := b.buf.Bytes()[b.buf.Len()-b.max:]
		nb := make([]byte, len(keep), 2*b.max)
		copy(nb, keep)
		b.buf = *bytes.NewBuffer(nb)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.buf.Bytes()
	if len(s) > b.max {
		return "..." + string(s[len(s)-b.max:])
	}
	return string(s)
}
