package itest

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
)

// CollectPoints is every point of seq, failing t on an error.
func CollectPoints(t *testing.T, seq func(yield func(tablets.Point, error) bool)) []tablets.Point {
	t.Helper()
	var out []tablets.Point
	for p, err := range seq {
		require.NoError(t, err)
		out = append(out, p)
	}
	return out
}

// RequireSamePoints fails t unless got holds the points of want in order, each time equal
// and each value the same bits (NaNs too).
func RequireSamePoints(t *testing.T, want, got []tablets.Point, what string) {
	t.Helper()
	require.Len(t, got, len(want), what)
	for i := range want {
		if !want[i].Time.Equal(got[i].Time) || math.Float64bits(want[i].Value) != math.Float64bits(got[i].Value) {
			t.Fatalf("%s: point %d is %v %x, want %v %x", what, i, got[i].Time, math.Float64bits(got[i].Value), want[i].Time, math.Float64bits(want[i].Value))
		}
	}
}
