package tiers

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/internal/blockenc"
	"github.com/seed71701133/tablets/internal/testkit/tablefake"
	"github.com/seed71701133/tablets/tsdb/internal/times"
)

// spliceDay is the start of a day that also starts a 14-day block of hours.
var spliceDay = time.Unix(20160*86400, 0).UTC()

// splicePoints are points every 15 s of [from, from+d).
func splicePoints(from time.Time, d time.Duration, seed int) []tablets.Point {
	var pts []tablets.Point
	for t := from; t.Before(from.Add(d)); t = t.Add(15 * time.Second) {
		pts = append(pts, tablets.Point{Time: t, Value: float64((int(t.Unix())/15*7+seed)%101) / 4})
	}
	return pts
}

// windowsOf lays out computed windows as the n windows of a block of step from bs.
func windowsOf(fresh map[uint64]*Window, bs uint64, step time.Duration, n int) []*Window {
	out := make([]*Window, n)
	for ws, w := range fresh {
		if i := int((ws - bs) / uint64(step/time.Second)); ws >= bs && i < n {
			out[i] = w
		}
	}
	return out
}

func allSealed(n int) []bool {
	s := make([]bool, n)
	for i := range s {
		s[i] = true
	}
	return s
}

func spliceTiers(t *testing.T, now time.Time) *Tiers {
	return testTiers(t, fakeService(t, tablefake.New()), "fakedb", now)
}

// A slice computed equal to what the columnar block stores, sealed bits included, writes
// nothing; a window that differs, or a sealed bit, rewrites the block conditionally.
func TestSpliceSkipsUnchanged(t *testing.T) {
	now := spliceDay.Add(30 * 24 * time.Hour)
	tr := spliceTiers(t, now)
	hours := tr.cfg.Tiers[1]
	lo, hi := times.Unix(spliceDay.Add(24*time.Hour)), times.Unix(spliceDay.Add(48*time.Hour))
	pts := splicePoints(spliceDay, 48*time.Hour, 1)
	bs, _ := tr.storedSpan(hours, lo, hi)
	n := int(tr.blockSpan(hours) / time.Hour)
	if n != 336 || bs != times.Unix(spliceDay) {
		t.Fatalf("block of hours: %d windows from %v", n, at(bs))
	}
	stored := &tierBlock{series: "a", start: bs, step: time.Hour, version: blockenc.VersionColumnar, rolled: 1, etag: azcore.ETag("e1"),
		windows: windowsOf(tr.computeWindows(hours, pts, nil), bs, time.Hour, n), sealed: allSealed(n), cols: blockenc.AllColumns}
	fresh := tr.computeWindows(hours, pts[len(pts)/2:], nil) // the second day's points only
	w, err := tr.spliceSlice("a", hours, []*tierBlock{stored}, fresh, lo, hi, now)
	if err != nil || len(w) != 0 {
		t.Fatalf("unchanged: %v, %v", w, err)
	}

	stored.sealed[30] = false // the second day's seventh hour, stored unsealed
	if !sameWindows(stored, stored.windows, stored.sealed) {
		t.Fatal("a block differs from itself")
	}
	fresh2 := tr.computeWindows(hours, pts[len(pts)/2:], nil)
	if sameWindows(stored, windowsOf(fresh2, bs, time.Hour, n), allSealed(n)) {
		t.Fatal("a sealed bit that differs is no change")
	}
	stored.sealed[30] = true
	fresh2[times.Unix(spliceDay.Add(30*time.Hour))].Sum += 1
	if sameWindows(stored, windowsOf(fresh2, bs, time.Hour, n), allSealed(n)) {
		t.Fatal("a sum that differs is no change")
	}
	delete(fresh2, times.Unix(spliceDay.Add(30*time.Hour)))
	if sameWindows(stored, windowsOf(fresh2, bs, time.Hour, n), allSealed(n)) {
		t.Fatal("a window gone is no change")
	}
}

// overlay lays out the windows stored in a block's span: where two entities hold a window,
// the sealed one wins, or the most recently rolled up of two alike; a stale flag unseals its
// 24 windows.
func TestSpliceOverlay(t *testing.T) {
	step := uint64(60)
	mk := func(start uint64, version int, rolled float64, n int, count uint64) *tierBlock {
		tb := &tierBlock{start: start, step: time.Minute, version: version, rolled: rolled, windows: make([]*Window, n), sealed: allSealed(n)}
		if version == 0 {
			tb.sealed = make([]bool, n)
		}
		for i := range tb.windows {
			if version != 0 {
				tb.windows[i] = &Window{Start: at(start + uint64(i)*step), Count: count}
			}
		}
		return tb
	}
	bs := uint64(1440 * 60 * 1000)
	col := mk(bs, 3, 100, 1440, 1)
	col.windows[5] = nil
	older := mk(bs+24*60, 1, 50, 24, 2)  // rolled before the columnar block: it loses
	newer := mk(bs+48*60, 1, 200, 24, 3) // after: it wins
	newer.sealed[1] = false              // the window 49, sealed in the columnar block: it stays
	older.sealed[2] = false              // the window 26, sealed in the columnar block
	flag := mk(bs+72*60, 0, 0, 24, 0)
	windows, sealed, _ := overlay([]*tierBlock{newer, flag, col, older}, bs, bs+1440*60, step, 1440)
	for i, want := range map[int]uint64{0: 1, 24: 1, 47: 1, 48: 3, 49: 1, 50: 3, 71: 3, 72: 1, 95: 1, 96: 1} {
		if windows[i] == nil || windows[i].Count != want {
			t.Errorf("window %d: %+v, want count %d", i, windows[i], want)
		}
	}
	if windows[5] != nil {
		t.Errorf("window 5: %+v, want none", windows[5])
	}
	for i, want := range map[int]bool{0: true, 25: true, 26: true, 48: true, 49: true, 50: true, 71: true, 72: false, 95: false, 96: true} {
		if sealed[i] != want {
			t.Errorf("window %d sealed %v, want %v", i, sealed[i], want)
		}
	}
}

// A block's operations: an Add where nothing was, a replace of the entity at its key and
// deletes of the others in its span (row blocks, flags), each conditional on its ETag; a
// block left without windows is deleted.
func TestSpliceBlockOps(t *testing.T) {
	tr := spliceTiers(t, spliceDay.Add(30*24*time.Hour))
	minutes := tr.cfg.Tiers[0]
	bs := times.Unix(spliceDay)
	w := []*Window{{Start: at(bs), Count: 1, Sum: 2, Min: 2, Max: 2, First: 2, Last: 2, firstT: at(bs), lastT: at(bs), sk: newWindow(at(bs), 0).sk}}
	w[0].sk.Add(2)
	windows := make([]*Window, 1440)
	windows[0] = w[0]
	sealed := allSealed(1440)
	row := &tierBlock{series: "a", start: bs, version: 1, etag: "r0", windows: make([]*Window, 24), sealed: make([]bool, 24)}
	row2 := &tierBlock{series: "a", start: bs + 24*60, version: 1, etag: "r1", windows: make([]*Window, 24), sealed: make([]bool, 24)}
	flag := &tierBlock{series: "a", start: bs + 48*60, version: 0, etag: "f2", windows: make([]*Window, 24), sealed: make([]bool, 24)}
	kinds := func(ops []aztables.TransactionAction) []string {
		var out []string
		for _, op := range ops {
			var e entity.Entity
			e.AllowStrings = true
			if err := e.Decode(op.Entity); err != nil {
				t.Fatal(err)
			}
			s := string(op.ActionType) + " " + string(e.RowKey)
			if op.IfMatch != nil {
				s += " if " + string(*op.IfMatch)
			}
			out = append(out, s)
		}
		return out
	}
	check := func(what string, in []*tierBlock, windows []*Window, want ...string) {
		t.Helper()
		ops, err := tr.blockOps("a", minutes, bs, in, windows, sealed, 1, true)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		got := kinds(ops)
		if len(got) != len(want) {
			t.Fatalf("%s: %q, want %q", what, got, want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("%s: %q, want %q", what, got, want)
			}
		}
	}
	k := blockKey(bs)
	check("nothing stored", nil, windows, "add "+k)
	check("row blocks and a flag", []*tierBlock{row, row2, flag}, windows, "updatereplace "+k+" if r0", "delete "+blockKey(bs+24*60)+" if r1", "delete "+blockKey(bs+48*60)+" if f2")
	check("a row block elsewhere", []*tierBlock{row2}, windows, "add "+k, "delete "+blockKey(bs+24*60)+" if r1")
	check("no window left", []*tierBlock{row, flag}, make([]*Window, 1440), "delete "+k+" if r0", "delete "+blockKey(bs+48*60)+" if f2")
	check("no window, nothing stored", nil, make([]*Window, 1440))
}

// A block too large for an entity with its sketches is stored without them (never an
// error), and a Rollup that computes it again finds it unchanged.
func TestSpliceTooLarge(t *testing.T) {
	tr := spliceTiers(t, spliceDay.Add(30*24*time.Hour))
	minutes := tr.cfg.Tiers[0]
	bs := times.Unix(spliceDay)
	rng := rand.New(rand.NewPCG(1, 2))
	windows := make([]*Window, 1440)
	for i := range 1440 {
		w := newWindow(at(bs+uint64(i)*60), tr.cfg.Accuracy)
		for j := range 2600 { // about 2,000 bins: values spread over 30 decades
			w.add(w.Start.Add(time.Duration(j)*time.Millisecond), math.Pow(10, rng.Float64()*30))
		}
		windows[i] = w
	}
	sealed := allSealed(1440)
	if _, err := blockenc.AppendColumnar(nil, "a", time.Minute, toColumnar(bs, windows, sealed, 1, true)); !errors.Is(err, blockenc.ErrTooLarge) {
		t.Fatalf("a block of 1440 windows of about 2000 bins each: %v, want ErrTooLarge", err)
	}
	body, kept, err := tr.appendColumnarFitting("a", minutes, bs, windows, sealed, 1, true)
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range kept {
		if w.sk != nil || w.Count != 2600 || windows[i].sk == nil {
			t.Fatalf("window %d kept: count %d, sketch %v", i, w.Count, w.sk != nil)
		}
	}
	e := entity.Entity{AllowStrings: true}
	if err := e.Decode(append([]byte(nil), body...)); err != nil {
		t.Fatal(err)
	}
	stored, err := tr.decodeTierBlock(&e, minutes, blockenc.AllColumns)
	if err != nil {
		t.Fatal(err)
	}
	stored.etag = "e1"
	for i, w := range stored.windows {
		if w == nil || w.Count != 2600 || w.sk != nil || w.Max != windows[i].Max {
			t.Fatalf("window %d stored: %+v", i, w)
		}
	}
	ops, err := tr.blockOps("a", minutes, bs, []*tierBlock{stored}, windows, sealed, 2, true)
	if err != nil || len(ops) != 0 {
		t.Fatalf("computed again: %d operations, %v", len(ops), err)
	}
}

// A block too large for an entity even without its sketches is stored without the
// histograms of its windows too (each kept as too large: its samples are read raw), and a
// Rollup that computes it again finds it unchanged.
func TestSpliceHistogramsTooLarge(t *testing.T) {
	tr := spliceTiers(t, spliceDay.Add(30*24*time.Hour))
	minutes := tr.cfg.Tiers[0]
	bs := times.Unix(spliceDay)
	var samples []tablets.HistogramPoint
	for i := range 1440 { // a gauge histogram a minute, of 400 buckets: about 3 KB a window
		h := &tablets.FloatHistogram{CounterResetHint: tablets.GaugeType, Sum: float64(i)}
		for j := range 400 {
			h.PositiveSpans = append(h.PositiveSpans, tablets.HistogramSpan{Offset: min(int32(j), 1), Length: 1})
			v := float64((i*7919+j*104729)%1000) + 0.5
			h.PositiveBuckets = append(h.PositiveBuckets, v)
			h.Count += v
		}
		samples = append(samples, tablets.HistogramPoint{Time: at(bs + uint64(i)*60 + 7), FH: h})
	}
	fresh := tr.computeWindows(minutes, nil, samples)
	windows := windowsOf(fresh, bs, time.Minute, 1440)
	sealed := allSealed(1440)
	body, kept, err := tr.appendColumnarFitting("a", minutes, bs, windows, sealed, 1, true)
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range kept {
		if w.hist == nil || w.hist.kind != histTooLarge || w.hist.count != 1 || windows[i].hist.kind != histGauge {
			t.Fatalf("window %d kept: %+v", i, w.hist)
		}
	}
	e := entity.Entity{AllowStrings: true}
	if err := e.Decode(append([]byte(nil), body...)); err != nil {
		t.Fatal(err)
	}
	stored, err := tr.decodeTierBlock(&e, minutes, blockenc.AllColumns)
	if err != nil {
		t.Fatal(err)
	}
	stored.etag = "e1"
	for i, w := range stored.windows {
		if w == nil || w.hist == nil || w.hist.kind != histTooLarge {
			t.Fatalf("window %d stored: %+v", i, w)
		}
	}
	ops, err := tr.blockOps("a", minutes, bs, []*tierBlock{stored}, windowsOf(tr.computeWindows(minutes, nil, samples), bs, time.Minute, 1440), sealed, 2, true)
	if err != nil || len(ops) != 0 {
		t.Fatalf("computed again: %d operations, %v", len(ops), err)
	}
}

// A batched Rollup's groups hold at most maxGroupBlocks blocks, and after the first, what
// maxGroupBytes holds at the size a series the last group's blocks took.
func TestRollupNextGroup(t *testing.T) {
	for _, c := range []struct{ group, blocks, n, size, want int }{
		{1750, 2, 1750, 0, 1750},               // no block read: as before
		{1750, 2, 1750, 1750 * 8 << 10, 1750},  // 8 KiB a series: the block bound
		{1750, 2, 1750, 1750 * 64 << 10, 1024}, // 64 KiB a series: the byte bound
		{1024, 2, 1024, 1024 * 8 << 10, 1750},  // smaller blocks again: back to the block bound
		{57, 61, 57, 57 * 4 << 20, 16},         // 4 MiB a series
		{16, 61, 16, 16 * 128 << 20, 1},        // more than the budget a series: one at a time
		{2000, 1, 2000, 2000 * 1 << 10, 2000},  // 1 KiB a series: maxRollupGroup
	} {
		if got := nextGroup(c.group, c.blocks, c.n, c.size); got != c.want {
			t.Errorf("nextGroup(%d, %d, %d, %d) = %d, want %d", c.group, c.blocks, c.n, c.size, got, c.want)
		}
	}
}
