package tsdb

import (
	"context"
	"fmt"
	"time"
)

// compacter is a raw store that merges small chunks (chunked).
type compacter interface {
	Compact(ctx context.Context, series string, from, to time.Time) error
}

// Compact merges the small chunks of every series with points in [from, to), in each raw
// table of the range whose layout compacts (chunked; others are skipped): a process that
// writes every few seconds, such as a remote-write endpoint, makes a chunk each time. Several
// processes may compact at once: the layout's merges are conditional on the chunks' ETags.
func (db *DB) Compact(ctx context.Context, from, to time.Time) error {
	spans, err := db.spans(ctx, from, to)
	if err != nil {
		return err
	}
	for _, sp := range spans {
		s, err := db.stores.get(sp.period)
		if err != nil {
			return err
		}
		c, ok := s.(compacter)
		if !ok {
			return nil
		}
		names, err := db.Series(ctx, sp.from, sp.to)
		if err != nil {
			return err
		}
		for _, series := range names {
			if err := c.Compact(ctx, series, sp.from, sp.to); err != nil && !isTableGone(err) {
				return fmt.Errorf("tsdb: compact %q: %w", series, err)
			}
		}
	}
	return nil
}

// KeepCompacted compacts, every interval, the last lookback (up to now), until ctx is done;
// it then returns ctx's error. An error goes to report (nil: dropped) and the loop goes on.
func (db *DB) KeepCompacted(ctx context.Context, interval, lookback time.Duration, report func(error)) error {
	if interval <= 0 || lookback <= 0 {
		return fmt.Errorf("tsdb: KeepCompacted: interval %v and lookback %v must be positive", interval, lookback)
	}
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ticker.C:
		}
		now := time.Now()
		if err := db.Compact(ctx, now.Add(-lookback), now.Add(time.Minute)); err != nil && report != nil && ctx.Err() == nil {
			report(err)
		}
	}
}
