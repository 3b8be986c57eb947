package engine

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The merger releases the points below a bound in time order, one per time: the value of
// the highest priority, and among equal priorities (the same chunk read twice) the last
// added; points at or after the bound wait.
func TestMerger(t *testing.T) {
	var m Merger
	m.Add(5, 1, 10)
	m.Add(3, 2, 10)
	m.Add(5, 3, 30) // a later write of time 5
	m.Add(5, 4, 20)
	m.Add(9, 5, 10)
	m.Add(3, 6, 10) // the same priority again: the last added wins
	type point struct {
		t uint64
		v float64
	}
	var got []point
	collect := func(t uint64, v float64) bool { got = append(got, point{t, v}); return true }
	require.True(t, m.Release(9, collect))
	require.Equal(t, []point{{3, 6}, {5, 3}}, got)
	m.Add(9, 7, 5) // lower priority than the held 9
	got = nil
	require.True(t, m.Release(^uint64(0), collect))
	require.Equal(t, []point{{9, 5}}, got)
	got = nil
	require.True(t, m.Release(^uint64(0), collect), "nothing left")
	require.Empty(t, got)

	// A consumer that stops stops the release.
	m.Add(1, 1, 1)
	m.Add(2, 2, 1)
	n := 0
	require.False(t, m.Release(10, func(uint64, float64) bool { n++; return false }))
	require.Equal(t, 1, n)
}
