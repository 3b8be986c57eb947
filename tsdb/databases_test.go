package tsdb

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/testkit/tablefake"
)

// Databases lists the databases under a prefix from their catalogs alone, whoever made them,
// in one request; Exists answers for one database in one request and creates nothing.
func TestDatabasesAndExists(t *testing.T) {
	ctx := context.Background()
	fake := tablefake.New()
	svc := fakeService(t, fake)
	for _, name := range []string{"basex1", "basexteama", "basexteamam", "base"} {
		if _, err := Open(ctx, svc, name, nil); err != nil {
			t.Fatal(err)
		}
	}
	// Tables of those databases that are not catalogs, and tables outside the range.
	for _, name := range []string{"basexteamar1716422400", "basexteamaw", "basexteamat3600p1698278400",
		"basexteamai1716422400", "basexteamah1716422400", "basew", "basey1m", "basxm", "basexm"} {
		fake.CreateTable(name)
	}
	before := fake.Stats()
	got, err := Databases(ctx, svc, "basex")
	if err != nil {
		t.Fatal(err)
	}
	// "basex" itself: a database of that name would be named by "basexm", and is one.
	want := []string{"basex", "basex1", "basexteama", "basexteamam"}
	if !slices.Equal(got, want) {
		t.Errorf("Databases: %q, want %q", got, want)
	}
	if d := fake.Stats().TableLists - before.TableLists; d != 1 {
		t.Errorf("Databases listed %d times, want 1", d)
	}

	tables := fake.Tables()
	for name, want := range map[string]bool{"basexteama": true, "basexteamam": true, "base": true,
		"basexteamb": false, "basexteam": false, "basexteamar": false} {
		before := fake.Stats()
		got, err := Exists(ctx, svc, name)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("Exists(%s) = %v, want %v", name, got, want)
		}
		if d := fake.Stats().Requests - before.Requests; d != 1 {
			t.Errorf("Exists(%s) sent %d requests, want 1", name, d)
		}
	}
	if !slices.Equal(fake.Tables(), tables) {
		t.Error("Exists created tables")
	}

	before = fake.Stats()
	for _, prefix := range []string{"", "1abc", "a-b", "abcdefghijabcdefghijabcdefghijabcdefghij1"} {
		if _, err := Databases(ctx, svc, prefix); !errors.Is(err, tablets.ErrInvalidOptions) {
			t.Errorf("Databases(%q): %v, want ErrInvalidOptions", prefix, err)
		}
	}
	for _, name := range []string{"ab", "a-bc", "9abc"} {
		if _, err := Exists(ctx, svc, name); !errors.Is(err, tablets.ErrInvalidOptions) {
			t.Errorf("Exists(%q): %v, want ErrInvalidOptions", name, err)
		}
	}
	if d := fake.Stats().Requests - before.Requests; d != 0 {
		t.Errorf("bad arguments sent %d requests", d)
	}
}
