package tsdb

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/chunked"
	"github.com/seed71701133/tablets/internal/testkit/clock"
	"github.com/seed71701133/tablets/tsdb"
)

// A database of chunked tables compacts the chunk-a-write of a frequent writer, in every
// period, and reads the same points after. Compacting again reads each period's change log
// and scans no table: nothing was written since. Another process's write is compacted by
// the next run, and a process that did not compact scans.
func TestTSDBCompact(t *testing.T) {
	ctx := context.Background()
	opts := &tsdb.Options{RawPeriod: time.Hour, Tiers: []tsdb.Tier{}, DirectWrites: true,
		Layout: func(c *aztables.Client) (tablets.Store, error) { return chunked.New(c, nil) }}
	db, svc, checker := newDB(t, opts)
	start := time.Date(2024, 5, 20, 10, 30, 0, 0, time.UTC) // two periods
	want := map[string][]tablets.Point{}
	for i := range 40 {
		for s := range 3 {
			series := fmt.Sprintf("s%d", s)
			p := tablets.Point{Time: start.Add(time.Duration(i) * 2 * time.Minute).Add(time.Duration(s) * time.Millisecond), Value: float64(i*s) + 0.25}
			require.NoError(t, db.Write(ctx, series, p))
			want[series] = append(want[series], p)
		}
	}
	chunks := func() int {
		n := 0
		for _, p := range []time.Time{start, start.Add(time.Hour)} {
			client := svc.NewClient(fmt.Sprintf("%sr%d", db.Name(), p.Truncate(time.Hour).Unix()))
			for pager := client.NewListEntitiesPager(nil); pager.More(); {
				page, err := pager.NextPage(ctx)
				require.NoError(t, err)
				n += len(page.Entities)
			}
		}
		return n
	}
	require.Equal(t, 120, chunks(), "a chunk a write")
	require.NoError(t, db.Compact(ctx, start, start.Add(2*time.Hour)))
	require.LessOrEqual(t, chunks(), 6, "a chunk per series and period")
	before := checker.Stats().Requests
	require.NoError(t, db.Compact(ctx, start, start.Add(2*time.Hour)))
	// The range's third period, 12:00, has no table.
	require.Equal(t, int64(3), checker.Stats().Requests-before, "nothing written since: a period's change log each, no scan")

	raw := &tableRequests{table: "/" + db.Name() + "r"}
	other := reopenWith(t, db.Name(), opts, func(next policy.Transporter) policy.Transporter { raw.next = next; return raw })
	require.NoError(t, other.Compact(ctx, start, start.Add(2*time.Hour)))
	require.Positive(t, raw.take(), "a process that did not compact scans")
	require.NoError(t, other.Compact(ctx, start, start.Add(2*time.Hour)))
	require.Zero(t, raw.take(), "then it does not")
	require.NoError(t, other.Compact(ctx, start.Add(10*time.Minute), start.Add(2*time.Hour+5*time.Minute)))
	require.Zero(t, raw.take(), "nor over a range slid within the partitions it compacted (the maintenance loop's next)")
	late := tablets.Point{Time: start.Add(time.Minute), Value: -1}
	require.NoError(t, db.Write(ctx, "s1", late)) // another process's write: a chunk more
	want["s1"] = append(want["s1"][:1], append([]tablets.Point{late}, want["s1"][1:]...)...)
	require.Greater(t, chunks(), 6)
	require.NoError(t, other.Compact(ctx, start, start.Add(2*time.Hour)))
	require.Positive(t, raw.take(), "a write since: scanned")
	require.LessOrEqual(t, chunks(), 6, "and compacted")
	for series, pts := range want {
		requirePoints(t, db, series, start, start.Add(2*time.Hour), pts)
	}
}

// requirePoints requires db's points of series in [from, to) to be want.
func requirePoints(t *testing.T, db *tsdb.DB, series string, from, to time.Time, want []tablets.Point) {
	t.Helper()
	var got []tablets.Point
	for p, err := range db.Query(context.Background(), series, from, to) {
		require.NoError(t, err)
		got = append(got, p)
	}
	require.Len(t, got, len(want), series)
	for i := range got {
		require.True(t, want[i].Time.Equal(got[i].Time), "%s %d", series, i)
		require.Equal(t, want[i].Value, got[i].Value, "%s %d", series, i)
	}
}

// growingDayOptions are the options of a database of chunked day tables, direct writes and
// no tiers, on a clock at 10:00 of day: the day partition is the one still written.
func growingDayOptions() (day time.Time, clk *clock.Clock, opts *tsdb.Options) {
	day = time.Date(2024, 5, 20, 0, 0, 0, 0, time.UTC)
	clk = clock.New(day.Add(10 * time.Hour))
	opts = &tsdb.Options{Now: clk.Now, RawPeriod: 24 * time.Hour, Tiers: []tsdb.Tier{}, DirectWrites: true,
		Layout: func(c *aztables.Client) (tablets.Store, error) { return chunked.New(c, nil) }}
	return day, clk, opts
}

// The partition holding the present is still written: a compaction leaves it until it holds
// a few chunks (chunked.CompactOptions), and compacts it once the present has left it, with
// nothing written since (the change log as it was: the compaction is not skipped).
func TestTSDBCompactWaitsForTheGrowingDay(t *testing.T) {
	ctx := context.Background()
	day, clk, opts := growingDayOptions()
	db, svc, _ := newDB(t, opts)
	var want []tablets.Point
	for i := range 3 { // fewer than chunks.GrowingChunks, whatever the key
		p := tablets.Point{Time: day.Add(9*time.Hour + time.Duration(i)*time.Minute), Value: float64(i)}
		require.NoError(t, db.Write(ctx, "s", p))
		want = append(want, p)
	}
	chunks := func() int {
		n := 0
		client := svc.NewClient(fmt.Sprintf("%sr%d", db.Name(), day.Unix()))
		for pager := client.NewListEntitiesPager(nil); pager.More(); {
			page, err := pager.NextPage(ctx)
			require.NoError(t, err)
			n += len(page.Entities)
		}
		return n
	}
	require.Equal(t, 3, chunks())
	require.NoError(t, db.Compact(ctx, day.Add(8*time.Hour), clk.Now()))
	require.Equal(t, 3, chunks(), "the day is still written: its chunks wait")

	clk.Set(day.Add(24*time.Hour + 30*time.Minute))
	require.NoError(t, db.Compact(ctx, day.Add(8*time.Hour), day.Add(10*time.Hour)))
	require.Equal(t, 1, chunks(), "the day has ended: compacted, though nothing was written since")
	requirePoints(t, db, "s", day, day.Add(24*time.Hour), want)
}

// A compaction of the day still written leaves each partition until it holds 4 to 7 chunks
// (chunks.GrowingChunks), so after a scan that found the fullest 3 short of that, the next
// compactions skip the scan until 3 changes were recorded since: a write of a chunk to every
// series each, they could not have made one worth compacting. Every point reads back, and no
// partition ever holds more chunks than it waits for.
func TestTSDBCompactSkipsScansWithinTheHeadroom(t *testing.T) {
	ctx := context.Background()
	day, clk, opts := growingDayOptions()
	db, svc, _ := newDB(t, opts)
	raw := &tableRequests{table: "/" + db.Name() + "r"}
	compacter := reopenWith(t, db.Name(), opts, func(next policy.Transporter) policy.Transporter { raw.next = next; return raw })
	names := make([]string, 12)
	for i := range names {
		names[i] = fmt.Sprintf("s%d", i)
	}
	want := map[string][]tablets.Point{}
	writes := 0
	write := func() { // a chunk to every series, one change
		var batch []tsdb.SeriesPoints
		for i, name := range names {
			p := tablets.Point{Time: day.Add(time.Duration(writes)*time.Minute + time.Duration(i)*time.Millisecond), Value: float64(writes)}
			batch = append(batch, tsdb.SeriesPoints{Series: name, Points: []tablets.Point{p}})
			want[name] = append(want[name], p)
		}
		require.NoError(t, db.WriteMany(ctx, batch))
		writes++
	}
	chunksOf := func() map[string]int {
		n := map[string]int{}
		client := svc.NewClient(fmt.Sprintf("%sr%d", db.Name(), day.Unix()))
		for pager := client.NewListEntitiesPager(nil); pager.More(); {
			page, err := pager.NextPage(ctx)
			require.NoError(t, err)
			for _, e := range page.Entities {
				var keys struct{ PartitionKey string }
				require.NoError(t, json.Unmarshal(e, &keys))
				n[keys.PartitionKey]++
			}
		}
		return n
	}
	compact := func() bool {
		require.NoError(t, compacter.Compact(ctx, day.Add(time.Hour), clk.Now()))
		return raw.take() > 0
	}

	write()
	require.True(t, compact(), "the first compaction scans")
	// A chunk each: the fullest is 3 chunks or more short of its threshold.
	write()
	require.False(t, compact(), "a change since: no partition can be worth compacting")
	write()
	require.False(t, compact(), "two")
	require.False(t, compact(), "nothing new")
	scans, merged := 0, false
	for range 12 {
		write()
		if compact() {
			scans++
		}
		held := chunksOf()
		require.Len(t, held, len(names))
		for pk, n := range held {
			require.Less(t, n, 7, "%s holds more chunks than any partition waits for", pk)
			merged = merged || n < writes
		}
	}
	require.True(t, merged, "partitions were compacted")
	require.Less(t, scans, 12, "some compactions skipped the scan")
	require.Positive(t, scans)
	for _, name := range names {
		requirePoints(t, db, name, day, day.Add(24*time.Hour), want[name])
	}

	// Another change counts whoever made it: a Delete of one series' minute, a change over
	// the span; the compacter scans once the changes reach the headroom, never later.
	before := scans
	for range 7 {
		require.NoError(t, db.Delete(ctx, names[0], day.Add(time.Minute), day.Add(2*time.Minute)))
		if compact() {
			scans++
		}
	}
	require.Greater(t, scans, before, "changes of any kind reach the headroom")
}
