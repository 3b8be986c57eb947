package tiers

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/batch"
	"github.com/seed71701133/tablets/rounding"
	"github.com/seed71701133/tablets/tsdb/internal/naming"
	"github.com/seed71701133/tablets/tsdb/internal/staging"
	"github.com/seed71701133/tablets/tsdb/internal/times"
)

// maxRollupAttempts bounds the attempts at a series whose blocks keep changing.
const maxRollupAttempts = 20

func ceilSec(s uint64, d time.Duration) uint64 {
	n := uint64(d / time.Second)
	return (s + n - 1) / n * n
}

func (t Tier) block() time.Duration { return t.Step * blockWindows }

// tierPeriod is the start of tier t's table period holding Unix second s.
func tierPeriod(t Tier, s uint64) uint64 { return times.FloorSec(s, t.Period) }

// Rollup is DB.Rollup.
func (tr *Tiers) Rollup(ctx context.Context, from, to time.Time) error {
	if err := rounding.CheckRange(from, to); err != nil {
		return err
	}
	tiers := tr.cfg.Tiers
	if len(tiers) == 0 || !from.Before(to) {
		return nil
	}
	span := tiers[len(tiers)-1].block()
	lo := times.FloorSec(times.Unix(from), span)
	hi := ceilSec(times.Unix(to.Add(-time.Nanosecond))+1, span)
	if kept, ok, err := tr.periods.OldestKeptPeriod(ctx, lo, tr.cfg.RawRetention, SealMargin); err != nil {
		return err
	} else if ok {
		// A block reaching into a period Retain may have dropped would be recomputed from
		// the points that remain, and lose its windows there: they are the last word.
		lo = max(lo, ceilSec(kept, span))
	}
	if lo >= hi {
		return nil
	}
	from = times.Later(from, times.At(lo))
	if from.After(times.At(lo)) || to.Before(times.At(hi)) {
		// Part of a slice, as the maintenance loop rolls up the windows sealed since its
		// last run: a late point's marker may be for a window outside the range, so the
		// markers stay for RollupFlagged, which rolls up their whole slices.
		return tr.rollupRange(ctx, lo, hi, from, to)
	}
	// The dirty markers of the range, read before the raw points: once every series is
	// rolled up they are cleared, but a marker written since (a later late point) stays.
	dirty, err := tr.ReadDirty(ctx, lo, hi)
	if err != nil {
		return err
	}
	if err := tr.rollupRange(ctx, lo, hi, from, to); err != nil {
		return err
	}
	_, err = tr.DeleteDirty(ctx, dirty)
	return err
}

// rollupRange is Rollup of [from, to) within [lo, hi) (Unix seconds, whole slices).
func (tr *Tiers) rollupRange(ctx context.Context, lo, hi uint64, from, to time.Time) error {
	names, err := tr.rollupNames(ctx, times.At(lo), times.Earlier(times.At(hi), tablets.MaxTime))
	if err != nil || len(names) == 0 {
		return err
	}
	if scanned, err := tr.scanRollup(ctx, names, lo, hi, from, to); scanned || err != nil {
		return err
	}
	w := tr.windowsToRoll(from, to, lo, hi, tr.now())
	if w.none() {
		return nil
	}
	for _, series := range names {
		if err := tr.rollupSeries(ctx, series, w); err != nil {
			return fmt.Errorf("tsdb: rollup %q: %w", series, err)
		}
	}
	return nil
}

// rollupWindows are the windows a rollup computes and writes: per tier, those of [lo, hi)
// (Unix seconds, multiples of the tier's step; lo == hi: none), and the time whose raw
// points they need, the hull of those spans.
type rollupWindows struct {
	tiers  [][2]uint64
	lo, hi uint64
	// splice: every tier's windows are spliced into their blocks, none written as a tail
	// (a series rolled up by itself, after a batched write of its tail failed).
	splice bool
}

// tails says, per tier, whether its windows are written as a tail (writesTail).
func (tr *Tiers) tails(w rollupWindows) []bool {
	out := make([]bool, len(tr.cfg.Tiers))
	for i, t := range tr.cfg.Tiers {
		lo, hi := w.tiers[i][0], w.tiers[i][1]
		out[i] = !w.splice && lo < hi && tr.writesTail(t, lo, hi)
	}
	return out
}

func (w rollupWindows) none() bool { return w.lo >= w.hi }

// wholeWindows are every window of [lo, hi) (whole slices), in every tier.
func (tr *Tiers) wholeWindows(lo, hi uint64) rollupWindows {
	w := rollupWindows{tiers: make([][2]uint64, len(tr.cfg.Tiers)), lo: lo, hi: hi}
	for i := range w.tiers {
		w.tiers[i] = [2]uint64{lo, hi}
	}
	return w
}

// windowsToRoll are the windows of [lo, hi) (whole slices) that a rollup of [from, to) writes at
// now: in each tier, those within [from, to), and those it only overlaps if they are
// sealed. A window it overlaps that is not sealed yet is written by the rollup of the range
// that holds its end: the maintenance loop's ranges follow each other and end the seal
// delay before now, so each window is computed once, when sealed, and a run writes only the
// blocks where a window sealed since the last (the minute tier's at every run, the hour
// tier's once an hour), from the raw points of those windows only (not the whole slice's).
func (tr *Tiers) windowsToRoll(from, to time.Time, lo, hi uint64, now time.Time) rollupWindows {
	sealBefore := times.Unix(now.Add(-tr.cfg.SealDelay))
	w := rollupWindows{tiers: make([][2]uint64, len(tr.cfg.Tiers)), lo: hi, hi: lo}
	for i, t := range tr.cfg.Tiers {
		step := uint64(t.Step / time.Second)
		a := max(lo, times.FloorSec(times.Unix(from), t.Step))
		b := min(hi, ceilSec(times.Unix(to.Add(-time.Nanosecond))+1, t.Step))
		if a < b && times.At(a).Before(from) && a+step > sealBefore {
			a += step // only overlapped, not sealed
		}
		if a < b && times.At(b).After(to) && b > sealBefore {
			b -= step
		}
		if a >= b {
			continue
		}
		w.tiers[i] = [2]uint64{a, b}
		w.lo, w.hi = min(w.lo, a), max(w.hi, b)
	}
	return w
}

// rollupNames lists the series with points or histogram samples in the periods [from, to)
// overlaps: Series', and those listed in the index of a period that has a histogram table
// but no raw table (histogram samples only).
func (tr *Tiers) rollupNames(ctx context.Context, from, to time.Time) ([]string, error) {
	names, err := tr.reads.Series(ctx, from, to)
	if err != nil {
		return nil, err
	}
	raw, err := tr.periods.Spans(ctx, naming.Raw, from, to)
	if err != nil {
		return nil, err
	}
	hist, err := tr.periods.Spans(ctx, naming.Hist, from, to)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, s := range names {
		seen[s] = true
	}
	for _, h := range hist {
		if slices.ContainsFunc(raw, func(r span) bool { return r.Period == h.Period }) {
			continue // Series read this period's index
		}
		listed, err := tr.reads.ListedIn(ctx, h.Period)
		if err != nil {
			return nil, err
		}
		for _, s := range listed {
			if !seen[s] {
				seen[s] = true
				names = append(names, s)
			}
		}
	}
	slices.Sort(names)
	return names, nil
}

// rollupSeries recomputes the windows w of one series: it reads the blocks stored where
// they lie, then the raw points and histogram samples of w, then writes the blocks that
// changed conditionally on what it read; a block changed meanwhile starts it again. It
// splices every tier's windows (no tail).
func (tr *Tiers) rollupSeries(ctx context.Context, series string, w rollupWindows) error {
	w.splice = true
	for range maxRollupAttempts {
		stored, err := tr.readSeriesBlocks(ctx, series, w)
		if err != nil {
			return err
		}
		pts, err := tr.readPoints(ctx, series, w.lo, w.hi)
		if err != nil {
			return err
		}
		hists, err := tr.readHistograms(ctx, series, w.lo, w.hi)
		if err != nil {
			return err
		}
		writes, err := tr.computeWrites(ctx, series, stored, pts, hists, w)
		if err == nil {
			err = tr.submitWrites(ctx, writes)
		}
		if !batch.IsConflict(err) {
			return err
		}
	}
	return fmt.Errorf("its blocks still changed after %d attempts", maxRollupAttempts)
}

// readPoints reads the points of series in [lo, hi) (Unix seconds), its staged ones merged
// in: DB.Query's read, of the parts the tiers are given.
func (tr *Tiers) readPoints(ctx context.Context, series string, lo, hi uint64) ([]tablets.Point, error) {
	var out []tablets.Point
	for p, err := range tr.reads.Points(ctx, series, times.At(lo), times.Earlier(times.At(hi), tablets.MaxTime)) {
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// readHistograms reads the histogram samples of series in [lo, hi) (Unix seconds).
func (tr *Tiers) readHistograms(ctx context.Context, series string, lo, hi uint64) ([]tablets.HistogramPoint, error) {
	if len(tr.histogramNames([]string{series})) == 0 {
		return nil, nil // a name no histogram table can hold
	}
	if exists, err := tr.histTablesIn(ctx, times.At(lo), times.Earlier(times.At(hi), tablets.MaxTime)); err != nil || !exists {
		return nil, err
	}
	// The staged samples first: a Fold that moves them meanwhile writes them into the tables
	// before deleting them, so none is missed.
	from, to := times.At(lo), times.Earlier(times.At(hi), tablets.MaxTime)
	_, staged, err := tr.reads.Staged(ctx, []string{series}, from, to, staging.Hists)
	if err != nil {
		return nil, err
	}
	var out []tablets.HistogramPoint
	for p, err := range tr.reads.Histograms(ctx, []string{series}, from, to, staged) {
		if err != nil {
			return nil, err
		}
		out = append(out, p.HistogramPoint)
	}
	return out, nil
}
