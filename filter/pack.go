package filter

import (
	"errors"
	"fmt"
)

// MaxComparisons is Azure's documented maximum number of discrete comparisons in one
// $filter, the default of [Limits.MaxComparisons].
const MaxComparisons = 15

// DefaultMaxLength is the default of [Limits.MaxLength]: well under the request-URL sizes
// that fail (Azurite fails near a 16.8K-character filter and passes 8.4K; Azure answers 414
// to long URLs but documents no figure).
const DefaultMaxLength = 4000

// Limits bounds each filter [Pack] returns.
type Limits struct {
	// MaxComparisons is the most comparisons one filter may hold; 0 means MaxComparisons
	// (15). Azure rejects more than 15, even where Azurite accepts them.
	MaxComparisons int
	// MaxLength is the most bytes one filter may take in the request URL, that is
	// len(url.QueryEscape(filter)); 0 means DefaultMaxLength.
	MaxLength int
}

// Errors returned by Pack, wrapped with the index of the offending clause.
var (
	// ErrClauseTooLarge: a clause that does not fit the limits even alone.
	ErrClauseTooLarge = errors.New("filter: clause exceeds the filter limits")
	// ErrEmptyClause: an empty (zero) Expr as a clause; it would select every entity.
	ErrEmptyClause = errors.New("filter: empty clause")
	// ErrInvalidLimits: a negative limit.
	ErrInvalidLimits = errors.New("filter: invalid limits")
)

// Pack packs the disjunction of clauses into as few filters as possible, each with at most
// limits.MaxComparisons comparisons and an encoded length ([Expr.EncodedLen]) of at most
// limits.MaxLength. The filters, OR-ed together, select exactly what Or(clauses...) selects:
// filter i is Or of a contiguous run of clauses, the runs in the order of clauses, so a
// caller that sends the filters in order reads the clauses in order. A clause is never split.
//
// No clauses give no filters. A clause that cannot fit alone gives an error wrapping
// [ErrClauseTooLarge], an empty clause one wrapping [ErrEmptyClause]; both name the clause's
// index. Packing is greedy, which is optimal for contiguous runs.
func Pack(clauses []Expr, limits Limits) ([]Expr, error) {
	maxCmp, maxLen := limits.MaxComparisons, limits.MaxLength
	if maxCmp < 0 || maxLen < 0 {
		return nil, fmt.Errorf("%w: %+v", ErrInvalidLimits, limits)
	}
	if maxCmp == 0 {
		maxCmp = MaxComparisons
	}
	if maxLen == 0 {
		maxLen = DefaultMaxLength
	}
	var out []Expr
	// The run is clauses[start:i]; cmps and olen are its comparisons and the encoded length
	// of its clauses written as operands of or, with the separators between them.
	start, cmps, olen := 0, 0, 0
	for i, c := range clauses {
		if c.n == nil {
			return nil, fmt.Errorf("%w: clause %d", ErrEmptyClause, i)
		}
		if c.n.ncmp > maxCmp || c.n.elen > maxLen {
			return nil, fmt.Errorf("%w: clause %d has %d comparisons and encoded length %d (limits %d and %d)",
				ErrClauseTooLarge, i, c.n.ncmp, c.n.elen, maxCmp, maxLen)
		}
		ol := c.n.elen // an or (flattened) or a comparison is written as is
		if c.n.kind == kindAnd {
			ol += 6 // %28 %29
		}
		if i > start {
			if cmps+c.n.ncmp <= maxCmp && olen+4+ol <= maxLen { // 4: "+or+"
				cmps += c.n.ncmp
				olen += 4 + ol
				continue
			}
			out = append(out, Or(clauses[start:i]...))
		}
		start, cmps, olen = i, c.n.ncmp, ol
	}
	if start < len(clauses) {
		out = append(out, Or(clauses[start:]...))
	}
	return out, nil
}
