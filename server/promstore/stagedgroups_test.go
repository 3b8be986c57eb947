package promstore

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets/tsdb"
)

// Consecutive raw units, tier units left out, form groups of stagedGroupUnits; a group of
// one reads its own staged points; a group's points are dropped by its last unit.
func TestStagedGroups(t *testing.T) {
	raw := func(series ...string) unit {
		u := unit{}
		for _, s := range series {
			u.entries = append(u.entries, entry{series: s})
		}
		return u
	}
	var units []unit
	for i := range stagedGroupUnits + 3 {
		units = append(units, raw(string(rune('a'+i%26))))
		if i == 2 {
			units = append(units, unit{tier: true}) // between raw units: not in a group
		}
	}
	units = append(units, unit{tier: true})
	sg := newStagedGroups(&Queryable{}, units, base, base)
	require.Len(t, sg.groups, 2)
	require.Len(t, sg.groups[0].series, stagedGroupUnits)
	require.Len(t, sg.groups[1].series, 3)
	require.Equal(t, -1, sg.groupOf[3], "a tier unit")
	require.Equal(t, -1, sg.groupOf[len(units)-1], "a tier unit")
	require.Equal(t, 0, sg.groupOf[4], "the tier unit does not cut the group")
	require.Equal(t, 1, sg.groupOf[stagedGroupUnits+1])

	one := newStagedGroups(&Queryable{}, []unit{raw("a", "b"), {tier: true}}, base, base)
	require.Empty(t, one.groups, "a single raw unit reads its own")
	st, err := one.acquire(context.Background(), 0)
	require.NoError(t, err)
	require.Nil(t, st)

	// Release drops the points when the group's last unit is read (a Staged set by hand:
	// the read itself needs a database).
	g := sg.groups[1]
	g.once.Do(func() { g.staged = &tsdb.Staged{} })
	for i := stagedGroupUnits + 1; i < stagedGroupUnits+4; i++ {
		require.Equal(t, 1, sg.groupOf[i])
		st, err := sg.acquire(context.Background(), i)
		require.NoError(t, err)
		require.Same(t, g.staged, st, "every unit of the group gets the one read")
	}
	sg.release(stagedGroupUnits + 1)
	sg.release(stagedGroupUnits + 2)
	require.NotNil(t, g.staged, "a unit of the group is still being read")
	sg.release(stagedGroupUnits + 3)
	require.Nil(t, g.staged, "the group's last unit is read: its points are dropped")
}
