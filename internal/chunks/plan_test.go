package chunks

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/seed71701133/tablets/filter"
	"github.com/seed71701133/tablets/internal/partkey"
)

// TestPlanSharesNarrowing: a read of many series within one partition shares the
// narrowing (L >= from, RowKey < to) among its keys: 13 series a sub-query, not 5, and the
// sub-queries select exactly what the series' clauses select, within Azure's limits. A read
// across partitions is packed clause by clause, as before.
func TestPlanSharesNarrowing(t *testing.T) {
	l := histLayout(t)
	tb := Table[float64]{Layout: Layout[float64]{Name: l.Name, Format: l.Format, PartUnits: l.PartUnits, MaxChunk: l.MaxChunk, Limits: l.Limits}}
	day := 20_000 * histDayUnits
	series := make([]string, 40)
	for i := range series {
		series[i] = fmt.Sprintf("l%032x", rand.Uint64()) // tsdb's keys
	}
	series[7] = "O'Brien|a b" // one that needs escaping
	hour := uint64(3_600_000)
	for _, c := range []struct {
		name     string
		from, to uint64
		subs     int // sub-queries
	}{
		{"an hour inside a day", day + 5*hour, day + 6*hour, 4},           // 13 a sub-query (3 comparisons left to 2)
		{"from the day's start", day, day + 6*hour, 3},                    // no head: 14 a sub-query
		{"to the day's end", day + 5*hour, day + histDayUnits, 3},         // no tail
		{"the whole day", day, day + histDayUnits, 3},                     // 15 a sub-query
		{"across midnight", day + 23*hour, day + histDayUnits + hour, 12}, // clause by clause: 7 clauses of 2 comparisons a sub-query
	} {
		t.Run(c.name, func(t *testing.T) {
			plan, err := tb.Plan(series, c.from, c.to, "")
			if err != nil {
				t.Fatal(err)
			}
			if len(plan) != c.subs {
				t.Errorf("%d sub-queries, want %d", len(plan), c.subs)
			}
			var filters []filter.Expr
			for _, q := range plan {
				f, err := filter.Parse(q.Filter)
				if err != nil {
					t.Fatalf("%s: %v", q.Filter, err)
				}
				if f.Comparisons() > filter.MaxComparisons || f.EncodedLen() > filter.DefaultMaxLength {
					t.Errorf("%d comparisons, %d bytes: %s", f.Comparisons(), f.EncodedLen(), q.Filter)
				}
				filters = append(filters, f)
			}
			var clauses []filter.Expr
			for _, s := range series {
				clauses = append(clauses, tb.Layout.Clauses(s, c.from, c.to)...)
			}
			want := filter.Or(clauses...)
			// Chunks of every series (and of one not asked for) around the range, as keys
			// and last times: selected by the plan exactly where by the clauses.
			probe := append(append([]string{}, series...), "lffffffffffffffffffffffffffffffff")
			checked := 0
			for _, s := range probe {
				for _, start := range []uint64{day - hour, day, day + 4*hour, day + 5*hour + 1, day + 6*hour - 1, day + 6*hour, day + 23*hour, day + histDayUnits, day + histDayUnits + 30*60_000} {
					for _, length := range []uint64{0, 30 * 60_000, 2 * hour} {
						last := start + length
						props := map[string]string{
							"PartitionKey": tb.Layout.PartitionKey(partkey.Escape(s), start),
							"RowKey":       tb.Layout.Key(start) + "-0000000000000001",
							lastProperty:   tb.Layout.Key(last),
						}
						got := false
						for _, f := range filters {
							got = got || f.Eval(props)
						}
						if got != want.Eval(props) {
							t.Fatalf("chunk %v of %q: the plan selects it %v, the clauses %v", props, s, got, !got)
						}
						checked++
					}
				}
			}
			if checked == 0 {
				t.Fatal("nothing checked")
			}
		})
	}
}
