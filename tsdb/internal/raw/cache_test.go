package raw

import (
	"math"
	"testing"
	"time"

	"github.com/seed71701133/tablets"
)

// scraped is an hour of a counter scraped every 15 s, as the soak's series are.
func scraped(n int) []tablets.Point {
	start := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	pts := make([]tablets.Point, n)
	v := 1000.0
	for i := range pts {
		v += float64(i%7 + 3)
		pts[i] = tablets.Point{Time: start.Add(time.Duration(i) * 15 * time.Second), Value: v}
	}
	return pts
}

// The cache keeps float samples encoded: an hour of a scraped counter costs a few bytes a
// sample where decoded it took 16, so that a dashboard's working set of four tenants fits
// the default bound; what comes back is the samples, bit for bit, within the bounds asked.
func TestCachedFloatsEncoded(t *testing.T) {
	pts := scraped(240)
	pts[17].Value = math.Copysign(0, -1)
	pts[18].Value = math.NaN()
	var c cachedSamples
	if !floatCache.put(&c, pts) {
		t.Fatal("put refused sorted samples of whole milliseconds")
	}
	k := cacheKey{"metricsr1764201600", "0123456789abcdef"}
	if cost := cachedCost(k, c); cost > cachedOverhead+len(k.table)+len(k.series)+3*len(pts) {
		t.Fatalf("an hour of a counter costs %d bytes (%d encoded): not 3 bytes a sample or less", cost, len(c.floats))
	}
	got, err := floatCache.samples(&c, math.MinInt64, math.MaxInt64)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(pts) {
		t.Fatalf("%d samples back, want %d", len(got), len(pts))
	}
	for i, p := range got {
		if !p.Time.Equal(pts[i].Time) || math.Float64bits(p.Value) != math.Float64bits(pts[i].Value) || p.Time.Location() != time.UTC {
			t.Fatalf("sample %d: %v %v, want %v %v", i, p.Time, p.Value, pts[i].Time, pts[i].Value)
		}
	}
	// Bounds: from included, to excluded.
	from, to := pts[10].Time.UnixMilli(), pts[20].Time.UnixMilli()
	got, err = floatCache.samples(&c, from, to)
	if err != nil || len(got) != 10 || !got[0].Time.Equal(pts[10].Time) || !got[9].Time.Equal(pts[19].Time) {
		t.Fatalf("[10, 20): %d samples, %v", len(got), err)
	}
	// A yield that stops: no more samples, and each says so.
	n := 0
	more, err := floatCache.each(&c, math.MinInt64, math.MaxInt64, func(tablets.Point) bool { n++; return n < 3 })
	if more || err != nil || n != 3 {
		t.Fatalf("stopped at the 3rd: more %v, err %v, %d yielded", more, err, n)
	}
	// Empty.
	if !floatCache.put(&c, nil) || c.floats != nil {
		t.Fatal("no samples: not an empty entry")
	}
	if got, err := floatCache.samples(&c, math.MinInt64, math.MaxInt64); err != nil || len(got) != 0 {
		t.Fatalf("empty entry: %v %v", got, err)
	}
}

// What the codec cannot hold is not cached (put says so) rather than changed: times out
// of order or twice, before the Unix epoch, or not of whole milliseconds.
func TestCachedFloatsRefused(t *testing.T) {
	for name, edit := range map[string]func([]tablets.Point){
		"out of order": func(p []tablets.Point) { p[3], p[4] = p[4], p[3] },
		"twice":        func(p []tablets.Point) { p[4].Time = p[3].Time },
		"before epoch": func(p []tablets.Point) { p[0].Time = time.Unix(-1, 0) },
		"sub-ms":       func(p []tablets.Point) { p[5].Time = p[5].Time.Add(time.Microsecond) },
	} {
		pts := scraped(10)
		edit(pts)
		var c cachedSamples
		if floatCache.put(&c, pts) {
			t.Errorf("%s: cached", name)
		}
	}
}
