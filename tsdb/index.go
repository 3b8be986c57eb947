package tsdb

import (
	"context"
	"iter"
	"time"

	"github.com/seed71701133/tablets/tsdb/internal/index"
)

// The series index is package internal/index's (index.Index); these are the DB's methods
// over it.

// SeriesInfo is a series Select found: its key and its label set, and Histograms: the
// series has histogram samples in a period of the range (its index entry there says so);
// read them with a Querier's Read or Select.
type SeriesInfo = index.SeriesInfo

// Select yields the label sets with points or histogram samples in the periods that [from,
// to) overlaps (the index's granularity is the period) whose labels match every matcher,
// sorted by labels as Prometheus sorts them; SeriesInfo.Histograms is set for those with
// histogram samples in one of those periods (read them with a Querier's Select or Read).
// It reads the index of each period the range covers: with an equality on MetricName (or a
// regexp on it that is an alternation of literals) only that metric's partition, else the
// partitions of every label set. Bad matchers, or none that does not match the empty
// string, give an error wrapping tablets.ErrInvalidMatcher before any request.
func (db *DB) Select(ctx context.Context, from, to time.Time, ms ...Matcher) iter.Seq2[SeriesInfo, error] {
	return func(yield func(SeriesInfo, error) bool) {
		found, err := db.index.SelectSets(ctx, from, to, ms, true)
		if err != nil {
			yield(SeriesInfo{}, err)
			return
		}
		for _, s := range found {
			if !yield(s, nil) {
				return
			}
		}
	}
}

// LabelNames returns the sorted label names of the series with points in the periods [from,
// to) overlaps that match the matchers (all series' with none), as Prometheus' API does:
// MetricName is one of them.
func (db *DB) LabelNames(ctx context.Context, from, to time.Time, ms ...Matcher) ([]string, error) {
	return db.index.LabelNames(ctx, from, to, ms)
}

// LabelValues returns the sorted values of the label name among the series LabelNames would
// consider. A series without the label contributes no value ("" is never a value).
func (db *DB) LabelValues(ctx context.Context, name string, from, to time.Time, ms ...Matcher) ([]string, error) {
	return db.index.LabelValues(ctx, name, from, to, ms)
}
