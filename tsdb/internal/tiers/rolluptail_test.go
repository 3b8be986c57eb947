package tiers

import (
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/internal/blockenc"
	"github.com/seed71701133/tablets/tsdb/internal/times"
)

// The default tiers' segments are 4 hours of minutes and a day of hours; a rollup writes a
// tail where its windows are not the first of their block, hold a 24th of a segment or
// more (10 minutes, an hour) and complete no segment.
func TestWritesTail(t *testing.T) {
	tr := spliceTiers(t, spliceDay)
	minutes, hours := tr.cfg.Tiers[0], tr.cfg.Tiers[1]
	require.Equal(t, 4*time.Hour, tr.segment(minutes))
	require.Equal(t, 24*time.Hour, tr.segment(hours))
	day := times.Unix(spliceDay)
	sec := func(d time.Duration) uint64 { return day + uint64(d/time.Second) }
	const m, h = time.Minute, time.Hour
	for _, c := range []struct {
		name string
		tier Tier
		a, b time.Duration
		want bool
	}{
		{"a quarter of an hour", minutes, 10*h + 15*m, 10*h + 30*m, true},
		{"ten minutes", minutes, 10*h + 15*m, 10*h + 25*m, true},
		{"a minute", minutes, 10*h + 15*m, 10*h + 16*m, false},
		{"the day's first quarter", minutes, 0, 15 * m, false},
		{"the quarter completing a segment", minutes, 11*h + 45*m, 12 * h, false},
		{"across a segment's end", minutes, 11*h + 45*m, 12*h + 15*m, false},
		{"the quarter after it", minutes, 12 * h, 12*h + 15*m, true},
		{"the day's last quarter", minutes, 23*h + 45*m, 24 * h, false},
		{"an hour", hours, 10 * h, 11 * h, true},
		{"the day's last hour", hours, 23 * h, 24 * h, false},
		{"the fortnight's first hour", hours, 0, h, false},
		{"the second day's first hour", hours, 24 * h, 25 * h, true},
	} {
		require.Equal(t, c.want, tr.writesTail(c.tier, sec(c.a), sec(c.b)), c.name)
	}
}

// A tail's operations: the tail, inserted or replacing one at its key, and an empty merge into the block at its span's
// start conditional on that block's ETag; without that block, the tail as new at the
// span's start, its earlier windows empty and unsealed; nothing where neither the span nor
// the windows hold anything.
func TestTailWrite(t *testing.T) {
	now := spliceDay.Add(13 * time.Hour)
	tr := spliceTiers(t, now)
	minutes := tr.cfg.Tiers[0]
	bs := times.Unix(spliceDay)
	a, b := bs+10*3600+15*60, bs+10*3600+30*60
	fresh := tr.computeWindows(minutes, splicePoints(times.At(a), 15*time.Minute, 1), nil)
	decode := func(body []byte) *tierBlock {
		var e entity.Entity
		e.AllowStrings = true
		require.NoError(t, e.Decode(body))
		tb, err := tr.decodeTierBlock(&e, minutes, blockenc.AllColumns)
		require.NoError(t, err)
		return tb
	}

	sw, err := tr.tailWrite("a", minutes, azcore.ETag("g1"), fresh, a, b, now)
	require.NoError(t, err)
	require.Len(t, sw, 1)
	ops := sw[tierPeriod(minutes, bs)][0]
	require.Len(t, ops, 2)
	require.Equal(t, "insertreplace", string(ops[0].ActionType))
	tail := decode(ops[0].Entity)
	require.Equal(t, a, tail.start)
	require.Len(t, tail.windows, 15)
	require.Equal(t, allSealed(15), tail.sealed)
	require.Equal(t, windowsOf(fresh, a, time.Minute, 15)[3].Count, tail.windows[3].Count)
	require.Equal(t, "updatemerge", string(ops[1].ActionType))
	require.Equal(t, "g1", string(*ops[1].IfMatch))
	var guard entity.Entity
	require.NoError(t, guard.Decode(ops[1].Entity))
	pk, rk := tr.keys.keys("a", bs)
	require.Equal(t, [2]string{pk, rk}, [2]string{string(guard.PartitionKey), string(guard.RowKey)})

	sw, err = tr.tailWrite("a", minutes, "", fresh, a, b, now)
	require.NoError(t, err)
	ops = sw[tierPeriod(minutes, bs)][0]
	require.Len(t, ops, 1)
	require.Equal(t, "add", string(ops[0].ActionType))
	first := decode(ops[0].Entity)
	require.Equal(t, bs, first.start)
	require.Len(t, first.windows, int((b-bs)/60))
	lead := int((a - bs) / 60)
	require.Equal(t, make([]bool, lead), first.sealed[:lead], "the windows before the rollup's")
	require.Equal(t, make([]*Window, lead), first.windows[:lead])
	require.Equal(t, allSealed(15), first.sealed[lead:])

	sw, err = tr.tailWrite("a", minutes, "", map[uint64]*Window{}, a, b, now)
	require.NoError(t, err)
	require.Empty(t, sw, "nothing rolled up, nothing to roll up")
	sw, err = tr.tailWrite("a", minutes, "g1", map[uint64]*Window{}, a, b, now)
	require.NoError(t, err)
	require.Len(t, sw, 1, "windows sealed without points")
	empty := decode(sw[tierPeriod(minutes, bs)][0][0].Entity)
	require.Equal(t, allSealed(15), empty.sealed)
	require.Equal(t, make([]*Window, 15), empty.windows)
}
