package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/exporter-toolkit/web"

	"github.com/seed71701133/tablets"
)

// Defaults of [ServeOptions].
const (
	// DefaultReadHeaderTimeout bounds the time to send a request's headers: a client that
	// trickles them (slow loris) is disconnected after it.
	DefaultReadHeaderTimeout = 10 * time.Second
	// DefaultReadTimeout bounds the time to read a whole request, body included. A remote
	// write body is at most 32 MiB; at 1 Mbit/s that takes 4.5 minutes, so 5 minutes does
	// not cut a legitimate one on a slow link, and still frees a connection whose client
	// stalled mid-body.
	DefaultReadTimeout = 5 * time.Minute
	// DefaultWriteTimeout bounds the time from the end of a request's headers to the end of
	// its answer. It is generous: the query engine has its own timeout, and a client that
	// goes away cancels its request; this only frees a connection whose reader stalled.
	DefaultWriteTimeout = 10 * time.Minute
	// DefaultIdleTimeout is how long a kept-alive connection waits for its next request.
	DefaultIdleTimeout = 2 * time.Minute
	// DefaultMaxHeaderBytes caps a request's header bytes, request line included (a GET
	// query's PromQL is in it; Grafana sends queries by POST).
	DefaultMaxHeaderBytes = 256 << 10
	// DefaultShutdownTimeout is how long a shutdown waits for the requests in flight.
	DefaultShutdownTimeout = 30 * time.Second
)

// InternalPaths are the paths that [ServeOptions.Internal] moves off the public listener:
// the server's own metrics and its probes, for the scraper and the kubelet.
var InternalPaths = []string{"/metrics", "/-/ready", "/-/healthy"}

// ServeOptions configures [Serve]. A nil *ServeOptions, and zero fields, take the defaults.
type ServeOptions struct {
	// WebConfigFile is a web configuration file in Prometheus' format (TLS server
	// certificate, client CA for mutual TLS, basic_auth_users with bcrypt hashes), as
	// Prometheus' --web.config.file. Empty: plain HTTP, no authentication. The file is
	// read again for every new TLS connection and every request's credentials, so a change
	// (a new password, a renewed certificate) takes effect without a restart; a file made
	// invalid fails the requests until it is fixed.
	WebConfigFile string
	// Internal, if not nil, serves [InternalPaths] in plain HTTP without authentication,
	// and the public listener no longer serves them (404). It also serves Go's profiles
	// under /debug/pprof/, which the public listener never does.
	Internal net.Listener

	ReadHeaderTimeout time.Duration // 0: DefaultReadHeaderTimeout
	ReadTimeout       time.Duration // 0: DefaultReadTimeout; negative: none
	WriteTimeout      time.Duration // 0: DefaultWriteTimeout; negative: none
	IdleTimeout       time.Duration // 0: DefaultIdleTimeout
	MaxHeaderBytes    int           // 0: DefaultMaxHeaderBytes
	ShutdownTimeout   time.Duration // 0: DefaultShutdownTimeout

	// Logger receives the listeners' messages; nil discards them.
	Logger *slog.Logger
}

// Serve serves h on public (and its internal paths on opts.Internal, if set) until ctx is
// done, then shuts the listeners down gracefully: new connections are refused and the
// requests in flight get opts.ShutdownTimeout to finish. It closes the listeners. It
// returns nil after a shutdown that finished in time, and otherwise why it stopped. Bad
// options (a web config file that does not load) give an error wrapping
// tablets.ErrInvalidOptions before anything is served.
func Serve(ctx context.Context, public net.Listener, h http.Handler, opts *ServeOptions) error {
	o, err := serveDefaults(opts)
	if err != nil {
		public.Close()
		if opts != nil && opts.Internal != nil {
			opts.Internal.Close()
		}
		return err
	}
	pub := o.httpServer(h)
	servers := []*http.Server{pub}
	errc := make(chan error, 2)
	if o.Internal != nil {
		pub.Handler = withoutPaths(h, InternalPaths)
		in := o.httpServer(withProfiles(onlyPaths(h, InternalPaths)))
		servers = append(servers, in)
		go func() { errc <- in.Serve(o.Internal) }()
	}
	// web.Serve reads the file through the pointer only at start; the handler and the TLS
	// configuration it installs read the file itself again as they serve.
	file := o.WebConfigFile
	flags := &web.FlagConfig{WebConfigFile: &file}
	go func() { errc <- web.Serve(public, pub, flags, o.Logger) }()

	select {
	case err := <-errc: // a listener failed (or the web config is invalid): stop the other
		for _, s := range servers {
			s.Close()
		}
		return err
	case <-ctx.Done():
	}
	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.ShutdownTimeout)
	defer cancel()
	var errs []error
	for _, s := range servers {
		if err := s.Shutdown(shutCtx); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("shutdown: requests still in flight after %v", o.ShutdownTimeout)
		}
		return err
	}
	return nil
}

// CheckWebConfig reads a web configuration file and the certificates it names, as
// [Serve] will, so that a command can refuse a bad one before it starts.
func CheckWebConfig(path string) error {
	if path == "" {
		return nil
	}
	if err := web.Validate(path); err != nil {
		return fmt.Errorf("server: %w: web config %s: %w", tablets.ErrInvalidOptions, path, err)
	}
	return nil
}

func serveDefaults(opts *ServeOptions) (ServeOptions, error) {
	var o ServeOptions
	if opts != nil {
		o = *opts
	}
	if o.ReadHeaderTimeout < 0 || o.IdleTimeout < 0 || o.MaxHeaderBytes < 0 || o.ShutdownTimeout < 0 {
		return o, fmt.Errorf("server: %w: ReadHeaderTimeout, IdleTimeout, MaxHeaderBytes and ShutdownTimeout must not be negative", tablets.ErrInvalidOptions)
	}
	if err := CheckWebConfig(o.WebConfigFile); err != nil {
		return o, err
	}
	o.ReadHeaderTimeout = orDuration(o.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	o.ReadTimeout = orDuration(o.ReadTimeout, DefaultReadTimeout)
	o.WriteTimeout = orDuration(o.WriteTimeout, DefaultWriteTimeout)
	o.IdleTimeout = orDuration(o.IdleTimeout, DefaultIdleTimeout)
	o.ShutdownTimeout = orDuration(o.ShutdownTimeout, DefaultShutdownTimeout)
	if o.MaxHeaderBytes == 0 {
		o.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o, nil
}

// orDuration is d, def when d is 0, and 0 (none, to net/http) when d is negative.
func orDuration(d, def time.Duration) time.Duration {
	switch {
	case d == 0:
		return def
	case d < 0:
		return 0
	}
	return d
}

func (o *ServeOptions) httpServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: o.ReadHeaderTimeout,
		ReadTimeout:       o.ReadTimeout,
		WriteTimeout:      o.WriteTimeout,
		IdleTimeout:       o.IdleTimeout,
		MaxHeaderBytes:    o.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(o.Logger.Handler(), slog.LevelWarn),
	}
}

// withoutPaths answers 404 for paths, and passes the rest to h.
func withoutPaths(h http.Handler, paths []string) http.Handler {
	mux := http.NewServeMux()
	for _, p := range paths {
		mux.Handle(p, http.NotFoundHandler())
	}
	mux.Handle("/", h)
	return mux
}

// onlyPaths passes paths to h and answers 404 for the rest.
func onlyPaths(h http.Handler, paths []string) http.Handler {
	mux := http.NewServeMux()
	for _, p := range paths {
		mux.Handle(p, h)
	}
	return mux
}

// withProfiles adds Go's profiles (net/http/pprof under /debug/pprof/, as Prometheus serves
// them) to the internal listener's handler h. Only there: they are unauthenticated, and a
// CPU profile or trace costs the process while it runs.
func withProfiles(h http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.Handle("/", h)
	return mux
}
