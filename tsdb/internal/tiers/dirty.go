package tiers

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/filter"
	"github.com/seed71701133/tablets/internal/batch"
	"github.com/seed71701133/tablets/internal/pager"
	"github.com/seed71701133/tablets/tsdb/internal/azerr"
	"github.com/seed71701133/tablets/tsdb/internal/times"
)

// Dirty markers (docs/format.md, "The catalog"): a Write of points or histogram samples
// into a window older than the seal delay (less SealMargin) marks the slice (Rollup's unit,
// see Tiers.Slice) of that series dirty, after storing them: an entity of the catalog's
// partition "dirty" whose RowKey is the slice start (12 digits, as a block key), "|", then
// the series. A reader reads the windows of a dirty slice raw; RollupFlagged recomputes the
// dirty slices and deletes their markers, each conditionally on the ETag read before it
// read the raw points.

// The dirty markers' partition of the catalog, and their format version.
const (
	catalogDirty = "dirty"
	dirtyVersion = 1
)

// dirtyKey is one dirty marker: a series' slice starting at Unix second slice.
type dirtyKey struct {
	series string
	slice  uint64
}

// rowKey is the marker's RowKey: the slice's block key, "|", the series.
func (k dirtyKey) rowKey() string { return blockKey(k.slice) + "|" + k.series }

// parseDirtyKey reads a marker's RowKey; false: not a marker's.
func parseDirtyKey(rk string) (dirtyKey, bool) {
	start, series, ok := strings.Cut(rk, "|")
	if !ok || series == "" || len(start) != len(blockKey(0)) {
		return dirtyKey{}, false
	}
	s, err := strconv.ParseUint(start, 10, 64)
	if err != nil {
		return dirtyKey{}, false
	}
	return dirtyKey{series: series, slice: s}, true
}

// Markers are dirty markers as read, with their ETags.
type Markers map[dirtyKey]azcore.ETag

// appendDirty is the body of a marker.
func appendDirty(k dirtyKey) []byte {
	return entity.AppendEnd(entity.AppendDouble(entity.AppendKeys(nil, catalogDirty, k.rowKey()), "V", dirtyVersion))
}

// ReadDirty reads the dirty markers of the slices starting in [lo, hi) (Unix seconds), with
// their ETags: one query of the catalog.
func (tr *Tiers) ReadDirty(ctx context.Context, lo, hi uint64) (Markers, error) {
	return tr.readDirtyOf(ctx, lo, hi, nil)
}

// readDirtyOf is ReadDirty of the markers of series (nil: of all). The query reads every
// marker of the range, but keeps only those: after a backfill of an hour, the markers of
// every series of a tenant, which each batch of a query read whole into a map (25 to 118
// MB in the soak).
func (tr *Tiers) readDirtyOf(ctx context.Context, lo, hi uint64, series map[string]bool) (Markers, error) {
	out := Markers{}
	if len(tr.cfg.Tiers) == 0 || lo >= hi {
		return out, nil
	}
	q := pager.SubQuery{Filter: filter.And(filter.Eq("PartitionKey", catalogDirty), filter.Ge("RowKey", blockKey(lo)),
		filter.Lt("RowKey", blockKey(hi))).String(), Select: "RowKey"}
	var e entity.Entity
	for page, err := range pager.Each(ctx, tr.catalog.Client, q, 0) {
		if azerr.IsTableGone(err) {
			break // no catalog yet: nothing is dirty
		}
		if err != nil {
			return nil, fmt.Errorf("tsdb: read dirty markers: %w", err)
		}
		for _, raw := range page.Entities {
			if err := e.Decode(raw); err != nil {
				return nil, fmt.Errorf("tsdb: read dirty markers: %w", err)
			}
			if k, ok := parseDirtyKey(string(e.RowKey)); ok && k.slice >= lo && k.slice < hi && (series == nil || series[k.series]) {
				out[k] = azcore.ETag(e.ETag)
			}
		}
	}
	return out, nil
}

// readAllDirty reads every dirty marker (one query).
func (tr *Tiers) readAllDirty(ctx context.Context) (Markers, error) {
	return tr.ReadDirty(ctx, 0, times.Unix(tablets.MaxTime)+1)
}

// FlagStale marks dirty the slices of series holding points older than the seal delay (less
// the clock margin): an upsert per slice, in transactions, so a Write still reads nothing.
// It runs after the points are stored: a RollupFlagged that read the raw points before them
// read the marker's ETag before this upsert changed it, and its delete of the marker fails.
func (tr *Tiers) FlagStale(ctx context.Context, series string, points []tablets.Point) error {
	return tr.FlagStaleAt(ctx, series, points, tr.now())
}

// FlagStaleAt is FlagStale of points that arrived at or before now.
func (tr *Tiers) FlagStaleAt(ctx context.Context, series string, points []tablets.Point, now time.Time) error {
	slice := tr.Slice()
	if slice == 0 || len(points) == 0 {
		return nil
	}
	limit := now.Add(-(tr.cfg.SealDelay - SealMargin))
	starts := map[uint64]bool{}
	for _, p := range points {
		if p.Time.Before(limit) {
			starts[times.FloorSec(times.Unix(p.Time), slice)] = true
		}
	}
	if len(starts) == 0 {
		return nil
	}
	actions := make([]aztables.TransactionAction, 0, len(starts))
	for _, s := range slices.Sorted(maps.Keys(starts)) {
		k := dirtyKey{series: series, slice: s}
		if err := entity.ValidateKey(k.rowKey()); err != nil {
			return fmt.Errorf("tsdb: mark dirty slices: %w", err)
		}
		actions = append(actions, aztables.TransactionAction{ActionType: aztables.TransactionTypeInsertReplace, Entity: appendDirty(k)})
	}
	if err := batch.SubmitAll(ctx, tr.catalog.Client, catalogDirty, actions); err != nil {
		return fmt.Errorf("tsdb: mark dirty slices: %w", err)
	}
	return nil
}

// DeleteDirty deletes markers, each conditionally on its ETag given: a marker rewritten
// since (a later write into its slice) or gone stays as it is. In transactions of up to 100.
// A transaction that meets a changed marker reads again the markers of its keys' range (one
// query) and is sent again with those still as given, up to dirtyRereads times, then one
// marker a request. It returns how many it deleted.
//
// Each marker of a failed transaction used to be sent again on its own: where another
// process had deleted the markers first (three servers rolling up the same dirty slices
// after a backfill), that was a request a marker, 80,000 in two minutes of the 3-server
// soak, and the account answered little else.
func (tr *Tiers) DeleteDirty(ctx context.Context, markers Markers) (int, error) {
	keys := slices.SortedFunc(maps.Keys(markers), func(a, b dirtyKey) int { return strings.Compare(a.rowKey(), b.rowKey()) })
	deleted := 0
	for len(keys) > 0 {
		n := min(len(keys), entity.MaxBatchOperations)
		d, err := tr.deleteDirtyBatch(ctx, markers, slices.Clone(keys[:n]))
		deleted += d
		if err != nil {
			return deleted, fmt.Errorf("tsdb: delete dirty markers: %w", err)
		}
		keys = keys[n:]
	}
	return deleted, nil
}

// dirtyRereads is how many times DeleteDirty reads again the markers of a transaction that
// met a changed one before it sends them one a request.
const dirtyRereads = 3

// deleteDirtyBatch deletes the markers of keys (at most a transaction's), as DeleteDirty.
func (tr *Tiers) deleteDirtyBatch(ctx context.Context, markers Markers, keys []dirtyKey) (int, error) {
	for range dirtyRereads {
		if len(keys) == 0 {
			return 0, nil
		}
		err := batch.Submit(ctx, tr.catalog.Client, catalogDirty, deleteDirtyActions(markers, keys))
		if err == nil {
			return len(keys), nil
		}
		if !batch.IsConflict(err) {
			return 0, err
		}
		// Which still stand as given: the others were deleted or rewritten since.
		now, err := tr.readDirtyKeys(ctx, keys)
		if err != nil {
			return 0, err
		}
		keys = slices.DeleteFunc(keys, func(k dirtyKey) bool {
			etag, ok := now[k]
			return !ok || etag != markers[k]
		})
	}
	deleted := 0
	for _, k := range keys {
		err := batch.Submit(ctx, tr.catalog.Client, catalogDirty, deleteDirtyActions(markers, []dirtyKey{k}))
		switch {
		case err == nil:
			deleted++
		case !batch.IsConflict(err):
			return deleted, err
		}
	}
	return deleted, nil
}

// deleteDirtyActions are the conditional deletes of the markers of keys.
func deleteDirtyActions(markers Markers, keys []dirtyKey) []aztables.TransactionAction {
	actions := make([]aztables.TransactionAction, len(keys))
	for i, k := range keys {
		etag := markers[k]
		actions[i] = aztables.TransactionAction{ActionType: aztables.TransactionTypeDelete, Entity: batch.KeysBody(catalogDirty, k.rowKey()), IfMatch: &etag}
	}
	return actions
}

// readDirtyKeys reads the markers of keys as they are now, with their ETags: one query of
// the range of their RowKeys (compared as the service compares them), keeping those of keys.
func (tr *Tiers) readDirtyKeys(ctx context.Context, keys []dirtyKey) (Markers, error) {
	want := make(map[string]dirtyKey, len(keys))
	var lo, hi string
	for i, k := range keys {
		rk := k.rowKey()
		want[rk] = k
		if i == 0 || filter.CompareUTF16(rk, lo) < 0 {
			lo = rk
		}
		if i == 0 || filter.CompareUTF16(rk, hi) > 0 {
			hi = rk
		}
	}
	out := Markers{}
	q := pager.SubQuery{Filter: filter.And(filter.Eq("PartitionKey", catalogDirty), filter.Ge("RowKey", lo),
		filter.Le("RowKey", hi)).String(), Select: "RowKey"}
	var e entity.Entity
	for page, err := range pager.Each(ctx, tr.catalog.Client, q, 0) {
		if err != nil {
			return nil, fmt.Errorf("read dirty markers again: %w", err)
		}
		for _, raw := range page.Entities {
			if err := e.Decode(raw); err != nil {
				return nil, fmt.Errorf("read dirty markers again: %w", err)
			}
			if k, ok := want[string(e.RowKey)]; ok {
				out[k] = azcore.ETag(e.ETag)
			}
		}
	}
	return out, nil
}

// RollupFlagged is DB.RollupFlagged.
func (tr *Tiers) RollupFlagged(ctx context.Context) (int, error) {
	if len(tr.cfg.Tiers) == 0 {
		return 0, nil
	}
	markers, err := tr.readAllDirty(ctx)
	if err != nil || len(markers) == 0 {
		return 0, err
	}
	return tr.RollupMarkers(ctx, markers, false)
}

// manySeriesDirty is how many series of one slice RollupFlagged rolls up one by one; more,
// and it rolls up the slice for every series (a scan of the slice's raw points).
const manySeriesDirty = 32

// RollupMarkers rolls up the slices of markers and deletes the markers. With dropping
// (Retain's last look at a period it is dropping), it rolls up every marked series by
// itself, and even in a period recorded dropped; else it skips (and clears) the slices of
// dropped periods.
func (tr *Tiers) RollupMarkers(ctx context.Context, markers Markers, dropping bool) (int, error) {
	bySlice := map[uint64][]string{}
	for k := range markers {
		bySlice[k.slice] = append(bySlice[k.slice], k.series)
	}
	span := uint64(tr.Slice() / time.Second)
	cleared := 0
	for _, s := range slices.Sorted(maps.Keys(bySlice)) {
		names := bySlice[s]
		slices.Sort(names)
		done := Markers{}
		for _, series := range names {
			k := dirtyKey{series: series, slice: s}
			done[k] = markers[k]
		}
		dropped := false
		if !dropping { // (dropping: the period is recorded dropped, and must be read all the same)
			var err error
			if dropped, err = tr.sliceDropped(ctx, s); err != nil {
				return cleared, err
			}
		}
		switch {
		case dropped && !dropping:
			// Its raw points are gone (or going): the windows stored are the last word.
		case len(names) > manySeriesDirty && !dropping:
			// Rollup clears the markers it read before reading the raw points: these, and
			// any written since then.
			if err := tr.Rollup(ctx, times.At(s), times.At(s+span)); err != nil {
				return cleared, err
			}
			cleared += len(names)
			continue
		default:
			for _, series := range names {
				if err := tr.rollupSeries(ctx, series, tr.wholeWindows(s, s+span)); err != nil {
					return cleared, fmt.Errorf("tsdb: rollup %q: %w", series, err)
				}
			}
		}
		n, err := tr.DeleteDirty(ctx, done)
		cleared += n
		if err != nil {
			return cleared, err
		}
	}
	return cleared, nil
}

// sliceDropped reports whether a raw period that the slice starting at s overlaps is
// recorded dropped: from the cache, else, for a period a Retain may have dropped by now
// (see tables.Periods.OldestKeptPeriod), one catalog request.
func (tr *Tiers) sliceDropped(ctx context.Context, s uint64) (bool, error) {
	end := times.At(s).Add(tr.Slice())
	horizon := tr.now().Add(-tr.cfg.RawRetention + SealMargin)
	for p := tr.names.PeriodOf(times.At(s)); tr.names.Start(p).Before(end); p += uint64(tr.names.Period / time.Second) {
		if _, dropped := tr.periods.Dropped.Get(p); dropped {
			return true, nil
		}
		if tr.cfg.RawRetention <= 0 || !tr.names.End(p).Before(horizon) {
			continue
		}
		dropped, err := tr.catalog.IsDropped(ctx, tr.names.RawTable(p))
		if err != nil {
			return false, err
		}
		if dropped {
			tr.periods.Dropped.Add(p, struct{}{})
			return true, nil
		}
	}
	return false, nil
}
