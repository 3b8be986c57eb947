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
	"github.com/seed71701133/tablets/rounding"
)

// catalogDropped is the catalog partition of dropped tables: RowKey the table's name.
const catalogDropped = "dropped"

// Write stores points of one series in the raw tables of their periods. Before any request
// it checks the times and the raw retention (by the wall clock); a point in a period whose
// table was dropped fails the whole call with ErrExpired too, before anything is written,
// and such a table is never created again. The table of a period is created on its first
// write, with the next period's (so that it is not new, and throttled, when its time comes).
func (db *DB) Write(ctx context.Context, series string, points ...tablets.Point) error {
	if len(points) == 0 {
		return nil
	}
	byPeriod := map[uint64][]tablets.Point{}
	var expiredBefore time.Time
	if db.opts.RawRetention > 0 {
		expiredBefore = time.Now().Add(-db.opts.RawRetention)
	}
	for i, p := range points {
		if err := rounding.CheckTime(p.Time); err != nil {
			return fmt.Errorf("tsdb: write %q: point %d: %w", series, i, err)
		}
		if p.Time.Before(expiredBefore) {
			return fmt.Errorf("tsdb: write %q: %w: point %d at %s is older than the raw retention (%v)", series, ErrExpired, i,
				p.Time.UTC().Format(time.RFC3339Nano), db.opts.RawRetention)
		}
		pp := db.period(p.Time)
		byPeriod[pp] = append(byPeriod[pp], p)
	}
	periods := make([]uint64, 0, len(byPeriod))
	for p := range byPeriod {
		periods = append(periods, p)
	}
	slices.Sort(periods)
	// The layout validates the series before any request.
	first, err := db.store(periods[0])
	if err != nil {
		return err
	}
	if err := first.Write(ctx, series); err != nil {
		return fmt.Errorf("tsdb: %w", err)
	}
	for _, p := range periods {
		if err := db.checkNotDropped(ctx, p); err != nil {
			return fmt.Errorf("tsdb: write %q: %w", series, err)
		}
	}
	var failed []tablets.Point
	var firstErr error
	var code string
	index := -1
	for _, p := range periods {
		err := db.ensure(ctx, p)
		if err == nil {
			// Listed before its points are written: a series with points is always listed.
			err = db.register(ctx, p, series)
		}
		if err == nil {
			var s tablets.Store
			if s, err = db.store(p); err == nil {
				err = s.Write(ctx, series, byPeriod[p]...)
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
		failed = append(failed, byPeriod[p]...)
		if firstErr == nil {
			firstErr = err
		}
	}
	if firstErr != nil {
		return &tablets.WriteError{Series: series, Failed: failed, Code: code, Index: index, Err: firstErr}
	}
	// Late points: flag the rolled-up windows they fall in (after storing them).
	if err := db.flagStale(ctx, series, points); err != nil {
		return fmt.Errorf("tsdb: write %q: the points are stored, but flagging the rollup tiers failed (write them again): %w", series, err)
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

// indexPartition is the one partition of an index table: RowKey the series.
const indexPartition = "s"

// register lists series in period p's index, unless this process knows it is there: a
// series costs one request a period, the first time a process writes it there.
func (db *DB) register(ctx context.Context, p uint64, series string) error {
	k := indexKey{p, series}
	db.mu.Lock()
	known := db.registered[k]
	db.mu.Unlock()
	if known {
		return nil
	}
	body := entity.AppendEnd(entity.AppendKeys(nil, indexPartition, series))
	if _, err := db.service.NewClient(db.indexTable(p)).UpsertEntity(ctx, body, nil); err != nil {
		return fmt.Errorf("tsdb: index: %w", err)
	}
	db.mu.Lock()
	db.registered[k] = true
	db.mu.Unlock()
	return nil
}
