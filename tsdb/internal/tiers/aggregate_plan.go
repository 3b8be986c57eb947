package tiers

import (
	"context"
	"time"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/sketchenc"
	"github.com/seed71701133/tablets/rounding"
	"github.com/seed71701133/tablets/tsdb/internal/naming"
	"github.com/seed71701133/tablets/tsdb/internal/staging"
	"github.com/seed71701133/tablets/tsdb/internal/tables"
	"github.com/seed71701133/tablets/tsdb/internal/times"
)

// tierPlan is where the windows of each series of an Aggregate come from: the tier windows
// it uses, and the ranges it reads raw (disjoint, in order).
type tierPlan struct {
	tier map[string][]*Window
	raw  map[string][][2]time.Time
}

// tierFor is the coarsest tier whose Step divides step.
func (tr *Tiers) tierFor(step time.Duration) (Tier, bool) {
	for i := len(tr.cfg.Tiers) - 1; i >= 0; i-- {
		if t := tr.cfg.Tiers[i]; step%t.Step == 0 {
			return t, true
		}
	}
	return Tier{}, false
}

// planTier reads the dirty markers and the tier blocks of names (sorted, distinct) for an
// Aggregate of step over [from, to) with fields f, and decides, window by window, which tier
// windows to use and what to read raw (staged: the staged points and histogram samples).
func (tr *Tiers) planTier(ctx context.Context, names []string, from, to time.Time, step time.Duration, f Fields,
	staged map[string][]tablets.Point, stagedHists map[string][]tablets.HistogramPoint) (*tierPlan, error) {
	plan := &tierPlan{tier: map[string][]*Window{}, raw: map[string][][2]time.Time{}}
	tier, ok := tr.tierFor(step)
	var cl, ch time.Time
	if ok {
		cl, ch = ceilTime(from, tier.Step), floorTime(to, tier.Step)
	}
	if !ok || !cl.Before(ch) {
		for _, s := range names {
			plan.raw[s] = [][2]time.Time{{from, to}}
		}
		return plan, nil
	}
	// The dirty markers before the blocks: a Rollup that recomputes a dirty slice writes
	// its block before it deletes the marker, so either the marker or the new block is read.
	slice := tr.Slice()
	of := make(map[string]bool, len(names))
	for _, s := range names {
		of[s] = true
	}
	dirty, err := tr.readDirtyOf(ctx, times.FloorSec(times.Unix(cl), slice), times.Unix(ch), of)
	if err != nil {
		return nil, err
	}
	blocks, err := tr.readTierBlocks(ctx, names, tier, times.Unix(cl), times.Unix(ch), f.columns())
	if err != nil {
		return nil, err
	}
	pl := &planner{tier: tier, first: cl, f: f, slice: slice, dirty: dirty, staged: staged, stagedHists: stagedHists,
		gone: &goneRaw{periods: tr.periods, period: tr.names.PeriodOf}, noSketch: sketchenc.New(tr.cfg.Accuracy)}
	n := int(ch.Sub(cl) / tier.Step)
	for _, s := range names {
		c := newCover(n)
		c.needExact = f&FieldExact != 0
		for _, b := range blocks[s] {
			c.add(b, cl)
		}
		raws := appendRange(nil, [2]time.Time{from, cl})
		for i := range n {
			w, trusted, err := pl.window(ctx, s, c, i)
			if err != nil {
				return nil, err
			}
			switch {
			case !trusted:
				ws := cl.Add(time.Duration(i) * tier.Step)
				raws = appendRange(raws, [2]time.Time{ws, ws.Add(tier.Step)})
			case w != nil:
				plan.tier[s] = append(plan.tier[s], w)
			}
		}
		plan.raw[s] = appendRange(raws, [2]time.Time{ch, to})
	}
	return plan, nil
}

// planner decides of each tier window of a read whether to use it.
type planner struct {
	tier        Tier
	first       time.Time // the first window's start
	f           Fields
	slice       time.Duration
	dirty       Markers
	staged      map[string][]tablets.Point
	stagedHists map[string][]tablets.HistogramPoint
	gone        *goneRaw
	noSketch    *sketchenc.Sketch // of the tier windows read without theirs: never added to
}

// window returns tier window i of series s as c holds it (nil: no points), and whether it is
// used (else its points are read raw).
func (pl *planner) window(ctx context.Context, s string, c *cover, i int) (*Window, bool, error) {
	ws := pl.first.Add(time.Duration(i) * pl.tier.Step)
	we := ws.Add(pl.tier.Step)
	w := c.windows[i]
	if w != nil && w.Count > 0 && w.sk == nil && pl.f&FieldQuantiles == 0 {
		w.sk = pl.noSketch
	}
	if !c.held[i] {
		return nil, false, nil
	}
	if !c.distrust[i] && !c.flagged[i] {
		_, marked := pl.dirty[dirtyKey{s, times.FloorSec(times.Unix(ws), pl.slice)}]
		if !marked && len(staging.PointsMerge.In(pl.staged[s], ws, we)) == 0 && len(staging.HistsMerge.In(pl.stagedHists[s], ws, we)) == 0 &&
			(w == nil || usable(w, pl.f)) {
			return w, true, nil
		}
	}
	// Where the raw points are gone, the tier's window is the last word.
	gone, err := pl.gone.at(ctx, ws, we)
	if err != nil || !gone {
		return nil, false, err
	}
	if w != nil && w.hist != nil && w.hist.kind == histTooLarge {
		tw := *w
		tw.hist = nil // stored without its histograms
		w = &tw
	}
	return w, true, nil
}

// usable reports whether a tier window holds what fields f need: its histograms unless
// too large, its sketch for the quantiles.
func usable(w *Window, f Fields) bool {
	if f&FieldHistograms != 0 && w.hist != nil && w.hist.kind == histTooLarge {
		return false
	}
	return f&FieldQuantiles == 0 || w.Count == 0 || w.sk != nil
}

// cover is what the blocks of one series say of the n tier windows of a read, by index.
type cover struct {
	windows []*Window
	held    []bool // a block holds the window (nil in windows: no points)
	sealed  []bool // the block it is taken from has it sealed
	// distrust: that block has it unsealed, or lacks its NaNs and Resets where needExact.
	distrust []bool
	flagged  []bool // a stale flag covers it (older versions' blocks)
	// needExact distrusts the windows of blocks that did not store NaNs and Resets.
	needExact bool
}

func newCover(n int) *cover {
	return &cover{windows: make([]*Window, n), held: make([]bool, n), sealed: make([]bool, n), distrust: make([]bool, n), flagged: make([]bool, n)}
}

// add notes the windows of b, the blocks being added in the order laid gives: a window
// replaces the one held unless it is unsealed there and that one sealed (replaces).
func (c *cover) add(b *tierBlock, first time.Time) {
	step := b.step
	off := int(times.At(b.start).Sub(first) / step) // index of b's first window
	if times.At(b.start).Before(first) {
		off = -int(first.Sub(times.At(b.start)) / step)
	}
	for i := range b.windows {
		j := off + i
		if j < 0 || j >= len(c.windows) {
			continue
		}
		if b.version == 0 {
			c.flagged[j] = true // a flag holds no window
			continue
		}
		if !replaces(c.held[j], c.sealed[j], b.sealed[i]) {
			continue
		}
		c.held[j], c.windows[j], c.sealed[j] = true, b.windows[i], b.sealed[i]
		c.distrust[j] = !b.sealed[i] || c.needExact && !b.exact
	}
}

// goneRaw knows where the raw points and histogram samples are gone: in a period known to
// be dropped, or, unless its table is known to this process, before the oldest raw or
// histogram table (dropped by Retain, or never written: as RawFrom, of the tables listed at
// most a minute ago; asked at most once an Aggregate, and only when a window the tier holds
// cannot be trusted).
type goneRaw struct {
	periods *tables.Periods
	period  func(time.Time) uint64 // the raw period holding a time
	asked   bool
	oldest  uint64 // the oldest period of a raw or histogram table
	any     bool   // there is such a table
	err     error
}

// at reports whether the raw points of [from, to) are gone.
func (g *goneRaw) at(ctx context.Context, from, to time.Time) (bool, error) {
	periods := []uint64{g.period(from), g.period(to.Add(-time.Nanosecond))}
	for _, p := range periods {
		if _, dropped := g.periods.Dropped.Get(p); !dropped && (g.periods.Known(naming.Raw, p) || g.periods.Known(naming.Hist, p)) {
			return false, nil // a table this process made or read: no request
		}
	}
	if !g.asked {
		g.asked = true
		for _, k := range []naming.Kind{naming.Raw, naming.Hist} {
			periods, err := g.periods.All(ctx, k) // one listing at most
			if err != nil {
				g.err = err
				break
			}
			if len(periods) > 0 && (!g.any || periods[0] < g.oldest) {
				g.oldest, g.any = periods[0], true
			}
		}
	}
	if g.err != nil {
		return false, g.err
	}
	for _, p := range periods {
		if _, dropped := g.periods.Dropped.Get(p); !dropped && g.any && p >= g.oldest {
			return false, nil
		}
	}
	return true, nil
}

// floorTime is t rounded down to a multiple of d (epoch-aligned); ceilTime up.
func floorTime(t time.Time, d time.Duration) time.Time { return rounding.Floor(t, d) }

func ceilTime(t time.Time, d time.Duration) time.Time {
	f := floorTime(t, d)
	if f.Before(t) {
		f = f.Add(d)
	}
	return f
}
