package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"syscall"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/prometheus/prometheus/promql"

	"github.com/seed71701133/tablets"
)

// ErrorType is the "errorType" field of an error response; the values are Prometheus'.
type ErrorType string

// Error types, as Prometheus' HTTP API names them.
const (
	ErrorBadData     ErrorType = "bad_data"
	ErrorExec        ErrorType = "execution"
	ErrorCanceled    ErrorType = "canceled"
	ErrorTimeout     ErrorType = "timeout"
	ErrorInternal    ErrorType = "internal"
	ErrorUnavailable ErrorType = "unavailable"
	ErrorNotFound    ErrorType = "not_found"
)

// StatusClientClosedRequest is nginx's non-standard 499, which Prometheus sends for
// canceled queries (the client went away).
const StatusClientClosedRequest = 499

// apiError is an error together with the errorType it is reported as.
type apiError struct {
	typ   ErrorType
	err   error
	limit string // the limit it hit, as Options.LimitHit names it ("": none)
}

func badData(err error) *apiError { return &apiError{typ: ErrorBadData, err: err} }

// invalidParam wraps err as Prometheus does for a parameter it could not use.
func invalidParam(err error, param string) *apiError {
	return badData(fmt.Errorf("invalid parameter %q: %w", param, err))
}

// classify picks the errorType of an error from query evaluation or the storage.
//
// It follows Prometheus' returnAPIError, with two additions: errors wrapping
// tablets.ErrInvalidOptions, ErrInvalidLabels, ErrInvalidMatcher or ErrInvalidLimit are the
// caller's fault (bad_data), and a storage call that fails with context.DeadlineExceeded is a timeout (Prometheus only recognises the
// engine's own ErrQueryTimeout, but with a remote store the deadline usually expires
// inside a storage request).
func classify(err error) *apiError {
	if err == nil {
		return nil
	}
	var (
		eqc promql.ErrQueryCanceled
		eqt promql.ErrQueryTimeout
		es  promql.ErrStorage
	)
	var (
		tooMany promql.ErrTooManySamples
		queued  queueWait
	)
	// promql.ErrStorage has no Unwrap method, so look inside it explicitly.
	isStorage := errors.As(err, &es)
	switch {
	case errors.As(err, &queued):
		return newQueryError(queued.err)
	case badInput(err), isStorage && badInput(es.Err):
		return &apiError{typ: ErrorBadData, err: err}
	case errors.Is(err, ErrTooManySeries), isStorage && errors.Is(es.Err, ErrTooManySeries):
		return &apiError{ErrorExec, err, LimitMaxSeriesPerSelect} // as Prometheus' too many samples
	case errors.As(err, &tooMany):
		return &apiError{ErrorExec, err, LimitMaxSamplesPerQuery}
	case errors.As(err, &eqc):
		return &apiError{typ: ErrorCanceled, err: err}
	case errors.As(err, &eqt):
		return &apiError{ErrorTimeout, err, LimitQueryTimeout}
	case accountUnavailable(err), isStorage && accountUnavailable(es.Err):
		return &apiError{typ: ErrorUnavailable, err: err}
	case isStorage:
		return &apiError{typ: ErrorInternal, err: err}
	case errors.Is(err, context.Canceled):
		return &apiError{typ: ErrorCanceled, err: err}
	case errors.Is(err, context.DeadlineExceeded):
		return &apiError{ErrorTimeout, err, LimitQueryTimeout}
	}
	return &apiError{typ: ErrorExec, err: err}
}

// httpStatus is Prometheus' respondError mapping, except that unavailable is 503 rather
// than Prometheus' fall-through 500, so that proxies and Grafana treat it as retryable.
func httpStatus(t ErrorType) int {
	switch t {
	case ErrorBadData:
		return http.StatusBadRequest
	case ErrorExec:
		return http.StatusUnprocessableEntity
	case ErrorCanceled:
		return StatusClientClosedRequest
	case ErrorTimeout, ErrorUnavailable:
		return http.StatusServiceUnavailable
	case ErrorNotFound:
		return http.StatusNotFound
	default:
		return http.StatusInternalServerError
	}
}

// accountUnavailable reports an error of the storage account that a later try can get
// past: unreachable (a network error), throttled, or answering 5xx, 408 or 429. The query
// is then unavailable (503), which Grafana and proxies may retry, not an execution error
// (422) of the query itself.
func accountUnavailable(err error) bool {
	var ne net.Error
	var re *azcore.ResponseError
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return false // the query's own deadline (a net.Error too), or its client gone
	case errors.Is(err, tablets.ErrThrottled), errors.As(err, &ne), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET):
		return true
	case errors.As(err, &re):
		return re.StatusCode >= 500 || re.StatusCode == http.StatusRequestTimeout || re.StatusCode == http.StatusTooManyRequests
	}
	return false
}

// badInput reports an error wrapping a sentinel for a request the store cannot do: bad
// options, label sets, matchers or limits.
func badInput(err error) bool {
	for _, target := range []error{tablets.ErrInvalidOptions, tablets.ErrInvalidLabels, tablets.ErrInvalidMatcher, tablets.ErrInvalidLimit} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}
