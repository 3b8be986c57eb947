package server_test

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"time"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/model/exemplar"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/metadata"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
	"github.com/prometheus/prometheus/storage"

	"github.com/seed71701133/tablets/server/remote"
)

// rw2Appender buffers what the suite appends, series by series in the order first seen,
// and Commit sends it all as one remote write 2.0 request to the server's handler, as a
// Prometheus configured for 2.0 would (symbols, integer and float histograms as given,
// custom bucket bounds kept). Rollback drops the buffer.
type rw2Appender struct {
	s      *promqlStorage
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

var _ storage.Appender = (*rw2Appender)(nil)

func newRW2Appender(s *promqlStorage) *rw2Appender {
	return &rw2Appender{s: s, byKey: map[string]*bufferedSeries{}}
}

var (
	errAppenderDone  = errors.New("promqltest storage: appender already committed or rolled back")
	errInvalidAppend = errors.New("promqltest storage: invalid append")
)

// seriesOf is the buffer of l, made on first use.
func (a *rw2Appender) seriesOf(l labels.Labels) (*bufferedSeries, error) {
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

func (a *rw2Appender) Append(_ storage.SeriesRef, l labels.Labels, t int64, v float64) (storage.SeriesRef, error) {
	bs, err := a.seriesOf(l)
	if err != nil {
		return 0, err
	}
	bs.samples = append(bs.samples, writev2.Sample{Value: v, Timestamp: t})
	return bs.ref, nil
}

func (a *rw2Appender) AppendHistogram(_ storage.SeriesRef, l labels.Labels, t int64, h *histogram.Histogram, fh *histogram.FloatHistogram) (storage.SeriesRef, error) {
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
func (a *rw2Appender) AppendCTZeroSample(ref storage.SeriesRef, l labels.Labels, t, ct int64) (storage.SeriesRef, error) {
	if ct >= t {
		return 0, storage.ErrCTNewerThanSample
	}
	return a.Append(ref, l, ct, 0)
}

// AppendHistogramCTZeroSample appends an empty histogram at the created timestamp, a
// counter reset, with the sample's schema, zero threshold and bounds, as Prometheus' head
// does.
func (a *rw2Appender) AppendHistogramCTZeroSample(ref storage.SeriesRef, l labels.Labels, t, ct int64, h *histogram.Histogram, fh *histogram.FloatHistogram) (storage.SeriesRef, error) {
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
func (a *rw2Appender) AppendExemplar(ref storage.SeriesRef, _ labels.Labels, _ exemplar.Exemplar) (storage.SeriesRef, error) {
	return ref, nil
}

// UpdateMetadata drops metadata: tablets keeps none.
func (a *rw2Appender) UpdateMetadata(ref storage.SeriesRef, _ labels.Labels, _ metadata.Metadata) (storage.SeriesRef, error) {
	return ref, nil
}

func (a *rw2Appender) SetOptions(*storage.AppendOptions) {}

func (a *rw2Appender) Rollback() error {
	a.done, a.byKey, a.series = true, nil, nil
	return nil
}

// Commit sends the buffer as one remote write 2.0 request and fails unless the handler
// answers 204 having written every sample and histogram.
func (a *rw2Appender) Commit() error {
	if a.done {
		return errAppenderDone
	}
	series := a.series
	_ = a.Rollback()
	req, samples, histograms := rw2Request(series)
	if samples+histograms == 0 {
		return nil
	}
	body, err := req.Marshal()
	if err != nil {
		return fmt.Errorf("promqltest storage: marshal the write request: %w", err)
	}
	r := httptest.NewRequest(http.MethodPost, "/api/v1/write", bytes.NewReader(snappy.Encode(nil, body)))
	r.Header.Set("Content-Type", "application/x-protobuf;proto=io.prometheus.write.v2.Request")
	r.Header.Set("Content-Encoding", "snappy")
	r.Header.Set("X-Prometheus-Remote-Write-Version", "2.0.0")
	w := httptest.NewRecorder()
	before := a.s.checker.Stats().Requests
	start := time.Now()
	a.s.srv.ServeHTTP(w, r)
	st := a.s.stats
	st.mu.Lock()
	st.writes++
	st.samples += samples
	st.histograms += histograms
	st.writeRequests += a.s.checker.Stats().Requests - before
	st.writeTime += time.Since(start)
	st.mu.Unlock()
	if w.Code != http.StatusNoContent {
		return fmt.Errorf("promqltest storage: remote write of %d series: %d %s", len(series), w.Code, w.Body.String())
	}
	for header, want := range map[string]int{remote.HeaderSamplesWritten: samples, remote.HeaderHistogramsWritten: histograms} {
		if got := w.Header().Get(header); got != strconv.Itoa(want) {
			return fmt.Errorf("promqltest storage: remote write answered 204 with %s %q, want %d", header, got, want)
		}
	}
	return nil
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
