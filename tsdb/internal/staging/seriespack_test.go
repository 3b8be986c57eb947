package staging

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sync"
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

// A sealed pack of one point a series (a scrape's write: a few targets' scrape times)
// gives back its series as packed, and costs 19 to 22 bytes a point, down from 29; with a
// time a point, or more distinct times than it indexes, it keeps a time a point (25
// bytes), and with a series of two points its points as they were; each gives back the
// same.
func TestSeriesPackSealed(t *testing.T) {
	scrape := func(n, times int) []stageenc.Series {
		var series []stageenc.Series
		for i := range n {
			t := 1_700_000_000_000 + int64(i%times)*137 // the targets' scrapes, interleaved
			series = append(series, stageenc.Series{Key: fmt.Sprintf("l%032x", i), Times: []int64{t}, Values: []float64{float64(i) / 7}})
		}
		return series
	}
	for _, c := range []struct {
		name        string
		series      []stageenc.Series
		onePoint    bool // the ends dropped
		timesAt     bool // the times indexed
		maxPerPoint float64
	}{
		{"a few targets", scrape(2000, 12), true, true, 19.5},
		{"some hundreds of targets (the soak's)", scrape(2000, 570), true, true, 22},
		{"a time a point", scrape(2000, 2000), true, false, 25.5},
		{"more times than it indexes", scrape(3*maxSealedTimes/2, maxSealedTimes+1), true, false, 25.5},
		{"a series of two points", append(scrape(100, 3), stageenc.Series{Key: "two", Times: []int64{1, 2}, Values: []float64{3, 4}}), false, false, 31},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := packSeries(c.series)
			if onePoint, timesAt := p.ends == nil, p.timeAt != nil; onePoint != c.onePoint || timesAt != c.timesAt {
				t.Errorf("ends dropped %v, times indexed %v; want %v, %v", onePoint, timesAt, c.onePoint, c.timesAt)
			}
			for i, s := range c.series {
				if got := p.at(i); !reflect.DeepEqual(got, s) {
					t.Fatalf("series %d: %+v, want %+v", i, got, s)
				}
				if times, values := p.points(i); !slices.Equal(times, s.Times) || !slices.Equal(values, s.Values) {
					t.Fatalf("series %d: points %v %v", i, times, values)
				}
			}
			// An append to a series given copies it: the pack stays as it was.
			first := p.at(0)
			_ = append(first.Times, -1)
			_ = append(first.Values, -1)
			if got := p.at(1); !reflect.DeepEqual(got, c.series[1]) {
				t.Fatalf("after an append to series 0: series 1 %+v", got)
			}
			if perPoint := float64(p.cost()) / float64(len(p.values)); perPoint > c.maxPerPoint {
				t.Errorf("%.1f bytes a point, want at most %.0f", perPoint, c.maxPerPoint)
			}
			before := p
			p.seal() // again: nothing changes
			if !reflect.DeepEqual(before, p) {
				t.Error("sealed twice, the pack changed")
			}
		})
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

// A column decoded straight into a pack (appendColumn) is the pack of its series decoded
// (label set keys and plain ones, several points and one), appended after what the pack
// held; the keys are interned, not the decoder's buffer; a column Decode rejects is an
// error.
func TestSeriesPackAppendColumn(t *testing.T) {
	var a, b []stageenc.Series
	for i := range 300 {
		s := stageenc.Series{Key: fmt.Sprintf("l%032x", i*7919), Times: []int64{int64(1000 + i)}, Values: []float64{float64(i) / 3}}
		if i%3 == 0 {
			s.Key = fmt.Sprintf("plain|%d", i) // tag 0
		}
		if i%50 == 0 {
			s.Times, s.Values = append(s.Times, int64(2000+i)), append(s.Values, float64(1<<60))
		}
		if i < 150 {
			a = append(a, s)
		} else {
			b = append(b, s)
		}
	}
	var p seriesPack
	for _, col := range [][]stageenc.Series{a, b} {
		if err := p.appendColumn(stageenc.Append(nil, col), 7); err != nil {
			t.Fatal(err)
		}
	}
	want := packSeries(append(append([]stageenc.Series{}, a...), b...))
	if p.len() != want.len() {
		t.Fatalf("%d series, want %d", p.len(), want.len())
	}
	for i := range want.len() {
		if got, w := p.at(i), want.at(i); !reflect.DeepEqual(got, w) || p.column(i) != want.column(i) || p.keys[i] != want.keys[i] {
			t.Fatalf("series %d: %+v (column %d), want %+v (column %d)", i, got, p.column(i), w, want.column(i))
		}
	}
	if err := p.appendColumn([]byte{stageenc.Version, 0, 1}, 7); err == nil {
		t.Error("a truncated column decoded")
	}
}

// BenchmarkPackColumn: a scrape's column (85 series of one point, as 20,000 series spread
// over 240 columns give) decoded then packed, against decoded straight into the pack, and
// then sealed (as the cache holds it).
func BenchmarkPackColumn(b *testing.B) {
	var col []stageenc.Series
	for i := range 85 {
		col = append(col, stageenc.Series{Key: fmt.Sprintf("l%032x", i*7919+1), Times: []int64{1_700_000_000_000}, Values: []float64{float64(i * 1000)}})
	}
	enc := stageenc.Append(nil, col)
	b.Run("decode-then-pack", func(b *testing.B) {
		for b.Loop() {
			series, err := stageenc.Decode(enc)
			if err != nil {
				b.Fatal(err)
			}
			_ = packSeries(series)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(col)), "ns/point")
	})
	b.Run("append-column", func(b *testing.B) {
		for b.Loop() {
			var p seriesPack
			if err := p.appendColumn(enc, 0); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(col)), "ns/point")
	})
	b.Run("append-column-sealed", func(b *testing.B) {
		for b.Loop() {
			var p seriesPack
			if err := p.appendColumn(enc, 0); err != nil {
				b.Fatal(err)
			}
			p.seal()
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(col)), "ns/point")
	})
}

// A column decoded after another of the same property finds the keys it shares with it
// (recentShapes) and is the pack its series make all the same: interned keys and columns
// as interning and hashing give, whatever was added, left out or moved since, and whatever
// other goroutines decode there meanwhile.
func TestSeriesPackRecentShapes(t *testing.T) {
	const c = 3
	key := func(i int) string { return fmt.Sprintf("l%032x", i*104729+5) }
	var first []stageenc.Series
	for i := range 100 {
		first = append(first, stageenc.Series{Key: key(i), Times: []int64{int64(i)}, Values: []float64{float64(i)}})
	}
	variants := [][]stageenc.Series{first}
	moved := slices.Clone(first)
	moved = slices.Delete(moved, 10, 11)                                                                         // one left out
	moved = slices.Insert(moved, 20, stageenc.Series{Key: "plain|new", Times: []int64{1}, Values: []float64{2}}) // one added
	moved[50], moved[51] = moved[51], moved[50]                                                                  // two swapped
	variants = append(variants, moved, first[60:], slices.Concat(first[:5], first[7:]))
	check := func(series []stageenc.Series) error {
		var p seriesPack
		if err := p.appendColumn(stageenc.Append(nil, series), c); err != nil {
			return err
		}
		want := packSeries(series)
		for i := range want.len() {
			if p.keys[i] != want.keys[i] || p.column(i) != want.column(i) || !reflect.DeepEqual(p.at(i), want.at(i)) {
				return fmt.Errorf("series %d: %+v (column %d), want %+v (column %d)", i, p.at(i), p.column(i), want.at(i), want.column(i))
			}
		}
		if p.len() != want.len() {
			return fmt.Errorf("%d series, want %d", p.len(), want.len())
		}
		return nil
	}
	for _, v := range variants {
		if err := check(v); err != nil {
			t.Fatal(err)
		}
	}
	if s := recentShapes[c].Load(); s == nil || len(s.keys) != 98 {
		t.Errorf("the shape of property %d kept: %v", c, s)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8*len(variants))
	for range 8 {
		for _, v := range variants {
			wg.Go(func() { errs <- check(v) })
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// An entity decoded whole, column by column (as the cache holds what a wide read fetched),
// holds its arrays at their lengths once sealed: an entity of the soak's (550 series of a
// point each, of 40 targets) cost 25.6 bytes a point with append's room past its values,
// columns and keys, and costs 19.8 fitted; and it gives back its series.
func TestSeriesPackDecodedFits(t *testing.T) {
	const n, targets = 550, 40
	cols := map[int][]stageenc.Series{}
	var want []stageenc.Series
	for i := range n {
		key := fmt.Sprintf("l%032x", i*7919)
		_, c := Hash(key)
		s := stageenc.Series{Key: key, Times: []int64{1_700_000_000_000 + int64(i%targets)*137}, Values: []float64{float64(i) / 3}}
		cols[c] = append(cols[c], s)
	}
	e := &cachedEntity{version: Version, encoded: map[int][]byte{}}
	for c, s := range cols {
		e.encoded[c] = stageenc.Append(nil, s)
	}
	for _, c := range slices.Sorted(maps.Keys(cols)) {
		want = append(want, cols[c]...)
	}
	whole, err := e.decodeAll()
	if err != nil {
		t.Fatal(err)
	}
	p := whole.series
	if cap(p.keys) != n || cap(p.columns) != n || cap(p.values) != n || cap(p.timeAt) != n || cap(p.times) != targets {
		t.Errorf("arrays of %d series: keys %d, columns %d, values %d, timeAt %d, times %d", n,
			cap(p.keys), cap(p.columns), cap(p.values), cap(p.timeAt), cap(p.times))
	}
	if perPoint := float64(p.cost()) / n; perPoint > 20 {
		t.Errorf("%.1f bytes a point", perPoint)
	}
	for i, s := range want {
		if got := p.at(i); !reflect.DeepEqual(got, s) {
			t.Fatalf("series %d: %+v, want %+v", i, got, s)
		}
	}
}
