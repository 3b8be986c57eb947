package tsdb

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/batch"
	"github.com/seed71701133/tablets/tsdb/internal/azerr"
	"github.com/seed71701133/tablets/tsdb/internal/changelog"
)

// writeConcurrency is how many series a Commit writes at once.
const writeConcurrency = 32

// directPoints: a series with at least this many points in a period of one write is
// written into the raw table directly, a transaction of its own being cheaper than staging
// its points and folding them later.
const directPoints = 100

// planned is a series' samples of one kind to write, by period.
type planned struct {
	at       int // in the Appender: its first entry
	series   string
	kind     *sampleKind
	samples  []sample         // in the order appended
	byPeriod map[uint64][]int // indexes into samples
	periods  []uint64         // ascending
}

// of is the samples idx of the plan.
func (pl *planned) of(idx []int) []sample {
	out := make([]sample, len(idx))
	for j, i := range idx {
		out[j] = pl.samples[i]
	}
	return out
}

// plan checks every series and sample appended, and that no period is dropped, before any
// write. It returns the samples to write by series and kind (the entries of one series and
// kind merged), and the rejected ones (a *tablets.WriteError per series, kind and cause, in
// the order of entries). strict stops at bad input found without a request: the catalog is
// not read then.
func (a *Appender) plan(ctx context.Context, strict bool) ([]planned, []*tablets.WriteError, error) {
	db, entries := a.db, a.entries
	var expiredBefore time.Time
	if db.opts.RawRetention > 0 {
		expiredBefore = db.opts.Now().Add(-db.opts.RawRetention)
	}
	type indexed struct {
		at int // in entries
		we *tablets.WriteError
	}
	var rejects []indexed
	reject := func(at int, series string, kind *sampleKind, samples []sample, err error) {
		if len(samples) == 0 {
			return
		}
		we := &tablets.WriteError{Series: series, Index: -1, Err: err}
		kind.list(we, samples)
		rejects = append(rejects, indexed{at, we})
	}
	inOrder := func() []*tablets.WriteError {
		slices.SortStableFunc(rejects, func(a, b indexed) int { return a.at - b.at })
		out := make([]*tablets.WriteError, len(rejects))
		for i, r := range rejects {
			out[i] = r.we
		}
		return out
	}
	type planKey struct {
		series string
		kind   *sampleKind
	}
	var plans []*planned
	planOf := map[planKey]*planned{}
	periods := map[uint64]bool{}
	for at, e := range entries {
		if len(e.samples) == 0 {
			continue
		}
		if err := e.kind.validSeries(ctx, db, e.series); err != nil {
			reject(at, e.series, e.kind, e.samples, err)
			continue
		}
		pl := planOf[planKey{e.series, e.kind}]
		if pl == nil {
			pl = &planned{at: at, series: e.series, kind: e.kind, byPeriod: map[uint64][]int{}}
			planOf[planKey{e.series, e.kind}] = pl
			plans = append(plans, pl)
		}
		var invalid, badTime, expired []sample
		var invalidErr, badTimeErr, expiredErr error
		for i, s := range e.samples {
			if err := e.kind.check(s); err != nil {
				err = fmt.Errorf("tsdb: write %q: %s %d: %w", e.series, e.kind.noun, i, err)
				if errors.Is(err, tablets.ErrInvalidHistogram) {
					invalid = append(invalid, s)
					invalidErr = cmp.Or(invalidErr, err)
				} else {
					badTime = append(badTime, s)
					badTimeErr = cmp.Or(badTimeErr, err)
				}
				continue
			}
			if s.t.Before(expiredBefore) {
				expired = append(expired, s)
				if expiredErr == nil {
					expiredErr = fmt.Errorf("tsdb: write %q: %w: %s %d at %s is older than the raw retention (%v)", e.series, ErrExpired,
						e.kind.noun, i, s.t.UTC().Format(time.RFC3339Nano), db.opts.RawRetention)
				}
				continue
			}
			p := db.names.PeriodOf(s.t)
			if pl.byPeriod[p] == nil {
				pl.periods = append(pl.periods, p)
			}
			pl.byPeriod[p] = append(pl.byPeriod[p], len(pl.samples))
			pl.samples = append(pl.samples, s)
			periods[p] = true
		}
		reject(at, e.series, e.kind, invalid, invalidErr)
		reject(at, e.series, e.kind, badTime, badTimeErr)
		reject(at, e.series, e.kind, expired, expiredErr)
	}
	if strict && len(rejects) > 0 {
		return nil, inOrder(), nil
	}
	droppedErr := map[uint64]error{}
	for _, p := range slices.Sorted(maps.Keys(periods)) {
		err := db.tables.CheckNotDropped(ctx, p)
		if errors.Is(err, ErrExpired) {
			droppedErr[p] = err
		} else if err != nil {
			return nil, nil, err
		}
	}
	kept := make([]planned, 0, len(plans))
	for _, pl := range plans {
		slices.Sort(pl.periods)
		var gone []int
		var goneErr error
		for _, p := range slices.Clone(pl.periods) {
			if err := droppedErr[p]; err != nil {
				gone = append(gone, pl.byPeriod[p]...)
				if goneErr == nil {
					goneErr = fmt.Errorf("tsdb: write %q: %w", pl.series, err)
				}
				delete(pl.byPeriod, p)
				pl.periods = slices.DeleteFunc(pl.periods, func(q uint64) bool { return q == p })
			}
		}
		slices.Sort(gone)
		reject(pl.at, pl.series, pl.kind, pl.of(gone), goneErr)
		if len(pl.periods) > 0 {
			kept = append(kept, *pl)
		}
	}
	return kept, inOrder(), nil
}

// writePlanned makes the tables and index entries of each period, then stages or writes
// each plan's samples, and returns each plan's error (a *tablets.WriteError) or nil.
func (a *Appender) writePlanned(ctx context.Context, plans []planned) []error {
	db := a.db
	// A period's series, flagged where they have histograms, and the tables its samples go
	// to (those of the kinds it has, and its index).
	bySeriesPeriod := map[uint64]map[string]bool{}
	tables := map[uint64][]tableKind{}
	for _, pl := range plans {
		for _, p := range pl.periods {
			if bySeriesPeriod[p] == nil {
				bySeriesPeriod[p] = map[string]bool{}
				tables[p] = []tableKind{indexKind}
			}
			bySeriesPeriod[p][pl.series] = bySeriesPeriod[p][pl.series] || pl.kind.hist
			if !slices.Contains(tables[p], pl.kind.table) {
				tables[p] = append([]tableKind{pl.kind.table}, tables[p]...) // the index last
			}
		}
	}
	// Listed (and flagged) before its samples are written: a series with samples in a
	// period is always listed there, and flagged if they are histograms.
	periodErr := map[uint64]error{}
	for p, series := range bySeriesPeriod {
		err := db.tables.EnsureKinds(ctx, p, tables[p]...)
		if err == nil {
			err = db.index.Register(ctx, p, series)
		}
		periodErr[p] = err
	}
	// Few samples of a series in a period go to the staging table, many straight into its
	// table.
	staged := make([][]int, len(plans))
	direct := make([][]uint64, len(plans))
	for i, pl := range plans {
		for _, p := range pl.periods {
			if db.staging.Writes && periodErr[p] == nil && len(pl.byPeriod[p]) < directPoints {
				staged[i] = append(staged[i], pl.byPeriod[p]...)
			} else {
				direct[i] = append(direct[i], p)
			}
		}
	}
	stageFailed, stageErrs := db.staging.Stage(ctx, stagedWrites(plans, staged))
	// A plan wholly staged is done: its error lists what its failed transactions held, and
	// nothing else (it sends nothing more).
	errs := make([]error, len(plans))
	var writing []int
	for i := range plans {
		if len(direct[i]) == 0 {
			errs[i] = a.writeSeries(ctx, plans[i], nil, periodErr, stageFailed[i], stageErrs[i])
		} else {
			writing = append(writing, i)
		}
	}
	// Of the direct writes, the first failure stops the rest: when the account is down or
	// throttling, each series would go through every retry in turn, and the caller retries
	// the call anyway (writes are idempotent).
	parent := ctx
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	for j, err := range batch.Run(ctx, writeConcurrency, len(writing), func(ctx context.Context, j int) error {
		i := writing[j]
		err := a.writeSeries(ctx, plans[i], direct[i], periodErr, stageFailed[i], stageErrs[i])
		if err != nil {
			cancel(err)
		}
		return err
	}) {
		errs[writing[j]] = err
	}
	// Announce the direct writes in the raw part's change log, after they are stored (those
	// that failed too: some of their samples may be), so that no read cache answers without
	// them.
	if len(writing) > 0 {
		if err := db.changes.Record(parent, directRanges(plans, writing, direct)); err != nil {
			for _, i := range writing {
				if errs[i] == nil {
					errs[i] = unannounced(plans[i], err)
				}
			}
		}
	}
	for i, err := range errs {
		var we *tablets.WriteError
		if err == nil || errors.As(err, &we) {
			continue
		}
		cause := fmt.Errorf("not written after another series failed: %w", context.Cause(ctx))
		if parent.Err() != nil {
			cause = fmt.Errorf("not written: %w", context.Cause(parent))
		}
		we = &tablets.WriteError{Series: plans[i].series, Index: -1, Err: cause}
		plans[i].kind.list(we, plans[i].samples)
		errs[i] = we
	}
	return errs
}

// directRanges are the ranges of times the plans writing wrote into each period directly.
func directRanges(plans []planned, writing []int, direct [][]uint64) map[uint64]changelog.Range {
	ranges := map[uint64]changelog.Range{}
	for _, i := range writing {
		pl := plans[i]
		for _, p := range direct[i] {
			for _, k := range pl.byPeriod[p] {
				ms := pl.samples[k].t.UnixMilli()
				changelog.Widen(ranges, p, ms, ms+1)
			}
		}
	}
	return ranges
}

// unannounced is the error of a plan whose direct writes are stored but not recorded in
// the change log: written again, they are.
func unannounced(pl planned, err error) error {
	status, code := serviceAnswer(err)
	we := &tablets.WriteError{Series: pl.series, Code: code, Index: -1, Status: status,
		Err: fmt.Errorf("the %ss are stored, but recording the change for the read caches failed (write them again): %w", pl.kind.noun, err)}
	pl.kind.list(we, pl.samples)
	return we
}

// writeSeries writes the periods direct of one plan's samples, adds the samples that failed
// to stage (stageFailed, stageErr their error), then marks dirty the rollup slices its late
// samples written directly fall in (a Fold marks those of staged samples).
func (a *Appender) writeSeries(ctx context.Context, pl planned, direct []uint64, periodErr map[uint64]error, stageFailed []int, stageErr error) error {
	db := a.db
	lost := make([]bool, len(pl.samples))
	firstErr := stageErr
	for _, p := range direct {
		err := periodErr[p]
		var failed []int
		if err == nil {
			failed, err = pl.kind.writePeriod(ctx, db, p, pl.series, pl.samples, pl.byPeriod[p])
		} else {
			failed = pl.byPeriod[p]
		}
		if azerr.IsTableGone(err) {
			db.tables.Gone(pl.kind.table, p) // dropped meanwhile: a retry checks the catalog
		}
		for _, i := range failed {
			lost[i] = true
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	if firstErr == nil {
		// Late samples written directly: mark their slices dirty (after storing them).
		var times []tablets.Point
		for _, p := range direct {
			for _, i := range pl.byPeriod[p] {
				times = append(times, tablets.Point{Time: pl.samples[i].t})
			}
		}
		if err := db.tiers.FlagStale(ctx, pl.series, times); err != nil {
			status, code := serviceAnswer(err)
			we := &tablets.WriteError{Series: pl.series, Code: code, Index: -1, Status: status,
				Err: fmt.Errorf("the %ss are stored, but marking their rollup slices dirty failed (write them again): %w", pl.kind.noun, err)}
			pl.kind.list(we, pl.samples)
			return we
		}
		return nil
	}
	we := &tablets.WriteError{Series: pl.series, Index: -1, Err: firstErr}
	var inner *tablets.WriteError
	var be *batch.Error
	switch {
	case errors.As(firstErr, &inner):
		we.Code, we.Index, we.Status = inner.Code, inner.Index, inner.Status
	case errors.As(firstErr, &be):
		we.Code, we.Index, we.Status = be.Code, be.Index, be.Status
	default:
		we.Status, we.Code = serviceAnswer(firstErr)
	}
	failed := slices.Clone(stageFailed)
	for i, l := range lost {
		if l {
			failed = append(failed, i)
		}
	}
	pl.kind.list(we, pl.of(failed))
	return we
}

// serviceAnswer finds the service's status and error code in err: a failed transaction's
// (parsed from its reply), else a response's; 0 and "" when the service did not answer.
func serviceAnswer(err error) (int, string) {
	var be *batch.Error
	if errors.As(err, &be) {
		return be.Status, be.Code
	}
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		return re.StatusCode, re.ErrorCode
	}
	return 0, ""
}
