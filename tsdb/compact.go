package tsdb

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// tableCompacter is a raw store that merges small chunks, finding for the whole table the
// partitions worth compacting (chunked).
type tableCompacter interface {
	CompactAll(ctx context.Context, from, to time.Time) error
}

// Compact merges the small chunks of every series with points or histogram samples in
// [from, to): in each raw table of the range whose layout compacts (chunked; others are
// skipped), and in each histogram table. A process that writes every few seconds, such as a
// remote-write endpoint, makes a chunk each time. A table is scanned once for the partitions
// (series and day) that hold several chunks, and only those are compacted: a table with
// nothing to merge costs a request per 1,000 chunks of the range. A histogram table's runs
// become chunks of up to 16 KiB, each written with the highest priority of the chunks it
// replaces, in one transaction that deletes those only if unchanged (their ETags). Several
// processes may compact at once, and a Compact killed midway leaves every sample readable:
// the merges are conditional on the chunks' ETags, each one transaction.
func (db *DB) Compact(ctx context.Context, from, to time.Time) error {
	spans, err := db.spans(ctx, rawKind, from, to)
	if err != nil {
		return err
	}
	var errs []error
	for _, sp := range spans {
		s, err := db.stores.get(sp.period)
		if err != nil {
			return err
		}
		c, ok := s.(tableCompacter)
		if !ok {
			break // every raw table has the same layout
		}
		if err := c.CompactAll(ctx, sp.from, sp.to); err != nil && !isTableGone(err) {
			errs = append(errs, fmt.Errorf("tsdb: %w", err))
			break
		}
	}
	if err := db.compactHistograms(ctx, from, to); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
