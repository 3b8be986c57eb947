// Package retention is the retention part of a tsdb database: every step of Retain (sealing
// a raw period's tier windows before it goes, recording it dropped, dropping its raw,
// histogram and index tables and its dirty markers, dropping the tier tables past their
// tier's Retention).
//
// A Retention is given the service client, the table names, the options it uses (Config),
// the catalog (the rollup's progress, the dropped tables), the period tables (which tables
// exist, which periods are dropped) and the tiers (the rollup that seals a period, the dirty
// markers, the tier tables): it imports the leaf layer and package tiers, and nothing
// depends on it. It holds no state of its own, so needs no lock: the caches it reads and
// changes are the period tables' and the tiers', each with its own lock.
package retention

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets/filter"
	"github.com/seed71701133/tablets/tsdb/internal/azerr"
	"github.com/seed71701133/tablets/tsdb/internal/catalog"
	"github.com/seed71701133/tablets/tsdb/internal/naming"
	"github.com/seed71701133/tablets/tsdb/internal/tables"
	"github.com/seed71701133/tablets/tsdb/internal/tiers"
)

// Retention is the retention part of a DB: Retain, every step of it (sealing a raw period's
// tier windows, recording it dropped, dropping its raw, histogram and index tables and its
// dirty markers, dropping the tier tables past their Retention). It holds no state of its
// own: what it knows of the tables is the period tables' and the tier tables' (their caches
// have their own locks), and what it must agree on with other processes is the catalog's.
//
// It is given the parts it uses, not the DB: the service client (to drop tables), the
// table names, the options it uses (Config), the catalog (the rollup's progress), the
// period tables and the tiers (the rollup that seals a period, the dirty markers, the tier
// tables). Nothing below depends on it.
type Retention struct {
	service *aztables.ServiceClient
	names   naming.Names // the database's table names and raw periods
	cfg     Config
	catalog *catalog.Catalog
	tables  *tables.Periods // which raw, index and histogram tables exist, which periods are dropped
	tiers   *tiers.Tiers    // the rollup that seals a period, the dirty markers, the tier tables
}

// Config holds the options of a database that retention uses, as Open checked them.
type Config struct {
	RawRetention time.Duration // raw tables whose whole span is older are dropped; 0: none
	Tiers        []tiers.Tier  // the tiers (their Retention), as tiers.CheckTiers returns them
	// Dropping records in the raw part's change log that a period's raw samples go (before
	// its tables are dropped), so that no cache answers from them after.
	Dropping func(ctx context.Context, p uint64) error
	// DroppingIndex records in the index change log that a period's index goes (before
	// its table is dropped).
	DroppingIndex func(ctx context.Context, p uint64) error
}

// New returns the retention of the database whose tables names names; it sends no request.
func New(service *aztables.ServiceClient, names naming.Names, cfg Config, c *catalog.Catalog, tables *tables.Periods, tr *tiers.Tiers) *Retention {
	return &Retention{service: service, names: names, cfg: cfg, catalog: c, tables: tables, tiers: tr}
}

// Retain is DB.Retain.
func (r *Retention) Retain(ctx context.Context, now time.Time) ([]string, error) {
	if r.cfg.RawRetention == 0 {
		return r.retainTiers(ctx, now)
	}
	periods, err := r.tables.Listed(ctx, naming.Raw)
	if err != nil {
		return nil, err
	}
	histPeriods, err := r.tables.All(ctx, naming.Hist) // of the listing just made
	if err != nil {
		return nil, err
	}
	cutoff := now.Add(-r.cfg.RawRetention)
	var dropped []string
	var progress rollupProgress // read once, by the first period that needs it
	for _, p := range periods {
		if r.names.End(p).After(cutoff) {
			continue
		}
		if err := r.sealPeriod(ctx, p, &progress); err != nil {
			return dropped, err
		}
		if err := r.cfg.Dropping(ctx, p); err != nil {
			return dropped, err
		}
		name := r.names.RawTable(p)
		if _, err := r.service.DeleteTable(ctx, name, nil); err != nil && !azerr.IsTableGone(err) {
			return dropped, fmt.Errorf("tsdb: drop %s: %w", name, err)
		}
		dropped = append(dropped, name)
		if !slices.Contains(histPeriods, p) {
			if err := r.clearDirty(ctx, p); err != nil {
				return dropped, err
			}
		}
	}
	hist, err := r.retainHistograms(ctx, histPeriods, cutoff, &progress)
	dropped = append(dropped, hist...)
	if err != nil {
		return dropped, err
	}
	indexes, err := r.retainIndexes(ctx, now)
	dropped = append(dropped, indexes...)
	if err != nil {
		return dropped, err
	}
	tiers, err := r.retainTiers(ctx, now)
	return append(dropped, tiers...), err
}

// retainHistograms drops the histogram tables of the periods ending at or before cutoff,
// each period first recorded as dropped (as its raw table is): no write creates it again.
func (r *Retention) retainHistograms(ctx context.Context, periods []uint64, cutoff time.Time, progress *rollupProgress) ([]string, error) {
	var dropped []string
	for _, p := range periods {
		if r.names.End(p).After(cutoff) {
			continue
		}
		if _, known := r.tables.Dropped.Get(p); !known {
			if err := r.sealPeriod(ctx, p, progress); err != nil {
				return dropped, err
			}
		}
		if err := r.cfg.Dropping(ctx, p); err != nil {
			return dropped, err
		}
		name := r.names.HistTable(p)
		if _, err := r.service.DeleteTable(ctx, name, nil); err != nil && !azerr.IsTableGone(err) {
			return dropped, fmt.Errorf("tsdb: drop %s: %w", name, err)
		}
		r.tables.Gone(naming.Hist, p)
		dropped = append(dropped, name)
		if err := r.clearDirty(ctx, p); err != nil {
			return dropped, err
		}
	}
	return dropped, nil
}

// retainIndexes drops the series indexes of the periods whose raw points are dropped and
// that no tier keeps windows of any longer: the index is how Select finds a tier's series.
func (r *Retention) retainIndexes(ctx context.Context, now time.Time) ([]string, error) {
	keep := r.cfg.RawRetention
	for _, t := range r.cfg.Tiers {
		if t.Retention == 0 {
			return nil, nil // a tier keeps everything: so do the indexes
		}
		keep = max(keep, t.Retention)
	}
	periods, err := r.tables.Listed(ctx, naming.Index)
	if err != nil {
		return nil, err
	}
	var dropped []string
	for _, p := range periods {
		if r.names.End(p).After(now.Add(-keep)) {
			continue
		}
		if err := r.tables.RecordDropped(ctx, p); err != nil { // the raw table's, if not yet
			return dropped, err
		}
		if err := r.cfg.DroppingIndex(ctx, p); err != nil {
			return dropped, err
		}
		name := r.names.IndexTable(p)
		if _, err := r.service.DeleteTable(ctx, name, nil); err != nil && !azerr.IsTableGone(err) {
			return dropped, fmt.Errorf("tsdb: drop %s: %w", name, err)
		}
		r.tables.Gone(naming.Index, p)
		dropped = append(dropped, name)
	}
	return dropped, nil
}

// retainTiers drops the tier tables whose whole span ends at or before now minus their
// tier's Retention, each recorded in the catalog first (no Rollup or Write creates it again).
func (r *Retention) retainTiers(ctx context.Context, now time.Time) ([]string, error) {
	var dropped []string
	for _, t := range r.cfg.Tiers {
		if t.Retention == 0 {
			continue
		}
		prefix := r.tiers.TierTable(t, 0)
		prefix = prefix[:len(prefix)-1] // name + "t" + step + "p"
		f := filter.And(filter.Ge("TableName", prefix), filter.Lt("TableName", prefix+":")).String()
		cutoff := now.Add(-t.Retention)
		for pager := r.service.NewListTablesPager(&aztables.ListTablesOptions{Filter: &f}); pager.More(); {
			page, err := pager.NextPage(ctx)
			if err != nil {
				return dropped, fmt.Errorf("tsdb: list tables: %w", err)
			}
			for _, tb := range page.Tables {
				p, err := strconv.ParseUint(strings.TrimPrefix(*tb.Name, prefix), 10, 64)
				if err != nil || r.tiers.TierTable(t, p) != *tb.Name || time.Unix(int64(p), 0).Add(t.Period).After(cutoff) {
					continue
				}
				if err := r.tiers.RecordDropped(ctx, *tb.Name); err != nil {
					return dropped, err
				}
				if _, err := r.service.DeleteTable(ctx, *tb.Name, nil); err != nil && !azerr.IsTableGone(err) {
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
func (r *Retention) sealPeriod(ctx context.Context, p uint64, progress *rollupProgress) error {
	if len(r.cfg.Tiers) == 0 {
		return r.tables.RecordDropped(ctx, p)
	}
	recorded, err := r.catalog.IsDropped(ctx, r.names.RawTable(p))
	if err != nil {
		return err
	}
	if recorded {
		r.tables.Dropped.Add(p, struct{}{})
		r.tables.Gone(naming.Raw, p)
		return nil
	}
	start, end := r.names.Start(p), r.names.End(p)
	covered, ok, err := progress.get(ctx, r.catalog)
	if err != nil {
		return err
	}
	if !ok || covered.Before(end) {
		from := start
		if ok && covered.After(start) {
			from = covered
		}
		if err := r.tiers.Rollup(ctx, from, end); err != nil {
			return fmt.Errorf("tsdb: roll up %s before dropping it: %w", r.names.RawTable(p), err)
		}
	}
	lo, hi := r.sliceRange(start, end)
	markers, err := r.tiers.ReadDirty(ctx, lo, hi)
	if err != nil {
		return err
	}
	if _, err := r.tiers.RollupMarkers(ctx, markers, false); err != nil {
		return fmt.Errorf("tsdb: roll up %s before dropping it: %w", r.names.RawTable(p), err)
	}
	if err := r.tables.RecordDropped(ctx, p); err != nil {
		return err
	}
	// A write that checked the period before the record may have stored points since, and
	// marked their slices: roll them up too, while the tables are still there.
	if markers, err = r.tiers.ReadDirty(ctx, lo, hi); err != nil || len(markers) == 0 {
		return err
	}
	r.tables.Dropped.Remove(p) // so that the rollup reads the period (a Write still asks the catalog)
	defer r.tables.Dropped.Add(p, struct{}{})
	if _, err := r.tiers.RollupMarkers(ctx, markers, true); err != nil {
		return fmt.Errorf("tsdb: roll up %s before dropping it: %w", r.names.RawTable(p), err)
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

func (rp *rollupProgress) get(ctx context.Context, c *catalog.Catalog) (time.Time, bool, error) {
	if !rp.read {
		ms, _, ok, err := c.ReadProgress(ctx, tiers.TaskRollup) // Covered's record
		if err != nil {
			return time.Time{}, false, err
		}
		rp.read, rp.ok = true, ok
		if ok {
			rp.covered = time.UnixMilli(ms).UTC()
		}
	}
	return rp.covered, rp.ok, nil
}

// clearDirty deletes the dirty markers of the slices of raw period p, whose tables Retain
// dropped: no rollup can use them.
func (r *Retention) clearDirty(ctx context.Context, p uint64) error {
	if len(r.cfg.Tiers) == 0 {
		return nil
	}
	lo, hi := r.sliceRange(r.names.Start(p), r.names.End(p))
	markers, err := r.tiers.ReadDirty(ctx, lo, hi)
	if err != nil || len(markers) == 0 {
		return err
	}
	_, err = r.tiers.DeleteDirty(ctx, markers)
	return err
}

// sliceRange is the range of the slice starts (Unix seconds) of the dirty markers of
// [start, end): from the start of the slice holding start (there are tiers).
func (r *Retention) sliceRange(start, end time.Time) (uint64, uint64) {
	n := uint64(r.tiers.Slice() / time.Second)
	return uint64(start.Unix()) / n * n, uint64(end.Unix())
}
