package tiers

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/rounding"
	"github.com/seed71701133/tablets/tsdb/internal/times"
)

// readRawPoints adds to each series' windows its raw points in its ranges (disjoint, in
// order), merged with its staged ones (read before): the series that need the same range
// are read together, with one QueryMany.
func (tr *Tiers) readRawPoints(ctx context.Context, ranges map[string][][2]time.Time, staged map[string][]tablets.Point, accs map[string]*seriesWindows) error {
	order, byRange := seriesByRange(ranges)
	for _, r := range order {
		// The staged points outside the range are left out by the read, span by span.
		for p, err := range tr.reads.RawPoints(ctx, byRange[r], r[0], r[1], staged) {
			if err != nil {
				return err
			}
			if a := accs[p.Series]; a != nil {
				a.add(p.Time, p.Value)
			}
		}
	}
	return nil
}

// seriesByRange turns the raw ranges of each series around: the ranges in order (by
// start, then end) and the series that need each, sorted. The kinds' raw reads read the
// series of a range together.
func seriesByRange(ranges map[string][][2]time.Time) ([][2]time.Time, map[[2]time.Time][]string) {
	byRange := map[[2]time.Time][]string{}
	for s, rs := range ranges {
		for _, r := range rs {
			byRange[r] = append(byRange[r], s)
		}
	}
	for _, names := range byRange {
		slices.Sort(names)
	}
	return slices.SortedFunc(maps.Keys(byRange), compareRanges), byRange
}

// compareRanges orders ranges by start, then end.
func compareRanges(a, b [2]time.Time) int {
	if c := a[0].Compare(b[0]); c != 0 {
		return c
	}
	return a[1].Compare(b[1])
}

// appendRange appends r to rs (ranges in order of their starts, r's not before the last's),
// extending the last range instead where r overlaps or touches it, and dropping an empty r:
// a plan of many windows read raw holds a range per run of them, not one per window.
func appendRange(rs [][2]time.Time, r [2]time.Time) [][2]time.Time {
	if !r[0].Before(r[1]) {
		return rs
	}
	if n := len(rs); n > 0 && !rs[n-1][1].Before(r[0]) {
		rs[n-1][1] = times.Later(rs[n-1][1], r[1])
		return rs
	}
	return append(rs, r)
}

// readRawHistograms reads the histogram samples of each series in its ranges (disjoint, in
// order), merged with its staged ones (read before): a read of many series for each range
// that several share.
func (tr *Tiers) readRawHistograms(ctx context.Context, ranges map[string][][2]time.Time, staged map[string][]tablets.HistogramPoint) (map[string][]tablets.HistogramPoint, error) {
	order, byRange := seriesByRange(ranges)
	out := map[string][]tablets.HistogramPoint{}
	if len(order) == 0 {
		return out, nil
	}
	end := order[0][1]
	for _, r := range order {
		end = times.Later(end, r[1])
	}
	if exists, err := tr.histTablesIn(ctx, order[0][0], end); err != nil || !exists {
		return out, err // a database without histograms there pays one request a period
	}
	for _, r := range order {
		names := tr.histogramNames(byRange[r])
		if len(names) == 0 {
			continue
		}
		for sh, err := range tr.reads.Histograms(ctx, names, r[0], r[1], staged) {
			if err != nil {
				return nil, fmt.Errorf("tsdb: read histograms: %w", err)
			}
			out[sh.Series] = append(out[sh.Series], sh.HistogramPoint)
		}
	}
	return out, nil
}

// seriesHistWindows merges the histogram samples of one series into windows of step, by
// start: those its tier windows hold and its raw samples (disjoint in time), chained in time
// order.
func seriesHistWindows(tier []*Window, raw []tablets.HistogramPoint, step time.Duration) map[time.Time]*histWindow {
	pieces := map[time.Time][]*histWindow{}
	for _, w := range tier {
		if w.hist != nil {
			ws := rounding.Floor(w.Start, step)
			pieces[ws] = append(pieces[ws], w.hist)
		}
	}
	for _, p := range raw {
		if !isStaleHistogram(p) {
			ws := rounding.Floor(p.Time, step)
			pieces[ws] = append(pieces[ws], newHistWindow(p))
		}
	}
	out := make(map[time.Time]*histWindow, len(pieces))
	for ws, ps := range pieces {
		out[ws] = histPieces(ps)
	}
	return out
}
