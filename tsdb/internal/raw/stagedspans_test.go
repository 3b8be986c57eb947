package raw

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/tsdb/internal/naming"
	"github.com/seed71701133/tablets/tsdb/internal/staging"
	"github.com/seed71701133/tablets/tsdb/internal/tables"
)

// stagedSpans adds a span for each period that staged points of any series fall in and
// the tables' spans lack, once, in period order, whichever point of a series' (first,
// middle, last) is the period's only one; a period known dropped gets none.
func TestStagedSpansAddsEveryPeriodOfStagedPoints(t *testing.T) {
	names := naming.Names{Base: "t", Period: time.Hour}
	periods := tables.NewPeriods(nil, names, nil, time.Now)
	r := &Store[tablets.Point, pointTable]{names: names, tables: periods}
	h := func(hours float64) time.Time {
		return time.Unix(0, 0).UTC().Add(time.Duration(hours * float64(time.Hour)))
	}
	pts := func(hours ...float64) []tablets.Point {
		var out []tablets.Point
		for _, x := range hours {
			out = append(out, tablets.Point{Time: h(x), Value: x})
		}
		return out
	}
	from, to := h(0), h(10)
	staged := map[string][]tablets.Point{
		"a": pts(1.1, 1.2, 1.9, 3.5, 7.99),  // periods 1, 3, 7: the last alone in its
		"b": pts(1.5, 4.0, 4.1, 4.2, 4.999), // periods 1, 4: 4 from its first millisecond
		"c": pts(5.5),                       // period 5 (dropped)
		"d": nil,
	}
	periods.Dropped.Add(uint64(5*3600), struct{}{})
	spans := []Span{periods.SpanOf(uint64(3*3600), from, to)} // the tables' spans: period 3
	got := stagedSpans(r, staging.PointsMerge, spans, []string{"a", "b", "c", "d"}, from, to, staged)
	var periodsGot []uint64
	for _, sp := range got {
		periodsGot = append(periodsGot, sp.Period/3600)
		require.Equal(t, sp.Period != 3*3600, sp.stagedOnly, "period %d", sp.Period/3600)
		require.Equal(t, periods.SpanOf(sp.Period, from, to), sp.Span)
	}
	require.Equal(t, []uint64{1, 3, 4, 7}, periodsGot)
}
