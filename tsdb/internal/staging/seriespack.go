package staging

import (
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

// appendColumn decodes a float staging column as read (stageenc) straight into p: no
// stageenc.Series, key string or one-point slices a series, which decoding and then
// packing allocated (a scrape's entity holds a point of each of thousands of series).
func (p *seriesPack) appendColumn(b []byte) error {
	return stageenc.DecodeEach(b, nil, func(key []byte, times []int64, values []float64) {
		// unique.Make copies a string it keeps: the key may be the decoder's buffer.
		k := unsafe.String(unsafe.SliceData(key), len(key))
		p.keys = append(p.keys, unique.Make(k))
		_, c := Hash(k)
		p.columns = append(p.columns, uint8(c))
		p.times = append(p.times, times...)
		p.values = append(p.values, values...)
		p.ends = append(p.ends, uint32(len(p.times)))
	})
}
