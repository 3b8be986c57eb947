package tsdb

import (
	"cmp"
	"context"
	"fmt"
	"iter"
	"slices"
	"time"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/batch"
	"github.com/seed71701133/tablets/internal/histenc"
	"github.com/seed71701133/tablets/rounding"
	"github.com/seed71701133/tablets/tsdb/internal/staging"
)

// Histogram types of the library (package tablets), here for convenience.
type (
	Histogram        = tablets.Histogram
	FloatHistogram   = tablets.FloatHistogram
	HistogramPoint   = tablets.HistogramPoint
	SeriesHistograms = tablets.SeriesHistograms
	SeriesHistogram  = tablets.SeriesHistogram
)

// QueryHistograms yields the histogram samples of series with from <= Time < to, oldest
// first, each the latest write of its millisecond. Bad input is yielded as an error before
// any request (tablets.ErrInvalidSeries, tablets.ErrInvalidTime).
func (db *DB) QueryHistograms(ctx context.Context, series string, from, to time.Time) iter.Seq2[HistogramPoint, error] {
	return func(yield func(HistogramPoint, error) bool) {
		for s, err := range db.QueryManyHistograms(ctx, []string{series}, from, to) {
			if !yield(s.HistogramPoint, err) || err != nil {
				return
			}
		}
	}
}

// QueryManyHistograms yields the histogram samples of every named series with
// from <= Time < to, table (period) by table, each series' samples oldest first; a name
// given twice is read once. The series share requests: their clauses are packed into
// filters of at most Azure's 15 comparisons (about five series a request for a range inside
// one day, two or three across days). A database that stages reads the staged samples of
// all the series first, one query (see the package documentation, "Histograms"). Bad input
// is yielded as an error before any request.
func (db *DB) QueryManyHistograms(ctx context.Context, series []string, from, to time.Time) iter.Seq2[SeriesHistogram, error] {
	return func(yield func(SeriesHistogram, error) bool) {
		var names []string
		seen := make(map[string]bool, len(series))
		for _, name := range series {
			if err := db.validateHist(ctx, name); err != nil {
				yield(SeriesHistogram{}, err)
				return
			}
			if !seen[name] {
				seen[name] = true
				names = append(names, name)
			}
		}
		if err := rounding.CheckRange(from, to); err != nil {
			yield(SeriesHistogram{}, err)
			return
		}
		if len(names) == 0 {
			return
		}
		// The staged samples first: a Fold that moves them meanwhile writes them into the
		// tables before deleting them, so none is missed.
		_, staged, err := db.staging.readKinds(ctx, names, from, to, staging.Hists)
		if err != nil {
			yield(SeriesHistogram{}, err)
			return
		}
		db.histogramsWithStaged(ctx, names, from, to, staged)(yield)
	}
}

// histogramsWithStaged yields the histogram samples of names (valid, distinct) in
// [from, to) from the tables, table by table, merged with staged (read before, by series,
// each sorted, one a millisecond): where both hold a millisecond, the staged sample is the
// later write. Staged samples are read whatever the tables this process knows of (another
// may have made the table since its last listing), but those of a period known to be
// dropped or found gone (Retain dropped it) are left out.
func (db *DB) histogramsWithStaged(ctx context.Context, names []string, from, to time.Time, staged map[string][]HistogramPoint) iter.Seq2[SeriesHistogram, error] {
	return func(yield func(SeriesHistogram, error) bool) {
		spans, err := db.spans(ctx, histKind, from, to)
		if err != nil {
			yield(SeriesHistogram{}, err)
			return
		}
		for _, sp := range db.withStagedSpans(spans, names, from, to, staged) {
			lo, hi := histUnits(sp.from, sp.to)
			if lo >= hi {
				continue
			}
			rest := make([][]HistogramPoint, len(names)) // each series' staged samples of the span
			for i, name := range names {
				rest[i] = histsIn(staged[name], sp.from, sp.to)
			}
			stopped := false
			emit := func(i int, p HistogramPoint) bool {
				stopped = !yield(SeriesHistogram{Series: names[i], HistogramPoint: p}, nil)
				return !stopped
			}
			if !sp.stagedOnly {
				err := readHistMany(ctx, db.service.NewClient(db.names.HistTable(sp.period)), names, lo, hi, func(i int, s histenc.Sample) bool {
					p := pointOf(s)
					replaced := false
					for len(rest[i]) > 0 && !rest[i][0].Time.After(p.Time) {
						replaced = rest[i][0].Time.Equal(p.Time)
						if !emit(i, rest[i][0]) {
							return false
						}
						rest[i] = rest[i][1:]
					}
					return replaced || emit(i, p)
				})
				if stopped {
					return
				}
				if !db.readDone(histKind, sp.period, err) && err != nil {
					yield(SeriesHistogram{}, fmt.Errorf("tsdb: histograms: %w", err))
					return
				} else if err != nil {
					continue // the table is gone, and its period with it
				}
			}
			for i := range names {
				for _, p := range rest[i] {
					if !emit(i, p) {
						return
					}
				}
			}
		}
	}
}

// histSpan is a span of a histogram read: a table's, or (stagedOnly) a period of staged
// samples whose table this process does not know of.
type histSpan struct {
	span
	stagedOnly bool
}

// withStagedSpans adds to spans (oldest first) the periods of [from, to) holding staged
// samples of names that spans lack, unless known dropped, in order.
func (db *DB) withStagedSpans(spans []span, names []string, from, to time.Time, staged map[string][]HistogramPoint) []histSpan {
	out := make([]histSpan, 0, len(spans))
	listed := map[uint64]bool{}
	for _, sp := range spans {
		out = append(out, histSpan{span: sp})
		listed[sp.period] = true
	}
	added := false
	for _, name := range names {
		for _, h := range staged[name] {
			p := db.names.PeriodOf(h.Time)
			if listed[p] || db.tables.knownDropped(p) {
				continue
			}
			listed[p], added = true, true
			out = append(out, histSpan{span{p, laterOf(from, db.names.Start(p)), earlierOf(to, db.names.End(p))}, true})
		}
	}
	if added {
		slices.SortFunc(out, func(a, b histSpan) int { return cmp.Compare(a.period, b.period) })
	}
	return out
}

// histsIn is the part of hs (sorted) in [from, to).
func histsIn(hs []HistogramPoint, from, to time.Time) []HistogramPoint {
	lo, _ := slices.BinarySearchFunc(hs, from, func(p HistogramPoint, t time.Time) int { return p.Time.Compare(t) })
	hi, _ := slices.BinarySearchFunc(hs, to, func(p HistogramPoint, t time.Time) int { return p.Time.Compare(t) })
	return hs[lo:max(lo, hi)]
}

// validateHist checks a series for the raw layout (as Write does) and for the keys of the
// histogram tables, remembering the series it passed lately.
func (db *DB) validateHist(ctx context.Context, series string) error {
	if err := db.validate(ctx, series); err != nil {
		return fmt.Errorf("tsdb: %w", err)
	}
	key := "\x00h" + series // no series holds a control character: apart from validate's
	if _, ok := db.valid.get(key); ok {
		return nil
	}
	if err := validateHistSeries(series); err != nil {
		return fmt.Errorf("tsdb: %w", err)
	}
	db.valid.add(key, struct{}{})
	return nil
}

// histMaxSampleBytes bounds one sample's encoding: a chunk of it alone must fit Azure's
// 64 KiB binary property.
const histMaxSampleBytes = 63 << 10

// validHistSample is HistogramPoint.Validate, and a sample small enough to store (a
// histogram of thousands of buckets may not be): errors wrap tablets.ErrInvalidHistogram.
func validHistSample(p HistogramPoint) error {
	if err := p.Validate(); err != nil {
		return err
	}
	var parts int // an upper bound of the encoding's size, cheap to compute
	if p.H != nil {
		parts = 2*(len(p.H.PositiveBuckets)+len(p.H.NegativeBuckets)) + len(p.H.CustomValues) + len(p.H.PositiveSpans) + len(p.H.NegativeSpans)
	} else {
		parts = 2*(len(p.FH.PositiveBuckets)+len(p.FH.NegativeBuckets)) + len(p.FH.CustomValues) + len(p.FH.PositiveSpans) + len(p.FH.NegativeSpans)
	}
	if 10*parts+128 <= histMaxSampleBytes {
		return nil
	}
	if n := len(histenc.Append(nil, []histenc.Sample{{H: p.H, FH: p.FH}})); n > histMaxSampleBytes {
		return fmt.Errorf("%w: %d bytes encoded, over the %d a sample may take", tablets.ErrInvalidHistogram, n, histMaxSampleBytes)
	}
	return nil
}

// histRow is a chunk entity to write: it holds the samples [from, to) of a write's sorted
// samples.
type histRow struct {
	pk, rk   string
	body     []byte
	from, to int
}

// writeHistPeriod writes the histogram samples idx (indexes into samples) of one period:
// chunks cut by partition and size, a transaction per partition and 100 chunks. It returns
// the indexes of the samples of failed transactions, and the first failure.
func (db *DB) writeHistPeriod(ctx context.Context, p uint64, series string, samples []sample, idx []int) ([]int, error) {
	sorted, args := sortedHists(samples, idx)
	lostUnits, first := db.writeHistSamples(ctx, p, series, sorted, priorityNext())
	if first == nil {
		return nil, nil
	}
	// Every argument whose millisecond went in a failed transaction may not be stored
	// (superseded duplicates included).
	var failed []int
	for j, s := range sorted {
		if lostUnits[s.Unit] {
			failed = append(failed, args[j]...)
		}
	}
	slices.Sort(failed)
	return failed, first
}

// writeHistSamples writes sorted samples (strictly increasing milliseconds) of one series
// into the histogram table of period p with priority prio: chunks cut by partition and
// size, a transaction per partition and 100 chunks. It returns the milliseconds of failed
// transactions, and the first failure.
func (db *DB) writeHistSamples(ctx context.Context, p uint64, series string, sorted []histenc.Sample, prio uint64) (map[uint64]bool, error) {
	rows := histRows(series, sorted, prio)
	txns := histTransactions(rows)
	client := db.service.NewClient(db.names.HistTable(p))
	errs := batch.Run(ctx, histSeriesConcurrency, len(txns), func(ctx context.Context, t int) error {
		return submitHistRows(ctx, client, rows[txns[t].from:txns[t].to])
	})
	lostUnits := map[uint64]bool{}
	var first error
	for t, err := range errs {
		if err == nil {
			continue
		}
		if first == nil {
			first = err
		}
		for _, r := range rows[txns[t].from:txns[t].to] {
			for _, s := range sorted[r.from:r.to] {
				lostUnits[s.Unit] = true
			}
		}
	}
	if first == nil {
		return nil, nil
	}
	return lostUnits, fmt.Errorf("tsdb: histograms: %w", first)
}

// histSeriesConcurrency is how many transactions of one series a write has in flight.
const histSeriesConcurrency = 4
