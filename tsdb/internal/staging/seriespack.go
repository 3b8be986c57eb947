package staging

import (
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
// Never changed once made: the series it gives share its arrays (read-only, as the cached
// columns always were).
type seriesPack struct {
	keys    []unique.Handle[string]
	columns []uint8  // series i's column (Hash)
	ends    []uint32 // series i's points are [ends[i-1], ends[i]) (0 before the first)
	times   []int64
	values  []float64
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
	return p
}

// len is the number of series.
func (p *seriesPack) len() int { return len(p.keys) }

// column is series i's column.
func (p *seriesPack) column(i int) int { return int(p.columns[i]) }

// key is series i's key.
func (p *seriesPack) key(i int) string { return p.keys[i].Value() }

// at is series i, its points sharing p's arrays (full slices: an append copies them).
func (p *seriesPack) at(i int) stageenc.Series {
	start := uint32(0)
	if i > 0 {
		start = p.ends[i-1]
	}
	end := p.ends[i]
	return stageenc.Series{Key: p.key(i), Times: p.times[start:end:end], Values: p.values[start:end:end]}
}

// cost is about the memory p holds (the interned keys are shared by every column that
// holds the series, and counted nowhere: a few MB for a hundred thousand series).
func (p *seriesPack) cost() int {
	return int(unsafe.Sizeof(*p)) + int(unsafe.Sizeof(unique.Handle[string]{}))*cap(p.keys) + cap(p.columns) + 4*cap(p.ends) + 8*(cap(p.times)+cap(p.values))
}

// appendColumn decodes a float staging column as read (stageenc), property c of its
// entity, straight into p: no stageenc.Series, key string or one-point slices a series,
// which decoding and then packing allocated (a scrape's entity holds a point of each of
// thousands of series). Its keys are interned as recentShapes finds them.
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
