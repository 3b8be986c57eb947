package tsdb

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/chunked"
	"github.com/seed71701133/tablets/internal/testkit/azurite"
	"github.com/seed71701133/tablets/tsdb/internal/staging"
)

// A backlog larger than a round folds in rounds, each series written once: a server down
// for a day folds what piled up. (staging.MaxFoldPoints made small: 60 series of 40 points in
// rounds of at most 500 points.)
func TestFoldRounds(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	saved := staging.MaxFoldPoints
	staging.MaxFoldPoints = 500
	t.Cleanup(func() { staging.MaxFoldPoints = saved })
	now := time.Date(2025, 3, 10, 9, 0, 0, 0, time.UTC)
	db, svc, checker := stagingDB(t, "fold", &now)
	ctx := context.Background()
	start := now
	want := map[string][]tablets.Point{}
	for i := range 40 { // a day of writes: 40 of 60 series, a point each
		now = start.Add(time.Duration(i) * 36 * time.Minute)
		var batch []SeriesPoints
		for s := range 60 {
			p := tablets.Point{Time: now, Value: float64(i*100 + s)}
			name := fmt.Sprintf("s%02d", s)
			batch = append(batch, SeriesPoints{Series: name, Points: []tablets.Point{p}})
			want[name] = append(want[name], p)
		}
		if err := db.WriteMany(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	now = now.Add(time.Hour)
	// Folded by another process, which knows nothing of the tables yet.
	folder, err := Open(ctx, svc, db.Name(), &db.opts)
	if err != nil {
		t.Fatal(err)
	}
	checker.Reset()
	rep, err := folder.Fold(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st := checker.Stats()
	t.Logf("%+v in %d requests (%d batches)", rep, st.Requests, st.Batches)
	if rep.Rounds < 5 || rep.Points != 2400 || rep.Series != 60 || rep.Entities != 40 {
		t.Errorf("folded %+v, want 2,400 points of 60 series from 40 entities in at least 5 rounds", rep)
	}
	// A transaction a series and raw day (each series in one round; its points span two
	// days), and one to delete each entity (their buckets differ).
	if st.Batches > 60*2+40 {
		t.Errorf("%d transactions: a series written more than once?", st.Batches)
	}
	// And a few other requests: the two listings, a query a round, the lease (read, take,
	// release), a catalog read a period (not a series: 60 more), the change log (read and
	// replace a period, once a Fold, and the logs' mark after each), the last Fold's
	// entities (read, and recorded), the staging mark after each record (the raw log's,
	// the folds' log's, the staging log's).
	if q := st.Requests - st.Batches; q > 32 {
		t.Errorf("%d requests besides the transactions", q)
	}
	for name, pts := range want {
		var got []tablets.Point
		for p, err := range db.Query(ctx, name, start, now) {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, p)
		}
		if len(got) != len(pts) {
			t.Fatalf("%s: %d points, want %d", name, len(got), len(pts))
		}
		for i := range pts {
			if !got[i].Time.Equal(pts[i].Time) || got[i].Value != pts[i].Value {
				t.Fatalf("%s: point %d is %v, want %v", name, i, got[i], pts[i])
			}
		}
	}
}

// A Fold writes at most Options.FoldWriters series at once: 40 series, each a transaction
// the account holds for 20 ms, with 2 writers, go two at a time, and every point is folded.
func TestFoldWriters(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	now := time.Date(2025, 3, 10, 9, 0, 0, 0, time.UTC)
	db, _, checker := stagingDB(t, "foldw", &now)
	ctx := context.Background()
	start := now
	var batch []SeriesPoints
	for s := range 40 {
		batch = append(batch, SeriesPoints{Series: fmt.Sprintf("s%02d", s), Points: []tablets.Point{{Time: now, Value: float64(s)}}})
	}
	if err := db.WriteMany(ctx, batch); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Hour)
	held := &heldRequests{next: checker, hold: 20 * time.Millisecond, match: func(req *http.Request) bool {
		return strings.HasSuffix(req.URL.Path, "/$batch")
	}}
	svc, err := azurite.Shared(t).NewServiceClient(&aztables.ClientOptions{ClientOptions: policy.ClientOptions{Transport: held}})
	if err != nil {
		t.Fatal(err)
	}
	opts := db.opts
	opts.FoldWriters = 2
	folder, err := Open(ctx, svc, db.Name(), &opts)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := folder.Fold(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Series != 40 || rep.Points != 40 {
		t.Errorf("folded %+v, want 40 points of 40 series", rep)
	}
	if held.most != 2 {
		t.Errorf("%d transactions at once, want 2", held.most)
	}
	for s := range 40 {
		var got []tablets.Point
		for p, err := range db.Query(ctx, fmt.Sprintf("s%02d", s), start, now) {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, p)
		}
		if len(got) != 1 || got[0].Value != float64(s) {
			t.Errorf("s%02d: %v", s, got)
		}
	}
}

// Histogram samples weigh 16 points in a round's budget (decoded, they are that much
// larger): 300 samples of 30 series with rounds of 500 points fold in 10 rounds, each series
// still written once.
func TestFoldRoundsHistograms(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	saved := staging.MaxFoldPoints
	staging.MaxFoldPoints = 500
	t.Cleanup(func() { staging.MaxFoldPoints = saved })
	now := time.Date(2025, 3, 10, 9, 0, 0, 0, time.UTC)
	db, _, checker := stagingDB(t, "foldh", &now)
	ctx := context.Background()
	start := now
	for i := range 10 {
		now = start.Add(time.Duration(i) * time.Minute)
		var batch []SeriesHistograms
		for s := range 30 {
			h := &tablets.Histogram{Count: uint64(i + s), Sum: float64(i), PositiveSpans: []tablets.HistogramSpan{{Offset: 0, Length: 1}}, PositiveBuckets: []int64{int64(i + s)}}
			batch = append(batch, SeriesHistograms{Series: fmt.Sprintf("h%02d", s), Histograms: []HistogramPoint{{Time: now, H: h}}})
		}
		if err := db.WriteSamples(ctx, nil, batch); err != nil {
			t.Fatal(err)
		}
	}
	now = now.Add(time.Hour)
	checker.Reset()
	rep, err := db.Fold(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st := checker.Stats()
	t.Logf("%+v in %d requests (%d batches)", rep, st.Requests, st.Batches)
	if rep.Rounds != 10 || rep.Points != 300 || rep.Series != 30 || rep.Entities != 10 {
		t.Errorf("folded %+v, want 300 samples of 30 series from 10 entities in 10 rounds", rep)
	}
	if st.Batches > 30+1 { // a transaction a series, and one to delete the entities (one bucket)
		t.Errorf("%d transactions: a series written more than once?", st.Batches)
	}
	q, err := db.Queryable(nil)
	if err != nil {
		t.Fatal(err)
	}
	for s := range 30 {
		n := 0
		for series, err := range q.Querier(start, now).Read(ctx, HistogramSamples, fmt.Sprintf("h%02d", s)) {
			if err != nil {
				t.Fatal(err)
			}
			for it := series.Iterator(); it.Next(); {
				if h := it.At(); h.H == nil || h.H.Count != uint64(n+s) {
					t.Fatalf("h%02d: sample %d is %+v", s, n, h.H)
				}
				n++
			}
		}
		if n != 10 {
			t.Fatalf("h%02d: %d samples, want 10", s, n)
		}
	}
}

// stagingDB opens a database of the chunked layout without tiers, as a server's, on the
// shared Azurite, every request through a Checker, its clock reading *now; its tables (the
// catalog, the staging, and the raw, index and histogram tables of three periods from
// *now's) are dropped when the test ends.
func stagingDB(t testing.TB, prefix string, now *time.Time) (*DB, *aztables.ServiceClient, *azurite.Checker) {
	t.Helper()
	checker := azurite.NewChecker(nil, func(v string) { t.Errorf("Azure limit violated: %s", v) })
	svc, err := azurite.Shared(t).NewServiceClient(&aztables.ClientOptions{ClientOptions: policy.ClientOptions{Transport: checker}})
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("%s%d", prefix, rand.Uint32())
	db, err := Open(context.Background(), svc, name, &Options{Tiers: []Tier{}, Now: func() time.Time { return *now },
		Layout: func(c *aztables.Client) (tablets.Store, error) { return chunked.New(c, nil) }})
	if err != nil {
		t.Fatal(err)
	}
	first := db.names.PeriodOf(*now)
	t.Cleanup(func() {
		tables := []string{name + "m", name + "w"}
		for i := range uint64(3) {
			p := first + i*uint64(DefaultRawPeriod/time.Second)
			tables = append(tables, db.names.RawTable(p), db.names.IndexTable(p), db.names.HistTable(p))
		}
		for _, table := range tables {
			_, _ = svc.DeleteTable(context.Background(), table, nil)
		}
	})
	return db, svc, checker
}

// A fold round's points are a read of the staging read budget until they are written (a
// server's tenants fold at once, and share the budget with the queries), given back after.
// The folds of two databases sharing a budget far smaller than a round both finish: the
// oldest read goes on.
func TestFoldRoundsInTheReadBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	ctx := context.Background()
	now := time.Date(2025, 3, 10, 9, 0, 0, 0, time.UTC)
	budget, err := NewReadBudget(4 << 10)
	if err != nil {
		t.Fatal(err)
	}
	type folded struct {
		db    *DB
		start time.Time
		want  map[string][]tablets.Point
	}
	var dbs []folded
	for _, prefix := range []string{"fba", "fbb"} {
		db, _, _ := stagingDB(t, prefix, &now)
		db.staging.Budget = budget
		start := now
		_, want := stageWrites(t, db, 100, 8, &now)
		dbs = append(dbs, folded{db, start, want})
	}
	now = now.Add(time.Hour)
	reports := make([]FoldReport, len(dbs))
	errs := make([]error, len(dbs))
	var wg sync.WaitGroup
	for i, f := range dbs {
		wg.Go(func() { reports[i], errs[i] = f.db.Fold(ctx) })
	}
	wg.Wait()
	for i, f := range dbs {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if reports[i].Points != 800 || reports[i].Rounds != 1 {
			t.Errorf("%s: folded %+v, want 800 points in a round", f.db.Name(), reports[i])
		}
		for name, pts := range f.want {
			got, err := f.db.staging.Read(ctx, []string{name}, f.start, now)
			if err != nil {
				t.Fatal(err)
			}
			if len(got[name]) != 0 {
				t.Fatalf("%s: %d points of %s still staged", f.db.Name(), len(got[name]), name)
			}
			var raw []tablets.Point
			for p, err := range f.db.Query(ctx, name, f.start, now) {
				if err != nil {
					t.Fatal(err)
				}
				raw = append(raw, p)
			}
			if !equalPoints(raw, pts) {
				t.Fatalf("%s: %s read %v, wrote %v", f.db.Name(), name, raw, pts)
			}
		}
	}
	if round := 800 * staging.PointBytes; staging.MostUsed(budget) < round {
		t.Errorf("the budget held at most %d bytes, less than a round's points (%d): the rounds were not counted", staging.MostUsed(budget), round)
	}
	if used, waiting := budget.InUse(); used != 0 || waiting != 0 {
		t.Errorf("after the folds: %d bytes in use, %d waiting", used, waiting)
	}
}

// A FoldPace spreads a Fold's writes over it: a Fold of ten series paced over 2 s begins
// the last one's writes 1.8 s after the first (a bound the pace's waits make, which a
// slow machine only lengthens), and folds every point as an unpaced one does. A pace
// outside [0, MaxFoldPace] is refused before any request. (That a Fold catching up does
// not wait: staging's TestFoldRoundSpan.)
func TestFoldPace(t *testing.T) {
	for _, d := range []time.Duration{-time.Second, MaxFoldPace + time.Second} {
		if err := CheckOptions("fpace", &Options{FoldPace: d}); !errors.Is(err, tablets.ErrInvalidOptions) {
			t.Errorf("FoldPace %v: %v, want ErrInvalidOptions", d, err)
		}
	}
	if testing.Short() {
		t.Skip("Azurite")
	}
	now := time.Date(2025, 3, 10, 9, 1, 0, 0, time.UTC) // in the bucket 09:00 to 09:10
	db, svc, _ := stagingDB(t, "fpace", &now)
	ctx := context.Background()
	var written []SeriesPoints
	for i := range 10 {
		written = append(written, SeriesPoints{Series: fmt.Sprintf("s%d", i), Points: []tablets.Point{{Time: now.Add(time.Duration(i) * time.Second), Value: float64(i)}}})
	}
	if err := db.WriteMany(ctx, written); err != nil {
		t.Fatal(err)
	}
	opts := db.opts
	opts.FoldPace = 2 * time.Second
	paced, err := Open(ctx, svc, db.Name(), &opts)
	if err != nil {
		t.Fatal(err)
	}
	now = now.Add(14 * time.Minute) // 09:15: the bucket is due
	began := time.Now()
	rep, err := paced.Fold(ctx)
	if took := time.Since(began); took < 1800*time.Millisecond {
		t.Errorf("the paced Fold took %v, under the 1.8 s its pace waits", took)
	}
	if err != nil {
		t.Fatal(err)
	}
	if rep.Points != 10 || rep.Series != 10 {
		t.Errorf("folded %d points of %d series, want 10 of 10", rep.Points, rep.Series)
	}
	for _, sp := range written {
		var got []tablets.Point
		for p, err := range db.Query(ctx, sp.Series, now.Add(-time.Hour), now) {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, p)
		}
		if !equalPoints(got, sp.Points) {
			t.Errorf("%s: read back %v, wrote %v", sp.Series, got, sp.Points)
		}
	}
}

// A FoldDelay leaves a bucket staged that much longer than the 5 minutes after its end
// (without one, a Fold at 09:15 folds the bucket of 09:00 to 09:10: TestFoldWriters and the
// others), and then it folds as without one; a delay outside [0, MaxFoldDelay] is refused
// before any request.
func TestFoldDelay(t *testing.T) {
	for _, d := range []time.Duration{-time.Second, MaxFoldDelay + time.Second} {
		if err := CheckOptions("fdelay", &Options{FoldDelay: d}); !errors.Is(err, tablets.ErrInvalidOptions) {
			t.Errorf("FoldDelay %v: %v, want ErrInvalidOptions", d, err)
		}
	}
	if testing.Short() {
		t.Skip("Azurite")
	}
	now := time.Date(2025, 3, 10, 9, 1, 0, 0, time.UTC) // in the bucket 09:00 to 09:10
	db, svc, _ := stagingDB(t, "fdelay", &now)
	ctx := context.Background()
	if err := db.WriteMany(ctx, []SeriesPoints{{Series: "s", Points: []tablets.Point{{Time: now, Value: 1}}}}); err != nil {
		t.Fatal(err)
	}
	opts := db.opts
	opts.FoldDelay = 3 * time.Minute
	delayed, err := Open(ctx, svc, db.Name(), &opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		at      string
		points  int
		through string
	}{{"09:17:59", 0, "09:00"}, {"09:18:00", 1, "09:10"}} {
		now, _ = time.Parse(time.DateTime, "2025-03-10 "+step.at)
		rep, err := delayed.Fold(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Points != step.points || rep.Through.Format("15:04") != step.through {
			t.Errorf("at %s: folded %d points through %s, want %d through %s", step.at, rep.Points, rep.Through.Format("15:04"), step.points, step.through)
		}
	}
	var got []tablets.Point
	for p, err := range db.Query(ctx, "s", now.Add(-time.Hour), now) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, p)
	}
	if len(got) != 1 || got[0].Value != 1 {
		t.Errorf("read back %v", got)
	}
}

// A listing records the arrival buckets it finds entities of, whose entities the staging
// cache keeps past their hold until a Fold moved them (a late Fold's entities stay cached
// for the raw caches that take it in): the bucket of the staged writes, then none once
// folded.
func TestListingNotesItsBuckets(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	ctx := context.Background()
	now := time.Date(2025, 3, 10, 9, 0, 0, 0, time.UTC)
	db, _, _ := stagingDB(t, "lfrom", &now)
	if got := db.staging.ListedBuckets(); got != nil {
		t.Fatalf("buckets %v listed before any listing", got)
	}
	if err := db.Write(ctx, "s", tablets.Point{Time: now.Add(-time.Hour), Value: 1}); err != nil {
		t.Fatal(err)
	}
	bucket := time.Unix(int64(staging.BucketOf(now)), 0).UTC()
	if _, err := db.staging.List(ctx, now.Add(-2*time.Hour), now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if got := db.staging.ListedBuckets(); len(got) != 1 || !got[0].Equal(bucket) {
		t.Fatalf("buckets listed %v, want the write's arrival bucket %v", got, bucket)
	}
	// A write in the next bucket, found by a listing of what was written since.
	now = now.Add(staging.Bucket)
	if err := db.Write(ctx, "s", tablets.Point{Time: now.Add(-time.Hour), Value: 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.staging.List(ctx, now.Add(-2*time.Hour), now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if got := db.staging.ListedBuckets(); len(got) != 2 || !got[0].Equal(bucket) || !got[1].Equal(bucket.Add(staging.Bucket)) {
		t.Fatalf("buckets listed %v, want %v and the next", got, bucket)
	}
	now = now.Add(30 * time.Minute) // both buckets' Folds are due
	if r, err := db.Fold(ctx); err != nil || r.Entities == 0 {
		t.Fatalf("Fold: %+v, %v", r, err)
	}
	if _, err := db.staging.List(ctx, now.Add(-2*time.Hour), now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if got := db.staging.ListedBuckets(); got == nil || len(got) != 0 {
		t.Fatalf("buckets listed %v after the Fold, want none (known)", got)
	}
}
