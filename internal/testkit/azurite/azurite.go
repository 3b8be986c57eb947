package azurite

import (
	"context"
	"net/http"

	"github.com/seed71701133/tablets/internal/azurite/runner"
)

// The runner (package [runner]) installs, starts and stops Azurite; these are its API under
// the harness's names, so that tests need import only this package.

// The Azurite development account (a well-known, public key).
const (
	AccountName = runner.AccountName
	AccountKey  = runner.AccountKey
)

// CacheEnv names the environment variable that overrides the install directory.
const CacheEnv = runner.CacheEnv

// MinNodeMajor is the oldest Node.js major version the runner accepts.
const MinNodeMajor = runner.MinNodeMajor

// StartTimeout bounds how long [Start] waits for a started Azurite to answer (the install,
// if needed, is bounded only by the context).
var StartTimeout = runner.StartTimeout

// Server is a running Azurite table service. Stop it with [Server.Stop].
type Server = runner.Server

// Start installs Azurite if needed (see [Install]) and starts an in-memory azurite-table on
// a free port of 127.0.0.1, waiting up to [StartTimeout] for it to answer. See [runner.Start].
func Start(ctx context.Context) (*Server, error) {
	return runner.StartWithin(ctx, StartTimeout)
}

// Install makes sure the pinned Azurite is installed in [CacheDir] and returns the path of
// its azurite-table executable. See [runner.Install].
func Install(ctx context.Context) (string, error) { return runner.Install(ctx) }

// CacheDir returns the directory Azurite is (or will be) installed in. See [runner.CacheDir].
func CacheDir() (string, error) { return runner.CacheDir() }

// DefaultTransport returns the shared HTTP client the harness sends requests with: keep-alive
// connections (up to 64 idle per host, enough for concurrent tests and benchmarks), a 10 s
// dial timeout and a 2 minute limit per request. It is [runner.DefaultTransport].
func DefaultTransport() *http.Client { return runner.DefaultTransport() }
