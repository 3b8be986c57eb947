package proc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// helperEnv makes the test binary act as a helper program (see helperMain) instead of
// running the tests.
const helperEnv = "PROC_TEST_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(helperMain(mode, os.Args[1:]))
	}
	os.Exit(m.Run())
}

// helperMain is the helper program:
//   - serve PORT: listen on 127.0.0.1:PORT, print "ready", answer each connection with "hi",
//     and on SIGTERM print "bye" and exit 0 (a port in use prints "EADDRINUSE", exit 1);
//   - stubborn: ignore SIGTERM, print "ready", block until killed;
//   - fail: print "cannot start" and exit 3;
//   - chatter N: print N numbered lines, then "ready", block until killed.
func helperMain(mode string, args []string) int {
	term := make(chan os.Signal, 1)
	switch mode {
	case "serve":
		signal.Notify(term, syscall.SIGTERM)
		l, err := net.Listen("tcp", "127.0.0.1:"+args[0])
		if err != nil {
			fmt.Println("EADDRINUSE:", err)
			return 1
		}
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				fmt.Fprintln(c, "hi")
				c.Close()
			}
		}()
		fmt.Println("ready")
		<-term
		fmt.Println("bye")
		return 0
	case "stubborn":
		signal.Ignore(syscall.SIGTERM)
		fmt.Println("ready")
		select {}
	case "fail":
		fmt.Println("cannot start")
		return 3
	case "chatter":
		n, _ := strconv.Atoi(args[0])
		w := bufio.NewWriter(os.Stdout)
		for i := range n {
			fmt.Fprintf(w, "line %d\n", i)
		}
		fmt.Fprintln(w, "ready")
		w.Flush()
		select {}
	}
	return 2
}

// startHelper starts the test binary as the helper in mode.
func startHelper(t *testing.T, opts *Options, mode string, args ...string) *Process {
	t.Helper()
	t.Setenv(helperEnv, mode)
	p, err := Start(os.Args[0], args, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop(0) })
	return p
}

// printed is a readiness condition: the output contains line.
// printed reports whether p printed line as a whole line: "ready" must not match the
// "address already in use" of a helper that failed.
func printed(p *Process, line string) func(context.Context) bool {
	return func(context.Context) bool {
		out := "\n" + p.Output()
		return strings.Contains(out, "\n"+line+"\n")
	}
}

func TestTailKeepsTheEnd(t *testing.T) {
	tail := NewTail(10)
	fmt.Fprint(tail, "0123456789")
	if got := tail.String(); got != "0123456789" {
		t.Errorf("exactly the bound: %q", got)
	}
	for i := range 100 {
		fmt.Fprintf(tail, "%d,", i)
	}
	if got, want := tail.String(), "...,97,98,99,"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if !tail.Contains("98,99") || tail.Contains("96") {
		t.Errorf("Contains looks beyond the bound: %q", tail.String())
	}
	// After a compaction the bytes kept may equal the bound: still marked as cut.
	small := NewTail(4)
	fmt.Fprint(small, "abcdefghij") // 10 > 2*4: compacted to "ghij"
	if got := small.String(); got != "...ghij" {
		t.Errorf("got %q, want ...ghij", got)
	}
}

func TestServeStopGracefully(t *testing.T) {
	logFile := filepath.Join(t.TempDir(), "helper.log")
	var port int
	p, err := OnFreePort(3, func(pt int) (*Process, error) {
		port = pt
		p := startHelper(t, &Options{LogFile: logFile, PortInUse: "EADDRINUSE"}, "serve", strconv.Itoa(pt))
		return p, p.WaitReady(t.Context(), time.Minute, printed(p, "ready"))
	})
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		t.Fatal(err)
	}
	greeting, _ := bufio.NewReader(c).ReadString('\n')
	c.Close()
	if greeting != "hi\n" {
		t.Errorf("greeting %q", greeting)
	}
	if !strings.HasSuffix(p.Args()[0], filepath.Base(os.Args[0])) || p.Args()[1] != strconv.Itoa(port) {
		t.Errorf("args %q", p.Args())
	}
	if err := p.Stop(time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := p.Stop(time.Minute); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	if !p.Exited() || p.ExitErr() != nil || p.Output() != "ready\nbye\n" {
		t.Errorf("exited %v (%v), output %q", p.Exited(), p.ExitErr(), p.Output())
	}
	if b, err := os.ReadFile(logFile); err != nil || string(b) != "ready\nbye\n" {
		t.Errorf("log file %q, %v", b, err)
	}
}

func TestPortInUse(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	taken := l.Addr().(*net.TCPAddr).Port
	p := startHelper(t, &Options{PortInUse: "EADDRINUSE"}, "serve", strconv.Itoa(taken))
	err = p.WaitReady(t.Context(), time.Minute, printed(p, "ready"))
	if !errors.Is(err, ErrPortInUse) || errors.Is(err, ErrExited) {
		t.Fatalf("got %v, want ErrPortInUse", err)
	}

	// OnFreePort tries another port on ErrPortInUse only, at most attempts times.
	var tried []int
	_, err = OnFreePort(3, func(port int) (int, error) {
		tried = append(tried, port)
		return 0, fmt.Errorf("start: %w", ErrPortInUse)
	})
	if !errors.Is(err, ErrPortInUse) || len(tried) != 3 {
		t.Errorf("%d attempts, err %v; want 3 and ErrPortInUse", len(tried), err)
	}
	tried = nil
	other := errors.New("broken")
	if _, err = OnFreePort(3, func(port int) (int, error) {
		tried = append(tried, port)
		return 0, other
	}); err != other || len(tried) != 1 {
		t.Errorf("%d attempts, err %v; want 1 and the error", len(tried), err)
	}
	got, err := OnFreePort(3, func(port int) (int, error) { return port, nil })
	if err != nil || got <= 0 {
		t.Errorf("port %d, %v", got, err)
	}
}

func TestExitDuringStartup(t *testing.T) {
	p := startHelper(t, nil, "fail")
	err := p.WaitReady(t.Context(), time.Minute, func(context.Context) bool { return false })
	if !errors.Is(err, ErrExited) || !strings.Contains(err.Error(), "exit status 3") || !strings.Contains(err.Error(), "cannot start") {
		t.Fatalf("got %v, want ErrExited with the status and the output", err)
	}
	if err := p.Stop(time.Minute); err == nil || !strings.Contains(err.Error(), "exited before Stop") {
		t.Errorf("Stop after the process ended: %v", err)
	}
}

func TestWaitReadyEnds(t *testing.T) {
	p := startHelper(t, nil, "stubborn")
	never := func(context.Context) bool { return false }
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := p.WaitReady(ctx, time.Minute, never); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled: %v", err)
	}
	if err := p.WaitReady(t.Context(), 10*time.Millisecond, never); err == nil || !strings.Contains(err.Error(), "was not ready within 10ms") {
		t.Errorf("deadline: %v", err)
	}
	var calls atomic.Int64
	if err := p.WaitReady(t.Context(), time.Minute, func(context.Context) bool { return calls.Add(1) == 3 }); err != nil || calls.Load() != 3 {
		t.Errorf("ready on the third call: %v after %d calls", err, calls.Load())
	}
}

func TestStopKillsWhatIgnoresSIGTERM(t *testing.T) {
	p := startHelper(t, nil, "stubborn")
	if err := p.WaitReady(t.Context(), time.Minute, printed(p, "ready")); err != nil {
		t.Fatal(err)
	}
	err := p.Stop(50 * time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "ignored SIGTERM for 50ms and was killed") {
		t.Fatalf("got %v", err)
	}
	if !p.Exited() {
		t.Error("still running")
	}
	// Without a grace period, SIGKILL at once is the plan: no error.
	q := startHelper(t, nil, "stubborn")
	if err := q.WaitReady(t.Context(), time.Minute, printed(q, "ready")); err != nil {
		t.Fatal(err)
	}
	if err := q.Stop(0); err != nil || !q.Exited() {
		t.Errorf("Stop(0): %v, exited %v", err, q.Exited())
	}
}

func TestOutputIsBounded(t *testing.T) {
	p := startHelper(t, &Options{TailBytes: 100}, "chatter", "100000")
	if err := p.WaitReady(t.Context(), time.Minute, printed(p, "ready")); err != nil {
		t.Fatal(err)
	}
	out := p.Output()
	if !strings.HasPrefix(out, "...") || !strings.HasSuffix(out, "line 99999\nready\n") || len(out) != 103 {
		t.Errorf("output %q (%d bytes)", out, len(out))
	}
	if _, err := Start(os.Args[0], nil, &Options{TailBytes: -1}); err == nil {
		t.Error("negative TailBytes accepted")
	}
}

func TestLockExcludes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	unlock, err := Lock(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	// A second Lock (another open file, as another process would have) waits.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := Lock(ctx, path); !errors.Is(err, context.Canceled) {
		t.Fatalf("second Lock while held: %v, want to wait until canceled", err)
	}
	got := make(chan error, 1)
	go func() {
		u, err := Lock(t.Context(), path)
		if err == nil {
			u()
		}
		got <- err
	}()
	unlock()
	if err := <-got; err != nil {
		t.Fatal(err)
	}
}

func TestInstallOnce(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cache")
	stamp := filepath.Join(dir, "stamp")
	installed := func() (bool, error) {
		_, err := os.Stat(stamp)
		return err == nil, nil
	}
	// Leftovers of an interrupted install are removed.
	leftover := filepath.Join(dir, "install-123")
	if err := os.MkdirAll(leftover, 0o755); err != nil {
		t.Fatal(err)
	}
	var runs atomic.Int64
	var tmps sync.Map
	install := func(tmp string) error {
		runs.Add(1)
		tmps.Store(tmp, true)
		if _, err := os.Stat(leftover); !os.IsNotExist(err) {
			return fmt.Errorf("leftover still there: %v", err)
		}
		if err := os.WriteFile(filepath.Join(tmp, "stamp"), nil, 0o644); err != nil {
			return err
		}
		return os.Rename(filepath.Join(tmp, "stamp"), stamp)
	}
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() { errs[i] = Install(t.Context(), dir, installed, install) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if runs.Load() != 1 {
		t.Errorf("installed %d times, want once", runs.Load())
	}
	tmps.Range(func(k, _ any) bool {
		if _, err := os.Stat(k.(string)); !os.IsNotExist(err) {
			t.Errorf("temporary directory %s kept", k)
		}
		return true
	})

	// A failed install is an error, and so is one that does not make installed true.
	never := func() (bool, error) { return false, nil }
	broken := errors.New("no network")
	if err := Install(t.Context(), t.TempDir(), never, func(string) error { return broken }); err != broken {
		t.Errorf("got %v", err)
	}
	if err := Install(t.Context(), t.TempDir(), never, func(string) error { return nil }); err == nil || !strings.Contains(err.Error(), "incomplete") {
		t.Errorf("got %v", err)
	}
	// An error of installed ends Install before anything is done.
	bad := errors.New("foreign install")
	if err := Install(t.Context(), t.TempDir(), func() (bool, error) { return false, bad }, install); err != bad {
		t.Errorf("got %v", err)
	}
}
