package tsdb

import (
	"errors"
	"testing"
	"time"

	"github.com/seed71701133/tablets"
)

// A RollupPace outside [0, MaxRollupPace] is refused before any request; the bounds are
// taken. (How a pace spreads a Rollup's groups, and which Rollups it paces: internal/batch's
// TestPaceWait and the tiers' TestRollupPacer.)
func TestRollupPaceChecked(t *testing.T) {
	for _, d := range []time.Duration{-time.Second, MaxRollupPace + time.Second} {
		if err := CheckOptions("rpace", &Options{RollupPace: d}); !errors.Is(err, tablets.ErrInvalidOptions) {
			t.Errorf("RollupPace %v: %v, want ErrInvalidOptions", d, err)
		}
	}
	for _, d := range []time.Duration{0, MaxRollupPace} {
		if err := CheckOptions("rpace", &Options{RollupPace: d}); err != nil {
			t.Errorf("RollupPace %v: %v", d, err)
		}
	}
}
