package chunks

import (
	"encoding/base64"
	"fmt"
	"hash/fnv"
	"strconv"

	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/filter"
	"github.com/seed71701133/tablets/internal/engine"
	"github.com/seed71701133/tablets/internal/partkey"
	"github.com/seed71701133/tablets/rounding"
)

// lastProperty is a chunk's last unit, a fixed-width time key that filters compare.
const lastProperty = "L"

// Layout is the keys of a table of chunks of V: a chunk is an entity in the partition of its
// series and first unit (a span of PartUnits), keyed by its first unit, the priority of its
// write and a hash of its bytes, with its last unit (L) and the chunk (the codec's
// property). All times are in units of Format.
type Layout[V any] struct {
	Name      string // of the table's kind, in errors ("chunked", "histograms")
	Format    rounding.KeyFormat
	PartUnits uint64 // the span of a partition
	MaxChunk  int    // the bytes of a chunk written, before base64
	Limits    filter.Limits
	Codec     Codec[V]
}

var _ engine.Rewriter[float64] = Layout[float64]{}

// Key is the fixed-width key of unit u.
func (l Layout[V]) Key(u uint64) string { return string(l.Format.AppendUnits(nil, u)) }

// PartitionOf is the first unit of the partition of unit u.
func (l Layout[V]) PartitionOf(u uint64) uint64 { return u / l.PartUnits * l.PartUnits }

// PartitionKey is the PartitionKey of the escaped series' partition holding unit u.
func (l Layout[V]) PartitionKey(escaped string, u uint64) string {
	return partkey.Key(l.Format, escaped, l.PartitionOf(u))
}

// Owns reports whether an entity's PartitionKey belongs to series.
func (l Layout[V]) Owns(partitionKey []byte, series string) bool {
	return partkey.Owns(l.Format, partitionKey, series)
}

// Select and KeySelect are the $select of a read of chunks and of their keys only.
func (l Layout[V]) Select() string {
	return "PartitionKey,RowKey," + lastProperty + "," + l.Codec.Property()
}
func (l Layout[V]) KeySelect() string { return "PartitionKey,RowKey," + lastProperty }

// RowKey is the first unit, "-", the priority (16 hex digits), "-", FNV-1a of the chunk (8
// hex digits): chunks sort by their first time; the priority orders writes (the later
// write of a time wins); the hash keeps two different chunks of one write apart and makes
// the key of a chunk a function of its content, so a retried write lands on the same
// entity.
func (l Layout[V]) RowKey(first, prio uint64, chunk []byte) string {
	h := fnv.New32a()
	h.Write(chunk)
	b := l.Format.AppendUnits(make([]byte, 0, l.Format.Width+27), first)
	b = append(b, '-')
	b = appendHex(b, prio, 16)
	b = append(b, '-')
	return string(appendHex(b, uint64(h.Sum32()), 8))
}

func appendHex(b []byte, v uint64, digits int) []byte {
	s := strconv.FormatUint(v, 16)
	for i := len(s); i < digits; i++ {
		b = append(b, '0')
	}
	return append(b, s...)
}

// ParseRowKey returns the first unit and the priority of a chunk's RowKey.
func (l Layout[V]) ParseRowKey(rk []byte) (first, prio uint64, ok bool) {
	w := l.Format.Width
	if len(rk) != w+1+16+1+8 || rk[w] != '-' || rk[w+17] != '-' {
		return 0, 0, false
	}
	first, err := l.Format.ParseUnitsBytes(rk[:w])
	if err != nil {
		return 0, 0, false
	}
	if prio, err = strconv.ParseUint(string(rk[w+1:w+17]), 16, 64); err != nil {
		return 0, 0, false
	}
	if _, err := strconv.ParseUint(string(rk[w+18:]), 16, 32); err != nil {
		return 0, 0, false
	}
	return first, prio, true
}

// Body is a chunk's entity.
func (l Layout[V]) Body(pk, rk string, last uint64, chunk []byte) []byte {
	b := make([]byte, 0, 96+len(pk)+len(rk)+base64.StdEncoding.EncodedLen(len(chunk)))
	b = entity.AppendKeys(b, pk, rk)
	b = entity.AppendStringProperty(b, lastProperty, l.Key(last))
	b = entity.AppendBinary(b, l.Codec.Property(), chunk)
	return entity.AppendEnd(b)
}

// Rows cuts the values of a series (units strictly increasing) into chunks of at most
// MaxChunk bytes, none across a partition, all with priority prio, and calls emit with each
// in key order.
func (l Layout[V]) Rows(series string, units []uint64, values []V, prio uint64, emit func(engine.Row)) {
	escaped := partkey.Escape(series)
	for i := 0; i < len(units); {
		end := i
		for p := l.PartitionOf(units[i]); end < len(units) && l.PartitionOf(units[end]) == p; end++ {
		}
		for i < end {
			chunk, n := l.Codec.AppendLimit(nil, units[i:end], values[i:end], l.MaxChunk)
			pk := l.PartitionKey(escaped, units[i])
			rk := l.RowKey(units[i], prio, chunk)
			emit(engine.Row{PartitionKey: pk, RowKey: rk, Body: l.Body(pk, rk, units[i+n-1], chunk), From: i, To: i + n})
			i += n
		}
	}
}

// Encode rewrites a chunk to hold these values: a new chunk, under a RowKey of its own
// first time and content, with the old chunk's priority.
func (l Layout[V]) Encode(partitionKey, rowKey string, units []uint64, values []V) (string, []byte) {
	_, prio, _ := l.ParseRowKey([]byte(rowKey))
	chunk := l.Codec.Append(nil, units, values)
	rk := l.RowKey(units[0], prio, chunk)
	return rk, l.Body(partitionKey, rk, units[len(units)-1], chunk)
}

// Clauses: the chunks that hold times in [from, to) are those whose first time is before
// to and whose last is at or after from. A chunk lies in the partition of its first time,
// so: in the first partition those with L >= from, the partitions inside whole, and in the
// last partition those whose RowKey (first time) is below to. Six comparisons at most.
func (l Layout[V]) Clauses(series string, from, to uint64) []filter.Expr {
	firstPart, lastPart := l.PartitionOf(from), l.PartitionOf(to-1)
	head, tail := l.narrowing(from, to)
	return partkey.Clauses(l.Format, partkey.Escape(series), l.PartUnits, firstPart, lastPart, head, tail)
}

// narrowing is what Clauses narrows the first partition of [from, to) by (head: L >= from,
// zero where from starts it) and its last (tail: RowKey < to, zero where to ends it).
func (l Layout[V]) narrowing(from, to uint64) (head, tail filter.Expr) {
	firstPart, lastPart := l.PartitionOf(from), l.PartitionOf(to-1)
	if from > firstPart {
		head = filter.Ge(lastProperty, l.Key(from))
	}
	if end := lastPart + l.PartUnits; end > lastPart && to < end {
		tail = filter.Lt("RowKey", l.Key(to))
	}
	return head, tail
}

// Narrowing is the comparisons every series' clause of [from, to) within one partition
// holds besides its PartitionKey (Clauses' head and tail, those not zero).
func (l Layout[V]) Narrowing(from, to uint64) []filter.Expr {
	head, tail := l.narrowing(from, to)
	var out []filter.Expr
	for _, e := range []filter.Expr{head, tail} {
		if !e.IsZero() {
			out = append(out, e)
		}
	}
	return out
}

// AtOrAfter selects the chunks of series holding times at or after u: in u's partition
// those with L >= u, and every later partition.
func (l Layout[V]) AtOrAfter(series string, u uint64) filter.Expr {
	escaped := partkey.Escape(series)
	p := l.PartitionKey(escaped, u)
	return filter.Or(
		filter.And(filter.Eq("PartitionKey", p), filter.Ge(lastProperty, l.Key(u))),
		filter.And(filter.Gt("PartitionKey", p), filter.Lt("PartitionKey", partkey.End(escaped))),
	)
}

// ValidateSeries checks a series name for these keys: a read's filter names the series up
// to four times (a range over three partitions), and must fit one filter.
func (l Layout[V]) ValidateSeries(series string) error {
	worst := func() filter.Expr {
		w := filter.Or(l.Clauses(series, 1, 2+2*l.PartUnits)...)
		if a := l.AtOrAfter(series, 1); a.EncodedLen() > w.EncodedLen() {
			return a
		}
		return w
	}
	return partkey.ValidateSeries(l.Name, l.Format, series, worst, l.Limits)
}

func bad(e *entity.Entity, reason string) error {
	return &entity.DecodeError{PartitionKey: string(e.PartitionKey), RowKey: string(e.RowKey), Reason: reason}
}

// Span is [first time, last time] of a chunk: from its RowKey and its L property, checked
// against its PartitionKey.
func (l Layout[V]) Span(e *entity.Entity) (uint64, uint64, error) {
	first, _, ok := l.ParseRowKey(e.RowKey)
	if !ok {
		return 0, 0, bad(e, "RowKey is not a chunk key of this layout")
	}
	lastKey, ok := e.String(lastProperty)
	if !ok {
		return 0, 0, bad(e, "no "+lastProperty+" property (a row of another layout?)")
	}
	last, err := l.Format.ParseUnitsBytes(lastKey)
	if err != nil || last < first {
		return 0, 0, bad(e, fmt.Sprintf("%s %q is not a time at or after the chunk's first", lastProperty, lastKey))
	}
	if start, err := partkey.Start(l.Format, e.PartitionKey); err != nil || start != l.PartitionOf(first) {
		return 0, 0, bad(e, "PartitionKey and RowKey disagree (a row of another layout?)")
	}
	return first, last, nil
}

// Priority is the write priority in the RowKey.
func (l Layout[V]) Priority(e *entity.Entity) (uint64, error) {
	_, prio, ok := l.ParseRowKey(e.RowKey)
	if !ok {
		return 0, bad(e, "RowKey is not a chunk key of this layout")
	}
	return prio, nil
}

// Chunk is a chunk entity as a read decodes it.
type Chunk struct {
	PartitionKey, RowKey string
	ETag                 string
	First, Last          uint64
	Prio                 uint64
	Data                 []byte // the chunk, its header checked against the keys (nil from its keys only)
}

// Decode checks a decoded entity (AllowStrings) and returns its chunk. Without withData (an
// entity read with KeySelect) the chunk is not looked for.
func (l Layout[V]) Decode(e *entity.Entity, withData bool) (Chunk, error) {
	first, last, err := l.Span(e)
	if err != nil {
		return Chunk{}, err
	}
	_, prio, _ := l.ParseRowKey(e.RowKey)
	c := Chunk{PartitionKey: string(e.PartitionKey), RowKey: string(e.RowKey), ETag: string(e.ETag), First: first, Last: last, Prio: prio}
	if !withData {
		return c, nil
	}
	for _, p := range e.Props {
		return Chunk{}, bad(e, fmt.Sprintf("property %q is not of this layout", p.Name))
	}
	prop := l.Codec.Property()
	encoded, ok := e.String(prop)
	if !ok || len(e.Strings) != 2 {
		return Chunk{}, bad(e, "want exactly the properties "+lastProperty+" and "+prop)
	}
	data := make([]byte, base64.StdEncoding.DecodedLen(len(encoded)))
	n, err := base64.StdEncoding.Decode(data, encoded)
	if err != nil {
		return Chunk{}, bad(e, "chunk is not base64: "+err.Error())
	}
	c.Data = data[:n]
	count, cFirst, cLast, err := l.Codec.Header(c.Data)
	if err != nil {
		return Chunk{}, bad(e, err.Error())
	}
	if count == 0 || cFirst != first || cLast != last {
		return Chunk{}, bad(e, fmt.Sprintf("chunk of %d values from %d to %d does not match its keys (%d to %d)", count, cFirst, cLast, first, last))
	}
	return c, nil
}

// Values decodes a chunk (from Decode with its data), calling yield with each value in
// [lo, hi). A value outside the chunk's keys, or out of order, makes the chunk corrupt.
func (l Layout[V]) Values(c Chunk, lo, hi uint64, yield func(u uint64, v V)) error {
	prev, bad := c.First, false
	err := l.Codec.Decode(c.Data, func(u uint64, v V) {
		if bad = bad || u < prev || u > c.Last; bad {
			return
		}
		prev = u + 1
		if u >= lo && u < hi {
			yield(u, v)
		}
	})
	if err == nil && bad {
		err = fmt.Errorf("values out of order or outside the chunk's keys")
	}
	if err != nil {
		return &entity.DecodeError{PartitionKey: c.PartitionKey, RowKey: c.RowKey, Reason: err.Error()}
	}
	return nil
}

// Points decodes an entity's chunk, checking it against the entity's keys, and calls yield
// with each value in time order.
func (l Layout[V]) Points(e *entity.Entity, yield func(u uint64, v V)) error {
	c, err := l.Decode(e, true)
	if err != nil {
		return err
	}
	return l.Values(c, 0, ^uint64(0), yield)
}
