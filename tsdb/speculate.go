package tsdb

import (
	"context"

	"github.com/seed71701133/tablets/tsdb/internal/changelog"
)

// ErrNotKnown is a speculative read's error (DB.Speculate) where it needs what this
// process has not read yet (a change log's state, the staging listing, a tier's blocks):
// its query is then answered as any other.
var ErrNotKnown = changelog.ErrNotKnown

// Speculate returns the context of a speculative read of the database, for a read that
// began (BeginRead), and the check that says whether its answer stands.
//
// A speculative read takes the database as this process last found it: the staging
// listing as it stands and the change logs' states last read, without a refresh of either
// and without waiting for one under way; what no cache holds it reads as any read does.
// So it runs beside the read's PrepareRead (or ReadMark) instead of after it: a refreshed
// instant panel's engine works while its one request is under way, where it waited for
// it. Where it needs what was never read, or a tier's blocks, it fails with ErrNotKnown.
//
// Holds, called once the read's PrepareRead (or ReadMark) returned without error, reports
// whether what the speculative read took is what a read after that refresh takes: nothing
// this process found of the database changed since Speculate was called (the listing's
// refreshes found no other entity, ETag or log mark; no change log's state read was
// another than the one known). A change made by any process before the read began shows in
// that refresh (it began after the read did), so an answer that Holds is the read's as of
// the refresh; one that does not is thrown away and the query answered again, as any other.
// Changes this process learns of for other reads count too: a Holds is false more often
// than needed, never true when it should not be.
//
// ok is false, and ctx returned as is, where this process has not listed the staging table
// yet: a speculation could only fail (a server's first query).
func (db *DB) Speculate(ctx context.Context) (sctx context.Context, holds func() bool, ok bool) {
	if !db.staging.Speculates() {
		return ctx, nil, false
	}
	// What this process found changed of the database that a read takes without reading
	// it again: the staging listing's refreshes that found it changed, and the states of
	// the raw and index change logs that differ from those known before them. Each count
	// only grows.
	seen := func() uint64 { return db.staging.Changes() + db.changes.Changes() + db.index.Log.Changes() }
	was := seen()
	return changelog.Speculative(ctx), func() bool { return seen() == was }, true
}
