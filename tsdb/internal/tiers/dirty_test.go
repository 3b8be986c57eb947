package tiers

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/testkit/azurite"
	"github.com/seed71701133/tablets/tsdb/internal/times"
)

// The dirty markers read for some series are theirs only, of the slices asked for; read
// for all, every marker of the range.
func TestReadDirtyOf(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	ctx := context.Background()
	tr, _ := catalogTiers(t, "dirtyof", now)
	slice := tr.Slice()
	if slice == 0 {
		t.Fatal("no tiers: nothing is marked dirty")
	}
	late := []tablets.Point{{Time: now.Add(-30 * time.Hour), Value: 1}, {Time: now.Add(-6 * time.Hour), Value: 2}}
	for _, s := range []string{"a", "b", "c"} {
		if err := tr.FlagStale(ctx, s, late); err != nil {
			t.Fatal(err)
		}
	}
	lo, hi := times.FloorSec(times.Unix(now.Add(-48*time.Hour)), slice), times.Unix(now)
	keys := func(m map[dirtyKey]string) []string {
		var out []string
		for k := range m {
			out = append(out, k.series+"@"+time.Unix(int64(k.slice), 0).UTC().Format("01-02 15:04"))
		}
		slices.Sort(out)
		return out
	}
	slot := func(t time.Time) string {
		return time.Unix(int64(times.FloorSec(times.Unix(t), slice)), 0).UTC().Format("01-02 15:04")
	}
	all, err := tr.ReadDirty(ctx, lo, hi)
	if err != nil {
		t.Fatal(err)
	}
	if got := keys(tagsOf(all)); len(got) != 6 {
		t.Fatalf("all markers: %v, want 3 series in 2 slices", got)
	}
	some, err := tr.readDirtyOf(ctx, lo, hi, map[string]bool{"b": true, "z": true})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"b@" + slot(late[0].Time), "b@" + slot(late[1].Time)}
	if got := keys(tagsOf(some)); !slices.Equal(got, want) {
		t.Fatalf("markers of b: %v, want %v", got, want)
	}
	for k, tag := range some {
		if tag == "" || tag != all[k] {
			t.Errorf("marker %v: ETag %q, read for all %q", k, tag, all[k])
		}
	}
	first, err := tr.readDirtyOf(ctx, lo, times.FloorSec(times.Unix(late[1].Time), slice), map[string]bool{"b": true})
	if err != nil {
		t.Fatal(err)
	}
	if got := keys(tagsOf(first)); !slices.Equal(got, want[:1]) {
		t.Fatalf("markers of b before its second slice: %v, want %v", got, want[:1])
	}
}

// catalogTiers is testTiers of a new database named prefix and a random number, with its
// catalog made (as Open makes it, and dropped when the test ends), through a Checker.
func catalogTiers(t *testing.T, prefix string, now time.Time) (*Tiers, *azurite.Checker) {
	t.Helper()
	name := fmt.Sprintf("%s%d", prefix, rand.Uint32())
	checker := azurite.NewChecker(nil, func(v string) { t.Errorf("Azure limit violated: %s", v) })
	svc, err := azurite.Shared(t).NewServiceClient(&aztables.ClientOptions{ClientOptions: policy.ClientOptions{Transport: checker}})
	if err != nil {
		t.Fatal(err)
	}
	tr := testTiers(t, svc, name, now)
	if err := tablets.EnsureTable(context.Background(), svc.NewClient(tr.names.Catalog())); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = svc.DeleteTable(context.Background(), tr.names.Catalog(), nil) })
	return tr, checker
}

func tagsOf[T ~string](m map[dirtyKey]T) map[dirtyKey]string {
	out := make(map[dirtyKey]string, len(m))
	for k, v := range maps.All(m) {
		out[k] = string(v)
	}
	return out
}

// DeleteDirty after another process deleted some of the markers and a late write rewrote
// others: it deletes the rest, leaves the rewritten ones, and sends a few requests a
// transaction (its delete, the read of its markers again, its delete of those still as
// read), not one a marker (250 markers: 9 requests, where sending each again was 253).
func TestDeleteDirtyAfterAnother(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	ctx := context.Background()
	tr, checker := catalogTiers(t, "dirtydel", now)
	late := []tablets.Point{{Time: now.Add(-6 * time.Hour), Value: 1}}
	series := make([]string, 250)
	for i := range series {
		series[i] = fmt.Sprintf("s%03d", i)
		if err := tr.FlagStale(ctx, series[i], late); err != nil {
			t.Fatal(err)
		}
	}
	all := times.Unix(tablets.MaxTime) + 1
	read, err := tr.ReadDirty(ctx, 0, all)
	if err != nil || len(read) != len(series) {
		t.Fatalf("%d markers read, %v; want %d", len(read), err, len(series))
	}
	// Another process deletes every other marker, and a late write rewrites every tenth of
	// the others.
	others, rewritten := Markers{}, map[string]bool{}
	for k, etag := range read {
		var i int
		if _, err := fmt.Sscanf(k.series, "s%d", &i); err != nil {
			t.Fatal(err)
		}
		switch {
		case i%2 == 0:
			others[k] = etag
		case i%10 == 1:
			rewritten[k.series] = true
			if err := tr.FlagStale(ctx, k.series, late); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n, err := tr.DeleteDirty(ctx, others); err != nil || n != len(others) {
		t.Fatalf("the other process deleted %d, %v; want %d", n, err, len(others))
	}

	checker.Reset()
	n, err := tr.DeleteDirty(ctx, read)
	if err != nil {
		t.Fatal(err)
	}
	if want := len(series) - len(others) - len(rewritten); n != want {
		t.Errorf("deleted %d markers, want %d", n, want)
	}
	if got := checker.Stats().Requests; got != 9 {
		t.Errorf("%d requests, want 9 (3 transactions, each sent, its markers read again, sent again)", got)
	}
	left, err := tr.ReadDirty(ctx, 0, all)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for k := range left {
		got = append(got, k.series)
	}
	slices.Sort(got)
	if want := slices.Sorted(maps.Keys(rewritten)); !slices.Equal(got, want) {
		t.Errorf("markers left %v, want the rewritten ones %v", got, want)
	}
}
