package staging

import (
	"slices"
	"sync/atomic"
	"unique"
	"unsafe"

	"github.com/seed71701133/tablets/internal/stageenc"
)

// seriesPack is the float series of a cached column (or of a whole entity), packed: their
// keys interned, their points in two arrays. A staging entity written at a scrape holds one
// point of each of thousands of series, so that a column decoded as []stageenc.Series
// cost about 113 bytes a point (the Series, its own copy of the key, two one-point
// slices); packed, it costs 29 (a handle, its column, an end, a time, a value): the cache holds four
// times as many staged points in its bound. Measured in the soak (4 tenants of 18,746
// series, 15 minutes staged): the 256 MiB staging cache held a few minutes of them, and
// missed seven columns in eight.
//
// Sealed (seal, once the last column is in), a pack of one point a series, as a scrape's
// write is, keeps no ends, and each point's time as its place among the pack's distinct
// times: 19 bytes a point where the batch holds a few targets' scrapes, about 22 where it
// holds some hundreds (the soak's). The staging cache is most of a server's heap in the soak (150 of 500 MB a server, the
// last 15 minutes of four tenants' writes), and what it holds grows with the staged window
// after a server starts.
//
// Never changed once sealed: the series it gives share its arrays (read-only, as the cached
// columns always were).
type seriesPack struct {
	keys    []unique.Handle[string]
	columns []uint8  // series i's column (Hash)
	ends    []uint32 // series i's points are [ends[i-1], ends[i]) (0 before the first); nil: [i, i+1)
	// times are the points' times; where timeAt is not nil (one point a series), the
	// pack's distinct times, series i's at timeAt[i].
	times  []int64
	timeAt []uint16
	values []float64
}

// packSeries packs series.
func packSeries(series []stageenc.Series) seriesPack {
	n := 0
	for _, s := range series {
		n += len(s.Times)
	}
	p := seriesPack{keys: make([]unique.Handle[string], len(series)), columns: make([]uint8, len(series)),
		ends: make([]uint32, len(series)), times: make([]int64, 0, n), values: make([]float64, 0, n)}
	for i, s := range series {
		p.keys[i] = unique.Make(s.Key)
		_, c := Hash(s.Key)
		p.columns[i] = uint8(c)
		p.times = append(p.times, s.Times...)
		p.values = append(p.values, s.Values...)
		p.ends[i] = uint32(len(p.times))
	}
	p.seal()
	return p
}

// fit moves p's arrays to arrays of their lengths where append left room past them: a pack
// decoded column by column (appendColumn) grows its arrays as append does, and an entity
// of the soak's (550 series of a point each, of 40 targets, decoded whole) held 848 values,
// 896 columns and 607 keys for its 550 series: 25.6 bytes a point where 19.8 hold it
// (TestSeriesPackDecodedFits), the staging cache being most of a server's heap. The copy
// is made once, as the pack is sealed.
func (p *seriesPack) fit() {
	p.keys = fitted(p.keys)
	p.columns = fitted(p.columns)
	p.ends = fitted(p.ends)
	p.times = fitted(p.times)
	p.values = fitted(p.values)
}

// fitted returns s in an array of its length (s itself when it has no room past it).
func fitted[E any](s []E) []E {
	if cap(s) == len(s) || s == nil {
		return s
	}
	out := make([]E, len(s))
	copy(out, s)
	return out
}

// maxSealedTimes is how many distinct times a sealed pack of one point a series indexes
// (timeAt holds uint16s); a pack with more keeps a time a point.
const maxSealedTimes = 1 << 16

// linearTimes is how many distinct times seal looks through one by one before it looks
// them up in a map.
const linearTimes = 16

// seal makes p, whose columns are all in, as small as it can be held: a pack of one point
// a series (a scrape's write) drops its ends, and keeps its distinct times and each
// point's place among them where that is smaller than a time a point (fewer distinct
// times than three in four points, and at most maxSealedTimes). Its series are what they
// were.
//
// A remote write's batch holds samples of many targets, each at its target's scrape time:
// in the soak (Prometheus' sharding by series, 14 series a target) a batch of 2,000 holds
// some hundreds of distinct times.
func (p *seriesPack) seal() {
	p.fit()
	if p.ends == nil || len(p.values) != len(p.keys) {
		return // sealed already, or some series has more points (or none)
	}
	for i, e := range p.ends {
		if e != uint32(i+1) {
			return
		}
	}
	p.ends = nil
	// The distinct times: a batch's points come mostly target by target, so the last one
	// found is mostly the one; past a few, a map finds the others.
	var distinct []int64
	var index map[int64]uint16
	at := make([]uint16, len(p.times))
	last := 0
	for i, t := range p.times {
		if len(distinct) > 0 && distinct[last] == t {
			at[i] = uint16(last)
			continue
		}
		k := -1
		if index != nil {
			if v, ok := index[t]; ok {
				k = int(v)
			}
		} else {
			k = slices.Index(distinct, t)
		}
		if k < 0 {
			if len(distinct) == maxSealedTimes {
				return // a time a point, as it is
			}
			k = len(distinct)
			distinct = append(distinct, t)
			switch {
			case index != nil:
				index[t] = uint16(k)
			case len(distinct) > linearTimes:
				index = make(map[int64]uint16, 4*len(distinct))
				for d, dt := range distinct {
					index[dt] = uint16(d)
				}
			}
		}
		at[i], last = uint16(k), k
	}
	if 4*len(distinct) >= 3*len(p.times) {
		return // a place a point and the distinct times are not smaller
	}
	p.times, p.timeAt = slices.Clip(distinct), at
}

// span is where series i's points are: [start, end) of values (and of times, where
// timeAt is nil).
func (p *seriesPack) span(i int) (start, end uint32) {
	if p.ends == nil {
		return uint32(i), uint32(i + 1)
	}
	if i > 0 {
		start = p.ends[i-1]
	}
	return start, p.ends[i]
}

// points are series i's times and values, sharing p's arrays (full slices: an append
// copies them).
func (p *seriesPack) points(i int) ([]int64, []float64) {
	start, end := p.span(i)
	values := p.values[start:end:end]
	if p.timeAt != nil {
		t := int(p.timeAt[i])
		return p.times[t : t+1 : t+1], values
	}
	return p.times[start:end:end], values
}

// len is the number of series.
func (p *seriesPack) len() int { return len(p.keys) }

// column is series i's column.
func (p *seriesPack) column(i int) int { return int(p.columns[i]) }

// key is series i's key.
func (p *seriesPack) key(i int) string { return p.keys[i].Value() }

// at is series i, its points sharing p's arrays (full slices: an append copies them).
func (p *seriesPack) at(i int) stageenc.Series {
	times, values := p.points(i)
	return stageenc.Series{Key: p.key(i), Times: times, Values: values}
}

// cost is about the memory p holds (the interned keys are shared by every column that
// holds the series, and counted nowhere: a few MB for a hundred thousand series).
func (p *seriesPack) cost() int {
	return int(unsafe.Sizeof(*p)) + int(unsafe.Sizeof(unique.Handle[string]{}))*cap(p.keys) + cap(p.columns) + 4*cap(p.ends) + 8*(cap(p.times)+cap(p.values)) + 2*cap(p.timeAt)
}

// appendColumn decodes a float staging column as read (stageenc), property c of its
// entity, straight into p (not sealed: the caller seals it once its last column is in):
// no stageenc.Series, key string or one-point slices a series, which decoding and then
// packing allocated (a scrape's entity holds a point of each of thousands of series). Its
// keys are interned as recentShapes finds them.
func (p *seriesPack) appendColumn(b []byte, c int) error {
	var prev *columnShape
	if c >= 0 && c < Columns {
		prev = recentShapes[c].Load()
	}
	start, at := len(p.keys), 0
	err := stageenc.DecodeEach(b, nil, func(key []byte, times []int64, values []float64) {
		h, col, ok := prev.find(key, &at)
		if !ok {
			// unique.Make copies a string it keeps: the key may be the decoder's buffer.
			k := unsafe.String(unsafe.SliceData(key), len(key))
			h = unique.Make(k)
			_, hc := Hash(k)
			col = uint8(hc)
		}
		p.keys = append(p.keys, h)
		p.columns = append(p.columns, col)
		p.times = append(p.times, times...)
		p.values = append(p.values, values...)
		p.ends = append(p.ends, uint32(len(p.times)))
	})
	if end := len(p.keys); err == nil && end > start && c >= 0 && c < Columns {
		recentShapes[c].Store(&columnShape{keys: p.keys[start:end:end], columns: p.columns[start:end:end]})
	}
	return err
}

// columnShape is the series of a decoded column, in order: their interned keys and
// columns (never changed once made).
type columnShape struct {
	keys    []unique.Handle[string]
	columns []uint8
}

// recentShapes are, by property, the series of the column decoded last there (of any
// table). The entities of a table's scrapes hold the same series in a column, mostly in
// the same order, so that the next one decoded finds most of its keys here by comparing
// strings, instead of interning each (unique.Make hashes the key and looks it up in a map
// every goroutine shares) and hashing it again for its column: a tenth of the CPU of a
// panel's first run, which decodes the staging table's half hour. A key not found is
// interned; what is found is what interning gives.
var recentShapes [Columns]atomic.Pointer[columnShape]

// find is key's interned key and column if the shape holds it at *at or right after
// (moving *at past it); false if not (or s is nil).
func (s *columnShape) find(key []byte, at *int) (unique.Handle[string], uint8, bool) {
	if s == nil {
		return unique.Handle[string]{}, 0, false
	}
	for i := *at; i < *at+2 && i < len(s.keys); i++ {
		if s.keys[i].Value() == string(key) {
			*at = i + 1
			return s.keys[i], s.columns[i], true
		}
	}
	return unique.Handle[string]{}, 0, false
}
