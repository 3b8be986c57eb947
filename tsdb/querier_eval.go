package tsdb

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"math"
	"slices"
	"time"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/chunks"
	"github.com/seed71701133/tablets/rounding"
	"github.com/seed71701133/tablets/tsdb/internal/tiers"
)

// RangeFunction is a PromQL function of a range of a series' float samples that Evaluate
// computes as Prometheus 3 does: at a time t, of the samples in (t-Range, t].
type RangeFunction string

// The functions Evaluate computes: those whose answer over a run of tier windows is the
// answer over their samples (docs/tiers.md, "Exact answers").
const (
	FuncRate            RangeFunction = "rate"
	FuncIncrease        RangeFunction = "increase"
	FuncDelta           RangeFunction = "delta"
	FuncSumOverTime     RangeFunction = "sum_over_time"
	FuncCountOverTime   RangeFunction = "count_over_time"
	FuncAvgOverTime     RangeFunction = "avg_over_time"
	FuncMinOverTime     RangeFunction = "min_over_time"
	FuncMaxOverTime     RangeFunction = "max_over_time"
	FuncLastOverTime    RangeFunction = "last_over_time"
	FuncPresentOverTime RangeFunction = "present_over_time"
)

// Evaluable reports whether Evaluate computes f.
func (f RangeFunction) Evaluable() bool {
	_, ok := f.fields()
	return ok
}

// fields are the window fields f needs besides FieldExact (which brings First and Last).
func (f RangeFunction) fields() (Fields, bool) {
	switch f {
	case FuncRate, FuncIncrease, FuncDelta, FuncCountOverTime, FuncLastOverTime, FuncPresentOverTime:
		return 0, true
	case FuncSumOverTime, FuncAvgOverTime:
		return FieldSum, true
	case FuncMinOverTime:
		return FieldMin, true
	case FuncMaxOverTime:
		return FieldMax, true
	}
	return 0, false
}

// ErrNoExactTier is Evaluate's answer where no tier serves the evaluation (none whose Step
// divides the step, the range and the start; a series with histogram samples; tiers
// disabled) or where reading raw samples is estimated to cost less: the caller evaluates
// over Select's samples instead. It is not an error of the database.
var ErrNoExactTier = errors.New("tsdb: no tier answers the evaluation")

// Evaluation is what Evaluate computes: Function over (t-Range, t] at each step t = Start +
// k×Step up to End.
type Evaluation struct {
	Function   RangeFunction
	Range      time.Duration
	Start, End time.Time
	Step       time.Duration
}

// maxEvaluationSteps bounds the steps of an Evaluation (as Prometheus bounds a query's
// resolution at 11,000 points).
const maxEvaluationSteps = 11000

func (e *Evaluation) check() error {
	if _, ok := e.Function.fields(); !ok {
		return fmt.Errorf("%w: function %q is not one Evaluate computes", tablets.ErrInvalidOptions, e.Function)
	}
	switch {
	case e.Range <= 0 || e.Step <= 0:
		return fmt.Errorf("%w: range %v and step %v must be positive", tablets.ErrInvalidOptions, e.Range, e.Step)
	case e.End.Before(e.Start):
		return fmt.Errorf("%w: end %v before start %v", tablets.ErrInvalidOptions, e.End, e.Start)
	case e.End.Sub(e.Start)/e.Step >= maxEvaluationSteps:
		return fmt.Errorf("%w: more than %d steps", tablets.ErrInvalidOptions, maxEvaluationSteps)
	}
	return rounding.CheckRange(e.Start.Add(-e.Range), e.End.Add(time.Millisecond))
}

// exactTier is the coarsest tier whose windows tile every range of e: its Step divides
// e's Step, Range and Start (from the Unix epoch, as tier windows are laid out).
func exactTier(tiers []Tier, e *Evaluation) (Tier, bool) {
	for i := len(tiers) - 1; i >= 0; i-- {
		w := tiers[i].Step
		if w > 0 && e.Step%w == 0 && e.Range%w == 0 && e.Start.UnixMilli()%w.Milliseconds() == 0 && w%time.Millisecond == 0 {
			return tiers[i], true
		}
	}
	return Tier{}, false
}

// Evaluate computes e for each float series matching ms, in labels' order: the series'
// labels (as stored, the metric name included: PromQL's functions drop it, but for
// last_over_time) with a float sample at each step whose range holds what the function
// needs (two samples for rate, increase and delta, one for the others), of the value
// Prometheus' function gives over the same samples (within floating-point rounding: sums
// are added by window, then across).
//
// It reads the windows of the coarsest tier whose Step divides e's Step, Range and Start,
// where the estimate of their bytes is under a third of raw's (exactTierMargin; always with
// QueryOptions.PreferTiers or PreferExactTiers):
// a range (t-Range, t] is then exactly a run of windows, up to a sample on a window's
// first millisecond, which moves to the window before. Windows the tier cannot answer
// (unsealed, marked dirty, holding staged points) are computed from the raw points, as
// Aggregate does. A series whose windows cannot give the exact answer (a NaN sample, a
// block rolled up before blocks stored counter resets, a window holding several samples
// one of which is on its first millisecond) is computed from its raw samples instead.
//
// It returns ErrNoExactTier, before reading samples, where no tier serves e or raw is
// estimated cheaper (the caller then evaluates over Select), and an error wrapping
// tablets.ErrInvalidOptions for an invalid e. Series with histogram samples make it
// return ErrNoExactTier: the functions of histograms are the engine's.
func (qr *Querier) Evaluate(ctx context.Context, e *Evaluation, ms ...Matcher) (iter.Seq2[*Series, error], error) {
	q := qr.q
	if err := e.check(); err != nil {
		return nil, err
	}
	if q.opts.DisableTiers {
		return nil, ErrNoExactTier
	}
	tier, ok := exactTier(q.db.opts.Tiers, e)
	if !ok {
		return nil, ErrNoExactTier
	}
	from, to := e.Start.Add(-e.Range), e.End.Add(time.Millisecond) // the samples of (from, End]
	var entries []entry
	for s, err := range q.db.Select(ctx, from, to, ms...) {
		if err != nil {
			return nil, err
		}
		if s.Histograms {
			return nil, ErrNoExactTier
		}
		if err := s.Invalid(); err != nil {
			return nil, fmt.Errorf("tsdb: %w", err)
		}
		entries = append(entries, entry{s.Series, s.Labels, false, len(entries)})
	}
	fields, _ := e.Function.fields()
	fields |= FieldExact | FieldFirst | FieldLast
	if !q.opts.PreferTiers && !q.opts.PreferExactTiers && len(entries) > 0 {
		rolledUp, err := q.rolledUp(ctx)
		if err != nil {
			return nil, err
		}
		dataFrom, err := q.estimateFrom(ctx, from, to)
		if err != nil {
			return nil, err
		}
		rate := q.cost.rate.perSecond()
		raw := q.cost.rawBytes(len(entries), dataFrom, to, rate)
		tb := q.cost.tierBytes(len(entries), tier, fields, dataFrom, rounding.Floor(e.End, tier.Step).Add(tier.Step), q.cost.servedBefore(q.db.opts.Now(), rolledUp), rate)
		if !(tb*exactTierMargin < raw) {
			q.exactRawCheaper.Add(1)
			return nil, ErrNoExactTier
		}
	}
	q.exactEvaluations.Add(1)
	return func(yield func(*Series, error) bool) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		size, concurrency := exactBatches(e, tier, q.opts.Concurrency, q.exactLimit)
		// Many series: batches in key order, each read by the range of keys it spans (as a
		// Select's, rawPlan), and the series given in labels' order once all are computed.
		keyOrdered := len(entries) >= 2*q.opts.BatchSize
		if keyOrdered {
			entries = inKeyOrder(entries)
		}
		var all []*Series
		give := func(s *Series) bool {
			q.series.Add(1)
			q.samples.Add(uint64(s.n))
			return yield(s, nil)
		}
		batches := (len(entries) + size - 1) / size
		fetch := func(ctx context.Context, i int) ([]*Series, error) {
			batch := entries[i*size : min((i+1)*size, len(entries))]
			return q.evaluateBatch(ctx, e, tier, fields, batch, keyOrdered)
		}
		for out, err := range readAhead(ctx, batches, concurrency, fetch) {
			if err != nil {
				yield(nil, err)
				return
			}
			if keyOrdered {
				all = append(all, out...)
				continue
			}
			for _, s := range out {
				if !give(s) {
					return
				}
			}
		}
		slices.SortFunc(all, func(a, b *Series) int { return cmp.Compare(a.rank, b.rank) }) // labels' order
		for _, s := range all {
			if !give(s) {
				return
			}
		}
	}, nil
}

// exactTierMargin is how much cheaper than raw the estimate of a tier's windows must be for
// Evaluate to read them. The estimate's sample rate is one figure for every series (a blend
// of what reads returned): a series sampled once a minute, taken for one every 15 s, holds
// one sample a minute window, not four, and then costs more in the windows' three or four
// columns than raw (issue 36's dashboard: 9.7 MB against 1.9). With the margin, the minute
// tier serves series sampled a few times a second or more, the hour tier series sampled
// about once a minute or more: where the windows are cheaper whatever the estimate's error.
const exactTierMargin = 3

// exactBatches is how many series one read of windows asks for, and how many such reads
// an Evaluate runs at once (at most concurrency, QueryOptions.Concurrency): a read asks
// for at most l.series series, and so many that their windows (a few hundred bytes each,
// decoded) number at most l.windows; and the reads under way hold at most l.windows
// together. By default a 7-day range of the minute tier (10,080 windows a series) reads 24
// series at a time, one read at once; an hour's range of it (60 windows and a few) 256
// series a read, 4 at once over 1,024 series or more. The batches are not cut smaller to
// run more of them: each costs a request or more a table whatever its size.
func exactBatches(e *Evaluation, tier Tier, concurrency int, l exactLimit) (size, atOnce int) {
	n := int(e.End.Sub(e.Start.Add(-e.Range))/tier.Step) + 1
	size = max(1, min(l.series, l.windows/n))
	return size, max(1, min(concurrency, l.windows/(size*n)))
}

// exactLimit bounds an Evaluate's reads: the windows they hold at once, the series a read.
type exactLimit struct{ windows, series int }

// defaultExactLimit: about 50 MB of windows.
var defaultExactLimit = exactLimit{windows: 250_000, series: 256}

// evaluateBatch computes e for a batch of series from tier's windows, and from the raw
// samples of the series whose windows cannot give it exactly. A batch in keyRange is a run
// of a large selection in key order: the raw points of its windows the tier cannot give
// are read by the range of its keys.
func (q *Queryable) evaluateBatch(ctx context.Context, e *Evaluation, tier Tier, fields Fields, batch []entry, keyRange bool) ([]*Series, error) {
	w := tier.Step
	from := e.Start.Add(-e.Range)
	n := int(e.End.Sub(from)/w) + 1 // windows [from + i×w, +w), the last holding End's first millisecond
	names := make([]string, len(batch))
	wins := make(map[string][]*Window, len(batch))
	for i, en := range batch {
		names[i] = en.series
		wins[en.series] = make([]*Window, n)
	}
	opts := &AggregateOptions{Fields: fields}
	actx := ctx
	if keyRange {
		actx = chunks.WithKeyRange(ctx) // not the fallback's: a few series of the run
	}
	for sw, err := range q.db.tiers.AggregateBySeries(actx, names, from, from.Add(time.Duration(n)*w), w, opts) {
		if err != nil {
			return nil, err
		}
		if ws := wins[sw.Series]; ws != nil {
			if i := int(sw.Start.Sub(from) / w); i >= 0 && i < n {
				win := sw.Window
				ws[i] = &win
			}
		}
	}
	out := make([]*Series, 0, len(batch))
	var fallback []entry
	for _, en := range batch {
		spans, ok := leftOpenSpans(wins[en.series], from, w, e.Function)
		if !ok {
			fallback = append(fallback, en)
			continue
		}
		s := &Series{Series: en.series, Labels: en.labels, rank: en.rank}
		evalSpans(e, spans, from, w, s)
		s.finish()
		if s.n > 0 {
			out = append(out, s)
		}
	}
	if len(fallback) > 0 {
		q.exactRawSeries.Add(uint64(len(fallback)))
		raw, err := q.readRaw(ctx, fallback, from, e.End.Add(time.Millisecond), nil, nil, false)
		if err != nil {
			return nil, err
		}
		for _, rs := range raw {
			s := &Series{Series: rs.Series, Labels: rs.Labels, rank: rs.rank}
			evalSamples(e, rs, s)
			s.finish()
			if s.n > 0 {
				out = append(out, s)
			}
		}
		slices.SortFunc(out, func(a, b *Series) int { return cmp.Compare(a.rank, b.rank) }) // labels' order
	}
	return out, nil
}

// span is what the functions need of a run of samples, in time order.
type span struct {
	n             uint64
	sum, c        float64 // Kahan: sum and compensation
	min, max      float64
	first, last   float64
	firstT, lastT int64 // Unix milliseconds
	resets        float64
}

// kahanSumInc is Prometheus' (promql/functions.go).
func kahanSumInc(inc, sum, c float64) (newSum, newC float64) {
	t := sum + inc
	switch {
	case math.IsInf(t, 0):
		c = 0
	case math.Abs(sum) >= math.Abs(inc):
		c += (sum - t) + inc
	default:
		c += (inc - t) + sum
	}
	return t, c
}

// then is a followed by b: the samples of both, b's after a's. Comparisons are PromQL's
// (a NaN max is replaced, a reset is a value below the one before), so that a span built a
// sample at a time computes what Prometheus does over the same samples.
func (a span) then(b span) span {
	switch {
	case a.n == 0:
		return b
	case b.n == 0:
		return a
	}
	r := a
	r.n += b.n
	r.sum, r.c = kahanSumInc(b.sum, a.sum, a.c+b.c)
	if b.min < r.min || math.IsNaN(r.min) {
		r.min = b.min
	}
	if b.max > r.max || math.IsNaN(r.max) {
		r.max = b.max
	}
	r.resets += b.resets
	if b.first < a.last {
		r.resets += a.last
	}
	r.last, r.lastT = b.last, b.lastT
	return r
}

func pointSpan(t int64, v float64) span {
	return span{n: 1, sum: v, min: v, max: v, first: v, last: v, firstT: t, lastT: t}
}

func windowSpan(w *Window) span {
	if w == nil || w.Count == 0 {
		return span{}
	}
	return span{n: w.Count, sum: w.Sum, min: w.Min, max: w.Max, first: w.First, last: w.Last,
		firstT: w.FirstTime().UnixMilli(), lastT: w.LastTime().UnixMilli(), resets: w.Resets}
}

// leftOpenSpans turns the windows [from + i×w, +w) of a series (wins, len n; nil: no
// points) into the spans of (from + i×w, +w], i < n-1: a sample on a window's first
// millisecond moves to the window before. It reports false where the windows cannot give
// them exactly: a NaN sample (its time is unknown), unknown resets (for the functions
// that need them), or a window whose first millisecond holds one of several samples (the
// one after it is unknown).
func leftOpenSpans(wins []*Window, from time.Time, w time.Duration, f RangeFunction) ([]span, bool) {
	counter := f == FuncRate || f == FuncIncrease
	n := len(wins)
	spans := make([]span, n-1)
	for i := range n {
		win := wins[i]
		if win == nil {
			continue
		}
		if win.NaNs > 0 || counter && !win.ResetsKnown() {
			return nil, false
		}
		if win.Count == 0 {
			continue
		}
		start := from.Add(time.Duration(i) * w)
		onStart := win.FirstTime().Equal(start)
		if onStart && i > 0 {
			spans[i-1] = spans[i-1].then(pointSpan(start.UnixMilli(), win.First))
		}
		if i == n-1 {
			break
		}
		switch {
		case !onStart:
			spans[i] = windowSpan(win)
		case win.Count > 1:
			return nil, false
		}
	}
	return spans, true
}

// evalSpans computes e from the spans of (from + i×w, +w] into s.
func evalSpans(e *Evaluation, spans []span, from time.Time, w time.Duration, s *Series) {
	per := int(e.Range / w)
	for t := e.Start; !t.After(e.End); t = t.Add(e.Step) {
		last := int(t.Sub(from) / w) // spans [last-per, last)
		var sp span
		for i := last - per; i < last; i++ {
			sp = sp.then(spans[i])
		}
		if v, ok := apply(e, sp, t); ok {
			s.appendFloat(t.UnixMilli(), v)
		}
	}
}

// evalSamples computes e from a series' raw samples into s.
func evalSamples(e *Evaluation, rs *Series, s *Series) {
	var ts []int64
	var vs []float64
	it := rs.Iterator()
	for it.Next() {
		smp := it.At()
		if smp.IsHistogram() || math.Float64bits(smp.F) == tiers.StaleBits {
			continue
		}
		ts, vs = append(ts, smp.T), append(vs, smp.F)
	}
	lo := 0
	for t := e.Start; !t.After(e.End); t = t.Add(e.Step) {
		start, end := t.Add(-e.Range).UnixMilli(), t.UnixMilli()
		for lo < len(ts) && ts[lo] <= start {
			lo++
		}
		var sp span
		for i := lo; i < len(ts) && ts[i] <= end; i++ {
			sp = sp.then(pointSpan(ts[i], vs[i]))
		}
		if v, ok := apply(e, sp, t); ok {
			s.appendFloat(end, v)
		}
	}
}

// apply is e's function over the samples of sp, the range ending at t, as Prometheus'
// (promql/functions.go: extrapolatedRate, the *_over_time functions).
func apply(e *Evaluation, sp span, t time.Time) (float64, bool) {
	if sp.n == 0 {
		return 0, false
	}
	switch e.Function {
	case FuncRate, FuncIncrease, FuncDelta:
		return extrapolatedRate(e, sp, t)
	case FuncSumOverTime:
		if math.IsInf(sp.sum, 0) {
			return sp.sum, true
		}
		return sp.sum + sp.c, true
	case FuncCountOverTime:
		return float64(sp.n), true
	case FuncAvgOverTime:
		if sp.n == 1 {
			return sp.sum, true
		}
		return sp.sum/float64(sp.n) + sp.c/float64(sp.n), true
	case FuncMinOverTime:
		return sp.min, true
	case FuncMaxOverTime:
		return sp.max, true
	case FuncLastOverTime:
		return sp.last, true
	case FuncPresentOverTime:
		return 1, true
	}
	return 0, false
}

// extrapolatedRate is Prometheus' for floats.
func extrapolatedRate(e *Evaluation, sp span, t time.Time) (float64, bool) {
	if sp.n < 2 {
		return 0, false
	}
	isCounter := e.Function != FuncDelta
	rangeStart, rangeEnd := t.Add(-e.Range).UnixMilli(), t.UnixMilli()
	result := sp.last - sp.first
	if isCounter {
		result += sp.resets
	}
	durationToStart := float64(sp.firstT-rangeStart) / 1000
	durationToEnd := float64(rangeEnd-sp.lastT) / 1000
	sampledInterval := float64(sp.lastT-sp.firstT) / 1000
	averageDurationBetweenSamples := sampledInterval / float64(sp.n-1)
	extrapolationThreshold := averageDurationBetweenSamples * 1.1
	extrapolateToInterval := sampledInterval
	if durationToStart >= extrapolationThreshold {
		durationToStart = averageDurationBetweenSamples / 2
	}
	if isCounter && result > 0 && sp.first >= 0 {
		if durationToZero := sampledInterval * (sp.first / result); durationToZero < durationToStart {
			durationToStart = durationToZero
		}
	}
	extrapolateToInterval += durationToStart
	if durationToEnd >= extrapolationThreshold {
		durationToEnd = averageDurationBetweenSamples / 2
	}
	extrapolateToInterval += durationToEnd
	factor := extrapolateToInterval / sampledInterval
	if e.Function == FuncRate {
		factor /= e.Range.Seconds()
	}
	return result * factor, true
}
