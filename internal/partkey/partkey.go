// Package partkey is the PartitionKey scheme of the layouts that file a series' entities in
// one partition per span of time (advanced, chunked): the series, escaped, then "|", then
// the partition's start as a fixed-width count of resolution units. In the series part "~"
// is written "~~" and "|" is written "~p", so the separator never occurs in it: no series'
// keys fall inside another series' key ranges, even for names such as "cpu|0000000001".
package partkey

import (
	"fmt"
	"strings"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/filter"
	"github.com/seed71701133/tablets/rounding"
)

const (
	separator = '|'
	escape    = '~'
	// afterSeparator is the character after separator: every PartitionKey of a series is
	// below escaped series + afterSeparator.
	afterSeparator = separator + 1
)

// Escape writes "~" as "~~" and "|" as "~p".
func Escape(series string) string {
	if !strings.ContainsAny(series, "~|") {
		return series
	}
	var b strings.Builder
	for i := 0; i < len(series); i++ {
		switch c := series[i]; c {
		case escape:
			b.WriteString("~~")
		case separator:
			b.WriteString("~p")
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// Unescape is the inverse of Escape; ok is false for a string Escape never returns (a "~"
// not followed by "~" or "p", or a "|").
func Unescape(escaped string) (series string, ok bool) {
	if !strings.ContainsAny(escaped, "~|") {
		return escaped, true
	}
	var b strings.Builder
	for i := 0; i < len(escaped); i++ {
		switch c := escaped[i]; c {
		case separator:
			return "", false
		case escape:
			if i+1 >= len(escaped) {
				return "", false
			}
			switch escaped[i+1] {
			case escape:
				b.WriteByte(escape)
			case 'p':
				b.WriteByte(separator)
			default:
				return "", false
			}
			i++
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), true
}

// Split returns the series and the partition start of a PartitionKey: the inverse of Key
// of an escaped series. A key Key never returns is an error.
func Split(f rounding.KeyFormat, partitionKey []byte) (series string, start uint64, err error) {
	start, err = Start(f, partitionKey)
	if err != nil {
		return "", 0, err
	}
	series, ok := Unescape(string(partitionKey[:len(partitionKey)-f.Width-1]))
	if !ok || series == "" {
		return "", 0, fmt.Errorf("PartitionKey %q does not begin with an escaped series", partitionKey)
	}
	return series, start, nil
}

// Compare orders series as the service sorts their PartitionKeys: by escaped name and
// separator, in UTF-16 code units (filter.CompareUTF16). A PartitionKey's escaped part holds
// no separator, so no series' key is a prefix of another's, and the fixed-width start that
// follows never decides between two series.
func Compare(a, b string) int {
	return filter.CompareUTF16(Escape(a)+string(rune(separator)), Escape(b)+string(rune(separator)))
}

// Key is the PartitionKey of the partition starting at unit start of the escaped series.
func Key(f rounding.KeyFormat, escaped string, start uint64) string {
	b := make([]byte, 0, len(escaped)+1+f.Width)
	b = append(b, escaped...)
	b = append(b, separator)
	return string(f.AppendUnits(b, start))
}

// Begin is at or below every PartitionKey of the escaped series, and above other series'
// keys below them.
func Begin(escaped string) string { return escaped + string(rune(separator)) }

// End is above every PartitionKey of the escaped series, and below other series' keys.
func End(escaped string) string { return escaped + string(rune(afterSeparator)) }

// Start returns the partition start a PartitionKey ends with.
func Start(f rounding.KeyFormat, partitionKey []byte) (uint64, error) {
	if len(partitionKey) < 1+f.Width || partitionKey[len(partitionKey)-f.Width-1] != separator {
		return 0, fmt.Errorf("PartitionKey %q is not a series and a partition start", partitionKey)
	}
	return f.ParseUnitsBytes(partitionKey[len(partitionKey)-f.Width:])
}

// Owns reports whether partitionKey is Escape(series) + "|" + a partition start, without
// building the escaped name.
func Owns(f rounding.KeyFormat, partitionKey []byte, series string) bool {
	if len(partitionKey) < 1+f.Width {
		return false
	}
	prefix, suffix := partitionKey[:len(partitionKey)-f.Width-1], partitionKey[len(partitionKey)-f.Width-1:]
	if suffix[0] != separator {
		return false
	}
	j := 0
	for i := 0; i < len(series); i++ {
		c := series[i]
		switch c {
		case escape, separator:
			want := byte(escape)
			if c == separator {
				want = 'p'
			}
			if j+1 >= len(prefix) || prefix[j] != escape || prefix[j+1] != want {
				return false
			}
			j += 2
		default:
			if j >= len(prefix) || prefix[j] != c {
				return false
			}
			j++
		}
	}
	return j == len(prefix)
}

// ValidateSeries checks a series name for these keys: Azure's key rules, the PartitionKey's
// size, and the length of worst, the longest filter clause a read sends for it.
func ValidateSeries(layout string, f rounding.KeyFormat, series string, worst func() filter.Expr, limits filter.Limits) error {
	if err := entity.ValidateSeries(series, 0); err != nil {
		return fmt.Errorf("%s: %w", layout, err)
	}
	if size := entity.KeySize(Escape(series)) + 2*(1+f.Width); size > entity.MaxKeyBytes {
		return fmt.Errorf("%s: %w: name of %d bytes makes a PartitionKey of %d bytes (UTF-16), over Azure's %d",
			layout, tablets.ErrInvalidSeries, len(series), size, entity.MaxKeyBytes)
	}
	if clause := worst(); clause.EncodedLen() > limits.MaxLength {
		return fmt.Errorf("%s: %w: name of %d bytes is too long for a query filter (%d of %d URL-encoded bytes)",
			layout, tablets.ErrInvalidSeries, len(series), clause.EncodedLen(), limits.MaxLength)
	}
	return nil
}

// Clauses selects a series' entities in the partitions that start at first through last:
// head, unless zero, narrows the first partition, tail, unless zero, the last; the
// partitions between are read whole, as one PartitionKey range. With head and tail of one
// comparison each, six comparisons at most.
func Clauses(f rounding.KeyFormat, escaped string, partUnits, first, last uint64, head, tail filter.Expr) []filter.Expr {
	pk := func(p uint64) string { return Key(f, escaped, p) }
	if first == last {
		c := []filter.Expr{filter.Eq("PartitionKey", pk(first))}
		for _, e := range []filter.Expr{head, tail} {
			if !e.IsZero() {
				c = append(c, e)
			}
		}
		return []filter.Expr{filter.And(c...)}
	}
	var clauses []filter.Expr
	wholeFrom, wholeTo := first, last // partitions read whole: [wholeFrom, wholeTo]
	if !head.IsZero() {
		clauses = append(clauses, filter.And(filter.Eq("PartitionKey", pk(first)), head))
		wholeFrom += partUnits
	}
	if !tail.IsZero() {
		wholeTo -= partUnits
	}
	switch {
	case wholeFrom == wholeTo:
		clauses = append(clauses, filter.Eq("PartitionKey", pk(wholeFrom)))
	case wholeFrom < wholeTo:
		clauses = append(clauses, filter.And(filter.Ge("PartitionKey", pk(wholeFrom)), filter.Le("PartitionKey", pk(wholeTo))))
	}
	if !tail.IsZero() {
		clauses = append(clauses, filter.And(filter.Eq("PartitionKey", pk(last)), tail))
	}
	return clauses
}
