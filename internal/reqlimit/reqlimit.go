// Package reqlimit bounds the requests a process has in flight to its storage account.
//
// Every tenant's database, query and background loop of a server reaches the account
// through one HTTP client. Without a bound, their fan-outs add up: four tenants' rollups
// (32 writes at once each) and two dozen queries (4 batches at once each, a request or two
// a batch) had over 200 requests in flight in the soak, each on a connection of its own
// with two goroutines, opened and closed again beyond the client's idle pool. A bound makes
// requests wait their turn, in arrival order, and keeps the connections few and reused.
//
// Background work (folds, rollups, compactions, retention) takes at most half the slots:
// its requests, marked with Background, wait for a share of their own before they join
// the queue. A rollup catching up on an hour of 75,000 series sends requests as fast as it
// gets slots; in one FIFO of every request, the remote writes queued behind hundreds of
// them and Prometheus' samples were acknowledged at a thirtieth of their rate (the soak,
// measured). With the share, a write waits behind at most half the limit of background
// requests.
package reqlimit

import (
	"context"
	"io"
	"net/http"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"

	"github.com/seed71701133/tablets/internal/gate"
)

// Transport is a policy.Transporter that lets at most its limit of requests through to
// next at once; the others wait in arrival order, until their context ends. A request
// holds its slot until its response body is read to the end or closed (the connection is
// busy until then), or until next fails. Requests whose context is marked Background hold
// at most BackgroundLimit of the slots and places in the queue. It is safe for concurrent
// use.
type Transport struct {
	next       policy.Transporter
	gate       *gate.Gate
	background *gate.Gate // the share of background requests, taken before gate
}

// New returns a Transport over next admitting limit requests at once (limit < 1 means 1),
// of which BackgroundLimit(limit) background ones.
func New(next policy.Transporter, limit int) *Transport {
	limit = max(limit, 1)
	return &Transport{next: next, gate: gate.New(int64(limit)), background: gate.New(int64(BackgroundLimit(limit)))}
}

// BackgroundLimit is the share of limit slots that background requests may hold: half,
// at least one.
func BackgroundLimit(limit int) int { return max(limit/2, 1) }

type backgroundKey struct{}

// Background marks ctx's requests as background work: they take a slot only within the
// background share.
func Background(ctx context.Context) context.Context {
	return context.WithValue(ctx, backgroundKey{}, true)
}

// IsBackground reports whether ctx is marked Background.
func IsBackground(ctx context.Context) bool {
	b, _ := ctx.Value(backgroundKey{}).(bool)
	return b
}

// Do waits for a slot, then sends req through next. A request whose context ends while it
// waits gets the context's error and is never sent.
func (t *Transport) Do(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	release := func() { t.gate.Release(1) }
	if IsBackground(ctx) {
		if _, err := t.background.Acquire(ctx, 1); err != nil {
			return nil, err
		}
		release = func() {
			t.gate.Release(1)
			t.background.Release(1)
		}
	}
	if _, err := t.gate.Acquire(ctx, 1); err != nil {
		if IsBackground(ctx) {
			t.background.Release(1)
		}
		return nil, err
	}
	resp, err := t.next.Do(req)
	if err != nil || resp == nil || resp.Body == nil {
		release()
		return resp, err
	}
	resp.Body = &releasingBody{ReadCloser: resp.Body, release: release}
	return resp, nil
}

// State returns the requests in flight and those waiting for a slot (or for the
// background share).
func (t *Transport) State() (inFlight, waiting int) {
	used, w := t.gate.State()
	_, bw := t.background.State()
	return int(used), w + bw
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
