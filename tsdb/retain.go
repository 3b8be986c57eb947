package tsdb

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/filter"
)

// Retain drops the raw and histogram tables whose whole span ends at or before now minus
// RawRetention (and their series indexes, once no tier keeps their windows either), one
// request a table (Azure's high-volume delete pattern: delete the
// table, not its entities), and returns their names. Each is first recorded as dropped in the catalog, so that no Write,
// of this process or another, ever creates it again: Azure refuses a deleted table's name
// for 40 seconds and more, and a period once dropped stays expired. With no RawRetention it
// drops no raw table. It then drops the tier tables past their tier's Retention the same way.
func (db *DB) Retain(ctx context.Context, now time.Time) ([]string, error) {
	if db.opts.RawRetention == 0 {
		return db.retainTiers(ctx, now)
	}
	periods, err := db.tables.listed(ctx, rawKind)
	if err != nil {
		return nil, err
	}
	histPeriods, err := db.tables.all(ctx, histKind) // of the listing just made
	if err != nil {
		return nil, err
	}
	cutoff := now.Add(-db.opts.RawRetention)
	var dropped []string
	for _, p := range periods {
		if db.periodEnd(p).After(cutoff) {
			continue
		}
		if err := db.tables.recordDropped(ctx, p); err != nil {
			return dropped, err
		}
		name := db.rawTable(p)
		if _, err := db.service.DeleteTable(ctx, name, nil); err != nil && !isTableGone(err) {
			return dropped, fmt.Errorf("tsdb: drop %s: %w", name, err)
		}
		dropped = append(dropped, name)
	}
	hist, err := db.retainHistograms(ctx, histPeriods, cutoff)
	dropped = append(dropped, hist...)
	if err != nil {
		return dropped, err
	}
	indexes, err := db.retainIndexes(ctx, now)
	dropped = append(dropped, indexes...)
	if err != nil {
		return dropped, err
	}
	tiers, err := db.retainTiers(ctx, now)
	return append(dropped, tiers...), err
}

// retainHistograms drops the histogram tables of the periods ending at or before cutoff,
// each period first recorded as dropped (as its raw table is): no write creates it again.
func (db *DB) retainHistograms(ctx context.Context, periods []uint64, cutoff time.Time) ([]string, error) {
	var dropped []string
	for _, p := range periods {
		if db.periodEnd(p).After(cutoff) {
			continue
		}
		if _, known := db.tables.dropped.get(p); !known {
			if err := db.tables.recordDropped(ctx, p); err != nil {
				return dropped, err
			}
		}
		name := db.histTable(p)
		if _, err := db.service.DeleteTable(ctx, name, nil); err != nil && !isTableGone(err) {
			return dropped, fmt.Errorf("tsdb: drop %s: %w", name, err)
		}
		db.tables.gone(histKind, p)
		dropped = append(dropped, name)
	}
	return dropped, nil
}

// retainIndexes drops the series indexes of the periods whose raw points are dropped and
// that no tier keeps windows of any longer: the index is how Select finds a tier's series.
func (db *DB) retainIndexes(ctx context.Context, now time.Time) ([]string, error) {
	keep := db.opts.RawRetention
	for _, t := range db.opts.Tiers {
		if t.Retention == 0 {
			return nil, nil // a tier keeps everything: so do the indexes
		}
		keep = max(keep, t.Retention)
	}
	periods, err := db.tables.listed(ctx, indexKind)
	if err != nil {
		return nil, err
	}
	var dropped []string
	for _, p := range periods {
		if db.periodEnd(p).After(now.Add(-keep)) {
			continue
		}
		if err := db.tables.recordDropped(ctx, p); err != nil { // the raw table's, if not yet
			return dropped, err
		}
		name := db.indexTable(p)
		if _, err := db.service.DeleteTable(ctx, name, nil); err != nil && !isTableGone(err) {
			return dropped, fmt.Errorf("tsdb: drop %s: %w", name, err)
		}
		db.tables.gone(indexKind, p)
		dropped = append(dropped, name)
	}
	return dropped, nil
}

// retainTiers drops the tier tables whose whole span ends at or before now minus their
// tier's Retention, each recorded in the catalog first (no Rollup or Write creates it again).
func (db *DB) retainTiers(ctx context.Context, now time.Time) ([]string, error) {
	var dropped []string
	for _, t := range db.opts.Tiers {
		if t.Retention == 0 {
			continue
		}
		prefix := db.tierTable(t, 0)
		prefix = prefix[:len(prefix)-1] // name + "t" + step + "p"
		f := filter.And(filter.Ge("TableName", prefix), filter.Lt("TableName", prefix+":")).String()
		cutoff := now.Add(-t.Retention)
		for pager := db.service.NewListTablesPager(&aztables.ListTablesOptions{Filter: &f}); pager.More(); {
			page, err := pager.NextPage(ctx)
			if err != nil {
				return dropped, fmt.Errorf("tsdb: list tables: %w", err)
			}
			for _, tb := range page.Tables {
				p, err := strconv.ParseUint(strings.TrimPrefix(*tb.Name, prefix), 10, 64)
				if err != nil || db.tierTable(t, p) != *tb.Name || time.Unix(int64(p), 0).Add(t.Period).After(cutoff) {
					continue
				}
				if err := db.tiers.recordDropped(ctx, *tb.Name); err != nil {
					return dropped, err
				}
				if _, err := db.service.DeleteTable(ctx, *tb.Name, nil); err != nil && !isTableGone(err) {
					return dropped, fmt.Errorf("tsdb: drop %s: %w", *tb.Name, err)
				}
				dropped = append(dropped, *tb.Name)
			}
		}
	}
	return dropped, nil
}

// oldestKeptPeriod is the start of the oldest raw period Retain keeps by the clock now (the
// one holding now - RawRetention); false without a retention.
func (db *DB) oldestKeptPeriod() (uint64, bool) {
	cutoff := db.now().Add(-db.opts.RawRetention)
	if db.opts.RawRetention <= 0 || !cutoff.After(tablets.MinTime) {
		return 0, false
	}
	return db.period(cutoff), true
}
