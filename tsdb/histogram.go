package tsdb

import (
	"context"
	"errors"
	"iter"
	"time"

	"github.com/seed71701133/tablets"
)

// Histogram types of the library (package tablets), here for convenience.
type (
	Histogram        = tablets.Histogram
	FloatHistogram   = tablets.FloatHistogram
	HistogramPoint   = tablets.HistogramPoint
	SeriesHistograms = tablets.SeriesHistograms
	SeriesHistogram  = tablets.SeriesHistogram
)

var errHistogramsTODO = errors.New("tsdb: histograms: not implemented yet")

// WriteHistograms stores native histogram samples of many series, at millisecond times, as
// WriteMany stores points: a sample whose series and millisecond are stored replaces it (the
// later argument wins within a call). Every sample is validated first (an error wrapping
// tablets.ErrInvalidHistogram for the series' bad samples, the others are written). The
// error joins a *tablets.WriteError per series and cause, FailedHistograms listing exactly
// the samples that may not be stored; nil means every sample is stored.
func (db *DB) WriteHistograms(ctx context.Context, batch []SeriesHistograms) error {
	return errHistogramsTODO
}

// QueryHistograms yields the histogram samples of series with from <= Time < to, oldest
// first.
func (db *DB) QueryHistograms(ctx context.Context, series string, from, to time.Time) iter.Seq2[HistogramPoint, error] {
	return func(yield func(HistogramPoint, error) bool) { yield(HistogramPoint{}, errHistogramsTODO) }
}

// QueryManyHistograms yields the histogram samples of every named series with
// from <= Time < to, each series' samples oldest first, packing many series a request.
func (db *DB) QueryManyHistograms(ctx context.Context, series []string, from, to time.Time) iter.Seq2[SeriesHistogram, error] {
	return func(yield func(SeriesHistogram, error) bool) { yield(SeriesHistogram{}, errHistogramsTODO) }
}
