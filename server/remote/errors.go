package remote

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/tsdb"
)

// statusOf maps an error of the storage to the HTTP status a remote-write or remote-read
// client should see: 400 when the same request can never succeed (the sender drops it),
// 503 when a retry can (the sender keeps the data and retries), 500 when we cannot tell
// (the sender retries: losing data is worse than retrying a bug).
//
// A joined error (WriteSamples', one per failed series and kind) is 400 if any part is: writes are
// idempotent, so retrying the whole request would redo the good series harmlessly, but the
// bad part would fail every time and a 5xx would block the sender's queue forever.
func statusOf(err error) int {
	if err == nil {
		return 0
	}
	if permanent(err) {
		return http.StatusBadRequest
	}
	// A chain holding a joined error (WriteSamples', maybe wrapped) is decided by its parts.
	for e := err; e != nil; e = errors.Unwrap(e) {
		if multi, ok := e.(interface{ Unwrap() []error }); ok {
			worst := 0
			for _, part := range multi.Unwrap() {
				worst = worse(worst, statusOf(part))
			}
			if worst == 0 {
				worst = http.StatusInternalServerError
			}
			return worst
		}
	}
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded), errors.Is(err, tablets.ErrThrottled):
		return http.StatusServiceUnavailable
	}
	if status, code, ok := azureStatus(err); ok {
		return azureToHTTP(status, code)
	}
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// worse orders outcomes: a permanent failure decides the request, then an unknown one.
func worse(a, b int) int {
	rank := func(s int) int {
		switch s {
		case http.StatusBadRequest:
			return 3
		case http.StatusInternalServerError:
			return 2
		case 0:
			return 0
		}
		return 1
	}
	if rank(b) > rank(a) {
		return b
	}
	return a
}

// permanent reports the library's errors for bad input: they are returned before any
// request, and the same input fails the same way every time.
func permanent(err error) bool {
	for _, target := range []error{tablets.ErrInvalidOptions, tablets.ErrInvalidSeries, tablets.ErrInvalidTime, tablets.ErrInvalidToken, tablets.ErrInvalidLabels, tablets.ErrInvalidMatcher, tablets.ErrInvalidLimit, tablets.ErrInvalidHistogram, tsdb.ErrExpired} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

// azureStatus finds the service's answer in err: a failed write's (tablets.WriteError
// carries the status inside a failed transaction's reply, whose outer status is 202), else a
// response's other than a transaction's 202.
func azureStatus(err error) (status int, code string, ok bool) {
	var we *tablets.WriteError
	if errors.As(err, &we) && we.Status != 0 {
		return we.Status, we.Code, true
	}
	var re *azcore.ResponseError
	if errors.As(err, &re) && re.StatusCode != http.StatusAccepted {
		return re.StatusCode, re.ErrorCode, true
	}
	return 0, "", false
}

// retryableCodes are Table service error codes that a later attempt can get past.
var retryableCodes = map[string]bool{
	"ServerBusy":                  true, // throttling (503)
	"OperationTimedOut":           true,
	"InternalError":               true,
	"TableBeingDeleted":           true, // 409 for 40 s and more after a delete
	"TableNotFound":               true, // dropped meanwhile: the retry re-plans (and may get ErrExpired)
	"ResourceNotFound":            true,
	"UpdateConditionNotSatisfied": true,
	"EntityAlreadyExists":         true,
}

// azureToHTTP: throttling and server errors are 503, not 429, because Prometheus only
// retries 429 when retry_on_http_429 is set (off by default) and drops the data otherwise.
// Authentication and authorization failures (401, 403) are 503 too: an operator fixes the
// credentials and the sender, which kept the data, catches up.
func azureToHTTP(status int, code string) int {
	switch {
	case retryableCodes[code]:
		return http.StatusServiceUnavailable
	case status >= 500,
		status == http.StatusRequestTimeout, status == http.StatusTooManyRequests,
		status == http.StatusUnauthorized, status == http.StatusForbidden,
		status == http.StatusNotFound, status == http.StatusConflict, status == http.StatusPreconditionFailed:
		return http.StatusServiceUnavailable
	case status >= 400:
		return http.StatusBadRequest // the service rejects this content: it always will
	case code != "":
		return http.StatusBadRequest
	}
	return http.StatusInternalServerError
}
