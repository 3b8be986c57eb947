package staging

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/internal/stageenc"
)

// Piece is the part of one write's samples in one staging entity: Write is the write's
// index (in Build's writes), Args the caller's samples, so that a failed transaction lists
// exactly the samples it held.
type Piece struct {
	Write int
	Args  []int
}

// Entity is one staging entity being built: records are added to its columns while they
// fit, and Body encodes it.
type Entity struct {
	PartitionKey, RowKey string
	Lo, Hi               int     // the partition's slots
	Version              int     // Version (0 means it too) or HistVersion
	Pieces               []Piece // what it holds of each write

	columns     [Columns][]stageenc.Series
	histRecords [Columns][]byte // of a histogram entity: each column's records
	sizes       [Columns]int
	size        int
	points      int
	first, last int64
	encoded     map[int][]byte // each column's bytes, as Body wrote them
}

// Fits reports whether a record of n bytes fits in column: under Azure's limit of a
// property, and the entity under MaxEntity.
func (e *Entity) Fits(column, n int) bool {
	size := e.sizes[column]
	if size == 0 {
		size = stageenc.HeaderSize
	}
	return size+n <= MaxColumn && e.size+n+stageenc.HeaderSize <= MaxEntity
}

// Add adds a series' float points (sorted, one a millisecond) to column of a float entity.
func (e *Entity) Add(column int, s stageenc.Series, piece Piece) {
	e.grow(column, stageenc.Size(s))
	e.columns[column] = append(e.columns[column], s)
	e.held(len(s.Times), s.Times[0], s.Times[len(s.Times)-1], piece)
}

// AddHist adds a series' record (its chunk of samples, first to last) to column of a
// histogram entity.
func (e *Entity) AddHist(column int, key string, chunk []byte, first, last int64, samples int, piece Piece) {
	e.grow(column, stageenc.HistRecordSize(key, len(chunk)))
	e.histRecords[column] = stageenc.AppendHistRecord(e.histRecords[column], key, chunk)
	e.held(samples, first, last, piece)
}

// grow counts n more bytes of column, with its header if it is new.
func (e *Entity) grow(column, n int) {
	if e.sizes[column] == 0 {
		e.sizes[column] = stageenc.HeaderSize
		e.size += stageenc.HeaderSize
	}
	e.sizes[column] += n
	e.size += n
}

// held counts the points of a record added and the range of times they span.
func (e *Entity) held(points int, first, last int64, piece Piece) {
	e.points += points
	if len(e.Pieces) == 0 || first < e.first {
		e.first = first
	}
	if len(e.Pieces) == 0 || last > e.last {
		e.last = last
	}
	e.Pieces = append(e.Pieces, piece)
}

// Body is the entity's JSON. It keeps each column's bytes (Encoded).
func (e *Entity) Body() []byte {
	hist := e.Version == HistVersion
	version, timeKey := Version, TimeKey
	if hist {
		version, timeKey = HistVersion, HistTimeKey
	}
	b := entity.AppendKeys(nil, e.PartitionKey, e.RowKey)
	b = entity.AppendDouble(b, VersionProp, float64(version))
	b = entity.AppendStringProperty(b, LoProp, fmt.Sprintf("%02x", e.Lo))
	b = entity.AppendStringProperty(b, HiProp, fmt.Sprintf("%02x", e.Hi))
	b = entity.AppendStringProperty(b, FirstProp, timeKey(e.first))
	b = entity.AppendStringProperty(b, LastProp, timeKey(e.last))
	b = entity.AppendDouble(b, CountProp, float64(e.points))
	e.encoded = map[int][]byte{}
	for c := range Columns {
		var col []byte
		switch {
		case hist && len(e.histRecords[c]) > 0:
			col = append([]byte{stageenc.HistVersion}, e.histRecords[c]...)
		case !hist && len(e.columns[c]) > 0:
			col = stageenc.Append(nil, e.columns[c])
		default:
			continue
		}
		b = entity.AppendBinary(b, ColumnChar+strconv.Itoa(c), col)
		e.encoded[c] = col
	}
	return entity.AppendEnd(b)
}

// Encoded is each column's bytes as the last Body wrote them (nil before one).
func (e *Entity) Encoded() map[int][]byte { return e.encoded }

// SortedSeries is a series' points to stage, sorted by time with the last of a millisecond
// kept (as a write keeps the later argument).
func SortedSeries(series string, points []tablets.Point) stageenc.Series {
	sorted := slices.Clone(points)
	// By millisecond, stably: of the points of one millisecond, the later argument wins.
	slices.SortStableFunc(sorted, func(a, b tablets.Point) int { return cmp.Compare(a.Time.UnixMilli(), b.Time.UnixMilli()) })
	s := stageenc.Series{Key: series}
	for i, p := range sorted {
		ms := p.Time.UnixMilli()
		if i > 0 && ms == s.Times[len(s.Times)-1] {
			s.Values[len(s.Values)-1] = p.Value
			continue
		}
		s.Times = append(s.Times, ms)
		s.Values = append(s.Values, p.Value)
	}
	return s
}
