package tiers

import (
	"maps"
	"math"
	"slices"

	"github.com/seed71701133/tablets"
)

// StaleBits are the bits of Prometheus' staleness marker, a NaN: a histogram sample whose Sum
// has them marks the series stale and is not a sample.
const StaleBits = 0x7ff0000000000002

// isStaleHistogram says whether p is a staleness marker.
func isStaleHistogram(p tablets.HistogramPoint) bool {
	switch {
	case p.H != nil:
		return math.Float64bits(p.H.Sum) == StaleBits
	case p.FH != nil:
		return math.Float64bits(p.FH.Sum) == StaleBits
	}
	return true // no histogram: nothing to count
}

// isGaugeHistogram says whether p is a sample of a gauge histogram.
func isGaugeHistogram(p tablets.HistogramPoint) bool {
	if p.H != nil {
		return p.H.CounterResetHint == tablets.GaugeType
	}
	return p.FH.CounterResetHint == tablets.GaugeType
}

// dense is a histogram as absolute counts by bucket index: the form its arithmetic works in.
type dense struct {
	hint          tablets.CounterResetHint
	schema        int32
	zeroThreshold float64
	zeroCount     float64
	count, sum    float64
	pos, neg      map[int32]float64
	custom        []float64 // the bounds of CustomBucketsSchema
}

func (d *dense) isCustom() bool { return d.schema == tablets.CustomBucketsSchema }

// bucketIndexes calls f with the index of each bucket the spans describe, in order.
func bucketIndexes(spans []tablets.HistogramSpan, f func(i int, idx int32)) {
	var idx int32
	i := 0
	for n, s := range spans {
		if n == 0 {
			idx = s.Offset
		} else {
			idx += s.Offset
		}
		for range s.Length {
			f(i, idx)
			idx++
			i++
		}
	}
}

// denseOf returns the counts of p's histogram (not a staleness marker).
func denseOf(p tablets.HistogramPoint) *dense {
	d := &dense{pos: map[int32]float64{}, neg: map[int32]float64{}}
	if h := p.H; h != nil {
		d.hint, d.schema, d.zeroThreshold = h.CounterResetHint, h.Schema, h.ZeroThreshold
		d.zeroCount, d.count, d.sum, d.custom = float64(h.ZeroCount), float64(h.Count), h.Sum, slices.Clone(h.CustomValues)
		for side, buckets := range [][]int64{h.PositiveBuckets, h.NegativeBuckets} {
			spans, dst := h.PositiveSpans, d.pos
			if side == 1 {
				spans, dst = h.NegativeSpans, d.neg
			}
			var abs int64
			bucketIndexes(spans, func(i int, idx int32) {
				if i < len(buckets) {
					abs += buckets[i]
					dst[idx] += float64(abs)
				}
			})
		}
		return d
	}
	h := p.FH
	d.hint, d.schema, d.zeroThreshold = h.CounterResetHint, h.Schema, h.ZeroThreshold
	d.zeroCount, d.count, d.sum, d.custom = h.ZeroCount, h.Count, h.Sum, slices.Clone(h.CustomValues)
	for side, buckets := range [][]float64{h.PositiveBuckets, h.NegativeBuckets} {
		spans, dst := h.PositiveSpans, d.pos
		if side == 1 {
			spans, dst = h.NegativeSpans, d.neg
		}
		bucketIndexes(spans, func(i int, idx int32) {
			if i < len(buckets) {
				dst[idx] += buckets[i]
			}
		})
	}
	return d
}

func (d *dense) clone() *dense {
	c := *d
	c.pos, c.neg, c.custom = maps.Clone(d.pos), maps.Clone(d.neg), slices.Clone(d.custom)
	return &c
}

// floatHistogram returns d with the given hint: buckets of count 0 left out, spans joining
// consecutive indexes.
func (d *dense) floatHistogram(hint tablets.CounterResetHint) *tablets.FloatHistogram {
	fh := &tablets.FloatHistogram{CounterResetHint: hint, Schema: d.schema, ZeroThreshold: d.zeroThreshold,
		ZeroCount: d.zeroCount, Count: d.count, Sum: d.sum, CustomValues: slices.Clone(d.custom)}
	fh.PositiveSpans, fh.PositiveBuckets = spansOf(d.pos)
	fh.NegativeSpans, fh.NegativeBuckets = spansOf(d.neg)
	return fh
}

func spansOf(m map[int32]float64) ([]tablets.HistogramSpan, []float64) {
	var spans []tablets.HistogramSpan
	var buckets []float64
	var next int32 // the index after the last span's end
	for _, idx := range slices.Sorted(maps.Keys(m)) {
		c := m[idx]
		if c == 0 {
			continue
		}
		switch {
		case len(spans) == 0:
			spans = append(spans, tablets.HistogramSpan{Offset: idx, Length: 1})
		case idx == next:
			spans[len(spans)-1].Length++
		default:
			spans = append(spans, tablets.HistogramSpan{Offset: idx - next, Length: 1})
		}
		buckets = append(buckets, c)
		next = idx + 1
	}
	return spans, buckets
}

// upperBound is the upper bound of bucket idx of an exponential schema (Prometheus'
// getBoundExponential, with 2^(k/2^schema) computed instead of read from a table).
func upperBound(idx, schema int32) float64 {
	if schema < 0 {
		exp := int(idx) << -schema
		if exp == 1024 {
			return math.MaxFloat64 // the last finite bucket; the next counts ±Inf
		}
		return math.Ldexp(1, exp)
	}
	fracIdx := idx & ((1 << schema) - 1)
	frac := math.Exp2(float64(fracIdx)/float64(int32(1)<<schema)) / 2
	exp := (int(idx) >> schema) + 1
	if frac == 0.5 && exp == 1025 {
		return math.MaxFloat64
	}
	return math.Ldexp(frac, exp)
}

// bounds returns the lower and upper bound of bucket idx of d on the positive side (the
// negative side mirrors them).
func (d *dense) bounds(idx int32) (lo, hi float64) {
	if d.isCustom() {
		lo, hi = math.Inf(-1), math.Inf(1)
		if idx > 0 && int(idx) <= len(d.custom) {
			lo = d.custom[idx-1]
		}
		if idx >= 0 && int(idx) < len(d.custom) {
			hi = d.custom[idx]
		}
		return lo, hi
	}
	return upperBound(idx-1, d.schema), upperBound(idx, d.schema)
}

// reduce merges d's buckets into those of the smaller exponential schema s (exact: each
// bucket of s is a union of buckets of d's schema).
func (d *dense) reduce(s int32) {
	if d.isCustom() || s >= d.schema {
		return
	}
	for _, side := range []*map[int32]float64{&d.pos, &d.neg} {
		out := make(map[int32]float64, len(*side))
		for idx, c := range *side {
			out[((idx-1)>>(d.schema-s))+1] += c
		}
		*side = out
	}
	d.schema = s
}

// zeroFor returns d's zero count were its zero threshold raised to t, and the threshold it
// would take: t, or more where t falls inside a populated bucket (Prometheus'
// zeroCountForLargerThreshold).
func (d *dense) zeroFor(t float64) (float64, float64) {
	if t <= d.zeroThreshold {
		return d.zeroCount, d.zeroThreshold
	}
	for {
		raised := false
		count := d.zeroCount
		for _, side := range []map[int32]float64{d.pos, d.neg} {
			for _, idx := range slices.Sorted(maps.Keys(side)) {
				lo, hi := d.bounds(idx)
				if lo >= t {
					break
				}
				count += side[idx]
				if hi > t {
					if side[idx] != 0 {
						t, raised = hi, true
					}
					break
				}
			}
			if raised {
				break
			}
		}
		if !raised {
			return count, t
		}
	}
}

// raiseZero moves into the zero bucket the buckets at or under the threshold t (t >= d's, not
// inside a populated bucket: as zeroFor returns it).
func (d *dense) raiseZero(t float64) {
	if t <= d.zeroThreshold {
		return
	}
	for _, side := range []map[int32]float64{d.pos, d.neg} {
		for idx, c := range side {
			if _, hi := d.bounds(idx); hi <= t {
				d.zeroCount += c
				delete(side, idx)
			}
		}
	}
	d.zeroThreshold = t
}

// add adds o (times sign, 1 or -1) to d, as Prometheus' Add and Sub do: at the smaller schema
// and the larger zero threshold. Histograms of custom bounds add only to histograms of the
// same bounds: else add returns false and d is unchanged.
func (d *dense) add(o *dense, sign float64) bool {
	if d.isCustom() || o.isCustom() {
		if !d.isCustom() || !o.isCustom() || !slices.Equal(d.custom, o.custom) {
			return false
		}
	} else {
		o = o.clone()
		s := min(d.schema, o.schema)
		d.reduce(s)
		o.reduce(s)
		t := max(d.zeroThreshold, o.zeroThreshold)
		for {
			_, t1 := d.zeroFor(t)
			_, t2 := o.zeroFor(t1)
			if t2 == t || math.IsNaN(t2) { // NaN: a threshold no write accepts; never loop on it
				break
			}
			t = t2
		}
		d.raiseZero(t)
		o.raiseZero(t)
	}
	d.zeroCount += sign * o.zeroCount
	d.count += sign * o.count
	d.sum += sign * o.sum
	for idx, c := range o.pos {
		d.pos[idx] += sign * c
	}
	for idx, c := range o.neg {
		d.neg[idx] += sign * c
	}
	return true
}

// resetFrom says whether cur follows a counter reset after prev, as Prometheus'
// tablets.FloatHistogram.DetectReset decides: by cur's hint if it says so, else when a count goes
// down, the bounds or the zero bucket change in a way no increase makes, or the schema grows.
func (cur *dense) resetFrom(prev *dense) bool {
	switch cur.hint {
	case tablets.CounterReset:
		return true
	case tablets.NotCounterReset:
		return false
	}
	if cur.count < prev.count || cur.isCustom() != prev.isCustom() || (cur.isCustom() && !slices.Equal(cur.custom, prev.custom)) ||
		cur.schema > prev.schema || cur.zeroThreshold < prev.zeroThreshold {
		return true
	}
	p := prev.clone()
	z, t := p.zeroFor(cur.zeroThreshold)
	if t != cur.zeroThreshold || cur.zeroCount < z {
		return true
	}
	p.raiseZero(t)
	p.reduce(cur.schema)
	for _, sides := range [][2]map[int32]float64{{cur.pos, p.pos}, {cur.neg, p.neg}} {
		for idx, c := range sides[1] {
			if c != 0 && sides[0][idx] < c {
				return true
			}
		}
	}
	return false
}

// Kinds of histogram windows.
const (
	histCounter  = 0 // counter histograms: the window holds their increase
	histGauge    = 1 // gauge histograms: the window holds their sum
	histConflict = 2 // no exact histogram holds them all (see Window.HistogramConflict)
	histTooLarge = 3 // stored without its histograms (too large): read the raw samples
)

// histWindow is the aggregate of the histogram samples of one window: their count, the first
// and the last, and the observations made in the window (see Window.Histogram).
type histWindow struct {
	count       uint64
	kind        uint8
	first, last tablets.HistogramPoint
	obs         *dense // nil: none (a counter's single sample), or a conflict
}

// newHistWindow is the window of one sample p (not a staleness marker).
func newHistWindow(p tablets.HistogramPoint) *histWindow {
	w := &histWindow{count: 1, kind: histCounter, first: p, last: p}
	if isGaugeHistogram(p) {
		w.kind, w.obs = histGauge, denseOf(p)
	}
	return w
}

// addObs adds o to w's observations, or makes w a conflict.
func (w *histWindow) addObs(o *dense) {
	switch {
	case o == nil || w.kind == histConflict:
	case w.obs == nil:
		w.obs = o.clone()
	case !w.obs.add(o, 1):
		w.kind, w.obs = histConflict, nil
	}
}

// increase is the increase from sample prev to cur of a counter histogram: cur - prev, or
// cur after a reset.
func increase(prev, cur tablets.HistogramPoint) *dense {
	c, p := denseOf(cur), denseOf(prev)
	if c.resetFrom(p) || !c.add(p, -1) {
		return denseOf(cur)
	}
	return c
}

// follow adds the samples of o, all after w's, to w (same series): their increases chain.
func (w *histWindow) follow(o *histWindow) {
	w.count += o.count
	kind := w.kind
	if o.kind != kind || kind == histTooLarge { // callers read windows too large raw instead
		kind = histConflict
	}
	if kind == histConflict {
		w.obs = nil
	}
	w.kind = kind
	if kind == histCounter {
		w.addObs(increase(w.last, o.first))
	}
	w.addObs(o.obs)
	w.last = o.last
}

// join adds the window o of another series to w: their observations add up; on equal times
// the first and last samples are o's.
func (w *histWindow) join(o *histWindow) {
	w.count += o.count
	if w.kind != o.kind || w.kind == histTooLarge {
		w.kind, w.obs = histConflict, nil
	}
	w.addObs(o.obs)
	if !o.first.Time.After(w.first.Time) {
		w.first = o.first
	}
	if !o.last.Time.Before(w.last.Time) {
		w.last = o.last
	}
}

// histPieces chains the histogram windows of one series (disjoint in time, any order) into
// one.
func histPieces(pieces []*histWindow) *histWindow {
	if len(pieces) == 0 {
		return nil
	}
	slices.SortFunc(pieces, func(a, b *histWindow) int { return a.first.Time.Compare(b.first.Time) })
	w := *pieces[0]
	if w.obs != nil {
		w.obs = w.obs.clone()
	}
	for _, o := range pieces[1:] {
		w.follow(o)
	}
	return &w
}

// histWindowOf is the window of samples (oldest first) of one series: nil if all are
// staleness markers.
func histWindowOf(samples []tablets.HistogramPoint) *histWindow {
	var w *histWindow
	for _, p := range samples {
		if isStaleHistogram(p) {
			continue
		}
		if w == nil {
			w = newHistWindow(p)
		} else {
			w.follow(newHistWindow(p))
		}
	}
	return w
}

// setHistograms sets the histogram fields of a Window from h.
func (w *Window) setHistograms(h *histWindow) {
	w.hist = h
	w.HistogramCount, w.Histogram, w.HistogramConflict = 0, nil, false
	w.FirstHistogram, w.LastHistogram = tablets.HistogramPoint{}, tablets.HistogramPoint{}
	if h == nil {
		return
	}
	w.HistogramCount, w.FirstHistogram, w.LastHistogram = h.count, h.first, h.last
	switch {
	case h.kind == histConflict:
		w.HistogramConflict = true
	case h.obs != nil:
		w.Histogram = h.obs.floatHistogram(tablets.GaugeType)
	default: // a counter's single sample: nothing observed, in its layout
		d := denseOf(h.last)
		w.Histogram = (&dense{schema: d.schema, zeroThreshold: d.zeroThreshold, custom: d.custom}).floatHistogram(tablets.GaugeType)
	}
}
