package chunked

import (
	"encoding/base64"
	"fmt"
	"hash/fnv"
	"strconv"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/filter"
	"github.com/seed71701133/tablets/internal/chunkenc"
	"github.com/seed71701133/tablets/internal/engine"
	"github.com/seed71701133/tablets/internal/partkey"
	"github.com/seed71701133/tablets/internal/priority"
	"github.com/seed71701133/tablets/rounding"
)

// Property names of a chunk entity.
const (
	lastProperty  = "L" // Edm.String: the last unit, fixed width (a filter compares it)
	chunkProperty = "C" // Edm.Binary: the chunk (internal/chunkenc)
)

// layout is the chunked key layout. All times are in resolution units.
type layout struct {
	format    rounding.KeyFormat
	partUnits uint64
	maxChunk  int // bytes of a chunk, before base64
	limits    filter.Limits
	priority  uint64 // of every chunk written; 0: the process's clock (priority.Next)
}

var (
	_ engine.Layout      = layout{}
	_ engine.Overlapping = layout{}
)

func (l layout) Name() string { return "chunked" }
func (l layout) ID() string {
	return fmt.Sprintf("chunked/1/%d/%d", l.format.Resolution, l.partUnits)
}
func (l layout) Format() rounding.KeyFormat            { return l.format }
func (l layout) Granule() uint64                       { return 1 }
func (l layout) Select() string                        { return "PartitionKey,RowKey," + lastProperty + "," + chunkProperty }
func (l layout) KeySelect() string                     { return "PartitionKey,RowKey," + lastProperty }
func (l layout) WriteAction() aztables.TransactionType { return aztables.TransactionTypeInsertReplace }
func (l layout) key(u uint64) string                   { return string(l.format.AppendUnits(nil, u)) }
func (l layout) partitionOf(u uint64) uint64           { return u / l.partUnits * l.partUnits }
func (l layout) Owns(partitionKey []byte, s string) bool {
	return partkey.Owns(l.format, partitionKey, s)
}

func (l layout) partitionKey(escaped string, u uint64) string {
	return partkey.Key(l.format, escaped, l.partitionOf(u))
}

func (l layout) ValidateSeries(series string) error {
	// A read's filter names the series up to four times (a range over three partitions):
	// it must fit one filter.
	worst := func() filter.Expr {
		w := filter.Or(l.Clauses(series, 1, 2+2*l.partUnits)...)
		if a := l.AtOrAfter(series, 1); a.EncodedLen() > w.EncodedLen() {
			return a
		}
		return w
	}
	return partkey.ValidateSeries("chunked", l.format, series, worst, l.limits)
}

// rowKey is first unit, "-", priority (16 hex digits), "-", FNV-1a of the chunk (8 hex
// digits): chunks sort by their first time; the priority orders writes (the later write of
// a time wins); the hash keeps two different chunks of one write apart and makes the key of
// a chunk a function of its content, so a retried write lands on the same entity.
func (l layout) rowKey(first, prio uint64, chunk []byte) string {
	h := fnv.New32a()
	h.Write(chunk)
	b := l.format.AppendUnits(make([]byte, 0, l.format.Width+27), first)
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

// parseRowKey returns the first unit and the priority of a chunk's RowKey.
func (l layout) parseRowKey(rk []byte) (first, prio uint64, ok bool) {
	w := l.format.Width
	if len(rk) != w+1+16+1+8 || rk[w] != '-' || rk[w+17] != '-' {
		return 0, 0, false
	}
	first, err := l.format.ParseUnitsBytes(rk[:w])
	if err != nil {
		return 0, 0, false
	}
	prio, err = strconv.ParseUint(string(rk[w+1:w+17]), 16, 64)
	if err != nil {
		return 0, 0, false
	}
	if _, err := strconv.ParseUint(string(rk[w+18:]), 16, 32); err != nil {
		return 0, 0, false
	}
	return first, prio, true
}

// Rows cuts the points of each partition into chunks of at most maxChunk bytes, all with the
// priority of this write.
func (l layout) Rows(series string, units []uint64, values []float64, emit func(engine.Row)) {
	prio := l.priority
	if prio == 0 {
		prio = priority.Next()
	}
	escaped := partkey.Escape(series)
	for i := 0; i < len(units); {
		end := i
		for p := l.partitionOf(units[i]); end < len(units) && l.partitionOf(units[end]) == p; end++ {
		}
		for i < end {
			chunk, n := chunkenc.AppendLimit(nil, units[i:end], values[i:end], l.maxChunk)
			pk := l.partitionKey(escaped, units[i])
			rk := l.rowKey(units[i], prio, chunk)
			emit(engine.Row{PartitionKey: pk, RowKey: rk, Body: l.body(pk, rk, units[i+n-1], chunk), From: i, To: i + n})
			i += n
		}
	}
}

func (l layout) body(pk, rk string, last uint64, chunk []byte) []byte {
	b := make([]byte, 0, 96+len(pk)+len(rk)+base64.StdEncoding.EncodedLen(len(chunk)))
	b = entity.AppendKeys(b, pk, rk)
	b = entity.AppendStringProperty(b, lastProperty, l.key(last))
	b = entity.AppendBinary(b, chunkProperty, chunk)
	return entity.AppendEnd(b)
}

// Encode rewrites a chunk to hold these points: a new chunk, under a RowKey of its own
// first time and content, with the old chunk's priority.
func (l layout) Encode(partitionKey, rowKey string, units []uint64, values []float64) (string, []byte) {
	_, prio, _ := l.parseRowKey([]byte(rowKey))
	chunk := chunkenc.Append(nil, units, values)
	rk := l.rowKey(units[0], prio, chunk)
	return rk, l.body(partitionKey, rk, units[len(units)-1], chunk)
}

// Clauses: the chunks that hold times in [from, to) are those whose first time is before
// to and whose last is at or after from. A chunk lies in the partition of its first time,
// so: in the first partition those with L >= from, the partitions inside whole, and in the
// last partition those whose RowKey (first time) is below to. Six comparisons at most.
func (l layout) Clauses(series string, from, to uint64) []filter.Expr {
	firstPart, lastPart := l.partitionOf(from), l.partitionOf(to-1)
	var head, tail filter.Expr
	if from > firstPart {
		head = filter.Ge(lastProperty, l.key(from))
	}
	if end := lastPart + l.partUnits; end > lastPart && to < end {
		tail = filter.Lt("RowKey", l.key(to))
	}
	return partkey.Clauses(l.format, partkey.Escape(series), l.partUnits, firstPart, lastPart, head, tail)
}

// AtOrAfter selects the chunks of series holding times at or after u: in u's partition
// those with L >= u, and every later partition.
func (l layout) AtOrAfter(series string, u uint64) filter.Expr {
	escaped := partkey.Escape(series)
	p := l.partitionKey(escaped, u)
	return filter.Or(
		filter.And(filter.Eq("PartitionKey", p), filter.Ge(lastProperty, l.key(u))),
		filter.And(filter.Gt("PartitionKey", p), filter.Lt("PartitionKey", partkey.End(escaped))),
	)
}

func (l layout) bad(e *entity.Entity, reason string) error {
	return &entity.DecodeError{PartitionKey: string(e.PartitionKey), RowKey: string(e.RowKey), Reason: reason}
}

// Span is [first time, last time] of a chunk: from its RowKey and its L property.
func (l layout) Span(e *entity.Entity) (uint64, uint64, error) {
	first, _, ok := l.parseRowKey(e.RowKey)
	if !ok {
		return 0, 0, l.bad(e, "RowKey is not a chunk key of this layout")
	}
	lastKey, ok := e.String(lastProperty)
	if !ok {
		return 0, 0, l.bad(e, "no "+lastProperty+" property (a row of another layout?)")
	}
	last, err := l.format.ParseUnitsBytes(lastKey)
	if err != nil || last < first {
		return 0, 0, l.bad(e, fmt.Sprintf("%s %q is not a time at or after the chunk's first", lastProperty, lastKey))
	}
	if start, err := partkey.Start(l.format, e.PartitionKey); err != nil || start != l.partitionOf(first) {
		return 0, 0, l.bad(e, "PartitionKey and RowKey disagree (a row of another layout?)")
	}
	return first, last, nil
}

// Priority is the write priority in the RowKey.
func (l layout) Priority(e *entity.Entity) (uint64, error) {
	_, prio, ok := l.parseRowKey(e.RowKey)
	if !ok {
		return 0, l.bad(e, "RowKey is not a chunk key of this layout")
	}
	return prio, nil
}

// Points decodes the chunk, checking it against the entity's keys.
func (l layout) Points(e *entity.Entity, yield func(t uint64, v float64)) error {
	first, last, err := l.Span(e)
	if err != nil {
		return err
	}
	for _, p := range e.Props {
		return l.bad(e, fmt.Sprintf("property %q is not of this layout", p.Name))
	}
	encoded, ok := e.String(chunkProperty)
	if !ok || len(e.Strings) != 2 {
		return l.bad(e, "want exactly the properties "+lastProperty+" and "+chunkProperty)
	}
	chunk := make([]byte, base64.StdEncoding.DecodedLen(len(encoded)))
	n, err := base64.StdEncoding.Decode(chunk, encoded)
	if err != nil {
		return l.bad(e, "chunk is not base64: "+err.Error())
	}
	chunk = chunk[:n]
	count, cFirst, cLast, err := chunkenc.Header(chunk)
	if err != nil {
		return l.bad(e, err.Error())
	}
	if count == 0 || cFirst != first || cLast != last {
		return l.bad(e, fmt.Sprintf("chunk of %d points from %d to %d does not match its keys (%d to %d)", count, cFirst, cLast, first, last))
	}
	if err := chunkenc.Decode(chunk, yield); err != nil {
		return l.bad(e, err.Error())
	}
	return nil
}
