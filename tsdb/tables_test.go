package tsdb

import (
	"context"
	"testing"
	"time"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/testkit/clock"
	"github.com/seed71701133/tablets/internal/testkit/tablefake"
	"github.com/seed71701133/tablets/tsdb/internal/tables"
)

func queryAll(t *testing.T, db *DB, series string, from, to time.Time) {
	t.Helper()
	for _, err := range db.Query(context.Background(), series, from, to) {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// Reads do not list the tables: the periods a DB made or found are read directly; a period
// it does not know is queried directly when the range holds one or two such, and a listing
// (one request a minute at most) answers for wider ranges.
func TestReadsUseTheTableCache(t *testing.T) {
	ctx := context.Background()
	fake := tablefake.New()
	base := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	clock := clock.New(base.Add(10 * time.Minute))
	// The advanced layout (of databases made before the format record), which reads no
	// staging table: the counts are the raw tables' alone.
	opts := &Options{RawPeriod: time.Hour, Tiers: []Tier{}, Now: clock.Now, Layout: legacyLayout}
	db := openFake(t, fake, opts)
	if err := db.Write(ctx, "cpu", tablets.Point{Time: base.Add(time.Minute), Value: 1}); err != nil {
		t.Fatal(err)
	}
	cost := func(what string, want tablefake.Stats, read func()) {
		t.Helper()
		before := fake.Stats()
		read()
		after := fake.Stats()
		got := tablefake.Stats{Requests: after.Requests - before.Requests, TableLists: after.TableLists - before.TableLists,
			Queries: after.Queries - before.Queries, NotFound: after.NotFound - before.NotFound}
		if got != want {
			t.Errorf("%s: %+v, want %+v", what, got, want)
		}
	}
	// The period written and the next (made ahead) are known: one query.
	cost("a known period", tablefake.Stats{Requests: 1, Queries: 1}, func() { queryAll(t, db, "cpu", base, base.Add(time.Hour)) })
	cost("two known periods", tablefake.Stats{Requests: 2, Queries: 2}, func() { queryAll(t, db, "cpu", base, base.Add(2*time.Hour)) })

	// Another process backfills an old period: a range with that one unknown period queries it
	// directly, and sees it at once.
	other := openFake(t, fake, opts)
	if err := other.Write(ctx, "cpu", tablets.Point{Time: base.Add(-5 * time.Hour), Value: 2}); err != nil {
		t.Fatal(err)
	}
	old := base.Add(-5 * time.Hour)
	cost("an unknown period: probed", tablefake.Stats{Requests: 1, Queries: 1}, func() { queryAll(t, db, "cpu", old, old.Add(time.Hour)) })
	if !db.tables.Known(rawKind, db.names.PeriodOf(old)) {
		t.Fatal("the table a probe found is not remembered")
	}
	// A period with no table: probed, TableNotFound is an empty period.
	cost("a period without a table", tablefake.Stats{Requests: 1, Queries: 1, NotFound: 1}, func() {
		queryAll(t, db, "cpu", base.Add(-2*time.Hour), base.Add(-time.Hour))
	})

	// Ten hours of which one is known (the backfilled one): one listing, then the tables it
	// found (the backfilled period's, and the next one's its write made ahead).
	wide := func() { queryAll(t, db, "cpu", base.Add(-10*time.Hour), base) }
	cost("a wide range: listed", tablefake.Stats{Requests: 3, TableLists: 1, Queries: 2}, wide)
	cost("a wide range within the minute", tablefake.Stats{Requests: 2, Queries: 2}, wide)
	clock.Add(tables.ListTTL)
	cost("a wide range a minute later: listed again", tablefake.Stats{Requests: 3, TableLists: 1, Queries: 2}, wide)

	// A table dropped by another process: the read that finds it gone forgets it.
	fake.DeleteTable(db.names.RawTable(db.names.PeriodOf(base)))
	cost("a dropped table", tablefake.Stats{Requests: 1, Queries: 1, NotFound: 1}, func() { queryAll(t, db, "cpu", base, base.Add(time.Hour)) })
	if db.tables.Known(rawKind, db.names.PeriodOf(base)) {
		t.Fatal("a table found gone is still believed to exist")
	}

	// Latest and RawFrom: the cached list while it is fresh.
	clock.Add(tables.ListTTL)
	cost("RawFrom after a minute: listed", tablefake.Stats{Requests: 1, TableLists: 1}, func() {
		from, ok, err := db.RawFrom(ctx)
		if err != nil || !ok || !from.Equal(old) {
			t.Fatalf("RawFrom: %v %v %v, want %v", from, ok, err, old)
		}
	})
	cost("RawFrom again: cached", tablefake.Stats{}, func() {
		if _, _, err := db.RawFrom(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// Select reads the index of each period of its range, without listing the tables.
func TestSelectUsesTheTableCache(t *testing.T) {
	ctx := context.Background()
	fake := tablefake.New()
	base := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	clock := clock.New(base.Add(10 * time.Minute))
	db := openFake(t, fake, &Options{RawPeriod: time.Hour, Tiers: []Tier{}, Now: clock.Now})
	keys, err := db.SeriesOfMany(ctx, []Labels{LabelsFromStrings(MetricName, "up", "job", "api")})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Write(ctx, keys[0], tablets.Point{Time: base, Value: 1}); err != nil {
		t.Fatal(err)
	}
	before := fake.Stats()
	for _, err := range db.Select(ctx, base, base.Add(time.Hour), Matcher{Type: MatchEqual, Name: MetricName, Value: "up"}) {
		if err != nil {
			t.Fatal(err)
		}
	}
	after := fake.Stats()
	if after.Requests-before.Requests != 1 || after.Queries-before.Queries != 1 {
		t.Fatalf("Select of one known period: %d requests (%d queries), want the index query alone",
			after.Requests-before.Requests, after.Queries-before.Queries)
	}
}
