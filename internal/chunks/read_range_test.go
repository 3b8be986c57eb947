package chunks

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/filter"
	"github.com/seed71701133/tablets/internal/histenc"
	"github.com/seed71701133/tablets/internal/partkey"
)

// keyRangeTable is a table of n series (tsdb's keys, one needing escaping) over three days,
// each with chunks of a few samples written at two priorities (a later write of some times
// winning), some across midnight. It returns the table and the series.
func keyRangeTable(t *testing.T, rng *rand.Rand, n, pageSize int) (*memTable, []string) {
	l := histLayout(t)
	day := 20_000 * histDayUnits
	m := &memTable{pageSize: pageSize}
	series := make([]string, n)
	for i := range series {
		series[i] = fmt.Sprintf("l%032x", rng.Uint64())
	}
	series[n/2] = "O'Brien|a~b" // escaped in its keys
	const minute = 60_000
	for _, s := range series {
		var first []histenc.Sample
		for u := day + 20*60*minute + rng.Uint64N(minute); u < day+2*histDayUnits+4*60*minute; u += 7 * minute {
			first = append(first, intSample(u, 1))
		}
		l2 := l
		l2.MaxChunk = 40 + rng.IntN(200) // a few samples a chunk: many chunks a partition
		var later []histenc.Sample
		for _, smp := range first {
			if rng.IntN(5) == 0 {
				later = append(later, intSample(smp.Unit, 2))
			}
		}
		m.put(histRows(l2, s, first, 1)...)
		m.put(histRows(l2, s, later, 2)...)
	}
	return m, series
}

// readAll reads names with ReadMany (by key range where byRange), and returns each series'
// samples as emitted, and the pages the table served.
func readAll(t *testing.T, m *memTable, names []string, from, to uint64, byRange bool) (map[string][]histenc.Sample, int) {
	t.Helper()
	table := Table[histenc.Sample]{Client: m, Layout: histLayout(t), Concurrency: 4}
	ctx := context.Background()
	if byRange {
		ctx = WithKeyRange(ctx)
	}
	before := m.pages
	got := map[string][]histenc.Sample{}
	err := table.ReadMany(ctx, names, from, to, func(i int, u uint64, s histenc.Sample) bool {
		if s.Unit != u {
			t.Fatalf("unit %d, sample's %d", u, s.Unit)
		}
		got[names[i]] = append(got[names[i]], s)
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	return got, m.pages - before
}

// want is what a read of names in [from, to) returns, from the table's rows: each time's
// sample of the highest priority, oldest first.
func wantSamples(t *testing.T, m *memTable, names []string, from, to uint64) map[string][]histenc.Sample {
	l := histLayout(t)
	type best struct {
		prio uint64
		s    histenc.Sample
	}
	all := map[string]map[uint64]best{}
	for _, r := range m.rows {
		name, _, err := partkey.Split(l.Format, []byte(r.pk))
		if err != nil || !slices.Contains(names, name) {
			continue
		}
		_, prio, _ := l.ParseRowKey([]byte(r.rk))
		e := entity.Entity{AllowStrings: true}
		if err := e.Decode(r.body); err != nil {
			t.Fatal(err)
		}
		c, err := l.Decode(&e, true)
		if err != nil {
			t.Fatal(err)
		}
		if all[name] == nil {
			all[name] = map[uint64]best{}
		}
		if err := l.Values(c, from, to, func(u uint64, s histenc.Sample) {
			if b, ok := all[name][u]; !ok || prio > b.prio {
				all[name][u] = best{prio, s}
			}
		}); err != nil {
			t.Fatal(err)
		}
	}
	out := map[string][]histenc.Sample{}
	for name, byUnit := range all {
		for _, u := range slices.Sorted(maps.Keys(byUnit)) {
			out[name] = append(out[name], byUnit[u].s)
		}
	}
	return out
}

func sameSamples(t *testing.T, got, want map[string][]histenc.Sample) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d series read, want %d", len(got), len(want))
	}
	for name, w := range want {
		g := got[name]
		if len(g) != len(w) {
			t.Fatalf("%s: %d samples, want %d", name, len(g), len(w))
		}
		for i := range w {
			if g[i].Unit != w[i].Unit || g[i].H.Count != w[i].H.Count {
				t.Fatalf("%s: sample %d at %d holds %d, want %d at %d", name, i, g[i].Unit, g[i].H.Count, w[i].H.Count, w[i].Unit)
			}
		}
	}
}

// TestReadManyByKeyRange: a read by key range returns what the clauses return (every
// selected series' samples in the range, the latest write of a time winning, nothing of the
// series not asked for), whatever the pages' cuts, in far fewer requests for a dense
// selection; a sparse one falls back to the clauses within a page.
func TestReadManyByKeyRange(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	day := 20_000 * histDayUnits
	hour := uint64(3_600_000)
	ranges := []struct {
		name     string
		from, to uint64
	}{
		{"an hour", day + 22*hour, day + 23*hour},
		{"across midnight", day + 23*hour, day + histDayUnits + 2*hour},
		{"two days", day, day + 2*histDayUnits},
		{"to a day's end", day + histDayUnits + 5*hour, day + 2*histDayUnits},
	}
	for _, pageSize := range []int{7, 1000} {
		m, series := keyRangeTable(t, rng, 60, pageSize)
		selections := map[string][]string{
			"dense":  {},
			"sparse": series[:MinKeyRange],
		}
		for i, s := range series {
			if i%5 != 0 { // 4 in 5
				selections["dense"] = append(selections["dense"], s)
			}
		}
		// The sparse selection's range spans the table: the selected first and last by key.
		sorted := slices.SortedFunc(slices.Values(series), partkey.Compare)
		selections["sparse"] = append(selections["sparse"][:MinKeyRange-2], sorted[0], sorted[len(sorted)-1])
		for _, r := range ranges {
			for name, sel := range selections {
				t.Run(fmt.Sprintf("page=%d/%s/%s", pageSize, r.name, name), func(t *testing.T) {
					want := wantSamples(t, m, sel, r.from, r.to)
					got, rangePages := readAll(t, m, sel, r.from, r.to, true)
					sameSamples(t, got, want)
					clauses, clausePages := readAll(t, m, sel, r.from, r.to, false)
					sameSamples(t, clauses, want)
					t.Logf("%d pages by key range, %d by clauses", rangePages, clausePages)
					if pageSize == 1000 && name == "dense" && rangePages*4 > clausePages {
						t.Errorf("%d pages by key range, %d by clauses: want a quarter at most", rangePages, clausePages)
					}
					if name == "sparse" && rangePages > clausePages+(4*keyRangeSlack+pageSize-1)/pageSize+1 {
						t.Errorf("%d pages by key range, %d by clauses: a sparse range costs more than the pages to its slack", rangePages, clausePages)
					}
				})
			}
		}
	}
}

// The filter of a key range selects, in whichever partition, exactly the chunks holding a
// time of the range of the series whose keys lie in it: what their clauses select.
func TestKeyRangeFilter(t *testing.T) {
	l := histLayout(t)
	day := 20_000 * histDayUnits
	hour := uint64(3_600_000)
	series := []string{"a", "b|c", "b~", "bb", "c"}
	first, last := partkey.Escape("b|c"), partkey.Escape("bb")
	from, to := day+23*hour, day+histDayUnits+hour
	f := l.KeyRangeFilter(first, last, from, to)
	if f.Comparisons() != 4 {
		t.Fatalf("%d comparisons: %s", f.Comparisons(), f)
	}
	for _, s := range series {
		inRange := partkey.Compare(s, "b|c") >= 0 && partkey.Compare(s, "bb") <= 0
		clauses := filter.Or(l.Clauses(s, from, to)...)
		for _, d := range []uint64{day - histDayUnits, day, day + histDayUnits, day + 2*histDayUnits} {
			for firstU := d; firstU < d+histDayUnits; firstU += hour / 2 {
				for _, span := range []uint64{0, hour / 4, 3 * hour} {
					lastU := min(firstU+span, d+histDayUnits-1)
					props := map[string]string{
						"PartitionKey": l.PartitionKey(partkey.Escape(s), firstU),
						"RowKey":       l.RowKey(firstU, 1, []byte("x")),
						"L":            l.Key(lastU),
					}
					if got, want := f.Eval(props), inRange && clauses.Eval(props); got != want {
						t.Fatalf("%s chunk [%d, %d]: the range selects it %v, want %v", s, firstU-day, lastU-day, got, want)
					}
				}
			}
		}
	}
}

// A read by key range across a compaction that commits between its pages (a series' chunks
// replaced by one) neither hides a sample nor shows one twice.
func TestReadByKeyRangeAcrossCompaction(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	day := 20_000 * histDayUnits
	m, series := keyRangeTable(t, rng, 40, 5)
	from, to := day, day+2*histDayUnits
	want := wantSamples(t, m, series, from, to)
	l := histLayout(t)
	target := slices.SortedFunc(slices.Values(series), partkey.Compare)[1] // read early, cut
	m.afterPage = func(page int) {
		if page != 2 {
			return
		}
		var pks []string
		for _, r := range m.rows {
			if name, _, _ := partkey.Split(l.Format, []byte(r.pk)); name == target {
				pks = append(pks, r.pk, r.rk)
			}
		}
		for i := 0; i < len(pks); i += 2 {
			m.remove(pks[i], pks[i+1])
		}
		m.put(histRows(l, target, want[target], 9)...)
	}
	got, _ := readAll(t, m, series, from, to, true)
	sameSamples(t, got, want)
}

// A sparse range (16 series of 400, the first and last by key among them) gives up the
// range after about its slack of chunks not asked for, and reads the rest by clauses: the
// same samples, for a few pages more than the clauses alone, far fewer than the range's.
func TestReadByKeyRangeSparse(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	day := 20_000 * histDayUnits
	const pageSize = 50
	m, series := keyRangeTable(t, rng, 400, pageSize)
	sorted := slices.SortedFunc(slices.Values(series), partkey.Compare)
	sel := []string{sorted[0], sorted[len(sorted)-1]}
	for _, i := range rng.Perm(len(series))[:MinKeyRange-2] {
		if !slices.Contains(sel, series[i]) {
			sel = append(sel, series[i])
		}
	}
	from, to := day+20*3_600_000, day+histDayUnits+3_600_000
	want := wantSamples(t, m, sel, from, to)
	got, rangePages := readAll(t, m, sel, from, to, true)
	sameSamples(t, got, want)
	_, clausePages := readAll(t, m, sel, from, to, false)
	inRange := 0
	f := histLayout(t).KeyRangeFilter(partkey.Escape(sorted[0]), partkey.Escape(sorted[len(sorted)-1]), from, to)
	for _, r := range m.rows {
		if f.Eval(map[string]string{"PartitionKey": r.pk, "RowKey": r.rk, "L": r.last}) {
			inRange++
		}
	}
	t.Logf("%d pages, %d by clauses, the whole range %d", rangePages, clausePages, inRange/pageSize)
	if rangePages >= inRange/pageSize/2 {
		t.Errorf("%d pages: the read did not give up a range of %d pages", rangePages, inRange/pageSize)
	}
	if rangePages > clausePages+keyRangeSlack/pageSize+2 {
		t.Errorf("%d pages, %d by clauses: the range cost more than its slack", rangePages, clausePages)
	}
}

// A read by key range that its consumer stops stops: no error, nothing after.
func TestReadByKeyRangeStops(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	day := 20_000 * histDayUnits
	m, series := keyRangeTable(t, rng, 40, 9)
	table := Table[histenc.Sample]{Client: m, Layout: histLayout(t), Concurrency: 4}
	for _, stopAt := range []int{1, 50, 500} {
		n := 0
		err := table.ReadMany(WithKeyRange(context.Background()), series, day, day+2*histDayUnits, func(int, uint64, histenc.Sample) bool {
			n++
			return n < stopAt
		})
		if err != nil || n != stopAt {
			t.Fatalf("stopped at %d: %d samples emitted (%v)", stopAt, n, err)
		}
	}
}
