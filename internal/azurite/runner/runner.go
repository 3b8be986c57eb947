package runner

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
)

// The Azurite development account (a well-known, public key).
const (
	AccountName = "devstoreaccount1"
	AccountKey  = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)

// StartTimeout bounds how long [Start] waits for a started Azurite to answer (the install,
// if needed, is bounded only by the context). [StartWithin] takes the bound as an argument.
var StartTimeout = 60 * time.Second

// startAttempts is how many free ports Start tries when another process takes the port
// between our probe and Azurite's listen.
const startAttempts = 5

// Server is a running Azurite table service. Stop it with [Server.Stop].
type Server struct {
	// Endpoint is the table service URL of the dev account,
	// http://127.0.0.1:PORT/devstoreaccount1.
	Endpoint string
	// ConnectionString is an Azure Storage connection string for the dev account, for
	// aztables.NewServiceClientFromConnectionString.
	ConnectionString string
	// Port is the TCP port on 127.0.0.1.
	Port int

	cmd      *exec.Cmd
	ready    time.Duration // how long waitReady waits
	out      *tailBuffer
	done     chan struct{} // closed when the process has exited; waitErr is then set
	waitErr  error
	stopOnce sync.Once
	stopErr  error
}

var errPortInUse = errors.New("port in use")

// Start installs Azurite if needed (see [Install]) and starts an in-memory azurite-table on
// a free port of 127.0.0.1. It returns once the service answers HTTP requests. ctx bounds
// the install and the startup, not the server's life: call [Server.Stop] to end it. On
// Linux the server is also killed if this process dies.
func Start(ctx context.Context) (*Server, error) {
	return StartWithin(ctx, StartTimeout)
}

// StartWithin is [Start] with its own bound on the wait for the started Azurite to answer,
// instead of [StartTimeout].
func StartWithin(ctx context.Context, ready time.Duration) (*Server, error) {
	bin, err := Install(ctx)
	if err != nil {
		return nil, err
	}
	for attempt := 1; ; attempt++ {
		port, err := freePort()
		if err != nil {
			return nil, fmt.Errorf("azurite: find a free port: %w", err)
		}
		s, err := startOn(ctx, bin, port, ready)
		if err == nil {
			return s, nil
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

func startOn(ctx context.Context, bin string, port int, ready time.Duration) (*Server, error) {
	args := []string{
		"--inMemoryPersistence",
		"--tableHost", "127.0.0.1",
		"--tablePort", strconv.Itoa(port),
		"--disableTelemetry",
		"--silent",
	}
	// Not CommandContext: ctx bounds the startup only, the server outlives it.
	cmd := exec.Command(bin, args...)
	cmd.Dir = os.TempDir() // in-memory: nothing is written, but never litter the caller's cwd
	out := &tailBuffer{max: 32 << 10}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.WaitDelay = 2 * time.Second
	setProcAttr(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("azurite: start %s: %w", bin, err)
	}
	endpoint := fmt.Sprintf("http://127.0.0.1:%d/%s", port, AccountName)
	s := &Server{
		Endpoint: endpoint,
		ConnectionString: fmt.Sprintf("DefaultEndpointsProtocol=http;AccountName=%s;AccountKey=%s;TableEndpoint=%s;",
			AccountName, AccountKey, endpoint),
		Port:  port,
		cmd:   cmd,
		ready: ready,
		out:   out,
		done:  make(chan struct{}),
	}
	go func() {
		s.waitErr = cmd.Wait()
		close(s.done)
	}()
	if err := s.waitReady(ctx); err != nil {
		_ = s.Stop()
		return nil, err
	}
	return s, nil
}

// waitReady waits until Azurite answers on its port. The answer must carry Azurite's Server
// header and our process must still be running; since another process could in principle
// have taken the port, the process must also have logged that it started, or have kept
// answering for a while.
func (s *Server) waitReady(ctx context.Context) error {
	cmdline := s.cmd.Path + " " + strings.Join(s.cmd.Args[1:], " ")
	deadline := time.NewTimer(s.ready)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	probe := &http.Client{Timeout: time.Second, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	var answering time.Time
	for {
		select {
		case <-s.done:
			if strings.Contains(s.out.String(), "EADDRINUSE") {
				return fmt.Errorf("azurite: %w: %d", errPortInUse, s.Port)
			}
			return fmt.Errorf("azurite: `%s` exited during startup (%v); output:\n%s", cmdline, s.waitErr, s.out.String())
		case <-ctx.Done():
			return fmt.Errorf("azurite: waiting for `%s` to answer: %w; output so far:\n%s", cmdline, ctx.Err(), s.out.String())
		case <-deadline.C:
			return fmt.Errorf("azurite: `%s` did not answer on 127.0.0.1:%d within %s; output:\n%s",
				cmdline, s.Port, s.ready, s.out.String())
		case <-tick.C:
		}
		resp, err := probe.Get(s.Endpoint + "/Tables")
		if err != nil {
			answering = time.Time{}
			continue
		}
		resp.Body.Close()
		if !strings.HasPrefix(resp.Header.Get("Server"), "Azurite-Table") {
			continue // not Azurite: someone else has the port; wait for our process to fail
		}
		if answering.IsZero() {
			answering = time.Now()
		}
		if strings.Contains(s.out.String(), "successfully started") || time.Since(answering) > 2*time.Second {
			return nil
		}
	}
}

// Stop kills Azurite (its whole process group on Unix) and waits for it to exit. It returns
// an error if Azurite had already exited on its own. Stop is idempotent.
func (s *Server) Stop() error {
	s.stopOnce.Do(func() {
		select {
		case <-s.done:
			s.stopErr = fmt.Errorf("azurite: exited before Stop (%v); output:\n%s", s.waitErr, s.out.String())
			return
		default:
		}
		if err := killProc(s.cmd); err != nil {
			s.stopErr = fmt.Errorf("azurite: kill: %w", err)
		}
		select {
		case <-s.done:
		case <-time.After(10 * time.Second):
			s.stopErr = fmt.Errorf("azurite: pid %d did not exit after SIGKILL", s.cmd.Process.Pid)
		}
	})
	return s.stopErr
}

// Output returns the last 32 KiB that Azurite wrote to stdout and stderr.
func (s *Server) Output() string { return s.out.String() }

// Credential returns a shared key credential for the dev account.
func (s *Server) Credential() *aztables.SharedKeyCredential {
	cred, err := aztables.NewSharedKeyCredential(AccountName, AccountKey)
	if err != nil {
		panic(err) // the key is a constant
	}
	return cred
}

// NewServiceClient returns a shared key service client for the dev account.
func (s *Server) NewServiceClient(opts *aztables.ClientOptions) (*aztables.ServiceClient, error) {
	return aztables.NewServiceClientWithSharedKey(s.Endpoint, s.Credential(), opts)
}

// NewClient returns a shared key client for table (which need not exist yet) on the dev
// account.
func (s *Server) NewClient(table string, opts *aztables.ClientOptions) (*aztables.Client, error) {
	return aztables.NewClientWithSharedKey(s.Endpoint+"/"+table, s.Credential(), opts)
}
