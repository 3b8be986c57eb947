package tsdb

import (
	"context"
	"fmt"
	"time"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/histenc"
	"github.com/seed71701133/tablets/internal/stageenc"
	"github.com/seed71701133/tablets/rounding"
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
	// hist: the series' index entry is flagged as having histograms (histogramsProperty).
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
	stageRecords func(series string, samples []sample, idx []int) []stageRecord
	// writePeriod writes the samples idx of a series into period p's table directly, and
	// returns those it may not have stored (indexes into samples) with the first failure.
	writePeriod func(ctx context.Context, db *DB, p uint64, series string, samples []sample, idx []int) ([]int, error)
}

// floatSamples are float points: the raw tables, stageenc float columns.
var floatSamples = &sampleKind{
	noun:  "point",
	table: rawKind,
	validSeries: func(ctx context.Context, db *DB, series string) error {
		return validSeries(ctx, db.floats.rawStore, series)
	},
	check: func(s sample) error { return rounding.CheckTime(s.t) },
	list: func(we *tablets.WriteError, samples []sample) {
		for _, s := range samples {
			we.Failed = append(we.Failed, tablets.Point{Time: s.t, Value: s.v})
		}
	},
	stageRecords: stagePointRecords,
	writePeriod: func(ctx context.Context, db *DB, p uint64, series string, samples []sample, idx []int) ([]int, error) {
		return writeSamples(ctx, db.floats.rawStore, p, series, samples, idx, func(s sample) tablets.Point { return tablets.Point{Time: s.t, Value: s.v} })
	},
}

// histSamples are native histogram samples: the histogram tables, stageenc histogram
// columns.
var histSamples = &sampleKind{
	noun:  "histogram",
	hist:  true,
	table: histKind,
	validSeries: func(ctx context.Context, db *DB, series string) error {
		return validSeries(ctx, db.hists.rawStore, series)
	},
	check: func(s sample) error {
		if err := validHistSample(HistogramPoint{Time: s.t, H: s.h, FH: s.fh}); err != nil {
			return err
		}
		_, err := histFormat.Units(s.t)
		return err
	},
	list: func(we *tablets.WriteError, samples []sample) {
		for _, s := range samples {
			we.FailedHistograms = append(we.FailedHistograms, HistogramPoint{Time: s.t, H: s.h, FH: s.fh})
		}
	},
	stageRecords: stageHistRecords,
	writePeriod: func(ctx context.Context, db *DB, p uint64, series string, samples []sample, idx []int) ([]int, error) {
		return writeSamples(ctx, db.hists.rawStore, p, series, samples, idx, func(s sample) HistogramPoint { return HistogramPoint{Time: s.t, H: s.h, FH: s.fh} })
	},
}

// stageRecord is a run of one series' samples in a staging column: a float series (of a
// float entity) or a histogram record (of a histogram entity).
type stageRecord struct {
	points      *stageenc.Series // float points
	chunk       []byte           // histogram samples (histenc), of key
	key         string
	size        int // bytes in the column
	first, last int64
	count       int
	args        []int // the caller's samples it holds: a failure lists exactly them
}

// addTo adds the record to an entity of its kind.
func (r stageRecord) addTo(e *stagingEntity, column int, piece stagedPiece) {
	if r.points != nil {
		e.add(column, *r.points, piece)
		return
	}
	e.addHist(column, r.key, r.chunk, r.first, r.last, r.count, piece)
}

// stagePointRecords stages float points: sorted by millisecond, the later argument winning
// a millisecond, cut into runs of at most half a column.
func stagePointRecords(series string, samples []sample, idx []int) []stageRecord {
	pts := make([]tablets.Point, len(idx))
	for j, i := range idx {
		pts[j] = tablets.Point{Time: samples[i].t, Value: samples[i].v}
	}
	s := stageSeries(series, pts)
	var out []stageRecord
	for len(s.Times) > 0 {
		piece := s
		for stageenc.Size(piece)+stageenc.HeaderSize > stageMaxColumn/2 && len(piece.Times) > 1 {
			half := len(piece.Times) / 2
			piece = stageenc.Series{Key: s.Key, Times: piece.Times[:half], Values: piece.Values[:half]}
		}
		s = stageenc.Series{Key: s.Key, Times: s.Times[len(piece.Times):], Values: s.Values[len(piece.Times):]}
		// The caller's points the piece holds (a piece is a run of milliseconds).
		first, last := piece.Times[0], piece.Times[len(piece.Times)-1]
		var args []int
		for _, i := range idx {
			if ms := samples[i].t.UnixMilli(); ms >= first && ms <= last {
				args = append(args, i)
			}
		}
		out = append(out, stageRecord{points: &piece, key: series, size: stageenc.Size(piece), first: first, last: last,
			count: len(piece.Times), args: args})
	}
	return out
}

// stageHistRecords stages histogram samples: sorted by millisecond, the later argument
// winning a millisecond, cut into records (a chunk each) of at most half a column.
func stageHistRecords(series string, samples []sample, idx []int) []stageRecord {
	sorted, args := sortedHists(samples, idx)
	var out []stageRecord
	for len(sorted) > 0 {
		chunk, k := histenc.AppendLimit(nil, sorted, stageMaxColumn/2)
		var held []int
		for _, a := range args[:k] {
			held = append(held, a...)
		}
		out = append(out, stageRecord{chunk: chunk, key: series, size: stageenc.HistRecordSize(series, len(chunk)),
			first: int64(sorted[0].Unit), last: int64(sorted[k-1].Unit), count: k, args: held})
		sorted, args = sorted[k:], args[k:]
	}
	return out
}

// validSeries checks a series for the tables of a kind (errors wrapped once, "tsdb: ").
func validSeries[S any, T rawTable[S]](ctx context.Context, r *rawStore[S, T], series string) error {
	if err := r.validate(ctx, series); err != nil {
		return fmt.Errorf("tsdb: %w", err)
	}
	return nil
}

// writeSamples writes the samples idx (indexes into samples) of a series into period p's
// table of the kind of r, as sampleOf makes them, and returns the indexes (into samples) of
// those that may not be stored, and the first failure.
func writeSamples[S any, T rawTable[S]](ctx context.Context, r *rawStore[S, T], p uint64, series string, samples []sample, idx []int, sampleOf func(sample) S) ([]int, error) {
	in := make([]S, len(idx))
	for j, i := range idx {
		in[j] = sampleOf(samples[i])
	}
	failed, err := r.write(ctx, p, series, in, 0)
	for j, f := range failed {
		failed[j] = idx[f]
	}
	return failed, err
}
