package tsdb

import (
	"context"
	"fmt"
	"iter"
	"maps"
	"slices"
	"time"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/filter"
	"github.com/seed71701133/tablets/internal/pager"
	"github.com/seed71701133/tablets/rounding"
)

// Fields are the parts of a Window that an Aggregate computes (Start and Count always): what
// it reads of the tiers' columns.
type Fields uint16

const (
	FieldSum        Fields = 1 << iota // Sum (and Mean)
	FieldMin                           // Min
	FieldMax                           // Max
	FieldFirst                         // First
	FieldLast                          // Last
	FieldQuantiles                     // Quantile and FloatQuantile: the windows' sketches
	FieldHistograms                    // the Histogram fields

	// AllFields is every field.
	AllFields = FieldSum | FieldMin | FieldMax | FieldFirst | FieldLast | FieldQuantiles | FieldHistograms
)

// AggregateOptions configure Aggregate and AggregateSeries.
type AggregateOptions struct {
	// Fields are the fields wanted (0: AllFields).
	Fields Fields
}

// SeriesWindow is a window of one series, as AggregateSeries yields it.
type SeriesWindow struct {
	Series string
	Window
}

// AggregateSeries is Aggregate of each series apart: it yields the windows of each series
// (in the order of series, each oldest first), not merged, reading the blocks and points
// of many series together.
func (db *DB) AggregateSeries(ctx context.Context, series []string, from, to time.Time, step time.Duration, opts *AggregateOptions) iter.Seq2[SeriesWindow, error] {
	return func(yield func(SeriesWindow, error) bool) {
		for _, s := range series {
			windows, err := db.aggregate(ctx, []string{s}, from, to, step)
			if err != nil {
				yield(SeriesWindow{}, err)
				return
			}
			for _, w := range windows {
				if !yield(SeriesWindow{Series: s, Window: *w}, nil) {
					return
				}
			}
		}
	}
}

// maxSeriesPerFilter keeps a block read's filter under 15 comparisons: the RowKey range (2)
// and one PartitionKey equality a series.
const maxSeriesPerFilter = 13

// Aggregate yields, oldest first, one Window per epoch-aligned step window that holds points
// in [from, to), aggregating the points of all the named series together; a window cut by
// from or to aggregates only the points inside. It reads the coarsest tier whose Step
// divides step wherever that tier's windows are sealed and not flagged stale (see
// Options.SealDelay), and the raw points elsewhere: the answer does not depend on which.
//
// Histogram samples are aggregated too, apart from the points (see Window): the windows of
// a histogram series hold its observations, merged exactly from the tier's windows, so that
// Quantile over histogram series comes from their own buckets. A tier window stored without
// its histograms (too large) is read raw. Staleness markers are not samples.
//
// opts (nil: every field) says which fields of the windows the caller wants: a tier read
// selects only their columns, and leaves the other fields zero (quantiles NaN, Histogram
// nil) in windows that come from a tier.
func (db *DB) Aggregate(ctx context.Context, series []string, from, to time.Time, step time.Duration, opts *AggregateOptions) iter.Seq2[Window, error] {
	return func(yield func(Window, error) bool) {
		windows, err := db.aggregate(ctx, series, from, to, step)
		if err != nil {
			yield(Window{}, err)
			return
		}
		for _, w := range windows {
			if !yield(*w, nil) {
				return
			}
		}
	}
}

func (db *DB) aggregate(ctx context.Context, series []string, from, to time.Time, step time.Duration) ([]*Window, error) {
	if step <= 0 {
		return nil, fmt.Errorf("%w: step %v must be positive", tablets.ErrInvalidOptions, step)
	}
	if err := rounding.CheckRange(from, to); err != nil {
		return nil, err
	}
	names := slices.Compact(slices.Sorted(slices.Values(series)))
	for _, s := range names {
		if err := db.validate(ctx, s); err != nil {
			return nil, fmt.Errorf("tsdb: %w", err)
		}
	}
	// Each series' windows first, from its tier windows and raw points (one point a time);
	// then the series merged in name order, so that between points of equal times in two
	// series, First and Last take the later name's, whichever of tier and raw each came from.
	out := map[time.Time]*Window{}
	var mergeErr error
	mergeInto := func(dst map[time.Time]*Window, tw *Window) {
		ws := rounding.Floor(tw.Start, step)
		w := dst[ws]
		if w == nil {
			w = newWindow(ws, db.opts.Accuracy)
			dst[ws] = w
		}
		if err := w.merge(*tw); err != nil && mergeErr == nil {
			mergeErr = err
		}
	}
	// The staged points and histogram samples of every series in one query, before the
	// blocks and the raw points: a window that holds a staged one may have been rolled up
	// without it (a late point is flagged only by the Fold that moves it), so it is read raw.
	staged, stagedHists, err := db.readStagedKinds(ctx, names, from, to, stagedBoth)
	if err != nil {
		return nil, err
	}
	raw := map[string][][2]time.Time{} // per series, the ranges to read raw
	tierWindows := map[string][]*Window{}
	if tier, ok := db.tierFor(step); ok && from.Before(to) {
		cl := rounding.Floor(from, tier.Step)
		if cl.Before(from) {
			cl = cl.Add(tier.Step)
		}
		ch := rounding.Floor(to, tier.Step)
		if cl.Before(ch) {
			blocks, err := db.readBlocks(ctx, names, tier, unix(cl), unix(ch))
			if err != nil {
				return nil, err
			}
			for _, s := range names {
				raw[s] = append(raw[s], [2]time.Time{from, cl})
				for bs := floorSec(unix(cl), tier.block()); bs < unix(ch); bs += uint64(tier.block() / time.Second) {
					lo, hi := laterOf(at(bs), cl), earlierOf(at(bs).Add(tier.block()), ch)
					// A window is trusted when its block is not flagged and was rolled up at
					// least SealDelay after the window's end; raw points elsewhere.
					b := blocks[blockRef{s, bs}]
					if b == nil || b.stale {
						raw[s] = append(raw[s], [2]time.Time{lo, hi})
						continue
					}
					for i := range blockWindows {
						ws := at(bs).Add(time.Duration(i) * tier.Step)
						we := ws.Add(tier.Step)
						if ws.Before(lo) || !ws.Before(hi) {
							continue
						}
						if b.rolled < float64(we.Add(db.opts.SealDelay).Unix()) || len(pointsIn(staged[s], ws, we)) > 0 || len(histsIn(stagedHists[s], ws, we)) > 0 {
							raw[s] = append(raw[s], [2]time.Time{ws, we})
						} else if w := b.windows[i]; w != nil && w.hist != nil && w.hist.kind == histTooLarge {
							raw[s] = append(raw[s], [2]time.Time{ws, we}) // stored without its histograms
						} else if w != nil {
							tierWindows[s] = append(tierWindows[s], w)
						}
					}
				}
				raw[s] = append(raw[s], [2]time.Time{ch, to})
			}
		}
	}
	rawRanges := map[string][][2]time.Time{}
	for _, s := range names {
		ranges, ok := raw[s]
		if !ok {
			ranges = [][2]time.Time{{from, to}}
		}
		rawRanges[s] = mergeRanges(ranges)
	}
	rawHists, err := db.readRawHistograms(ctx, rawRanges, stagedHists)
	if err != nil {
		return nil, err
	}
	for _, s := range names {
		mine := map[time.Time]*Window{}
		for _, w := range tierWindows[s] {
			floats := *w
			floats.hist = nil // a series' histograms merge in time order, below
			mergeInto(mine, &floats)
		}
		for ws, h := range seriesHistWindows(tierWindows[s], rawHists[s], step) {
			w := mine[ws]
			if w == nil {
				w = newWindow(ws, db.opts.Accuracy)
				mine[ws] = w
			}
			w.hist = h
		}
		for _, r := range rawRanges[s] {
			for p, err := range withStaged(db.rawQuery(ctx, s, r[0], r[1]), pointsIn(staged[s], r[0], r[1])) {
				if err != nil {
					return nil, err
				}
				ws := rounding.Floor(p.Time, step)
				w := mine[ws]
				if w == nil {
					w = newWindow(ws, db.opts.Accuracy)
					mine[ws] = w
				}
				w.add(p.Time, p.Value)
			}
		}
		starts := slices.SortedFunc(maps.Keys(mine), func(a, b time.Time) int { return a.Compare(b) })
		for _, ws := range starts {
			mergeInto(out, mine[ws])
		}
	}
	if mergeErr != nil {
		return nil, mergeErr
	}
	windows := make([]*Window, 0, len(out))
	for _, w := range out {
		if w.Count > 0 || w.hist != nil {
			w.setHistograms(w.hist)
			windows = append(windows, w)
		}
	}
	slices.SortFunc(windows, func(a, b *Window) int { return a.Start.Compare(b.Start) })
	return windows, nil
}

// tierFor is the coarsest tier whose Step divides step.
func (db *DB) tierFor(step time.Duration) (Tier, bool) {
	for i := len(db.opts.Tiers) - 1; i >= 0; i-- {
		if t := db.opts.Tiers[i]; step%t.Step == 0 {
			return t, true
		}
	}
	return Tier{}, false
}

// mergeRanges drops empty ranges and joins adjacent ones, in order.
func mergeRanges(rs [][2]time.Time) [][2]time.Time {
	var out [][2]time.Time
	for _, r := range rs {
		if !r[0].Before(r[1]) {
			continue
		}
		if n := len(out); n > 0 && !out[n-1][1].Before(r[0]) {
			out[n-1][1] = laterOf(out[n-1][1], r[1])
			continue
		}
		out = append(out, r)
	}
	return out
}

type blockRef struct {
	series string
	start  uint64
}

// readBlocks reads tier t's blocks of the series that hold [lo, hi) (Unix seconds): per table,
// one filter per 13 series.
func (db *DB) readBlocks(ctx context.Context, names []string, t Tier, lo, hi uint64) (map[blockRef]*block, error) {
	out := map[blockRef]*block{}
	blo, bhi := floorSec(lo, t.block()), ceilSec(hi, t.block())
	for p := tierPeriod(t, blo); p < bhi; p += uint64(t.Period / time.Second) {
		client := db.service.NewClient(db.tierTable(t, p))
		for i := 0; i < len(names); i += maxSeriesPerFilter {
			group := names[i:min(i+maxSeriesPerFilter, len(names))]
			var eqs []filter.Expr
			for _, s := range group {
				eqs = append(eqs, filter.Eq("PartitionKey", s))
			}
			f := filter.And(filter.Ge("RowKey", blockKey(max(blo, p))), filter.Lt("RowKey", blockKey(min(bhi, p+uint64(t.Period/time.Second)))), filter.Or(eqs...))
			e := entity.Entity{AllowStrings: true}
			for page, err := range pager.Each(ctx, client, pager.SubQuery{Filter: f.String()}, 0) {
				if isTableGone(err) {
					break
				}
				if err != nil {
					return nil, fmt.Errorf("tsdb: read tier: %w", err)
				}
				for _, raw := range page.Entities {
					if err := e.Decode(raw); err != nil {
						return nil, fmt.Errorf("tsdb: read tier: %w", err)
					}
					b, err := decodeBlock(&e, t.Step, db.opts.Accuracy)
					if err != nil {
						return nil, fmt.Errorf("tsdb: read tier: %w", err)
					}
					out[blockRef{string(e.PartitionKey), b.start}] = b
				}
			}
		}
	}
	return out, nil
}

// readRawHistograms reads the histogram samples of each series in its ranges (disjoint, in
// order), merged with its staged ones (read before): a read of many series for each range
// that several share.
func (db *DB) readRawHistograms(ctx context.Context, ranges map[string][][2]time.Time, staged map[string][]HistogramPoint) (map[string][]HistogramPoint, error) {
	byRange := map[[2]time.Time][]string{}
	for s, rs := range ranges {
		for _, r := range rs {
			byRange[r] = append(byRange[r], s)
		}
	}
	order := slices.SortedFunc(maps.Keys(byRange), func(a, b [2]time.Time) int {
		if c := a[0].Compare(b[0]); c != 0 {
			return c
		}
		return a[1].Compare(b[1])
	})
	out := map[string][]HistogramPoint{}
	if len(order) == 0 {
		return out, nil
	}
	end := order[0][1]
	for _, r := range order {
		end = laterOf(end, r[1])
	}
	if exists, err := db.histTablesIn(ctx, order[0][0], end); err != nil || !exists {
		return out, err // a database without histograms there pays one request a period
	}
	for _, r := range order {
		names := histogramNames(slices.Sorted(slices.Values(byRange[r])))
		if len(names) == 0 {
			continue
		}
		for sh, err := range db.histogramsWithStaged(ctx, names, r[0], r[1], staged) {
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
func seriesHistWindows(tier []*Window, raw []HistogramPoint, step time.Duration) map[time.Time]*histWindow {
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

// histogramNames are the names that may hold histogram samples: those valid for the keys of
// histogram tables (a float series' name may be too long for them, and then has none).
func histogramNames(names []string) []string {
	return slices.DeleteFunc(slices.Clone(names), func(s string) bool { return validateHistSeries(s) != nil })
}
