package staging

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/stageenc"
	"github.com/seed71701133/tablets/tsdb/internal/changelog"
	"github.com/seed71701133/tablets/tsdb/internal/naming"
)

// frozenWant is what a bucket frozen from entities must give of a series: by entity and
// millisecond, the value of the entity's last row of the time (its last write).
func frozenWant(entities []frozenInput, key string) map[[2]int64]float64 {
	points := map[[2]int64]float64{} // by entity place and millisecond
	for e, in := range entities {
		for r := range in.pack.len() {
			if in.pack.key(r) != key {
				continue
			}
			times, values := in.pack.points(r)
			for i, ms := range times {
				points[[2]int64{int64(e), ms}] = values[i]
			}
		}
	}
	return points
}

// A frozen bucket gives each series' points as its entities held them, with each point's
// entity: the last row of a millisecond in one entity (its last write), every entity added
// by later freezes, an entity frozen again at its ETag once, and one frozen at another
// ETag (a Delete rewrote it) in place of the one before. A series two entities hold a
// millisecond of is kept loose, its points of a time one an entity.
func TestFreezeKeepsPoints(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	keys := []string{"a", "b", "c", "d", "e"}
	entity := func(i int, etag string, base int64, dup bool) frozenInput {
		var ss []stageenc.Series
		for _, k := range keys {
			if rng.IntN(3) == 0 {
				continue
			}
			n := 1 + rng.IntN(3)
			s := stageenc.Series{Key: k}
			for j := range n {
				s.Times = append(s.Times, base+int64(j)*15_000+int64(rng.IntN(3)))
				s.Values = append(s.Values, math.Floor(rng.Float64()*1000))
			}
			ss = append(ss, s)
			if dup && k == "b" { // the same series again later in the entity: its last write
				ss = append(ss, stageenc.Series{Key: k, Times: s.Times[:1], Values: []float64{-1}})
			}
		}
		p := packSeries(ss)
		return frozenInput{frozenEntity: frozenEntity{rk: fmt.Sprint("r", i), etag: etag, stamp: uint64(i + 1), seq: i % 2}, pack: &p}
	}
	var all []frozenInput
	for i := range 8 {
		all = append(all, entity(i, "1", int64(i)*100_000, i == 3))
	}
	all = append(all, entity(8, "1", 200_000, false)) // overlaps entity 2's times: some series loose
	b, err := freeze(nil, all[:4])
	if err != nil {
		t.Fatal(err)
	}
	b, err = freeze(b, slices.Concat(all[2:3], all[4:])) // entity 2 again, at its ETag
	if err != nil {
		t.Fatal(err)
	}
	rewritten := entity(5, "2", 500_000, false)
	if b, err = freeze(b, []frozenInput{rewritten}); err != nil {
		t.Fatal(err)
	}
	want := slices.Clone(all)
	want[5] = rewritten
	if len(b.segments) != 3 {
		t.Fatalf("%d segments, want one a freeze", len(b.segments))
	}
	checkFrozen(t, "segments", b, keys, want)
	merged, err := b.merged()
	if err != nil {
		t.Fatal(err)
	}
	if len(merged.segments) != 1 || len(merged.entities) != len(want) {
		t.Fatalf("merged: %d segments, %d entities, want 1 and %d", len(merged.segments), len(merged.entities), len(want))
	}
	checkFrozen(t, "merged", merged, keys, want)
	if n := len(merged.segments[0].loose); n == 0 || n == len(keys) {
		t.Errorf("merged: %d series loose: the test's overlap should make some", n)
	}
	// More freezes than maxFrozenSegments merge: the same points.
	more := b
	var moreWant []frozenInput
	merges := 0
	for i := range maxFrozenSegments {
		in := entity(20+i, "1", int64(i)*100_000+7, false)
		moreWant = append(moreWant, in)
		before := len(more.segments)
		if more, err = freeze(more, []frozenInput{in}); err != nil {
			t.Fatal(err)
		}
		if len(more.segments) > maxFrozenSegments {
			t.Fatalf("%d segments", len(more.segments))
		}
		if len(more.segments) < before {
			merges++
		}
	}
	if merges != 1 {
		t.Errorf("%d freezes after 3: %d merges, want 1", maxFrozenSegments, merges)
	}
	checkFrozen(t, "more", more, keys, slices.Concat(want, moreWant))
}

// checkFrozen checks that b gives each series' points as the entities of want held them
// (see frozenWant), each segment's oldest first, and that its take gives the points of
// the entities asked for only, as staged Points of their entity.
func checkFrozen(t *testing.T, name string, b *frozenBucket, keys []string, want []frozenInput) {
	t.Helper()
	if len(b.byRK) != len(want) {
		t.Fatalf("%s: %d entities frozen, want %d", name, len(b.byRK), len(want))
	}
	place := map[string]int{}
	for _, in := range want {
		i, ok := b.byRK[in.rk]
		if !ok || b.entities[i].etag != in.etag {
			t.Fatalf("%s: entity %s at ETag %s, want %s", name, in.rk, b.entities[i].etag, in.etag)
		}
		place[in.rk] = int(i)
	}
	for _, key := range keys {
		got := map[[2]int64]float64{}
		for _, seg := range b.segments {
			last := int64(math.MinInt64)
			if err := seg.points(key, func(ms int64, v float64, ent int32) {
				if ms < last || (ms == last && seg.loose[key] == nil) {
					t.Errorf("%s: series %s: %d after %d", name, key, ms, last)
				}
				last = ms
				if !b.live(ent) {
					return
				}
				e := slices.IndexFunc(want, func(in frozenInput) bool { return in.rk == b.entities[ent].rk })
				got[[2]int64{int64(e), ms}] = v
			}); err != nil {
				t.Fatal(err)
			}
		}
		if w := frozenWant(want, key); !reflect.DeepEqual(got, w) {
			t.Errorf("%s: series %s: %v, want %v", name, key, got, w)
		}
	}

	some := []int32{int32(place["r1"]), int32(place["r5"])}
	taken := map[string][]Point{}
	if !b.take(some, keys, func(key string, p Point) { taken[key] = append(taken[key], p) }) {
		t.Fatalf("%s: take: corrupt", name)
	}
	for _, key := range keys {
		wantPoints := frozenWant(want, key)
		var wantTaken []Point
		for _, e := range []int{1, 5} {
			for k, v := range wantPoints {
				if k[0] == int64(e) {
					wantTaken = append(wantTaken, Point{MS: k[1], Value: v, Stamp: want[e].stamp, Record: want[e].seq << 20})
				}
			}
		}
		sortPoints := func(ps []Point) {
			slices.SortFunc(ps, func(a, b Point) int { return cmp.Or(cmp.Compare(a.MS, b.MS), cmp.Compare(a.Stamp, b.Stamp)) })
		}
		sortPoints(wantTaken)
		sortPoints(taken[key])
		if !reflect.DeepEqual(taken[key], wantTaken) && len(taken[key])+len(wantTaken) > 0 {
			t.Errorf("%s: take: series %s: %v, want %v", name, key, taken[key], wantTaken)
		}
	}
}

// freezeEntities moves the cached entities of es (cached whole at the ETags etag gives)
// into their buckets' frozen points, as the cache's freeze does.
func freezeEntities(t *testing.T, st *Table, es []*Entity, etag func(*Entity) string) {
	t.Helper()
	table := st.names.Staging()
	byBucket := map[frozenKey][]frozenInput{}
	for _, e := range es {
		ce, ok := st.cache.entity(table, listedEntity{pk: e.PartitionKey, rk: e.RowKey, etag: etag(e)})
		if !ok {
			t.Fatalf("entity %s not cached", e.RowKey)
		}
		whole := ce.cols[wholeEntity].series
		stamp, seq, _ := StampOf([]byte(e.RowKey))
		fk := frozenKey{table, e.PartitionKey}
		byBucket[fk] = append(byBucket[fk], frozenInput{frozenEntity{rk: e.RowKey, etag: ce.etag, stamp: stamp, seq: seq}, &whole})
	}
	for fk, in := range byBucket {
		st.cache.frozen.mu.Lock()
		old := st.cache.frozen.buckets[fk]
		st.cache.frozen.mu.Unlock()
		b, err := freeze(old, in)
		if err != nil {
			t.Fatal(err)
		}
		setFrozen(st.cache, fk, b)
	}
	for _, e := range es {
		st.cache.entities.Remove(entityKey{table, e.PartitionKey, e.RowKey})
	}
}

// FoldedFloats takes the points of frozen entities from their buckets' frozen points, as
// it takes those of the entities cached: the same answers whichever are frozen, an entity
// frozen and fetched again counted once, and nothing when an entity is frozen at another
// ETag than the Fold read; where one bucket's frozen points hold two writes of a
// millisecond (a later write of it), the last.
func TestFoldedFloatsFrozen(t *testing.T) {
	ms := func(s int) time.Time { return time.UnixMilli(1716426600000 + int64(s)*1000).UTC() }
	pts := func(vs ...float64) []tablets.Point {
		var out []tablets.Point
		for _, v := range vs {
			out = append(out, tablets.Point{Time: ms(int(v)), Value: v})
		}
		return out
	}
	write := func(bucket, stamp uint64, series map[string][]tablets.Point) []*Entity {
		var writes []Write
		for _, name := range []string{"a", "b", "c"} {
			if p := series[name]; p != nil {
				writes = append(writes, Write{Series: name, Records: PointRecords(name, p, nil)})
			}
		}
		var out []*Entity
		for _, es := range Build(writes, bucket, stamp, 7, 1) {
			out = append(out, es...)
		}
		for _, e := range out {
			e.Body()
		}
		return out
	}
	const b1, b2 = 1716426600, 1716427200
	etag := func(e *Entity) string { return `W/"` + e.RowKey + `"` }
	type world struct {
		st                     *Table
		first, rewrite, second []*Entity
		r1, r2                 changelog.Receipt
	}
	setUp := func() world {
		w := world{st: &Table{cache: NewCache(1 << 20), names: naming.Names{Base: "db"}}}
		// Held (the freeze the cache starts leaves the frozen points of a held bucket).
		w.st.cache.keepUnfolded(w.st.names.Staging(), time.Hour, func() time.Time { return time.Unix(b1, 0) }, nil)
		w.first = write(b1, 1, map[string][]tablets.Point{"a": pts(1, 2), "b": pts(1)})
		w.rewrite = write(b1, 2, map[string][]tablets.Point{"a": {{Time: ms(2), Value: 20}}})
		w.second = write(b2, 3, map[string][]tablets.Point{"a": pts(3), "b": pts(1)})
		w.st.listing.byKey = map[[2]string]listedProps{}
		receipt := func(bucket uint64, sets ...[]*Entity) changelog.Receipt {
			var es []changelog.ReceiptEntity
			for _, set := range sets {
				for _, e := range set {
					w.st.listing.byKey[[2]string{e.PartitionKey, e.RowKey}] = listedProps{etag: etag(e)}
					w.st.cacheWritten([]*Entity{e}, []string{etag(e)})
					es = append(es, changelog.ReceiptEntity{PartitionKey: e.PartitionKey, RowKey: e.RowKey, ETag: etag(e)})
				}
			}
			return changelog.Receipt{From: bucket, Horizon: bucket + 600, Count: uint64(len(es)), Digest: changelog.ReceiptDigest(es)}
		}
		w.r1, w.r2 = receipt(b1, w.first, w.rewrite), receipt(b2, w.second)
		return w
	}
	one := map[string][]tablets.Point{"a": {{Time: ms(1), Value: 1}, {Time: ms(2), Value: 20}}, "b": pts(1), "c": {}}
	two := map[string][]tablets.Point{"a": {{Time: ms(1), Value: 1}, {Time: ms(2), Value: 20}, {Time: ms(3), Value: 3}}}
	for _, c := range []struct {
		name     string
		frozen   func(w world) []*Entity
		one, two map[string][]tablets.Point
	}{
		{"none", func(w world) []*Entity { return nil }, one, two},
		{"the first write", func(w world) []*Entity { return w.first }, one, two},
		{"the first write and the later bucket", func(w world) []*Entity { return slices.Concat(w.first, w.second) }, one, two},
		{"every entity", func(w world) []*Entity { return slices.Concat(w.first, w.rewrite, w.second) }, one, two},
	} {
		w := setUp()
		freezeEntities(t, w.st, c.frozen(w), etag)
		if got := w.st.FoldedFloats([]changelog.Receipt{w.r1}, []string{"a", "b", "c"}); !reflect.DeepEqual(got, c.one) {
			t.Errorf("%s frozen: one receipt: %v, want %v", c.name, got, c.one)
		}
		if got := w.st.FoldedFloats([]changelog.Receipt{w.r1, w.r2}, []string{"a", "b", "a"}); !reflect.DeepEqual(got, c.two) {
			t.Errorf("%s frozen: two receipts: %v, want %v", c.name, got, c.two)
		}
	}

	// Frozen, then fetched again (cached at the same ETag): once.
	w := setUp()
	freezeEntities(t, w.st, w.first, etag)
	w.st.cacheWritten(w.first, []string{etag(w.first[0])})
	if got := w.st.FoldedFloats([]changelog.Receipt{w.r1}, []string{"a", "b", "c"}); !reflect.DeepEqual(got, one) {
		t.Errorf("frozen and cached: %v, want %v", got, one)
	}
	// Frozen at another ETag than the Fold read, and not cached: nothing known.
	w = setUp()
	freezeEntities(t, w.st, w.second, etag)
	fk := frozenKey{w.st.names.Staging(), w.second[0].PartitionKey}
	w.st.cache.frozen.mu.Lock()
	w.st.cache.frozen.buckets[fk].entities[0].etag = `W/"later"`
	w.st.cache.frozen.mu.Unlock()
	if got := w.st.FoldedFloats([]changelog.Receipt{w.r2}, []string{"a"}); got != nil {
		t.Errorf("an entity frozen at another ETag: %v", got)
	}
}

// The cache freezes the whole float entities of a held bucket freezeAfter after it cached
// them, whether read since or not, and leaves cached the younger ones, those of a table
// that holds none for its Folds, and histogram entities; the frozen points count in its
// bytes and entries, and go once the bucket's hold has passed.
func TestCacheFreezesHeldEntities(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := NewCache(64 << 20)
		hold := 15 * time.Minute
		c.keepUnfolded("t", hold, time.Now, nil)
		pk := PartitionKey(BucketOf(time.Now()), 0)
		add := func(table, rk string, version int) entityKey {
			at := time.Now().UnixMilli()
			p := packSeries([]stageenc.Series{{Key: "x", Times: []int64{at}, Values: []float64{1}}, {Key: "y", Times: []int64{at}, Values: []float64{2}}})
			c.add(table, entityHead{pk: pk, rk: rk, etag: "e", version: version}, map[int]cachedColumn{wholeEntity: {series: p}}, nil)
			return entityKey{table, pk, rk}
		}
		old := add("t", RowKey(1, 0, 0), Version)
		read := add("t", RowKey(2, 0, 0), Version)
		unheld := add("u", RowKey(3, 0, 0), Version)
		hist := add("t", RowKey(4, 0, 0), HistVersion)
		time.Sleep(freezeEvery)
		if _, ok := c.entity("t", listedEntity{pk: pk, rk: read.rk, etag: "e"}); !ok {
			t.Fatal("the entity read is not cached")
		}
		young := add("t", RowKey(5, 0, 0), Version) // a freeze of none
		synctest.Wait()
		time.Sleep(freezeAfter - freezeEvery + time.Second)
		add("u", RowKey(6, 0, 0), Version) // a freeze starts
		synctest.Wait()
		for _, k := range []entityKey{old, read} {
			if _, ok := c.entities.Peek(k); ok {
				t.Errorf("entity %v, cached %v ago, is still cached", k, freezeAfter)
			}
		}
		for _, k := range []entityKey{young, unheld, hist} {
			if _, ok := c.entities.Peek(k); !ok {
				t.Errorf("entity %v is no longer cached", k)
			}
		}
		b, at, ok := c.frozen.entity("t", listedEntity{pk: pk, rk: old.rk, etag: "e"})
		if !ok {
			t.Fatal("the old entity is not frozen")
		}
		var got []float64
		b.take([]int32{at}, []string{"x", "y"}, func(_ string, p Point) { got = append(got, p.Value) })
		if !reflect.DeepEqual(got, []float64{1, 2}) {
			t.Errorf("frozen values %v", got)
		}
		frozen, entities := c.Frozen()
		if frozen <= 0 || entities != 2 {
			t.Errorf("frozen %d bytes of %d entities", frozen, entities)
		}
		if s := c.Stats(); s.Entries != 6 || s.Bytes < frozen {
			t.Errorf("stats %+v", s)
		}
		// The young one is frozen by a later freeze, into the same bucket's; the bucket's
		// frozen points go once its hold has passed.
		time.Sleep(freezeAfter)
		add("u", RowKey(7, 0, 0), Version)
		synctest.Wait()
		if _, ok := c.entities.Peek(young); ok {
			t.Error("the young entity, old now, is still cached")
		}
		segments := func() int {
			c.frozen.mu.Lock()
			defer c.frozen.mu.Unlock()
			return len(c.frozen.buckets[frozenKey{"t", pk}].segments)
		}
		before, entities := c.Frozen()
		if entities != 3 || segments() != 2 {
			t.Errorf("%d entities frozen in %d segments, want 3 in 2", entities, segments())
		}
		// Once the bucket has ended freezeAfter and a freeze ago, a freeze merges its
		// segments.
		time.Sleep(time.Until(BucketEnd(pk).Add(freezeAfter + freezeEvery + time.Second)))
		add("u", RowKey(8, 0, 0), Version)
		synctest.Wait()
		if after, entities := c.Frozen(); entities != 3 || segments() != 1 || after >= before {
			t.Errorf("%d entities frozen in %d segments, %d bytes (%d before), want 3 in 1 and fewer", entities, segments(), after, before)
		}
		b, at, ok = c.frozen.entity("t", listedEntity{pk: pk, rk: young.rk, etag: "e"})
		got = nil
		if ok {
			b.take([]int32{at}, []string{"x", "y"}, func(_ string, p Point) { got = append(got, p.Value) })
		}
		if !reflect.DeepEqual(got, []float64{1, 2}) {
			t.Errorf("the young entity merged: %v", got)
		}
		time.Sleep(time.Until(BucketEnd(pk).Add(hold)))
		add("u", RowKey(9, 0, 0), Version)
		synctest.Wait()
		if frozen, entities := c.Frozen(); frozen != 0 || entities != 0 {
			t.Errorf("%d bytes of %d entities frozen after the hold", frozen, entities)
		}
	})
}

// soakBucket is one tenant's 10-minute bucket of the soak (18,746 series of 14 a target
// scraped every 15 s, 550 series an entity, counters and a gauge as the soak writes them),
// entity by entity in the order written (scrapesPer of them a scrape), and its series keys.
func soakBucket() (inputs []frozenInput, keys []string, scrapesPer int) {
	rng := rand.New(rand.NewPCG(5, 6))
	const series, perEntity, scrapes = 18_746, 550, 40
	const bucket = 1716426600
	keys = make([]string, series)
	for i := range keys {
		keys[i] = fmt.Sprintf(`soak_http_requests_total{code="200",instance="host-%d:9100",job="job%d",k="%d",soak_tenant="soak0"}`, i/14, i/14%10, i%14)
	}
	value := func(i int, ms int64) float64 {
		sec, pace := float64(ms/1000), float64(1+(i/14)%5)
		if i%14 == 2 {
			return 1e8 + float64((uint64(ms/1000)*2654435761+uint64(i/14))%1_000_000)
		}
		return math.Floor(sec * pace * float64(1+i%14) / 14)
	}
	for s := range scrapes {
		at := int64(bucket)*1000 + int64(s)*15_000
		for first := 0; first < series; first += perEntity {
			var ss []stageenc.Series
			for i := first; i < min(first+perEntity, series); i++ {
				ss = append(ss, stageenc.Series{Key: keys[i], Times: []int64{at + int64(rng.IntN(1000))}, Values: []float64{value(i, at)}})
			}
			p := packSeries(ss)
			rk, etag := RowKey(uint64(s*100+first/perEntity+1), 0, 0), fmt.Sprint(len(inputs))
			inputs = append(inputs, frozenInput{frozenEntity{rk: rk, etag: etag, stamp: uint64(s*100 + first/perEntity + 1)}, &p})
		}
	}
	return inputs, keys, (series + perEntity - 1) / perEntity
}

// BenchmarkFrozenBytes is what the staging cache holds a point of the soak's bucket
// (soakBucket) cached whole and indexed, and frozen.
func BenchmarkFrozenBytes(b *testing.B) {
	inputs, keys, _ := soakBucket()
	c := NewCache(1 << 30)
	points := 0
	for _, in := range inputs {
		c.add("t", entityHead{pk: PartitionKey(1716426600, 0), rk: in.rk, etag: in.etag, version: Version}, map[int]cachedColumn{wholeEntity: {series: *in.pack}}, nil)
		points += in.pack.len()
	}
	cached := c.entities.Size()
	var frozen *frozenBucket
	for b.Loop() {
		var err error
		if frozen, err = freeze(nil, inputs); err != nil {
			b.Fatal(err)
		}
	}
	if seg := frozen.segments[0]; len(frozen.segments) != 1 || len(seg.loose) > 0 || len(seg.series) != len(keys) {
		b.Fatalf("%d segments, %d series frozen, %d loose", len(frozen.segments), len(seg.series), len(seg.loose))
	}
	b.ReportMetric(float64(cached)/float64(points), "cached-B/point")
	b.ReportMetric(float64(frozen.cost())/float64(points), "frozen-B/point")
	b.ReportMetric(float64(points), "points")
}

// BenchmarkFreezeByMinute is the soak's bucket (soakBucket) frozen as the cache freezes it:
// a minute's entities (4 scrapes) at a time, each freeze adding a segment
// (maxFrozenSegments) or, as before segments, making the whole bucket again
// (merge-each-freeze); and then a read of a thousand of its series from every entity.
func BenchmarkFreezeByMinute(b *testing.B) {
	inputs, keys, scrapesPer := soakBucket()
	perMinute := 4 * scrapesPer
	points := 0
	for _, in := range inputs {
		points += in.pack.len()
	}
	at := make([]int32, len(inputs))
	for i := range at {
		at[i] = int32(i)
	}
	for _, c := range []struct {
		name string
		max  int
	}{{"merge-each-freeze", 0}, {"segments", maxFrozenSegments}} {
		b.Run(c.name, func(b *testing.B) {
			defer func(max int) { maxFrozenSegments = max }(maxFrozenSegments)
			maxFrozenSegments = c.max
			var frozen *frozenBucket
			var freezeTime, readTime time.Duration
			var reads, taken int
			for b.Loop() {
				began := time.Now()
				frozen = nil
				for first := 0; first < len(inputs); first += perMinute {
					var err error
					if frozen, err = freeze(frozen, inputs[first:min(first+perMinute, len(inputs))]); err != nil {
						b.Fatal(err)
					}
				}
				freezeTime += time.Since(began)
				began = time.Now()
				if !frozen.take(at, keys[:1000], func(string, Point) { taken++ }) {
					b.Fatal("corrupt")
				}
				readTime += time.Since(began)
				reads++
			}
			if taken != reads*1000*40 {
				b.Fatalf("%d points read, want %d", taken, reads*1000*40)
			}
			b.ReportMetric(float64(freezeTime.Microseconds())/1000/float64(reads), "freeze-ms/bucket")
			b.ReportMetric(float64(readTime.Microseconds())/1000/float64(reads), "read-ms/1000-series")
			b.ReportMetric(float64(len(frozen.segments)), "segments")
			b.ReportMetric(float64(frozen.cost())/float64(points), "frozen-B/point")
		})
	}
}

// A read that takes its series through the series index takes the same points from
// entities frozen as from the same entities cached (their last writes of each time, by
// series), whichever of them are frozen, and only those of the entities it listed.
func TestTakeFrozen(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	keys := []string{"a", "b", "c", "d"}
	const pk = "001716426600-00"
	table := "t"
	var packs []seriesPack
	var rks []string
	for i := range 12 {
		var ss []stageenc.Series
		for _, k := range keys {
			if rng.IntN(4) == 0 {
				continue
			}
			// Times of a few seconds: entities write the same times again (later writes).
			ms := int64(rng.IntN(6)) * 1000
			ss = append(ss, stageenc.Series{Key: k, Times: []int64{ms, ms + 60_000}, Values: []float64{float64(i), float64(100 + i)}})
			if rng.IntN(5) == 0 { // again in the entity: its later row wins
				ss = append(ss, stageenc.Series{Key: k, Times: []int64{ms}, Values: []float64{float64(-i)}})
			}
		}
		packs = append(packs, packSeries(ss))
		rks = append(rks, RowKey(uint64(100+i), uint32(i%3), 0))
	}
	read := func(frozen []int, listedOnly []int) map[string][]tablets.Point {
		st := &Table{cache: NewCache(64 << 20), names: naming.Names{Base: "db"}}
		st.index = newSeriesIndex(st.cache, table, time.Now)
		// Held (the freeze the cache starts leaves the frozen points of a held bucket).
		st.cache.keepUnfolded(table, time.Hour, func() time.Time { return BucketEnd(pk) }, nil)
		var in []frozenInput
		for i, p := range packs {
			st.cache.add(table, entityHead{pk: pk, rk: rks[i], etag: "e", version: Version}, map[int]cachedColumn{wholeEntity: {series: p}}, nil)
			if slices.Contains(frozen, i) {
				stamp, seq, _ := StampOf([]byte(rks[i]))
				in = append(in, frozenInput{frozenEntity{rk: rks[i], etag: "e", stamp: stamp, seq: seq}, &packs[i]})
			}
		}
		if len(in) > 0 {
			b, err := freeze(nil, in)
			if err != nil {
				t.Fatal(err)
			}
			setFrozen(st.cache, frozenKey{table, pk}, b)
			for _, fi := range in {
				st.cache.entities.Remove(entityKey{table, pk, fi.rk})
			}
		}
		var listed []listedEntity
		var got []entityColumns
		for _, i := range listedOnly {
			le := listedEntity{pk: pk, rk: rks[i], etag: "e"}
			if e, ok := st.cache.entity(table, le); ok {
				listed, got = append(listed, le), append(got, entityColumns{version: Version, cols: []cachedColumn{e.cols[wholeEntity]}, whole: true})
			} else if b, at, ok := st.cache.frozen.entity(table, le); ok {
				listed, got = append(listed, le), append(got, entityColumns{version: Version, cols: []cachedColumn{}, frozen: b, at: at})
			} else {
				t.Fatalf("entity %d neither cached nor frozen", i)
			}
		}
		written := map[string][]Point{}
		take := func(slot int32, stamp uint64, record int, times []int64, values []float64) {
			for j, ms := range times {
				written[keys[slot]] = append(written[keys[slot]], Point{MS: ms, Value: values[j], Stamp: stamp, Record: record})
			}
		}
		held := func() error { return nil }
		listed, got, err := takeFrozen(listed, got, keys, take, held)
		if err != nil {
			t.Fatal(err)
		}
		rest, err := st.index.take(listed, got, keys, take, held, nil)
		if err != nil || len(rest) > 0 {
			t.Fatalf("the index took all but %v: %v", rest, err)
		}
		out := map[string][]tablets.Point{}
		for k, ws := range written {
			out[k] = LastWrites[tablets.Point](ws)
		}
		return out
	}
	every := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}
	some := []int{1, 2, 5, 8, 9, 11}
	for _, listed := range [][]int{every, some} {
		want := read(nil, listed)
		if len(want) != len(keys) {
			t.Fatalf("the cached read: %v", want)
		}
		for _, frozen := range [][]int{every, {0, 2, 4, 6, 8, 10}, {3, 7}} {
			if got := read(frozen, listed); !reflect.DeepEqual(got, want) {
				t.Errorf("listed %v, frozen %v: %v, want %v", listed, frozen, got, want)
			}
		}
	}
}

// setFrozen makes b the frozen points of fk in c, as a freeze does.
func setFrozen(c *Cache, fk frozenKey, b *frozenBucket) {
	c.frozen.mu.Lock()
	defer c.frozen.mu.Unlock()
	if c.frozen.buckets == nil {
		c.frozen.buckets = map[frozenKey]*frozenBucket{}
	}
	c.frozen.buckets[fk] = b
}
