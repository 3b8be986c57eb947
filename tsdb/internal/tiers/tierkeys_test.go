package tiers

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/seed71701133/tablets/internal/blockenc"
)

// The filters of both layouts select, of a table of blocks, every block of the series they
// are for in the range of starts asked: a group's exactly those, a scan's those and maybe
// others (between the series, which a reader drops); every filter holds at most 15
// comparisons. The keys parse back to the series and start.
func TestTierKeysFilters(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var names []string
	for i := range 60 {
		names = append(names, fmt.Sprintf("l%032x", rng.Uint64()))
		if i%6 == 0 {
			names = append(names, []string{"a", "ab", "a|b", "cpu", "cpu_total", "é€", fmt.Sprintf("m%d", i)}[i/6%7])
		}
	}
	names = slices.Compact(slices.Sorted(slices.Values(names)))
	const day = 86400
	starts := []uint64{10 * day, 11 * day, 12 * day, 13 * day}
	for _, layout := range []Layout{LayoutSeries, LayoutPacked} {
		k := tierKeys{layout: layout}
		type block struct {
			series string
			start  uint64
			props  map[string]string
		}
		var table []block
		for _, s := range names {
			for _, st := range starts {
				pk, rk := k.keys(s, st)
				got, gst, ok := k.parse(pk, rk)
				if !ok || got != s || gst != st {
					t.Fatalf("layout %d: keys %q %q parse as %q %d %v", layout, pk, rk, got, gst, ok)
				}
				props := map[string]string{"PartitionKey": pk, "RowKey": rk}
				if layout == LayoutPacked {
					props[blockenc.PropStart] = blockKey(st)
				}
				table = append(table, block{s, st, props})
			}
		}
		blo, bhi := 11*uint64(day), 13*uint64(day)
		for _, n := range []int{1, 3, 6, 7, 14, 40, len(names)} {
			asked := names[:0:0]
			for _, i := range rng.Perm(len(names))[:n] {
				asked = append(asked, names[i])
			}
			want := map[string]bool{}
			for _, s := range asked {
				want[s] = true
			}
			check := func(what string, names []string, f interface {
				Eval(map[string]string) bool
				Comparisons() int
			}, exact bool) {
				t.Helper()
				if f.Comparisons() > 15 {
					t.Errorf("layout %d, %s of %d: %d comparisons", layout, what, len(names), f.Comparisons())
				}
				in := map[string]bool{}
				for _, s := range names {
					in[s] = true
				}
				for _, b := range table {
					asked := in[b.series] && b.start >= blo && b.start < bhi
					got := f.Eval(b.props)
					if asked && !got {
						t.Errorf("layout %d, %s of %d: misses %q at %d", layout, what, len(names), b.series, b.start)
					}
					if exact && got && !asked {
						t.Errorf("layout %d, %s of %d: selects %q at %d", layout, what, len(names), b.series, b.start)
					}
					if !exact && got && (b.start < blo || b.start >= bhi) {
						t.Errorf("layout %d, %s of %d: selects %q at %d, out of range", layout, what, len(names), b.series, b.start)
					}
				}
			}
			var grouped []string
			for _, g := range k.groups(asked) {
				check("group", g, k.groupFilter(g, blo, bhi), true)
				grouped = append(grouped, g...)
			}
			slices.Sort(grouped)
			if !slices.Equal(grouped, slices.Sorted(slices.Values(asked))) {
				t.Errorf("layout %d: groups of %d hold %d", layout, len(asked), len(grouped))
			}
			check("scan", asked, k.scanFilter(asked, blo, bhi), false)
		}
	}
}
