package tiers

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/advanced"
	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/filter"
	"github.com/seed71701133/tablets/internal/blockenc"
	"github.com/seed71701133/tablets/internal/sketchenc"
	"github.com/seed71701133/tablets/internal/testkit/clock"
	"github.com/seed71701133/tablets/internal/testkit/itest"
	"github.com/seed71701133/tablets/tsdb"
)

// tierTableOf is the name of the table of the default tier of step holding Unix second s.
func tierTableOf(db *tsdb.DB, step time.Duration, s int64) string {
	period := int64(7 * 86400)
	if step >= time.Hour {
		period = 364 * 86400
	}
	return db.Name() + "t" + itoa(int64(step/time.Second)) + "p" + itoa(s/period*period)
}

// tierEntity is an entity of a tier table as stored: its key, version (0: none, a stale
// flag) and the columnar block it holds (version 3).
type tierEntity struct {
	start    int64
	version  float64
	columnar *blockenc.Columnar
}

// tierEntities reads every entity of series in the tables of the default tier of step
// holding [from, to), decoding the columnar blocks.
func tierEntities(t *testing.T, svc *aztables.ServiceClient, db *tsdb.DB, step time.Duration, from, to time.Time, series string) []tierEntity {
	t.Helper()
	var out []tierEntity
	seen := map[string]bool{}
	for s := from; s.Before(to); s = s.Add(24 * time.Hour) {
		name := tierTableOf(db, step, s.Unix())
		if !seen[name] {
			seen[name] = true
			out = append(out, tableEntities(t, svc.NewClient(name), step, series)...)
		}
	}
	return out
}

// tableEntities reads every entity of series in a tier table of step.
func tableEntities(t *testing.T, client *aztables.Client, step time.Duration, series string) []tierEntity {
	t.Helper()
	// Either layout: the series' partition, or its packed partition's RowKeys.
	packed := filter.And(filter.Eq("PartitionKey", blockenc.PackedPartition(series)), filter.Ge("RowKey", series+"|"), filter.Lt("RowKey", series+"}"))
	pager := client.NewListEntitiesPager(&aztables.ListEntitiesOptions{Filter: ptr(filter.Or(filter.Eq("PartitionKey", series), packed).String())})
	var out []tierEntity
	for pager.More() {
		page, err := pager.NextPage(context.Background())
		var re *azcore.ResponseError
		if errors.As(err, &re) && re.StatusCode == 404 {
			return nil
		}
		require.NoError(t, err)
		for _, raw := range page.Entities {
			e := entity.Entity{AllowStrings: true}
			require.NoError(t, e.Decode(raw))
			rk := string(e.RowKey)
			if at, ok := strings.CutPrefix(rk, series+"|"); ok {
				rk = at // packed
			}
			start, err := strconv.ParseInt(rk, 10, 64)
			require.NoError(t, err)
			te := tierEntity{start: start}
			for _, p := range e.Props {
				if string(p.Name) == "V" {
					te.version = p.Value
				}
			}
			if blockenc.IsColumnar(&e) {
				te.columnar, err = blockenc.DecodeColumnar(&e, step, 0.01, blockenc.AllColumns)
				require.NoError(t, err)
			}
			out = append(out, te)
		}
	}
	return out
}

func ptr[T any](v T) *T { return &v }

// columnarWindows lays out the windows of the columnar blocks among es (of a tier of step)
// as the model does: the windows with points, by start, with whether each is sealed.
func columnarWindows(t *testing.T, es []tierEntity, step time.Duration) (map[time.Time]*blockenc.Window, map[time.Time]bool) {
	t.Helper()
	windows := map[time.Time]*blockenc.Window{}
	sealed := map[time.Time]bool{}
	for _, e := range es {
		if e.columnar == nil {
			continue
		}
		require.Len(t, e.columnar.Sealed, len(e.columnar.Windows))
		for i, w := range e.columnar.Windows {
			ws := time.Unix(e.start, 0).UTC().Add(time.Duration(i) * step)
			sealed[ws] = e.columnar.Sealed[i]
			if w != nil {
				windows[ws] = w
			}
		}
	}
	return windows, sealed
}

// requireColumnar checks the stored windows of [from, to) against the model of pts: counts,
// min, max, first, last and their times exactly, sums to float addition.
func requireColumnar(t *testing.T, windows map[time.Time]*blockenc.Window, pts []tablets.Point, from, to time.Time, step time.Duration, what string) {
	t.Helper()
	want := itest.ModelWindows(pts, from, to, step)
	n := 0
	for ws := range windows {
		if !ws.Before(from) && ws.Before(to) {
			n++
		}
	}
	require.Equal(t, len(want), n, "%s: windows with points", what)
	for _, m := range want {
		w := windows[m.Start]
		require.NotNil(t, w, "%s: window %v", what, m.Start)
		require.Equal(t, m.Count, w.Count, "%s: window %v count", what, m.Start)
		require.Equal(t, m.Min, w.Min, "%s: window %v min", what, m.Start)
		require.Equal(t, m.Max, w.Max, "%s: window %v max", what, m.Start)
		require.Equal(t, m.First, w.First, "%s: window %v first", what, m.Start)
		require.Equal(t, m.Last, w.Last, "%s: window %v last", what, m.Start)
		require.Equal(t, m.FirstT.Sub(m.Start), w.FirstAt, "%s: window %v first's time", what, m.Start)
		require.Equal(t, m.LastT.Sub(m.Start), w.LastAt, "%s: window %v last's time", what, m.Start)
		require.InDelta(t, m.Sum, w.Sum, 1e-9*math.Max(1, math.Abs(m.Sum)), "%s: window %v sum", what, m.Start)
		require.NotNil(t, w.Sketch, "%s: window %v sketch", what, m.Start)
		require.Equal(t, m.Count, w.Sketch.Count(), "%s: window %v sketch count", what, m.Start)
	}
}

// rowBlocks is what a version of tablets before columnar blocks stored of pts (one series)
// in the tier of step: a row block (version 1) per 24 windows, rolled up at rolled, by start.
func rowBlocks(series string, pts []tablets.Point, step time.Duration, rolled time.Time) map[int64][]byte {
	blocks := map[int64]*blockenc.Block{}
	var order []int64
	for _, m := range itest.ModelWindows(pts, tablets.MinTime, tablets.MaxTime, step) {
		bs := m.Start.Unix() / int64(24*step/time.Second) * int64(24*step/time.Second)
		b := blocks[bs]
		if b == nil {
			b = &blockenc.Block{Start: uint64(bs), Rolled: float64(rolled.Unix())}
			blocks[bs] = b
			order = append(order, bs)
		}
		sk := sketchenc.New(0.01)
		for _, v := range m.Values {
			sk.Add(v)
		}
		b.Windows[(m.Start.Unix()-bs)/int64(step/time.Second)] = &blockenc.Window{Count: m.Count, Sum: m.Sum, Min: m.Min, Max: m.Max,
			First: m.First, Last: m.Last, FirstAt: m.FirstT.Sub(m.Start), LastAt: m.LastT.Sub(m.Start), Sketch: sk}
	}
	out := map[int64][]byte{}
	for _, bs := range order {
		out[bs] = blockenc.Append(nil, series, blocks[bs])
	}
	return out
}

// every15s is n points of series-specific values, one every 15 s from start.
func every15s(start time.Time, n int, seed int) []tablets.Point {
	pts := make([]tablets.Point, n)
	for i := range pts {
		pts[i] = tablets.Point{Time: start.Add(time.Duration(i) * 15 * time.Second), Value: float64((i*7+seed*13)%101) / 4}
	}
	return pts
}

// A database holding row blocks (written as a version before columnar blocks did) rolls up
// into columnar blocks: the row blocks of the columnar blocks written are gone, their
// windows outside the slice rolled up kept (converted), and Aggregate answers the same.
func TestTSDBRollupConvertsRowBlocks(t *testing.T) {
	ctx := context.Background()
	day := 24 * time.Hour
	clock := clock.New(itest.RollupBase.Add(10 * day))
	db, svc, _ := newDB(t, &tsdb.Options{RawPeriod: day, Now: clock.Now})
	pts := every15s(itest.RollupBase, 2*5760, 1) // two days
	require.NoError(t, db.Write(ctx, "a", pts...))
	// The old version's row blocks of both days, minutes and hours.
	for _, step := range []time.Duration{time.Minute, time.Hour} {
		made := map[string]bool{}
		for bs, body := range rowBlocks("a", pts, step, itest.RollupBase.Add(3*day)) {
			client := svc.NewClient(tierTableOf(db, step, bs))
			if name := tierTableOf(db, step, bs); !made[name] {
				made[name] = true
				_, err := client.CreateTable(ctx, nil)
				var re *azcore.ResponseError
				if !errors.As(err, &re) || re.ErrorCode != string(aztables.TableAlreadyExists) {
					require.NoError(t, err) // the Write's flags may have made it
				}
			}
			// Over the flags of the Write, as a Rollup of the old version replaced them.
			_, err := client.UpsertEntity(ctx, body, &aztables.UpsertEntityOptions{UpdateMode: aztables.UpdateModeReplace})
			require.NoError(t, err)
		}
	}
	// The old version recorded no tier layout: opened now, its tier tables say it keys its
	// blocks by series.
	db = reopenUnrecorded(t, svc, db, &tsdb.Options{RawPeriod: day, Now: clock.Now})
	before := map[time.Duration][]tsdb.Window{}
	for _, step := range []time.Duration{time.Minute, time.Hour} {
		before[step] = itest.CollectWindows(t, db.Aggregate(ctx, []string{"a"}, itest.RollupBase, itest.RollupBase.Add(2*day), step, nil))
		itest.RequireWindows(t, itest.ModelWindows(pts, itest.RollupBase, itest.RollupBase.Add(2*day), step), before[step], "row blocks at "+step.String())
	}

	// Roll up the second day only: its minutes' block (a day) and the hours' block (14
	// days, the first day converted from its row block).
	require.NoError(t, db.Rollup(ctx, itest.RollupBase.Add(day), itest.RollupBase.Add(2*day)))
	minutes := tierEntities(t, svc, db, time.Minute, itest.RollupBase, itest.RollupBase.Add(3*day), "a")
	for _, e := range minutes {
		if e.start >= itest.RollupBase.Add(day).Unix() {
			require.Equal(t, float64(blockenc.VersionColumnar), e.version, "minute entity %d of the second day", e.start)
			require.Equal(t, itest.RollupBase.Add(day).Unix(), e.start, "one block a day")
		} else {
			require.Equal(t, float64(blockenc.Version), e.version, "minute row blocks of the first day, not rolled up, stay")
		}
	}
	windows, sealed := columnarWindows(t, minutes, time.Minute)
	requireColumnar(t, windows, pts, itest.RollupBase.Add(day), itest.RollupBase.Add(2*day), time.Minute, "minutes of the second day")
	for ws, s := range sealed {
		require.True(t, s, "minute %v sealed", ws)
	}
	hours := tierEntities(t, svc, db, time.Hour, itest.RollupBase, itest.RollupBase.Add(3*day), "a")
	require.Len(t, hours, 1, "the hours' row blocks replaced by one columnar block")
	require.Equal(t, float64(blockenc.VersionColumnar), hours[0].version)
	require.Equal(t, itest.RollupBase.Unix()/(14*86400)*(14*86400), hours[0].start, "a block of 14 days")
	require.Len(t, hours[0].columnar.Windows, 336)
	windows, sealed = columnarWindows(t, hours, time.Hour)
	requireColumnar(t, windows, pts, itest.RollupBase, itest.RollupBase.Add(2*day), time.Hour, "hours of both days")
	for ws := itest.RollupBase; ws.Before(itest.RollupBase.Add(2 * day)); ws = ws.Add(time.Hour) {
		require.True(t, sealed[ws], "hour %v sealed (the first day's as its row block was)", ws)
	}
	for _, step := range []time.Duration{time.Minute, time.Hour} {
		got := itest.CollectWindows(t, db.Aggregate(ctx, []string{"a"}, itest.RollupBase, itest.RollupBase.Add(2*day), step, nil))
		itest.RequireWindows(t, itest.ModelWindows(pts, itest.RollupBase, itest.RollupBase.Add(2*day), step), got, "after Rollup at "+step.String())
	}
}

// Splicing a day into a 14-day block of hours keeps the block's other days as stored, even
// where their raw points are gone.
func TestTSDBRollupSplicesDay(t *testing.T) {
	ctx := context.Background()
	day := 24 * time.Hour
	clock := clock.New(itest.RollupBase.Add(10 * day))
	db, svc, _ := newDB(t, &tsdb.Options{RawPeriod: day, Layout: chunkedLayout, Now: clock.Now, DirectWrites: true})
	var pts []tablets.Point
	for d := range 3 {
		dayPts := every15s(itest.RollupBase.Add(time.Duration(d)*day+time.Duration(d)*time.Second), 5760/(d+1), d)
		require.NoError(t, db.Write(ctx, "a", dayPts...))
		pts = append(pts, dayPts...)
	}
	require.NoError(t, db.Rollup(ctx, itest.RollupBase, itest.RollupBase.Add(3*day)))
	// The raw table of the first day goes (as Retain would drop it).
	_, err := svc.DeleteTable(ctx, db.Name()+"r"+itoa(itest.RollupBase.Unix()), nil)
	require.NoError(t, err, "drop the first day's raw table")
	// A point more into the third day, rolled up: the hours' block is rewritten.
	extra := tablets.Point{Time: itest.RollupBase.Add(2*day + 5*time.Hour + 7*time.Second), Value: -3}
	require.NoError(t, db.Write(ctx, "a", extra))
	pts = append(pts, extra)
	require.NoError(t, db.Rollup(ctx, itest.RollupBase.Add(2*day), itest.RollupBase.Add(3*day)))
	hours := tierEntities(t, svc, db, time.Hour, itest.RollupBase, itest.RollupBase.Add(3*day), "a")
	require.Len(t, hours, 1)
	windows, _ := columnarWindows(t, hours, time.Hour)
	requireColumnar(t, windows, pts, itest.RollupBase, itest.RollupBase.Add(3*day), time.Hour, "hours of the three days")
	minutes := tierEntities(t, svc, db, time.Minute, itest.RollupBase, itest.RollupBase.Add(3*day), "a")
	require.Len(t, minutes, 3, "a block of minutes a day")
	windows, _ = columnarWindows(t, minutes, time.Minute)
	requireColumnar(t, windows, pts, itest.RollupBase, itest.RollupBase.Add(3*day), time.Minute, "minutes of the three days")
}

// A Rollup of a range already rolled up and sealed writes nothing (0 transactions), over
// row-layout raw tables (series by series) and chunked ones (batched); one of windows rolled
// up before they were sealed writes them once more, sealed, then nothing.
func TestTSDBRollupSkipsUnchanged(t *testing.T) {
	for _, chunked := range []bool{false, true} {
		t.Run(fmt.Sprintf("chunked %v", chunked), func(t *testing.T) {
			ctx := context.Background()
			day := 24 * time.Hour
			end := itest.RollupBase.Add(2 * day)
			clock := clock.New(end.Add(30 * time.Minute)) // the last hour's windows unsealed
			opts := &tsdb.Options{RawPeriod: day, Now: clock.Now, Layout: chunkedLayout}
			if !chunked { // the advanced layout of databases made before the format record
				opts.Layout = func(c *aztables.Client) (tablets.Store, error) { return advanced.New(c, nil) }
			}
			db, svc, checker := newDB(t, opts)
			for s := range 3 {
				require.NoError(t, db.Write(ctx, "s"+itoa(int64(s)), every15s(itest.RollupBase.Add(time.Duration(s)*time.Second), 2*5760, s)...))
			}
			rollup := func(what string) int64 {
				before := checker.Stats()
				require.NoError(t, db.Rollup(ctx, itest.RollupBase, end))
				after := checker.Stats()
				t.Logf("%s: %d requests, %d transactions, %d bytes read, %d sent", what, after.Requests-before.Requests,
					after.Batches-before.Batches, after.ResponseBytes-before.ResponseBytes, after.RequestBytes-before.RequestBytes)
				return after.Batches - before.Batches
			}
			// Batched, a slice at a time: a transaction per series, day and tier. Series by
			// series, the whole range at once: a transaction per series and tier table (two
			// weeks of minutes, one year of hours). Then one more: the dirty markers of the
			// late writes deleted.
			first := int64(3*3 + 1)
			if chunked {
				first = 3*2*2 + 1
			}
			require.Equal(t, first, rollup("first Rollup"))
			_, sealed := columnarWindows(t, tierEntities(t, svc, db, time.Minute, itest.RollupBase, end, "s1"), time.Minute)
			require.False(t, sealed[end.Add(-time.Minute)], "the last minute is not sealed yet")
			require.True(t, sealed[end.Add(-31*time.Minute)], "a minute that ended SealDelay ago is")
			require.Zero(t, rollup("again, at once"), "nothing changed")
			clock.Add(time.Hour)
			require.Equal(t, int64(3*2), rollup("an hour later"), "the second day's blocks, sealed")
			_, sealed = columnarWindows(t, tierEntities(t, svc, db, time.Minute, itest.RollupBase, end, "s1"), time.Minute)
			require.True(t, sealed[end.Add(-time.Minute)], "the last minute is sealed")
			require.Zero(t, rollup("again"), "nothing changed")
			windows, _ := columnarWindows(t, tierEntities(t, svc, db, time.Minute, itest.RollupBase, end, "s2"), time.Minute)
			requireColumnar(t, windows, every15s(itest.RollupBase.Add(2*time.Second), 2*5760, 2), itest.RollupBase, end, time.Minute, "s2")
		})
	}
}

// Two Rollup loops beside a writer of late points, on one range (issue 21: rollers must not
// starve each other): every Rollup succeeds, and once the writer is done, a last Rollup
// leaves windows equal to the model.
func TestTSDBRollupLoopsBesideLateWriter(t *testing.T) {
	for _, chunked := range []bool{false, true} {
		t.Run(fmt.Sprintf("chunked %v", chunked), func(t *testing.T) {
			ctx := context.Background()
			day := 24 * time.Hour
			end := itest.RollupBase.Add(day)
			clock := clock.New(itest.RollupBase.Add(3 * day))
			opts := &tsdb.Options{RawPeriod: day, Now: clock.Now, DirectWrites: true}
			if chunked {
				opts.Layout = chunkedLayout
			}
			db, svc, _ := newDB(t, opts)
			names := []string{"a", "b", "c"}
			all := map[string][]tablets.Point{}
			for i, s := range names {
				all[s] = every15s(itest.RollupBase.Add(time.Duration(i)*time.Second), 5760, i)
				require.NoError(t, db.Write(ctx, s, all[s]...))
			}
			require.NoError(t, db.Rollup(ctx, itest.RollupBase, end))

			// Each roller is a process of its own; the writer writes a late point, then
			// waits for each roller to finish a Rollup begun after it.
			done, failed := make(chan struct{}), make(chan struct{})
			var failOnce sync.Once
			tick := make(chan struct{}, 1)
			var counts [2]atomic.Int64
			var wg sync.WaitGroup
			for r := range 2 {
				rdb, err := tsdb.Open(ctx, svc, db.Name(), opts)
				require.NoError(t, err)
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						select {
						case <-done:
							return
						default:
						}
						if err := rdb.Rollup(ctx, itest.RollupBase, end); err != nil {
							t.Errorf("roller %d, Rollup %d: %v", r, counts[r].Load()+1, err)
							failOnce.Do(func() { close(failed) })
							return
						}
						counts[r].Add(1)
						select {
						case tick <- struct{}{}:
						default:
						}
					}
				}()
			}
			// 16 late points, 90 minutes apart over the day (the 40 of 35 minutes before took
			// 80 Rollups a roller, 40 s): each followed by 2 Rollups of each roller begun after
			// it, the two on the same blocks.
			const lateWrites = 16
		writes:
			for i := range lateWrites {
				s := names[i%len(names)]
				p := tablets.Point{Time: itest.RollupBase.Add(time.Duration(i)*90*time.Minute + 3*time.Second), Value: float64(1000 + i)}
				require.NoError(t, db.Write(ctx, s, p))
				all[s] = append(all[s], p)
				want := [2]int64{counts[0].Load() + 2, counts[1].Load() + 2}
				for counts[0].Load() < want[0] || counts[1].Load() < want[1] {
					select {
					case <-tick:
					case <-failed:
						break writes
					}
				}
			}
			close(done)
			wg.Wait()
			t.Logf("Rollups of each roller while %d late points were written: %d, %d", lateWrites, counts[0].Load(), counts[1].Load())
			require.NoError(t, db.Rollup(ctx, itest.RollupBase, end))
			for _, s := range names {
				for _, step := range []time.Duration{time.Minute, time.Hour} {
					windows, _ := columnarWindows(t, tierEntities(t, svc, db, step, itest.RollupBase, end, s), step)
					requireColumnar(t, windows, all[s], itest.RollupBase, end, step, s+" at "+step.String())
				}
			}
		})
	}
}

// scrapes is n points of a series scraped every 15 s from start: a counter (even seed) or a
// gauge (odd), as Prometheus' are.
func scrapes(start time.Time, n int, seed int) []tablets.Point {
	pts := make([]tablets.Point, n)
	v := float64(seed * 1000)
	for i := range pts {
		if seed%2 == 0 {
			v += float64((i*seed)%7 + 3)
		} else {
			v = 20 + float64((i/40+seed)%10)/2
		}
		pts[i] = tablets.Point{Time: start.Add(time.Duration(i) * 15 * time.Second), Value: v}
	}
	return pts
}

// The cost of a batched Rollup with the default tiers, a slice (a day) at a time as
// the scheduler's rollup runs it, of 20 series scraped every 15 s (counters and gauges): the bytes it reads (the blocks over the slice,
// whole, and the raw points) and writes a series a slice; a Rollup of slices already rolled
// up and sealed reads the same and writes nothing.
func TestTSDBRollupBytes(t *testing.T) {
	ctx := context.Background()
	day := 24 * time.Hour
	const days, series = 4, 20
	clock := clock.New(itest.RollupBase.Add(days*day + 2*time.Hour))
	db, svc, checker := newDB(t, &tsdb.Options{RawPeriod: day, Layout: chunkedLayout, Now: clock.Now, DirectWrites: true})
	var names []string
	for s := range series {
		name := fmt.Sprintf("job%02d", s)
		names = append(names, name)
		require.NoError(t, db.Write(ctx, name, scrapes(itest.RollupBase.Add(time.Duration(s)*time.Second), days*5760, s)...))
	}
	type cost struct{ requests, txns, read, written int64 } // written: the entities' JSON
	rollup := func(d int) cost {
		before := checker.Stats()
		require.NoError(t, db.Rollup(ctx, itest.RollupBase.Add(time.Duration(d)*day), itest.RollupBase.Add(time.Duration(d+1)*day)))
		after := checker.Stats()
		return cost{after.Requests - before.Requests, after.Batches - before.Batches,
			after.ResponseBytes - before.ResponseBytes, after.EntityBytes - before.EntityBytes}
	}
	// The size of the blocks a Rollup of day d reads (entity JSON): the minutes' block of
	// the day, the hours' of 14 days.
	blockBytes := func(d int) (minutes, hours int) {
		for _, step := range []time.Duration{time.Minute, time.Hour} {
			start := itest.RollupBase.Add(time.Duration(d) * day)
			if step == time.Hour {
				start = time.Unix(start.Unix()/(14*86400)*(14*86400), 0)
			}
			client := svc.NewClient(tierTableOf(db, step, start.Unix()))
			for _, s := range names {
				resp, err := client.GetEntity(ctx, blockenc.PackedPartition(s), blockenc.PackedRowKey(s, uint64(start.Unix())), nil)
				require.NoError(t, err)
				if step == time.Minute {
					minutes += len(resp.Value)
				} else {
					hours += len(resp.Value)
				}
			}
		}
		return minutes / series, hours / series
	}
	for d := range days {
		c := rollup(d)
		t.Logf("day %d, first Rollup: %d requests, %d transactions; a series: %d bytes read, %d written",
			d, c.requests, c.txns, c.read/series, c.written/series)
		// The series' names share their first two characters: one partition of each tier
		// table, 20 blocks in a transaction.
		require.Equal(t, int64(2+1), c.txns, "a transaction a tier, and the day's dirty markers deleted")
		// Measured: 7.0 to 7.7 KB a series: its day of minutes (6.2 KB) and its block of
		// hours, which grows a day at a time (0.45 KB a day).
		require.Less(t, c.written/series, int64(12_000), "bytes written a series")
	}
	for d := range days {
		c := rollup(d)
		minutes, hours := blockBytes(d)
		t.Logf("day %d, Rollup again: %d requests, %d transactions; a series: %d bytes read, of which its blocks %d (minutes) and %d (hours)",
			d, c.requests, c.txns, c.read/series, minutes, hours)
		require.Zero(t, c.txns, "nothing changed")
		// Measured: 11.3 KB a series, 8.1 KB of them its blocks (6.2 KB of minutes, 1.8
		// KB of 4 days of hours), the rest its raw points.
		require.Less(t, c.read/series, int64(16_000), "bytes read a series")
	}
}

// reopenUnrecorded opens db again as a version before the tier layout's record finds it:
// the record deleted, it decides again from the tier tables (any: the series layout).
func reopenUnrecorded(t *testing.T, svc *aztables.ServiceClient, db *tsdb.DB, opts *tsdb.Options) *tsdb.DB {
	t.Helper()
	ctx := context.Background()
	_, err := svc.NewClient(db.Name()+"m").DeleteEntity(ctx, "format", "tiers", nil)
	require.NoError(t, err)
	other, err := tsdb.Open(ctx, svc, db.Name(), opts)
	require.NoError(t, err)
	return other
}
