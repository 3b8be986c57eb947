package chunked

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/chunks"
	"github.com/seed71701133/tablets/internal/partkey"
	"github.com/seed71701133/tablets/internal/testkit/azurite"
)

func TestMain(m *testing.M) { azurite.Main(m) }

// The scan's filter selects every chunk of the partitions a range overlaps, and no other,
// within the PartitionKey bounds it is given.
func TestScanFilterSelectsWholePartitions(t *testing.T) {
	l := testLayout(t, time.Hour, time.Second)
	s := &Store{layout: l}
	names := []string{"cpu", "cpu|001430222400", "cpu~", "cp", "cpu2", "c'p"}
	base := uint64(1430222400)
	rng := rand.New(rand.NewPCG(3, 4))
	chunks := randomChunks(l, rng, base, names)
	for range 500 {
		lo := base + rng.Uint64N(4*3600)
		hi := lo + 1 + rng.Uint64N(4*3600)
		name := names[rng.IntN(len(names))]
		lower, upper := "", ""
		if rng.IntN(2) == 0 {
			lower, upper = partkey.Key(l.format, partkey.Escape(name), 0), partkey.End(partkey.Escape(name))
		}
		expr := s.scanFilter(lo, hi, lower, false, upper)
		require.LessOrEqual(t, expr.Comparisons(), 4)
		for _, c := range chunks {
			start := l.partitionOf(c.first)
			want := start+l.partUnits > lo && start < hi && (lower == "" || c.series == name)
			require.Equal(t, want, expr.Eval(c.props), "chunk %v of %s in [%d, %d), filter %s", c.props, c.series, lo, hi, expr)
		}
	}
}

// scanTable is a store on a fresh Azurite table whose query replies can be hooked: after
// the first reply to a query whose filter holds marker, hook runs once.
type scanTable struct {
	store   *Store
	checker *azurite.Checker
	hook    atomic.Pointer[func()]
}

func newScanTable(t *testing.T, marker string) *scanTable {
	st := &scanTable{}
	client, checker := azurite.NewTable(t, &azurite.TableOptions{Wrap: func(next policy.Transporter) policy.Transporter {
		return hookTransport{next: next, after: func(r *http.Request) {
			if r.Method == http.MethodGet && strings.Contains(r.URL.Query().Get("$filter"), marker) {
				if h := st.hook.Swap(nil); h != nil {
					(*h)()
				}
			}
		}}
	}})
	s, err := New(client, nil)
	require.NoError(t, err)
	st.store, st.checker = s, checker
	return st
}

type hookTransport struct {
	next  policy.Transporter
	after func(*http.Request)
}

func (h hookTransport) Do(r *http.Request) (*http.Response, error) {
	resp, err := h.next.Do(r)
	if err == nil {
		h.after(r)
	}
	return resp, err
}

// scanAll collects a scan, checking its order.
func scanAll(t *testing.T, s *Store, from, to time.Time, opts *ScanOptions) map[string][]tablets.Point {
	out := map[string][]tablets.Point{}
	var order []string
	for sp, err := range s.ScanPoints(context.Background(), from, to, opts) {
		require.NoError(t, err)
		require.NotContains(t, out, sp.Series, "a series yielded twice")
		require.NotEmpty(t, sp.Points)
		out[sp.Series] = sp.Points
		order = append(order, sp.Series)
	}
	require.True(t, slices.IsSortedFunc(order, CompareSeries), "order %q", order)
	return out
}

// queryAll reads each series with Query: what a scan must match.
func queryAll(t *testing.T, s *Store, names []string, from, to time.Time) map[string][]tablets.Point {
	out := map[string][]tablets.Point{}
	for _, name := range names {
		for p, err := range s.Query(context.Background(), name, from, to) {
			require.NoError(t, err)
			out[name] = append(out[name], p)
		}
	}
	return out
}

var scanDay = time.Date(2024, 3, 4, 0, 0, 0, 0, time.UTC)

// ScanPoints reads what Query reads, for every series at once, in a few requests; bad input
// is an error before any request.
func TestScanPoints(t *testing.T) {
	ctx := context.Background()
	st := newScanTable(t, "-")
	s := st.store
	names := []string{"cpu", "cpu_total", "cpu|x", "a~b", "mem", "zz", "x\U0001F600", "x\uE000"}
	for i, name := range names {
		for w := range 3 { // three writes a series: overlapping chunks, the later wins
			var pts []tablets.Point
			for k := range 50 {
				at := scanDay.Add(21*time.Hour + time.Duration(k*(i+1))*time.Minute)
				pts = append(pts, tablets.Point{Time: at, Value: float64(100*w + k)})
			}
			require.NoError(t, s.Write(ctx, name, pts...))
		}
	}
	from, to := scanDay.Add(21*time.Hour+30*time.Second), scanDay.Add(27*time.Hour) // two partitions, cut
	st.checker.Reset()
	got := scanAll(t, s, from, to, nil)
	require.Equal(t, int64(1), st.checker.Stats().Requests, "one query")
	want := queryAll(t, s, names, from, to)
	require.Equal(t, want, got)
	require.Len(t, got, len(names))

	some := []string{"cpu|x", "mem", "nothere"}
	got = scanAll(t, s, from, to, &ScanOptions{Series: some})
	require.Equal(t, map[string][]tablets.Point{"cpu|x": want["cpu|x"], "mem": want["mem"]}, got)
	require.Empty(t, scanAll(t, s, from, to, &ScanOptions{Series: []string{}}))
	require.Empty(t, scanAll(t, s, scanDay, scanDay.Add(time.Hour), nil))

	st.checker.Reset()
	for _, c := range []struct {
		opts *ScanOptions
		from time.Time
		want error
	}{
		{nil, tablets.MinTime.Add(-time.Hour), tablets.ErrInvalidTime},
		{&ScanOptions{Series: []string{"ok", "bad/name"}}, from, tablets.ErrInvalidSeries},
	} {
		for _, err := range s.ScanPoints(ctx, c.from, to, c.opts) {
			require.ErrorIs(t, err, c.want)
		}
	}
	for _, err := range s.ScanChunks(ctx, tablets.MinTime.Add(-time.Hour), to) {
		require.ErrorIs(t, err, tablets.ErrInvalidTime)
	}
	require.Zero(t, st.checker.Stats().Requests, "bad input costs no request")
}

// A compaction that commits between two pages of a scan neither hides a point nor shows
// it twice: a page cut inside a partition makes the scan read that partition again from its
// start, in a fresh query (cut after another partition's chunks), or by itself (a query
// whose chunks are all of that partition).
func TestScanPointsThroughCompaction(t *testing.T) {
	for _, c := range []struct {
		name   string
		chunks map[string]int // chunks a series, each of its own write
		cut    string         // the series whose partition the first page cuts
	}{
		{"fresh query from the cut partition", map[string]int{"a": 1, "b": 4, "c": 2}, "b"},
		{"the cut partition alone", map[string]int{"a": 5, "b": 1}, "a"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			st := newScanTable(t, "L ge")
			s := st.store
			s.scanTop = 2
			names := slices.Sorted(maps.Keys(c.chunks))
			for _, name := range names {
				for w := range c.chunks[name] {
					p := tablets.Point{Time: scanDay.Add(time.Duration(w) * time.Minute), Value: float64(w)}
					require.NoError(t, s.Write(ctx, name, p))
				}
			}
			from, to := scanDay, scanDay.Add(24*time.Hour)
			want := queryAll(t, s, names, from, to)
			compacted := false
			hook := func() {
				require.NoError(t, s.Compact(ctx, c.cut, from, to))
				compacted = true
			}
			st.hook.Store(&hook)
			got := scanAll(t, s, from, to, nil)
			require.True(t, compacted)
			require.Equal(t, want, got)
			n := 0
			for k, err := range s.ScanChunks(ctx, from, to) {
				require.NoError(t, err)
				if k.Series == c.cut {
					n++
				}
			}
			require.Equal(t, 1, n, "the cut partition was compacted during the scan")
		})
	}
}

// Entities that are not chunks of the layout, or whose PartitionKey names no series, are
// errors of both scans.
func TestScanRejectsForeignEntities(t *testing.T) {
	ctx := context.Background()
	for _, bad := range []func(s *Store) string{
		func(s *Store) string { // a PartitionKey whose series part is not escaped
			return fmt.Sprintf(`{"PartitionKey":"a~x|%s","RowKey":"%s","L":"%s","C":"AA==","C@odata.type":"Edm.Binary"}`,
				s.layout.key(s.layout.partitionOf(uint64(scanDay.UnixMilli()))), s.layout.rowKey(uint64(scanDay.UnixMilli()), 1, nil),
				s.layout.key(uint64(scanDay.UnixMilli())))
		},
		func(s *Store) string { // not a chunk key
			return fmt.Sprintf(`{"PartitionKey":"x|%s","RowKey":"0","L":"%s"}`,
				s.layout.key(s.layout.partitionOf(uint64(scanDay.UnixMilli()))), s.layout.key(uint64(scanDay.UnixMilli())))
		},
	} {
		st := newScanTable(t, "-")
		s := st.store
		_, err := s.client.UpsertEntity(ctx, []byte(bad(s)), nil)
		require.NoError(t, err)
		var scanErr, keysErr error
		for _, err := range s.ScanPoints(ctx, scanDay, scanDay.Add(time.Hour), nil) {
			scanErr = err
		}
		for _, err := range s.ScanChunks(ctx, scanDay, scanDay.Add(time.Hour)) {
			keysErr = err
		}
		require.Error(t, scanErr)
		require.Error(t, keysErr)
		_, err = s.CompactAll(ctx, scanDay, scanDay.Add(time.Hour), nil)
		require.Error(t, err)
	}
}

// CompactAll compacts only the partitions that hold several chunks, found by one key scan:
// a table of a chunk a partition costs the scan only.
func TestCompactAll(t *testing.T) {
	ctx := context.Background()
	st := newScanTable(t, "-")
	s := st.store
	names := []string{"one", "two|x", "three", "four"}
	for i, name := range names {
		for w := range i + 1 { // i+1 writes: "one" holds a chunk
			p := tablets.Point{Time: scanDay.Add(time.Duration(w)*time.Hour + time.Duration(i)*time.Second), Value: float64(w)}
			require.NoError(t, s.Write(ctx, name, p))
		}
	}
	from, to := scanDay.Add(time.Hour), scanDay.Add(2*time.Hour) // whole partitions are compacted
	want := queryAll(t, s, names, scanDay, scanDay.Add(24*time.Hour))
	st.checker.Reset()
	did, err := s.CompactAll(ctx, from, to, nil)
	require.NoError(t, err)
	// A partition that has ended is worth compacting at its second chunk: one more of any.
	require.Equal(t, Compacted{Partitions: 3, Headroom: 1}, did)
	// The scan, and for each of 3 partitions: a read and a transaction (one run of all its
	// chunks, merged: nothing is left to read again for).
	require.Equal(t, int64(1+3*2), st.checker.Stats().Requests)
	perSeries := map[string]int{}
	for k, err := range s.ScanChunks(ctx, scanDay, scanDay.Add(24*time.Hour)) {
		require.NoError(t, err)
		perSeries[k.Series]++
		require.Equal(t, scanDay, k.Partition)
		require.False(t, k.Last.Before(k.First))
	}
	require.Equal(t, map[string]int{"one": 1, "two|x": 1, "three": 1, "four": 1}, perSeries)
	require.Equal(t, want, queryAll(t, s, names, scanDay, scanDay.Add(24*time.Hour)))

	st.checker.Reset()
	did, err = s.CompactAll(ctx, from, to, nil)
	require.NoError(t, err)
	require.Equal(t, Compacted{Partitions: 0, Headroom: 1}, did)
	require.Equal(t, int64(1), st.checker.Stats().Requests, "nothing to merge: the scan only")
	_, err = s.CompactAll(ctx, to, to, nil)
	require.NoError(t, err, "an empty range")
	_, err = s.CompactAll(ctx, tablets.MinTime.Add(-time.Hour), to, nil)
	require.ErrorIs(t, err, tablets.ErrInvalidTime)
}

// A partition still being written (it ends after CompactOptions.Growing) is compacted only
// once it holds chunks.GrowingChunks of them; once the present has left it, at two.
func TestCompactAllWaitsForGrowingPartitions(t *testing.T) {
	ctx := context.Background()
	st := newScanTable(t, "-")
	s := st.store
	var names []string
	writes := map[string]int{}
	for i := range 12 {
		name := fmt.Sprintf("g%d", i)
		names = append(names, name)
		writes[name] = 2 + i%7 // 2 to 8 chunks
		for w := range writes[name] {
			require.NoError(t, s.Write(ctx, name, tablets.Point{Time: scanDay.Add(time.Duration(w) * time.Minute), Value: float64(w)}))
		}
	}
	want := queryAll(t, s, names, scanDay, scanDay.Add(24*time.Hour))
	count := func() map[string]int {
		n := map[string]int{}
		for k, err := range s.ScanChunks(ctx, scanDay, scanDay.Add(24*time.Hour)) {
			require.NoError(t, err)
			n[k.Series]++
		}
		return n
	}
	growing := &CompactOptions{Growing: scanDay.Add(12 * time.Hour)}
	did, err := s.CompactAll(ctx, scanDay, scanDay.Add(time.Hour), growing)
	require.NoError(t, err)
	expect := map[string]int{}
	waiting, headroom := 0, 4 // a series new to the day waits for 4 chunks at least
	for _, name := range names {
		day, err := s.layout.format.Units(scanDay)
		require.NoError(t, err)
		pk := s.layout.partitionKey(partkey.Escape(name), s.layout.partitionOf(day))
		if writes[name] >= chunks.GrowingChunks(pk) {
			expect[name] = 1
		} else {
			expect[name] = writes[name]
			waiting++
		}
		headroom = min(headroom, chunks.GrowingChunks(pk)-expect[name])
	}
	require.Equal(t, expect, count())
	require.Equal(t, Compacted{Partitions: len(names) - waiting, Headroom: headroom}, did)
	require.Positive(t, waiting, "some partitions wait")
	require.Less(t, waiting, len(names), "some are compacted")
	require.Equal(t, want, queryAll(t, s, names, scanDay, scanDay.Add(24*time.Hour)))

	// The present has left the day: every partition of two chunks or more is compacted.
	ended := &CompactOptions{Growing: scanDay.Add(24 * time.Hour)}
	did, err = s.CompactAll(ctx, scanDay, scanDay.Add(time.Hour), ended)
	require.NoError(t, err)
	require.Equal(t, 1, did.Headroom)
	for _, name := range names {
		expect[name] = 1
	}
	require.Equal(t, expect, count())
	require.Equal(t, want, queryAll(t, s, names, scanDay, scanDay.Add(24*time.Hour)))
}

// CompactAll's headroom is exact: after that many writes of a chunk to every partition, and
// not before, a CompactAll finds one worth compacting.
func TestCompactAllHeadroom(t *testing.T) {
	ctx := context.Background()
	st := newScanTable(t, "-")
	s := st.store
	growing := &CompactOptions{Growing: scanDay.Add(12 * time.Hour)}
	day, err := s.layout.format.Units(scanDay)
	require.NoError(t, err)
	var names []string
	written := map[string]int{}
	write := func(name string) {
		require.NoError(t, s.Write(ctx, name, tablets.Point{Time: scanDay.Add(time.Duration(written[name]) * time.Minute), Value: 1}))
		written[name]++
	}
	headroom := 4 // a series new to the day
	for i := range 20 {
		name := fmt.Sprintf("h%d", i)
		names = append(names, name)
		for range 1 + i%2 {
			write(name)
		}
		pk := s.layout.partitionKey(partkey.Escape(name), s.layout.partitionOf(day))
		headroom = min(headroom, chunks.GrowingChunks(pk)-written[name])
	}
	did, err := s.CompactAll(ctx, scanDay, scanDay.Add(time.Hour), growing)
	require.NoError(t, err)
	require.Equal(t, Compacted{Partitions: 0, Headroom: headroom}, did)
	require.GreaterOrEqual(t, headroom, 2)

	for range headroom - 1 {
		for _, name := range names {
			write(name)
		}
	}
	did, err = s.CompactAll(ctx, scanDay, scanDay.Add(time.Hour), growing)
	require.NoError(t, err)
	require.Equal(t, 0, did.Partitions, "fewer writes than the headroom: nothing to compact")
	require.Equal(t, 1, did.Headroom)

	for _, name := range names {
		write(name)
	}
	did, err = s.CompactAll(ctx, scanDay, scanDay.Add(time.Hour), growing)
	require.NoError(t, err)
	require.Positive(t, did.Partitions, "as many writes as the headroom: some are compacted")
	// Counted as the compaction left them: a chunk where it merged.
	held := map[string]int{}
	for k, err := range s.ScanChunks(ctx, scanDay, scanDay.Add(24*time.Hour)) {
		require.NoError(t, err)
		held[k.Series]++
	}
	headroom = 4
	for _, name := range names {
		pk := s.layout.partitionKey(partkey.Escape(name), s.layout.partitionOf(day))
		headroom = min(headroom, max(chunks.GrowingChunks(pk)-held[name], 1))
	}
	require.Equal(t, headroom, did.Headroom)
	require.Contains(t, held, names[0])
}
