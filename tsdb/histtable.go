package tsdb

import (
	"encoding/base64"
	"fmt"
	"hash/fnv"
	"strconv"
	"time"

	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/filter"
	"github.com/seed71701133/tablets/internal/histenc"
	"github.com/seed71701133/tablets/internal/partkey"
	"github.com/seed71701133/tablets/rounding"
)

// A histogram table (name + "h" + period) holds a period's histogram samples as the chunked
// layout holds points, at a millisecond whatever the raw layout (docs/format.md, "Histogram
// tables"): an entity per chunk of a series' samples, in a partition per series and day.
const (
	histLastProperty  = "L" // Edm.String: the chunk's last millisecond, a time key
	histChunkProperty = "H" // Edm.Binary: the chunk (internal/histenc)

	histResolution = time.Millisecond
	histPartition  = 24 * time.Hour
	// histMaxChunk bounds a chunk's bytes before base64: 100 of them (a transaction) stay
	// under Azure's 4 MiB, and one under its 64 KiB a property.
	histMaxChunk = 16 << 10
)

// histFormat is the time key of histogram tables: milliseconds, 15 digits.
var histFormat = func() rounding.KeyFormat {
	f, err := rounding.NewKeyFormat(histResolution)
	if err != nil {
		panic(err) // a constant resolution: never
	}
	return f
}()

// histPartUnits is the span of a partition, in milliseconds.
const histPartUnits = uint64(histPartition / histResolution)

var histLimits = filter.Limits{MaxComparisons: entity.MaxFilterComparisons, MaxLength: filter.DefaultMaxLength}

func histKey(u uint64) string         { return string(histFormat.AppendUnits(nil, u)) }
func histPartitionOf(u uint64) uint64 { return u / histPartUnits * histPartUnits }
func histPartitionKey(escaped string, u uint64) string {
	return partkey.Key(histFormat, escaped, histPartitionOf(u))
}

// histRowKey is the chunked layout's: first millisecond, "-", priority (16 hex digits), "-",
// FNV-1a of the chunk (8 hex digits). The later write of a millisecond has the higher
// priority; the hash makes a retried write land on the same entity.
func histRowKey(first, prio uint64, chunk []byte) string {
	h := fnv.New32a()
	h.Write(chunk)
	b := histFormat.AppendUnits(make([]byte, 0, histFormat.Width+27), first)
	b = append(b, '-')
	b = appendHexDigits(b, prio, 16)
	b = append(b, '-')
	return string(appendHexDigits(b, uint64(h.Sum32()), 8))
}

func appendHexDigits(b []byte, v uint64, digits int) []byte {
	s := strconv.FormatUint(v, 16)
	for i := len(s); i < digits; i++ {
		b = append(b, '0')
	}
	return append(b, s...)
}

// parseHistRowKey returns the first millisecond and the priority of a chunk's RowKey.
func parseHistRowKey(rk []byte) (first, prio uint64, ok bool) {
	w := histFormat.Width
	if len(rk) != w+1+16+1+8 || rk[w] != '-' || rk[w+17] != '-' {
		return 0, 0, false
	}
	first, err := histFormat.ParseUnitsBytes(rk[:w])
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

// histBody is a chunk's entity.
func histBody(pk, rk string, last uint64, chunk []byte) []byte {
	b := make([]byte, 0, 96+len(pk)+len(rk)+base64.StdEncoding.EncodedLen(len(chunk)))
	b = entity.AppendKeys(b, pk, rk)
	b = entity.AppendStringProperty(b, histLastProperty, histKey(last))
	b = entity.AppendBinary(b, histChunkProperty, chunk)
	return entity.AppendEnd(b)
}

// histClauses select the chunks of series holding milliseconds in [from, to): in the first
// partition those with L >= from, the partitions between whole, in the last those whose
// RowKey (first millisecond) is below to. Six comparisons at most.
func histClauses(series string, from, to uint64) []filter.Expr {
	firstPart, lastPart := histPartitionOf(from), histPartitionOf(to-1)
	var head, tail filter.Expr
	if from > firstPart {
		head = filter.Ge(histLastProperty, histKey(from))
	}
	if end := lastPart + histPartUnits; to < end {
		tail = filter.Lt("RowKey", histKey(to))
	}
	return partkey.Clauses(histFormat, partkey.Escape(series), histPartUnits, firstPart, lastPart, head, tail)
}

// validateHistSeries checks a series name for the keys and filters of histogram tables.
func validateHistSeries(series string) error {
	worst := func() filter.Expr { return filter.Or(histClauses(series, 1, 2+2*histPartUnits)...) }
	return partkey.ValidateSeries("histograms", histFormat, series, worst, histLimits)
}

// histChunk is a chunk entity as a read decodes it.
type histChunk struct {
	pk, rk      string
	etag        string
	first, last uint64
	prio        uint64
	chunk       []byte // the histenc chunk, its header checked against the keys
}

func badHist(e *entity.Entity, reason string) error {
	return &entity.DecodeError{PartitionKey: string(e.PartitionKey), RowKey: string(e.RowKey), Reason: reason}
}

// decodeHistChunk checks a decoded entity (AllowStrings) and returns its chunk. Without
// withChunk (a read of the keys and L only) the chunk is not looked for.
func decodeHistChunk(e *entity.Entity, withChunk bool) (histChunk, error) {
	first, prio, ok := parseHistRowKey(e.RowKey)
	if !ok {
		return histChunk{}, badHist(e, "RowKey is not a histogram chunk's")
	}
	lastKey, ok := e.String(histLastProperty)
	if !ok {
		return histChunk{}, badHist(e, "no "+histLastProperty+" property")
	}
	last, err := histFormat.ParseUnitsBytes(lastKey)
	if err != nil || last < first {
		return histChunk{}, badHist(e, fmt.Sprintf("%s %q is not a time at or after the chunk's first", histLastProperty, lastKey))
	}
	if start, err := partkey.Start(histFormat, e.PartitionKey); err != nil || start != histPartitionOf(first) {
		return histChunk{}, badHist(e, "PartitionKey and RowKey disagree")
	}
	c := histChunk{pk: string(e.PartitionKey), rk: string(e.RowKey), etag: string(e.ETag), first: first, last: last, prio: prio}
	if !withChunk {
		return c, nil
	}
	if len(e.Props) > 0 {
		return histChunk{}, badHist(e, fmt.Sprintf("property %q is not a histogram chunk's", e.Props[0].Name))
	}
	encoded, ok := e.String(histChunkProperty)
	if !ok || len(e.Strings) != 2 {
		return histChunk{}, badHist(e, "want exactly the properties "+histLastProperty+" and "+histChunkProperty)
	}
	chunk := make([]byte, base64.StdEncoding.DecodedLen(len(encoded)))
	n, err := base64.StdEncoding.Decode(chunk, encoded)
	if err != nil {
		return histChunk{}, badHist(e, "chunk is not base64: "+err.Error())
	}
	c.chunk = chunk[:n]
	count, cFirst, cLast, err := histenc.Header(c.chunk)
	if err != nil {
		return histChunk{}, badHist(e, err.Error())
	}
	if count == 0 || cFirst != first || cLast != last {
		return histChunk{}, badHist(e, fmt.Sprintf("chunk of %d samples from %d to %d does not match its keys (%d to %d)", count, cFirst, cLast, first, last))
	}
	return c, nil
}

// samples decodes the chunk, calling yield with each sample in [lo, hi). A sample outside
// the chunk's keys, or out of order, makes the chunk corrupt.
func (c histChunk) samples(lo, hi uint64, yield func(histenc.Sample)) error {
	prev, bad := c.first, false
	err := histenc.Decode(c.chunk, func(s histenc.Sample) {
		if bad = bad || s.Unit < prev || s.Unit > c.last; bad {
			return
		}
		prev = s.Unit + 1
		if s.Unit >= lo && s.Unit < hi {
			yield(s)
		}
	})
	if err == nil && bad {
		err = fmt.Errorf("%w: samples out of order or outside the chunk's keys", histenc.ErrCorrupt)
	}
	if err != nil {
		return &entity.DecodeError{PartitionKey: c.pk, RowKey: c.rk, Reason: err.Error()}
	}
	return nil
}

// histSelect and histKeySelect are the $select of a read of chunks and of their keys.
const (
	histSelect    = "PartitionKey,RowKey," + histLastProperty + "," + histChunkProperty
	histKeySelect = "PartitionKey,RowKey," + histLastProperty
)
