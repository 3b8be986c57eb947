package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
)

// The model's floor must agree with time.Truncate where Truncate's origin (year 1) is a
// multiple of the resolution away from the epoch (every divisor of a day), and be
// epoch-aligned otherwise.
func TestFloorTime(t *testing.T) {
	times := []time.Time{
		tablets.MinTime,
		baseTime,
		baseTime.In(zones[0]),
		time.Date(2262, 4, 11, 23, 47, 16, 854775807, time.UTC),
		time.Date(3000, 6, 15, 12, 34, 56, 789123456, time.UTC),
		tablets.MaxTime,
	}
	for _, r := range []time.Duration{1, 3, time.Microsecond, time.Millisecond, time.Second, time.Minute, time.Hour, 24 * time.Hour} {
		for _, tm := range times {
			require.True(t, tm.Truncate(r).Equal(floorTime(tm, r)), "floor(%s, %s)", ts(tm), r)
			require.Equal(t, time.UTC, floorTime(tm, r).Location())
		}
	}
	// 7s does not divide a day: the epoch-aligned floor of 1970-01-01T00:00:10 is 00:00:07.
	require.True(t, time.Unix(7, 0).Equal(floorTime(time.Unix(10, 5), 7*time.Second)))
	require.True(t, time.Unix(700, 0).Equal(floorTime(time.Unix(706, 999999999), 7*time.Second)))
}

func TestModel(t *testing.T) {
	m := newModel(time.Second)
	b := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	m.write(pt(b.Add(1500*time.Millisecond), 1), pt(b.Add(1*time.Second), 2), pt(b.Add(3*time.Second), 3))
	require.Equal(t, []tablets.Point{pt(b.Add(time.Second), 2)}, m.query(b.Add(500*time.Millisecond), b.Add(1500*time.Millisecond)))
	require.Len(t, m.query(b.Add(1500*time.Millisecond), b.Add(3*time.Second)), 0)
	require.Equal(t, []tablets.Point{pt(b.Add(3*time.Second), 3), pt(b.Add(time.Second), 2)}, m.latest(5))
	m.delete(b, b.Add(2*time.Second))
	require.Equal(t, []tablets.Point{pt(b.Add(3*time.Second), 3)}, m.all())
}
