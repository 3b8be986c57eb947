package fault

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
)

// Options configures a [Transport]. The zero value injects nothing.
type Options struct {
	// Seed seeds the random source: the same seed and the same sequence of matching
	// requests give the same faults.
	Seed int64
	// FailBefore is the fraction of matching requests answered, without forwarding them,
	// with a 503 ServerBusy or a 500 InternalError (half each).
	FailBefore float64
	// LoseReply is the fraction of matching requests that are forwarded (so the service
	// applies them) and whose reply is then dropped: the caller gets a 500
	// OperationTimedOut, a timeout error or a connection-reset error (a third each).
	LoseReply float64
	// Latency is added before every request (matching or not); a cancelled request context
	// cuts it short.
	Latency time.Duration
	// Match selects the requests that may get faults; nil means all. A test can use it to
	// make one partition always fail, for instance.
	Match func(*http.Request) bool
}

// Transport is a policy.Transporter that injects faults into the requests it forwards to
// the next transporter. It is safe for concurrent use.
//
// For each matching request it draws one number u in [0,1): u < FailBefore fails the
// request before forwarding; FailBefore <= u < FailBefore+LoseReply forwards it and loses
// the reply; otherwise the request passes through untouched.
type Transport struct {
	next policy.Transporter
	opts Options

	mu  sync.Mutex
	rng *rand.Rand

	requests, injected, lost atomic.Int64
}

// New returns a Transport that forwards to next.
func New(next policy.Transporter, opts Options) *Transport {
	seed := uint64(opts.Seed)
	return &Transport{next: next, opts: opts, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

// Requests returns the number of requests seen, matching or not.
func (t *Transport) Requests() int64 { return t.requests.Load() }

// Injected returns the number of requests failed before forwarding (FailBefore).
func (t *Transport) Injected() int64 { return t.injected.Load() }

// Lost returns the number of requests forwarded whose reply was dropped (LoseReply).
func (t *Transport) Lost() int64 { return t.lost.Load() }

// ErrInjected is matched (errors.Is) by every error this package fabricates.
var ErrInjected = errors.New("fault: injected")

type action int

const (
	pass action = iota
	fail503
	fail500
	lose500
	loseTimeout
	loseReset
)

func (t *Transport) draw() action {
	t.mu.Lock()
	defer t.mu.Unlock()
	u := t.rng.Float64()
	switch {
	case u < t.opts.FailBefore:
		return fail503 + action(t.rng.IntN(2))
	case u < t.opts.FailBefore+t.opts.LoseReply:
		return lose500 + action(t.rng.IntN(3))
	}
	return pass
}

// Do applies the latency, then forwards req, fails it or loses its reply.
func (t *Transport) Do(req *http.Request) (*http.Response, error) {
	t.requests.Add(1)
	if t.opts.Latency > 0 {
		timer := time.NewTimer(t.opts.Latency)
		select {
		case <-timer.C:
		case <-req.Context().Done():
			timer.Stop()
			closeBody(req)
			return nil, req.Context().Err()
		}
	}
	a := pass
	if t.opts.Match == nil || t.opts.Match(req) {
		a = t.draw()
	}
	switch a {
	case fail503:
		t.injected.Add(1)
		closeBody(req)
		return serviceError(req, http.StatusServiceUnavailable, "ServerBusy",
			"The server is currently unable to receive requests. Please retry your request."), nil
	case fail500:
		t.injected.Add(1)
		closeBody(req)
		return serviceError(req, http.StatusInternalServerError, "InternalError",
			"Server encountered an internal error. Please try again after some time."), nil
	}

	resp, err := t.next.Do(req)
	if a == pass || err != nil {
		return resp, err // a real failure is passed on as it is, and not counted as lost
	}
	// The service has read the whole request and answered; drop the answer.
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	t.lost.Add(1)
	switch a {
	case lose500:
		return serviceError(req, http.StatusInternalServerError, "OperationTimedOut",
			"Operation could not be completed within the specified time."), nil
	case loseTimeout:
		return nil, &url.Error{Op: urlOp(req), URL: req.URL.String(), Err: &injectedError{
			msg: "fault: injected timeout: reply lost (Client.Timeout exceeded while awaiting headers)", timeout: true}}
	default:
		return nil, &url.Error{Op: urlOp(req), URL: req.URL.String(), Err: &net.OpError{
			Op: "read", Net: "tcp", Addr: hostAddr(req),
			Err: &injectedError{msg: "fault: injected " + syscall.ECONNRESET.Error(), errno: os.NewSyscallError("read", syscall.ECONNRESET)}}}
	}
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// urlOp mimics net/http: "Get", "Post", ...
func urlOp(req *http.Request) string {
	m := req.Method
	if m == "" {
		return "Get"
	}
	return m[:1] + toLower(m[1:])
}

func toLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

type hostAddrT string

func (a hostAddrT) Network() string { return "tcp" }
func (a hostAddrT) String() string  { return string(a) }

func hostAddr(req *http.Request) net.Addr { return hostAddrT(req.URL.Host) }

// injectedError is a fabricated transport error. It reports Timeout() like a net.Error, and
// matches ErrInjected and (for resets) syscall.ECONNRESET with errors.Is.
type injectedError struct {
	msg     string
	timeout bool
	errno   error
}

func (e *injectedError) Error() string        { return e.msg }
func (e *injectedError) Timeout() bool        { return e.timeout }
func (e *injectedError) Temporary() bool      { return true }
func (e *injectedError) Unwrap() error        { return e.errno }
func (e *injectedError) Is(target error) bool { return target == ErrInjected }

var requestIDs atomic.Uint64

// serviceError builds a response shaped like the Table service's error replies (JSON, OData
// minimal metadata).
func serviceError(req *http.Request, status int, code, message string) *http.Response {
	id := requestIDs.Add(1)
	reqID := fmt.Sprintf("fa017000-0000-4000-8000-%012x", id)
	body := fmt.Sprintf(`{"odata.error":{"code":%q,"message":{"lang":"en-US","value":%q}}}`,
		code, message+"\nRequestId:"+reqID+"\nTime:"+time.Now().UTC().Format("2006-01-02T15:04:05.0000000Z"))
	h := http.Header{}
	h.Set("Content-Type", "application/json;odata=minimalmetadata;streaming=true;charset=utf-8")
	h.Set("X-Ms-Error-Code", code)
	h.Set("X-Ms-Request-Id", reqID)
	h.Set("X-Ms-Version", "2019-02-02")
	h.Set("Date", time.Now().UTC().Format(http.TimeFormat))
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("X-Fault-Injected", "true")
	statusText := http.StatusText(status)
	if status == http.StatusServiceUnavailable {
		statusText = "Server Busy"
	}
	return &http.Response{
		Status:        strconv.Itoa(status) + " " + statusText,
		StatusCode:    status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		Body:          io.NopCloser(bytes.NewReader([]byte(body))),
		ContentLength: int64(len(body)),
		Request:       req,
	}
}

// IsInjected reports whether resp was fabricated by a Transport.
func IsInjected(resp *http.Response) bool {
	return resp != nil && resp.Header.Get("X-Fault-Injected") == "true"
}
