// Package meter counts what goes over the wire at the HTTP transport: requests (every
// attempt, when it sits below the SDK's retry policy), request body bytes sent and response
// body bytes received. The command's account metrics and the test harness's Checker both
// count with it, so that a byte figure means the same thing in both.
package meter

import (
	"bytes"
	"io"
	"net/http"
	"sync/atomic"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
)

// Counts is a snapshot of a [Meter].
type Counts struct {
	Requests      int64 // requests sent (each attempt of a retried call)
	BytesSent     int64 // request body bytes
	BytesReceived int64 // response body bytes, as the caller reads them
}

// Sub returns c minus o: what was counted between two snapshots.
func (c Counts) Sub(o Counts) Counts {
	return Counts{c.Requests - o.Requests, c.BytesSent - o.BytesSent, c.BytesReceived - o.BytesReceived}
}

// Meter counts requests and body bytes. The zero value is ready to use; it is safe for
// concurrent use.
type Meter struct {
	requests, sent, received atomic.Int64
}

// Send counts req and its body, sends it with next and counts the response body as it is
// read (a body never read is not counted: the bytes the client took from the network are).
func (m *Meter) Send(next policy.Transporter, req *http.Request) (*http.Response, error) {
	m.requests.Add(1)
	switch {
	case req.Body == nil || req.Body == http.NoBody:
	case req.ContentLength > 0:
		m.sent.Add(req.ContentLength)
	default: // a body of unknown length (0 with a body means unknown): read it to count it
		body, err := ReadBody(req)
		if err != nil {
			return nil, err
		}
		m.sent.Add(int64(len(body)))
	}
	resp, err := next.Do(req)
	if resp != nil && resp.Body != nil && resp.Body != http.NoBody {
		resp.Body = &countingBody{ReadCloser: resp.Body, n: &m.received}
	}
	return resp, err
}

// Counts returns the counts since the Meter was made or last [Meter.Reset].
func (m *Meter) Counts() Counts {
	return Counts{m.requests.Load(), m.sent.Load(), m.received.Load()}
}

// Reset zeroes the counts.
func (m *Meter) Reset() {
	m.requests.Store(0)
	m.sent.Store(0)
	m.received.Store(0)
}

// countingBody counts the bytes of a response body as the client reads them.
type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

// ReadBody reads req's body and puts back an equivalent one (Body and GetBody), so that the
// request can still be sent, and retried. A request without a body gives nil.
func ReadBody(req *http.Request) ([]byte, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return nil, nil
	}
	b, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return nil, err
	}
	req.Body = io.NopCloser(bytes.NewReader(b))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	return b, nil
}
