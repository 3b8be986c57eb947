package tsdb

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
)

// A Select of the present (an instant query, a rule, a panel's newest steps) does not query
// the raw table where the period's change log says no change ever touched its range: before
// the next Fold, its samples are all staged. A fold by another process that brings samples
// into that range shows in the next Select of the process that read nothing there.
func TestSelectOfThePresentSkipsAnEmptyRawRange(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	ctx := context.Background()
	k, base, now, want := foldedDense(t, "pr") // 16 points a series from base, the last at base+3h45m (and i seconds)
	db := k.open(t, true)
	q, err := db.Queryable(&QueryOptions{DisableTiers: true})
	require.NoError(t, err)

	got, _, reads := k.selectMetric(t, q, "dense_total", now.Add(-5*time.Minute), now)
	require.Empty(t, got, "samples of the last 5 minutes")
	require.Zero(t, reads, "raw table queries of a range no change touched")

	// The counter counts: a range holding the last point reads the table, and gives it.
	got, _, reads = k.selectMetric(t, q, "dense_total", base.Add(3*time.Hour+40*time.Minute), now)
	require.Positive(t, reads, "raw table queries of a range holding samples")
	require.Len(t, got, len(want))
	for i, pts := range want {
		require.Equal(t, pts[len(pts)-1:], got[i], "series %s", i)
	}

	// Another process writes a point 2 minutes ago and folds it into the raw table.
	other := k.open(t, false)
	key, err := other.SeriesOf(ctx, Labels{{Name: "__name__", Value: "dense_total"}, {Name: "i", Value: "007"}})
	require.NoError(t, err)
	at := now.Add(-2 * time.Minute)
	require.NoError(t, other.WriteMany(ctx, []SeriesPoints{{Series: key, Points: []tablets.Point{{Time: at, Value: 42}}}}))
	k.clock.Store(now.Add(20 * time.Minute).UnixNano())
	rep, err := other.Fold(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, rep.Series, "series folded")
	k.clock.Store(now.UnixNano())

	got, _, _ = k.selectMetric(t, q, "dense_total", now.Add(-5*time.Minute), now)
	require.Equal(t, map[string][]string{"007": {fmt.Sprintf("%d:42", at.UnixMilli())}}, got,
		"the warm process' Select of the last 5 minutes after the other's fold")
	fresh, err := k.open(t, true).Queryable(&QueryOptions{DisableTiers: true})
	require.NoError(t, err)
	got, _, reads = k.selectMetric(t, fresh, "dense_total", now.Add(-5*time.Minute), now)
	require.Equal(t, map[string][]string{"007": {fmt.Sprintf("%d:42", at.UnixMilli())}}, got, "a new process' Select")
	require.Positive(t, reads, "raw table queries of a range a fold touched")
}
