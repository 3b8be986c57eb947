package tiers

import (
	"fmt"
	"time"

	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/internal/blockenc"
	"github.com/seed71701133/tablets/internal/sketchenc"
)

// Tier is a rollup tier: windows of Step, aggregated from the raw points, kept in one table
// per Period.
type Tier struct {
	Step      time.Duration // window length: whole seconds; a multiple of the previous tier's Step
	Period    time.Duration // span of one table of the tier; 0: 7 days for steps under an hour, else 364 days
	Retention time.Duration // Retain drops the tier's tables whose whole span is older; 0: keep forever
}

// DefaultTiers are a minute kept 400 days and an hour kept forever.
var DefaultTiers = []Tier{{Step: time.Minute, Retention: 400 * 24 * time.Hour}, {Step: time.Hour}}

// blockWindows is the number of windows of a tier block (docs/format.md, "Tier blocks"):
// at an hour a block is a day; at a minute, 24 minutes.
const blockWindows = blockenc.Windows

// DefaultSealDelay is how long after its end a window is sealed (see tsdb.Options.SealDelay).
const DefaultSealDelay = time.Hour

// SealMargin is the clock skew between processes that sealing tolerates: a Write flags the
// blocks of points older than SealDelay minus this.
const SealMargin = 5 * time.Minute

// CheckTiers validates the tiers (already defaulted) and fills in their periods.
func CheckTiers(tiers []Tier) ([]Tier, error) {
	out := make([]Tier, len(tiers))
	for i, t := range tiers {
		if t.Step < time.Second || t.Step%time.Second != 0 {
			return nil, fmt.Errorf("tier %d: Step %v is not a whole number of seconds", i, t.Step)
		}
		if i > 0 && t.Step%out[i-1].Step != 0 {
			return nil, fmt.Errorf("tier %d: Step %v is not a multiple of the previous tier's %v", i, t.Step, out[i-1].Step)
		}
		if t.Period == 0 {
			t.Period = 7 * 24 * time.Hour
			if t.Step >= time.Hour {
				t.Period = 364 * 24 * time.Hour
			}
		}
		if block := t.Step * blockWindows; t.Period < block || t.Period%block != 0 {
			return nil, fmt.Errorf("tier %d: Period %v is not a multiple of a block (%d windows of %v)", i, t.Period, blockWindows, t.Step)
		}
		if t.Retention < 0 {
			return nil, fmt.Errorf("tier %d: Retention %v is negative", i, t.Retention)
		}
		out[i] = t
	}
	return out, nil
}

// TierTable is the name of the table of tier t's period starting at p (Unix seconds).
func (tr *Tiers) TierTable(t Tier, p uint64) string {
	return tr.names.TierTable(t.Step, p)
}

// blockKey is the RowKey of the block starting at Unix second s.
func blockKey(s uint64) string { return blockenc.Key(s) }

// block is a block entity's content (docs/format.md, "Tier blocks"): windows of points, nil
// where a window has none.
type block struct {
	start   uint64 // Unix seconds
	rolled  float64
	stale   bool
	windows [blockWindows]*Window // nil: no points, no histogram samples
}

// appendBlock appends the entity of b (series, tier step).
func appendBlock(dst []byte, series string, step time.Duration, b *block) []byte {
	eb := blockenc.Block{Start: b.start, Rolled: b.rolled}
	for i, w := range b.windows {
		if w != nil && w.hist != nil {
			eb.Histograms[i] = appendHistWindow(nil, w.hist, w.Start)
		}
		if w == nil || w.Count == 0 {
			continue
		}
		sk := w.sk
		if sk == nil {
			sk = sketchenc.New(DefaultAccuracy)
		}
		eb.Windows[i] = &blockenc.Window{Count: w.Count, Sum: w.Sum, Min: w.Min, Max: w.Max, First: w.First, Last: w.Last,
			FirstAt: w.firstT.Sub(w.Start), LastAt: w.lastT.Sub(w.Start), Sketch: sk}
	}
	return blockenc.Append(dst, series, &eb)
}

// decodeBlock reads a block entity (decoded with AllowStrings) of a tier of step, at the
// given accuracy. A block that only holds S (flagged by an older version's Write, never
// rolled up) decodes as stale.
func decodeBlock(e *entity.Entity, step time.Duration, accuracy float64) (*block, error) {
	eb, err := blockenc.Decode(e, step, accuracy)
	if err != nil {
		return nil, err
	}
	b := &block{start: eb.Start, rolled: eb.Rolled, stale: eb.Stale}
	blockStart := time.Unix(int64(eb.Start), 0).UTC()
	for i, w := range eb.Windows {
		if w == nil {
			continue
		}
		ws := blockStart.Add(time.Duration(i) * step)
		b.windows[i] = &Window{Start: ws, Count: w.Count, Sum: w.Sum, Min: w.Min, Max: w.Max, First: w.First, Last: w.Last,
			firstT: ws.Add(w.FirstAt), lastT: ws.Add(w.LastAt), sk: w.Sketch}
	}
	for i, enc := range eb.Histograms {
		if enc == nil {
			continue
		}
		ws := blockStart.Add(time.Duration(i) * step)
		h, err := decodeHistWindow(enc, ws, step)
		if err != nil {
			return nil, &entity.DecodeError{PartitionKey: string(e.PartitionKey), RowKey: string(e.RowKey), Reason: fmt.Sprintf("window %d: %v", i, err)}
		}
		if b.windows[i] == nil {
			b.windows[i] = &Window{Start: ws, sk: sketchenc.New(accuracy)}
		}
		b.windows[i].hist = h
	}
	return b, nil
}

// appendStale returns the merge body that flags the block of series starting at start stale.
func appendStale(series string, start uint64) []byte { return blockenc.AppendStale(nil, series, start) }
