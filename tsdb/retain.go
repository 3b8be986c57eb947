package tsdb

import (
	"context"
	"time"
)

// Retention (package internal/retention) is every step of Retain, which delegates to it.

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
	return db.retention.Retain(ctx, now)
}
