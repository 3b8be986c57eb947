package tsdb

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/chunkenc"
	"github.com/seed71701133/tablets/rounding"
	"github.com/seed71701133/tablets/tsdb/internal/raw"
)

// staleNaN is Prometheus' staleness marker.
var staleNaN = math.Float64frombits(0x7ff0000000000002)

var querierBase = time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)

func entriesOf(hist ...bool) []entry {
	out := make([]entry, len(hist))
	for i, h := range hist {
		name := string(rune('a' + i))
		out[i] = entry{series: name, labels: Labels{{Name: "i", Value: name}}, hist: h}
	}
	return out
}

func seriesOfUnits(units []unit) [][]string {
	var out [][]string
	for _, u := range units {
		var names []string
		for _, e := range u.entries {
			names = append(names, e.series)
		}
		if u.tier {
			names = append(names, "tier")
		}
		out = append(out, names)
	}
	return out
}

// A raw batch holds BatchSize series, a histogram series counting as histogramWeight.
func TestRawUnits(t *testing.T) {
	require.Empty(t, rawUnits(nil, 4))
	require.Equal(t, [][]string{{"a", "b", "c", "d"}, {"e"}}, seriesOfUnits(rawUnits(entriesOf(false, false, false, false, false), 4)))
	// With BatchSize 4, a histogram series is a batch of its own.
	require.Equal(t, [][]string{{"a"}, {"b"}, {"c", "d"}}, seriesOfUnits(rawUnits(entriesOf(false, true, false, false), 4)))
	// At 2*histogramWeight, two histogram series, or a histogram series and floats.
	size := 2 * histogramWeight
	e := entriesOf(true, true, true, false, false)
	require.Equal(t, [][]string{{"a", "b"}, {"c", "d", "e"}}, seriesOfUnits(rawUnits(e, size)))
}

// A tier Select reads a tier for float series and raw for histogram series, keeping the
// labels' order, and counts the latter.
func TestTierUnits(t *testing.T) {
	q := &Queryable{opts: QueryOptions{BatchSize: 2 * histogramWeight}, cost: newCostModel(Options{}, rawLayout{bytesPerSample: chunkedBytesPerSample}, 2*histogramWeight)}
	from := time.Date(2024, 1, 1, 0, 0, 30, 0, time.UTC)
	to := from.Add(10 * time.Minute)
	units := q.tierUnits(entriesOf(false, true, true, true, false), from, to, time.Minute, pickMax)
	require.Equal(t, [][]string{{"a", "tier"}, {"b", "c"}, {"d"}, {"e", "tier"}}, seriesOfUnits(units))
	require.Equal(t, rounding.Floor(from, time.Minute), units[0].from)
	require.Equal(t, rounding.Floor(to, time.Minute), units[0].to)
	require.Equal(t, pickMax, units[3].pick)
	require.Equal(t, time.Minute, units[3].step)
	require.Equal(t, uint64(3), q.Stats().HistogramRawSeries)

	// Less than a whole window: the float series have no sample, the others read raw.
	units = q.tierUnits(entriesOf(false, true), from, from.Add(20*time.Second), time.Minute, pickLast)
	require.Equal(t, [][]string{{"b"}}, seriesOfUnits(units))

	// Consecutive float series read their windows together, BatchSize at most a read.
	q.opts.BatchSize = 4
	units = q.tierUnits(entriesOf(false, false, false, false, false, true, false), from, to, time.Minute, pickLast)
	require.Equal(t, [][]string{{"a", "b", "c", "d", "tier"}, {"e", "tier"}, {"f"}, {"g", "tier"}}, seriesOfUnits(units))
	require.False(t, slices.ContainsFunc(units, func(u unit) bool { return u.keyRange }))

	// Two batches of float series or more: in key order, each read by its range of keys;
	// the histogram series raw, after them.
	q.opts.BatchSize = 2
	entries := []entry{{series: "e", labels: Labels{{Name: "i", Value: "1"}}}, {series: "h", labels: Labels{{Name: "i", Value: "2"}}, hist: true},
		{series: "c", labels: Labels{{Name: "i", Value: "3"}}}, {series: "d", labels: Labels{{Name: "i", Value: "4"}}},
		{series: "b", labels: Labels{{Name: "i", Value: "5"}}}}
	units = q.tierUnits(entries, from, to, time.Minute, pickLast)
	require.Equal(t, [][]string{{"b", "c", "tier"}, {"d", "e", "tier"}, {"h"}}, seriesOfUnits(units))
	require.Equal(t, []bool{true, true, false}, []bool{units[0].keyRange, units[1].keyRange, units[2].keyRange})
	// Less than a window: no tier unit.
	units = q.tierUnits(entries, from, from.Add(20*time.Second), time.Minute, pickLast)
	require.Equal(t, [][]string{{"h"}}, seriesOfUnits(units))
}

func TestSelectTier(t *testing.T) {
	tiers := []Tier{{Step: time.Minute}, {Step: time.Hour}}
	o := QueryOptions{}
	h := func(fn string, step, rng time.Duration) *SelectHints {
		return &SelectHints{Func: fn, Step: step, Range: rng}
	}
	for _, c := range []struct {
		hints *SelectHints
		step  time.Duration // 0: raw
		pick  pick
	}{
		{nil, 0, 0},
		{h("rate", 0, 5*time.Minute), 0, 0}, // instant query
		{h("rate", time.Hour, 5*time.Minute), time.Minute, pickLast},
		{h("rate", 4*time.Minute, 5*time.Minute), 0, 0},              // step under 5 windows
		{h("rate", time.Hour, 4*time.Minute), 0, 0},                  // range under 5 windows
		{h("rate", 24*time.Hour, 24*time.Hour), time.Hour, pickLast}, // the coarsest that fits
		{h("increase", 5*time.Minute, 5*time.Minute), time.Minute, pickLast},
		{h("min_over_time", time.Hour, time.Hour), time.Minute, pickMin},
		{h("max_over_time", 5*time.Hour, 5*time.Hour), time.Hour, pickMax},
		{h("last_over_time", time.Hour, 10*time.Minute), time.Minute, pickLast},
		{h("count_over_time", time.Hour, time.Hour), 0, 0},
		{h("sum_over_time", time.Hour, time.Hour), 0, 0},
		{h("avg_over_time", time.Hour, time.Hour), 0, 0},
		{h("quantile_over_time", time.Hour, time.Hour), 0, 0},
		{h("absent_over_time", time.Hour, time.Hour), 0, 0},
		{h("", time.Hour, 0), time.Minute, pickLast},       // the hour tier is over the lookback
		{h("sum", 24*time.Hour, 0), time.Minute, pickLast}, // an aggregation of an instant selector
		{h("timestamp", time.Hour, 0), 0, 0},
		{h("", 4*time.Minute, 0), 0, 0},
	} {
		tier, p, ok := selectTier(tiers, c.hints, o, false, AnyResolution)
		require.Equal(t, c.step != 0, ok, "%+v", c.hints)
		if ok {
			require.Equal(t, c.step, tier.Step, "%+v", c.hints)
			require.Equal(t, c.pick, p, "%+v", c.hints)
		}
	}
	_, _, ok := selectTier(nil, h("rate", time.Hour, time.Hour), o, false, AnyResolution)
	require.False(t, ok, "no tier")
	// A longer lookback delta lets an instant selector read the hour tier.
	long := h("", 24*time.Hour, 0)
	long.LookbackDelta = 2 * time.Hour
	tier, _, ok := selectTier(tiers, long, o, false, AnyResolution)
	require.True(t, ok)
	require.Equal(t, time.Hour, tier.Step)
	o.MinTierStep = time.Hour
	_, _, ok = selectTier(tiers, h("rate", time.Hour, time.Hour), o, false, AnyResolution)
	require.False(t, ok, "the minute tier is under MinTierStep")
	tier, _, ok = selectTier(tiers, h("rate", 5*time.Hour, 5*time.Hour), o, false, AnyResolution)
	require.True(t, ok)
	require.Equal(t, time.Hour, tier.Step)
	// A resolution bounds the Step: the minute tier at most, or none (raw samples).
	o.MinTierStep = 0
	tier, _, ok = selectTier(tiers, h("rate", 5*time.Hour, 5*time.Hour), o, false, 5*time.Minute)
	require.True(t, ok)
	require.Equal(t, time.Minute, tier.Step)
	_, _, ok = selectTier(tiers, h("rate", 5*time.Hour, 5*time.Hour), o, false, RawResolution)
	require.False(t, ok, "raw samples only")
}

// floatsOf reads a series' samples as (time, float bits) pairs.
func floatsOf(t *testing.T, s *Series) [][2]int64 {
	t.Helper()
	var out [][2]int64
	it := s.Iterator()
	for it.Next() {
		f := it.At()
		require.False(t, f.IsHistogram())
		out = append(out, [2]int64{f.T, int64(math.Float64bits(f.F))})
	}
	require.NoError(t, it.Err())
	return out
}

func TestSeriesFloats(t *testing.T) {
	s := &Series{}
	s.appendFloat(1, 1)
	s.appendFloat(2, staleNaN)
	s.appendFloat(2, 5) // same millisecond: the later point wins
	s.appendFloat(3, staleNaN)
	s.appendFloat(3, math.Inf(-1))
	s.appendFloat(3, staleNaN)
	s.appendFloat(1, 9) // out of order: dropped
	s.finish()
	n, h := s.Len()
	require.Equal(t, 3, n)
	require.Zero(t, h)
	require.Equal(t, [][2]int64{
		{1, int64(math.Float64bits(1))},
		{2, int64(math.Float64bits(5))},
		{3, int64(math.Float64bits(staleNaN))},
	}, floatsOf(t, s))
}

// A Series told how many floats come (reserve) takes them without growing its slices while
// its Select's plain budget has them, and holds the same samples; without plain budget it
// reserves a chunk's worth at most.
func TestSeriesReserve(t *testing.T) {
	const n = 1000
	budget := newPlainBudget(1 << 40)
	var s *Series
	fill := func(reserve bool) func() {
		return func() {
			s = &Series{plain: budget}
			if reserve {
				s.reserve(n)
			}
			for i := range n {
				s.appendFloat(int64(i), float64(i))
			}
		}
	}
	grown := testing.AllocsPerRun(3, fill(false))
	// The Series and its two slices once (3; the race detector adds some), where growing
	// them a doubling at a time takes about ten more a slice.
	if reserved := testing.AllocsPerRun(3, fill(true)); grown-reserved < 16 {
		t.Errorf("%v allocations appending %d reserved floats, %v unreserved", reserved, n, grown)
	}
	s.finish()
	got := floatsOf(t, s)
	require.Len(t, got, n)
	for i, g := range got {
		require.Equal(t, [2]int64{int64(i), int64(math.Float64bits(float64(i)))}, g)
	}
	encoded := &Series{}
	encoded.reserve(n)
	require.Equal(t, chunkPoints, cap(encoded.times))
}

// Floats are held in chunks of chunkPoints, decoded one at a time as they are iterated,
// every bit kept.
func TestSeriesManyChunks(t *testing.T) {
	s := &Series{}
	n := 2*chunkPoints + 10
	for i := range n {
		s.appendFloat(int64(i)*10, float64(i)*0.5+math.Pi)
	}
	s.finish()
	require.Len(t, s.chunks, 3)
	got := floatsOf(t, s)
	require.Len(t, got, n)
	for i, g := range got {
		require.Equal(t, [2]int64{int64(i) * 10, int64(math.Float64bits(float64(i)*0.5 + math.Pi))}, g)
	}
	empty := &Series{}
	empty.finish()
	require.Empty(t, floatsOf(t, empty))
}

// Floats stay plain while their Select's budget lasts: the series that find it hold no
// chunk, the one that runs it out holds what it had plain in a chunk and the rest in chunks
// as usual, the ones after it only chunks; every bit kept in every case, a millisecond's
// later point winning, the budget shared by concurrent series.
func TestSeriesPlainBudget(t *testing.T) {
	n := 2*chunkPoints + 10
	fill := func(s *Series, k int) {
		for i := range n {
			s.appendFloat(int64(i)*10, float64(i*k)*0.5+math.Pi)
			if i == 7 {
				s.appendFloat(int64(i)*10, -1) // the later of a millisecond
			}
		}
		s.finish()
	}
	check := func(s *Series, k int) {
		t.Helper()
		got := floatsOf(t, s)
		require.Len(t, got, n)
		for i, g := range got {
			v := float64(i*k)*0.5 + math.Pi
			if i == 7 {
				v = -1
			}
			require.Equal(t, [2]int64{int64(i) * 10, int64(math.Float64bits(v))}, g, "sample %d", i)
		}
		m, _ := s.Len()
		require.Equal(t, n, m)
	}
	// A budget of two series and a half, the series filled one after the other.
	budget := newPlainBudget(int64(2*n + n/2))
	var chunks []int
	for k := range 4 {
		s := &Series{plain: budget}
		fill(s, k+1)
		check(s, k+1)
		chunks = append(chunks, len(s.chunks))
	}
	require.Equal(t, []int{0, 0, 2, 3}, chunks, "chunks a series")
	require.Equal(t, int64(2*n+n/2-2*n-chunkPoints), budget.left.Load(), "the budget left")
	// Filled at once, as a Select's units are read: never more than the budget plain.
	budget = newPlainBudget(int64(2*n + n/2))
	series := make([]*Series, 8)
	var wg sync.WaitGroup
	for k := range series {
		series[k] = &Series{plain: budget}
		wg.Go(func() { fill(series[k], k+1) })
	}
	wg.Wait()
	held := 0
	for k, s := range series {
		check(s, k+1)
		held += len(s.times)
	}
	require.LessOrEqual(t, held, 2*n+n/2, "floats held plain")
	require.GreaterOrEqual(t, budget.left.Load(), int64(0))

	// A series with histograms merges its plain floats with them.
	h := HistogramPoint{H: &Histogram{Count: 1, Sum: 1, ZeroThreshold: 0.001, ZeroCount: 1}}
	mixed := &Series{plain: newPlainBudget(1 << 20)}
	mixed.appendFloat(1, 1)
	mixed.appendFloat(3, 3)
	require.NoError(t, mixed.appendHistogram(2, h))
	mixed.finish()
	var kinds []string
	for it := mixed.Iterator(); it.Next(); {
		kinds = append(kinds, fmt.Sprintf("%d:%v", it.At().T, it.At().IsHistogram()))
	}
	require.Equal(t, []string{"1:false", "2:true", "3:false"}, kinds)
}

// A series with histograms merges them with its floats by time; where both share a
// millisecond the histogram is kept; two histograms of a millisecond give the later.
func TestSeriesMixed(t *testing.T) {
	h := func(n uint64) HistogramPoint {
		return HistogramPoint{H: &Histogram{Count: n, Sum: float64(n), ZeroThreshold: 0.001, ZeroCount: n}}
	}
	s := &Series{}
	s.appendFloat(1, 1)
	s.appendFloat(3, 3)
	s.appendFloat(5, 5)
	require.NoError(t, s.appendHistogram(2, h(2)))
	require.NoError(t, s.appendHistogram(3, h(3)))
	require.NoError(t, s.appendHistogram(3, h(4))) // the later of a millisecond
	require.NoError(t, s.appendHistogram(1, h(9))) // out of order: dropped
	require.Error(t, s.appendHistogram(6, HistogramPoint{}))
	s.finish()
	n, nh := s.Len()
	require.Equal(t, 4, n)
	require.Equal(t, 2, nh)
	var kinds []string
	it := s.Iterator()
	for it.Next() {
		x := it.At()
		switch {
		case x.IsHistogram():
			kinds = append(kinds, fmt.Sprintf("%d:h%d", x.T, x.H.Count))
		default:
			kinds = append(kinds, fmt.Sprintf("%d:%v", x.T, x.F))
		}
	}
	require.Equal(t, []string{"1:1", "2:h2", "3:h4", "5:5"}, kinds)
}

// readAhead yields units in order, whatever order they finish in, and stops at the first
// error, at the consumer's break, or when ctx is done.
func TestReadAhead(t *testing.T) {
	series := func(i int) []*Series {
		s := &Series{Series: string(rune('a' + i))}
		s.appendFloat(int64(i), 1)
		s.finish()
		return []*Series{s}
	}
	fetch := func(ctx context.Context, i int) ([]*Series, error) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		time.Sleep(time.Duration(5-i) * time.Millisecond) // the later finish first
		return series(i), nil
	}
	collect := func(seq func(func([]*Series, error) bool), stopAfter int) ([]string, error) {
		var out []string
		for ss, err := range seq {
			if err != nil {
				return out, err
			}
			for _, s := range ss {
				out = append(out, s.Series)
			}
			if len(out) == stopAfter {
				break
			}
		}
		return out, nil
	}
	ctx := context.Background()
	got, err := collect(readAhead(ctx, 5, 2, fetch), 0)
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b", "c", "d", "e"}, got)

	got, err = collect(readAhead(ctx, 5, 2, fetch), 2)
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b"}, got)

	boom := errors.New("boom")
	failing := func(ctx context.Context, i int) ([]*Series, error) {
		if i == 2 {
			return nil, boom
		}
		return fetch(ctx, i)
	}
	got, err = collect(readAhead(ctx, 5, 2, failing), 0)
	require.ErrorIs(t, err, boom)
	require.Equal(t, []string{"a", "b"}, got)

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = collect(readAhead(cctx, 5, 2, fetch), 0)
	require.ErrorIs(t, err, context.Canceled)
}

// While a consumer of readAhead works, the units being read are its only goroutines: at
// most concurrency of them, the first read by the consumer itself, and none to start the
// others.
func TestReadAheadGoroutines(t *testing.T) {
	const n, concurrency = 10, 3
	label := fmt.Sprintf("read-ahead-%p", t)
	release := make(chan struct{})
	var inFetch sync.WaitGroup
	inFetch.Add(concurrency)
	fetch := func(ctx context.Context, i int) ([]*Series, error) {
		if i < concurrency {
			inFetch.Done()
		}
		<-release
		return nil, nil
	}
	// The goroutines labeled as this test's: those readAhead starts inherit the label.
	labeled := func() int {
		var b strings.Builder
		require.NoError(t, pprof.Lookup("goroutine").WriteTo(&b, 1))
		count := 0
		for block := range strings.SplitSeq(b.String(), "\n\n") {
			if !strings.Contains(block, label) {
				continue
			}
			var k int
			if _, err := fmt.Sscanf(block, "%d @", &k); err == nil {
				count += k
			} else if _, err := fmt.Sscanf(block[strings.Index(block, "\n")+1:], "%d @", &k); err == nil {
				count += k // the profile's first block, after its header
			}
		}
		return count
	}
	done := make(chan int)
	pprof.Do(context.Background(), pprof.Labels("test", label), func(ctx context.Context) {
		go func() { // labeled too: the consumer
			taken := 0
			for _, err := range readAhead(ctx, n, concurrency, fetch) {
				require.NoError(t, err)
				taken++
			}
			done <- taken
		}()
	})
	inFetch.Wait() // the units were started: by whatever starts them
	require.Equal(t, concurrency, labeled(), "the consumer (reading the first unit) and the other units being read")
	close(release)
	require.Equal(t, n, <-done)
}

// Consecutive units of a Select, raw and tier, form groups of stagedGroupUnits that share a
// read, over the range of all the units (a tier unit's starts at the window holding the
// Select's start); a last group of under half as many joins the one before; a group of one
// reads its own.
func TestStagedGroups(t *testing.T) {
	base := querierBase
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
	units = append(units, raw("x", "y")) // a remainder of one unit: joins the last group
	sg := newStagedGroups(&Queryable{}, units, from, to)
	require.Len(t, sg.groups, 2)
	cut := stagedGroupUnits - 2
	require.Equal(t, append([]string{"a", "b", "t"}, singles[:cut]...), sg.groups[0].series, "raw and tier units")
	require.Equal(t, append(slices.Clone(singles[cut:]), "x", "y"), sg.groups[1].series)
	require.Equal(t, 0, sg.groupOf[1], "the tier unit")
	require.Equal(t, 1, sg.groupOf[stagedGroupUnits])
	require.Equal(t, 1, sg.groupOf[len(units)-1], "the remainder, in the group before")
	require.Equal(t, base.Add(-time.Minute), sg.from, "from the tier unit's first window")
	require.Equal(t, to, sg.to)

	// A remainder of half a group or more is a group of its own; of one unit, it reads its own.
	half := make([]unit, stagedGroupUnits+stagedGroupUnits/2)
	for i := range half {
		half[i] = raw(fmt.Sprint(i))
	}
	sg = newStagedGroups(&Queryable{}, half, from, to)
	require.Len(t, sg.groups, 2)
	require.Len(t, sg.groups[1].series, stagedGroupUnits/2)
	sg = newStagedGroups(&Queryable{}, half[:stagedGroupUnits+1], from, to)
	require.Len(t, sg.groups, 1, "a remainder of one joins the group")
	require.Len(t, sg.groups[0].series, stagedGroupUnits+1)

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
	now := querierBase
	db, _, _ := stagingDB(t, "sgrel", &now)
	ctx := context.Background()
	var batch []SeriesPoints
	for _, name := range []string{"a", "b", "c"} {
		batch = append(batch, SeriesPoints{Series: name, Points: []tablets.Point{{Time: now, Value: 1}}})
	}
	require.NoError(t, db.WriteMany(ctx, batch)) // staged
	units := []unit{{entries: []entry{{series: "a"}}}, {entries: []entry{{series: "b"}}}, {entries: []entry{{series: "c"}}}}
	q, err := db.Queryable(nil)
	require.NoError(t, err)
	from, to := now, now.Add(time.Hour)
	sg := newStagedGroups(q, units, from, to)
	st, err := sg.acquire(ctx, 0)
	require.NoError(t, err)
	require.NotNil(t, st)
	read := func(u int) error {
		_, err := st.in([]string{units[u].entries[0].series}, from, to)
		return err
	}
	pts, err := st.in([]string{"a", "b", "c"}, from, to)
	require.NoError(t, err)
	require.Len(t, pts, 3, "the group's staged points")
	sg.release(0)
	require.ErrorIs(t, read(0), tablets.ErrInvalidOptions, "a released unit's points are dropped")
	require.NoError(t, read(1), "the others' are kept")
	sg.release(1)
	require.NotNil(t, sg.groups[0].staged, "a unit is still being read")
	sg.release(2)
	require.Nil(t, sg.groups[0].staged, "the last unit is read: the Staged is dropped")
}

// The points of a read's series, run after run, grow each Series' slices once where the
// series hold about as many points each (each run reserves what the run before it held),
// and every point is kept.
func TestAppendFloatRunsReserves(t *testing.T) {
	const series, points = 50, 1000
	names := make([]string, series)
	for i := range names {
		names[i] = fmt.Sprintf("s%02d", i)
	}
	runs := func(point func(tablets.SeriesPoint) bool, _ func(string, []tablets.Point) bool, _ func(raw.FloatRun) bool) error {
		for _, name := range append(names, "unasked") {
			for j := range points {
				if !point(tablets.SeriesPoint{Series: name, Point: tablets.Point{Time: time.UnixMilli(int64(j)), Value: float64(j)}}) {
					return nil
				}
			}
		}
		return nil
	}
	budget := newPlainBudget(1 << 40)
	var byName map[string]*Series
	allocs := testing.AllocsPerRun(3, func() {
		byName = make(map[string]*Series, series)
		for _, name := range names {
			byName[name] = &Series{Series: name, plain: budget}
		}
		if err := appendFloatRuns(byName, nil, runs); err != nil {
			t.Fatal(err)
		}
	})
	// The Series and the map are made in the loop too: 3 a series, and the first series'
	// doublings (about 5 a series with the race detector). Appended a doubling at a time,
	// each series' two slices take about ten allocations each (25 a series).
	if perSeries := allocs / series; perSeries > 10 {
		t.Errorf("%.1f allocations a series of %d points", perSeries, points)
	}
	require.Len(t, byName, series)
	for _, name := range names {
		s := byName[name]
		s.finish()
		got := floatsOf(t, s)
		require.Len(t, got, points, name)
		for j, g := range got {
			require.Equal(t, [2]int64{int64(j), int64(math.Float64bits(float64(j)))}, g)
		}
	}
}

// BenchmarkSeriesIterateChunks iterates a Series' floats held in chunks (a Select's past
// its plain budget: a soak's first loads), a new iterator each time, as the engine takes
// one a series: ns and allocations a sample.
func BenchmarkSeriesIterateChunks(b *testing.B) {
	s := &Series{}
	const n = 260 // an hour and five minutes at 15 s: a 1-hour panel's rate over 5m
	for i := range n {
		s.appendFloat(int64(i)*15000, float64(i)*0.5+math.Pi)
	}
	s.finish()
	b.ReportAllocs()
	for b.Loop() {
		it := s.Iterator()
		for it.Next() {
			_ = it.At()
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/sample")
}

// A run appended whole (a raw.FloatRun) goes in after the floats before it, which go into a
// chunk ahead of it (the pending one too), and before those after it: every bit kept, and
// the run's chunk is the Series' own, not a copy.
func TestSeriesAppendRun(t *testing.T) {
	s := &Series{plain: newPlainBudget(1 << 40)}
	s.appendFloat(1, 1)
	s.appendFloat(2, 2) // pending when the run comes
	times, values := []uint64{10, 20, 30}, []float64{10.5, math.Inf(1), staleNaN}
	run := chunkenc.Append(nil, times, values)
	s.appendRun(run, len(times))
	s.appendFloat(40, 4)
	s.appendFloat(40, 5) // the later of a millisecond
	s.finish()
	n, _ := s.Len()
	require.Equal(t, 6, n)
	require.Len(t, s.chunks, 2, "the floats before the run, then the run")
	require.Same(t, &run[0], &s.chunks[1][0], "the run's chunk, shared")
	require.Equal(t, [][2]int64{
		{1, int64(math.Float64bits(1))}, {2, int64(math.Float64bits(2))},
		{10, int64(math.Float64bits(10.5))}, {20, int64(math.Float64bits(math.Inf(1)))}, {30, int64(math.Float64bits(staleNaN))},
		{40, int64(math.Float64bits(5))},
	}, floatsOf(t, s))
}
