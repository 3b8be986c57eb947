package tiers

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets/tsdb/internal/times"
)

// A run of the maintenance loop computes, in each tier, the windows within its range and
// those it only overlaps once sealed, so that consecutive runs compute each window once, when
// sealed; a Rollup of whole slices computes every window.
func TestWindowsToRoll(t *testing.T) {
	tr := spliceTiers(t, spliceDay)
	require.Equal(t, []time.Duration{time.Minute, time.Hour}, []time.Duration{tr.cfg.Tiers[0].Step, tr.cfg.Tiers[1].Step})
	require.Equal(t, time.Hour, tr.cfg.SealDelay)
	day := times.Unix(spliceDay)
	at := func(d time.Duration) time.Time { return spliceDay.Add(d) }
	sec := func(d time.Duration) uint64 { return day + uint64(d/time.Second) }
	const m, h = time.Minute, time.Hour
	span := [2]uint64{day, day + 86400} // the slice
	none := [2]uint64{}
	for _, c := range []struct {
		name           string
		from, to, now  time.Duration
		lo, hi         uint64 // the slice
		minutes, hours [2]uint64
		hullLo, hullHi uint64
		nothing        bool
	}{
		{name: "a minute sealed", from: 10*h + 30*time.Second, to: 10*h + m + 30*time.Second, now: 11*h + m + 30*time.Second,
			minutes: [2]uint64{sec(10 * h), sec(10*h + m)}, hullLo: sec(10 * h), hullHi: sec(10*h + m)},
		{name: "the run reaching an hour's end", from: 10*h + 59*m + 30*time.Second, to: 11*h + 30*time.Second, now: 12*h + 30*time.Second,
			minutes: [2]uint64{sec(10*h + 59*m), sec(11 * h)}, hours: [2]uint64{sec(10 * h), sec(11 * h)}, hullLo: sec(10 * h), hullHi: sec(11 * h)},
		{name: "within one minute", from: 10*h + 10*time.Second, to: 10*h + 50*time.Second, now: 11*h + 50*time.Second, nothing: true},
		{name: "aligned, sealed", from: 10 * h, to: 12 * h, now: 13 * h,
			minutes: [2]uint64{sec(10 * h), sec(12 * h)}, hours: [2]uint64{sec(10 * h), sec(12 * h)}, hullLo: sec(10 * h), hullHi: sec(12 * h)},
		{name: "within the range though not sealed", from: 10*h + 30*m, to: 12 * h, now: 11*h + 30*m,
			minutes: [2]uint64{sec(10*h + 30*m), sec(12 * h)}, hours: [2]uint64{sec(11 * h), sec(12 * h)}, hullLo: sec(10*h + 30*m), hullHi: sec(12 * h)},
		{name: "a whole slice", from: 0, to: 24 * h, now: 2 * h,
			minutes: span, hours: span, hullLo: span[0], hullHi: span[1]},
		{name: "the slice before midnight", from: 23*h + 59*m + 30*time.Second, to: 24*h + 30*time.Second, now: 25*h + 30*time.Second,
			minutes: [2]uint64{sec(23*h + 59*m), sec(24 * h)}, hours: [2]uint64{sec(23 * h), sec(24 * h)}, hullLo: sec(23 * h), hullHi: sec(24 * h)},
		{name: "the slice after it", from: 23*h + 59*m + 30*time.Second, to: 24*h + 30*time.Second, now: 25*h + 30*time.Second,
			lo: sec(24 * h), hi: sec(48 * h), nothing: true},
	} {
		lo, hi := c.lo, c.hi
		if hi == 0 {
			lo, hi = span[0], span[1]
		}
		w := tr.windowsToRoll(at(c.from), at(c.to), lo, hi, at(c.now))
		if c.nothing {
			require.True(t, w.none(), c.name)
			require.Equal(t, [][2]uint64{none, none}, w.tiers, c.name)
			continue
		}
		require.False(t, w.none(), c.name)
		require.Equal(t, [][2]uint64{c.minutes, c.hours}, w.tiers, c.name)
		require.Equal(t, [2]uint64{c.hullLo, c.hullHi}, [2]uint64{w.lo, w.hi}, c.name)
	}
	require.Equal(t, rollupWindows{tiers: [][2]uint64{span, span}, lo: span[0], hi: span[1]}, tr.wholeWindows(span[0], span[1]))
}
