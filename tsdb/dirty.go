package tsdb

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/seed71701133/tablets"
)

// Dirty markers (docs/format.md, "The catalog"): a Write of points or histogram samples
// into a window older than the seal delay (less sealMargin) marks the slice (Rollup's unit,
// see DB.slice) of that series dirty, after storing them: an entity of the catalog's
// partition "dirty" whose RowKey is the slice start (12 digits, as a block key), "|", then
// the series. A reader reads the windows of a dirty slice raw; RollupFlagged recomputes the
// dirty slices and deletes their markers, each conditionally on the ETag read before it
// read the raw points.

// dirtyKey is one dirty marker: a series' slice starting at Unix second slice.
type dirtyKey struct {
	series string
	slice  uint64
}

// readDirty reads the dirty markers of the slices starting in [lo, hi) (Unix seconds), with
// their ETags: one query of the catalog.
func (db *DB) readDirty(ctx context.Context, lo, hi uint64) (map[dirtyKey]azcore.ETag, error) {
	return nil, nil // TODO(dirty markers): not yet written by any Write
}

// flagStale flags the tier blocks holding points older than the seal delay (less the clock
// margin) as stale: a blind merge, so a Write still reads nothing. It runs after the points
// are stored: a Rollup that read the raw points before them read the block's ETag before
// this flag changed it, and its write of the block fails.
func (db *DB) flagStale(ctx context.Context, series string, points []tablets.Point) error {
	return db.flagStaleAt(ctx, series, points, db.now())
}

// flagStaleAt is flagStale of points that arrived at or before now.
func (db *DB) flagStaleAt(ctx context.Context, series string, points []tablets.Point, now time.Time) error {
	limit := now.Add(-(db.opts.SealDelay - sealMargin))
	for _, t := range db.opts.Tiers {
		byTable := map[uint64]map[uint64]bool{}
		for _, p := range points {
			if !p.Time.Before(limit) {
				continue
			}
			bs := floorSec(unix(p.Time), t.block())
			tp := tierPeriod(t, bs)
			if byTable[tp] == nil {
				byTable[tp] = map[uint64]bool{}
			}
			byTable[tp][bs] = true
		}
		for tp, starts := range byTable {
			name := db.tierTable(t, tp)
			if err := db.tiers.ensure(ctx, name); errors.Is(err, errTierDropped) {
				continue // no window of it is kept: nothing to flag
			} else if err != nil {
				return err
			}
			var actions []aztables.TransactionAction
			for bs := range starts {
				body := appendStale(series, bs)
				actions = append(actions, aztables.TransactionAction{ActionType: aztables.TransactionTypeInsertMerge, Entity: body})
			}
			if err := submitAll(ctx, db.service.NewClient(name), series, actions); err != nil {
				return fmt.Errorf("tsdb: flag tier blocks: %w", err)
			}
		}
	}
	return nil
}
