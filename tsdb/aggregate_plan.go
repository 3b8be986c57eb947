package tsdb

import (
	"context"
	"time"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/sketchenc"
	"github.com/seed71701133/tablets/rounding"
)

// tierPlan is where the windows of each series of an Aggregate come from: the tier windows
// it uses, and the ranges it reads raw (disjoint, in order).
type tierPlan struct {
	tier map[string][]*Window
	raw  map[string][][2]time.Time
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

// planTier reads the tier blocks of names (sorted, distinct) for an Aggregate of step over
// [from, to) with fields f, and the dirty markers, and decides, window by window, which tier
// windows to use and what to read raw (staged: the staged points and histogram samples).
func (db *DB) planTier(ctx context.Context, names []string, from, to time.Time, step time.Duration, f Fields,
	staged map[string][]tablets.Point, stagedHists map[string][]HistogramPoint) (*tierPlan, error) {
	plan := &tierPlan{tier: map[string][]*Window{}, raw: map[string][][2]time.Time{}}
	tier, ok := db.tierFor(step)
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
	blocks, err := db.readTierBlocks(ctx, names, tier, unix(cl), unix(ch), f.columns())
	if err != nil {
		return nil, err
	}
	slice := db.slice()
	dirty, err := db.readDirty(ctx, floorSec(unix(cl), slice), unix(ch))
	if err != nil {
		return nil, err
	}
	gone := &goneRaw{db: db}
	noSketch := sketchenc.New(db.opts.Accuracy) // of tier windows read without theirs: never added to
	n := int(ch.Sub(cl) / tier.Step)
	for _, s := range names {
		c := newCover(n)
		for _, b := range blocks[s] {
			c.add(b, cl)
		}
		raws := [][2]time.Time{{from, cl}}
		for i := range n {
			ws := cl.Add(time.Duration(i) * tier.Step)
			we := ws.Add(tier.Step)
			w := c.windows[i]
			if w != nil && w.Count > 0 && w.sk == nil && f&FieldQuantiles == 0 {
				w.sk = noSketch
			}
			trusted := c.held[i] && !c.distrust[i]
			if trusted {
				_, marked := dirty[dirtyKey{s, floorSec(unix(ws), slice)}]
				trusted = !marked && len(pointsIn(staged[s], ws, we)) == 0 && len(histsIn(stagedHists[s], ws, we)) == 0 &&
					(w == nil || usable(w, f))
			}
			if !trusted && c.held[i] {
				// Where the raw points are gone, the tier's window is the last word.
				g, err := gone.at(ctx, ws, we)
				if err != nil {
					return nil, err
				}
				trusted = g
				if g && w != nil && w.hist != nil && w.hist.kind == histTooLarge {
					tw := *w
					tw.hist = nil
					w = &tw
				}
			}
			switch {
			case !trusted:
				raws = append(raws, [2]time.Time{ws, we})
			case w != nil:
				plan.tier[s] = append(plan.tier[s], w)
			}
		}
		plan.raw[s] = mergeRanges(append(raws, [2]time.Time{ch, to}))
	}
	return plan, nil
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
	windows  []*Window
	held     []bool // a block holds the window (nil in windows: no points)
	distrust []bool // a block covering it is not sealed there, or a flag says stale
}

func newCover(n int) *cover {
	return &cover{windows: make([]*Window, n), held: make([]bool, n), distrust: make([]bool, n)}
}

// add notes the windows of b: a row block or flag before a columnar block of the same
// windows, whose windows replace its.
func (c *cover) add(b *tierBlock, first time.Time) {
	step := b.step
	off := int(at(b.start).Sub(first) / step) // index of b's first window
	if at(b.start).Before(first) {
		off = -int(first.Sub(at(b.start)) / step)
	}
	for i := range b.windows {
		j := off + i
		if j < 0 || j >= len(c.windows) {
			continue
		}
		if !b.sealed[i] {
			c.distrust[j] = true
		}
		if b.version == 0 {
			continue // a flag holds no window
		}
		c.held[j], c.windows[j] = true, b.windows[i]
	}
}

// goneRaw knows where the raw points and histogram samples are gone: before the oldest
// raw or histogram table (dropped by Retain, or never written: as RawFrom, of the tables
// listed at most a minute ago; asked at most once an Aggregate, and only when a window the
// tier holds cannot be trusted), or in a period known to be dropped.
type goneRaw struct {
	db     *DB
	asked  bool
	oldest uint64 // the oldest period of a raw or histogram table
	any    bool   // there is such a table
	err    error
}

// at reports whether the raw points of [from, to) are gone.
func (g *goneRaw) at(ctx context.Context, from, to time.Time) (bool, error) {
	if !g.asked {
		g.asked = true
		for _, k := range []tableKind{rawKind, histKind} {
			periods, err := g.db.tables.all(ctx, k) // one listing at most
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
	for _, p := range []uint64{g.db.period(from), g.db.period(to.Add(-time.Nanosecond))} {
		if _, dropped := g.db.tables.dropped.get(p); !dropped && g.any && p >= g.oldest {
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
