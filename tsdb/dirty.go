package tsdb

import (
	"context"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
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
