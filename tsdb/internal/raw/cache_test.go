package raw

import (
	"math"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/chunkenc"
	"github.com/seed71701133/tablets/tsdb/internal/changelog"
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
		t.Fatalf("an hour of a counter costs %d bytes (%d encoded): not 3 bytes a sample or less", cost, floatBytes(c.floats))
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
	if !floatCache.put(&c, nil) || len(c.floats) != 0 {
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

// An entry of many samples is cut into segments: any range comes back exactly across
// their bounds, and a range of the last minutes decodes only the segments it needs (a
// refresh of a week's entry does not decode the week: shown by an earlier segment made
// unreadable, which only a read reaching it finds).
func TestCachedFloatsSegments(t *testing.T) {
	pts := scraped(4*segmentPoints + 100)
	var c cachedSamples
	if !floatCache.put(&c, pts) {
		t.Fatal("put refused")
	}
	if len(c.floats) != 5 {
		t.Fatalf("%d segments of %d samples, want 5", len(c.floats), len(pts))
	}
	ms := func(i int) int64 { return pts[i].Time.UnixMilli() }
	for _, r := range [][2]int{{0, len(pts)}, {segmentPoints - 1, segmentPoints + 1}, {segmentPoints, 2 * segmentPoints}, {segmentPoints + segmentPoints/3, 3*segmentPoints + segmentPoints/2}, {len(pts) - 3, len(pts)}} {
		to := int64(math.MaxInt64)
		if r[1] < len(pts) {
			to = ms(r[1])
		}
		got, err := floatCache.samples(&c, ms(r[0]), to)
		if err != nil || len(got) != r[1]-r[0] {
			t.Fatalf("[%d, %d): %d samples, %v", r[0], r[1], len(got), err)
		}
		for i, p := range got {
			if w := pts[r[0]+i]; !p.Time.Equal(w.Time) || p.Value != w.Value {
				t.Fatalf("[%d, %d): sample %d is %v, want %v", r[0], r[1], i, p, w)
			}
		}
	}
	c.floats[1].chunk = []byte{0xff} // not a chunk
	if _, err := floatCache.samples(&c, ms(0), math.MaxInt64); err == nil {
		t.Fatal("a read through an unreadable segment: no error")
	}
	if got, err := floatCache.samples(&c, ms(len(pts)-50), math.MaxInt64); err != nil || len(got) != 50 {
		t.Fatalf("the last 50 samples: %d, %v (the unreadable segment decoded)", len(got), err)
	}
}

// A warm-up stops once the cache holds half its bound: the current generation's, past which
// what it added first would be pushed out.
func TestCacheFullAtHalfItsBound(t *testing.T) {
	c := NewCache(1 << 20)
	var entry cachedSamples
	if !floatCache.put(&entry, scraped(240)) {
		t.Fatal("put refused an hour of a counter")
	}
	for i := 0; !c.full(); i++ {
		if size := c.entries.Size(); size >= 1<<19 {
			t.Fatalf("not full at %d bytes of %d", size, 1<<20)
		}
		c.entries.Add(cacheKey{"t", strconv.Itoa(i)}, entry)
	}
	if size := c.entries.Size(); size < 1<<19 || size > 1<<19+cachedCost(cacheKey{"t", "0000"}, entry) {
		t.Fatalf("full at %d bytes, want half the bound (%d) and at most an entry more", size, 1<<19)
	}
}

// The raw cache keeps what the warm-up read until the first dashboards come, however late:
// it has no idle expiry (the staging cache has, cache.Idle).
func TestCacheKeepsTheWarmUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := NewCache(64 << 20)
		k := cacheKey{"raw", "s"}
		c.entries.Add(k, cachedSamples{from: 0, to: 1})
		time.Sleep(time.Hour)
		if _, ok := c.entries.Get(k); !ok {
			t.Fatal("a warmed series went unused for an hour")
		}
	})
}

// A log of no change, or one that does not know the hull of its changes, never says a
// range is empty: a table written before the logs holds samples no change recorded (the
// case of a hull that ended before the range: TestSelectOfThePresentSkipsAnEmptyRawRange).
func TestNoSamplesFromOnlyAfterAKnownHull(t *testing.T) {
	if noSamplesFrom(changelog.StateOfGen(0), time.Now().UnixMilli()) {
		t.Error("generation 0: taken as empty")
	}
	if noSamplesFrom(changelog.StateOfGen(7), time.Now().UnixMilli()) {
		t.Error("a log that does not know its hull: taken as empty")
	}
}

// A read with run takes the segments of an entry that lie whole in its range as they are
// kept (FloatRun: the cache's own chunk, its count and times), and decodes the others
// (the range's first and last, cut by it; one run refuses) sample by sample: together,
// exactly the samples of the range, in order. A run or an emit that says stop stops it.
func TestCachedRuns(t *testing.T) {
	pts := scraped(4*segmentPoints + 100)
	var c cachedSamples
	if !floatCache.put(&c, pts) {
		t.Fatal("put refused")
	}
	r := &Store[tablets.Point, pointTable]{cached: floatCache}
	ms := func(i int) int64 { return pts[i].Time.UnixMilli() }
	from, to := ms(50), ms(4*segmentPoints+50) // inside the first segment, inside the last
	read := func(refuse int64, stopAt int) (got []tablets.Point, runs []FloatRun, more bool) {
		more, err := r.eachRun(&c, "s", from, to, func(name string, p tablets.Point) bool {
			got = append(got, p)
			return len(got) != stopAt
		}, func(fr FloatRun) (bool, bool) {
			if fr.First == refuse {
				return false, true
			}
			runs = append(runs, fr)
			err := chunkenc.Decode(fr.Chunk, func(t uint64, v float64) {
				got = append(got, tablets.Point{Time: time.UnixMilli(int64(t)).UTC(), Value: v})
			})
			if err != nil {
				t.Fatal(err)
			}
			return true, stopAt != -len(runs)
		})
		if err != nil {
			t.Fatal(err)
		}
		return got, runs, more
	}
	check := func(what string, got []tablets.Point) {
		t.Helper()
		if want := pts[50 : 4*segmentPoints+50]; len(got) != len(want) {
			t.Fatalf("%s: %d samples, want %d", what, len(got), len(want))
		}
		for i, p := range got {
			if w := pts[50+i]; !p.Time.Equal(w.Time) || p.Value != w.Value {
				t.Fatalf("%s: sample %d is %v, want %v", what, i, p, w)
			}
		}
	}
	got, runs, more := read(-1, 0)
	check("every whole segment a run", got)
	if !more || len(runs) != 3 {
		t.Fatalf("more %v, %d runs, want segments 1 to 3", more, len(runs))
	}
	for i, fr := range runs {
		seg := c.floats[i+1]
		if fr.Series != "s" || fr.N != segmentPoints || fr.First != ms((i+1)*segmentPoints) || fr.Last != seg.last || &fr.Chunk[0] != &seg.chunk[0] {
			t.Fatalf("run %d: %+v, not segment %d as cached", i, fr, i+1)
		}
	}
	got, runs, _ = read(ms(2*segmentPoints), 0)
	check("segment 2 refused", got)
	if len(runs) != 2 {
		t.Fatalf("%d runs, want segments 1 and 3", len(runs))
	}
	if got, _, more = read(-1, 10); more || len(got) != 10 {
		t.Fatalf("emit stops at the 10th: more %v, %d samples", more, len(got))
	}
	if _, runs, more = read(-1, -2); more || len(runs) != 2 {
		t.Fatalf("run stops at the 2nd: more %v, %d runs", more, len(runs))
	}
}
