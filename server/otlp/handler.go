package otlp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"

	"github.com/prometheus/prometheus/prompb"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/server/remote"
)

// Writer stores translated time series; *remote.WriteHandler implements it. It returns what
// it stored, and a *remote.StatusError unless it stored everything.
type Writer interface {
	WriteTimeSeries(ctx context.Context, ts []prompb.TimeSeries) (remote.Written, error)
}

// DefaultMaxBodyBytes is the default of Options.MaxBodyBytes.
const DefaultMaxBodyBytes = 32 << 20

// Options configure a Handler. The zero value of each field means its default.
type Options struct {
	// MaxBodyBytes bounds a request body, compressed and decompressed: 413 above (default
	// DefaultMaxBodyBytes; an SDK exporter sends one resource's metrics a request).
	MaxBodyBytes int64
	// ConvertHistogramsToNHCB stores explicit-bucket histograms as custom-bucket native
	// histograms (schema -53) instead of classic _bucket/_sum/_count series, as Prometheus'
	// otlp.convert_histograms_to_nhcb does (default false, as Prometheus).
	ConvertHistogramsToNHCB bool
}

// Handler serves POST /api/v1/otlp/v1/metrics. See the package documentation for what it
// answers.
type Handler struct {
	w    Writer
	opts Options

	pointsReceived    atomic.Uint64
	pointsRefused     atomic.Uint64
	samplesWritten    atomic.Uint64
	histogramsWritten atomic.Uint64
	samplesNotStored  atomic.Uint64
}

// NewHandler returns a handler storing through w. Bad options give an error wrapping
// tablets.ErrInvalidOptions.
func NewHandler(w Writer, opts *Options) (*Handler, error) {
	if w == nil {
		return nil, fmt.Errorf("otlp: %w: nil writer", tablets.ErrInvalidOptions)
	}
	o := Options{}
	if opts != nil {
		o = *opts
	}
	if o.MaxBodyBytes < 0 {
		return nil, fmt.Errorf("otlp: %w: MaxBodyBytes %d is negative", tablets.ErrInvalidOptions, o.MaxBodyBytes)
	}
	if o.MaxBodyBytes == 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	return &Handler{w: w, opts: o}, nil
}

// Stats are a Handler's counters since it was made, for /metrics.
type Stats struct {
	// DataPointsReceived counts the OTLP data points of the requests decoded;
	// DataPointsRefused those of the requests refused whole before anything was stored
	// (what cannot be translated, such as delta temporality).
	DataPointsReceived, DataPointsRefused uint64
	// SamplesWritten and HistogramsWritten count the float samples and native histogram
	// samples stored; SamplesNotStored the samples of either kind translated and not stored
	// (refused as bad input, or failed: the exporter retries those).
	SamplesWritten, HistogramsWritten, SamplesNotStored uint64
}

// Stats returns a snapshot of the counters.
func (h *Handler) Stats() Stats {
	return Stats{
		DataPointsReceived: h.pointsReceived.Load(),
		DataPointsRefused:  h.pointsRefused.Load(),
		SamplesWritten:     h.samplesWritten.Load(),
		HistogramsWritten:  h.histogramsWritten.Load(),
		SamplesNotStored:   h.samplesNotStored.Load(),
	}
}

// httpError is a failure answered with its status and message.
type httpError struct {
	status     int
	msg        string
	retryAfter int // seconds, for the Retry-After header (0: none)
}

func errorf(status int, format string, args ...any) *httpError {
	return &httpError{status: status, msg: fmt.Sprintf(format, args...)}
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "OTLP/HTTP takes POST", http.StatusMethodNotAllowed)
		return
	}
	enc, err := encodingOf(r.Header.Get("Content-Type"))
	if err != nil {
		// Not an OTLP client we can answer in its encoding: plain text.
		http.Error(w, err.Error(), http.StatusUnsupportedMediaType)
		return
	}
	md, herr := h.decode(w, r, enc)
	if herr != nil {
		writeStatus(w, enc, herr)
		return
	}
	points := md.DataPointCount()
	h.pointsReceived.Add(uint64(points))

	ts, warnings, herr := translate(r.Context(), md, h.opts.ConvertHistogramsToNHCB)
	if herr != nil {
		h.pointsRefused.Add(uint64(points))
		writeStatus(w, enc, herr)
		return
	}
	part, herr := h.store(r.Context(), ts)
	if herr != nil {
		writeStatus(w, enc, herr)
		return
	}
	writeExportResponse(w, enc, part, warnings)
}

// store writes the series. It returns the partial success to answer when some samples were
// refused as bad input while the others were stored (nil: all stored), or the failure.
func (h *Handler) store(ctx context.Context, ts []prompb.TimeSeries) (*partial, *httpError) {
	total := 0
	for _, s := range ts {
		total += len(s.Samples) + len(s.Histograms)
	}
	if total == 0 {
		return nil, nil
	}
	written, err := h.w.WriteTimeSeries(ctx, ts)
	h.samplesWritten.Add(uint64(max(0, written.Samples)))
	h.histogramsWritten.Add(uint64(max(0, written.Histograms)))
	if err == nil {
		return nil, nil
	}
	stored := written.Samples + written.Histograms
	notStored := max(0, total-stored)
	h.samplesNotStored.Add(uint64(notStored))

	status, msg := http.StatusInternalServerError, err.Error()
	var se *remote.StatusError
	if errors.As(err, &se) {
		status, msg = se.Status, se.Msg
	}
	switch {
	case se != nil && se.RetryAfter > 0:
		// Over the tenant's ingestion rate: its configured status (429 or 503, both
		// retried by OTLP exporters) and the time to wait, which exporters honour.
		herr := errorf(status, "%d of %d samples not stored, retry: %s", notStored, total, msg)
		herr.retryAfter = se.RetryAfter
		return nil, herr
	case status == http.StatusBadRequest && stored > 0:
		// Bad input in part, the rest stored: OTLP's partial success, which the exporter
		// reports and does not retry.
		return &partial{rejected: int64(notStored), msg: fmt.Sprintf("%d of %d samples not stored: %s", notStored, total, msg)}, nil
	case status >= 400 && status < 500 && status != http.StatusTooManyRequests && status != http.StatusRequestTimeout:
		return nil, errorf(status, "%d of %d samples not stored: %s", notStored, total, msg)
	default:
		// Retryable, or unknown: the exporter retries 503 (and not 500), and the writes are
		// idempotent, so a retry stores nothing twice where losing the points would be wrong.
		return nil, errorf(http.StatusServiceUnavailable, "%d of %d samples not stored, retry: %s", notStored, total, msg)
	}
}
