package tsdb

import (
	"context"
	"fmt"
	"time"
)

// Retain drops the raw tables whose whole span ends at or before now minus RawRetention, with
// their series indexes, one request a table (Azure's high-volume delete pattern: delete the
// table, not its entities), and returns their names. Each is first recorded as dropped in the catalog, so that no Write,
// of this process or another, ever creates it again: Azure refuses a deleted table's name
// for 40 seconds and more, and a period once dropped stays expired. With no RawRetention it
// drops nothing.
func (db *DB) Retain(ctx context.Context, now time.Time) ([]string, error) {
	if db.opts.RawRetention == 0 {
		return nil, nil
	}
	periods, err := db.rawPeriods(ctx)
	if err != nil {
		return nil, err
	}
	cutoff := now.Add(-db.opts.RawRetention)
	var dropped []string
	for _, p := range periods {
		if db.periodEnd(p).After(cutoff) {
			continue
		}
		if err := db.recordDropped(ctx, p); err != nil {
			return dropped, err
		}
		for _, name := range []string{db.rawTable(p), db.indexTable(p)} {
			if _, err := db.service.DeleteTable(ctx, name, nil); err != nil && !isTableGone(err) {
				return dropped, fmt.Errorf("tsdb: drop %s: %w", name, err)
			}
			dropped = append(dropped, name)
		}
	}
	return dropped, nil
}
