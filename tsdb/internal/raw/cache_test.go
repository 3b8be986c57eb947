package raw

import (
	"math"
	"sort"
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

// splice is put of the entry's samples within [from, to) and those added after them, for
// any bounds, across segments and within one, and for added samples that do not come after
// them (refused, the entry unchanged); the segments wholly kept are the entry's own chunks,
// not encoded again (a Fold taken into an entry of hours encodes its last segment and the
// Fold's minutes only).
func TestSpliceIsPutOfTheKeptAndAdded(t *testing.T) {
	pts := scraped(4*segmentPoints + 100)
	ms := func(i int) int64 { return pts[i].Time.UnixMilli() }
	bounds := []int64{math.MinInt64, ms(0), ms(1), ms(segmentPoints - 1), ms(segmentPoints), ms(segmentPoints + 7),
		ms(2*segmentPoints + 60), ms(len(pts) - 1), ms(len(pts)-1) + 1, math.MaxInt64}
	later := func(after int64, n int) []tablets.Point {
		out := make([]tablets.Point, n)
		for i := range out {
			out[i] = tablets.Point{Time: time.UnixMilli(after + int64(i+1)*15000).UTC(), Value: float64(i)}
		}
		return out
	}
	for _, from := range bounds {
		for _, to := range bounds {
			if to <= from {
				continue
			}
			var c cachedSamples
			if !floatCache.put(&c, pts) {
				t.Fatal("put refused")
			}
			kept, err := floatCache.samples(&c, from, to)
			if err != nil {
				t.Fatal(err)
			}
			last := int64(0)
			if len(kept) > 0 {
				last = kept[len(kept)-1].Time.UnixMilli()
			}
			for _, add := range [][]tablets.Point{nil, later(last, 3), later(last, 2*segmentPoints+5)} {
				got := c
				ok, err := floatCache.splice(&got, from, to, add)
				if err != nil || !ok {
					t.Fatalf("[%d, %d) + %d: %v, %v", from, to, len(add), ok, err)
				}
				want := append(append([]tablets.Point(nil), kept...), add...)
				back, err := floatCache.samples(&got, math.MinInt64, math.MaxInt64)
				if err != nil || len(back) != len(want) {
					t.Fatalf("[%d, %d) + %d: %d samples back, want %d (%v)", from, to, len(add), len(back), len(want), err)
				}
				for i := range want {
					if !back[i].Time.Equal(want[i].Time) || back[i].Value != want[i].Value {
						t.Fatalf("[%d, %d) + %d: sample %d %v, want %v", from, to, len(add), i, back[i], want[i])
					}
				}
				for k, sg := range got.floats {
					if n, first, lastT, err := chunkenc.Header(sg.chunk); err != nil || n == 0 || int64(lastT) != sg.last || n > segmentPoints {
						t.Fatalf("[%d, %d) + %d: segment %d: %d samples from %d to %d, last %d (%v)", from, to, len(add), k, n, first, lastT, sg.last, err)
					}
				}
			}
			// Added samples not after the kept ones: refused, the entry as it was.
			if len(kept) > 0 {
				got := c
				before := len(got.floats)
				if ok, err := floatCache.splice(&got, from, to, []tablets.Point{kept[len(kept)-1]}); ok || err != nil || len(got.floats) != before {
					t.Fatalf("[%d, %d) + a sample at the last kept: %v, %v; want refused, unchanged", from, to, ok, err)
				}
			}
		}
	}

	// The whole entry, a Fold's minutes after it: the segments before the last are kept.
	var c cachedSamples
	if !floatCache.put(&c, pts) {
		t.Fatal("put refused")
	}
	got := c
	if ok, err := floatCache.splice(&got, math.MinInt64, math.MaxInt64, later(ms(len(pts)-1), 40)); !ok || err != nil {
		t.Fatalf("a Fold's minutes after the entry: %v, %v", ok, err)
	}
	for k := range len(c.floats) - 1 {
		if &got.floats[k].chunk[0] != &c.floats[k].chunk[0] {
			t.Fatalf("segment %d encoded again, want kept as it was", k)
		}
	}
}

// The histograms' splice is theirs: the kept ones within the bounds, then those added after
// them; added ones not after them are refused.
func TestSpliceHistograms(t *testing.T) {
	at := func(i int) tablets.HistogramPoint {
		return tablets.HistogramPoint{Time: time.UnixMilli(int64(1764580000000 + i*15000)).UTC()}
	}
	var c cachedSamples
	hs := []tablets.HistogramPoint{at(0), at(1), at(2), at(3)}
	histCache.put(&c, hs)
	got := c
	if ok, err := histCache.splice(&got, at(1).Time.UnixMilli(), at(3).Time.UnixMilli(), []tablets.HistogramPoint{at(5), at(6)}); !ok || err != nil {
		t.Fatalf("splice: %v, %v", ok, err)
	}
	var times []int64
	for _, h := range got.hists {
		times = append(times, (h.Time.UnixMilli()-1764580000000)/15000)
	}
	if len(times) != 4 || times[0] != 1 || times[1] != 2 || times[2] != 5 || times[3] != 6 {
		t.Fatalf("kept and added: %v, want [1 2 5 6]", times)
	}
	if len(c.hists) != 4 || !c.hists[3].Time.Equal(at(3).Time) {
		t.Fatal("the entry spliced from was changed")
	}
	got = c
	if ok, _ := histCache.splice(&got, math.MinInt64, math.MaxInt64, []tablets.HistogramPoint{at(3)}); ok {
		t.Fatal("a histogram at the last kept one's time: spliced, want refused")
	}
}

// A Fold's 10 minutes (40 samples) taken into an entry of 2.5 hours (the soak's: the
// warm-up's 2 hours and the run since), by splice and by put of every sample again (how it
// was done before splice, and still is where splice refuses): the time and the bytes
// allocated a series, which every server pays for every series of a tenant at each Fold.
func BenchmarkTakeInFold(b *testing.B) {
	pts := scraped(640)
	var entry cachedSamples
	if !floatCache.put(&entry, pts[:600]) {
		b.Fatal("put refused")
	}
	fold := pts[600:]
	b.Run("splice", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			next := entry
			if ok, err := floatCache.splice(&next, math.MinInt64, math.MaxInt64, fold); !ok || err != nil {
				b.Fatal(ok, err)
			}
		}
	})
	b.Run("put-all", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			was, err := floatCache.samples(&entry, math.MinInt64, math.MaxInt64)
			if err != nil {
				b.Fatal(err)
			}
			var next cachedSamples
			if !floatCache.put(&next, append(was, fold...)) {
				b.Fatal("put refused")
			}
		}
	})
}

// An entry keeps its samples from the earliest start its reads asked for in the current
// window and the one before (a window being twice Grafana's longest refresh): a 6-hour
// panel refreshed every 5 minutes keeps its 6 hours beside a 1-hour panel's refreshes
// every 30 s; once only the 1-hour panel reads it for two windows, the segments wholly
// before its hour go. An entry no read was counted on keeps everything.
func TestAskedKeepsWhatReadsAsk(t *testing.T) {
	pts := scraped(7 * 240) // 7 hours at 15 s
	var c cachedSamples
	if !floatCache.put(&c, pts) {
		t.Fatal("put refused")
	}
	c.from = pts[0].Time.UnixMilli()
	now := pts[len(pts)-1].Time.UnixMilli()
	hour := time.Hour.Milliseconds()
	if got := trimmed(c); got != c.from {
		t.Fatalf("no read counted: keeps from %d, want %d (everything)", got, c.from)
	}
	// Refreshes: the 1-hour panel every 30 s, the 6-hour one every 5 minutes, for 40 minutes.
	for at := int64(0); at < 40*time.Minute.Milliseconds(); at += 30_000 {
		c.asked, _ = c.asked.seen(now+at-hour, now+at)
		if at%(5*time.Minute.Milliseconds()) == 0 {
			c.asked, _ = c.asked.seen(now+at-6*hour, now+at)
		}
		if got, sixHours := trimmed(c), now+at-6*hour; got > sixHours {
			t.Fatalf("at %d min: keeps from %d, after the 6-hour panel's start %d", at/60000, got, sixHours)
		}
	}
	// Then only the 1-hour panel, for two windows and a refresh.
	at := 40 * time.Minute.Milliseconds()
	for ; at <= 40*time.Minute.Milliseconds()+2*askWindow.Milliseconds(); at += 30_000 {
		c.asked, _ = c.asked.seen(now+at-hour, now+at)
	}
	oneHour := now + at - 30_000 - hour // the last read's start
	got := trimmed(c)
	if slack := 2*askWindow.Milliseconds() + segmentPoints*15_000; got > oneHour || got < oneHour-slack {
		t.Fatalf("after two windows of the 1-hour panel alone: keeps from %d, want within two windows and a segment before %d", got, oneHour)
	}
	// Whole segments go: the start kept is just after a segment's last sample.
	k := sort.Search(len(c.floats), func(k int) bool { return c.floats[k].last >= got })
	if k == 0 || c.floats[k-1].last+1 != got {
		t.Fatalf("keeps from %d: not just after a segment's end", got)
	}
	// seen says whether it changed: a later start in the same window changes nothing.
	if _, changed := c.asked.seen(now+at, now+at); changed {
		t.Fatal("a read of a later start within the window: changed")
	}
}
