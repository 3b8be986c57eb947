package tsdb

import (
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/internal/blockenc"
	"github.com/seed71701133/tablets/internal/tablefake"
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

func spliceDB(t *testing.T, now time.Time) *DB {
	return openFake(t, tablefake.New(), &Options{RawPeriod: 24 * time.Hour, Now: func() time.Time { return now }})
}

// A slice computed equal to what the columnar block stores, sealed bits included, writes
// nothing; a window that differs, or a sealed bit, rewrites the block conditionally.
func TestSpliceSkipsUnchanged(t *testing.T) {
	now := spliceDay.Add(30 * 24 * time.Hour)
	db := spliceDB(t, now)
	hours := db.opts.Tiers[1]
	lo, hi := unix(spliceDay.Add(24*time.Hour)), unix(spliceDay.Add(48*time.Hour))
	pts := splicePoints(spliceDay, 48*time.Hour, 1)
	bs, _ := db.storedSpan(hours, lo, hi)
	n := int(db.blockSpan(hours) / time.Hour)
	if n != 336 || bs != unix(spliceDay) {
		t.Fatalf("block of hours: %d windows from %v", n, at(bs))
	}
	stored := &tierBlock{series: "a", start: bs, step: time.Hour, version: blockenc.VersionColumnar, rolled: 1, etag: azcore.ETag("e1"),
		windows: windowsOf(db.computeWindows(hours, pts, nil), bs, time.Hour, n), sealed: allSealed(n), cols: blockenc.AllColumns}
	fresh := db.computeWindows(hours, pts[len(pts)/2:], nil) // the second day's points only
	w, err := db.spliceSlice("a", hours, []*tierBlock{stored}, fresh, lo, hi, now)
	if err != nil || len(w) != 0 {
		t.Fatalf("unchanged: %v, %v", w, err)
	}

	stored.sealed[30] = false // the second day's seventh hour, stored unsealed
	if !sameWindows(stored, stored.windows, stored.sealed) {
		t.Fatal("a block differs from itself")
	}
	fresh2 := db.computeWindows(hours, pts[len(pts)/2:], nil)
	if sameWindows(stored, windowsOf(fresh2, bs, time.Hour, n), allSealed(n)) {
		t.Fatal("a sealed bit that differs is no change")
	}
	stored.sealed[30] = true
	fresh2[unix(spliceDay.Add(30*time.Hour))].Sum += 1
	if sameWindows(stored, windowsOf(fresh2, bs, time.Hour, n), allSealed(n)) {
		t.Fatal("a sum that differs is no change")
	}
	delete(fresh2, unix(spliceDay.Add(30*time.Hour)))
	if sameWindows(stored, windowsOf(fresh2, bs, time.Hour, n), allSealed(n)) {
		t.Fatal("a window gone is no change")
	}
}

// overlay lays out the windows stored in a block's span: the most recently rolled up entity
// wins where two hold a window, and a stale flag unseals its 24 windows.
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
	newer.sealed[1] = false
	flag := mk(bs+72*60, 0, 0, 24, 0)
	windows, sealed := overlay([]*tierBlock{newer, flag, col, older}, bs, bs+1440*60, step, 1440)
	for i, want := range map[int]uint64{0: 1, 24: 1, 47: 1, 48: 3, 71: 3, 72: 1, 95: 1, 96: 1} {
		if windows[i] == nil || windows[i].Count != want {
			t.Errorf("window %d: %+v, want count %d", i, windows[i], want)
		}
	}
	if windows[5] != nil {
		t.Errorf("window 5: %+v, want none", windows[5])
	}
	for i, want := range map[int]bool{0: true, 48: true, 49: false, 50: true, 71: true, 72: false, 95: false, 96: true} {
		if sealed[i] != want {
			t.Errorf("window %d sealed %v, want %v", i, sealed[i], want)
		}
	}
}

// A block's operations: an Add where nothing was, a replace of the entity at its key and
// deletes of the others in its span (row blocks, flags), each conditional on its ETag; a
// block left without windows is deleted.
func TestSpliceBlockOps(t *testing.T) {
	db := spliceDB(t, spliceDay.Add(30*24*time.Hour))
	minutes := db.opts.Tiers[0]
	bs := unix(spliceDay)
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
		ops, err := db.blockOps("a", minutes, bs, in, windows, sealed, 1)
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
