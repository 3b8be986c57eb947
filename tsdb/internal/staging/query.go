package staging

import (
	"fmt"
	"strconv"
	"time"

	"github.com/seed71701133/tablets/filter"
	"github.com/seed71701133/tablets/internal/pager"
)

// Kinds says which staging entities a read selects.
type Kinds int

const (
	Floats Kinds = 1 << iota // V = Version
	Hists                    // V = HistVersion
	Both   = Floats | Hists
)

// Query is the query of the staging entities of kinds that may hold points of series (nil:
// of every series) in [from, to). A kind costs two comparisons (T and U: the time keys of
// the two kinds do not overlap), both kinds four, the slot range two more: at most six.
func Query(series []string, from, to time.Time, kinds Kinds) pager.SubQuery {
	f, columns := queryParts(series, from, to, kinds)
	sel := "RowKey," + VersionProp
	if series == nil {
		return pager.SubQuery{Filter: f.String()}
	}
	if columns == nil {
		sel = ""
	}
	for _, c := range columns {
		sel += "," + ColumnChar + strconv.Itoa(c)
	}
	return pager.SubQuery{Filter: f.String(), Select: sel}
}

// queryParts is Query's filter, and the columns its series are in (nil: every column,
// when series is nil or its series fill them all), in order.
func queryParts(series []string, from, to time.Time, kinds Kinds) (filter.Expr, []int) {
	floats := filter.And(
		filter.Lt(FirstProp, TimeKey(EarliestMilli(to))),
		filter.Ge(LastProp, TimeKey(from.UnixMilli())))
	hists := filter.And(
		filter.Lt(FirstProp, HistTimeKey(EarliestMilli(to))),
		filter.Ge(LastProp, HistTimeKey(from.UnixMilli())))
	var clauses []filter.Expr
	switch kinds {
	case Floats:
		clauses = []filter.Expr{floats}
	case Hists:
		clauses = []filter.Expr{hists}
	default:
		clauses = []filter.Expr{filter.Or(floats, hists)}
	}
	if series == nil {
		return filter.And(clauses...), nil
	}
	if len(series) == 1 {
		slot, _ := Hash(series[0])
		hex := fmt.Sprintf("%02x", slot)
		clauses = append(clauses, filter.Le(LoProp, hex), filter.Ge(HiProp, hex))
	}
	var in [Columns]bool
	n := 0
	for _, s := range series {
		if _, c := Hash(s); !in[c] {
			in[c] = true
			n++
		}
	}
	if n == Columns {
		return filter.And(clauses...), nil
	}
	columns := make([]int, 0, n)
	for c, ok := range in {
		if ok {
			columns = append(columns, c)
		}
	}
	return filter.And(clauses...), columns
}

// EarliestMilli is the first millisecond at or after t: a point at millisecond m is before
// t exactly when m < EarliestMilli(t).
func EarliestMilli(t time.Time) int64 {
	ms := t.UnixMilli()
	if time.UnixMilli(ms).Before(t) {
		ms++
	}
	return ms
}
