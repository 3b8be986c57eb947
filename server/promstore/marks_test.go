package promstore

import (
	"context"
	"testing"
	"time"

	"github.com/seed71701133/tablets/server/internal/resolution"
	"github.com/seed71701133/tablets/tsdb"
)

// ExactReads is true only where every Select reads raw samples wherever they exist: the
// query's max_source_resolution, else the store's MaxResolution, is raw, tiers not preferred
// (DisableTiers: always).
func TestExactReads(t *testing.T) {
	raw := resolution.With(context.Background(), resolution.Raw)
	auto := resolution.With(context.Background(), resolution.Any)
	hour := resolution.With(context.Background(), time.Hour)
	for _, c := range []struct {
		name string
		opts Options
		ctx  context.Context
		want bool
	}{
		{"default", Options{}, context.Background(), true},
		{"raw store", Options{MaxResolution: tsdb.RawResolution}, context.Background(), true},
		{"auto store", Options{MaxResolution: tsdb.AnyResolution}, context.Background(), false},
		{"auto store, raw query", Options{MaxResolution: tsdb.AnyResolution}, raw, true},
		{"raw store, auto query", Options{}, auto, false},
		{"raw store, 1h query", Options{}, hour, false},
		{"prefer tiers", Options{PreferTiers: true}, raw, false},
		{"tiers disabled", Options{DisableTiers: true}, auto, true},
	} {
		if got := (&Queryable{opts: c.opts}).ExactReads(c.ctx); got != c.want {
			t.Errorf("%s: ExactReads = %v, want %v", c.name, got, c.want)
		}
	}
}
