package promqlsuite_test

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"time"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/model/exemplar"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/metadata"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
	"github.com/prometheus/prometheus/storage"

	"github.com/seed71701133/tablets/server/remote"
)

// remoteWriteAppender buffers what the suite appends, series by series in the order first
// seen, and Commit sends it all as one remote write 2.0 request to a remote-write handler,
// as a Prometheus configured for 2.0 would (symbols, integer and float histograms as given,
// custom bucket bounds kept), or as 1.0 requests. Rollback drops the buffer.
type remoteWriteAppender struct {
	handler http.Handler
	// sent, if set, is told of each request Commit sent: its counts, and how long the
	// handler took.
	sent func(samples, histograms int, took time.Duration)
	// committed, if set, runs after a successful Commit; its error is Commit's.
	committed func() error
	// parts, above 1, makes Commit send the buffer as that many requests, cut by time.
	parts int
	// v1 sends remote write 1.0 requests, as Prometheus 3 does unless told otherwise
	// (custom bucket bounds kept, which prompb's conversions leave out at the pinned
	// module).
	v1     bool
	byKey  map[string]*bufferedSeries
	series []*bufferedSeries
	done   bool
}

type bufferedSeries struct {
	lset       labels.Labels
	ref        storage.SeriesRef
	samples    []writev2.Sample
	histograms []writev2.Histogram
}

var _ storage.Appender = (*remoteWriteAppender)(nil)

func newRemoteWriteAppender(handler http.Handler, sent func(samples, histograms int, took time.Duration)) *remoteWriteAppender {
	return &remoteWriteAppender{handler: handler, sent: sent, byKey: map[string]*bufferedSeries{}}
}

var (
	errAppenderDone  = errors.New("promqltest storage: appender already committed or rolled back")
	errInvalidAppend = errors.New("promqltest storage: invalid append")
)

// seriesOf is the buffer of l, made on first use.
func (a *remoteWriteAppender) seriesOf(l labels.Labels) (*bufferedSeries, error) {
	if a.done {
		return nil, errAppenderDone
	}
	if l.IsEmpty() {
		return nil, fmt.Errorf("%w: empty label set", errInvalidAppend)
	}
	key := l.String()
	bs := a.byKey[key]
	if bs == nil {
		bs = &bufferedSeries{lset: l.Copy(), ref: storage.SeriesRef(len(a.series) + 1)}
		a.byKey[key] = bs
		a.series = append(a.series, bs)
	}
	return bs, nil
}

func (a *remoteWriteAppender) Append(_ storage.SeriesRef, l labels.Labels, t int64, v float64) (storage.SeriesRef, error) {
	bs, err := a.seriesOf(l)
	if err != nil {
		return 0, err
	}
	bs.samples = append(bs.samples, writev2.Sample{Value: v, Timestamp: t})
	return bs.ref, nil
}

func (a *remoteWriteAppender) AppendHistogram(_ storage.SeriesRef, l labels.Labels, t int64, h *histogram.Histogram, fh *histogram.FloatHistogram) (storage.SeriesRef, error) {
	bs, err := a.seriesOf(l)
	if err != nil {
		return 0, err
	}
	switch {
	case h != nil:
		bs.histograms = append(bs.histograms, writev2.FromIntHistogram(t, h))
	case fh != nil:
		bs.histograms = append(bs.histograms, writev2.FromFloatHistogram(t, fh))
	default:
		return 0, fmt.Errorf("%w: neither an integer nor a float histogram", errInvalidAppend)
	}
	return bs.ref, nil
}

// AppendCTZeroSample appends a zero at the created timestamp, as Prometheus' head does.
func (a *remoteWriteAppender) AppendCTZeroSample(ref storage.SeriesRef, l labels.Labels, t, ct int64) (storage.SeriesRef, error) {
	if ct >= t {
		return 0, storage.ErrCTNewerThanSample
	}
	return a.Append(ref, l, ct, 0)
}

// AppendHistogramCTZeroSample appends an empty histogram at the created timestamp, a
// counter reset, with the sample's schema, zero threshold and bounds, as Prometheus' head
// does.
func (a *remoteWriteAppender) AppendHistogramCTZeroSample(ref storage.SeriesRef, l labels.Labels, t, ct int64, h *histogram.Histogram, fh *histogram.FloatHistogram) (storage.SeriesRef, error) {
	if ct >= t {
		return 0, storage.ErrCTNewerThanSample
	}
	switch {
	case h != nil:
		return a.AppendHistogram(ref, l, ct, &histogram.Histogram{CounterResetHint: histogram.CounterReset,
			Schema: h.Schema, ZeroThreshold: h.ZeroThreshold, CustomValues: h.CustomValues}, nil)
	case fh != nil:
		return a.AppendHistogram(ref, l, ct, nil, &histogram.FloatHistogram{CounterResetHint: histogram.CounterReset,
			Schema: fh.Schema, ZeroThreshold: fh.ZeroThreshold, CustomValues: fh.CustomValues})
	}
	return 0, fmt.Errorf("%w: neither an integer nor a float histogram", errInvalidAppend)
}

// AppendExemplar drops exemplars: the suite evaluates no exemplar query.
func (a *remoteWriteAppender) AppendExemplar(ref storage.SeriesRef, _ labels.Labels, _ exemplar.Exemplar) (storage.SeriesRef, error) {
	return ref, nil
}

// UpdateMetadata drops metadata: tablets keeps none.
func (a *remoteWriteAppender) UpdateMetadata(ref storage.SeriesRef, _ labels.Labels, _ metadata.Metadata) (storage.SeriesRef, error) {
	return ref, nil
}

func (a *remoteWriteAppender) SetOptions(*storage.AppendOptions) {}

func (a *remoteWriteAppender) Rollback() error {
	a.done, a.byKey, a.series = true, nil, nil
	return nil
}

// Commit sends the buffer as one remote write 2.0 request (Parts of them, by time) and
// fails unless the handler answers each with 204 having written every sample and histogram.
func (a *remoteWriteAppender) Commit() error {
	if a.done {
		return errAppenderDone
	}
	series := a.series
	_ = a.Rollback()
	for _, part := range splitByTime(series, a.parts) {
		if err := a.send(part); err != nil {
			return err
		}
	}
	if a.committed != nil {
		return a.committed()
	}
	return nil
}

// send sends series as one request.
func (a *remoteWriteAppender) send(series []*bufferedSeries) error {
	var (
		body                []byte
		samples, histograms int
		err                 error
	)
	if a.v1 {
		var req *prompb.WriteRequest
		req, samples, histograms = rw1Request(series)
		body, err = req.Marshal()
	} else {
		var req *writev2.Request
		req, samples, histograms = rw2Request(series)
		body, err = req.Marshal()
	}
	if err != nil {
		return fmt.Errorf("promqltest storage: marshal the write request: %w", err)
	}
	if samples+histograms == 0 {
		return nil
	}
	r := httptest.NewRequest(http.MethodPost, "/api/v1/write", bytes.NewReader(snappy.Encode(nil, body)))
	r.Header.Set("Content-Encoding", "snappy")
	if a.v1 {
		r.Header.Set("Content-Type", "application/x-protobuf")
		r.Header.Set("X-Prometheus-Remote-Write-Version", "0.1.0")
	} else {
		r.Header.Set("Content-Type", "application/x-protobuf;proto=io.prometheus.write.v2.Request")
		r.Header.Set("X-Prometheus-Remote-Write-Version", "2.0.0")
	}
	w := httptest.NewRecorder()
	start := time.Now()
	a.handler.ServeHTTP(w, r)
	if a.sent != nil {
		a.sent(samples, histograms, time.Since(start))
	}
	if w.Code != http.StatusNoContent {
		return fmt.Errorf("promqltest storage: remote write of %d series: %d %s", len(series), w.Code, w.Body.String())
	}
	if a.v1 {
		return nil // 1.0 answers say no more than 204
	}
	for header, want := range map[string]int{remote.HeaderSamplesWritten: samples, remote.HeaderHistogramsWritten: histograms} {
		if got := w.Header().Get(header); got != strconv.Itoa(want) {
			return fmt.Errorf("promqltest storage: remote write answered 204 with %s %q, want %d", header, got, want)
		}
	}
	return nil
}

// splitByTime cuts the samples of series into at most parts runs of their distinct times,
// about as many times each, oldest first: what a sender streaming them would send (1 or
// less: one part, all of it).
func splitByTime(series []*bufferedSeries, parts int) [][]*bufferedSeries {
	if parts <= 1 {
		return [][]*bufferedSeries{series}
	}
	var times []int64
	for _, bs := range series {
		for _, s := range bs.samples {
			times = append(times, s.Timestamp)
		}
		for _, h := range bs.histograms {
			times = append(times, h.Timestamp)
		}
	}
	slices.Sort(times)
	times = slices.Compact(times)
	parts = min(parts, len(times))
	out := make([][]*bufferedSeries, 0, parts)
	for i := range parts {
		lo, hi := times[i*len(times)/parts], times[(i+1)*len(times)/parts-1]
		in := func(t int64) bool { return t >= lo && t <= hi }
		var part []*bufferedSeries
		for _, bs := range series {
			p := &bufferedSeries{lset: bs.lset, ref: bs.ref}
			for _, s := range bs.samples {
				if in(s.Timestamp) {
					p.samples = append(p.samples, s)
				}
			}
			for _, h := range bs.histograms {
				if in(h.Timestamp) {
					p.histograms = append(p.histograms, h)
				}
			}
			if len(p.samples)+len(p.histograms) > 0 {
				part = append(part, p)
			}
		}
		out = append(out, part)
	}
	return out
}

// rw2Request is the remote write 2.0 request of series, with its counts of samples and
// histogram samples.
func rw2Request(series []*bufferedSeries) (req *writev2.Request, samples, histograms int) {
	symbols := writev2.NewSymbolTable()
	req = &writev2.Request{Timeseries: make([]writev2.TimeSeries, 0, len(series))}
	for _, bs := range series {
		req.Timeseries = append(req.Timeseries, writev2.TimeSeries{
			LabelsRefs: symbols.SymbolizeLabels(bs.lset, nil),
			Samples:    bs.samples,
			Histograms: bs.histograms,
		})
		samples += len(bs.samples)
		histograms += len(bs.histograms)
	}
	req.Symbols = symbols.Symbols()
	return req, samples, histograms
}

// rw1Request is rw2Request as a remote write 1.0 request.
func rw1Request(series []*bufferedSeries) (req *prompb.WriteRequest, samples, histograms int) {
	req = &prompb.WriteRequest{Timeseries: make([]prompb.TimeSeries, 0, len(series))}
	for _, bs := range series {
		ts := prompb.TimeSeries{Labels: prompb.FromLabels(bs.lset, nil)}
		for _, s := range bs.samples {
			ts.Samples = append(ts.Samples, prompb.Sample{Value: s.Value, Timestamp: s.Timestamp})
		}
		for _, h := range bs.histograms {
			var ph prompb.Histogram
			if h.IsFloatHistogram() {
				ph = prompb.FromFloatHistogram(h.Timestamp, h.ToFloatHistogram())
			} else {
				ph = prompb.FromIntHistogram(h.Timestamp, h.ToIntHistogram())
			}
			ph.CustomValues = h.CustomValues
			ts.Histograms = append(ts.Histograms, ph)
		}
		req.Timeseries = append(req.Timeseries, ts)
		samples += len(bs.samples)
		histograms += len(bs.histograms)
	}
	return req, samples, histograms
}
