package batch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
)

func TestLastWins(t *testing.T) {
	require.Equal(t, []int{}, LastWins(nil))
	// Times 5, 3, 5, 1, 3: the later argument of each time, in time order.
	require.Equal(t, []int{3, 4, 2}, LastWins([]uint64{5, 3, 5, 1, 3}))
}

func TestWriteError(t *testing.T) {
	points := []tablets.Point{{Time: time.Unix(1, 0)}, {Time: time.Unix(2, 0)}, {Time: time.Unix(3, 0)}}
	require.NoError(t, WriteError("s", points, []error{nil, nil}, func(int) bool { return true }))
	cause := &Error{Code: "ServerBusy", Index: 4, Err: errors.New("busy")}
	err := WriteError("s", points, []error{nil, cause}, func(i int) bool { return i != 1 })
	var we *tablets.WriteError
	require.ErrorAs(t, err, &we)
	require.Equal(t, []tablets.Point{points[0], points[2]}, we.Failed)
	require.Equal(t, "ServerBusy", we.Code)
	require.Equal(t, 4, we.Index)
	require.ErrorIs(t, err, cause)
}

// A failed transaction's reply as the service sends it: 202 Accepted, a batch holding a
// changeset holding the failed operation's response.
const batchReply = "--batchresponse_1\r\n" +
	"Content-Type: multipart/mixed; boundary=changesetresponse_2\r\n\r\n" +
	"--changesetresponse_2\r\n" +
	"Content-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\n" +
	"HTTP/1.1 404 Not Found\r\nContent-Type: application/json;odata=minimalmetadata;charset=utf-8\r\n\r\n" +
	`{"odata.error":{"code":"ResourceNotFound","message":{"lang":"en-US","value":"2:The specified resource does not exist.\nRequestId:x"}}}` + "\r\n" +
	"--changesetresponse_2--\r\n" +
	"--batchresponse_1--\r\n"

func TestExplainParsesBatchReply(t *testing.T) {
	resp := &http.Response{
		StatusCode: http.StatusAccepted,
		Header:     http.Header{"Content-Type": {"multipart/mixed; boundary=batchresponse_1"}},
		Body:       io.NopCloser(bytes.NewReader([]byte(batchReply))),
		Request:    &http.Request{Method: http.MethodPost},
	}
	err := Explain(&azcore.ResponseError{StatusCode: http.StatusAccepted, RawResponse: resp})
	var be *Error
	require.ErrorAs(t, err, &be)
	require.Equal(t, "ResourceNotFound", be.Code)
	require.Equal(t, 2, be.Index)
	require.Equal(t, http.StatusNotFound, be.Status)
	var re *azcore.ResponseError
	require.ErrorAs(t, err, &re)

	// Not the service's answer: unchanged.
	plain := errors.New("dial tcp: refused")
	require.Equal(t, plain, Explain(plain))
}

// IsConflict tells a write that lost to a concurrent change from any other failure.
func TestIsConflict(t *testing.T) {
	re := func(status int) error { return &azcore.ResponseError{StatusCode: status} }
	for _, c := range []struct {
		err  error
		want bool
	}{
		{re(http.StatusPreconditionFailed), true},
		{re(http.StatusNotFound), true},
		{re(http.StatusConflict), true},
		{fmt.Errorf("wrapped: %w", re(http.StatusPreconditionFailed)), true},
		{&Error{Status: http.StatusPreconditionFailed, Index: 3, Err: re(http.StatusAccepted)}, true},
		{&Error{Code: "EntityAlreadyExists", Index: 0, Err: re(http.StatusAccepted)}, true},
		{&Error{Code: "InvalidInput", Status: http.StatusBadRequest, Err: re(http.StatusAccepted)}, false},
		{re(http.StatusServiceUnavailable), false},
		{errors.New("network"), false},
		{nil, false},
	} {
		require.Equal(t, c.want, IsConflict(c.err), "%v", c.err)
	}
}

// A successful batch reply, as the service frames it: the ETag of each operation, in order.
func TestReplyETags(t *testing.T) {
	part := func(status, etag string) string {
		s := "--changesetresponse_c\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\n" +
			"HTTP/1.1 " + status + "\r\nX-Content-Type-Options: nosniff\r\nCache-Control: no-cache\r\nDataServiceVersion: 1.0;\r\n"
		if etag != "" {
			s += "ETag: " + etag + "\r\n"
		}
		return s + "\r\n\r\n"
	}
	reply := func(parts ...string) []byte {
		return []byte("--batchresponse_b\r\nContent-Type: multipart/mixed; boundary=changesetresponse_c\r\n\r\n" +
			strings.Join(parts, "") + "--changesetresponse_c--\r\n--batchresponse_b--\r\n")
	}
	const ct = "multipart/mixed; boundary=batchresponse_b"
	e1, e2 := `W/"datetime'2024-05-23T00%3A05%3A30.2Z'"`, `W/"datetime'2024-05-23T00%3A05%3A30.3Z'"`
	if got := replyETags(reply(part("204 No Content", e1), part("204 No Content", e2)), ct, 2); !slices.Equal(got, []string{e1, e2}) {
		t.Fatalf("got %q", got)
	}
	for name, body := range map[string][]byte{
		"one missing":   reply(part("204 No Content", e1), part("204 No Content", "")),
		"too few":       reply(part("204 No Content", e1)),
		"a failure":     reply(part("204 No Content", e1), part("409 Conflict", e2)),
		"an error body": []byte(`{"odata.error":{"code":"X"}}`),
		"empty":         nil,
	} {
		if got := replyETags(body, ct, 2); got != nil {
			t.Errorf("%s: got %q, want none", name, got)
		}
	}
}

// Run does one transaction in the caller's goroutine (a fold's many series, one
// transaction each, took a goroutine more apiece), and more each in its own, at most
// concurrency at once; once ctx is done, what is not started gets its error.
func TestRunGoroutines(t *testing.T) {
	ctx := context.Background()
	caller := goroutineID()
	var in []uint64
	errs := Run(ctx, 8, 1, func(ctx context.Context, i int) error { in = append(in, goroutineID()); return errBoom })
	require.Equal(t, []error{errBoom}, errs)
	require.Equal(t, []uint64{caller}, in, "one transaction in the caller's goroutine")

	var mu sync.Mutex
	running, most := 0, 0
	errs = Run(ctx, 2, 6, func(ctx context.Context, i int) error {
		mu.Lock()
		running++
		most = max(most, running)
		in = append(in, goroutineID())
		mu.Unlock()
		time.Sleep(time.Millisecond)
		mu.Lock()
		running--
		mu.Unlock()
		return nil
	})
	require.Equal(t, make([]error, 6), errs)
	require.LessOrEqual(t, most, 2)
	require.NotContains(t, in[1:], caller, "several transactions in goroutines of their own")

	done, cancel := context.WithCancel(ctx)
	cancel()
	calls := 0
	for _, n := range []int{1, 3} {
		errs = Run(done, 1, n, func(ctx context.Context, i int) error { calls++; return nil })
		for _, err := range errs {
			require.ErrorIs(t, err, context.Canceled)
		}
	}
	require.Zero(t, calls, "nothing started once ctx is done")
}

var errBoom = errors.New("boom")

// goroutineID is the calling goroutine's number, from its stack's first line.
func goroutineID() uint64 {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	id, _ := strconv.ParseUint(strings.Fields(string(buf))[1], 10, 64)
	return id
}

// RunPaced begins its transactions evenly over its span, whatever their concurrency
// allows: transaction i of 8 over 8 s at i seconds, though 4 may run at once and each
// takes 100 ms. A slow one holds its slot all the same (transactions of 3 s, 2 at once:
// the third waits for the first to end). Cancelled while waiting, the rest get ctx's
// error and none begins; a span of 0 is Run's.
func TestRunPaced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		began := time.Now()
		var mu sync.Mutex
		at := make([]time.Duration, 8)
		errs := RunPaced(ctx, 4, 8, 8*time.Second, func(ctx context.Context, i int) error {
			mu.Lock()
			at[i] = time.Since(began)
			mu.Unlock()
			time.Sleep(100 * time.Millisecond)
			return nil
		})
		require.Equal(t, make([]error, 8), errs)
		for i, d := range at {
			require.Equal(t, time.Duration(i)*time.Second, d, "transaction %d", i)
		}
		require.Equal(t, 7100*time.Millisecond, time.Since(began), "the last begins at 7 s and takes 100 ms")

		began = time.Now()
		_ = RunPaced(ctx, 2, 4, 4*time.Second, func(ctx context.Context, i int) error {
			mu.Lock()
			at[i] = time.Since(began)
			mu.Unlock()
			time.Sleep(3 * time.Second)
			return nil
		})
		require.Equal(t, []time.Duration{0, time.Second, 3 * time.Second, 4 * time.Second}, at[:4], "the third waits for a slot")

		cctx, cancel := context.WithCancel(ctx)
		began = time.Now()
		var calls atomic.Int32
		time.AfterFunc(2500*time.Millisecond, cancel)
		errs = RunPaced(cctx, 4, 5, 5*time.Second, func(ctx context.Context, i int) error { calls.Add(1); return nil })
		require.Equal(t, int32(3), calls.Load(), "0, 1 and 2 began before the cancel")
		require.Equal(t, []error{nil, nil, nil, context.Canceled, context.Canceled}, errs)
		require.Equal(t, 2500*time.Millisecond, time.Since(began), "no wait after the cancel")

		began = time.Now()
		errs = RunPaced(ctx, 1, 3, 0, func(ctx context.Context, i int) error { return nil })
		require.Equal(t, make([]error, 3), errs)
		require.Zero(t, time.Since(began), "no span, no wait")
	})
}

// A Pace's wait for the i-th of n works ends span*i/n after the Pace was made, at once
// where that is past, and early with the context's cause; the zero Pace never waits.
func TestPaceWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		began := time.Now()
		p := NewPace(60*time.Second, 12)
		for _, c := range []struct {
			i  int
			at time.Duration // since began, after the wait
		}{{0, 0}, {3, 15 * time.Second}, {6, 30 * time.Second}, {4, 30 * time.Second}, {12, 60 * time.Second}} {
			if err := p.Wait(ctx, c.i); err != nil {
				t.Fatal(err)
			}
			if got := time.Since(began); got != c.at {
				t.Errorf("after the wait for %d of 12: %v since the first, want %v", c.i, got, c.at)
			}
		}
		for _, unpaced := range []Pace{{}, NewPace(0, 5), NewPace(time.Minute, 0)} {
			began := time.Now()
			if err := unpaced.Wait(ctx, 5); err != nil || time.Since(began) != 0 || unpaced.Paced() {
				t.Errorf("unpaced %+v: waited %v, %v", unpaced, time.Since(began), err)
			}
		}
		cause := errors.New("the server stops")
		ctx, cancel := context.WithCancelCause(ctx)
		time.AfterFunc(time.Second, func() { cancel(cause) })
		began = time.Now()
		p = NewPace(time.Minute, 2)
		if err := p.Wait(ctx, 1); !errors.Is(err, cause) || time.Since(began) != time.Second {
			t.Errorf("a cancelled wait: %v after %v, want the cause after 1s", err, time.Since(began))
		}
	})
}
