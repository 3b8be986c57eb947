package runner

import (
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/seed71701133/tablets/internal/connmeter"
)

var (
	defaultTransportOnce sync.Once
	defaultTransport     *http.Client
)

// DefaultTransport returns a shared HTTP client for talking to Azurite (or Azure): keep-alive
// connections (up to 64 idle per host, enough for concurrent tests, benchmarks and the demo),
// a 10 s dial timeout and a 2 minute limit per request. It is a policy.Transporter, for
// aztables.ClientOptions.Transport.
func DefaultTransport() *http.Client {
	defaultTransportOnce.Do(func() { defaultTransport = NewTransport(nil) })
	return defaultTransport
}

// NewTransport returns a new HTTP client configured as DefaultTransport's, its own pool of
// connections. wrap, if not nil, wraps its dialer (to count the connections it opens, as
// the server does).
func NewTransport(wrap func(connmeter.DialFunc) connmeter.DialFunc) *http.Client {
	dial := connmeter.DialFunc((&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext)
	if wrap != nil {
		dial = wrap(dial)
	}
	return &http.Client{
		Timeout: 2 * time.Minute,
		Transport: &http.Transport{
			Proxy:                 http.ProxyFromEnvironment, // never used for 127.0.0.1
			DialContext:           dial,
			MaxIdleConns:          256,
			MaxIdleConnsPerHost:   64,
			IdleConnTimeout:       90 * time.Second,
			ResponseHeaderTimeout: 2 * time.Minute,
			ExpectContinueTimeout: time.Second,
		},
	}
}
