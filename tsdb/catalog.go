package tsdb

import "context"

// SeriesOf returns the series key of a label set given in any order (labels with an empty
// value are dropped, as in Prometheus), registering it in the catalog: one request the first
// time a process asks, none after while the set stays cached (see Options.CachedSeries; a
// SeriesOfMany of 100 sets or more it does not know reads the newest period's index first,
// waiting for it at most 5 s, and registers only those it does not list). The
// key is the same in every process and version. A bad set (no labels, an empty or duplicate
// name, invalid UTF-8, over MaxLabelsSize) gives an error wrapping tablets.ErrInvalidLabels
// before any request.
func (db *DB) SeriesOf(ctx context.Context, ls Labels) (string, error) {
	keys, err := db.SeriesOfMany(ctx, []Labels{ls})
	if err != nil {
		return "", err
	}
	return keys[0], nil
}

// SeriesOfMany is SeriesOf of many label sets, the new ones registered in transactions
// (one per registry partition and 100 sets). Every set is checked before any request.
func (db *DB) SeriesOfMany(ctx context.Context, sets []Labels) ([]string, error) {
	return db.catalog.Register(ctx, sets)
}
