package fault

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/stretchr/testify/require"
)

// fakeNext records what reaches it (reading each body to the end) and answers 204.
type fakeNext struct {
	mu     sync.Mutex
	calls  int
	bodies []string
	paths  []string
}

func (f *fakeNext) Do(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		var err error
		if body, err = io.ReadAll(req.Body); err != nil {
			return nil, err
		}
	}
	f.mu.Lock()
	f.calls++
	f.bodies = append(f.bodies, string(body))
	f.paths = append(f.paths, req.URL.Path)
	f.mu.Unlock()
	return &http.Response{StatusCode: http.StatusNoContent, Status: "204 No Content", Header: http.Header{},
		Body: io.NopCloser(strings.NewReader("")), Request: req}, nil
}

func (f *fakeNext) Calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

func newRequest(t *testing.T, ctx context.Context, path, body string) *http.Request {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://127.0.0.1:1/devstoreaccount1/"+path, strings.NewReader(body))
	require.NoError(t, err)
	return req
}

type outcome struct{ pass, fail503, fail500, lost500, timeout, reset int }

func run(t *testing.T, tr *Transport, n int, path func(i int) string) outcome {
	var o outcome
	for i := range n {
		resp, err := tr.Do(newRequest(t, t.Context(), path(i), "x"))
		var ne net.Error
		switch {
		case err == nil && resp.StatusCode == http.StatusNoContent:
			o.pass++
		case err == nil && resp.StatusCode == http.StatusServiceUnavailable:
			o.fail503++
		case err == nil && resp.Header.Get("x-ms-error-code") == "InternalError":
			o.fail500++
		case err == nil && resp.Header.Get("x-ms-error-code") == "OperationTimedOut":
			o.lost500++
		case errors.As(err, &ne) && ne.Timeout():
			o.timeout++
		case errors.Is(err, syscall.ECONNRESET):
			o.reset++
		default:
			t.Fatalf("unexpected outcome: %v %v", resp, err)
		}
		if err == nil {
			resp.Body.Close()
		} else {
			require.ErrorIs(t, err, ErrInjected)
		}
	}
	return o
}

func TestRates(t *testing.T) {
	tests := []struct {
		name                  string
		failBefore, loseReply float64
	}{
		{"none", 0, 0},
		{"fail only", 0.2, 0},
		{"lose only", 0, 0.3},
		{"both", 0.1, 0.25},
		{"always fail", 1, 0},
		{"always lose", 0, 1},
	}
	const n = 6000
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			next := &fakeNext{}
			tr := New(next, Options{Seed: 42, FailBefore: tc.failBefore, LoseReply: tc.loseReply})
			o := run(t, tr, n, func(int) string { return "tbl" })

			failed := o.fail503 + o.fail500
			lost := o.lost500 + o.timeout + o.reset
			require.Equal(t, n, o.pass+failed+lost)
			require.EqualValues(t, failed, tr.Injected())
			require.EqualValues(t, lost, tr.Lost())
			require.EqualValues(t, n, tr.Requests())
			require.Equal(t, n-failed, next.Calls(), "every request but the failed-before ones reached next")

			require.InDelta(t, tc.failBefore, float64(failed)/n, 0.02)
			require.InDelta(t, tc.loseReply, float64(lost)/n, 0.02)
			// each kind gets its share
			if failed > 0 {
				require.InDelta(t, 0.5, float64(o.fail503)/float64(failed), 0.05)
			}
			if lost > 0 {
				for _, k := range []int{o.lost500, o.timeout, o.reset} {
					require.InDelta(t, 1.0/3, float64(k)/float64(lost), 0.05)
				}
			}
		})
	}
}

func TestSeedDeterminism(t *testing.T) {
	opts := Options{Seed: 7, FailBefore: 0.3, LoseReply: 0.3}
	a := run(t, New(&fakeNext{}, opts), 500, func(int) string { return "tbl" })
	b := run(t, New(&fakeNext{}, opts), 500, func(int) string { return "tbl" })
	require.Equal(t, a, b)
	opts.Seed = 8
	c := run(t, New(&fakeNext{}, opts), 500, func(int) string { return "tbl" })
	require.NotEqual(t, a, c)
}

func TestMatch(t *testing.T) {
	next := &fakeNext{}
	tr := New(next, Options{Seed: 1, FailBefore: 1, Match: func(r *http.Request) bool {
		return strings.HasSuffix(r.URL.Path, "/bad")
	}})
	o := run(t, tr, 100, func(i int) string {
		if i%4 == 0 {
			return "bad"
		}
		return "good"
	})
	require.Equal(t, 25, o.fail503+o.fail500)
	require.Equal(t, 75, o.pass)
	require.Equal(t, 75, next.Calls())
	for _, p := range next.paths {
		require.True(t, strings.HasSuffix(p, "/good"), p)
	}
}

func TestLostReplyReachedNext(t *testing.T) {
	next := &fakeNext{}
	tr := New(next, Options{Seed: 3, LoseReply: 1})
	for i := range 30 {
		body := fmt.Sprintf(`{"PartitionKey":"p","RowKey":"%d"}`, i)
		resp, err := tr.Do(newRequest(t, t.Context(), "tbl", body))
		if err == nil {
			require.Equal(t, http.StatusInternalServerError, resp.StatusCode)
		}
		require.Equal(t, i+1, next.Calls())
		require.Equal(t, body, next.bodies[i], "next received the whole body")
	}
	require.EqualValues(t, 30, tr.Lost())
	require.Zero(t, tr.Injected())
}

func TestFailBeforeDoesNotForward(t *testing.T) {
	next := &fakeNext{}
	tr := New(next, Options{FailBefore: 1})
	resp, err := tr.Do(newRequest(t, t.Context(), "tbl", "x"))
	require.NoError(t, err)
	require.Zero(t, next.Calls())
	require.True(t, IsInjected(resp))
	require.Contains(t, resp.Header.Get("Content-Type"), "application/json;odata=minimalmetadata")
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Regexp(t, `^\{"odata.error":\{"code":"(ServerBusy|InternalError)","message":\{"lang":"en-US","value":".+"\}\}\}$`, string(body))
	require.Equal(t, resp.Header.Get("x-ms-error-code"), map[int]string{503: "ServerBusy", 500: "InternalError"}[resp.StatusCode])
}

func TestLatency(t *testing.T) {
	next := &fakeNext{}
	tr := New(next, Options{Latency: 30 * time.Millisecond})
	start := time.Now()
	resp, err := tr.Do(newRequest(t, t.Context(), "tbl", "x"))
	require.NoError(t, err)
	resp.Body.Close()
	require.GreaterOrEqual(t, time.Since(start), 30*time.Millisecond)

	slow := New(next, Options{Latency: time.Hour})
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	start = time.Now()
	_, err = slow.Do(newRequest(t, ctx, "tbl", "x"))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(start), time.Second)
	require.Equal(t, 1, next.Calls(), "the cancelled request was not forwarded")
}

// TestWithSDK drives the Transport through an aztables client: the fabricated replies must
// parse as the service's would, and retries must see them.
func TestWithSDK(t *testing.T) {
	newClient := func(tr policy.Transporter, retries int32) *aztables.Client {
		cred, err := aztables.NewSharedKeyCredential("devstoreaccount1",
			"Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==")
		require.NoError(t, err)
		c, err := aztables.NewClientWithSharedKey("http://127.0.0.1:1/devstoreaccount1/tbl", cred,
			&aztables.ClientOptions{ClientOptions: policy.ClientOptions{Transport: tr,
				Retry: policy.RetryOptions{MaxRetries: retries, RetryDelay: time.Millisecond, MaxRetryDelay: time.Millisecond}}})
		require.NoError(t, err)
		return c
	}
	entity := []byte(`{"PartitionKey":"p","RowKey":"r"}`)

	t.Run("error code", func(t *testing.T) {
		next := &fakeNext{}
		_, err := newClient(New(next, Options{Seed: 2, FailBefore: 1}), -1).UpsertEntity(t.Context(), entity, nil)
		var re *azcore.ResponseError
		require.ErrorAs(t, err, &re)
		require.Contains(t, []string{"ServerBusy", "InternalError"}, re.ErrorCode)
		require.Zero(t, next.Calls())
	})
	t.Run("retries lost replies", func(t *testing.T) {
		var n atomic.Int64
		next := &fakeNext{}
		// lose the first two replies of the upsert, then let it through
		tr := New(next, Options{Seed: 5, LoseReply: 1, Match: func(*http.Request) bool { return n.Add(1) <= 2 }})
		_, err := newClient(tr, 5).UpsertEntity(t.Context(), entity, nil)
		require.NoError(t, err)
		require.EqualValues(t, 2, tr.Lost())
		require.Equal(t, 3, next.Calls(), "the service applied the write three times")
		for _, b := range next.bodies {
			require.JSONEq(t, string(entity), b)
		}
	})
}
