package tablets

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
)

// Point is one sample of a series.
type Point struct {
	Time  time.Time
	Value float64
}

// SeriesPoint is a point together with the series it belongs to, as yielded by QueryMany.
type SeriesPoint struct {
	Series string
	Point
}

// SeriesPoints are points of one series, in a write of many series (tsdb's WriteMany).
type SeriesPoints struct {
	Series string
	Points []Point
}

// Page is one page of a paged query.
type Page struct {
	Points []Point
	Next   string // opaque; "" when there is nothing more
}

// Store is the portable API every layout (packages basic, advanced and chunked) and
// *tsdb.DB implement.
type Store interface {
	// Write upserts points of one series, in any order. A point whose time, truncated to the
	// store's resolution, is already stored replaces the stored value (last write wins; within
	// one call the later argument wins). An implementation must not modify the points slice
	// or retain it after Write returns, as io.Writer must not: callers reuse it.
	Write(ctx context.Context, series string, points ...Point) error
	// Query yields the points with from <= Time < to, oldest first.
	Query(ctx context.Context, series string, from, to time.Time) iter.Seq2[Point, error]
	// QueryPage returns at most limit points of [from, to), oldest first, and a token that
	// resumes exactly after the last point returned. token "" starts at from.
	QueryPage(ctx context.Context, series string, from, to time.Time, limit int, token string) (Page, error)
	// QueryMany yields the points of every named series with from <= Time < to. Each series'
	// points come oldest first; a name given twice is read once.
	QueryMany(ctx context.Context, series []string, from, to time.Time) iter.Seq2[SeriesPoint, error]
	// Latest returns the n newest points of the series, newest first.
	Latest(ctx context.Context, series string, n int) ([]Point, error)
	// Delete removes the points with from <= Time < to.
	Delete(ctx context.Context, series string, from, to time.Time) error
}

// Sentinel errors. Every error the stores return for bad input wraps one of them, and is
// returned before any request is sent.
var (
	// ErrInvalidSeries: an empty series name, one with a character Azure forbids in keys
	// (/ \ # ? and control characters), or one whose key would exceed 1 KiB.
	ErrInvalidSeries = errors.New("tablets: invalid series name")
	// ErrInvalidTime: a time before 1970-01-01T00:00:00Z or after 9999-12-31T23:59:59Z,
	// or a range whose from is after its to.
	ErrInvalidTime = errors.New("tablets: invalid time")
	// ErrInvalidOptions: options a constructor or call cannot work with (a bad limit or count
	// is ErrInvalidLimit, a bad label set ErrInvalidLabels, a bad matcher ErrInvalidMatcher).
	ErrInvalidOptions = errors.New("tablets: invalid options")
	// ErrInvalidToken: a page token that this query did not issue (tampered, truncated, or
	// from another series, range or store layout).
	ErrInvalidToken = errors.New("tablets: invalid page token")
	// ErrInvalidLabels: a label set that cannot be stored (package tsdb): no labels, an
	// empty or duplicate name, invalid UTF-8, or too large an encoding.
	ErrInvalidLabels = errors.New("tablets: invalid label set")
	// ErrInvalidMatcher: a label matcher or selector that cannot be used: a bad regular
	// expression or match type, or matchers that would select every series.
	ErrInvalidMatcher = errors.New("tablets: invalid matcher")
	// ErrInvalidLimit: a limit or count out of its range, such as a page size or a number of
	// newest points.
	ErrInvalidLimit = errors.New("tablets: invalid limit")
)

// ErrThrottled is matched (errors.Is) by the error of a write the service refused for now:
// it was busy (503 ServerBusy, 429) or timed out (500 OperationTimedOut, 408). The same write
// may succeed later; it is not bad input, and nothing is known about the points it names
// except that they may not be stored.
var ErrThrottled = errors.New("tablets: throttled by the service")

// Throttled reports whether a service answer (HTTP status and Table service error code)
// means "busy, try again later".
func Throttled(status int, code string) bool {
	switch code {
	case "ServerBusy", "OperationTimedOut":
		return true
	}
	return status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests ||
		status == http.StatusRequestTimeout
}

// MinTime and MaxTime bound the times a store accepts: [MinTime, MaxTime].
var (
	MinTime = time.Unix(0, 0).UTC()
	MaxTime = time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)
)

// WriteError reports a write that did not store every point. Failed lists exactly the points
// that may not be stored (the others were); Err is the cause, an *azcore.ResponseError where
// the service answered.
type WriteError struct {
	Series string
	Failed []Point
	// FailedHistograms lists the histogram samples that may not be stored, in a write of
	// histograms (tsdb's WriteSamples).
	FailedHistograms []HistogramPoint
	// Code is the service's error code for the failed operation, where it gave one
	// (for a failed batch, parsed from the batch reply), and Index that operation's
	// position in its transaction (-1 when unknown).
	Code  string
	Index int
	// Status is the HTTP status the service answered for the failed operation (for a failed
	// transaction, the status inside its reply), 0 when it gave none.
	Status int
	Err    error
}

func (e *WriteError) Error() string {
	msg := fmt.Sprintf("tablets: write %q: %d points not stored", e.Series, len(e.Failed))
	if len(e.FailedHistograms) > 0 {
		msg = fmt.Sprintf("tablets: write %q: %d histograms not stored", e.Series, len(e.FailedHistograms))
		if len(e.Failed) > 0 {
			msg = fmt.Sprintf("tablets: write %q: %d points and %d histograms not stored", e.Series, len(e.Failed), len(e.FailedHistograms))
		}
	}
	switch {
	case e.Code != "" && e.Index >= 0:
		msg += fmt.Sprintf(" (%s at operation %d)", e.Code, e.Index)
	case e.Code != "":
		msg += fmt.Sprintf(" (%s)", e.Code)
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *WriteError) Unwrap() error { return e.Err }

// Is matches ErrThrottled when the service's answer says to try again later.
func (e *WriteError) Is(target error) bool {
	return target == ErrThrottled && Throttled(e.Status, e.Code)
}

// EnsureTable creates the client's table unless it exists.
func EnsureTable(ctx context.Context, client *aztables.Client) error {
	_, err := client.CreateTable(ctx, nil)
	var re *azcore.ResponseError
	if errors.As(err, &re) && (re.ErrorCode == string(aztables.TableAlreadyExists) || re.StatusCode == http.StatusConflict) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("tablets: create table: %w", err)
	}
	return nil
}
