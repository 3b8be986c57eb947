package soak

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"time"
)

// Front is a round-robin HTTP front of several servers, as a load balancer without session
// affinity: each request goes to the next backend in turn, so consecutive requests of one
// client reach different servers. A soak of several servers on one database behind it
// checks that no server answers from a cache of something another server changed.
//
// Requests are forwarded unchanged (method, path, query, body, and headers such as
// X-Scope-OrgID and Authorization) except for the hop-by-hop headers, as any reverse proxy
// does; no X-Forwarded-For is added. A backend that cannot be reached answers 502 Bad
// Gateway, as a load balancer does, and the request is not tried on another backend: the
// client retries it (remote write retries a 5xx).
type Front struct {
	listener net.Listener
	srv      *http.Server
	url      string
	next     atomic.Uint64 // the requests routed so far; the next one goes to next % len(backends)

	mu       sync.RWMutex
	backends []*url.URL
	routed   []atomic.Int64 // requests routed to each backend since SetBackends
}

// NewFront listens on a free port of 127.0.0.1 and forwards every request to one of
// backends (base URLs, http://host:port), in turn.
func NewFront(backends []string) (*Front, error) {
	f := &Front{}
	if err := f.SetBackends(backends); err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("front: %w", err)
	}
	f.listener, f.url = l, "http://"+l.Addr().String()
	proxy := &httputil.ReverseProxy{
		Rewrite: f.rewrite,
		Transport: &http.Transport{
			// A backend down refuses at once; one that does not answer the dial at all (not
			// on 127.0.0.1, but bounded anyway) gives up after this instead of hanging.
			DialContext: (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
			// As many idle connections to each server as the soak's client keeps to the
			// front: without them, every request of the load would open a connection.
			MaxIdleConnsPerHost: 64,
			IdleConnTimeout:     90 * time.Second,
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
				return // the client went away: nobody reads an answer
			}
			http.Error(w, fmt.Sprintf("front: %s: %v", r.URL.Host, err), http.StatusBadGateway)
		},
		ErrorLog: log.New(io.Discard, "", 0), // the errors are answered 502, counted by the clients
	}
	// No timeouts: a query may take the server's 2-minute query timeout to answer.
	f.srv = &http.Server{Handler: proxy, ReadHeaderTimeout: time.Minute}
	go func() { _ = f.srv.Serve(l) }()
	return f, nil
}

// URL is the front's base URL, http://host:port; it stays the same across SetBackends.
func (f *Front) URL() string { return f.url }

// SetBackends replaces the servers the front forwards to (when the soak restarts them:
// the clients keep the front's URL) and restarts the counts of Routed.
func (f *Front) SetBackends(backends []string) error {
	if len(backends) == 0 {
		return errors.New("front: no backend")
	}
	us := make([]*url.URL, len(backends))
	for i, b := range backends {
		u, err := url.Parse(b)
		if err != nil || u.Scheme == "" || u.Host == "" {
			return fmt.Errorf("front: backend %q is not a base URL", b)
		}
		us[i] = u
	}
	f.mu.Lock()
	f.backends, f.routed = us, make([]atomic.Int64, len(us))
	f.mu.Unlock()
	return nil
}

// Routed is how many requests the front sent to each backend since SetBackends, in the
// backends' order.
func (f *Front) Routed() []int64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	n := make([]int64, len(f.routed))
	for i := range f.routed {
		n[i] = f.routed[i].Load()
	}
	return n
}

// rewrite sends the request to the next backend.
func (f *Front) rewrite(r *httputil.ProxyRequest) {
	f.mu.RLock()
	i := int((f.next.Add(1) - 1) % uint64(len(f.backends)))
	backend := f.backends[i]
	f.routed[i].Add(1)
	f.mu.RUnlock()
	r.SetURL(backend)
}

// Close stops the front and closes its connections, answered or not.
func (f *Front) Close() error { return f.srv.Close() }
