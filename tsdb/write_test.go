package tsdb

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/testkit/clock"
	"github.com/seed71701133/tablets/internal/testkit/tablefake"
)

// rejected maps each series of WriteMany's error to its *tablets.WriteErrors.
func rejected(t *testing.T, err error) map[string][]*tablets.WriteError {
	t.Helper()
	out := map[string][]*tablets.WriteError{}
	if err == nil {
		return out
	}
	multi, ok := err.(interface{ Unwrap() []error })
	if !ok {
		t.Fatalf("not a joined error: %v", err)
	}
	for _, e := range multi.Unwrap() {
		var we *tablets.WriteError
		if !errors.As(e, &we) {
			t.Fatalf("not a *tablets.WriteError: %v", e)
		}
		out[we.Series] = append(out[we.Series], we)
	}
	return out
}

// WriteMany rejects, before any request, a series with a bad name, points with bad times and
// points older than the retention by the clock, each with its sentinel, and writes the rest.
func TestWriteManyRejects(t *testing.T) {
	ctx := context.Background()
	fake := tablefake.New()
	now := time.Date(2025, 3, 1, 12, 30, 0, 0, time.UTC)
	clock := clock.New(now)
	db := openFake(t, fake, &Options{RawPeriod: time.Hour, RawRetention: 24 * time.Hour, Tiers: []Tier{}, Now: clock.Now})
	good := tablets.Point{Time: now.Add(-time.Minute), Value: 1}
	badTime := tablets.Point{Time: time.Date(1960, 1, 1, 0, 0, 0, 0, time.UTC), Value: 2}
	expired := tablets.Point{Time: now.Add(-24*time.Hour - time.Second), Value: 3}
	justIn := tablets.Point{Time: now.Add(-24 * time.Hour), Value: 4}

	// Only rejects: nothing sent.
	before := fake.Stats().Requests
	err := db.WriteMany(ctx, []SeriesPoints{{Series: "a/b", Points: []tablets.Point{good}}, {Series: "x", Points: []tablets.Point{badTime, expired}}})
	if fake.Stats().Requests != before {
		t.Fatalf("%d requests for rejects only", fake.Stats().Requests-before)
	}
	got := rejected(t, err)
	if len(got["a/b"]) != 1 || !errors.Is(got["a/b"][0], tablets.ErrInvalidSeries) || len(got["a/b"][0].Failed) != 1 {
		t.Fatalf("a bad name: %v", got["a/b"])
	}
	if len(got["x"]) != 2 || !errors.Is(got["x"][0], tablets.ErrInvalidTime) || !errors.Is(got["x"][1], ErrExpired) ||
		!slices.Equal(got["x"][0].Failed, []tablets.Point{badTime}) || !slices.Equal(got["x"][1].Failed, []tablets.Point{expired}) {
		t.Fatalf("bad and expired points: %v", got["x"])
	}

	// Mixed: the good points are written, the others named.
	err = db.WriteMany(ctx, []SeriesPoints{
		{Series: "good", Points: []tablets.Point{good, justIn}},
		{Series: "mixed", Points: []tablets.Point{expired, good, badTime}},
		{Series: "bad#name", Points: []tablets.Point{good}},
	})
	got = rejected(t, err)
	if len(got) != 2 || len(got["good"]) != 0 {
		t.Fatalf("rejects: %v", err)
	}
	if len(got["mixed"]) != 2 || !slices.Equal(got["mixed"][0].Failed, []tablets.Point{badTime}) || !slices.Equal(got["mixed"][1].Failed, []tablets.Point{expired}) {
		t.Fatalf("mixed: %v", got["mixed"])
	}
	for _, we := range append(got["mixed"], got["bad#name"]...) {
		if we.Index != -1 || we.Status != 0 || errors.Is(we, tablets.ErrThrottled) {
			t.Fatalf("a reject looks like a service failure: %+v", we)
		}
	}
	// The tables of the good points' periods were made: of the hour now and a day ago.
	tables := strings.Join(fake.Tables(), " ")
	for _, p := range []time.Time{now, justIn.Time} {
		if !strings.Contains(tables, strings.ToLower(db.names.RawTable(db.names.PeriodOf(p)))) {
			t.Errorf("no table %s among %s", db.names.RawTable(db.names.PeriodOf(p)), tables)
		}
	}

	// Write keeps failing whole, before any request.
	before = fake.Stats().Requests
	for _, pts := range [][]tablets.Point{{good, expired}, {badTime, good}} {
		if err := db.Write(ctx, "w", pts...); !errors.Is(err, ErrExpired) && !errors.Is(err, tablets.ErrInvalidTime) {
			t.Fatalf("Write: %v", err)
		}
	}
	far := tablets.Point{Time: now.Add(-20 * time.Hour), Value: 5} // a period never seen: no catalog read either
	if err := db.Write(ctx, "w", far, badTime); !errors.Is(err, tablets.ErrInvalidTime) {
		t.Fatalf("Write: %v", err)
	}
	if err := db.Write(ctx, "w/x", good); !errors.Is(err, tablets.ErrInvalidSeries) {
		t.Fatalf("Write: %v", err)
	}
	if fake.Stats().Requests != before {
		t.Fatal("a Write of bad input sent requests")
	}
}

// The raw retention follows the clock: a point is expired once the clock passes its time
// plus RawRetention, and not before.
func TestRetentionFollowsTheClock(t *testing.T) {
	ctx := context.Background()
	fake := tablefake.New()
	at := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	clock := clock.New(at)
	db := openFake(t, fake, &Options{RawPeriod: time.Hour, RawRetention: 2 * time.Hour, Tiers: []Tier{}, Now: clock.Now})
	p := tablets.Point{Time: at, Value: 1}
	clock.Set(at.Add(2 * time.Hour))
	if err := db.Write(ctx, "s", p); err != nil {
		t.Fatalf("a point exactly RawRetention old: %v", err)
	}
	clock.Set(at.Add(2*time.Hour + time.Nanosecond))
	before := fake.Stats().Requests
	if err := db.Write(ctx, "s", p); !errors.Is(err, ErrExpired) {
		t.Fatalf("a point past RawRetention: %v", err)
	}
	if fake.Stats().Requests != before {
		t.Fatal("an expired write sent requests")
	}
}

// A Write marks dirty the slices of points older than SealDelay less the 5-minute margin, by
// the clock (a transaction of the catalog, whatever the tiers), and sends nothing more for
// newer points; it makes no tier table.
func TestSealDelayFollowsTheClock(t *testing.T) {
	ctx := context.Background()
	fake := tablefake.New()
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	clock := clock.New(now)
	db := openFake(t, fake, &Options{RawPeriod: time.Hour, SealDelay: time.Hour, Now: clock.Now, DirectWrites: true})
	write := func(age time.Duration) int64 {
		t.Helper()
		if err := db.Write(ctx, "s", tablets.Point{Time: now.Add(-age), Value: 1}); err != nil {
			t.Fatal(err)
		}
		before := fake.Stats().Batches
		if err := db.Write(ctx, "s", tablets.Point{Time: now.Add(-age), Value: 2}); err != nil {
			t.Fatal(err)
		}
		return fake.Stats().Batches - before // the second write: tables and index known
	}
	if n := write(55 * time.Minute); n != 1 {
		t.Fatalf("a point 55 minutes old: %d transactions, want its points' only", n)
	}
	if n := write(55*time.Minute + time.Second); n != 2 {
		t.Fatalf("a point over 55 minutes old: %d transactions, want its points' and its marker's", n)
	}
	clock.Add(time.Second) // the 55-minute point, a second later: now old enough
	before := fake.Stats().Batches
	if err := db.Write(ctx, "s", tablets.Point{Time: now.Add(-55 * time.Minute), Value: 3}); err != nil {
		t.Fatal(err)
	}
	if n := fake.Stats().Batches - before; n != 2 {
		t.Fatalf("the 55-minute point a second later: %d transactions, want its points' and its marker's", n)
	}
	tiers := 0
	for _, name := range fake.Tables() {
		if strings.Contains(name, "t60p") || strings.Contains(name, "t3600p") {
			tiers++
		}
	}
	if tiers != 0 {
		t.Fatalf("%d tier tables made, want none: %v", tiers, fake.Tables())
	}
}
