package integration_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
)

// A series whose name holds a single quote can be rolled up again and again (issue #35): the
// first Rollup added its blocks under the name with the quote doubled, so the second found
// none, and its Add met them, "its blocks still changed after 20 attempts", on every tick.
func TestTSDBRollupQuotedNameTwice(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	ctx := context.Background()
	db, _, _ := newDB(t, nil)
	names := []string{"lat.a", "lat.b", "lat.q'ueue", "lat.c", "lat.d", "lat.e"}
	end := rollupBase.Add(48 * time.Hour)
	var all = map[string][]tablets.Point{}
	for si, s := range names {
		var pts []tablets.Point
		for i := range 48 * 3600 / 10 {
			pts = append(pts, tablets.Point{Time: rollupBase.Add(time.Duration(i) * 10 * time.Second), Value: float64(si*1000 + i%977)})
		}
		require.NoError(t, db.Write(ctx, s, pts...))
		all[s] = pts
	}
	require.NoError(t, db.Rollup(ctx, rollupBase, end))
	for _, s := range names {
		got := collectWindows(t, db.Aggregate(ctx, []string{s}, rollupBase, end, time.Hour, nil))
		requireWindows(t, modelWindows(all[s], rollupBase, end, time.Hour), got, s)
	}
	require.NoError(t, db.Rollup(ctx, rollupBase.Add(6*time.Hour+30*time.Minute), rollupBase.Add(7*time.Hour)))
	require.NoError(t, db.Rollup(ctx, rollupBase, end))
	for _, s := range names {
		got := collectWindows(t, db.Aggregate(ctx, []string{s}, rollupBase, end, time.Hour, nil))
		requireWindows(t, modelWindows(all[s], rollupBase, end, time.Hour), got, s+" after the second Rollup")
	}
}
