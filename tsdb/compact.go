package tsdb

import (
	"context"
	"errors"
	"time"
)

// Compact merges the small chunks of every series with points or histogram samples in
// [from, to): in each raw table of the range whose layout compacts (chunked; others are
// skipped), and in each histogram table. A process that writes every few seconds, such as a
// remote-write endpoint, makes a chunk each time. A table is scanned once for the partitions
// (series and day) that hold several chunks, and only those are compacted (the partition
// holding the present, by Options.Now, once it holds 4 to 7: each Fold adds a chunk to
// every series', and compacting after each rewrote every series; it is compacted whole
// once the present has left it, by the next Compact whose range reaches it): a table with
// nothing to merge costs a request per 1,000 chunks of the range. A histogram table's runs
// become chunks of up to 16 KiB, each written with the highest priority of the chunks it
// replaces, in one transaction that deletes those only if unchanged (their ETags). Several
// processes may compact at once, and a Compact killed midway leaves every sample readable:
// the merges are conditional on the chunks' ETags, each one transaction. A table this
// process compacted over the range since the last change its period's raw change log
// records is not scanned again: a request (the log's entity) instead of a scan.
func (db *DB) Compact(ctx context.Context, from, to time.Time) error {
	return errors.Join(db.floats.Compact(ctx, from, to), db.hists.Compact(ctx, from, to))
}
