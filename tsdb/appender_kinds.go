package tsdb

import (
	"context"
	"fmt"
	"time"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/batch"
	"github.com/seed71701133/tablets/internal/histenc"
	"github.com/seed71701133/tablets/rounding"
	"github.com/seed71701133/tablets/tsdb/internal/raw"
	"github.com/seed71701133/tablets/tsdb/internal/staging"
)

// sample is one sample of the write path: a float point (h and fh nil) or a native
// histogram sample. Its plan's kind says which.
type sample struct {
	t  time.Time
	v  float64
	h  *Histogram
	fh *FloatHistogram
}

// sampleKind is what the write path does differently for float points and histogram
// samples: the checks, the codec of staging records and direct writes, the tables, and how
// a WriteError lists samples. Planning, registration, staging transactions and failure
// accounting are the same for both (write.go, staging.go).
type sampleKind struct {
	noun string // of a sample in messages
	// hist: the series' index entry is flagged as having histograms (see package internal/index).
	hist bool
	// table is the kind of the tables its samples are written into directly.
	table tableKind
	// validSeries checks a series key for the kind's tables (errors wrapped once, "tsdb: ").
	validSeries func(ctx context.Context, db *DB, series string) error
	// check checks a sample: an error wrapping tablets.ErrInvalidTime (its time) or
	// tablets.ErrInvalidHistogram (the sample).
	check func(s sample) error
	// list adds samples to a WriteError's list of the kind.
	list func(we *tablets.WriteError, samples []sample)
	// stageRecords cuts the samples idx (indexes into samples) of a series into staging
	// records, each no more than half a column.
	stageRecords func(series string, samples []sample, idx []int) []staging.Record
	// writePeriod writes the samples idx of a series into period p's table directly, and
	// returns those it may not have stored (indexes into samples) with the first failure.
	writePeriod func(ctx context.Context, db *DB, p uint64, series string, samples []sample, idx []int) ([]int, error)
}

// floatSamples are float points: the raw tables, stageenc float columns.
var floatSamples = &sampleKind{
	noun:  "point",
	table: rawKind,
	validSeries: func(ctx context.Context, db *DB, series string) error {
		return validSeries(ctx, db.floats.Store, series)
	},
	check: func(s sample) error { return rounding.CheckTime(s.t) },
	list: func(we *tablets.WriteError, samples []sample) {
		for _, s := range samples {
			we.Failed = append(we.Failed, tablets.Point{Time: s.t, Value: s.v})
		}
	},
	stageRecords: stagePointRecords,
	writePeriod: func(ctx context.Context, db *DB, p uint64, series string, samples []sample, idx []int) ([]int, error) {
		return writeSamples(ctx, db.floats.Store, p, series, samples, idx, func(s sample) tablets.Point { return tablets.Point{Time: s.t, Value: s.v} })
	},
}

// histSamples are native histogram samples: the histogram tables, stageenc histogram
// columns.
var histSamples = &sampleKind{
	noun:  "histogram",
	hist:  true,
	table: histKind,
	validSeries: func(ctx context.Context, db *DB, series string) error {
		return validSeries(ctx, db.hists.Store, series)
	},
	check: func(s sample) error {
		if err := raw.ValidHistSample(HistogramPoint{Time: s.t, H: s.h, FH: s.fh}); err != nil {
			return err
		}
		_, err := raw.HistFormat.Units(s.t)
		return err
	},
	list: func(we *tablets.WriteError, samples []sample) {
		for _, s := range samples {
			we.FailedHistograms = append(we.FailedHistograms, HistogramPoint{Time: s.t, H: s.h, FH: s.fh})
		}
	},
	stageRecords: stageHistRecords,
	writePeriod: func(ctx context.Context, db *DB, p uint64, series string, samples []sample, idx []int) ([]int, error) {
		return writeSamples(ctx, db.hists.Store, p, series, samples, idx, func(s sample) HistogramPoint { return HistogramPoint{Time: s.t, H: s.h, FH: s.fh} })
	},
}

// stagePointRecords stages float points: sorted by millisecond, the later argument winning
// a millisecond, cut into runs of at most half a column.
func stagePointRecords(series string, samples []sample, idx []int) []staging.Record {
	pts := make([]tablets.Point, len(idx))
	for j, i := range idx {
		pts[j] = tablets.Point{Time: samples[i].t, Value: samples[i].v}
	}
	return staging.PointRecords(series, pts, idx)
}

// stageHistRecords stages histogram samples: sorted by millisecond, the later argument
// winning a millisecond, cut into records (a chunk each) of at most half a column.
func stageHistRecords(series string, samples []sample, idx []int) []staging.Record {
	sorted, args := sortedHists(samples, idx)
	return staging.HistRecords(series, sorted, args)
}

// stagedWrites are the staged samples of plans (staged[i], indexes into plans[i].samples)
// cut into staging records: a write per plan, with no records where none is staged.
func stagedWrites(plans []planned, staged [][]int) []staging.Write {
	writes := make([]staging.Write, len(plans))
	for i, pl := range plans {
		if len(staged[i]) > 0 {
			writes[i] = staging.Write{Series: pl.series, Hist: pl.kind.hist, Records: pl.kind.stageRecords(pl.series, pl.samples, staged[i])}
		}
	}
	return writes
}

// histUnit is the millisecond of a histogram sample's time (checked before: Units cannot
// fail).
func histUnit(t time.Time) uint64 {
	u, _ := raw.HistFormat.Units(t)
	return u
}

// sortedHists sorts the histogram samples idx (indexes into samples) by millisecond, the
// later argument winning a millisecond, with the arguments of each millisecond (for
// failures: a failed record lists them all).
func sortedHists(samples []sample, idx []int) ([]histenc.Sample, [][]int) {
	units := make([]uint64, len(idx))
	for j, i := range idx {
		units[j] = histUnit(samples[i].t)
	}
	byUnit := map[uint64][]int{}
	for j, i := range idx {
		byUnit[units[j]] = append(byUnit[units[j]], i)
	}
	kept := batch.LastWins(units)
	sorted := make([]histenc.Sample, len(kept))
	args := make([][]int, len(kept))
	for j, k := range kept {
		h := samples[idx[k]]
		sorted[j] = histenc.Sample{Unit: units[k], H: h.h, FH: h.fh}
		args[j] = byUnit[units[k]]
	}
	return sorted, args
}

// validSeries checks a series for the tables of a kind (errors wrapped once, "tsdb: ").
func validSeries[S any, T raw.Table[S]](ctx context.Context, r *raw.Store[S, T], series string) error {
	if err := r.Validate(ctx, series); err != nil {
		return fmt.Errorf("tsdb: %w", err)
	}
	return nil
}

// writeSamples writes the samples idx (indexes into samples) of a series into period p's
// table of the kind of r, as sampleOf makes them, and returns the indexes (into samples) of
// those that may not be stored, and the first failure.
func writeSamples[S any, T raw.Table[S]](ctx context.Context, r *raw.Store[S, T], p uint64, series string, samples []sample, idx []int, sampleOf func(sample) S) ([]int, error) {
	in := make([]S, len(idx))
	for j, i := range idx {
		in[j] = sampleOf(samples[i])
	}
	failed, err := r.Write(ctx, p, series, in, 0)
	for j, f := range failed {
		failed[j] = idx[f]
	}
	return failed, err
}
