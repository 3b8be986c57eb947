package tiers

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/sketchenc"
)

// Window is the aggregate of the points of one series in one window of time: the unit of
// the rollup tiers.
//
// Count, Sum, Min, Max, First and Last are exact (Sum up to floating-point rounding, which
// depends on the order of the points); Min, Max, First and Last are 0 when Count is 0.
// Quantiles come from a DDSketch of a fixed relative accuracy: merging
// windows of the same accuracy is exact, as if the window had been built from all their
// points (Count, Min, Max, First, Last and the sketch's bins, Sum up to rounding).
//
// NaN and infinities:
//   - A NaN is not a sample: every NaN, Prometheus' staleness marker
//     (0x7ff0000000000002) and any other, is ignored, counted nowhere. This is the rule of
//     tablets.Downsample too (see tablets.Aggregation, "NaN"): a window and Downsample over
//     the same points aggregate the same points.
//   - ±Inf are samples: counted in Count, and in Min, Max, First, Last and Sum by IEEE 754
//     arithmetic (Sum, hence Mean, is NaN when a window holds both +Inf and -Inf). The
//     sketch counts them in a bin of their own past the largest finite one, so that the
//     quantiles whose rank falls on them are ±Inf, and the others are unaffected.
//   - The sketch counts as zeros the nonzero magnitudes below DDSketch's smallest indexable
//     value (about 2.3e-308: the subnormal numbers), so a quantile whose rank falls on them
//     is 0, or Min if Min > 0, or Max if Max < 0.
//
// Native histogram samples are counted apart from the points: Count, Sum, Min, Max, First,
// Last and the sketch are those of the float points only, and the Histogram fields those of
// the histogram samples (staleness markers are not samples). Histogram holds the
// observations made in the window, exactly, as one float histogram (hint GaugeType):
//   - of a counter histogram (hint other than GaugeType), its increase over the window:
//     the sum of the differences between its consecutive samples in the window, where a
//     sample that follows a counter reset (as Prometheus' DetectReset sees one: its hint, a
//     count going down, a change of bounds...) counts for itself; as Prometheus' increase()
//     over the window's samples, without extrapolation. A window of one sample observed
//     nothing: an empty histogram in the sample's layout. The increase from a window's last
//     sample to the next window's first is in neither (it depends on both): windows of a
//     step only a few sample intervals long miss that share of the observations, which
//     LastHistogram and the next window's FirstHistogram give.
//   - of a gauge histogram (hint GaugeType), the sum of its samples.
//
// The windows of several series add up. Histograms of different exponential schemas add at
// the smaller schema, of different zero thresholds at the larger one (exact: buckets are
// merged, never split). Histograms that no histogram adds up exactly (custom bounds that
// differ, or counter histograms with gauge histograms) leave Histogram nil and set
// HistogramConflict instead: the window never mixes them.
//
// A Window's sketch is shared by its copies: add and merge on one copy change the
// quantiles of all. The zero Window is empty, of the default accuracy (1%).
type Window struct {
	Start                      time.Time // epoch-aligned multiple of step
	Count                      uint64
	Sum, Min, Max, First, Last float64 // First/Last: the values of the earliest/latest point

	HistogramCount                uint64                  // histogram samples
	Histogram                     *tablets.FloatHistogram // observations made in the window; nil without histogram samples, or on a conflict
	HistogramConflict             bool                    // the histograms do not add up exactly: Histogram is nil
	FirstHistogram, LastHistogram tablets.HistogramPoint  // the earliest and latest histogram samples, as written

	// NaNs are the NaN samples other than Prometheus' staleness marker: not points (no
	// other field counts them), but a PromQL function over the raw samples sees them.
	NaNs uint64
	// Resets is the sum of the values that a smaller one follows, between consecutive
	// points in time order: PromQL's counter reset correction (the increase over the
	// window is Last - First + Resets). Of one series' points only; see ResetsKnown.
	Resets float64

	resetsUnknown bool              // points came out of time order, or a tier block did not store Resets
	firstT, lastT time.Time         // the times of First and Last
	sk            *sketchenc.Sketch // nil: empty, of the default accuracy
	hist          *histWindow       // nil: no histogram sample
}

// newWindow returns an empty window starting at start whose quantiles have relative
// accuracy accuracy: 0 for the default (1%), else in [1e-6, 1) (see CheckAccuracy); another
// accuracy panics.
func newWindow(start time.Time, accuracy float64) *Window {
	return &Window{Start: start, sk: sketchenc.New(accuracy)}
}

// accuracy is the relative accuracy of w's quantiles.
func (w *Window) accuracy() float64 {
	if w.sk == nil {
		return DefaultAccuracy
	}
	return w.sk.Accuracy()
}

// add adds the point (t, v) to w: First and Last are the values of the earliest and latest
// times; of points of the same time, the one added last. A NaN v is ignored.
func (w *Window) add(t time.Time, v float64) {
	if math.IsNaN(v) {
		if math.Float64bits(v) != StaleBits {
			w.NaNs++
		}
		return
	}
	if w.Count > 0 {
		switch {
		case !t.After(w.lastT):
			w.resetsUnknown = true
		case v < w.Last:
			w.Resets += w.Last
		}
	}
	if w.sk == nil {
		w.sk = sketchenc.New(DefaultAccuracy)
	}
	if w.Count == 0 {
		w.Min, w.Max, w.First, w.Last, w.firstT, w.lastT = v, v, v, v, t, t
	} else {
		w.Min, w.Max = min(w.Min, v), max(w.Max, v)
		if !t.After(w.firstT) {
			w.First, w.firstT = v, t
		}
		if !t.Before(w.lastT) {
			w.Last, w.lastT = v, t
		}
	}
	w.Count++
	w.Sum += v
	w.sk.Add(v)
}

// errAccuracy is wrapped by the error of merging windows of different accuracies.
var errAccuracy = errors.New("tsdb: windows of different accuracies")

// merge adds o's points to w, as if added after w's (on equal times, o's First and Last
// win), and o's histogram samples, as those of another series (see histWindow.join). Start is w's. Both must have the same accuracy, else merge returns an error wrapping
// errAccuracy and w is unchanged.
func (w *Window) merge(o Window) error {
	if w.sk != nil && o.sk != nil && !w.sk.SameMapping(o.sk) {
		return fmt.Errorf("%w: %g and %g", errAccuracy, w.accuracy(), o.accuracy())
	}
	if o.hist != nil {
		if w.hist == nil {
			h := *o.hist
			if h.obs != nil {
				h.obs = h.obs.clone()
			}
			w.hist = &h
		} else {
			w.hist.join(o.hist)
		}
	}
	w.NaNs += o.NaNs
	if o.Count == 0 {
		return nil
	}
	if o.sk == nil {
		return errors.New("tsdb: merging a window of points without a sketch")
	}
	switch {
	case w.Count == 0:
		w.Resets, w.resetsUnknown = o.Resets, o.resetsUnknown
	case o.firstT.After(w.lastT): // o's points follow w's: the reset between them too
		w.Resets += o.Resets
		if o.First < w.Last {
			w.Resets += w.Last
		}
		w.resetsUnknown = w.resetsUnknown || o.resetsUnknown
	default:
		w.resetsUnknown = true
	}
	if w.sk == nil {
		w.sk = sketchenc.New(o.sk.Accuracy())
	}
	w.sk.Merge(o.sk)
	if w.Count == 0 {
		w.Min, w.Max, w.First, w.Last, w.firstT, w.lastT = o.Min, o.Max, o.First, o.Last, o.firstT, o.lastT
	} else {
		w.Min, w.Max = min(w.Min, o.Min), max(w.Max, o.Max)
		if !o.firstT.After(w.firstT) {
			w.First, w.firstT = o.First, o.firstT
		}
		if !o.lastT.Before(w.lastT) {
			w.Last, w.lastT = o.Last, o.lastT
		}
	}
	w.Count += o.Count
	w.Sum += o.Sum
	return nil
}

// ResetsKnown reports whether Resets is known: the window's points were added in time
// order (or merged from windows that follow each other), and a tier block it was read from
// stored them.
func (w Window) ResetsKnown() bool { return !w.resetsUnknown }

// FirstTime and LastTime are the times of First and Last (zero when Count is 0).
func (w Window) FirstTime() time.Time { return w.firstT }

// LastTime is the time of Last.
func (w Window) LastTime() time.Time { return w.lastT }

// Mean is Sum/Count: NaN when Count is 0.
func (w Window) Mean() float64 {
	if w.Count == 0 {
		return math.NaN()
	}
	return w.Sum / float64(w.Count)
}

// Quantile returns the q-quantile of the window: of its histogram samples' observations if
// it holds only histogram samples (HistogramQuantile of Histogram, NaN on a conflict), of
// its points if it holds only points, NaN if it holds both (ask FloatQuantile or
// HistogramQuantile). It is NaN for an empty window or q not in [0, 1].
func (w Window) Quantile(q float64) float64 {
	switch {
	case w.HistogramCount == 0:
		return w.FloatQuantile(q)
	case w.Count > 0 || w.Histogram == nil || !(q >= 0 && q <= 1):
		return math.NaN()
	}
	return HistogramQuantile(q, w.Histogram)
}

// FloatQuantile returns the q-quantile of the window's points, q in [0, 1], within its relative
// accuracy: the value v of 0-based rank floor(q × (Count-1)) in ascending order, as a value
// v' in [Min, Max] with |v'-v| <= accuracy × |v| (the ranks 0 and Count-1 give Min and Max). It is NaN if Count
// is 0 or q is not in [0, 1]; ±Inf where the rank falls on an infinity.
func (w Window) FloatQuantile(q float64) float64 {
	if w.Count == 0 || w.sk == nil || !(q >= 0 && q <= 1) {
		return math.NaN()
	}
	r := uint64(math.Floor(q * float64(w.Count-1)))
	switch {
	case r == 0:
		return w.Min
	case r >= w.Count-1: // float64(Count-1) may round up
		return w.Max
	}
	// The exact quantile is in [Min, Max]: clamping only brings v closer.
	return min(max(w.sk.ValueAtRank(r), w.Min), w.Max)
}

// appendSketch appends the encoding of w's sketch to dst (docs/format.md, "Sketch").
func (w Window) appendSketch(dst []byte) []byte {
	if w.sk == nil {
		return sketchenc.New(DefaultAccuracy).Append(dst)
	}
	return w.sk.Append(dst)
}

// The accuracies of windows: a sketch's.
const DefaultAccuracy = sketchenc.DefaultAccuracy

// CheckAccuracy returns an error unless a is a valid relative accuracy: 0 (the default, 1%)
// or in [1e-6, 1).
func CheckAccuracy(a float64) error {
	if err := sketchenc.CheckAccuracy(a); err != nil {
		return fmt.Errorf("tsdb: %w", err)
	}
	return nil
}
