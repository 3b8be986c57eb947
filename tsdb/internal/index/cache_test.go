package index

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/seed71701133/tablets/tsdb/internal/changelog"
	"github.com/seed71701133/tablets/tsdb/internal/labels"
	"github.com/seed71701133/tablets/tsdb/internal/naming"
)

// A read of a cached query whose matchers name the metric alone takes every entry, making
// room for them once; one with another matcher takes those it matches, the Histograms flag of an
// entry already found joining it.
func TestReadCachedMatches(t *testing.T) {
	x := &Index{names: naming.Names{Base: "db", Period: 24 * time.Hour}, cache: NewCache(64 << 20)}
	const p, n = 86400, 5000
	entries := make([]SeriesInfo, n)
	for i := range entries {
		entries[i] = SeriesInfo{Series: fmt.Sprintf("k%05d", i), Labels: labels.FromStrings(labels.MetricName, "m", "i", fmt.Sprintf("%05d", i), "odd", fmt.Sprint(i%2)), Histograms: i == 3}
	}
	const f = "PartitionKey eq 'nm'"
	x.cache.sets.Add(setsKey{x.names.IndexTable(p), f}, cachedSets{entries: entries})
	compile := func(ms ...labels.Matcher) []labels.Compiled {
		c, err := labels.Compile(ms, true)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	byName := compile(labels.Matcher{Type: labels.MatchEqual, Name: labels.MetricName, Value: "m"})
	var found []SeriesInfo
	read := func(ms []labels.Compiled, at map[string]int) {
		if err := x.readCached(context.Background(), p, changelog.State{}, f, ms, &found, at); err != nil {
			t.Fatal(err)
		}
	}
	// The copies' array once, and the lookup's own (3 in all); grown a doubling at a time,
	// 19.
	if allocs := testing.AllocsPerRun(5, func() { found = nil; read(byName, nil) }); allocs > 5 {
		t.Errorf("%v allocations reading %d entries by the metric's name", allocs, n)
	}
	if len(found) != n || found[n-1].Series != entries[n-1].Series || !found[3].Histograms {
		t.Fatalf("found %d entries, want %d as cached", len(found), n)
	}

	found = []SeriesInfo{{Series: "k00001", Labels: entries[1].Labels}, {Series: "k00003", Labels: entries[3].Labels}}
	read(compile(labels.Matcher{Type: labels.MatchEqual, Name: labels.MetricName, Value: "m"}, labels.Matcher{Type: labels.MatchEqual, Name: "odd", Value: "1"}),
		map[string]int{"k00001": 0, "k00003": 1})
	if len(found) != n/2 || !found[1].Histograms {
		t.Fatalf("found %d entries with odd=1, want %d, k00003 flagged", len(found), n/2)
	}
	for _, e := range found {
		if e.Labels.Get("odd") != "1" {
			t.Fatalf("%s found, with odd=%s", e.Series, e.Labels.Get("odd"))
		}
	}
}
