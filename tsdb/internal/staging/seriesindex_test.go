package staging

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"
	"unique"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/stageenc"
)

// indexFixture is a staging table's cached entities as a read lists and gets them: whole
// float entities of random series (a series in many, one twice in an entity, the same
// millisecond written by two entities and by two records of one), and the cache holding
// them.
type indexFixture struct {
	clock  time.Time
	cache  *Cache
	index  *seriesIndex
	keys   []string // every series
	listed []listedEntity
	got    []entityColumns
}

const indexTable = "tindex"

func (f *indexFixture) now() time.Time { return f.clock }

func newIndexFixture(t *testing.T, rng *rand.Rand, entities int) *indexFixture {
	t.Helper()
	f := &indexFixture{cache: NewCache(256 << 20)}
	f.index = newSeriesIndex(f.cache, indexTable, f.now)
	for i := range 120 {
		f.keys = append(f.keys, fmt.Sprintf(`m{i="%03d"}`, i))
	}
	for e := range entities {
		f.put(rng, e)
	}
	return f
}

// put caches entity e anew (a new pack: what a read decoding it again leaves in the cache),
// as the e-th listed.
func (f *indexFixture) put(rng *rand.Rand, e int) {
	var series []stageenc.Series
	for _, key := range f.keys {
		if rng.IntN(3) > 0 {
			continue
		}
		s := stageenc.Series{Key: key}
		ms := int64(e/2)*1000 + rng.Int64N(3)*500 // entities two by two share milliseconds
		for range 1 + rng.IntN(3) {
			s.Times = append(s.Times, ms)
			s.Values = append(s.Values, rng.Float64())
			ms += 1 + rng.Int64N(400)
		}
		if rng.IntN(10) == 0 {
			// The same series again, later in the entity, at a millisecond no other entity
			// writes: the later record wins.
			only := int64(10_000_000 + e)
			s.Times, s.Values = append(s.Times, only), append(s.Values, 1)
			series = append(series, s, stageenc.Series{Key: key, Times: []int64{only}, Values: []float64{math.NaN()}})
		} else {
			series = append(series, s)
		}
	}
	// In column order, as a whole entity decoded is.
	slices.SortStableFunc(series, func(a, b stageenc.Series) int {
		_, ca := Hash(a.Key)
		_, cb := Hash(b.Key)
		return ca - cb
	})
	last := int64(math.MinInt64) // the entity's latest point: its U
	for _, s := range series {
		last = max(last, slices.Max(s.Times))
	}
	le := listedEntity{pk: "0001", rk: RowKey(uint64(1000+e/2), 7, e%2), etag: fmt.Sprintf("W/%d", rng.Uint32()), last: TimeKey(last)}
	whole := cachedColumn{series: packSeries(series)}
	f.cache.add(indexTable, entityHead{pk: le.pk, rk: le.rk, etag: le.etag, version: Version}, map[int]cachedColumn{wholeEntity: whole}, nil)
	ec := entityColumns{version: Version, cols: []cachedColumn{whole}, whole: true}
	if e < len(f.listed) {
		f.listed[e], f.got[e] = le, ec
	} else {
		f.listed, f.got = append(f.listed, le), append(f.got, ec)
	}
}

// read is what a read of keys takes of the entities at which (in order), with the index or
// (index nil) by assembling every entity: each series' points, as collect answers them.
func (f *indexFixture) read(t *testing.T, index *seriesIndex, which []int, keys []string) map[string][]tablets.Point {
	t.Helper()
	out, _ := f.readTaking(t, index, which, keys, false)
	return out
}

// readTaking is read, of each series' latest point only with latest (the index's take
// then stops as collect's does), and the records it took.
func (f *indexFixture) readTaking(t *testing.T, index *seriesIndex, which []int, keys []string, latest bool) (map[string][]tablets.Point, int) {
	t.Helper()
	var listed []listedEntity
	var got []entityColumns
	for _, i := range which {
		listed, got = append(listed, f.listed[i]), append(got, f.got[i])
	}
	slots := newSeriesSlots(keys)
	defer slots.release()
	if latest {
		slots.keepLatest()
	}
	records := 0
	take := func(slot int32, stamp uint64, record int, times []int64, values []float64) {
		records++
		for i, ms := range times {
			slots.take(slot, Point{MS: ms, Value: values[i], Stamp: stamp, Record: record})
		}
	}
	rest := make([]int, len(listed))
	for i := range rest {
		rest[i] = i
	}
	if index != nil {
		var err error
		if rest, err = index.take(listed, got, slots.keys, take, func() error { return nil }, slots.covers()); err != nil {
			t.Fatal(err)
		}
	}
	want := slots.byHandle()
	for _, i := range rest {
		if got[i].cols == nil {
			continue
		}
		d, ok := assemble(listed[i], got[i], want)
		if !ok {
			continue
		}
		for r, s := range d.Series {
			take(d.Slots[r], d.Stamp, d.Record(r), s.Times, s.Values)
		}
		d.release()
	}
	out := map[string][]tablets.Point{}
	for key, pts := range slots.found() {
		out[key] = appendLastPoints(nil, pts)
	}
	return out, records
}

// entities are the places of the fixture's first n entities.
func entities(n int) []int {
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	return all
}

// drop has the cache drop entity i.
func (f *indexFixture) drop(i int) {
	f.cache.entities.Remove(entityKey{indexTable, f.listed[i].pk, f.listed[i].rk})
}

// prune prunes the index, and returns how many packs it kept.
func (f *indexFixture) prune() int {
	f.index.mu.Lock()
	defer f.index.mu.Unlock()
	f.index.prune()
	return len(f.index.packs)
}

// agree fails t unless a read of keys of the entities at which takes through the index what
// assembling every entity takes.
func (f *indexFixture) agree(t *testing.T, which []int, keys []string) {
	t.Helper()
	if err := samePoints(f.read(t, f.index, which, keys), f.read(t, nil, which, keys)); err != nil {
		t.Fatal(err)
	}
}

func samePoints(a, b map[string][]tablets.Point) error {
	if len(a) != len(b) {
		return fmt.Errorf("%d series, want %d", len(a), len(b))
	}
	for key, want := range b {
		got := a[key]
		if len(got) != len(want) {
			return fmt.Errorf("%s: %d points, want %d", key, len(got), len(want))
		}
		for i := range want {
			if !got[i].Time.Equal(want[i].Time) || math.Float64bits(got[i].Value) != math.Float64bits(want[i].Value) {
				return fmt.Errorf("%s point %d: %v %v, want %v %v", key, i, got[i].Time, got[i].Value, want[i].Time, want[i].Value)
			}
		}
	}
	return nil
}

// A read through the series index takes what assembling every entity takes: read after
// read of random series and entities, while packs are added, an entity is decoded again
// (a new pack), entities leave the cache and the index prunes them; with entities the
// Fold deleted after the listing, histogram entities and a RowKey without a stamp, which
// the index leaves to assemble.
func TestSeriesIndexTakesWhatAssembleTakes(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	f := newIndexFixture(t, rng, 80)
	// A histogram entity and an entity whose RowKey holds no stamp, listed among the others.
	hist := entityColumns{version: HistVersion, cols: []cachedColumn{{hists: []stageenc.HistSeries{{Key: f.keys[0]}}}}}
	f.listed = append(f.listed, listedEntity{pk: "0001", rk: RowKey(999, 7, 0)}, listedEntity{pk: "0001", rk: "nostamp"})
	f.got = append(f.got, hist, f.got[3])
	special := []int{len(f.listed) - 2, len(f.listed) - 1}

	for round := range 60 {
		var which []int
		for i := range 80 {
			if rng.IntN(4) > 0 {
				which = append(which, i)
			}
		}
		which = append(which, special...)
		var keys []string
		for _, key := range f.keys {
			if rng.IntN(3) == 0 {
				keys = append(keys, key)
			}
		}
		keys = append(keys, `never{}`)
		gone := which[rng.IntN(len(which))]
		saved := f.got[gone]
		f.got[gone].cols = nil // deleted by the Fold between the listing and the fetch
		want := f.read(t, nil, which, keys)
		if err := samePoints(f.read(t, f.index, which, keys), want); err != nil {
			t.Fatalf("round %d: through the index: %v", round, err)
		}
		f.got[gone] = saved
		switch round % 4 {
		case 1: // an entity decoded again: the index holds two packs of it until a prune
			f.put(rng, rng.IntN(80))
		case 2: // an entity leaves the cache
			f.drop(rng.IntN(80))
		case 3:
			if held, cached := f.prune(), f.cache.entities.Len(); held > cached {
				t.Fatalf("round %d: the index holds %d packs after a prune, the cache %d entities", round, held, cached)
			}
		}
	}
	if f.index.live == 0 {
		t.Fatal("the index never pruned")
	}
}

// The index prunes what the cache no longer holds, and keeps the rest: the records of a
// series are those of the packs the cache holds, renumbered.
func TestSeriesIndexPrune(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 1))
	f := newIndexFixture(t, rng, 40)
	all := entities(40)
	f.agree(t, all, f.keys)
	if len(f.index.packs) != 40 {
		t.Fatalf("indexed %d packs, want 40", len(f.index.packs))
	}
	for i := 0; i < 40; i += 2 {
		f.drop(i)
	}
	f.prune()
	if len(f.index.packs) != 20 || len(f.index.number) != 20 || f.index.live != 20 {
		t.Fatalf("after the prune: %d packs, %d numbered, live %d; want 20", len(f.index.packs), len(f.index.number), f.index.live)
	}
	records := 0
	for key, rs := range f.index.refs {
		for _, r := range rs {
			p := f.index.packs[r.pack].pack
			if p.keys[r.i] != unique.Make(key) {
				t.Fatalf("record of %s points at %s", key, p.key(int(r.i)))
			}
			records++
		}
	}
	kept := 0
	for i := 1; i < 40; i += 2 {
		kept += f.got[i].cols[0].series.len()
	}
	if records != kept {
		t.Fatalf("%d records after the prune, want %d (the packs kept)", records, kept)
	}
	// The entities the cache dropped, fetched again, are indexed anew; the reads agree.
	for i := 0; i < 40; i += 2 {
		f.put(rng, i)
	}
	f.agree(t, all, f.keys)
	// With nothing new to index, a read prunes what the cache dropped once pruneEvery passed.
	f.drop(1)
	others := all[2:]
	f.read(t, f.index, others, f.keys)
	if len(f.index.packs) != 40 {
		t.Fatalf("the index holds %d packs before pruneEvery passed, want 40", len(f.index.packs))
	}
	f.clock = f.clock.Add(pruneEvery)
	f.agree(t, others, f.keys)
	if len(f.index.packs) != 39 {
		t.Fatalf("the index holds %d packs after pruneEvery passed, want 39", len(f.index.packs))
	}
}

// An entity the cache no longer holds, which a read got (fetched, or taken before the cache
// dropped it), is added to the index and pruned at once when a prune is due: the read
// assembles it instead, and takes what assembling every entity takes.
func TestSeriesIndexPrunedWhileRead(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 8))
	f := newIndexFixture(t, rng, 20)
	f.drop(3)
	f.drop(11)
	f.clock = f.clock.Add(pruneEvery)
	f.agree(t, entities(20), f.keys)
	if len(f.index.packs) != 18 {
		t.Fatalf("the index holds %d packs, want 18 (the cache's)", len(f.index.packs))
	}
}

// Reads through the index at once, while others add packs and prune, take what assembling
// takes (run with -race).
func TestSeriesIndexConcurrentReads(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	f := newIndexFixture(t, rng, 60)
	all := entities(60)
	want := f.read(t, nil, all, f.keys)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			for range 20 {
				if err := samePoints(f.read(t, f.index, all, f.keys), want); err != nil {
					errs <- fmt.Errorf("reader %d: %w", g, err)
					return
				}
				f.prune()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// BenchmarkSeriesIndexTake is a group's read of the soak's shape: a tenant of 18,746 series
// scraped every 15 s into entities of a remote write's 550 series each (a point each), ten
// minutes of them (about 750 entities), and a read of 1,024 of the series, through the
// index or by assembling every entity.
func BenchmarkSeriesIndexTake(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	const series, perEntity, entities, wanted = 18_746, 550, 750, 1024
	keys, scrapes := soakScrapes(rng, series, perEntity, entities, func(e int) int64 { return int64(e) * 1000 })
	cache := NewCache(1 << 30)
	index := newSeriesIndex(cache, indexTable, time.Now)
	var listed []listedEntity
	var got []entityColumns
	for e, ss := range scrapes {
		le := listedEntity{pk: "0001", rk: RowKey(uint64(e), 1, 0), etag: "W/1"}
		whole := cachedColumn{series: packSeries(ss)}
		cache.add(indexTable, entityHead{pk: le.pk, rk: le.rk, etag: le.etag, version: Version}, map[int]cachedColumn{wholeEntity: whole}, nil)
		listed = append(listed, le)
		got = append(got, entityColumns{version: Version, cols: []cachedColumn{whole}, whole: true})
	}
	read := keys[:0:0]
	for _, i := range rng.Perm(series)[:wanted] {
		read = append(read, keys[i])
	}
	run := func(b *testing.B, viaIndex bool) {
		points := 0
		for b.Loop() {
			slots := newSeriesSlots(read)
			take := func(slot int32, stamp uint64, record int, times []int64, values []float64) {
				for i, ms := range times {
					slots.take(slot, Point{MS: ms, Value: values[i], Stamp: stamp, Record: record})
				}
			}
			if viaIndex {
				if _, err := index.take(listed, got, slots.keys, take, func() error { return nil }, nil); err != nil {
					b.Fatal(err)
				}
			} else {
				want := slots.byHandle()
				for i, le := range listed {
					d, _ := assemble(le, got[i], want)
					for r, s := range d.Series {
						take(d.Slots[r], d.Stamp, d.Record(r), s.Times, s.Values)
					}
					d.release()
				}
			}
			points = slots.taken.len()
			slots.release()
		}
		b.ReportMetric(float64(points), "points/op")
	}
	b.Run("assemble", func(b *testing.B) { run(b, false) })
	b.Run("index", func(b *testing.B) { run(b, true) })
}

// soakScrapes is the soak's staged scrapes of one tenant's bucket, for the benchmarks: the
// keys of series series, and entities entities of perEntity of them each (in the order of
// their columns), entity e's point of each at Unix millisecond at(e).
func soakScrapes(rng *rand.Rand, series, perEntity, entities int, at func(e int) int64) (keys []string, scrapes [][]stageenc.Series) {
	keys = make([]string, series)
	for i := range keys {
		keys[i] = fmt.Sprintf(`soak_http_requests_total{code="200",instance="host-%d:9100",k="%d"}`, i/14, i%14)
	}
	for e := range entities {
		first := (e * perEntity) % series
		var ss []stageenc.Series
		for j := range perEntity {
			ss = append(ss, stageenc.Series{Key: keys[(first+j)%series], Times: []int64{at(e)}, Values: []float64{rng.Float64()}})
		}
		slices.SortStableFunc(ss, func(a, b stageenc.Series) int {
			_, ca := Hash(a.Key)
			_, cb := Hash(b.Key)
			return ca - cb
		})
		scrapes = append(scrapes, ss)
	}
	return keys, scrapes
}

// TestSeriesIndexTakesLatest: a read of each series' latest point (ReadPacked's latest)
// gives of each series the point the read of all of them gives last (the latest
// millisecond, of it the last write: the fixture writes milliseconds twice), through the
// index newest first or by assembling; and through the index it takes fewer records than
// the whole read where the newest entities hold every series.
func TestSeriesIndexTakesLatest(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 36))
	fewer := 0
	for round := range 200 {
		f := newIndexFixture(t, rng, 2+rng.IntN(40))
		which := rng.Perm(len(f.listed))[:1+rng.IntN(len(f.listed))]
		keys := f.keys
		if round%2 == 1 {
			keys = f.keys[:1+rng.IntN(4)] // few series: the newest entities hold them all
		}
		all, allRecords := f.readTaking(t, f.index, which, keys, false)
		for _, index := range []*seriesIndex{f.index, nil} {
			latest, records := f.readTaking(t, index, which, keys, true)
			for _, key := range keys {
				pts := all[key]
				if len(pts) == 0 {
					if len(latest[key]) != 0 {
						t.Fatalf("round %d: %s: %v, read whole: none", round, key, latest[key])
					}
					continue
				}
				want := pts[len(pts)-1]
				if len(latest[key]) != 1 || latest[key][0].Time != want.Time || math.Float64bits(latest[key][0].Value) != math.Float64bits(want.Value) {
					t.Fatalf("round %d (index %v): %s: %v, want the last of %v", round, index != nil, key, latest[key], pts)
				}
			}
			if index != nil && records < allRecords {
				fewer++
			}
		}
	}
	if fewer < 20 {
		t.Errorf("the index's take stopped early in %d reads of 200", fewer)
	}
}

// TestLatestPointsCovers: covers says an entity can hold nothing offer would keep only
// when every slot has a point later than the entity's latest.
func TestLatestPointsCovers(t *testing.T) {
	l := newLatestPoints(2)
	if l.covers(TimeKey(-5)) {
		t.Fatal("covers with no point")
	}
	l.offer(0, Point{MS: 10, Stamp: 1})
	if l.covers(TimeKey(5)) {
		t.Fatal("covers with a slot missing")
	}
	l.offer(1, Point{MS: 20, Stamp: 1})
	for _, c := range []struct {
		ms   int64
		want bool
	}{{9, true}, {10, false}, {11, false}, {-1, true}} {
		if got := l.covers(TimeKey(c.ms)); got != c.want {
			t.Errorf("covers(%d) = %v, want %v", c.ms, got, c.want)
		}
	}
	l.offer(0, Point{MS: 30, Stamp: 1}) // the floor moves to 20
	if !l.covers(TimeKey(19)) || l.covers(TimeKey(20)) {
		t.Error("the floor did not move to slot 1's 20")
	}
	// A later write of the same millisecond replaces; an earlier one, or an earlier
	// record of the same write, does not.
	l.offer(1, Point{MS: 20, Stamp: 2, Value: 2})
	l.offer(1, Point{MS: 20, Stamp: 1, Value: 3})
	l.offer(1, Point{MS: 20, Stamp: 2, Record: -1, Value: 4})
	l.offer(1, Point{MS: 19, Stamp: 9, Value: 5})
	if p := l.points[1]; p.Value != 2 {
		t.Errorf("slot 1 kept %+v, want the write of stamp 2", p)
	}
}
