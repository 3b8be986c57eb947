package blockenc

import (
	"strconv"
	"strings"
	"time"

	"github.com/seed71701133/tablets/entity"
)

// The packed layout of tier tables (docs/format.md, "Packed tier blocks"): a columnar
// block's PartitionKey is the first two characters of its series, its RowKey the series,
// "|" and its start, and property T repeats the start. A rollup then writes the blocks of
// many series in one transaction (up to 100), where the series layout (PartitionKey the
// series, RowKey the start) takes one a series: a rollup of a tenant's 18,750 series is
// about 190 transactions, not 18,750. The partitions keep the series' order (tsdb's series
// keys, "l" and 32 hex digits, fall in 16), so a read of a range of series is one query
// across them, as in the series layout; T lets it filter on a range of starts, as the
// RowKeys sort by series first.

// propStart is the packed block's property holding its start (12 digits, Key).
const propStart = "T"

// PropStart is the name of the property of a packed block that holds its start, as Key
// writes it: for filters on a range of starts.
const PropStart = propStart

// PackedPartition is the PartitionKey of series' blocks in the packed layout: its first two
// characters (the whole name if shorter).
func PackedPartition(series string) string {
	n := 0
	for i := range series {
		if n == 2 {
			return series[:i]
		}
		n++
	}
	return series
}

// PackedRowKey is the RowKey of series' block starting at start in the packed layout.
func PackedRowKey(series string, start uint64) string { return series + "|" + Key(start) }

// ParsePacked reads the series and start of a packed block's keys: ok is false for keys
// no packed block has (a RowKey without "|" and 12 digits at its end, an empty series, a
// PartitionKey that is not the series').
func ParsePacked(pk, rk string) (series string, start uint64, ok bool) {
	i := len(rk) - len(Key(0)) - 1
	if i < 1 || rk[i] != '|' {
		return "", 0, false
	}
	start, ok = ParseKey(rk[i+1:])
	if !ok || pk != PackedPartition(rk[:i]) {
		return "", 0, false
	}
	return rk[:i], start, true
}

// ParseKey parses a Key: 12 digits.
func ParseKey(k string) (uint64, bool) {
	if len(k) != len(Key(0)) || strings.Trim(k, "0123456789") != "" {
		return 0, false
	}
	s, err := strconv.ParseUint(k, 10, 64)
	return s, err == nil
}

// rowKeyStart is the start of a columnar block entity: its RowKey, or in the packed
// layout (a RowKey of "|" and 12 digits at its end) those digits, which T repeats where
// it was read (a read's $select leaves it out).
func rowKeyStart(e *entity.Entity) (uint64, bool) {
	rk := string(e.RowKey)
	if !strings.Contains(rk, "|") {
		return ParseKey(rk)
	}
	i := len(rk) - len(Key(0)) - 1
	if i < 1 || rk[i] != '|' {
		return 0, false
	}
	if t, ok := e.String(propStart); ok && string(t) != rk[i+1:] {
		return 0, false
	}
	return ParseKey(rk[i+1:])
}

// AppendColumnarPacked is AppendColumnar in the packed layout: the entity of b at series'
// packed keys, with T.
func AppendColumnarPacked(dst []byte, series string, step time.Duration, b *Columnar) ([]byte, error) {
	return appendColumnar(dst, PackedPartition(series), PackedRowKey(series, b.Start), true, step, b)
}
