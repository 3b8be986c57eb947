package staging

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/stageenc"
	"github.com/seed71701133/tablets/tsdb/internal/naming"
)

// A pack gives back the series it packed, shares the keys of equal series across packs,
// and costs about 29 bytes a point for the one-point series of a scrape's write (the
// Series of each cost 113).
func TestSeriesPack(t *testing.T) {
	var series []stageenc.Series
	for i := range 1000 {
		s := stageenc.Series{Key: fmt.Sprintf("l%032x", i), Times: []int64{int64(i)}, Values: []float64{float64(i) / 3}}
		if i%100 == 0 {
			s.Times, s.Values = append(s.Times, int64(i)+5), append(s.Values, 7)
		}
		series = append(series, s)
	}
	p := packSeries(series)
	if p.len() != len(series) {
		t.Fatalf("%d series, want %d", p.len(), len(series))
	}
	for i, s := range series {
		if got := p.at(i); !reflect.DeepEqual(got, s) {
			t.Fatalf("series %d: %+v, want %+v", i, got, s)
		}
	}
	// An append to a series given does not write into the next one's points.
	first := p.at(0)
	_ = append(first.Times, -1)
	if p.at(1).Times[0] != 1 {
		t.Error("an append wrote into the pack")
	}
	q := packSeries(series[:10])
	if p.keys[3] != q.keys[3] {
		t.Error("the keys of two packs are not shared")
	}
	if perPoint := float64(p.cost()) / 1010; perPoint > 30 {
		t.Errorf("%.1f bytes a point", perPoint)
	}
	if empty := packSeries(nil); empty.len() != 0 {
		t.Errorf("empty: %d series", empty.len())
	}
}

// An entity the cache holds as written keeps only its whole decoded form once a wide read
// decoded it (one copy, not two), and gives any column from it as decoding that column
// would.
func TestCacheWholeReplacesColumns(t *testing.T) {
	var writes []Write
	for i := range 300 {
		name := fmt.Sprintf("s%d", i)
		writes = append(writes, Write{Series: name, Records: PointRecords(name, []tablets.Point{{Time: time.UnixMilli(int64(1000 + i)), Value: float64(i)}}, nil)})
	}
	var e *Entity
	for _, es := range Build(writes, 1716426600, 1, 7, 1) {
		e = es[0]
	}
	e.Body()
	st := &Table{cache: NewCache(16 << 20), names: naming.Names{Base: "db"}}
	// As written (a histogram entity's way), then read whole.
	le := listedEntity{pk: e.PartitionKey, rk: e.RowKey, etag: `W/"1"`}
	st.cache.add("dbw", entityHead{pk: le.pk, rk: le.rk, etag: le.etag, version: Version}, nil, e.Encoded())
	ce, ok := st.cache.entity("dbw", le)
	if !ok || ce.encoded == nil {
		t.Fatalf("not cached as written: %v", ok)
	}
	_, c := Hash("s7")
	want, err := ce.decode(c)
	if err != nil || want.series.len() == 0 {
		t.Fatalf("column %d: %v, %d series", c, err, want.series.len())
	}
	before := entityCost(entityKey{}, ce)
	_, decoded, ok := ce.columns([]int{wholeEntity})
	if !ok {
		t.Fatal("no whole entity")
	}
	st.cache.add("dbw", entityHead{pk: le.pk, rk: le.rk, etag: le.etag, version: Version}, decoded, nil)
	ce, _ = st.cache.entity("dbw", le)
	if ce.encoded != nil || len(ce.cols) != 1 {
		t.Errorf("the whole entity decoded besides %d columns as read and %d decoded", len(ce.encoded), len(ce.cols)-1)
	}
	t.Logf("as written %d bytes, whole decoded %d", before, entityCost(entityKey{}, ce))
	// A float entity this Table wrote is cached so from the start.
	st.cacheWritten([]*Entity{e}, []string{`W/"2"`})
	if w, ok := st.cache.entity("dbw", listedEntity{pk: le.pk, rk: le.rk, etag: `W/"2"`}); !ok || w.encoded != nil || len(w.cols) != 1 {
		t.Errorf("written: cached %v, as written %v", ok, w != nil && w.encoded != nil)
	}
	cols, _, ok := ce.columns([]int{c})
	if !ok || !reflect.DeepEqual(cols[0].series.keys, want.series.keys) || !reflect.DeepEqual(cols[0].series.times, want.series.times) ||
		!reflect.DeepEqual(cols[0].series.values, want.series.values) {
		t.Errorf("column %d from the whole entity: %+v, want %+v", c, cols[0].series, want.series)
	}
}
