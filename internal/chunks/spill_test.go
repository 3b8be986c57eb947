package chunks

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/seed71701133/tablets/internal/histenc"
	"github.com/seed71701133/tablets/internal/partkey"
)

// spillRead reads names by key range with a spill sink wanting what wants does (nil:
// all), and returns what it emitted of them, what it passed on of the others, and the pages
// the table served. A series passed twice, or passed but not wanted, fails the test.
func spillRead(t *testing.T, m *memTable, names []string, from, to uint64, wants func(string) bool) (got, spilled map[string][]histenc.Sample, pages int) {
	t.Helper()
	table := Table[histenc.Sample]{Client: m, Layout: histLayout(t), Concurrency: 4}
	spilled = map[string][]histenc.Sample{}
	ctx := WithSpill(WithKeyRange(context.Background()), wants, func(series string, units []uint64, values []histenc.Sample) {
		if _, twice := spilled[series]; twice {
			t.Fatalf("%s passed twice", series)
		}
		if wants != nil && !wants(series) {
			t.Fatalf("%s passed on, but not wanted", series)
		}
		if slices.Contains(names, series) {
			t.Fatalf("%s passed on, but asked for", series)
		}
		for i, u := range units {
			if values[i].Unit != u {
				t.Fatalf("%s: unit %d, sample's %d", series, u, values[i].Unit)
			}
		}
		spilled[series] = values
	})
	got = map[string][]histenc.Sample{}
	before := m.pages
	err := table.ReadMany(ctx, names, from, to, func(i int, u uint64, s histenc.Sample) bool {
		got[names[i]] = append(got[names[i]], s)
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	return got, spilled, m.pages - before
}

// everyNth is every n-th of sorted, from the first, and its last: a selection whose range
// is all of sorted.
func everyNth(sorted []string, n int) []string {
	var sel []string
	for i, s := range sorted {
		if i%n == 0 || i == len(sorted)-1 {
			sel = append(sel, s)
		}
	}
	return sel
}

// A read by key range with a spill sink passes on each series of the range it was not
// asked for exactly as a read of that series returns it (the latest write of a time
// winning, within the range), whatever the pages' cuts, or not at all (a page's end cut
// it); what it returns of the series asked for is unchanged.
func TestReadByKeyRangeSpills(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	day := 20_000 * histDayUnits
	hour := uint64(3_600_000)
	for _, pageSize := range []int{7, 1000} {
		m, series := keyRangeTable(t, rng, 60, pageSize)
		var sel []string
		for i, s := range series {
			if i%3 == 0 { // 20: at least MinKeyRange, read by range
				sel = append(sel, s)
			}
		}
		for _, r := range [][2]uint64{{day + 22*hour, day + 23*hour}, {day, day + 2*histDayUnits}} {
			got, spilled, pages := spillRead(t, m, sel, r[0], r[1], nil)
			sameSamples(t, got, wantSamples(t, m, sel, r[0], r[1]))
			var others []string
			for name := range spilled {
				others = append(others, name)
			}
			want := wantSamples(t, m, others, r[0], r[1])
			for name, w := range want {
				if len(w) == 0 {
					delete(want, name)
				}
			}
			sameSamples(t, spilled, want)
			// The series the range holds that were not asked for, all of them passed but
			// for those a page's end cut.
			lo, hi := slices.MinFunc(sel, partkey.Compare), slices.MaxFunc(sel, partkey.Compare)
			inRange := 0
			for _, s := range series {
				if !slices.Contains(sel, s) && partkey.Compare(s, lo) > 0 && partkey.Compare(s, hi) < 0 && len(wantSamples(t, m, []string{s}, r[0], r[1])[s]) > 0 {
					inRange++
				}
			}
			t.Logf("page %d, range %v: %d of %d series passed on", pageSize, r, len(spilled), inRange)
			if pageSize == 1000 && (len(spilled) < inRange-pages || len(spilled) > inRange) {
				t.Errorf("page %d: %d series passed on, want the range's %d but for a page's end each (%d pages)", pageSize, len(spilled), inRange, pages)
			}
			if pageSize == 7 && len(spilled) == 0 {
				t.Errorf("page %d: no series passed on", pageSize)
			}
		}
	}
}

// A selection of an eighth of a range's series, sparse for a range read that drops what
// it was not asked for, is read by range to its end when the rest is passed on: every
// other series of the range comes with it.
func TestReadByKeyRangeSpillsSparser(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	day := 20_000 * histDayUnits
	const pageSize = 1000
	m, series := keyRangeTable(t, rng, 400, pageSize)
	sorted := slices.SortedFunc(slices.Values(series), partkey.Compare)
	sel := everyNth(sorted, 8)
	from, to := day, day+2*histDayUnits
	want := wantSamples(t, m, sel, from, to)
	dropped, droppedPages := readAll(t, m, sel, from, to, true)
	sameSamples(t, dropped, want)
	got, spilled, pages := spillRead(t, m, sel, from, to, nil)
	sameSamples(t, got, want)
	_, clausePages := readAll(t, m, sel, from, to, false)
	t.Logf("%d pages passing the rest on (%d series), %d dropping it, %d by clauses", pages, len(spilled), droppedPages, clausePages)
	if others := len(series) - len(sel); len(spilled) < others-pages || len(spilled) > others {
		t.Errorf("%d series passed on, want the %d others but for a page's end each", len(spilled), others)
	}
	if pages >= clausePages {
		t.Errorf("%d pages by range, %d by clauses", pages, clausePages)
	}
}

// A sink that wants only some series gets those, as a sink wanting all gets them, and
// none of the others; the series asked for come back the same.
func TestReadByKeyRangeSpillWants(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 20))
	day := 20_000 * histDayUnits
	m, series := keyRangeTable(t, rng, 120, 1000)
	sorted := slices.SortedFunc(slices.Values(series), partkey.Compare)
	sel := everyNth(sorted, 4)
	from, to := day, day+2*histDayUnits
	_, all, _ := spillRead(t, m, sel, from, to, nil)
	wanted := map[string]bool{}
	for i, s := range sorted {
		if i%3 == 0 {
			wanted[s] = true
		}
	}
	got, some, _ := spillRead(t, m, sel, from, to, func(s string) bool { return wanted[s] })
	sameSamples(t, got, wantSamples(t, m, sel, from, to))
	want := map[string][]histenc.Sample{}
	for s, v := range all {
		if wanted[s] {
			want[s] = v
		}
	}
	if len(want) == 0 || len(want) == len(all) {
		t.Fatalf("%d of %d series passed on wanted: the test wants some and not all", len(want), len(all))
	}
	sameSamples(t, some, want)
}

// A read its consumer stops passes on no series it was gathering.
func TestReadByKeyRangeSpillStops(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	day := 20_000 * histDayUnits
	m, series := keyRangeTable(t, rng, 40, 1000)
	table := Table[histenc.Sample]{Client: m, Layout: histLayout(t), Concurrency: 4}
	sel := []string{}
	for i, s := range slices.SortedFunc(slices.Values(series), partkey.Compare) {
		if i%2 == 0 {
			sel = append(sel, s)
		}
	}
	from, to := day, day+2*histDayUnits
	for _, stopAt := range []int{1, 30} {
		passed := map[string][]histenc.Sample{}
		ctx := WithSpill(WithKeyRange(context.Background()), nil, func(s string, _ []uint64, v []histenc.Sample) { passed[s] = v })
		n := 0
		if err := table.ReadMany(ctx, sel, from, to, func(int, uint64, histenc.Sample) bool { n++; return n < stopAt }); err != nil {
			t.Fatal(err)
		}
		var names []string
		for s := range passed {
			names = append(names, s)
		}
		sameSamples(t, passed, wantSamples(t, m, names, from, to))
	}
}

// A rewrite that commits between pages (a series not asked for, its chunks replaced by one
// of other values) leaves what is passed on of that series one snapshot or the other, never
// a mix: the series a page's end cut, rewritten before the next page, is not passed on;
// those read whole before it are, as they were.
func TestReadByKeyRangeSpillAcrossRewrite(t *testing.T) {
	day := 20_000 * histDayUnits
	from, to := day, day+2*histDayUnits
	l := histLayout(t)
	m, series := keyRangeTable(t, rand.New(rand.NewPCG(17, 18)), 40, 0)
	sorted := slices.SortedFunc(slices.Values(series), partkey.Compare)
	sel := everyNth(sorted, 2)
	// The rows the range reads, in key order: the page's size puts its end inside a
	// series not asked for (target).
	f := l.KeyRangeFilter(partkey.Escape(sorted[0]), partkey.Escape(sorted[len(sorted)-1]), from, to)
	var owners []string
	for _, r := range m.rows {
		if f.Eval(map[string]string{"PartitionKey": r.pk, "RowKey": r.rk, "L": r.last}) {
			name, _, _ := partkey.Split(l.Format, []byte(r.pk))
			owners = append(owners, name)
		}
	}
	target := ""
	for i := len(owners) / 3; i < len(owners)-1 && target == ""; i++ {
		if owners[i] == owners[i+1] && !slices.Contains(sel, owners[i]) {
			target, m.pageSize = owners[i], i+1
		}
	}
	if target == "" {
		t.Fatal("no series not asked for spans two rows")
	}
	before := wantSamples(t, m, series, from, to)
	var rewritten []histenc.Sample // the same times, other values: a rewrite
	for _, smp := range before[target] {
		rewritten = append(rewritten, intSample(smp.Unit, 5))
	}
	m.afterPage = func(p int) {
		if p != 1 {
			return
		}
		var keys [][2]string
		for _, r := range m.rows {
			if name, _, _ := partkey.Split(l.Format, []byte(r.pk)); name == target {
				keys = append(keys, [2]string{r.pk, r.rk})
			}
		}
		for _, k := range keys {
			m.remove(k[0], k[1])
		}
		m.put(histRows(l, target, rewritten, 9)...)
	}
	got, spilled, _ := spillRead(t, m, sel, from, to, nil)
	sameSamples(t, got, wantSamples(t, m, sel, from, to))
	if s, ok := spilled[target]; ok {
		t.Fatalf("the series cut by the page's end and rewritten passed on: %d samples", len(s))
	}
	// The others passed on as they were: those the first page held whole among them.
	first := map[string]bool{}
	for _, o := range owners[:m.pageSize] {
		first[o] = o != target && !slices.Contains(sel, o)
	}
	n := 0
	for name, whole := range first {
		if whole {
			n++
			sameSamples(t, map[string][]histenc.Sample{name: spilled[name]}, map[string][]histenc.Sample{name: before[name]})
		}
	}
	if n == 0 {
		t.Fatal("the first page held no series not asked for whole")
	}
}
