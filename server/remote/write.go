package remote

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/tsdb"
)

// Sink is what the write handler stores into; *tsdb.DB implements it.
type Sink interface {
	// SeriesOfMany returns the series key of each label set (validated first: an error
	// wrapping tablets.ErrInvalidOptions before any request).
	SeriesOfMany(ctx context.Context, sets []tsdb.Labels) ([]string, error)
	// WriteMany stores the points; nil only when every point is stored.
	WriteMany(ctx context.Context, batch []tsdb.SeriesPoints) error
}

// Defaults of WriteOptions.
const (
	DefaultMaxSamplesInFlight = 500_000
	DefaultMaxBodyBytes       = 32 << 20
)

// Response headers of remote write 2.0: how many of each were written.
const (
	HeaderSamplesWritten    = "X-Prometheus-Remote-Write-Samples-Written"
	HeaderHistogramsWritten = "X-Prometheus-Remote-Write-Histograms-Written"
	HeaderExemplarsWritten  = "X-Prometheus-Remote-Write-Exemplars-Written"
)

// WriteOptions configure a WriteHandler. The zero value of each field means its default.
type WriteOptions struct {
	// MaxSamplesInFlight bounds the float samples of the requests being stored at once: a
	// request waits (holding only its decoded body) until its samples fit, or its context
	// ends (503). A request with more samples can never fit: 413. Default 500,000.
	MaxSamplesInFlight int
	// MaxBodyBytes bounds a request body, compressed and decompressed: 413 above. Default
	// 32 MiB (Prometheus sends about 2,000 samples, some 100 KiB, a request).
	MaxBodyBytes int64
}

// WriteHandler serves remote write 1.0 and 2.0 (POST /api/v1/write). See the package
// documentation for what it answers.
type WriteHandler struct {
	sink Sink
	opts WriteOptions
	gate *gate

	samplesReceived    atomic.Uint64
	samplesWritten     atomic.Uint64
	samplesRejected    atomic.Uint64
	histogramsReceived atomic.Uint64
	exemplarsReceived  atomic.Uint64

	mu       sync.Mutex
	requests map[int]uint64
}

// NewWriteHandler returns a handler storing into sink. Bad options give an error wrapping
// tablets.ErrInvalidOptions.
func NewWriteHandler(sink Sink, opts *WriteOptions) (*WriteHandler, error) {
	if sink == nil {
		return nil, fmt.Errorf("remote: %w: nil sink", tablets.ErrInvalidOptions)
	}
	o := WriteOptions{}
	if opts != nil {
		o = *opts
	}
	switch {
	case o.MaxSamplesInFlight < 0:
		return nil, fmt.Errorf("remote: %w: MaxSamplesInFlight %d is negative", tablets.ErrInvalidOptions, o.MaxSamplesInFlight)
	case o.MaxBodyBytes < 0:
		return nil, fmt.Errorf("remote: %w: MaxBodyBytes %d is negative", tablets.ErrInvalidOptions, o.MaxBodyBytes)
	}
	if o.MaxSamplesInFlight == 0 {
		o.MaxSamplesInFlight = DefaultMaxSamplesInFlight
	}
	if o.MaxBodyBytes == 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	h := &WriteHandler{sink: sink, opts: o, gate: newGate(int64(o.MaxSamplesInFlight)), requests: map[int]uint64{}}
	return h, nil
}

// WriteStats are a WriteHandler's counters since it was made, for /metrics.
type WriteStats struct {
	// Requests counts the requests answered, by HTTP status code.
	Requests map[int]uint64
	// SamplesReceived counts the float samples of the requests that got room in flight
	// (not those answered 4xx before, or that gave up waiting); SamplesWritten those
	// stored; SamplesRejected those refused as invalid (labels, timestamps, retention).
	SamplesReceived, SamplesWritten, SamplesRejected uint64
	// HistogramsReceived and ExemplarsReceived count what was received and not stored.
	HistogramsReceived, ExemplarsReceived uint64
	// SamplesInFlight are the samples of the requests being stored now (at most
	// MaxSamplesInFlight); RequestsWaiting the requests waiting for room.
	SamplesInFlight, MaxSamplesInFlight int64
	RequestsWaiting                     int
}

// Stats returns a snapshot of the counters.
func (h *WriteHandler) Stats() WriteStats {
	used, waiting := h.gate.state()
	s := WriteStats{
		Requests:           map[int]uint64{},
		SamplesReceived:    h.samplesReceived.Load(),
		SamplesWritten:     h.samplesWritten.Load(),
		SamplesRejected:    h.samplesRejected.Load(),
		HistogramsReceived: h.histogramsReceived.Load(),
		ExemplarsReceived:  h.exemplarsReceived.Load(),
		SamplesInFlight:    used,
		MaxSamplesInFlight: int64(h.opts.MaxSamplesInFlight),
		RequestsWaiting:    waiting,
	}
	h.mu.Lock()
	for code, n := range h.requests {
		s.Requests[code] = n
	}
	h.mu.Unlock()
	return s
}

// written counts what a request stored, for the 2.0 response headers.
type written struct {
	samples int
}

func (h *WriteHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	version, n, herr := h.serve(w, r)
	if version == writeV2 {
		// Required on every 2.0 answer after negotiation, failures included (spec 2.0).
		w.Header().Set(HeaderSamplesWritten, strconv.Itoa(n.samples))
		w.Header().Set(HeaderHistogramsWritten, "0")
		w.Header().Set(HeaderExemplarsWritten, "0")
	}
	status := http.StatusNoContent
	if herr != nil {
		status = herr.status
	}
	h.mu.Lock()
	h.requests[status]++
	h.mu.Unlock()
	if herr != nil {
		http.Error(w, herr.msg, herr.status)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// serve handles a request up to its answer: the message version (0 before negotiation),
// what was written, and the error to answer (nil: 204).
func (h *WriteHandler) serve(w http.ResponseWriter, r *http.Request) (writeVersion, written, *httpError) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		return 0, written{}, errorf(http.StatusMethodNotAllowed, "remote write takes POST")
	}
	version, err := writeMessage(r.Header)
	if err != nil {
		return 0, written{}, errorf(http.StatusUnsupportedMediaType, "%v", err)
	}
	body, herr := readSnappy(r, w, h.opts.MaxBodyBytes)
	if herr != nil {
		return version, written{}, herr
	}

	// Decode and count, then wait for room for the samples before building the points.
	var (
		count int
		fill  func(a *assembler)
	)
	switch version {
	case writeV1:
		var req prompb.WriteRequest
		if err := req.Unmarshal(body); err != nil {
			return version, written{}, errorf(http.StatusBadRequest, "decoding prometheus.WriteRequest: %v", err)
		}
		count, fill = decodeV1(&req)
	case writeV2:
		var req writev2.Request
		if err := req.Unmarshal(body); err != nil {
			return version, written{}, errorf(http.StatusBadRequest, "decoding io.prometheus.write.v2.Request: %v", err)
		}
		if count, fill, err = decodeV2(&req); err != nil {
			return version, written{}, errorf(http.StatusBadRequest, "io.prometheus.write.v2.Request: %v", err)
		}
	}
	if count > h.opts.MaxSamplesInFlight {
		return version, written{}, errorf(http.StatusRequestEntityTooLarge, "the request holds %d samples, over the limit of %d in flight", count, h.opts.MaxSamplesInFlight)
	}
	ctx := r.Context()
	if err := h.gate.acquire(ctx, int64(count)); err != nil {
		return version, written{}, errorf(http.StatusServiceUnavailable, "gave up waiting for room for %d samples: %v", count, err)
	}
	defer h.gate.release(int64(count))

	a := newAssembler()
	fill(a)
	all := a.finish()
	h.histogramsReceived.Add(uint64(a.histograms))
	h.exemplarsReceived.Add(uint64(a.exemplars))

	var st stored
	if len(all) > 0 {
		st = h.store(ctx, all)
	}
	rejected, reasons := a.rejected+st.rejected, append(a.reasons, st.reasons...)
	h.samplesReceived.Add(uint64(a.accepted + a.rejected))
	h.samplesRejected.Add(uint64(rejected))
	h.samplesWritten.Add(uint64(st.samples))
	done := written{st.samples}
	if st.err != nil {
		return version, done, st.err
	}

	// Stored what can be; now say what was not (spec: any sample not written is a 400,
	// a partial write; the sender drops the request, whose good part is stored).
	var problems []string
	if rejected > 0 {
		problems = append(problems, fmt.Sprintf("%d samples rejected: %s", rejected, strings.Join(reasons[:min(len(reasons), maxReasons)], "; ")))
	}
	if a.histograms > 0 {
		problems = append(problems, fmt.Sprintf("%d native histogram samples not stored: this server stores float samples only (turn off send_native_histograms)", a.histograms))
	}
	if len(problems) > 0 {
		return version, done, errorf(http.StatusBadRequest, "stored %d of %d float samples; %s", st.samples, a.accepted+a.rejected, strings.Join(problems, "; "))
	}
	return version, done, nil
}

// stored is what a request's WriteMany did: samples stored, samples the database rejected
// (bad or expired: 4xx), and the error of the samples it failed to store (nil: none).
type stored struct {
	samples, rejected int
	reasons           []string
	err               *httpError
}

// store registers the label sets and writes the points. The database says, series by series,
// what it rejected (an error wrapping a bad-input sentinel or tsdb.ErrExpired: the same
// samples would fail again) and what it failed to store (the service's answer decides the
// status). When an error names no series, nothing is known stored.
func (h *WriteHandler) store(ctx context.Context, all []*series) stored {
	sets := make([]tsdb.Labels, len(all))
	total := 0
	for i, s := range all {
		sets[i] = s.labels
		total += s.accepted
	}
	keys, err := h.sink.SeriesOfMany(ctx, sets)
	if err == nil && len(keys) != len(sets) {
		err = fmt.Errorf("the sink returned %d series keys for %d label sets", len(keys), len(sets))
	}
	if err != nil {
		return stored{err: errorf(statusOf(err), "registering %d series: %v", len(sets), err)}
	}
	batch := make([]tsdb.SeriesPoints, len(all))
	labelsOf := make(map[string]tsdb.Labels, len(all))
	for i, s := range all {
		batch[i] = tsdb.SeriesPoints{Series: keys[i], Points: s.points}
		labelsOf[keys[i]] = s.labels
	}
	err = h.sink.WriteMany(ctx, batch)
	if err == nil {
		return stored{samples: total}
	}
	parts := []error{err}
	if multi, ok := err.(interface{ Unwrap() []error }); ok {
		parts = multi.Unwrap()
	}
	var out stored
	var failures []error
	notStored := 0
	for _, p := range parts {
		var we *tablets.WriteError
		if !errors.As(p, &we) {
			return stored{err: errorf(statusOf(err), "storing %d series: %v", len(all), err)}
		}
		if permanent(we) {
			out.rejected += len(we.Failed)
			if len(out.reasons) < maxReasons {
				out.reasons = append(out.reasons, fmt.Sprintf("series %s: %d samples: %v", labelsOf[we.Series], len(we.Failed), we.Err))
			}
			continue
		}
		failures = append(failures, p)
		notStored += len(we.Failed)
	}
	out.samples = max(0, total-out.rejected-notStored)
	if len(failures) > 0 {
		joined := errors.Join(failures...)
		out.err = errorf(statusOf(joined), "storing %d series: %d samples not stored: %v", len(all), notStored, joined)
	}
	return out
}

// decodeV1 counts the float samples of a 1.0 request and returns the function that feeds
// them to an assembler.
func decodeV1(req *prompb.WriteRequest) (int, func(*assembler)) {
	count := 0
	for i := range req.Timeseries {
		count += len(req.Timeseries[i].Samples)
	}
	return count, func(a *assembler) {
		for i := range req.Timeseries {
			ts := &req.Timeseries[i]
			a.histograms += len(ts.Histograms)
			a.exemplars += len(ts.Exemplars)
			ls := make(tsdb.Labels, len(ts.Labels))
			for j, l := range ts.Labels {
				ls[j] = tsdb.Label{Name: l.Name, Value: l.Value}
			}
			a.add(ls, len(ts.Samples), func(j int) (int64, float64) { return ts.Samples[j].Timestamp, ts.Samples[j].Value })
		}
	}
}

// decodeV2 is decodeV1 of a 2.0 request. References outside the symbols table make the
// request malformed (an error).
func decodeV2(req *writev2.Request) (int, func(*assembler), error) {
	count := 0
	for i := range req.Timeseries {
		refs := req.Timeseries[i].LabelsRefs
		if len(refs)%2 != 0 {
			return 0, nil, fmt.Errorf("timeseries %d has %d label references, not name-value pairs", i, len(refs))
		}
		for _, ref := range refs {
			if int64(ref) >= int64(len(req.Symbols)) {
				return 0, nil, fmt.Errorf("timeseries %d references symbol %d of %d", i, ref, len(req.Symbols))
			}
		}
		count += len(req.Timeseries[i].Samples)
	}
	return count, func(a *assembler) {
		for i := range req.Timeseries {
			ts := &req.Timeseries[i]
			a.histograms += len(ts.Histograms)
			a.exemplars += len(ts.Exemplars)
			ls := make(tsdb.Labels, len(ts.LabelsRefs)/2)
			for j := range ls {
				ls[j] = tsdb.Label{Name: req.Symbols[ts.LabelsRefs[2*j]], Value: req.Symbols[ts.LabelsRefs[2*j+1]]}
			}
			a.add(ls, len(ts.Samples), func(j int) (int64, float64) { return ts.Samples[j].Timestamp, ts.Samples[j].Value })
		}
	}, nil
}
