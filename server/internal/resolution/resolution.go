// Package resolution carries a query's max_source_resolution (Thanos' parameter) from the
// query API to the storage in the request's context: the coarsest rollup tier the query's
// Selects may read where raw samples exist. Its values are tsdb's (SelectHints.MaxResolution):
// the API does not import the database.
package resolution

import (
	"context"
	"math"
	"time"
)

const (
	// Raw: raw samples wherever they exist (tsdb.RawResolution): exact answers.
	Raw time.Duration = -1
	// Any: any tier that can serve a Select where it is estimated cheaper
	// (tsdb.AnyResolution): approximate answers.
	Any time.Duration = math.MaxInt64
)

type key struct{}

// With returns ctx carrying the resolution d.
func With(ctx context.Context, d time.Duration) context.Context {
	return context.WithValue(ctx, key{}, d)
}

// From returns the resolution ctx carries, or 0.
func From(ctx context.Context) time.Duration {
	d, _ := ctx.Value(key{}).(time.Duration)
	return d
}
