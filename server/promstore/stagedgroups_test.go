package promstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/testkit/dbtest"
	"github.com/seed71701133/tablets/tsdb"
)

// Consecutive units of a Select, raw and tier, form groups of stagedGroupUnits that share a
// read, over the range of all the units (a tier unit's starts at the window holding the
// Select's start); a group of one reads its own.
func TestStagedGroups(t *testing.T) {
	raw := func(series ...string) unit {
		u := unit{}
		for _, s := range series {
			u.entries = append(u.entries, entry{series: s})
		}
		return u
	}
	tier := raw("t")
	tier.tier, tier.from, tier.to = true, base.Add(-time.Minute), base.Add(time.Hour)
	from, to := base.Add(30*time.Second), base.Add(time.Hour+30*time.Second)
	units := []unit{raw("a", "b"), tier}
	var singles []string
	for i := range 2*stagedGroupUnits - 2 {
		singles = append(singles, fmt.Sprint(i))
		units = append(units, raw(singles[i]))
	}
	units = append(units, raw("x", "y")) // alone in the last group
	sg := newStagedGroups(&Queryable{}, units, from, to)
	require.Len(t, sg.groups, 2)
	cut := stagedGroupUnits - 2
	require.Equal(t, append([]string{"a", "b", "t"}, singles[:cut]...), sg.groups[0].series, "raw and tier units")
	require.Equal(t, singles[cut:], sg.groups[1].series)
	require.Equal(t, 0, sg.groupOf[1], "the tier unit")
	require.Equal(t, 1, sg.groupOf[stagedGroupUnits])
	require.Equal(t, -1, sg.groupOf[len(units)-1], "a group of one")
	require.Equal(t, base.Add(-time.Minute), sg.from, "from the tier unit's first window")
	require.Equal(t, to, sg.to)

	one := newStagedGroups(&Queryable{}, []unit{raw("a", "b")}, from, to)
	require.Empty(t, one.groups, "a single unit reads its own")
	st, err := one.acquire(context.Background(), 0)
	require.NoError(t, err)
	require.Nil(t, st)
}

// Each unit's staged points are dropped once it is read; the last unit drops the Staged.
func TestStagedGroupsRelease(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	db, _, _ := dbtest.NewDB(t, &tsdb.Options{Layout: chunkedLayout})
	var sets []labels.Labels
	var points [][]tablets.Point
	for _, name := range []string{"a", "b", "c"} {
		sets = append(sets, labels.FromStrings("__name__", "rel", "i", name))
		points = append(points, []tablets.Point{{Time: base, Value: 1}})
	}
	write(t, db, sets, points) // staged
	var units []unit
	for s, err := range db.Select(context.Background(), base, base.Add(time.Hour), tsdb.Matcher{Type: tsdb.MatchEqual, Name: "__name__", Value: "rel"}) {
		require.NoError(t, err)
		units = append(units, unit{entries: []entry{{series: s.Series}}})
	}
	require.Len(t, units, 3)
	q, err := New(db, nil)
	require.NoError(t, err)
	from, to := base, base.Add(time.Hour)
	sg := newStagedGroups(q, units, from, to)
	st, err := sg.acquire(context.Background(), 0)
	require.NoError(t, err)
	require.NotNil(t, st)
	read := func(u int) error {
		for _, err := range db.QueryManyStaged(context.Background(), []string{units[u].entries[0].series}, from, to, st) {
			if err != nil {
				return err
			}
		}
		return nil
	}
	sg.release(0)
	require.ErrorIs(t, read(0), tablets.ErrInvalidOptions, "a released unit's points are dropped")
	require.NoError(t, read(1), "the others' are kept")
	sg.release(1)
	require.NotNil(t, sg.groups[0].staged, "a unit is still being read")
	sg.release(2)
	require.Nil(t, sg.groups[0].staged, "the last unit is read: the Staged is dropped")
}
