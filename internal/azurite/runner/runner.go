package runner

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets/internal/proc"
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

	proc *proc.Process
}

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
	s, err := proc.OnFreePort(startAttempts, func(port int) (*Server, error) { return startOn(ctx, bin, port, ready) })
	if err != nil {
		return nil, fmt.Errorf("azurite: %w", err)
	}
	return s, nil
}

func startOn(ctx context.Context, bin string, port int, ready time.Duration) (*Server, error) {
	args := []string{
		"--inMemoryPersistence",
		"--tableHost", "127.0.0.1",
		"--tablePort", strconv.Itoa(port),
		"--disableTelemetry",
		"--silent",
	}
	// In memory, nothing is written: the working directory is proc's default, the temporary
	// directory.
	p, err := proc.Start(bin, args, &proc.Options{TailBytes: 32 << 10, PortInUse: "EADDRINUSE"})
	if err != nil {
		return nil, err
	}
	endpoint := fmt.Sprintf("http://127.0.0.1:%d/%s", port, AccountName)
	s := &Server{
		Endpoint: endpoint,
		ConnectionString: fmt.Sprintf("DefaultEndpointsProtocol=http;AccountName=%s;AccountKey=%s;TableEndpoint=%s;",
			AccountName, AccountKey, endpoint),
		Port: port,
		proc: p,
	}
	if err := p.WaitReady(ctx, ready, s.answering()); err != nil {
		_ = p.Stop(0)
		return nil, err
	}
	return s, nil
}

// Pid is the process ID of the Azurite process: what a benchmark reads the account's CPU
// time of (/proc/PID/stat).
func (s *Server) Pid() int { return s.proc.Pid() }

// answering is Azurite's readiness: it answers on its port with Azurite's Server header
// while our process runs. Since another process could in principle have taken the port,
// the process must also have logged that it started, or have kept answering for a while.
func (s *Server) answering() func(context.Context) bool {
	probe := &http.Client{Timeout: time.Second, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	var since time.Time
	return func(ctx context.Context) bool {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.Endpoint+"/Tables", nil)
		if err != nil {
			return false
		}
		resp, err := probe.Do(req)
		if err != nil {
			since = time.Time{}
			return false
		}
		resp.Body.Close()
		if !strings.HasPrefix(resp.Header.Get("Server"), "Azurite-Table") {
			return false // not Azurite: someone else has the port; wait for our process to fail
		}
		if since.IsZero() {
			since = time.Now()
		}
		return s.proc.OutputContains("successfully started") || time.Since(since) > 2*time.Second
	}
}

// Stop kills Azurite (its whole process group on Unix) and waits for it to exit. It returns
// an error if Azurite had already exited on its own. Stop is idempotent.
func (s *Server) Stop() error {
	if err := s.proc.Stop(0); err != nil {
		return fmt.Errorf("azurite: %w", err)
	}
	return nil
}

// Output returns the last 32 KiB that Azurite wrote to stdout and stderr.
func (s *Server) Output() string { return s.proc.Output() }

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
