package tsdb

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
)

// A Select with SelectHints.Latest gives of each series the last sample the Select without
// it gives, whichever part holds it: the raw table (folded), the staging table (a scrape's
// points, a millisecond written twice, a late point before the newest), or neither in the
// range; through a warm process's caches and a new one's.
func TestSelectLatestIsTheLastSample(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	ctx := context.Background()
	k, base, now, _ := foldedDense(t, "lt") // 16 points a series from base, the last at base+3h45m (and i seconds), folded
	var staged []SeriesPoints
	for i := range 40 {
		key, err := k.SeriesOf(ctx, Labels{{Name: "__name__", Value: "dense_total"}, {Name: "i", Value: fmt.Sprintf("%03d", i)}})
		require.NoError(t, err)
		ms := time.Duration(i) * time.Millisecond
		var pts []tablets.Point
		switch {
		case i < 10: // a scrape's two points
			pts = []tablets.Point{{Time: now.Add(-4*time.Minute + ms), Value: 1}, {Time: now.Add(-2*time.Minute + ms), Value: 2}}
		case i < 20: // a late point between the raw table's last and the present
			pts = []tablets.Point{{Time: base.Add(3*time.Hour + 50*time.Minute + ms), Value: 3}}
		case i < 30: // a point after the ranges read
			pts = []tablets.Point{{Time: now.Add(time.Minute + ms), Value: 4}}
		default: // the newest millisecond written twice: the later write counts
			pts = []tablets.Point{{Time: now.Add(-time.Minute + ms), Value: 5}}
		}
		staged = append(staged, SeriesPoints{Series: key, Points: pts})
	}
	require.NoError(t, k.WriteMany(ctx, staged))
	for i := 30; i < 40; i++ {
		staged[i].Points[0].Value = 6
	}
	require.NoError(t, k.WriteMany(ctx, staged[30:]))

	warm, err := k.Queryable(&QueryOptions{DisableTiers: true})
	require.NoError(t, err)
	ranges := [][2]time.Time{
		{now.Add(-5 * time.Minute), now},
		{now.Add(-3 * time.Minute), now},
		{now.Add(-90 * time.Second), now.Add(-90*time.Second + time.Millisecond)}, // nothing
		{base.Add(3 * time.Hour), now},
		{base.Add(3 * time.Hour), base.Add(3*time.Hour + 46*time.Minute)}, // the raw table's last
		{base, base.Add(time.Hour)},
		{base.Add(3*time.Hour + 50*time.Minute), now.Add(2 * time.Minute)}, // the points after now too
	}
	for _, q := range []*Queryable{warm, nil} {
		if q == nil { // a new process: its caches cold
			q, err = k.open(t, true).Queryable(&QueryOptions{DisableTiers: true})
			require.NoError(t, err)
		}
		for _, r := range ranges {
			all, _, _ := k.selectHinted(t, q, nil, "dense_total", r[0], r[1])
			latest, _, _ := k.selectHinted(t, q, &SelectHints{Latest: true}, "dense_total", r[0], r[1])
			want := map[string][]string{}
			for i, samples := range all {
				want[i] = samples[len(samples)-1:]
			}
			require.Equal(t, want, latest, "[%v, %v)", r[0], r[1])
			require.Equal(t, r[1].Sub(r[0]) == time.Millisecond, len(all) == 0, "[%v, %v): %d series", r[0], r[1], len(all))
		}
	}
}
