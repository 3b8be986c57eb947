package tsdb

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/filter"
	"github.com/seed71701133/tablets/internal/pager"
)

// Retain drops the raw and histogram tables whose whole span ends at or before now minus
// RawRetention (and their series indexes, once no tier keeps their windows either), one
// request a table (Azure's high-volume delete pattern: delete the table, not its entities),
// and returns their names. Each is first recorded as dropped in the catalog, so that no
// Write, of this process or another, ever creates it again: Azure refuses a deleted table's
// name for 40 seconds and more, and a period once dropped stays expired. With no
// RawRetention it drops no raw table. It then drops the tier tables past their tier's
// Retention the same way.
//
// With tiers, no window is lost: before recording a period dropped, Retain rolls it up from
// where the rollup's progress (Covered, TaskRollup) ends, all of it without one, and the
// slices of it that late writes marked dirty (RollupFlagged); once it is recorded, it rolls
// up the slices marked meanwhile by a write that got in first. The tier windows it leaves
// are then the last word on the period: Rollup no longer touches it. A Retain killed
// anywhere and run again goes on where it stopped.
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
	var progress rollupProgress // read once, by the first period that needs it
	for _, p := range periods {
		if db.names.End(p).After(cutoff) {
			continue
		}
		if err := db.sealPeriod(ctx, p, &progress); err != nil {
			return dropped, err
		}
		name := db.names.RawTable(p)
		if _, err := db.service.DeleteTable(ctx, name, nil); err != nil && !isTableGone(err) {
			return dropped, fmt.Errorf("tsdb: drop %s: %w", name, err)
		}
		dropped = append(dropped, name)
		if !slices.Contains(histPeriods, p) {
			if err := db.clearDirty(ctx, p); err != nil {
				return dropped, err
			}
		}
	}
	hist, err := db.retainHistograms(ctx, histPeriods, cutoff, &progress)
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
func (db *DB) retainHistograms(ctx context.Context, periods []uint64, cutoff time.Time, progress *rollupProgress) ([]string, error) {
	var dropped []string
	for _, p := range periods {
		if db.names.End(p).After(cutoff) {
			continue
		}
		if _, known := db.tables.dropped.get(p); !known {
			if err := db.sealPeriod(ctx, p, progress); err != nil {
				return dropped, err
			}
		}
		name := db.names.HistTable(p)
		if _, err := db.service.DeleteTable(ctx, name, nil); err != nil && !isTableGone(err) {
			return dropped, fmt.Errorf("tsdb: drop %s: %w", name, err)
		}
		db.tables.gone(histKind, p)
		dropped = append(dropped, name)
		if err := db.clearDirty(ctx, p); err != nil {
			return dropped, err
		}
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
		if db.names.End(p).After(now.Add(-keep)) {
			continue
		}
		if err := db.tables.recordDropped(ctx, p); err != nil { // the raw table's, if not yet
			return dropped, err
		}
		name := db.names.IndexTable(p)
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
		prefix := db.tiers.tierTable(t, 0)
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
				if err != nil || db.tiers.tierTable(t, p) != *tb.Name || time.Unix(int64(p), 0).Add(t.Period).After(cutoff) {
					continue
				}
				if err := db.tiers.tables.recordDropped(ctx, *tb.Name); err != nil {
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

// sealPeriod makes final the tier windows of raw period p before Retain drops its tables,
// then records p dropped (see Retain). A period already recorded (by a Retain that was
// killed, or of another process) is left as it is.
func (db *DB) sealPeriod(ctx context.Context, p uint64, progress *rollupProgress) error {
	if len(db.opts.Tiers) == 0 {
		return db.tables.recordDropped(ctx, p)
	}
	recorded, err := db.catalog.isDropped(ctx, db.names.RawTable(p))
	if err != nil {
		return err
	}
	if recorded {
		db.tables.dropped.add(p, struct{}{})
		db.tables.gone(rawKind, p)
		return nil
	}
	start, end := db.names.Start(p), db.names.End(p)
	covered, ok, err := progress.get(ctx, db)
	if err != nil {
		return err
	}
	if !ok || covered.Before(end) {
		from := start
		if ok && covered.After(start) {
			from = covered
		}
		if err := db.Rollup(ctx, from, end); err != nil {
			return fmt.Errorf("tsdb: roll up %s before dropping it: %w", db.names.RawTable(p), err)
		}
	}
	lo, hi := floorSec(unix(start), db.tiers.slice()), unix(end)
	markers, err := db.tiers.readDirty(ctx, lo, hi)
	if err != nil {
		return err
	}
	if _, err := db.tiers.rollupMarkers(ctx, markers, false); err != nil {
		return fmt.Errorf("tsdb: roll up %s before dropping it: %w", db.names.RawTable(p), err)
	}
	if err := db.tables.recordDropped(ctx, p); err != nil {
		return err
	}
	// A write that checked the period before the record may have stored points since, and
	// marked their slices: roll them up too, while the tables are still there.
	if markers, err = db.tiers.readDirty(ctx, lo, hi); err != nil || len(markers) == 0 {
		return err
	}
	db.tables.dropped.remove(p) // so that the rollup reads the period (a Write still asks the catalog)
	defer db.tables.dropped.add(p, struct{}{})
	if _, err := db.tiers.rollupMarkers(ctx, markers, true); err != nil {
		return fmt.Errorf("tsdb: roll up %s before dropping it: %w", db.names.RawTable(p), err)
	}
	return nil
}

// rollupProgress is the rollup's progress (Covered, TaskRollup), read once by a Retain:
// its own rollups do not move it.
type rollupProgress struct {
	read    bool
	covered time.Time
	ok      bool
}

func (r *rollupProgress) get(ctx context.Context, db *DB) (time.Time, bool, error) {
	if !r.read {
		covered, ok, err := db.Covered(ctx, TaskRollup)
		if err != nil {
			return time.Time{}, false, err
		}
		r.read, r.covered, r.ok = true, covered, ok
	}
	return r.covered, r.ok, nil
}

// clearDirty deletes the dirty markers of the slices of raw period p, whose tables Retain
// dropped: no rollup can use them.
func (db *DB) clearDirty(ctx context.Context, p uint64) error {
	if len(db.opts.Tiers) == 0 {
		return nil
	}
	markers, err := db.tiers.readDirty(ctx, floorSec(unix(db.names.Start(p)), db.tiers.slice()), unix(db.names.End(p)))
	if err != nil || len(markers) == 0 {
		return err
	}
	_, err = db.tiers.deleteDirty(ctx, markers)
	return err
}

// oldestKeptPeriod is the start of the raw period after the latest one recorded dropped,
// where a Rollup from lo (Unix seconds) may reach one (false: none may be): Rollup leaves
// alone the slices of dropped periods, whose windows are the last word. It knows the
// periods this process saw dropped; and where lo is old enough that a Retain may have
// dropped a period there (now - RawRetention, give or take the clock margin), it reads the
// catalog's records: one query.
func (db *DB) oldestKeptPeriod(ctx context.Context, lo uint64) (uint64, bool, error) {
	latest, ok := db.latestDroppedCached()
	if horizon := db.now().Add(-db.opts.RawRetention + sealMargin); db.opts.RawRetention > 0 && at(lo).Before(horizon) {
		recorded, found, err := db.latestDroppedRecorded(ctx)
		if err != nil {
			return 0, false, err
		}
		if found && (!ok || recorded > latest) {
			latest, ok = recorded, true
		}
	}
	if !ok {
		return 0, false, nil
	}
	return latest + uint64(db.opts.RawPeriod/time.Second), true, nil
}

// latestDroppedCached is the latest period this process knows dropped.
func (db *DB) latestDroppedCached() (uint64, bool) {
	c := db.tables.dropped
	c.mu.Lock()
	defer c.mu.Unlock()
	latest, ok := uint64(0), false
	for _, m := range []map[uint64]struct{}{c.curr, c.prev} {
		for p := range m {
			latest, ok = max(latest, p), true
		}
	}
	return latest, ok
}

// latestDroppedRecorded reads the latest raw period recorded dropped in the catalog.
func (db *DB) latestDroppedRecorded(ctx context.Context) (uint64, bool, error) {
	prefix := db.name + "r"
	q := pager.SubQuery{Filter: filter.And(filter.Eq("PartitionKey", catalogDropped), filter.Ge("RowKey", prefix),
		filter.Lt("RowKey", db.name+"s")).String(), Select: "RowKey"}
	latest, ok := uint64(0), false
	var e entity.Entity
	for page, err := range pager.Each(ctx, db.catalog.client, q, 0) {
		if isTableGone(err) {
			break
		}
		if err != nil {
			return 0, false, fmt.Errorf("tsdb: catalog: %w", err)
		}
		for _, raw := range page.Entities {
			if err := e.Decode(raw); err != nil {
				return 0, false, fmt.Errorf("tsdb: catalog: %w", err)
			}
			name := string(e.RowKey)
			p, err := strconv.ParseUint(strings.TrimPrefix(name, prefix), 10, 64)
			if err != nil || db.names.RawTable(p) != name {
				continue
			}
			latest, ok = max(latest, p), true
		}
	}
	return latest, ok, nil
}
