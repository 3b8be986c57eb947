package proc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// ErrExited is wrapped by the error of [Process.WaitReady] when the process exits before it
// is ready.
var ErrExited = errors.New("exited during startup")

// DefaultTailBytes is how much of a process's output [Process.Output] keeps when
// [Options.TailBytes] is zero.
const DefaultTailBytes = 32 << 10

// readyPoll is how often [Process.WaitReady] asks whether the process is ready.
const readyPoll = 50 * time.Millisecond

// killWait bounds the wait for a process to exit after SIGKILL.
const killWait = 10 * time.Second

// Options configures [Start]. The zero value (or nil) is fine.
type Options struct {
	// Dir is the process's working directory; "" means os.TempDir(), so that a helper
	// never litters the caller's directory.
	Dir string
	// LogFile, if set, is created (or truncated) and receives all of the process's output;
	// it is closed when the process exits.
	LogFile string
	// TailBytes is how much of the output [Process.Output] keeps; 0 means
	// [DefaultTailBytes].
	TailBytes int
	// PortInUse, if set, is what the process prints when it cannot listen because its port
	// is taken ("EADDRINUSE"): [Process.WaitReady] then returns an error wrapping
	// [ErrPortInUse] instead of [ErrExited].
	PortInUse string
}

// Process is a started program. Stop it with [Process.Stop].
type Process struct {
	cmd       *exec.Cmd
	out       *Tail
	portInUse string
	done      chan struct{} // closed when the process has exited; waitErr is then set
	waitErr   error

	stopOnce sync.Once
	stopErr  error
}

// Start starts path with args in its own process group (on Unix; on Linux it is also killed
// if this process dies), its stdout and stderr going to a bounded tail and to
// opts.LogFile. It returns once the process has started; see [Process.WaitReady].
func Start(path string, args []string, opts *Options) (*Process, error) {
	if opts == nil {
		opts = &Options{}
	}
	if opts.TailBytes < 0 {
		return nil, fmt.Errorf("proc: TailBytes %d is negative", opts.TailBytes)
	}
	tailBytes := opts.TailBytes
	if tailBytes == 0 {
		tailBytes = DefaultTailBytes
	}
	p := &Process{out: NewTail(tailBytes), portInUse: opts.PortInUse, done: make(chan struct{})}
	var out io.Writer = p.out
	var logFile *os.File
	if opts.LogFile != "" {
		f, err := os.Create(opts.LogFile)
		if err != nil {
			return nil, err
		}
		logFile, out = f, io.MultiWriter(f, p.out)
	}
	// Not CommandContext: a context bounds a startup, not the process's life.
	p.cmd = exec.Command(path, args...)
	p.cmd.Dir = opts.Dir
	if p.cmd.Dir == "" {
		p.cmd.Dir = os.TempDir()
	}
	p.cmd.Stdout, p.cmd.Stderr = out, out
	p.cmd.WaitDelay = 2 * time.Second // a grandchild holding the output open does not hang Wait
	setProcAttr(p.cmd)
	if err := p.cmd.Start(); err != nil {
		if logFile != nil {
			logFile.Close()
		}
		return nil, fmt.Errorf("start %s: %w", path, err)
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		if logFile != nil {
			logFile.Close()
		}
		close(p.done)
	}()
	return p, nil
}

// String returns the command line.
func (p *Process) String() string {
	return strings.Join(p.cmd.Args, " ")
}

// Args returns the command line as started, the program first.
func (p *Process) Args() []string { return append([]string(nil), p.cmd.Args...) }

// Pid returns the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Output returns the end of what the process wrote to stdout and stderr.
func (p *Process) Output() string { return p.out.String() }

// OutputContains reports whether the end of the output that [Process.Output] keeps
// contains s.
func (p *Process) OutputContains(s string) bool { return p.out.Contains(s) }

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// ExitErr returns how the process ended (exec.Cmd.Wait's error) once [Process.Done] is
// closed, nil before.
func (p *Process) ExitErr() error {
	if !p.Exited() {
		return nil
	}
	return p.waitErr
}

// WaitReady calls ready every 50 ms until it reports true, and returns an error if the
// process exits first (wrapping [ErrExited], or [ErrPortInUse] if its output says so), if
// ctx ends, or if within passes. Each error carries the output so far.
func (p *Process) WaitReady(ctx context.Context, within time.Duration, ready func(context.Context) bool) error {
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	tick := time.NewTicker(readyPoll)
	defer tick.Stop()
	for {
		select {
		case <-p.done:
			if p.portInUse != "" && p.out.Contains(p.portInUse) {
				return fmt.Errorf("`%s`: %w", p, ErrPortInUse)
			}
			return fmt.Errorf("`%s` %w (%v); output:\n%s", p, ErrExited, p.waitErr, p.Output())
		case <-ctx.Done():
			return fmt.Errorf("waiting for `%s` to be ready: %w; output so far:\n%s", p, ctx.Err(), p.Output())
		case <-deadline.C:
			return fmt.Errorf("`%s` was not ready within %s; output:\n%s", p, within, p.Output())
		case <-tick.C:
		}
		// A process that printed that its port is taken is not ready, whatever ready says,
		// even before it exits.
		if p.portInUse != "" && p.out.Contains(p.portInUse) {
			return fmt.Errorf("`%s`: %w", p, ErrPortInUse)
		}
		if ready(ctx) {
			return nil
		}
	}
}

// Stop ends the process and waits for it to exit. With a grace period it sends SIGTERM
// first (to the process only) and SIGKILL to its process group only if it is still running
// after grace; with none it sends SIGKILL at once. It returns an error if the process had
// exited on its own before, if it exited with an error after SIGTERM, or if it needed
// SIGKILL despite a grace period. Stop is idempotent: later calls return the same error.
func (p *Process) Stop(grace time.Duration) error {
	p.stopOnce.Do(func() { p.stopErr = p.stop(grace) })
	return p.stopErr
}

func (p *Process) stop(grace time.Duration) error {
	if p.Exited() {
		return fmt.Errorf("`%s` exited before Stop (%v); output:\n%s", p, p.waitErr, p.Output())
	}
	termed := grace > 0 && terminate(p.cmd) == nil
	if termed {
		select {
		case <-p.done:
			if p.waitErr != nil {
				return fmt.Errorf("`%s` exited with %v after SIGTERM; output:\n%s", p, p.waitErr, p.Output())
			}
			return nil
		case <-time.After(grace):
		}
	}
	if err := killGroup(p.cmd); err != nil && !p.Exited() {
		return fmt.Errorf("kill `%s`: %w", p, err)
	}
	select {
	case <-p.done:
	case <-time.After(killWait):
		return fmt.Errorf("pid %d (`%s`) did not exit after SIGKILL", p.Pid(), p)
	}
	if termed {
		return fmt.Errorf("`%s` ignored SIGTERM for %s and was killed; output:\n%s", p, grace, p.Output())
	}
	return nil
}
