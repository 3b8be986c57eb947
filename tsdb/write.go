package tsdb

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/internal/batch"
	"github.com/seed71701133/tablets/rounding"
)

// catalogDropped is the catalog partition of dropped tables: RowKey the table's name.
const catalogDropped = "dropped"

// Write stores points of one series in the raw tables of their periods. Before any request
// it checks the times and the raw retention (by the wall clock); a point in a period whose
// table was dropped fails the whole call with ErrExpired too, before anything is written,
// and such a table is never created again. The table of a period is created on its first
// write, with the next period's (so that it is not new, and throttled, when its time comes).
// A series new to a period is listed in its index before its points are written there.
func (db *DB) Write(ctx context.Context, series string, points ...tablets.Point) error {
	if len(points) == 0 {
		return nil
	}
	plans, err := db.plan(ctx, []SeriesPoints{{series, points}})
	if err != nil {
		return err
	}
	return db.writePlanned(ctx, plans)[0]
}

// SeriesPoints are points of one series, for WriteMany.
type SeriesPoints struct {
	Series string
	Points []tablets.Point
}

// WriteMany is Write of many series: every series and point is checked before any request,
// the series new to a period are listed in its index in transactions (one per index
// partition and 100 series), then the series are written, writeConcurrency at a time; the
// first series that fails stops the others. Its error joins the *tablets.WriteError of each
// series not wholly written (errors.As finds one; the Unwrap() []error of errors.Join lists
// all).
func (db *DB) WriteMany(ctx context.Context, batch []SeriesPoints) error {
	plans, err := db.plan(ctx, batch)
	if err != nil {
		return err
	}
	return errors.Join(db.writePlanned(ctx, plans)...)
}

// writeConcurrency is how many series WriteMany writes at once.
const writeConcurrency = 32

// planned is a series' points split by raw period.
type planned struct {
	series   string
	points   []tablets.Point
	byPeriod map[uint64][]tablets.Point
	periods  []uint64 // ascending
}

// plan checks every series and point, and that no period is dropped, before any write.
func (db *DB) plan(ctx context.Context, batch []SeriesPoints) ([]planned, error) {
	var expiredBefore time.Time
	if db.opts.RawRetention > 0 {
		expiredBefore = time.Now().Add(-db.opts.RawRetention)
	}
	plans := make([]planned, 0, len(batch))
	all := map[uint64]bool{}
	for _, sp := range batch {
		if len(sp.Points) == 0 {
			continue
		}
		pl := planned{series: sp.Series, points: sp.Points, byPeriod: map[uint64][]tablets.Point{}}
		for i, p := range sp.Points {
			if err := rounding.CheckTime(p.Time); err != nil {
				return nil, fmt.Errorf("tsdb: write %q: point %d: %w", sp.Series, i, err)
			}
			if p.Time.Before(expiredBefore) {
				return nil, fmt.Errorf("tsdb: write %q: %w: point %d at %s is older than the raw retention (%v)", sp.Series, ErrExpired, i,
					p.Time.UTC().Format(time.RFC3339Nano), db.opts.RawRetention)
			}
			pp := db.period(p.Time)
			if pl.byPeriod[pp] == nil {
				pl.periods = append(pl.periods, pp)
			}
			pl.byPeriod[pp] = append(pl.byPeriod[pp], p)
			all[pp] = true
		}
		slices.Sort(pl.periods)
		// The layout validates the series before any request.
		if err := db.validate(ctx, sp.Series); err != nil {
			return nil, fmt.Errorf("tsdb: %w", err)
		}
		plans = append(plans, pl)
	}
	for p := range all {
		if err := db.checkNotDropped(ctx, p); err != nil {
			series := ""
			for _, pl := range plans {
				if pl.byPeriod[p] != nil {
					series = pl.series
					break
				}
			}
			return nil, fmt.Errorf("tsdb: write %q: %w", series, err)
		}
	}
	return plans, nil
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
		err := db.ensure(ctx, p)
		if err == nil {
			err = db.register(ctx, p, series...)
		}
		periodErr[p] = err
	}
	// The first failure stops the rest: when the account is down or throttling, each series
	// would go through every retry in turn, and the caller retries the call anyway (writes
	// are idempotent).
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	errs := batch.Run(ctx, writeConcurrency, len(plans), func(ctx context.Context, i int) error {
		err := db.writeSeries(ctx, plans[i], periodErr)
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

// writeSeries writes one series' points, period by period, then flags the rolled-up windows
// its late points fall in.
func (db *DB) writeSeries(ctx context.Context, pl planned, periodErr map[uint64]error) error {
	var failed []tablets.Point
	var firstErr error
	var code string
	index := -1
	for _, p := range pl.periods {
		err := periodErr[p]
		if err == nil {
			var s tablets.Store
			if s, err = db.store(p); err == nil {
				err = s.Write(ctx, pl.series, pl.byPeriod[p]...)
			}
		}
		if err == nil {
			continue
		}
		var we *tablets.WriteError
		if errors.As(err, &we) {
			failed = append(failed, we.Failed...)
			if firstErr == nil {
				firstErr, code, index = err, we.Code, we.Index
			}
			continue
		}
		failed = append(failed, pl.byPeriod[p]...)
		if firstErr == nil {
			firstErr = err
		}
	}
	if firstErr != nil {
		return &tablets.WriteError{Series: pl.series, Failed: failed, Code: code, Index: index, Err: firstErr}
	}
	// Late points: flag the rolled-up windows they fall in (after storing them).
	if err := db.flagStale(ctx, pl.series, pl.points); err != nil {
		return fmt.Errorf("tsdb: write %q: the points are stored, but flagging the rollup tiers failed (write them again): %w", pl.series, err)
	}
	return nil
}

// checkNotDropped returns an error wrapping ErrExpired if period p's table was dropped.
func (db *DB) checkNotDropped(ctx context.Context, p uint64) error {
	db.mu.Lock()
	dropped, known := db.dropped[p], db.created[p]
	db.mu.Unlock()
	if !dropped && !known {
		_, err := db.meta.GetEntity(ctx, catalogDropped, db.rawTable(p), nil)
		switch {
		case err == nil:
			dropped = true
			db.mu.Lock()
			db.dropped[p] = true
			db.mu.Unlock()
		case !isStatus(err, http.StatusNotFound):
			return fmt.Errorf("catalog: %w", err)
		}
	}
	if dropped {
		return fmt.Errorf("%w: the table of the period from %s (%s) was dropped by Retain", ErrExpired,
			db.periodStart(p).Format(time.RFC3339), db.rawTable(p))
	}
	return nil
}

// ensure creates the raw table of period p and of the next period, unless known to exist.
func (db *DB) ensure(ctx context.Context, p uint64) error {
	for _, q := range []uint64{p, p + uint64(db.opts.RawPeriod/time.Second)} {
		db.mu.Lock()
		known := db.created[q] || db.dropped[q]
		db.mu.Unlock()
		if known || db.periodStart(q).After(tablets.MaxTime) {
			continue
		}
		err := tablets.EnsureTable(ctx, db.service.NewClient(db.rawTable(q)))
		if err == nil {
			err = tablets.EnsureTable(ctx, db.service.NewClient(db.indexTable(q)))
		}
		if err != nil {
			if q != p {
				continue // the next period's tables are a courtesy: its first write makes them
			}
			return fmt.Errorf("tsdb: %w", err)
		}
		db.mu.Lock()
		db.created[q] = true
		db.mu.Unlock()
	}
	return nil
}

// recordDropped marks period p's raw table dropped in the catalog, before the table goes.
func (db *DB) recordDropped(ctx context.Context, p uint64) error {
	if err := db.recordDroppedTable(ctx, db.rawTable(p)); err != nil {
		return err
	}
	db.mu.Lock()
	db.dropped[p] = true
	delete(db.created, p)
	db.mu.Unlock()
	return nil
}

// recordDroppedTable marks a table dropped in the catalog (RowKey its name).
func (db *DB) recordDroppedTable(ctx context.Context, name string) error {
	body := entity.AppendEnd(entity.AppendDouble(entity.AppendKeys(nil, catalogDropped, name), entity.ValueProperty, 1))
	if _, err := db.meta.UpsertEntity(ctx, body, nil); err != nil {
		return fmt.Errorf("tsdb: catalog: %w", err)
	}
	db.mu.Lock()
	delete(db.tables, name)
	db.mu.Unlock()
	return nil
}

// indexPartition is the index partition of plain series (not label sets): RowKey the series.
const indexPartition = "s"
