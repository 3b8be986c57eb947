package staging

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/tsdb/internal/cache"
)

// mergeLastWrites keeps, of each millisecond, the last write of kept and writes together,
// as LastWrites of them all does; writes all after kept are appended in place.
func TestMergeLastWrites(t *testing.T) {
	p := func(ms int64, v float64, stamp uint64, record int) Point {
		return Point{MS: ms, Value: v, Stamp: stamp, Record: record}
	}
	kept := []Point{p(10, 1, 5, 0), p(20, 2, 5, 1), p(30, 3, 6, 0)}
	for _, c := range []struct {
		name   string
		writes []Point
	}{
		{"none", nil},
		{"after", []Point{p(50, 5, 9, 0), p(40, 4, 9, 1), p(40, 4.5, 9, 2)}},
		{"between and before", []Point{p(15, 1.5, 9, 0), p(5, 0.5, 1, 0)}},
		{"a later write of a millisecond", []Point{p(20, -2, 7, 0)}},
		{"an earlier write of a millisecond", []Point{p(30, -3, 6, -1), p(10, -1, 4, 9)}},
		{"one stamp, a later record", []Point{p(20, -2, 5, 2)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			want := LastWrites[tablets.Point](append(append([]Point{}, kept...), c.writes...))
			base := append(make([]Point, 0, 16), kept...)
			merged := mergeLastWrites(base, append([]Point{}, c.writes...))
			var got []tablets.Point
			for i, m := range merged {
				require.True(t, i == 0 || merged[i-1].MS < m.MS, "sorted, one a millisecond")
				got = append(got, m.sample())
			}
			require.Equal(t, want, got)
			require.Equal(t, kept, base, "kept unchanged")
		})
	}
}

// The memos hold at most their bound: past it the memo used least recently goes, and a
// memo dropped while a read keeps it is not counted.
func TestSeriesMemosBound(t *testing.T) {
	ms := newSeriesMemos(1000)
	a, b, c := ms.acquire([]string{"a"}), ms.acquire([]string{"b"}), ms.acquire([]string{"c"})
	require.NotNil(t, a)
	require.Nil(t, ms.acquire([]string{"a"}), "held by a read: another reads without it")
	ms.resize(a, 400)
	ms.resize(b, 400)
	a.mu.Unlock()
	require.NotNil(t, ms.acquire([]string{"a"}), "a used again, after b")
	ms.resize(c, 400) // over the bound: b goes, the least recently used
	s := ms.stats()
	require.Equal(t, 2, s.Entries)
	require.Equal(t, int64(800), s.Bytes)
	ms.resize(b, 900) // dropped: its read's bytes are not counted
	require.Equal(t, int64(800), ms.stats().Bytes)
	ms.resize(c, 900) // over the bound: c goes, used before a
	require.Equal(t, 1, ms.stats().Entries)
	require.Equal(t, int64(400), ms.stats().Bytes)
}

// The memos take what the entities cached leave of the Cache's bound (room), at least their
// own eighth: as the entities grow, the memos used least recently go (trim), down to it.
func TestSeriesMemosRoom(t *testing.T) {
	ms := newSeriesMemos(1000)
	room := int64(3000)
	ms.room = func() int64 { return room }
	var held []*seriesMemo
	for _, k := range []string{"a", "b", "c"} {
		m := ms.acquire([]string{k})
		ms.resize(m, 900)
		held = append(held, m)
	}
	require.Equal(t, 3, ms.stats().Entries, "2,700 bytes: within the room left")
	room = 1500 // the entities cached grew
	ms.trim()
	require.Equal(t, int64(900), ms.stats().Bytes, "a and b went, the least recently used")
	require.Nil(t, ms.acquire([]string{"c"}), "c stays (held by its read)")
	room = 0 // the entities took their whole share: the memos keep their eighth
	ms.trim()
	require.Equal(t, int64(900), ms.stats().Bytes)
	ms.resize(held[2], 1100)
	require.Equal(t, 0, ms.stats().Entries, "past their own bound")

	// A Cache's memos have the room its entities leave: none cached, all but the frozen
	// points' share.
	c := NewCache(64 << 20)
	require.Equal(t, int64(64<<20-64<<20/frozenShare), c.memos.limit())
}

// Distinct series lists make distinct keys, whatever their keys hold.
func TestMemoKey(t *testing.T) {
	require.NotEqual(t, memoKey([]string{"a", "bc"}), memoKey([]string{"ab", "c"}))
	require.NotEqual(t, memoKey([]string{"1:a"}), memoKey([]string{"a", ""}))
	require.Equal(t, memoKey([]string{"x", "y"}), memoKey([]string{"x", "y"}))
}

// A memo unused for cache.Idle goes at a read after, whatever the bound.
func TestSeriesMemosIdle(t *testing.T) {
	now := time.Date(2026, 12, 7, 18, 0, 0, 0, time.UTC)
	ms := newSeriesMemos(1 << 20)
	ms.now = func() time.Time { return now }
	a := ms.acquire([]string{"a"})
	ms.resize(a, 100)
	a.mu.Unlock()
	now = now.Add(cache.Idle / 2)
	b := ms.acquire([]string{"b"})
	ms.resize(b, 200)
	b.mu.Unlock()
	require.Equal(t, 2, ms.stats().Entries)
	now = now.Add(cache.Idle / 2) // a unused for Idle, b for half of it
	c := ms.acquire([]string{"c"})
	c.mu.Unlock()
	s := ms.stats()
	require.Equal(t, 2, s.Entries, "a gone")
	require.Equal(t, int64(200), s.Bytes)
	now = now.Add(cache.Idle / 2) // b unused for Idle, but swept half an Idle ago
	ms.acquire([]string{"c"}).mu.Unlock()
	require.Equal(t, 2, ms.stats().Entries, "b stays till the next sweep")
	now = now.Add(cache.Idle / 2)
	ms.acquire([]string{"c"}).mu.Unlock()
	require.Equal(t, 1, ms.stats().Entries, "b gone")
}

// A memo keeps the points from the earliest start of the reads of the last window or two
// (memoWindow): a short panel's refreshes beside a long one's keep the long one's points;
// once the long one is no longer read, the memo holds the short one's only.
func TestSeriesMemoWindow(t *testing.T) {
	now := time.Date(2026, 12, 7, 18, 0, 0, 0, time.UTC)
	ms := newSeriesMemos(1 << 20)
	ms.now = func() time.Time { return now }
	var all []Point
	for ms := int64(100); ms < 600; ms += 10 {
		all = append(all, Point{MS: ms, Value: float64(ms), Stamp: 1})
	}
	noneDropped := func(int64, int64) bool { return false }
	read := func(from int64, hit bool) []Point {
		t.Helper()
		m := ms.acquire([]string{"a"})
		require.NotNil(t, m)
		defer m.mu.Unlock()
		takeFrom := m.start(from)
		m.pick(from, noneDropped, nil)
		require.Equal(t, hit, m.pendingValid, "from %d", from)
		out := m.keep(from, 1000, 1, func(int) []Point {
			if hit {
				return nil // the memo holds them all
			}
			return append([]Point(nil), all[sortedFrom(all, takeFrom):]...)
		})
		return out[0]
	}
	require.Len(t, read(100, false), 50)
	now = now.Add(10 * time.Second)
	require.Len(t, read(500, true), 10)
	require.Equal(t, int64(100), ms.byKey[memoKey([]string{"a"})].from, "the long read's points kept")
	now = now.Add(2*time.Minute + 10*time.Second)
	require.Len(t, read(510, true), 9)
	require.Equal(t, int64(100), ms.byKey[memoKey([]string{"a"})].from, "the window before had the long read")
	now = now.Add(2*time.Minute + 10*time.Second)
	require.Len(t, read(520, true), 8)
	m := ms.byKey[memoKey([]string{"a"})]
	require.Equal(t, int64(510), m.from, "the long read two windows ago: from the short ones' start")
	require.Len(t, m.points[0], 9)
	require.Len(t, read(100, false), 50, "a longer read again: every entity")
	require.Equal(t, int64(100), m.from)
}
