// Package reqlimit bounds the requests a process has in flight to its storage account.
//
// Every tenant's database, query and background loop of a server reaches the account
// through one HTTP client. Without a bound, their fan-outs add up: four tenants' rollups
// (32 writes at once each) and two dozen queries (4 batches at once each, a request or two
// a batch) had over 200 requests in flight in the soak, each on a connection of its own
// with two goroutines, opened and closed again beyond the client's idle pool. A bound makes
// requests wait their turn, in arrival order, and keeps the connections few and reused.
package reqlimit

import (
	"io"
	"net/http"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"

	"github.com/seed71701133/tablets/internal/gate"
)

// Transport is a policy.Transporter that lets at most its limit of requests through to
// next at once; the others wait in arrival order, until their context ends. A request
// holds its slot until its response body is read to the end or closed (the connection is
// busy until then), or until next fails. It is safe for concurrent use.
type Transport struct {
	next policy.Transporter
	gate *gate.Gate
}

// New returns a Transport over next admitting limit requests at once; limit < 1 means 1.
func New(next policy.Transporter, limit int) *Transport {
	return &Transport{next: next, gate: gate.New(int64(max(limit, 1)))}
}

// Do waits for a slot, then sends req through next. A request whose context ends while it
// waits gets the context's error and is never sent.
func (t *Transport) Do(req *http.Request) (*http.Response, error) {
	if _, err := t.gate.Acquire(req.Context(), 1); err != nil {
		return nil, err
	}
	resp, err := t.next.Do(req)
	if err != nil || resp == nil || resp.Body == nil {
		t.gate.Release(1)
		return resp, err
	}
	resp.Body = &releasingBody{ReadCloser: resp.Body, release: func() { t.gate.Release(1) }}
	return resp, nil
}

// State returns the requests in flight and those waiting for a slot.
func (t *Transport) State() (inFlight, waiting int) {
	used, w := t.gate.State()
	return int(used), w
}

// releasingBody gives its request's slot back, once, at the end of the body or on Close.
type releasingBody struct {
	io.ReadCloser
	once    sync.Once
	release func()
}

func (b *releasingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.once.Do(b.release)
	}
	return n, err
}

func (b *releasingBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.release)
	return err
}
