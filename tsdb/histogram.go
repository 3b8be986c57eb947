package tsdb

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"time"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/batch"
	"github.com/seed71701133/tablets/internal/histenc"
	"github.com/seed71701133/tablets/rounding"
)

// Histogram types of the library (package tablets), here for convenience.
type (
	Histogram        = tablets.Histogram
	FloatHistogram   = tablets.FloatHistogram
	HistogramPoint   = tablets.HistogramPoint
	SeriesHistograms = tablets.SeriesHistograms
	SeriesHistogram  = tablets.SeriesHistogram
)

// WriteHistograms stores native histogram samples of many series in the histogram tables of
// their periods, at the millisecond (a time truncates to it, whatever the raw layout): a
// sample whose series and millisecond are stored replaces it (within a call the later
// argument wins, across entries of one series too). As WriteMany's points, the samples of a
// series with fewer than 100 in a period go to the staging table, those of every such series
// together, a transaction or a few for the whole call (see the package documentation,
// "Staging"); the others are written into the histogram table directly, a transaction per
// day (partition) and 100 chunks of up to 16 KiB, the series written 32 at a time (see
// "Histograms").
//
// Before any request it checks every series and sample, and rejects, each in a
// *tablets.WriteError of the series (Index -1) whose FailedHistograms lists those samples:
//   - a series whose name the raw layout or the histogram tables refuse: all its samples,
//     Err wrapping tablets.ErrInvalidSeries;
//   - invalid samples (HistogramPoint.Validate): Err wrapping tablets.ErrInvalidHistogram;
//   - times outside [tablets.MinTime, tablets.MaxTime]: Err wrapping tablets.ErrInvalidTime;
//   - samples older than the raw retention, or in a period whose tables Retain dropped: Err
//     wrapping ErrExpired (whether a period was dropped is read from the catalog the first
//     time, one request a period).
//
// The other samples are written: a series new to a period is listed in its index, flagged as
// having histograms there (see Select), before its samples are staged or written. Samples
// written directly that are older than Options.SealDelay (less 5 minutes) then mark their
// rollup slices dirty, as a Write's late points do (staged ones are marked by the Fold that
// moves them); a series whose samples are stored but whose slices could not be marked
// lists them all (writing them again marks them).
//
// A series not wholly written gets a *tablets.WriteError whose FailedHistograms lists
// exactly its samples that may not be stored (those of failed transactions; a failure stops
// the series not yet started), with the service's Status and Code (a throttled write
// matches tablets.ErrThrottled). The error joins them all, rejects first (in the batch's
// order); nil means every sample is stored. A transaction sent again (a retry after a lost
// reply) stores the same entities, and writing samples again stores the same samples: a
// caller retries a failed call, or its FailedHistograms, safely. A failure to read the
// catalog before writing is returned alone, nothing written.
func (db *DB) WriteHistograms(ctx context.Context, batch []SeriesHistograms) error {
	plans, rejects, err := db.planHistograms(ctx, batch)
	if err != nil {
		return err
	}
	errs := make([]error, 0, len(rejects))
	for _, r := range rejects {
		errs = append(errs, r)
	}
	return errors.Join(append(errs, db.writeHistPlanned(ctx, plans)...)...)
}

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
		staged, err := db.readStagedHists(ctx, names, from, to)
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
		spans, err := db.histSpans(ctx, from, to)
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
				err := readHistMany(ctx, db.service.NewClient(db.histTable(sp.period)), names, lo, hi, func(i int, s histenc.Sample) bool {
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
				if !db.histReadDone(sp.period, err) && err != nil {
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
			p := db.period(h.Time)
			if listed[p] || db.tables.knownDropped(p) {
				continue
			}
			listed[p], added = true, true
			out = append(out, histSpan{span{p, laterOf(from, db.periodStart(p)), earlierOf(to, db.periodEnd(p))}, true})
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

// histPlanned is a series' samples to write, by period.
type histPlanned struct {
	at       int // in the batch
	series   string
	samples  []HistogramPoint // in the batch's order
	units    []uint64         // their milliseconds
	byPeriod map[uint64][]int // indexes into samples
	periods  []uint64         // ascending
}

// planHistograms checks every series and sample, and that no period is dropped, before any
// write. It returns the samples to write by series, and the rejected ones (a
// *tablets.WriteError per series and cause, in the batch's order).
func (db *DB) planHistograms(ctx context.Context, batch []SeriesHistograms) ([]histPlanned, []*tablets.WriteError, error) {
	var expiredBefore time.Time
	if db.opts.RawRetention > 0 {
		expiredBefore = db.now().Add(-db.opts.RawRetention)
	}
	type indexed struct {
		at int
		we *tablets.WriteError
	}
	var rejects []indexed
	reject := func(at int, series string, samples []HistogramPoint, err error) {
		if len(samples) > 0 {
			rejects = append(rejects, indexed{at, &tablets.WriteError{Series: series, FailedHistograms: samples, Index: -1, Err: err}})
		}
	}
	var plans []*histPlanned
	planOf := map[string]*histPlanned{} // a series given twice is one plan: the later argument wins
	periods := map[uint64]bool{}
	for at, sh := range batch {
		if len(sh.Histograms) == 0 {
			continue
		}
		if err := db.validateHist(ctx, sh.Series); err != nil {
			reject(at, sh.Series, sh.Histograms, err)
			continue
		}
		pl := planOf[sh.Series]
		if pl == nil {
			pl = &histPlanned{at: at, series: sh.Series, byPeriod: map[uint64][]int{}}
			planOf[sh.Series] = pl
			plans = append(plans, pl)
		}
		var invalid, badTime, expired []HistogramPoint
		var invalidErr, badTimeErr, expiredErr error
		for i, h := range sh.Histograms {
			if err := validHistSample(h); err != nil {
				invalid = append(invalid, h)
				if invalidErr == nil {
					invalidErr = fmt.Errorf("tsdb: write %q: histogram %d: %w", sh.Series, i, err)
				}
				continue
			}
			u, err := histFormat.Units(h.Time)
			if err != nil {
				badTime = append(badTime, h)
				if badTimeErr == nil {
					badTimeErr = fmt.Errorf("tsdb: write %q: histogram %d: %w", sh.Series, i, err)
				}
				continue
			}
			if h.Time.Before(expiredBefore) {
				expired = append(expired, h)
				if expiredErr == nil {
					expiredErr = fmt.Errorf("tsdb: write %q: %w: histogram %d at %s is older than the raw retention (%v)", sh.Series, ErrExpired, i,
						h.Time.UTC().Format(time.RFC3339Nano), db.opts.RawRetention)
				}
				continue
			}
			p := db.period(h.Time)
			if pl.byPeriod[p] == nil {
				pl.periods = append(pl.periods, p)
			}
			pl.byPeriod[p] = append(pl.byPeriod[p], len(pl.samples))
			pl.samples = append(pl.samples, h)
			pl.units = append(pl.units, u)
			periods[p] = true
		}
		reject(at, sh.Series, invalid, invalidErr)
		reject(at, sh.Series, badTime, badTimeErr)
		reject(at, sh.Series, expired, expiredErr)
	}
	droppedErr := map[uint64]error{}
	for _, p := range slices.Sorted(maps.Keys(periods)) {
		err := db.tables.checkNotDropped(ctx, p)
		if errors.Is(err, ErrExpired) {
			droppedErr[p] = err
		} else if err != nil {
			return nil, nil, err
		}
	}
	var kept []histPlanned
	for _, pl := range plans {
		slices.Sort(pl.periods)
		var gone []HistogramPoint
		var goneErr error
		for _, p := range slices.Clone(pl.periods) {
			if err := droppedErr[p]; err != nil {
				for _, i := range pl.byPeriod[p] {
					gone = append(gone, pl.samples[i])
				}
				if goneErr == nil {
					goneErr = fmt.Errorf("tsdb: write %q: %w", pl.series, err)
				}
				delete(pl.byPeriod, p)
				pl.periods = slices.DeleteFunc(pl.periods, func(q uint64) bool { return q == p })
			}
		}
		reject(pl.at, pl.series, gone, goneErr)
		if len(pl.periods) > 0 {
			kept = append(kept, *pl)
		}
	}
	slices.SortStableFunc(rejects, func(a, b indexed) int { return a.at - b.at })
	out := make([]*tablets.WriteError, len(rejects))
	for i, r := range rejects {
		out[i] = r.we
	}
	return kept, out, nil
}

// writeHistPlanned makes the tables and index entries of each period, then writes each
// series' samples, and returns each series' error (a *tablets.WriteError) or nil.
func (db *DB) writeHistPlanned(ctx context.Context, plans []histPlanned) []error {
	bySeriesPeriod := map[uint64][]string{}
	for _, pl := range plans {
		for _, p := range pl.periods {
			bySeriesPeriod[p] = append(bySeriesPeriod[p], pl.series)
		}
	}
	// Flagged before its samples are written: a series with histograms is always flagged.
	periodErr := map[uint64]error{}
	for p, series := range bySeriesPeriod {
		err := db.tables.ensureKinds(ctx, p, histKind, indexKind)
		if err == nil {
			err = db.registerHistograms(ctx, p, series...)
		}
		periodErr[p] = err
	}
	// Few samples of a series in a period go to the staging table (as WriteMany's points),
	// many straight into the histogram table.
	staged := make([]histToStage, len(plans))
	direct := make([][]uint64, len(plans))
	for i, pl := range plans {
		var idx []int
		for _, p := range pl.periods {
			if db.staging && periodErr[p] == nil && len(pl.byPeriod[p]) < directPoints {
				idx = append(idx, pl.byPeriod[p]...)
			} else {
				direct[i] = append(direct[i], p)
			}
		}
		if len(idx) > 0 {
			staged[i] = sortedHists(pl, idx)
		}
	}
	stageFailed, stageErrs := db.stageHistograms(ctx, plans, staged)
	// The first failure stops the rest, as in WriteMany.
	parent := ctx
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	errs := batch.Run(ctx, writeConcurrency, len(plans), func(ctx context.Context, i int) error {
		err := db.writeHistSeries(ctx, plans[i], direct[i], periodErr, stageFailed[i], stageErrs[i])
		if err != nil {
			cancel(err)
		}
		return err
	})
	for i, err := range errs {
		var we *tablets.WriteError
		if err == nil || errors.As(err, &we) {
			continue
		}
		cause := fmt.Errorf("not written after another series failed: %w", context.Cause(ctx))
		if parent.Err() != nil {
			cause = fmt.Errorf("not written: %w", context.Cause(parent))
		}
		errs[i] = &tablets.WriteError{Series: plans[i].series, FailedHistograms: slices.Clone(plans[i].samples), Index: -1, Err: cause}
	}
	return errs
}

// writeHistSeries writes one series' samples of the periods direct, period by period, adds
// the samples that failed to stage (stageErr their error), then marks dirty the rollup
// slices its late samples written directly fall in (as a Write of late points does; a Fold
// marks those of staged samples).
func (db *DB) writeHistSeries(ctx context.Context, pl histPlanned, direct []uint64, periodErr map[uint64]error, stageFailed []HistogramPoint, stageErr error) error {
	lost := make([]bool, len(pl.samples))
	firstErr := stageErr
	for _, p := range direct {
		err := periodErr[p]
		var failed []int
		if err == nil {
			failed, err = db.writeHistPeriod(ctx, p, pl.series, pl.samples, pl.units, pl.byPeriod[p])
		} else {
			failed = pl.byPeriod[p]
		}
		if isTableGone(err) {
			db.tables.gone(histKind, p) // dropped meanwhile: a retry checks the catalog
		}
		for _, i := range failed {
			lost[i] = true
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	if firstErr == nil {
		var times []tablets.Point
		for _, p := range direct {
			for _, i := range pl.byPeriod[p] {
				times = append(times, tablets.Point{Time: pl.samples[i].Time})
			}
		}
		if err := db.flagStale(ctx, pl.series, times); err != nil {
			status, code := serviceAnswer(err)
			return &tablets.WriteError{Series: pl.series, FailedHistograms: slices.Clone(pl.samples), Code: code, Index: -1, Status: status,
				Err: fmt.Errorf("the samples are stored, but marking their rollup slices dirty failed (write them again): %w", err)}
		}
		return nil
	}
	we := &tablets.WriteError{Series: pl.series, Index: -1, Err: firstErr}
	var be *batch.Error
	if errors.As(firstErr, &be) {
		we.Index = be.Index
	}
	we.Status, we.Code = serviceAnswer(firstErr)
	we.FailedHistograms = slices.Clone(stageFailed)
	for i, l := range lost {
		if l {
			we.FailedHistograms = append(we.FailedHistograms, pl.samples[i])
		}
	}
	return we
}

// histRow is a chunk entity to write: it holds the samples [from, to) of a write's sorted
// samples.
type histRow struct {
	pk, rk   string
	body     []byte
	from, to int
}

// writeHistPeriod writes the samples idx (indexes into samples) of one period: chunks cut
// by partition and size, a transaction per partition and 100 chunks. It returns the
// indexes of the samples of failed transactions, and the first failure.
func (db *DB) writeHistPeriod(ctx context.Context, p uint64, series string, samples []HistogramPoint, units []uint64, idx []int) ([]int, error) {
	periodUnits := make([]uint64, len(idx))
	for j, i := range idx {
		periodUnits[j] = units[i]
	}
	kept := batch.LastWins(periodUnits) // positions in idx, by time
	sorted := make([]histenc.Sample, len(kept))
	for j, k := range kept {
		h := samples[idx[k]]
		sorted[j] = histenc.Sample{Unit: periodUnits[k], H: h.H, FH: h.FH}
	}
	lostUnits, first := db.writeHistSamples(ctx, p, series, sorted, priorityNext())
	if first == nil {
		return nil, nil
	}
	// Every argument whose millisecond went in a failed transaction may not be stored
	// (superseded duplicates included).
	var failed []int
	for j, i := range idx {
		if lostUnits[periodUnits[j]] {
			failed = append(failed, i)
		}
	}
	return failed, first
}

// writeHistSamples writes sorted samples (strictly increasing milliseconds) of one series
// into the histogram table of period p with priority prio: chunks cut by partition and
// size, a transaction per partition and 100 chunks. It returns the milliseconds of failed
// transactions, and the first failure.
func (db *DB) writeHistSamples(ctx context.Context, p uint64, series string, sorted []histenc.Sample, prio uint64) (map[uint64]bool, error) {
	rows := histRows(series, sorted, prio)
	txns := histTransactions(rows)
	client := db.service.NewClient(db.histTable(p))
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
