package tsdb

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/batch"
	"github.com/seed71701133/tablets/rounding"
)

// Write stores points of one series in the raw tables of their periods. Before any request
// it checks the series, the times and the raw retention (by Options.Now); a point in a
// period whose table was dropped fails the whole call with ErrExpired too, before anything is
// written, and such a table is never created again. Any bad point fails the whole call, its
// error wrapping tablets.ErrInvalidSeries, tablets.ErrInvalidTime or ErrExpired. The table of
// a period is created on its first write, with the next period's (so that it is not new, and
// throttled, when its time comes). A series new to a period is listed in its index before its
// points are written there. With the chunked layout, fewer than 100 points of a period go to
// the staging table instead, as WriteMany's do (see the package documentation, "Staging").
func (db *DB) Write(ctx context.Context, series string, points ...tablets.Point) error {
	if len(points) == 0 {
		return nil
	}
	plans, rejects, err := db.plan(ctx, []SeriesPoints{{Series: series, Points: points}}, true)
	if err != nil {
		return err
	}
	if len(rejects) > 0 {
		return rejects[0].Err
	}
	return db.writePlanned(ctx, plans)[0]
}

// SeriesPoints are points of one series, for WriteMany.
type SeriesPoints = tablets.SeriesPoints

// WriteMany is Write of many series, which stores what it can and says exactly what it did
// not store, as Prometheus' appender does.
//
// Before any request it checks every series and point, and rejects:
//   - a series whose name the layout refuses: all its points, in a *tablets.WriteError whose
//     Err wraps tablets.ErrInvalidSeries;
//   - points whose time is outside [tablets.MinTime, tablets.MaxTime]: a *tablets.WriteError
//     of the series listing those points, Err wrapping tablets.ErrInvalidTime;
//   - points older than the raw retention (Time before Options.Now() - RawRetention), or in
//     a period whose table was dropped: a *tablets.WriteError of the series listing those
//     points, Err wrapping ErrExpired. (Whether a period was dropped is read from the
//     catalog the first time, one request a period.)
//
// The other points are written: the series new to a period are listed in its index in
// transactions (one per index partition and 100 series), then the series are written: with
// the chunked layout, those with fewer than 100 points in a period together into the staging
// table, a transaction or a few for the whole call (see the package documentation,
// "Staging"); the others into their raw tables, 32 series at a time. The first series that
// fails stops the others: each series not
// wholly written gets a *tablets.WriteError listing exactly its points not stored, with the
// service's Status and Code (a throttled write matches tablets.ErrThrottled), or Err saying
// it was not written after another failed. A series whose points are stored but whose late
// points' rollup slices could not be marked dirty lists all its points too: writing them
// again is what marks them. Index is -1 for rejects.
//
// Each WriteError names one series and one cause: a series may have several (rejected points
// of several kinds, and a failed write of the rest). The error joins them all (errors.As
// finds one; its Unwrap() []error lists all): the rejects first, in the batch's order and for
// a series in the order above, then the failed writes; nil means every point is stored. A
// failure to read the catalog before writing is returned alone, nothing written.
func (db *DB) WriteMany(ctx context.Context, batch []SeriesPoints) error {
	plans, rejects, err := db.plan(ctx, batch, false)
	if err != nil {
		return err
	}
	errs := make([]error, 0, len(rejects))
	for _, r := range rejects {
		errs = append(errs, r)
	}
	return errors.Join(append(errs, db.writePlanned(ctx, plans)...)...)
}

// writeConcurrency is how many series WriteMany writes at once.
const writeConcurrency = 32

// planned is a series' points split by raw period.
type planned struct {
	at       int // in the batch
	series   string
	points   []tablets.Point
	byPeriod map[uint64][]tablets.Point
	periods  []uint64 // ascending
}

// plan checks every series and point, and that no period is dropped, before any write. It
// returns the points to write by series, and the rejected ones (a *tablets.WriteError per
// series and cause). strict stops at bad input found without a request: the catalog is not
// read then.
func (db *DB) plan(ctx context.Context, batch []SeriesPoints, strict bool) ([]planned, []*tablets.WriteError, error) {
	var expiredBefore time.Time
	if db.opts.RawRetention > 0 {
		expiredBefore = db.now().Add(-db.opts.RawRetention)
	}
	type indexed struct {
		at int // in the batch
		we *tablets.WriteError
	}
	var rejects []indexed
	reject := func(at int, series string, pts []tablets.Point, err error) {
		rejects = append(rejects, indexed{at, &tablets.WriteError{Series: series, Failed: pts, Index: -1, Err: err}})
	}
	inOrder := func() []*tablets.WriteError {
		slices.SortStableFunc(rejects, func(a, b indexed) int { return a.at - b.at })
		out := make([]*tablets.WriteError, len(rejects))
		for i, r := range rejects {
			out[i] = r.we
		}
		return out
	}
	plans := make([]planned, 0, len(batch))
	periods := map[uint64]bool{}
	for at, sp := range batch {
		if len(sp.Points) == 0 {
			continue
		}
		if err := db.validate(ctx, sp.Series); err != nil {
			reject(at, sp.Series, sp.Points, fmt.Errorf("tsdb: %w", err))
			continue
		}
		pl := planned{at: at, series: sp.Series, byPeriod: map[uint64][]tablets.Point{}}
		var badTime, expired []tablets.Point
		var badTimeErr, expiredErr error
		for i, p := range sp.Points {
			if err := rounding.CheckTime(p.Time); err != nil {
				badTime = append(badTime, p)
				if badTimeErr == nil {
					badTimeErr = fmt.Errorf("tsdb: write %q: point %d: %w", sp.Series, i, err)
				}
				continue
			}
			if p.Time.Before(expiredBefore) {
				expired = append(expired, p)
				if expiredErr == nil {
					expiredErr = fmt.Errorf("tsdb: write %q: %w: point %d at %s is older than the raw retention (%v)", sp.Series, ErrExpired, i,
						p.Time.UTC().Format(time.RFC3339Nano), db.opts.RawRetention)
				}
				continue
			}
			pp := db.period(p.Time)
			if pl.byPeriod[pp] == nil {
				pl.periods = append(pl.periods, pp)
			}
			pl.byPeriod[pp] = append(pl.byPeriod[pp], p)
			periods[pp] = true
		}
		if len(badTime) > 0 {
			reject(at, sp.Series, badTime, badTimeErr)
		}
		if len(expired) > 0 {
			reject(at, sp.Series, expired, expiredErr)
		}
		if len(pl.periods) > 0 {
			plans = append(plans, pl)
		}
	}
	if strict && len(rejects) > 0 {
		return nil, inOrder(), nil
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
	if len(droppedErr) == 0 {
		for i := range plans {
			plans[i].points = pointsOf(plans[i])
		}
		return plans, inOrder(), nil
	}
	kept := plans[:0]
	for _, pl := range plans {
		var gone []tablets.Point
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
		if len(gone) > 0 {
			reject(pl.at, pl.series, gone, goneErr)
		}
		if len(pl.periods) > 0 {
			pl.points = pointsOf(pl)
			kept = append(kept, pl)
		}
	}
	return kept, inOrder(), nil
}

// pointsOf lists a plan's points, period by period.
func pointsOf(pl planned) []tablets.Point {
	var out []tablets.Point
	for _, p := range pl.periods {
		out = append(out, pl.byPeriod[p]...)
	}
	return out
}

// writePlanned makes the tables and index entries of each period, then writes each series'
// points, and returns each series' error (a *tablets.WriteError) or nil.
func (db *DB) writePlanned(ctx context.Context, plans []planned) []error {
	bySeriesPeriod := map[uint64][]string{}
	for _, pl := range plans {
		for _, p := range pl.periods {
			bySeriesPeriod[p] = append(bySeriesPeriod[p], pl.series)
		}
	}
	// Listed before its points are written: a series with points is always listed.
	periodErr := map[uint64]error{}
	for p, series := range bySeriesPeriod {
		err := db.tables.ensure(ctx, p)
		if err == nil {
			err = db.register(ctx, p, series...)
		}
		periodErr[p] = err
	}
	// Few points of a series go to the staging table, many straight into the raw table.
	staged := make([][]tablets.Point, len(plans))
	direct := make([][]uint64, len(plans))
	for i, pl := range plans {
		for _, p := range pl.periods {
			if db.staging && periodErr[p] == nil && len(pl.byPeriod[p]) < directPoints {
				staged[i] = append(staged[i], pl.byPeriod[p]...)
			} else {
				direct[i] = append(direct[i], p)
			}
		}
	}
	stageFailed, stageErrs := db.stage(ctx, plans, staged)
	// The first failure stops the rest: when the account is down or throttling, each series
	// would go through every retry in turn, and the caller retries the call anyway (writes
	// are idempotent).
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	errs := batch.Run(ctx, writeConcurrency, len(plans), func(ctx context.Context, i int) error {
		err := db.writeSeries(ctx, plans[i], direct[i], periodErr, stageFailed[i], stageErrs[i])
		if err != nil {
			cancel(err)
		}
		return err
	})
	for i, err := range errs {
		var we *tablets.WriteError
		if errors.Is(err, context.Canceled) && !errors.As(err, &we) && ctx.Err() != nil {
			errs[i] = &tablets.WriteError{Series: plans[i].series, Failed: slices.Clone(plans[i].points), Index: -1,
				Err: fmt.Errorf("not written after another series failed: %w", context.Cause(ctx))}
		}
	}
	return errs
}

// writeSeries writes the periods direct of one series' points, adds the points that failed
// to stage (stageErr their error), then marks dirty the rollup slices its late points fall in.
func (db *DB) writeSeries(ctx context.Context, pl planned, direct []uint64, periodErr map[uint64]error, stageFailed []tablets.Point, stageErr error) error {
	failed := slices.Clone(stageFailed)
	firstErr := stageErr
	var code string
	index, status := -1, 0
	if stageErr != nil {
		status, code = serviceAnswer(stageErr)
	}
	for _, p := range direct {
		err := periodErr[p]
		if err == nil {
			var s tablets.Store
			if s, err = db.stores.get(p); err == nil {
				err = s.Write(ctx, pl.series, pl.byPeriod[p]...)
			}
		}
		if err == nil {
			continue
		}
		if isTableGone(err) {
			db.tables.gone(rawKind, p) // dropped meanwhile: a retry checks the catalog
		}
		var we *tablets.WriteError
		if errors.As(err, &we) {
			failed = append(failed, we.Failed...)
			if firstErr == nil {
				firstErr, code, index, status = err, we.Code, we.Index, we.Status
			}
			continue
		}
		failed = append(failed, pl.byPeriod[p]...)
		if firstErr == nil {
			firstErr = err
			status, code = serviceAnswer(err)
		}
	}
	if firstErr != nil {
		return &tablets.WriteError{Series: pl.series, Failed: failed, Code: code, Index: index, Status: status, Err: firstErr}
	}
	// Late points written directly: mark their slices dirty (after storing them). Staged
	// points are marked by the Fold that moves them (see Fold).
	var written []tablets.Point
	for _, p := range direct {
		written = append(written, pl.byPeriod[p]...)
	}
	if err := db.flagStale(ctx, pl.series, written); err != nil {
		status, code := serviceAnswer(err)
		return &tablets.WriteError{Series: pl.series, Failed: pl.points, Code: code, Index: -1, Status: status,
			Err: fmt.Errorf("the points are stored, but marking their rollup slices dirty failed (write them again): %w", err)}
	}
	return nil
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

// indexPartition is the index partition of plain series (not label sets): RowKey the series.
const indexPartition = "s"
