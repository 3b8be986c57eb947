package tiers

import (
	"context"
	"fmt"
	"iter"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/blockenc"
	"github.com/seed71701133/tablets/rounding"
	"github.com/seed71701133/tablets/tsdb/internal/staging"
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
	FieldQuantiles                     // Quantile and FloatQuantile: the windows' sketches (and Min and Max, which bound them)
	FieldHistograms                    // the Histogram fields
	FieldExact                         // NaNs and Resets (ResetsKnown): what PromQL's functions of a run of windows need besides

	// AllFields is every field.
	AllFields = FieldSum | FieldMin | FieldMax | FieldFirst | FieldLast | FieldQuantiles | FieldHistograms | FieldExact
)

// AggregateOptions configure Aggregate and AggregateSeries.
type AggregateOptions struct {
	// Fields are the fields wanted (0: AllFields). The others are zero in every window
	// yielded (Quantile and FloatQuantile NaN without FieldQuantiles, Histogram nil and
	// HistogramCount 0 without FieldHistograms), and a window that holds only histogram
	// samples is yielded only with FieldHistograms. FieldQuantiles brings Min and Max too.
	Fields Fields
	// staged, if set, gives the staged points of the series (the read path's, read once for
	// a range that covers [from, to)), which the read does not read again: the batches of a
	// large read share one read of the staging. Staged histogram samples are still read, with
	// FieldHistograms. See WithStaged.
	staged StagedPoints
}

// StagedPoints returns the staged points of series in [from, to), read before for many
// reads; an error where they were not read.
type StagedPoints func(series []string, from, to time.Time) (map[string][]tablets.Point, error)

// WithStaged returns a copy of opts (nil: every field) whose reads take the staged points
// of their series from staged instead of reading them (nil: they read them).
func WithStaged(opts *AggregateOptions, staged StagedPoints) *AggregateOptions {
	o := AggregateOptions{}
	if opts != nil {
		o = *opts
	}
	o.staged = staged
	return &o
}

// fields are the fields opts asks for, or an error wrapping tablets.ErrInvalidOptions.
func (opts *AggregateOptions) fields() (Fields, error) {
	if opts == nil || opts.Fields == 0 {
		return AllFields, nil
	}
	if opts.Fields&^AllFields != 0 {
		return 0, fmt.Errorf("%w: unknown Fields %#x", tablets.ErrInvalidOptions, uint16(opts.Fields&^AllFields))
	}
	f := opts.Fields
	if f&FieldQuantiles != 0 {
		f |= FieldMin | FieldMax // the quantiles are clamped to [Min, Max]
	}
	if f&FieldExact != 0 {
		f |= FieldFirst | FieldLast // Resets across windows need their ends
	}
	return f, nil
}

// columns are the columns of a columnar block that hold fields f.
func (f Fields) columns() blockenc.Columns {
	cols := blockenc.ColCount
	for _, m := range []struct {
		f Fields
		c blockenc.Columns
	}{{FieldSum, blockenc.ColSum}, {FieldMin, blockenc.ColMin}, {FieldMax, blockenc.ColMax}, {FieldFirst, blockenc.ColFirst},
		{FieldLast, blockenc.ColLast}, {FieldQuantiles, blockenc.ColSketch}, {FieldHistograms, blockenc.ColHistogram},
		{FieldExact, blockenc.ColExact}} {
		if f&m.f != 0 {
			cols |= m.c
		}
	}
	return cols
}

// keep zeroes the fields of w that f does not ask for, so that a window reads the same
// whichever of a tier and the raw points it came from.
func (f Fields) keep(w *Window) {
	if f&FieldSum == 0 {
		w.Sum = 0
	}
	if f&FieldMin == 0 {
		w.Min = 0
	}
	if f&FieldMax == 0 {
		w.Max = 0
	}
	if f&FieldFirst == 0 {
		w.First, w.firstT = 0, time.Time{}
	}
	if f&FieldLast == 0 {
		w.Last, w.lastT = 0, time.Time{}
	}
	if f&FieldQuantiles == 0 {
		w.sk = nil
	}
	if f&FieldExact == 0 {
		w.NaNs, w.Resets, w.resetsUnknown = 0, 0, false
	}
}

// SeriesWindow is a window of one series, as AggregateSeries yields it.
type SeriesWindow struct {
	Series string
	Window
}

// AggregateBySeries is DB.AggregateSeries.
func (tr *Tiers) AggregateBySeries(ctx context.Context, series []string, from, to time.Time, step time.Duration, opts *AggregateOptions) iter.Seq2[SeriesWindow, error] {
	return func(yield func(SeriesWindow, error) bool) {
		per, f, err := tr.aggregateSeries(ctx, series, from, to, step, opts)
		if err != nil {
			yield(SeriesWindow{}, err)
			return
		}
		seen := make(map[string]bool, len(series))
		for _, s := range series {
			if seen[s] {
				continue
			}
			seen[s] = true
			for _, w := range finish(per[s], f) {
				if !yield(SeriesWindow{Series: s, Window: *w}, nil) {
					return
				}
			}
		}
	}
}

// Aggregate is DB.Aggregate.
func (tr *Tiers) Aggregate(ctx context.Context, series []string, from, to time.Time, step time.Duration, opts *AggregateOptions) iter.Seq2[Window, error] {
	return func(yield func(Window, error) bool) {
		per, f, err := tr.aggregateSeries(ctx, series, from, to, step, opts)
		if err != nil {
			yield(Window{}, err)
			return
		}
		merged, err := mergeSeries(per, tr.cfg.Accuracy)
		if err != nil {
			yield(Window{}, err)
			return
		}
		for _, w := range finish(merged, f) {
			if !yield(*w, nil) {
				return
			}
		}
	}
}

// mergeSeries merges the windows of every series (by start) in name order, so that between
// points of equal times in two series, First and Last take the later name's, whichever of
// tier and raw each came from.
func mergeSeries(per map[string]*seriesWindows, accuracy float64) (*seriesWindows, error) {
	if len(per) == 1 {
		for _, m := range per {
			return m, nil
		}
	}
	var out *seriesWindows
	for _, s := range slices.Sorted(maps.Keys(per)) {
		sw := per[s]
		if out == nil {
			out = newSeriesWindows(sw.base, sw.to, sw.step, accuracy)
		}
		for w := range sw.windows() {
			if err := out.own(w.Start).merge(*w); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// finish is the windows of ws that hold points or (with FieldHistograms) histogram
// samples, oldest first, with only the fields f.
func finish(ws *seriesWindows, f Fields) []*Window {
	if ws == nil {
		return nil
	}
	var out []*Window
	for w := range ws.windows() {
		if w.Count > 0 || w.hist != nil || w.NaNs > 0 && f&FieldExact != 0 {
			w.setHistograms(w.hist)
			f.keep(w)
			out = append(out, w)
		}
	}
	return out
}

// maxReplans bounds the plans of one Aggregate that meet raw tables dropped meanwhile.
const maxReplans = 3

// aggregateSeries computes the windows of step of each series (by name, by start) in
// [from, to) with fields f (from opts): its tier windows that may be trusted, its raw points
// and histogram samples elsewhere.
//
// A plan reads raw the windows whose tier windows it cannot trust, in the periods whose
// tables this process knows to exist. Another process's Retain may have dropped them since
// (after rolling them up: their tier windows are then the last word). A raw read that finds
// such a table gone makes the answer wrong, so the Aggregate asks the catalog which of the
// range's periods were dropped, and plans again (at most maxReplans times; then it fails
// rather than answer short).
func (tr *Tiers) aggregateSeries(ctx context.Context, series []string, from, to time.Time, step time.Duration, opts *AggregateOptions) (map[string]*seriesWindows, Fields, error) {
	for range maxReplans {
		before := tr.periods.Vanished.Load()
		per, f, err := tr.aggregateOnce(ctx, series, from, to, step, opts)
		if err != nil || tr.periods.Vanished.Load() == before {
			return per, f, err
		}
		if err := tr.periods.LearnDropped(ctx, from, to); err != nil {
			return nil, 0, err
		}
	}
	return nil, 0, fmt.Errorf("tsdb: aggregate: raw tables of [%s, %s) kept being dropped while it read them (%d plans)",
		from.Format(time.RFC3339), to.Format(time.RFC3339), maxReplans)
}

// aggregateOnce is aggregateSeries of one plan.
func (tr *Tiers) aggregateOnce(ctx context.Context, series []string, from, to time.Time, step time.Duration, opts *AggregateOptions) (map[string]*seriesWindows, Fields, error) {
	if step <= 0 {
		return nil, 0, fmt.Errorf("%w: step %v must be positive", tablets.ErrInvalidOptions, step)
	}
	f, err := opts.fields()
	if err != nil {
		return nil, 0, err
	}
	if err := rounding.CheckRange(from, to); err != nil {
		return nil, 0, err
	}
	names := slices.Compact(slices.Sorted(slices.Values(series)))
	for _, s := range names {
		if err := tr.reads.CheckSeries(ctx, s); err != nil {
			return nil, 0, fmt.Errorf("tsdb: %w", err)
		}
	}
	per := make(map[string]*seriesWindows, len(names))
	for _, s := range names {
		per[s] = newSeriesWindows(from, to, step, tr.cfg.Accuracy)
	}
	if len(names) == 0 || !from.Before(to) {
		return per, f, nil
	}
	// The staged points (and histogram samples) of every series in one query, before the
	// blocks and the raw points: a window that holds a staged one may have been rolled up
	// without it, so it is read raw.
	kinds := staging.Floats
	if f&FieldHistograms != 0 {
		kinds = staging.Both
	}
	var staged map[string][]tablets.Point
	if opts != nil && opts.staged != nil {
		if staged, err = opts.staged(names, from, to); err != nil {
			return nil, 0, err
		}
		kinds &^= staging.Floats
	}
	var stagedHists map[string][]tablets.HistogramPoint
	if kinds != 0 {
		var floats map[string][]tablets.Point
		if floats, stagedHists, err = tr.reads.Staged(ctx, names, from, to, kinds); err != nil {
			return nil, 0, err
		}
		if kinds&staging.Floats != 0 {
			staged = floats
		}
	}
	plan, err := tr.planTier(ctx, names, from, to, step, f, staged, stagedHists)
	if err != nil {
		return nil, 0, err
	}
	for _, s := range names {
		for _, w := range plan.tier[s] {
			if err := per[s].mergeTier(w); err != nil {
				return nil, 0, err
			}
		}
	}
	if err := tr.readRawPoints(ctx, plan.raw, staged, per); err != nil {
		return nil, 0, err
	}
	if f&FieldHistograms != 0 {
		rawHists, err := tr.readRawHistograms(ctx, plan.raw, stagedHists)
		if err != nil {
			return nil, 0, err
		}
		for _, s := range names {
			for ws, h := range seriesHistWindows(plan.tier[s], rawHists[s], step) {
				if w := per[s].own(ws); w != nil {
					w.hist = h
				}
			}
		}
	}
	return per, f, nil
}

// seriesWindows gathers the windows of step of one series in [from, to): its tier windows
// (of a step that divides step) and raw points. Up to maxSlots windows they are slots of a
// slice, slot i the window starting at base + i×step, base the start of the window holding
// from (nil: none yet): no map of windows by start to fill, and none to sort at the end (a
// 7-day range of the minute tier holds 10,080 a series: filling, walking and sorting
// the maps were about a fifth of the CPU of an Evaluate of it). A longer range keeps the
// windows it has in a map by start. A tier window whose start is a window's is kept as it is (borrowed) until
// something else is merged into that window. What falls outside [base, to) the read does
// not ask for, and is left out.
type seriesWindows struct {
	base, to time.Time
	step     time.Duration
	accuracy float64
	slots    []*Window // or nil: byStart instead
	owned    []bool    // of slots: made here (the others are borrowed)
	byStart  map[time.Time]*Window
	sOwned   map[time.Time]bool
}

// maxSlots is the most windows a series' seriesWindows holds in a slice: 9 bytes each,
// whether the window has points or not (a unit of 64 series 9.4 MB at most).
const maxSlots = 1 << 14

// newSeriesWindows returns the empty windows of step of [from, to), of accuracy accuracy.
func newSeriesWindows(from, to time.Time, step time.Duration, accuracy float64) *seriesWindows {
	a := &seriesWindows{base: rounding.Floor(from, step), to: to, step: step, accuracy: accuracy}
	// Sub saturates (at 292 years): a range that long is never slots.
	if d := to.Sub(a.base); d < math.MaxInt64-step && (d+step-1)/step <= maxSlots {
		n := max(0, (d+step-1)/step)
		a.slots, a.owned = make([]*Window, n), make([]bool, n)
	} else {
		a.byStart, a.sOwned = map[time.Time]*Window{}, map[time.Time]bool{}
	}
	return a
}

// slot is the slot of the window starting at ws (a multiple of step), -1 outside.
func (a *seriesWindows) slot(ws time.Time) int {
	if ws.Before(a.base) || !ws.Before(a.to) {
		return -1
	}
	return int(ws.Sub(a.base) / a.step)
}

// get is the window starting at ws (nil: none) and whether it was made here.
func (a *seriesWindows) get(ws time.Time) (*Window, bool) {
	if a.slots == nil {
		return a.byStart[ws], a.sOwned[ws]
	}
	if i := a.slot(ws); i >= 0 {
		return a.slots[i], a.owned[i]
	}
	return nil, false
}

// set makes w the window starting at ws (within the windows), made here if owned.
func (a *seriesWindows) set(ws time.Time, w *Window, owned bool) {
	if a.slots == nil {
		a.byStart[ws], a.sOwned[ws] = w, owned
		return
	}
	i := a.slot(ws)
	a.slots[i], a.owned[i] = w, owned
}

// within reports whether the window starting at ws is one of the windows.
func (a *seriesWindows) within(ws time.Time) bool {
	return !ws.Before(a.base) && ws.Before(a.to)
}

// windows are the windows held, oldest first.
func (a *seriesWindows) windows() iter.Seq[*Window] {
	return func(yield func(*Window) bool) {
		if a.slots == nil {
			for _, ws := range slices.SortedFunc(maps.Keys(a.byStart), time.Time.Compare) {
				if !yield(a.byStart[ws]) {
					return
				}
			}
			return
		}
		for _, w := range a.slots {
			if w != nil && !yield(w) {
				return
			}
		}
	}
}

// own returns the window starting at ws, made here (a borrowed one is copied first); nil
// outside the windows.
func (a *seriesWindows) own(ws time.Time) *Window {
	if !a.within(ws) {
		return nil
	}
	w, owned := a.get(ws)
	if w != nil && owned {
		return w
	}
	nw := newWindow(ws, a.accuracy)
	if w != nil {
		_ = nw.merge(*w) // of the same accuracy: the borrowed window was merged once already
	}
	a.set(ws, nw, true)
	return nw
}

// mergeTier merges a tier window (without its histograms: they merge in time order, apart).
func (a *seriesWindows) mergeTier(tw *Window) error {
	if tw.Count == 0 && tw.NaNs == 0 {
		return nil
	}
	ws := rounding.Floor(tw.Start, a.step)
	if !a.within(ws) {
		return nil
	}
	c := tw
	if tw.hist != nil {
		c = new(Window)
		*c = *tw
		c.hist = nil
	}
	if w, _ := a.get(ws); w == nil && ws.Equal(tw.Start) {
		// Decoded for this read alone, at the database's accuracy (as a.own makes them).
		a.set(ws, c, false)
		return nil
	}
	return a.own(ws).merge(*c)
}

// add adds a raw point.
func (a *seriesWindows) add(t time.Time, v float64) {
	if w := a.own(rounding.Floor(t, a.step)); w != nil {
		w.add(t, v)
	}
}

// histogramNames are the names that may hold histogram samples: those valid for the keys of
// histogram tables (a float series' name may be too long for them, and then has none).
func (tr *Tiers) histogramNames(names []string) []string {
	return slices.DeleteFunc(slices.Clone(names), func(s string) bool { return tr.reads.CheckHistSeries(s) != nil })
}
