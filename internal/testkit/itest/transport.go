package itest

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
)

// Hooked is a transport that runs a hook, once armed, around the request it matches: before
// sending it, or after its reply. The hook runs with the transport disarmed, so the requests
// it makes itself go straight through. Set Next before the first request.
type Hooked struct {
	Next   policy.Transporter
	mu     sync.Mutex
	match  func(*http.Request) bool
	before func()
	after  func()
}

// Arm runs before (if not nil) before sending the next request that match accepts, and
// after (if not nil) after its reply; then the transport is disarmed.
func (h *Hooked) Arm(match func(*http.Request) bool, before, after func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.match, h.before, h.after = match, before, after
}

func (h *Hooked) Do(req *http.Request) (*http.Response, error) {
	h.mu.Lock()
	var before, after func()
	if h.match != nil && h.match(req) {
		before, after = h.before, h.after
		h.match, h.before, h.after = nil, nil, nil
	}
	h.mu.Unlock()
	if before != nil {
		before()
	}
	resp, err := h.Next.Do(req)
	if after != nil {
		after()
	}
	return resp, err
}

// IsBatch reports whether req is an entity group transaction.
func IsBatch(req *http.Request) bool { return strings.HasSuffix(req.URL.Path, "/$batch") }

// PeekBody reads a request's body and puts back an equivalent one (Body and GetBody), so that
// a transport further down still sends it whole.
func PeekBody(req *http.Request) []byte {
	if req.Body == nil || req.Body == http.NoBody {
		return nil
	}
	b, err := io.ReadAll(req.Body)
	req.Body.Close()
	req.Body = io.NopCloser(bytes.NewReader(b))
	if req.GetBody != nil {
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	}
	if err != nil {
		// Cannot happen with the Checker above us (it has buffered the body already); make
		// it loud rather than silently matching nothing.
		panic(fmt.Sprintf("peekBody: %v", err))
	}
	return b
}

// ReplyHook is a transport that calls Hook after every reply, with the request and the
// reply's body (read whole, and given back to the caller as it was).
type ReplyHook struct {
	Next policy.Transporter
	Hook func(req *http.Request, body []byte)
}

func (h ReplyHook) Do(req *http.Request) (*http.Response, error) {
	resp, err := h.Next.Do(req)
	if err != nil {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	h.Hook(req, body)
	return resp, nil
}
