package chunked

import (
	"context"
	"fmt"
	"time"

	"github.com/seed71701133/tablets/internal/chunks"
	"github.com/seed71701133/tablets/internal/partkey"
	"github.com/seed71701133/tablets/rounding"
)

// Compact merges the chunks of series in every partition that [from, to) overlaps: runs of
// small or overlapping chunks become as few chunks of up to MaxChunkBytes as hold their
// points (the latest write of each time kept). Each run is replaced in one transaction,
// which deletes the chunks it read only if they are unchanged (their ETags), so a
// concurrent Delete or Compact makes it start again, and a concurrent Write is never lost: a
// write adds a chunk of its own, and a later write has a higher priority than any chunk
// compacted before it. A reader reads each partition in one request or in fresh snapshots
// (see the engine), so it sees every point once, before or after. Compact never runs as
// part of a Write: call it (or CompactAll) on a timer beside a long-running writer.
func (s *Store) Compact(ctx context.Context, series string, from, to time.Time) error {
	if err := s.layout.ValidateSeries(series); err != nil {
		return err
	}
	lo, hi, err := s.units(from, to)
	if err != nil || lo >= hi {
		return err
	}
	escaped := partkey.Escape(series)
	for p := s.layout.partitionOf(lo); p < hi; p += s.layout.partUnits {
		if err := s.table().CompactPartition(ctx, s.layout.partitionKey(escaped, p)); err != nil {
			return fmt.Errorf("chunked: compact %q: %w", series, err)
		}
		if p+s.layout.partUnits < p {
			break
		}
	}
	return nil
}

// CompactOptions are the options of CompactAll; nil means the defaults.
type CompactOptions struct {
	// Growing, if not zero, is the time from which the series are still being written (the
	// present, for a writer that keeps writing): a partition that ends after it gets a
	// chunk a write, and is compacted only once it holds 4 to 7 chunks (by a hash of its
	// key), not at its second, so that a series written every few minutes is not read and
	// rewritten whole after each write. The others, and all when Growing is zero, are
	// compacted as soon as two of their chunks merge.
	Growing time.Time
}

// CompactAll is Compact of every series of the table: a key scan of the partitions that
// [from, to) overlaps (ScanChunks: one query, a page per 1,000 chunks) finds those that hold
// runs worth merging (see CompactOptions), and only those are read and compacted, as Compact
// does them (each run conditional on its chunks' ETags), Concurrency partitions at a time.
// A table whose partitions hold a chunk each costs the scan only. A partition that fails
// does not stop the others; the error names each series that failed.
//
// Without an error it reports what it did and the range's headroom (Compacted): a Write
// of a series adds a chunk to each partition it writes (more only where its points of a
// partition fill a chunk), so a caller that knows fewer writes than the headroom came
// since, each of a chunk a partition, can skip the next CompactAll of the range (with the
// same Growing partition): it would find nothing.
func (s *Store) CompactAll(ctx context.Context, from, to time.Time, opts *CompactOptions) (Compacted, error) {
	lo, hi, err := s.scanUnits(from, to)
	if err != nil {
		return Compacted{}, err
	}
	growing := ^uint64(0)
	if opts != nil && !opts.Growing.IsZero() {
		if growing, err = s.layout.format.Units(opts.Growing); err != nil {
			return Compacted{}, fmt.Errorf("chunked: compact: growing: %w", err)
		}
	}
	return s.table().CompactAll(ctx, lo, hi, growing)
}

// Compacted is what a CompactAll found and did: the partitions it compacted, and the
// fewest chunks any partition of its range can gain before one is worth compacting (at
// least 1).
type Compacted = chunks.Compacted

// units returns [from, to) as units: the floor of from, the ceiling of to.
func (s *Store) units(from, to time.Time) (uint64, uint64, error) {
	if err := rounding.CheckRange(from, to); err != nil {
		return 0, 0, err
	}
	f := s.layout.format
	lo, _ := f.Units(from)
	hi, _ := f.Units(to)
	if f.Time(hi).Before(to) {
		hi++
	}
	return lo, hi, nil
}
