package rules

import (
	"context"
	"errors"

	"github.com/prometheus/prometheus/model/exemplar"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/metadata"
	"github.com/prometheus/prometheus/prompb"
	"github.com/prometheus/prometheus/storage"

	"github.com/seed71701133/tablets/server/remote"
)

// Writer stores rule results: *remote.WriteHandler implements it, the remote-write path
// (the tenant's database, its ingest limits, its bound on samples in flight).
type Writer interface {
	WriteTimeSeries(ctx context.Context, ts []prompb.TimeSeries) (remote.Written, error)
}

// appendable makes appenders that buffer what a rule's evaluation appends and write it
// through w in one remote write on Commit: one write a rule a evaluation (Prometheus
// commits each rule's samples on its own too).
type appendable struct{ w Writer }

func (a appendable) Appender(ctx context.Context) storage.Appender {
	return &appender{ctx: ctx, w: a.w, byKey: map[string]int{}}
}

var errAppenderDone = errors.New("rules: the appender was already committed or rolled back")

// appender buffers samples by series, in the order first appended.
type appender struct {
	ctx    context.Context
	w      Writer
	byKey  map[string]int // labels' bytes: index in series
	series []prompb.TimeSeries
	labels []labels.Labels // of series
	done   bool
}

func (a *appender) of(l labels.Labels) (*prompb.TimeSeries, storage.SeriesRef, error) {
	if a.done {
		return nil, 0, errAppenderDone
	}
	key := string(l.Bytes(nil))
	i, ok := a.byKey[key]
	if !ok {
		i = len(a.series)
		a.byKey[key] = i
		a.series = append(a.series, prompb.TimeSeries{Labels: prompb.FromLabels(l, nil)})
		a.labels = append(a.labels, l.Copy())
	}
	return &a.series[i], storage.SeriesRef(i + 1), nil
}

func (a *appender) Append(_ storage.SeriesRef, l labels.Labels, t int64, v float64) (storage.SeriesRef, error) {
	ts, ref, err := a.of(l)
	if err != nil {
		return 0, err
	}
	ts.Samples = append(ts.Samples, prompb.Sample{Timestamp: t, Value: v})
	return ref, nil
}

func (a *appender) AppendHistogram(_ storage.SeriesRef, l labels.Labels, t int64, h *histogram.Histogram, fh *histogram.FloatHistogram) (storage.SeriesRef, error) {
	ts, ref, err := a.of(l)
	if err != nil {
		return 0, err
	}
	switch {
	case h != nil:
		ts.Histograms = append(ts.Histograms, prompb.FromIntHistogram(t, h))
	case fh != nil:
		ts.Histograms = append(ts.Histograms, prompb.FromFloatHistogram(t, fh))
	}
	return ref, nil
}

// Commit writes the buffer, if it holds anything; its error is the write's (a
// *remote.StatusError naming what was not stored).
func (a *appender) Commit() error {
	if a.done {
		return errAppenderDone
	}
	a.done = true
	if len(a.series) == 0 {
		return nil
	}
	_, err := a.w.WriteTimeSeries(a.ctx, a.series)
	if e := evaluationOf(a.ctx); e != nil {
		e.wrote(a.labels) // failed or not: some of it may be stored
	}
	a.series, a.labels = nil, nil
	return err
}

func (a *appender) Rollback() error {
	if a.done {
		return errAppenderDone
	}
	a.done, a.series, a.labels = true, nil, nil
	return nil
}

// SetOptions: the write path keeps or overwrites out-of-order samples as remote write
// does; the option to discard them has nothing to act on.
func (a *appender) SetOptions(*storage.AppendOptions) {}

// The rule manager appends no exemplars, metadata or created timestamps; these keep
// nothing.
func (a *appender) AppendExemplar(storage.SeriesRef, labels.Labels, exemplar.Exemplar) (storage.SeriesRef, error) {
	return 0, nil
}

func (a *appender) UpdateMetadata(storage.SeriesRef, labels.Labels, metadata.Metadata) (storage.SeriesRef, error) {
	return 0, nil
}

func (a *appender) AppendCTZeroSample(storage.SeriesRef, labels.Labels, int64, int64) (storage.SeriesRef, error) {
	return 0, nil
}

func (a *appender) AppendHistogramCTZeroSample(storage.SeriesRef, labels.Labels, int64, int64, *histogram.Histogram, *histogram.FloatHistogram) (storage.SeriesRef, error) {
	return 0, nil
}
