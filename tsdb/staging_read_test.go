package tsdb

import (
	"bytes"
	"context"
	"fmt"
	"io"
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
	"github.com/seed71701133/tablets/internal/pager"
	"github.com/seed71701133/tablets/internal/testkit/azurite"
	"github.com/seed71701133/tablets/tsdb/internal/staging"
)

// pageRecorder records the $top and the body size of each query of one table.
type pageRecorder struct {
	next  policy.Transporter
	table string

	mu    sync.Mutex
	tops  []string
	sizes []int
}

func (r *pageRecorder) Do(req *http.Request) (*http.Response, error) {
	resp, err := r.next.Do(req)
	if err != nil || req.Method != http.MethodGet || !strings.HasSuffix(req.URL.Path, "/"+r.table+"()") {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	r.mu.Lock()
	r.tops = append(r.tops, req.URL.Query().Get("$top"))
	r.sizes = append(r.sizes, len(body))
	r.mu.Unlock()
	return resp, nil
}

// A staging read asks for a few entities first, then as many as fit in its page bytes at the
// size of the largest it got: its pages stay near that size, and it reads every point.
func TestStagedReadPagesBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("Azurite")
	}
	ctx := context.Background()
	now := time.Date(2025, 3, 10, 9, 0, 0, 0, time.UTC)
	name := fmt.Sprintf("stpg%d", rand.Uint32())
	checker := azurite.NewChecker(nil, func(v string) { t.Errorf("Azure limit violated: %s", v) })
	rec := &pageRecorder{next: checker, table: name + "w"}
	svc, err := azurite.Shared(t).NewServiceClient(&aztables.ClientOptions{ClientOptions: policy.ClientOptions{Transport: rec}})
	if err != nil {
		t.Fatal(err)
	}
	db, err := Open(ctx, svc, name, &Options{Tiers: []Tier{}, StagingPartitions: 1, Now: func() time.Time { return now },
		Layout: func(c *aztables.Client) (tablets.Store, error) { return chunked.New(c, nil) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = svc.DeleteTable(context.Background(), name+"w", nil) })
	const pageBytes = 128 << 10
	db.staging.Page = pager.SubQuery{Top: 3, PageBytes: pageBytes}

	// 30 writes of a point of each of 400 series: an entity a write, of about 23 KB.
	start := now
	names, want := stageWrites(t, db, 400, 30, &now)
	rec.mu.Lock()
	rec.tops, rec.sizes = nil, nil
	rec.mu.Unlock()

	staged, err := db.readStagedSet(ctx, names, start, now, staging.Floats, false)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]tablets.Point{}
	for p, err := range db.queryManyStaged(ctx, names, start, now, staged) {
		if err != nil {
			t.Fatal(err)
		}
		got[p.Series] = append(got[p.Series], p.Point)
	}
	for _, n := range names {
		if !equalPoints(got[n], want[n]) {
			t.Fatalf("series %s: read %v, wrote %v", n, got[n], want[n])
		}
	}

	rec.mu.Lock()
	defer rec.mu.Unlock()
	t.Logf("staging pages: $top %v, bytes %v", rec.tops, rec.sizes)
	if len(rec.sizes) < 4 || rec.tops[0] != "3" {
		t.Fatalf("%d staging pages, the first of $top %s: want at least 4, the first of 3", len(rec.sizes), rec.tops[0])
	}
	first := rec.sizes[0] / 3 // about an entity
	if first*4 > pageBytes {
		t.Fatalf("an entity is about %d bytes: the test needs several to a page", first)
	}
	for i, size := range rec.sizes[1:] {
		if size > pageBytes+2<<10 { // the page's envelope
			t.Errorf("page %d: %d bytes, over the page bytes %d", i+1, size, pageBytes)
		}
	}
}

// stageWrites makes n series and stages writes of a point of each, 15 s apart from *now
// (the DB's clock, which it moves on), and returns the series and what each was written.
func stageWrites(t *testing.T, db *DB, n, writes int, now *time.Time) ([]string, map[string][]tablets.Point) {
	t.Helper()
	var names []string
	for s := range n {
		names = append(names, fmt.Sprintf("series%03d", s))
	}
	want := map[string][]tablets.Point{}
	for range writes {
		var batch []SeriesPoints
		for i, name := range names {
			p := tablets.Point{Time: *now, Value: float64(i) + float64(now.Unix()%1000)/1000}
			batch = append(batch, SeriesPoints{Series: name, Points: []tablets.Point{p}})
			want[name] = append(want[name], p)
		}
		if err := db.WriteMany(context.Background(), batch); err != nil {
			t.Fatal(err)
		}
		*now = now.Add(15 * time.Second)
	}
	return names, want
}

// equalPoints reports whether a and b are the same points, bit for bit.
func equalPoints(a, b []tablets.Point) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !a[i].Time.Equal(b[i].Time) || a[i].Value != b[i].Value {
			return false
		}
	}
	return true
}
