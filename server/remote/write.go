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
	"time"

	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/server/internal/redact"
	"github.com/seed71701133/tablets/server/limits"
	"github.com/seed71701133/tablets/tsdb"
)

// Sink is what the write handler stores into; *tsdb.DB implements it.
type Sink interface {
	// SeriesOfMany returns the series key of each label set (validated first: an error
	// wrapping tablets.ErrInvalidOptions before any request).
	SeriesOfMany(ctx context.Context, sets []tsdb.Labels) ([]string, error)
	// WriteSamples stores float points and native histogram samples together (*tsdb.DB:
	// one Appender commit, one staging write for both); nil only when every sample is
	// stored. Else its error names what was not: either errors joined (an Unwrap() []error)
	// each a *tablets.WriteError of one series listing the points (Failed) or histogram
	// samples (FailedHistograms) not stored, or another error, when nothing was stored.
	WriteSamples(ctx context.Context, points []tsdb.SeriesPoints, hists []tsdb.SeriesHistograms) error
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
	// MaxSamplesInFlight bounds the samples of the requests being stored at once: a
	// request waits (holding only its decoded body) until its samples fit, or its context
	// ends (503). A request with more samples can never fit: 413. A float sample counts 1,
	// a native histogram sample 8 plus a quarter of its buckets, spans and custom bounds
	// (about its memory: a 20-bucket histogram counts 14). Default 500,000.
	MaxSamplesInFlight int
	// MaxBodyBytes bounds a request body, compressed and decompressed: 413 above. Default
	// 32 MiB (Prometheus sends about 2,000 samples, some 100 KiB, a request).
	MaxBodyBytes int64

	// Tenant picks the limits in the configuration Limits returns (default
	// limits.DefaultTenant).
	Tenant string
	// Limits, if set, returns the configuration whose ingest limits apply, read for every
	// request (a reload applies at once); it or its result nil: no limits. See the
	// package documentation for what each limit answers.
	Limits func() *limits.Config
	// LimitHit, if set, is called with a limit's name in the configuration
	// ("ingestion_rate", ...) for each request refused by it, and for each series a label
	// limit refuses.
	LimitHit func(limit string)
	// Now is the clock of the ingestion rate's token bucket (default time.Now).
	Now func() time.Time
}

// WriteHandler serves remote write 1.0 and 2.0 (POST /api/v1/write). See the package
// documentation for what it answers.
type WriteHandler struct {
	sink   Sink
	opts   WriteOptions
	gate   *gateOf
	bucket *limits.Bucket // of IngestionRate

	samplesReceived    atomic.Uint64
	samplesWritten     atomic.Uint64
	samplesRejected    atomic.Uint64
	histogramsReceived atomic.Uint64
	histogramsWritten  atomic.Uint64
	histogramsRejected atomic.Uint64
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
	if o.Tenant == "" {
		o.Tenant = limits.DefaultTenant
	}
	h := &WriteHandler{sink: sink, opts: o, gate: newGate(int64(o.MaxSamplesInFlight)), bucket: limits.NewBucket(o.Now),
		requests: map[int]uint64{}}
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
	// HistogramsReceived, HistogramsWritten and HistogramsRejected are the same counts of
	// native histogram samples.
	HistogramsReceived, HistogramsWritten, HistogramsRejected uint64
	// ExemplarsReceived counts the exemplars received (none is stored).
	ExemplarsReceived uint64
	// SamplesInFlight are the samples of the requests being stored now, histograms by
	// weight (at most MaxSamplesInFlight); RequestsWaiting the requests waiting for room.
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
		HistogramsWritten:  h.histogramsWritten.Load(),
		HistogramsRejected: h.histogramsRejected.Load(),
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

func (h *WriteHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	version, n, herr := h.serve(w, r)
	if version == writeV2 {
		// Required on every 2.0 answer after negotiation, failures included (spec 2.0).
		w.Header().Set(HeaderSamplesWritten, strconv.Itoa(n.Samples))
		w.Header().Set(HeaderHistogramsWritten, strconv.Itoa(n.Histograms))
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
		if herr.retryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(herr.retryAfter))
		}
		http.Error(w, redact.Secrets(herr.msg), herr.status)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// serve handles a request up to its answer: the message version (0 before negotiation),
// what was written, and the error to answer (nil: 204).
func (h *WriteHandler) serve(w http.ResponseWriter, r *http.Request) (writeVersion, Written, *httpError) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		return 0, Written{}, errorf(http.StatusMethodNotAllowed, "remote write takes POST")
	}
	version, err := writeMessage(r.Header)
	if err != nil {
		return 0, Written{}, errorf(http.StatusUnsupportedMediaType, "%v", err)
	}
	body, herr := readSnappy(r, w, h.opts.MaxBodyBytes)
	if herr != nil {
		return version, Written{}, herr
	}

	var d decoded
	switch version {
	case writeV1:
		var req prompb.WriteRequest
		if err := req.Unmarshal(body); err != nil {
			return version, Written{}, errorf(http.StatusBadRequest, "decoding prometheus.WriteRequest: %v", err)
		}
		d = decodeV1(req.Timeseries)
	case writeV2:
		var req writev2.Request
		if err := req.Unmarshal(body); err != nil {
			return version, Written{}, errorf(http.StatusBadRequest, "decoding io.prometheus.write.v2.Request: %v", err)
		}
		if d, err = decodeV2(&req); err != nil {
			return version, Written{}, errorf(http.StatusBadRequest, "io.prometheus.write.v2.Request: %v", err)
		}
	}
	n, herr := h.write(r.Context(), d)
	return version, n, herr
}

// decoded is a request decoded, before its points are built.
type decoded struct {
	series  int // its TimeSeries
	samples int // float and histogram samples, a histogram counting 1 (IngestionRate's unit)
	weight  int // samples, histograms weighted by their memory (MaxSamplesInFlight's unit)
	fill    func(a *assembler)
}

// write admits a decoded request (its tenant's limits), waits for room for its samples
// (weight, histograms weighted), then builds its points (fill) and stores them. It returns
// what was stored and the error to answer (nil: everything was stored).
func (h *WriteHandler) write(ctx context.Context, d decoded) (Written, *httpError) {
	lim, limitedStatus := h.limitsNow()
	if herr := h.checkSeries(d, lim); herr != nil {
		return Written{}, herr
	}
	if d.weight > h.opts.MaxSamplesInFlight {
		return Written{}, errorf(http.StatusRequestEntityTooLarge, "the request holds %d samples (histograms weighted), over the limit of %d in flight", d.weight, h.opts.MaxSamplesInFlight)
	}
	taken, herr := h.takeTokens(d, lim, limitedStatus)
	if herr != nil {
		return Written{}, herr
	}
	if err := h.gate.acquire(ctx, int64(d.weight)); err != nil {
		h.bucket.Return(taken, lim.Burst()) // not served: the sender sends it again
		return Written{}, errorf(http.StatusServiceUnavailable, "gave up waiting for room for %d samples: %v", d.weight, err)
	}
	defer h.gate.release(int64(d.weight))

	a := newAssembler()
	a.limits, a.onLimit = lim, h.hit
	d.fill(a)
	all := a.finish()
	h.exemplarsReceived.Add(uint64(a.exemplars))

	var st stored
	if len(all) > 0 {
		st = h.store(ctx, all)
	}
	rejected, histRejected := a.rejected+st.rejected, a.histRejected+st.histRejected
	reasons := append(a.reasons, st.reasons...)
	h.samplesReceived.Add(uint64(a.accepted + a.rejected))
	h.samplesRejected.Add(uint64(rejected))
	h.samplesWritten.Add(uint64(st.samples))
	h.histogramsReceived.Add(uint64(a.histAccepted + a.histRejected))
	h.histogramsRejected.Add(uint64(histRejected))
	h.histogramsWritten.Add(uint64(st.histograms))
	done := Written{Samples: st.samples, Histograms: st.histograms}
	if st.err != nil {
		return done, st.err
	}
	if rejected+histRejected == 0 {
		return done, nil
	}
	// Stored what can be; now say what was not (spec: any sample not written is a 400,
	// a partial write; the sender drops the request, whose good part is stored).
	msg := fmt.Sprintf("stored %d of %d float samples", st.samples, a.accepted+a.rejected)
	if histograms := a.histAccepted + a.histRejected; histograms > 0 {
		msg += fmt.Sprintf(" and %d of %d histogram samples", st.histograms, histograms)
	}
	var what string
	switch {
	case histRejected == 0:
		what = fmt.Sprintf("%d samples", rejected)
	case rejected == 0:
		what = fmt.Sprintf("%d histogram samples", histRejected)
	default:
		what = fmt.Sprintf("%d float and %d histogram samples", rejected, histRejected)
	}
	return done, errorf(http.StatusBadRequest, "%s; %s rejected: %s", msg, what, strings.Join(reasons[:min(len(reasons), maxReasons)], "; "))
}

// stored is what a request's writes did: samples stored, samples the database rejected
// (bad or expired: 4xx), and the error of the samples it failed to store (nil: none); for
// float and histogram samples.
type stored struct {
	samples, rejected        int
	histograms, histRejected int
	reasons                  []string
	err                      *httpError
}

// store registers the label sets and writes the float points and the histogram samples in
// one WriteSamples call. The database says, series by series, what it
// rejected (an error wrapping a bad-input sentinel or tsdb.ErrExpired: the same samples
// would fail again) and what it failed to store (the service's answer decides the status).
// When an error names no series, nothing of its kind is known stored.
func (h *WriteHandler) store(ctx context.Context, all []*series) stored {
	sets := make([]tsdb.Labels, len(all))
	for i, s := range all {
		sets[i] = s.labels
	}
	keys, err := h.sink.SeriesOfMany(ctx, sets)
	if err == nil && len(keys) != len(sets) {
		err = fmt.Errorf("the sink returned %d series keys for %d label sets", len(keys), len(sets))
	}
	if err != nil {
		return stored{err: errorf(statusOf(err), "registering %d series: %v", len(sets), err)}
	}
	var (
		points   []tsdb.SeriesPoints
		hists    []tsdb.SeriesHistograms
		nPoints  int
		nHists   int
		labelsOf = make(map[string]tsdb.Labels, len(all))
	)
	for i, s := range all {
		labelsOf[keys[i]] = s.labels
		if len(s.points) > 0 {
			points = append(points, tsdb.SeriesPoints{Series: keys[i], Points: s.points})
			nPoints += s.accepted
		}
		if len(s.hists) > 0 {
			hists = append(hists, tsdb.SeriesHistograms{Series: keys[i], Histograms: s.hists})
			nHists += s.histsTaken
		}
	}
	var pointsErr, histsErr error
	if len(points) > 0 || len(hists) > 0 {
		err := h.sink.WriteSamples(ctx, points, hists)
		// Each kind reads its samples' part of the error (an error naming no series is
		// both kinds').
		if len(points) > 0 {
			pointsErr = err
		}
		if len(hists) > 0 {
			histsErr = err
		}
	}
	fl := outcomeOf(pointsErr, nPoints, labelsOf, "", func(we *tablets.WriteError) int { return len(we.Failed) })
	hi := outcomeOf(histsErr, nHists, labelsOf, "histogram ", func(we *tablets.WriteError) int { return len(we.FailedHistograms) })
	out := stored{samples: fl.stored, rejected: fl.rejected, histograms: hi.stored, histRejected: hi.rejected,
		reasons: append(fl.reasons, hi.reasons...)}
	switch {
	case fl.err != nil && hi.err != nil:
		out.err = errorf(worse(fl.err.status, hi.err.status), "%s; %s", fl.err.msg, hi.err.msg)
	case fl.err != nil:
		out.err = fl.err
	case hi.err != nil:
		out.err = hi.err
	}
	return out
}

// outcome is what a write did of its total samples of one kind.
type outcome struct {
	stored, rejected int
	reasons          []string
	err              *httpError
}

// outcomeOf reads the error of a write of total samples of one kind (kind names them in
// messages): each part a *tablets.WriteError naming its series and samples (failed counts
// those of the kind; a part listing only the other kind's is not this kind's).
func outcomeOf(err error, total int, labelsOf map[string]tsdb.Labels, kind string, failed func(*tablets.WriteError) int) outcome {
	if err == nil {
		return outcome{stored: total}
	}
	parts := []error{err}
	if multi, ok := err.(interface{ Unwrap() []error }); ok {
		parts = multi.Unwrap()
	}
	var out outcome
	var failures []error
	notStored := 0
	for _, p := range parts {
		var we *tablets.WriteError
		if !errors.As(p, &we) {
			return outcome{err: errorf(statusOf(err), "storing %d %ssamples: %v", total, kind, err)}
		}
		if failed(we) == 0 && len(we.Failed)+len(we.FailedHistograms) > 0 {
			continue // the other kind's
		}
		if permanent(we) {
			out.rejected += failed(we)
			if len(out.reasons) < maxReasons {
				out.reasons = append(out.reasons, fmt.Sprintf("series %s: %d %ssamples: %v", labelsOf[we.Series], failed(we), kind, we.Err))
			}
			continue
		}
		failures = append(failures, p)
		notStored += failed(we)
	}
	out.stored = max(0, total-out.rejected-notStored)
	if len(failures) > 0 {
		joined := errors.Join(failures...)
		out.err = errorf(statusOf(joined), "storing %d %ssamples: %d not stored: %v", total, kind, notStored, joined)
	}
	return out
}

// decodeV1 counts and weighs the samples of 1.0 time series, with the function that feeds
// them to an assembler.
func decodeV1(tss []prompb.TimeSeries) decoded {
	d := decoded{series: len(tss)}
	for i := range tss {
		d.samples += len(tss[i].Samples) + len(tss[i].Histograms)
		d.weight += len(tss[i].Samples)
		for j := range tss[i].Histograms {
			d.weight += weightV1(&tss[i].Histograms[j])
		}
	}
	d.fill = func(a *assembler) {
		for i := range tss {
			ts := &tss[i]
			a.exemplars += len(ts.Exemplars)
			ls := make(tsdb.Labels, len(ts.Labels))
			for j, l := range ts.Labels {
				ls[j] = tsdb.Label{Name: l.Name, Value: l.Value}
			}
			a.add(ls, len(ts.Samples), func(j int) (int64, float64) { return ts.Samples[j].Timestamp, ts.Samples[j].Value },
				len(ts.Histograms), func(j int) (int64, tablets.HistogramPoint) {
					return ts.Histograms[j].Timestamp, fromV1(&ts.Histograms[j])
				})
		}
	}
	return d
}

// decodeV2 is decodeV1 of a 2.0 request. References outside the symbols table make the
// request malformed (an error).
func decodeV2(req *writev2.Request) (decoded, error) {
	d := decoded{series: len(req.Timeseries)}
	for i := range req.Timeseries {
		refs := req.Timeseries[i].LabelsRefs
		if len(refs)%2 != 0 {
			return decoded{}, fmt.Errorf("timeseries %d has %d label references, not name-value pairs", i, len(refs))
		}
		for _, ref := range refs {
			if int64(ref) >= int64(len(req.Symbols)) {
				return decoded{}, fmt.Errorf("timeseries %d references symbol %d of %d", i, ref, len(req.Symbols))
			}
		}
		d.samples += len(req.Timeseries[i].Samples) + len(req.Timeseries[i].Histograms)
		d.weight += len(req.Timeseries[i].Samples)
		for j := range req.Timeseries[i].Histograms {
			d.weight += weightV2(&req.Timeseries[i].Histograms[j])
		}
	}
	d.fill = func(a *assembler) {
		for i := range req.Timeseries {
			ts := &req.Timeseries[i]
			a.exemplars += len(ts.Exemplars)
			ls := make(tsdb.Labels, len(ts.LabelsRefs)/2)
			for j := range ls {
				ls[j] = tsdb.Label{Name: req.Symbols[ts.LabelsRefs[2*j]], Value: req.Symbols[ts.LabelsRefs[2*j+1]]}
			}
			a.add(ls, len(ts.Samples), func(j int) (int64, float64) { return ts.Samples[j].Timestamp, ts.Samples[j].Value },
				len(ts.Histograms), func(j int) (int64, tablets.HistogramPoint) {
					return ts.Histograms[j].Timestamp, fromV2(&ts.Histograms[j])
				})
		}
	}
	return d, nil
}
