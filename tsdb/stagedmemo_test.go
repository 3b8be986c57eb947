package tsdb

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/tsdb/internal/staging"
)

// A read of many series' staged points keeps a memo of them in the staging cache: the next
// read of the same series takes the entities staged since and the memo's points for the
// rest (a hit), and answers as a read of every entity does. What another process changes
// shows in the next read: a late point, a point written again (the later write kept), a
// Delete (it rewrites entities) and a Fold (it deletes them); so does a range that starts
// before the memo's, and reads that start later (a shorter panel) take from it too.
func TestStagedReadMemo(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	ctx := context.Background()
	now := time.Date(2025, 3, 10, 9, 0, 0, 0, time.UTC)
	start := now
	writer, svc, _ := stagingDB(t, "memo", &now)
	o := writer.opts
	o.StagingCache = NewStagingCache(64 << 20)
	reader, err := Open(ctx, svc, writer.Name(), &o)
	require.NoError(t, err)

	var names []string
	for s := range 150 { // a read of at least memoMinSeries
		names = append(names, fmt.Sprintf("s%03d", s))
	}
	write := func(at time.Time, value float64, series ...string) {
		t.Helper()
		var batch []SeriesPoints
		for _, s := range series {
			batch = append(batch, SeriesPoints{Series: s, Points: []tablets.Point{{Time: at, Value: value}}})
		}
		require.NoError(t, writer.WriteMany(ctx, batch))
	}
	scrapes := func(n int) {
		for range n {
			write(now, float64(now.Unix()%100_000), names...)
			now = now.Add(time.Minute)
		}
	}
	readOf := func(series []string, from, to time.Time) map[string][]tablets.Point {
		t.Helper()
		st, err := reader.readStagedSet(ctx, series, from, to, staging.Floats, false)
		require.NoError(t, err)
		pts, err := st.in(series, from, to)
		require.NoError(t, err)
		for name, p := range pts {
			if len(p) == 0 || name[0] != 's' { // none, or the reference's series
				delete(pts, name)
			}
		}
		return pts
	}
	refs := 0
	// check reads names over [from, to) and compares the answer with that of a read of
	// every entity (of names and one more series, a key no memo holds), and the memos'
	// counts with a hit or a miss.
	check := func(from, to time.Time, hit bool) map[string][]tablets.Point {
		t.Helper()
		before := o.StagingCache.Memos()
		got := readOf(names, from, to)
		after := o.StagingCache.Memos()
		if hit {
			require.Equal(t, before.Hits+1, after.Hits, "a hit")
		} else {
			require.Equal(t, before.Misses+1, after.Misses, "a miss")
		}
		refs++
		want := readOf(append(names[:len(names):len(names)], fmt.Sprintf("ref%d", refs)), from, to)
		require.Equal(t, want, got)
		return got
	}

	scrapes(10)
	// The table's first read fetches every entity without listing it: a memo kept then
	// knows no entity's U, and the next read with a later start keeps one anew. A read of
	// a series first, as a server's warm-up reads.
	readOf(names[:1], start, now)
	got := check(start, now, false)
	require.Len(t, got, len(names))
	require.Len(t, got["s000"], 10)

	scrapes(3)
	got = check(start.Add(2*time.Minute), now, true)
	require.Len(t, got["s000"], 11, "minutes 2 to 12")
	require.Positive(t, o.StagingCache.Memos().Bytes)

	// A late point between two, and a point of minute 6 written again: the later write.
	write(start.Add(5*time.Minute+30*time.Second), -1, "s000")
	write(start.Add(6*time.Minute), -2, "s001")
	got = check(start.Add(2*time.Minute), now, true)
	require.Len(t, got["s000"], 12)
	require.Equal(t, tablets.Point{Time: start.Add(5*time.Minute + 30*time.Second), Value: -1}, got["s000"][4])
	require.Equal(t, tablets.Point{Time: start.Add(6 * time.Minute), Value: -2}, got["s001"][4])

	// Points after the range's end are the memo's too: a later end finds them.
	scrapes(1)
	got = check(start.Add(2*time.Minute), now.Add(-time.Minute), true)
	require.Len(t, got["s002"], 11)
	got = check(start.Add(2*time.Minute), now, true)
	require.Len(t, got["s002"], 12)

	// The memo holds the points from the earliest start it served: a read from there again
	// (a longer panel of the same series) takes them from it too; one that starts earlier
	// reads every entity.
	got = check(start, now, true)
	require.Len(t, got["s002"], 14)
	got = check(start.Add(-time.Minute), now, false)
	require.Len(t, got["s002"], 14)
	check(start.Add(2*time.Minute), now, true)

	// Reads of the same series at once: one takes the memo, the others read as without
	// it; all answer the same.
	want := readOf(append(names[:len(names):len(names)], "refs-at-once"), start, now)
	var wg sync.WaitGroup
	answers := make([]map[string][]tablets.Point, 8)
	for i := range answers {
		wg.Go(func() {
			st, err := reader.readStagedSet(ctx, names, start, now, staging.Floats, false)
			if err != nil {
				t.Error(err)
				return
			}
			pts, err := st.in(names, start, now)
			if err != nil {
				t.Error(err)
				return
			}
			answers[i] = map[string][]tablets.Point{}
			for name, p := range pts {
				if len(p) > 0 {
					answers[i][name] = p
				}
			}
		})
	}
	wg.Wait()
	for _, a := range answers {
		require.Equal(t, want, a)
	}

	// A Delete rewrites the entities that staged the points.
	require.NoError(t, writer.Delete(ctx, "s002", start.Add(7*time.Minute), start.Add(9*time.Minute)))
	got = check(start, now, false)
	require.Len(t, got["s002"], 12)
	check(start, now, true)

	// A Fold moves every staged point into the raw tables: none left staged.
	now = now.Add(2 * time.Hour)
	_, err = writer.Fold(ctx)
	require.NoError(t, err)
	got = check(start, now, false)
	require.Empty(t, got)
}
