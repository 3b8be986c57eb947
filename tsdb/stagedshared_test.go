package tsdb

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/tsdb/internal/staging"
)

// The batches of a large read share one read of the staging (readStagedSet, then
// queryManyStaged a batch): they return what QueryMany returns, a request less a batch, and
// a fold between the staged read and the raw reads loses and doubles nothing (a point folded
// after readStagedSet is in its stagedSet, and in the raw table, once in the answer).
func TestReadStagedShared(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	now := time.Date(2025, 3, 10, 9, 0, 0, 0, time.UTC)
	db, _, checker := stagingDB(t, "shst", &now)
	ctx := context.Background()
	start := now
	var names []string
	want := map[string][]tablets.Point{}
	write := func(rounds int) {
		for range rounds { // a point of each series a minute, staged
			var batch []SeriesPoints
			for s := range 60 {
				p := tablets.Point{Time: now, Value: float64(now.Unix()%100000 + int64(s))}
				n := fmt.Sprintf("s%02d", s)
				batch = append(batch, SeriesPoints{Series: n, Points: []tablets.Point{p}})
				want[n] = append(want[n], p)
			}
			if err := db.WriteMany(ctx, batch); err != nil {
				t.Fatal(err)
			}
			now = now.Add(time.Minute)
		}
	}
	for s := range 60 {
		names = append(names, fmt.Sprintf("s%02d", s))
	}
	write(20)
	now = now.Add(30 * time.Minute)
	if _, err := db.Fold(ctx); err != nil { // the first 20 minutes into the raw table
		t.Fatal(err)
	}
	write(10) // 10 more staged
	from, to := start, now

	staged, err := db.readStagedSet(ctx, names, from, to, staging.Floats, false)
	if err != nil {
		t.Fatal(err)
	}
	// Read in batches before the fold (the last 10 minutes are staged: read from staged)
	// and after it (in the raw table too: read once).
	readAll := func(when string) {
		batches := [][]string{names[:25], names[25:50], names[50:]}
		got := map[string][]tablets.Point{}
		for _, b := range batches {
			checker.Reset()
			for p, err := range db.queryManyStaged(ctx, b, from, to, staged) {
				if err != nil {
					t.Fatal(err)
				}
				got[p.Series] = append(got[p.Series], p.Point)
			}
			shared := checker.Stats().Requests
			checker.Reset()
			for _, err := range db.QueryMany(ctx, b, from, to) {
				if err != nil {
					t.Fatal(err)
				}
			}
			if own := checker.Stats().Requests; shared != own-1 {
				t.Errorf("%s: batch of %d series: %d requests with the shared staged read, %d reading its own; want a request less", when, len(b), shared, own)
			}
		}
		for _, n := range names {
			if len(got[n]) != len(want[n]) {
				t.Fatalf("%s: %s: %d points, want %d", when, n, len(got[n]), len(want[n]))
			}
			for i, p := range want[n] {
				if !got[n][i].Time.Equal(p.Time) || got[n][i].Value != p.Value {
					t.Fatalf("%s: %s: point %d is %v, want %v", when, n, i, got[n][i], p)
				}
			}
		}
	}
	readAll("before the fold")
	now = now.Add(30 * time.Minute)
	if rep, err := db.Fold(ctx); err != nil || rep.Points != 600 {
		t.Fatalf("fold after readStagedSet: %+v, %v; want the 600 staged points folded", rep, err)
	}
	readAll("after the fold")

	for what, seq := range map[string]func() error{
		"another range": func() error { return firstErr(db.queryManyStaged(ctx, names[:2], from, to.Add(time.Minute), staged)) },
		"another series": func() error {
			return firstErr(db.queryManyStaged(ctx, []string{"s00", "other"}, from, to, staged))
		},
		"no Staged": func() error { return firstErr(db.queryManyStaged(ctx, names[:2], from, to, nil)) },
	} {
		if err := seq(); !errors.Is(err, tablets.ErrInvalidOptions) {
			t.Errorf("queryManyStaged of %s: %v, want ErrInvalidOptions", what, err)
		}
	}

	// Dropped series are no longer read from the Staged; the others still are.
	staged.drop(names[:2])
	if err := firstErr(db.queryManyStaged(ctx, names[1:3], from, to, staged)); !errors.Is(err, tablets.ErrInvalidOptions) {
		t.Errorf("QueryManyStaged of a dropped series: %v, want ErrInvalidOptions", err)
	}
	n := 0
	for p, err := range db.queryManyStaged(ctx, names[2:3], from, to, staged) {
		if err != nil {
			t.Fatal(err)
		}
		if !p.Time.Equal(want[p.Series][n].Time) || p.Value != want[p.Series][n].Value {
			t.Fatalf("after a Drop of others: %s point %d is %v, want %v", p.Series, n, p.Point, want[p.Series][n])
		}
		n++
	}
	if n != len(want[names[2]]) {
		t.Fatalf("after a Drop of others: %d points of %s, want %d", n, names[2], len(want[names[2]]))
	}
}

func firstErr[T any](seq func(yield func(T, error) bool)) error {
	for _, err := range seq {
		if err != nil {
			return err
		}
	}
	return nil
}
