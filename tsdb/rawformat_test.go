package tsdb

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/testkit/azurite"
	"github.com/seed71701133/tablets/tsdb/internal/naming"
)

// Two processes open a new database at once. The second read the catalog's formats before
// the first recorded the raw format, and lists the raw tables after the first made one: it
// chooses the recorded format all the same, not the layout of a database made before the
// record (whose points no reader of this one would find). A raw table with no record is
// still such a database.
func TestChooseLayoutBesideAMaker(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	ctx := context.Background()
	checker := azurite.NewChecker(nil, func(v string) { t.Errorf("Azure limit violated: %s", v) })
	svc, err := azurite.Shared(t).NewServiceClient(&aztables.ClientOptions{ClientOptions: policy.ClientOptions{Transport: checker}})
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("race%d", rand.Uint32())
	names := naming.Names{Base: name, Period: DefaultRawPeriod}
	now := time.Now()
	t.Cleanup(func() {
		for _, table := range []string{names.Catalog(), names.Staging(), names.RawTable(names.PeriodOf(now)), names.IndexTable(names.PeriodOf(now))} {
			_, _ = svc.DeleteTable(context.Background(), table, nil)
		}
	})
	catalog := svc.NewClient(names.Catalog())
	if err := tablets.EnsureTable(ctx, catalog); err != nil {
		t.Fatal(err)
	}
	before, err := readFormats(ctx, catalog) // the second process's read: nothing recorded
	if err != nil {
		t.Fatal(err)
	}
	// The first process makes the database and writes a series' points: its raw table.
	first, err := Open(ctx, svc, name, &Options{Tiers: []Tier{}})
	if err != nil {
		t.Fatal(err)
	}
	pts := make([]tablets.Point, 200) // direct: a raw table
	for i := range pts {
		pts[i] = tablets.Point{Time: now.Add(time.Duration(i-len(pts)) * time.Second), Value: float64(i)}
	}
	if err := first.WriteMany(ctx, []SeriesPoints{{Series: "s", Points: pts}}); err != nil {
		t.Fatal(err)
	}
	if legacy, err := hasRawTables(ctx, svc, name); err != nil || !legacy {
		t.Fatalf("the first process made no raw table: %v", err)
	}
	layout, err := chooseLayout(ctx, svc, name, catalog, before, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s, err := offlineStore(name, layout); err != nil || !isChunkedMillisecond(s) {
		t.Fatalf("the second process chose %T (%v), not the recorded format", s, err)
	}

	// A database made before the record: a raw table, no record.
	old := fmt.Sprintf("old%d", rand.Uint32())
	oldNames := naming.Names{Base: old, Period: DefaultRawPeriod}
	t.Cleanup(func() {
		for _, table := range []string{oldNames.Catalog(), oldNames.RawTable(0)} {
			_, _ = svc.DeleteTable(context.Background(), table, nil)
		}
	})
	oldCatalog := svc.NewClient(oldNames.Catalog())
	for _, c := range []*aztables.Client{oldCatalog, svc.NewClient(oldNames.RawTable(0))} {
		if err := tablets.EnsureTable(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	layout, err = chooseLayout(ctx, svc, old, oldCatalog, formatRecords{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s, err := offlineStore(old, layout); err != nil || isChunkedMillisecond(s) {
		t.Fatalf("a database made before the record opened as %T (%v)", s, err)
	}
}
