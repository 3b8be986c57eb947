package staging

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/tsdb/internal/changelog"
	"github.com/seed71701133/tablets/tsdb/internal/naming"
)

// A Fold's receipt names the entities its rounds read, at the ETags read, and the buckets
// they are of; a Fold whose rounds read different entities or ETags (a Delete between two
// rounds) has none.
func TestReceiptOf(t *testing.T) {
	horizon := uint64(1716427800)
	round := map[[2]string]string{
		{"001716426600-00", "a"}: `W/"1"`,
		{"001716427200-80", "b"}: `W/"2"`,
	}
	r := receiptOf([]map[[2]string]string{round, round}, horizon)
	want := changelog.ReceiptDigest([]changelog.ReceiptEntity{
		{PartitionKey: "001716427200-80", RowKey: "b", ETag: `W/"2"`}, {PartitionKey: "001716426600-00", RowKey: "a", ETag: `W/"1"`}})
	if r == nil || r.From != 1716426600 || r.Horizon != horizon || r.Count != 2 || r.Digest != want {
		t.Errorf("receipt %+v", r)
	}
	other := map[[2]string]string{{"001716426600-00", "a"}: `W/"1"`, {"001716427200-80", "b"}: `W/"3"`}
	if r := receiptOf([]map[[2]string]string{round, other}, horizon); r != nil {
		t.Errorf("rounds at other ETags: %+v", r)
	}
	fewer := map[[2]string]string{{"001716426600-00", "a"}: `W/"1"`}
	if r := receiptOf([]map[[2]string]string{round, fewer}, horizon); r != nil {
		t.Errorf("rounds of other entities: %+v", r)
	}
	if r := receiptOf([]map[[2]string]string{{}}, horizon); r != nil {
		t.Errorf("nothing read: %+v", r)
	}
}

// A receipt is matched against the entities a Table's listings knew, listed now or
// departed since: those of its buckets, when they are as many and their digest is its.
func TestReceiptEntities(t *testing.T) {
	st := &Table{}
	now := time.Now()
	was := map[[2]string]listedProps{
		{"001716426600-00", "a"}: {etag: `W/"1"`},
		{"001716426600-00", "b"}: {etag: `W/"2"`},
		{"001716427200-00", "c"}: {etag: `W/"3"`}, // a later bucket
	}
	st.listing.byKey = map[[2]string]listedProps{
		{"001716427200-00", "c"}: {etag: `W/"3"`},
		{"001716426600-00", "b"}: {etag: `W/"4"`}, // rewritten (a Delete)
	}
	st.listing.depart(was, st.listing.byKey, now)
	if len(st.listing.departed) != 2 {
		t.Fatalf("departed %v", st.listing.departed)
	}
	digest := func(es ...changelog.ReceiptEntity) [16]byte { return changelog.ReceiptDigest(es) }
	a := changelog.ReceiptEntity{PartitionKey: "001716426600-00", RowKey: "a", ETag: `W/"1"`}
	b2 := changelog.ReceiptEntity{PartitionKey: "001716426600-00", RowKey: "b", ETag: `W/"2"`}
	b4 := changelog.ReceiptEntity{PartitionKey: "001716426600-00", RowKey: "b", ETag: `W/"4"`}
	// The bucket of 01:10 holds a, b as departed and b as listed now: three entities.
	for _, c := range []struct {
		r  changelog.Receipt
		ok bool
	}{
		{changelog.Receipt{From: 1716426600, Horizon: 1716427200, Count: 3, Digest: digest(a, b2, b4)}, true},
		{changelog.Receipt{From: 1716426600, Horizon: 1716427200, Count: 2, Digest: digest(a, b2)}, false},
		{changelog.Receipt{From: 1716426600, Horizon: 1716427200, Count: 3, Digest: digest(a, b2, b2)}, false},
		{changelog.Receipt{From: 1716427200, Horizon: 1716427800, Count: 1,
			Digest: digest(changelog.ReceiptEntity{PartitionKey: "001716427200-00", RowKey: "c", ETag: `W/"3"`})}, true},
	} {
		set, ok := st.receiptEntities(c.r)
		if ok != c.ok || (ok && uint64(len(set)) != c.r.Count) {
			t.Errorf("receipt %+v: %v, %v", c.r, set, ok)
		}
	}
	// Departed entities are forgotten after departedFor.
	st.listing.depart(st.listing.byKey, st.listing.byKey, now.Add(departedFor+time.Second))
	if len(st.listing.departed) != 0 {
		t.Errorf("still departed: %v", st.listing.departed)
	}
}

// FoldedFloats takes the points of the receipts' entities from the cache, the last write of
// a millisecond within a receipt; it leaves out a series two receipts hold a millisecond
// of, and answers nothing when a receipt matches no listing or an entity is not cached at
// the ETag the Fold read.
func TestFoldedFloats(t *testing.T) {
	st := &Table{cache: NewCache(1 << 20), names: naming.Names{Base: "db"}}
	ms := func(s int) time.Time { return time.UnixMilli(1716426600000 + int64(s)*1000).UTC() }
	pts := func(vs ...float64) []tablets.Point { // value v at second v
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
	first := write(b1, 1, map[string][]tablets.Point{"a": pts(1, 2), "b": pts(1)})
	rewrite := write(b1, 2, map[string][]tablets.Point{"a": {{Time: ms(2), Value: 20}}}) // a later write of a's second 2
	second := write(b2, 3, map[string][]tablets.Point{"a": pts(3), "b": pts(1)})         // b's second 1 again
	st.listing.byKey = map[[2]string]listedProps{}
	receipt := func(bucket uint64, sets ...[]*Entity) changelog.Receipt {
		var es []changelog.ReceiptEntity
		for _, set := range sets {
			for _, e := range set {
				etag := `W/"` + e.RowKey + `"`
				st.listing.byKey[[2]string{e.PartitionKey, e.RowKey}] = listedProps{etag: etag}
				st.cacheWritten([]*Entity{e}, []string{etag})
				es = append(es, changelog.ReceiptEntity{PartitionKey: e.PartitionKey, RowKey: e.RowKey, ETag: etag})
			}
		}
		return changelog.Receipt{From: bucket, Horizon: bucket + 600, Count: uint64(len(es)), Digest: changelog.ReceiptDigest(es)}
	}
	r1, r2 := receipt(b1, first, rewrite), receipt(b2, second)

	// The same answers with no series index (the entities' rows looked at one by one), with
	// every entity's pack in the index (the series' records found through it), and with
	// some of them only (the others looked at).
	var listed []listedEntity
	var got []entityColumns
	for _, e := range slices.Concat(first, rewrite, second) {
		le := listedEntity{pk: e.PartitionKey, rk: e.RowKey, etag: `W/"` + e.RowKey + `"`}
		ce, ok := st.cache.entity(st.names.Staging(), le)
		if !ok {
			t.Fatalf("entity %s not cached", e.RowKey)
		}
		whole, ok := ce.cols[wholeEntity]
		if !ok {
			t.Fatalf("entity %s not cached whole", e.RowKey)
		}
		listed = append(listed, le)
		got = append(got, entityColumns{version: Version, cols: []cachedColumn{whole}, whole: true})
	}
	all := make([]int, len(listed))
	for i := range all {
		all[i] = i
	}
	if len(all) < 3 {
		t.Fatalf("%d entities", len(all))
	}
	for _, indexed := range [][]int{nil, all, {0, 2}} {
		st.index = nil
		if indexed != nil {
			st.index = newSeriesIndex(st.cache, st.names.Staging(), time.Now)
			st.index.add(listed, got, indexed)
		}
		got := st.FoldedFloats([]changelog.Receipt{r1}, []string{"a", "b", "c"})
		want := map[string][]tablets.Point{"a": {{Time: ms(1), Value: 1}, {Time: ms(2), Value: 20}}, "b": pts(1), "c": {}}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("indexed %v: one receipt: %v, want %v", indexed, got, want)
		}
		got = st.FoldedFloats([]changelog.Receipt{r1, r2}, []string{"a", "b", "a"})
		want = map[string][]tablets.Point{"a": {{Time: ms(1), Value: 1}, {Time: ms(2), Value: 20}, {Time: ms(3), Value: 3}}}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("indexed %v: two receipts: %v, want %v (b's second 1 in both: left out)", indexed, got, want)
		}
	}
	other := r2
	other.Digest[0]++
	if got := st.FoldedFloats([]changelog.Receipt{r1, other}, []string{"a"}); got != nil {
		t.Errorf("a receipt no listing matches: %v", got)
	}
	// An entity cached at another ETag than the Fold read.
	st.cacheWritten(second, []string{`W/"later"`})
	if got := st.FoldedFloats([]changelog.Receipt{r2}, []string{"a"}); got != nil {
		t.Errorf("an entity not cached at its ETag: %v", got)
	}
}

// BenchmarkFoldedFloats is what a raw cache's take-in of another process's Fold costs a
// batch of its series (raw.takeInFolds calls FoldedFloats once a batch of 64): the soak's
// bucket of one tenant, 750 whole entities of 550 series each (18,746 series, 40 scrapes),
// which the queries' reads put in the series index (indexed), or not yet (unindexed).
func BenchmarkFoldedFloats(b *testing.B) {
	b.Run("indexed", func(b *testing.B) { benchmarkFoldedFloats(b, true) })
	b.Run("unindexed", func(b *testing.B) { benchmarkFoldedFloats(b, false) })
}

func benchmarkFoldedFloats(b *testing.B, indexed bool) {
	rng := rand.New(rand.NewPCG(1, 2))
	const series, perEntity, entities, batch = 18_746, 550, 750, 64
	const bucket = 1716426600
	keys, scrapes := soakScrapes(rng, series, perEntity, entities, func(e int) int64 { return bucket*1000 + int64(e)*15_000/19 })
	st := &Table{cache: NewCache(1 << 30), names: naming.Names{Base: "db"}}
	st.listing.byKey = map[[2]string]listedProps{}
	st.index = newSeriesIndex(st.cache, st.names.Staging(), time.Now)
	pk := PartitionKey(bucket, 0)
	var es []changelog.ReceiptEntity
	var listed []listedEntity
	var got []entityColumns
	var all []int
	for e, ss := range scrapes {
		rk, etag := RowKey(uint64(e+1), 1, 0), fmt.Sprintf(`W/"%d"`, e)
		whole := cachedColumn{series: packSeries(ss)}
		st.cache.add(st.names.Staging(), entityHead{pk: pk, rk: rk, etag: etag, version: Version},
			map[int]cachedColumn{wholeEntity: whole}, nil)
		listed = append(listed, listedEntity{pk: pk, rk: rk, etag: etag})
		got = append(got, entityColumns{version: Version, cols: []cachedColumn{whole}, whole: true})
		all = append(all, e)
		st.listing.byKey[[2]string{pk, rk}] = listedProps{etag: etag}
		es = append(es, changelog.ReceiptEntity{PartitionKey: pk, RowKey: rk, ETag: etag})
	}
	receipts := []changelog.Receipt{{From: bucket, Horizon: bucket + 600, Count: entities, Digest: changelog.ReceiptDigest(es)}}
	if indexed {
		st.index.add(listed, got, all)
	}
	points := 0
	for b.Loop() {
		first := rng.IntN(series - batch)
		got := st.FoldedFloats(receipts, keys[first:first+batch])
		if len(got) != batch {
			b.Fatalf("%d series of %d", len(got), batch)
		}
		points = 0
		for _, p := range got {
			points += len(p)
		}
	}
	b.ReportMetric(float64(points), "points/op")
}
