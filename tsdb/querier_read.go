package tsdb

import (
	"context"
	"fmt"
	"iter"
	"time"

	"github.com/seed71701133/tablets/tsdb/internal/raw"
	"github.com/seed71701133/tablets/tsdb/internal/staging"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/rounding"
)

// SampleKinds selects the kinds of samples a Querier's Read reads.
type SampleKinds uint8

const (
	FloatSamples     SampleKinds = 1 << iota // float points
	HistogramSamples                         // native histogram samples
	AllSamples       = FloatSamples | HistogramSamples
)

// Read yields the named series (series keys, SeriesOf's or plain names; a name given
// twice is read once) with their raw samples of kinds in the Querier's range, in the order
// given, as Select reads a series raw: floats and histogram samples together, times
// ascending, the staged ones included (one read of the staging table for both kinds), the
// histogram kept where a float shares its millisecond. A series without samples there is
// left out. It reads the samples of all the series at once, packed into few requests (the
// float layout's QueryMany; the histogram tables' filters of at most Azure's 15
// comparisons, 13 to 15 series a request for a range inside one day). Bad input is
// yielded as an error before any request: a series the layout refuses, or with
// HistogramSamples one the histogram tables refuse (tablets.ErrInvalidSeries); a bad range
// (tablets.ErrInvalidTime).
func (qr *Querier) Read(ctx context.Context, kinds SampleKinds, series ...string) iter.Seq2[*Series, error] {
	return func(yield func(*Series, error) bool) {
		db := qr.q.db
		from, to := qr.from, qr.to
		var names []string
		byName := make(map[string]*Series, len(series))
		for _, name := range series {
			err := db.floats.Validate(ctx, name)
			if err == nil && kinds&HistogramSamples != 0 {
				err = db.hists.Validate(ctx, name)
			}
			if err != nil {
				yield(nil, fmt.Errorf("tsdb: %w", err))
				return
			}
			if byName[name] == nil {
				byName[name] = &Series{Series: name}
				names = append(names, name)
			}
		}
		if err := rounding.CheckRange(from, to); err != nil {
			yield(nil, err)
			return
		}
		if len(names) == 0 || kinds&AllSamples == 0 {
			return
		}
		var floats, hists []string
		var staged staging.Kinds
		if kinds&FloatSamples != 0 {
			floats, staged = names, staged|staging.Floats
		}
		if kinds&HistogramSamples != 0 {
			hists, staged = names, staged|staging.Hists
		}
		// The staged samples first: a Fold that moves them meanwhile writes them into the
		// tables before deleting them, so none is missed.
		stagedPoints, stagedHists, err := db.staging.ReadKinds(ctx, names, from, to, staged)
		if err != nil {
			yield(nil, err)
			return
		}
		if err := qr.q.readSamples(ctx, byName, hists, floats, from, to, stagedHists, stagedPoints); err != nil {
			yield(nil, err)
			return
		}
		for _, name := range names {
			s := byName[name]
			s.finish()
			if n, _ := s.Len(); n > 0 && !yield(s, nil) {
				return
			}
		}
	}
}

// readSamples reads into the series of byName the histogram samples of hists, then the
// float points of floats, in [from, to), from the histogram and raw tables merged with
// their staged samples (read before, by series).
func (q *Queryable) readSamples(ctx context.Context, byName map[string]*Series, hists, floats []string, from, to time.Time,
	stagedHists map[string][]HistogramPoint, stagedPoints map[string][]tablets.Point) error {
	db := q.db
	if len(hists) > 0 {
		for p, err := range db.hists.WithStaged(ctx, hists, from, to, stagedHists) {
			if err != nil {
				return fmt.Errorf("tsdb: read histograms: %w", err)
			}
			if s := byName[p.Series]; s != nil {
				if err := s.appendHistogram(p.Time.UnixMilli(), p.HistogramPoint); err != nil {
					return fmt.Errorf("tsdb: series %s: %w", p.Series, err)
				}
			}
		}
	}
	if len(floats) == 0 {
		return nil
	}
	return appendFloatRuns(byName, stagedPoints, func(point func(tablets.SeriesPoint) bool, after func(string, []tablets.Point) bool, run func(raw.FloatRun) bool) error {
		return db.floats.ReadRuns(ctx, floats, from, to, stagedPoints, point, after, run)
	})
}

// appendFloatRuns appends the points read (read passes them to point, after and run) to the
// series of byName they name (others are left out), the points of a series coming
// together (a run; a series may have more than one, one a period), times ascending in
// each. Runs of cached points come whole, still encoded (raw.FloatRun), and the Series
// keeps them so.
//
// A series is looked up once a run, not once a point (a refresh from the caches spends its
// time per point). Each run reserves what the run before it held plain, or its staged
// points if more: the series of a panel hold about as many points each, and raw points
// appended a doubling at a time were 3.4 s of a soak's first minute (run 81, growing
// slices). A run much shorter than the one before leaves room unused, never more than
// that one's points.
func appendFloatRuns(byName map[string]*Series, stagedPoints map[string][]tablets.Point,
	read func(point func(tablets.SeriesPoint) bool, after func(string, []tablets.Point) bool, run func(raw.FloatRun) bool) error) error {
	var last *Series
	lastName, started := "", false
	plain := 0
	seriesOf := func(name string) *Series {
		if !started || name != lastName {
			last, lastName, started = byName[name], name, true
			if last != nil {
				last.reserve(max(plain, len(stagedPoints[name])))
			}
			plain = 0
		}
		return last
	}
	return read(func(p tablets.SeriesPoint) bool {
		if s := seriesOf(p.Series); s != nil {
			s.appendFloat(p.Time.UnixMilli(), p.Value)
			plain++
		}
		return true
	}, func(name string, pts []tablets.Point) bool {
		if s := seriesOf(name); s != nil {
			for _, p := range pts {
				s.appendFloat(p.Time.UnixMilli(), p.Value)
			}
			plain += len(pts)
		}
		return true
	}, func(fr raw.FloatRun) bool {
		if s := seriesOf(fr.Series); s != nil {
			s.appendRun(fr.Chunk, fr.N)
		}
		return true
	})
}
