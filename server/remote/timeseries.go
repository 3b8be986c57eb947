package remote

import (
	"context"

	"github.com/prometheus/prometheus/prompb"
)

// Written counts what a write stored.
type Written struct {
	Samples, Histograms int
}

// StatusError is the failure of a write that did not store everything: the HTTP status a
// remote-write answer gives it (400 for samples that can never be stored, 503 for those to
// retry, ...) and a message naming the series.
type StatusError struct {
	Status int
	Msg    string
	// RetryAfter, when not 0, is the seconds the sender should wait before it retries (the
	// Retry-After header of a write over its tenant's ingestion rate).
	RetryAfter int
}

func (e *StatusError) Error() string { return e.Msg }

// WriteTimeSeries stores remote-write 1.0 time series (float samples and native histograms;
// exemplars and metadata are dropped) as a 1.0 request holding them is stored, memory limits
// included: what other receivers (the OTLP endpoint) write through. It returns what it stored,
// and a *StatusError unless everything was. The time series are read, never changed, and
// may be reused once it returns.
func (h *WriteHandler) WriteTimeSeries(ctx context.Context, ts []prompb.TimeSeries) (Written, error) {
	n, herr := h.write(ctx, decodeV1(ts))
	if herr != nil {
		return n, &StatusError{Status: herr.status, Msg: herr.msg, RetryAfter: herr.retryAfter}
	}
	return n, nil
}
