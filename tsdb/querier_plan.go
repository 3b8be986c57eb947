package tsdb

import (
	"context"
	"slices"
	"time"

	"github.com/seed71701133/tablets/filter"
	"github.com/seed71701133/tablets/internal/partkey"
	"github.com/seed71701133/tablets/rounding"
	"github.com/seed71701133/tablets/tsdb/internal/times"
)

// plan cuts the series of a Select into the units its pipeline reads, and counts the path
// it takes: a tier for the float series where one serves the hints and costs less than raw
// (or raw points are gone), raw points else.
func (q *Queryable) plan(ctx context.Context, entries []entry, hints *SelectHints, from, to time.Time) ([]unit, error) {
	floats := 0
	for _, e := range entries {
		if !e.hist {
			floats++
		}
	}
	c, err := q.choose(ctx, hints, from, to, floats)
	if err != nil {
		return nil, err
	}
	if c.estimated {
		q.estRaw.Add(uint64(c.est.raw))
		q.estTier.Add(uint64(c.est.tier))
	}
	if !c.tier {
		q.rawSelects.Add(1)
		if c.estimated {
			q.rawCheaper.Add(1)
		}
		return q.rawPlan(entries, from, to), nil
	}
	units := q.tierUnits(entries, from, to, c.t.Step, c.pick)
	if floats > 0 || len(entries) == 0 {
		q.tierSelects.Add(1)
		if c.rawGone {
			q.rawGone.Add(1)
		}
	} else {
		q.rawSelects.Add(1) // every series has histograms: all read raw
	}
	return units, nil
}

// rawPlan cuts the entries of a raw Select into batches. Those of a Select of at least
// two batches are cut in the order of their keys (the tables' order), each read by the
// range of keys it spans (chunks.WithKeyRange): tsdb's series keys are hashes, so a batch
// of a large selection is most of the series of its range, which one query of four
// comparisons reads, its pages up to 1,000 chunks, where the series' own clauses take a
// request per 13 to 15 series; and, BatchSize left to its default, a unit of float series
// holds as many batches as fill about half a page by the estimate
// (costModel.keyRangeBatch). A range that turns out sparse (a selection of
// a small part of a large database) gives itself up within a page. The Select then gives
// its series in labels' order once all are read. The estimate counts the range from where
// its raw samples begin as far as this process knows without a request (rawDataFrom: a
// 7-day panel over a database of a day holds a day of samples a series).
func (q *Queryable) rawPlan(entries []entry, from, to time.Time) []unit {
	if len(entries) < 2*q.opts.BatchSize {
		return rawUnits(entries, q.opts.BatchSize)
	}
	size := q.opts.BatchSize
	if q.growKeyRange && !slices.ContainsFunc(entries, func(e entry) bool { return e.hist }) {
		// Histogram series keep their batches: a decoded histogram sample is hundreds of
		// bytes, which the estimate's samples do not count.
		size = q.cost.keyRangeBatch(q.rawDataFrom(from, to), to, q.cost.rate.perSecond())
	}
	units := rawUnits(inKeyOrder(entries), size)
	for i := range units {
		units[i].keyRange = true
	}
	return units
}

// inKeyOrder returns entries sorted by each series' first PartitionKey (partkey.Compare,
// its key made once): the order of the raw and tier tables, in which a run of a large
// selection is most of the series of its range of keys.
func inKeyOrder(entries []entry) []entry {
	type keyed struct {
		key string
		e   entry
	}
	ks := make([]keyed, len(entries))
	for i, e := range entries {
		ks[i] = keyed{partkey.Begin(partkey.Escape(e.series)), e}
	}
	slices.SortFunc(ks, func(a, b keyed) int { return filter.CompareUTF16(a.key, b.key) })
	byKey := make([]entry, len(ks))
	for i, k := range ks {
		byKey[i] = k.e
	}
	return byKey
}

// rawDataFrom is where the raw samples of [from, to) begin, as far as this process knows
// without a request: an estimate's (rawPlan's units, the sample rate's observations). It
// is from, but where the range begins before the oldest raw table known to exist (then
// that table's start), and where the first period of the range with a table has a change
// log that, as last read, knows the hull of every change it had (changelog.State.Hull: its
// entity keeps it, or still records every change): then the first sample any of them
// touched, so that a 7-day panel over a database of a day is sized by the day, also in a
// raw period begun days before it. A period without changes holds no sample (a range of
// none: to); one whose table is not known, or whose log was not read or knows no hull
// (written by an earlier version after more than 64 changes), may hold samples from its
// start.
func (q *Queryable) rawDataFrom(from, to time.Time) time.Time {
	names := q.db.names
	oldest, ok := q.db.tables.OldestKnown(rawKind)
	if !ok || !names.Start(oldest).Before(to) {
		return from // no table known of the range
	}
	for p := names.PeriodOf(times.Later(from, names.Start(oldest))); names.Start(p).Before(to); p = names.PeriodOf(names.End(p)) {
		s, ok := q.db.changes.Known(p)
		if !ok || !q.db.tables.Known(rawKind, p) {
			return times.Later(from, names.Start(p))
		}
		h, ok := s.Hull()
		switch {
		case !ok:
			return times.Later(from, names.Start(p))
		case h.From < h.To:
			return times.Earlier(to, times.Later(from, time.UnixMilli(h.From)))
		}
		// No change: its table holds no sample yet.
	}
	return to // no raw sample in the range
}

// choice is the path of a Select, and why.
type choice struct {
	tier      bool // read tier t
	t         Tier
	pick      pick
	estimated bool // a tier could serve the Select: est holds the estimates
	est       estimate
	rawGone   bool // the tier is read because raw points of the range are gone
}

// choose picks the path of a Select of [from, to) with hints over floats series of float
// samples: the tier selectTier picks (respecting MinTierStep) where the estimate of its bytes
// is under raw's; else, if the range starts before the oldest raw table, the tier tierPlan
// picks of any step; else raw.
func (q *Queryable) choose(ctx context.Context, hints *SelectHints, from, to time.Time, floats int) (choice, error) {
	if q.opts.DisableTiers {
		return choice{}, nil
	}
	tiers := q.db.opts.Tiers
	res := q.opts.MaxResolution
	if hints != nil && hints.MaxResolution != 0 {
		res = hints.MaxResolution
	}
	if q.opts.PreferTiers {
		res = AnyResolution
	}
	var c choice
	if t, p, ok := selectTier(tiers, hints, q.opts, false, res); ok {
		// No float series: what reads a tier reads raw (their histograms) anyway.
		if floats == 0 || q.opts.PreferTiers {
			return choice{tier: true, t: t, pick: p}, nil
		}
		rolledUp, err := q.rolledUp(ctx)
		if err != nil {
			return choice{}, err
		}
		dataFrom, err := q.estimateFrom(ctx, from, to)
		if err != nil {
			return choice{}, err
		}
		c = choice{t: t, pick: p, estimated: true, est: q.estimate(floats, t, p, dataFrom, to, rolledUp)}
		if c.est.tier < c.est.raw {
			c.tier = true
			return c, nil
		}
	}
	t, p, ok := selectTier(tiers, hints, q.opts, true, AnyResolution)
	if !ok {
		return c, nil
	}
	// Where the raw samples of the range are gone, any tier: there is no exact answer.
	if gone, err := q.rawGoneAt(ctx, from); err != nil || !gone {
		return c, err
	}
	c.tier, c.t, c.pick, c.rawGone = true, t, p, true
	return c, nil
}

// rawGoneAt reports whether raw samples at from may be gone: from is before the oldest raw
// table, and Retain dropped the period of a table at or after from (it drops the oldest
// first). Before the oldest raw table a period whose table was never made held no sample
// (a 7-day panel of a database of a day): raw answers it, exactly, where a tier's windows
// would be all its answer (the rollups of the samples raw holds, approximate).
func (q *Queryable) rawGoneAt(ctx context.Context, from time.Time) (bool, error) {
	rawFrom, haveRaw, err := q.db.RawFrom(ctx)
	if err != nil || (haveRaw && !from.Before(rawFrom)) {
		return false, err
	}
	kept, dropped, err := q.rawKeptFrom(ctx, rawFrom)
	return dropped && from.Before(kept), err
}

// estimateFrom is where the estimates of a read of [from, to), raw or of a tier's windows,
// count from: where its raw samples begin as far as this process knows (rawDataFrom: a
// 7-day read of a database of an hour estimates the hour, both ways), but from where
// Retain dropped raw samples of the range (a tier's windows are all there is there). It
// asks (rawGoneAt) only of a range that begins before the oldest raw table known.
func (q *Queryable) estimateFrom(ctx context.Context, from, to time.Time) (time.Time, error) {
	dataFrom := q.rawDataFrom(from, to)
	if !dataFrom.After(from) {
		return from, nil
	}
	if oldest, ok := q.db.tables.OldestKnown(rawKind); ok && !from.Before(q.db.names.Start(oldest)) {
		return dataFrom, nil
	}
	gone, err := q.rawGoneAt(ctx, from)
	if err != nil || gone {
		return from, err
	}
	return dataFrom, nil
}

// droppedRefresh is how long a Queryable keeps the latest raw period recorded dropped that
// it read, while the oldest raw table it knows of stays the same and no table it knew of
// was found gone: Retain drops the oldest tables, at most one a raw period.
const droppedRefresh = time.Minute

// rawKeptFrom is the start of the raw period after the latest one Retain dropped, and
// true; false if none was: the periods this process saw dropped, and the catalog's records
// (one query), read again after droppedRefresh, or as soon as the oldest raw table known
// (rawFrom, tables.Periods' listing) moved or a read found a table gone: another process's
// Retain then shows in the next plan, as the listing's table did before.
func (q *Queryable) rawKeptFrom(ctx context.Context, rawFrom time.Time) (time.Time, bool, error) {
	now := q.db.opts.Now()
	vanished := q.db.tables.Vanished.Load()
	q.dropped.mu.Lock()
	defer q.dropped.mu.Unlock()
	if q.dropped.read.IsZero() || now.Sub(q.dropped.read) >= droppedRefresh || now.Before(q.dropped.read) ||
		!rawFrom.Equal(q.dropped.rawFrom) || vanished != q.dropped.vanished {
		p, ok, err := q.db.tables.LatestDroppedRecorded(ctx)
		if err != nil {
			return time.Time{}, false, err
		}
		q.dropped.period, q.dropped.ok, q.dropped.read = p, ok, now
		q.dropped.rawFrom, q.dropped.vanished = rawFrom, vanished
	}
	latest, ok := q.dropped.period, q.dropped.ok
	if seen, seenOK := q.db.tables.LatestDroppedCached(); seenOK && (!ok || seen > latest) {
		latest, ok = seen, true
	}
	if !ok {
		return time.Time{}, false, nil
	}
	return q.db.names.End(latest), true, nil
}

// estimate is the cost of reading floats series' samples in [from, to) raw, and of their
// windows of tier t (the whole windows of the range, as tierUnits reads them) when the
// tiers are rolled up before rolledUp.
func (q *Queryable) estimate(floats int, t Tier, p pick, from, to, rolledUp time.Time) estimate {
	rate := q.cost.rate.perSecond()
	served := q.cost.servedBefore(q.db.opts.Now(), rolledUp)
	tfrom, tto := rounding.Floor(from, t.Step), rounding.Floor(to, t.Step)
	return estimate{
		raw:  q.cost.rawBytes(floats, from, to, rate),
		tier: q.cost.tierBytes(floats, t, p.fields(), tfrom, tto, served, rate),
	}
}

// rolledUpRefresh is how long a Queryable keeps the rollup progress it read: it only moves
// forward, so an older one makes the estimate of a tier read higher, never lower.
const rolledUpRefresh = time.Minute

// rolledUp is the time before which the tiers are rolled up, as the catalog's progress of
// the rollup loops says (TaskRollup; the zero time if none ran), read again after
// rolledUpRefresh.
func (q *Queryable) rolledUp(ctx context.Context) (time.Time, error) {
	now := q.db.opts.Now()
	q.rollup.mu.Lock()
	defer q.rollup.mu.Unlock()
	if !q.rollup.read.IsZero() && now.Sub(q.rollup.read) < rolledUpRefresh && !now.Before(q.rollup.read) {
		return q.rollup.covered, nil
	}
	covered, _, err := q.db.Tasks().Covered(ctx, TaskRollup)
	if err != nil {
		return time.Time{}, err
	}
	q.rollup.covered, q.rollup.read = covered, now
	return covered, nil
}

// pick is the value of a window a tier read returns.
type pick int

const (
	pickLast pick = iota
	pickMin
	pickMax
)

// fields are the fields of a window p needs.
func (p pick) fields() Fields {
	switch p {
	case pickMin:
		return FieldMin
	case pickMax:
		return FieldMax
	}
	return FieldLast
}

func (p pick) value(w Window) float64 {
	switch p {
	case pickMin:
		return w.Min
	case pickMax:
		return w.Max
	}
	return w.Last
}

// tierFactor is how many windows of a tier a step (and a range) must hold at least for a
// Select to read the tier: as Thanos picks a resolution of at most a fifth of the step. A
// range of five windows gives rate five samples, enough for its extrapolation.
const tierFactor = 5

// tierFuncs are the functions (hints.Func) whose answer a window's Min, Max or Last
// approximates. Last stands for the samples of the window: a counter's last value per
// window keeps rate and increase right (to the extrapolation at the range's ends), a
// gauge's keeps last_over_time, deriv and the instant selectors' value.
var tierFuncs = map[string]pick{
	"":               pickLast, // a plain selector, or one inside a binary operation
	"min_over_time":  pickMin,
	"max_over_time":  pickMax,
	"last_over_time": pickLast,
	"rate":           pickLast,
	"increase":       pickLast,
	"irate":          pickLast,
	"delta":          pickLast,
	"idelta":         pickLast,
	"resets":         pickLast,
	"changes":        pickLast,
	"deriv":          pickLast,
}

// aggregations are PromQL's aggregation operators: hints.Func of an instant selector right
// inside one (sum(x)), which sees the same sample at each step as a plain selector.
var aggregations = map[string]bool{
	"sum": true, "avg": true, "count": true, "min": true, "max": true, "group": true,
	"stddev": true, "stdvar": true, "topk": true, "bottomk": true, "count_values": true,
	"quantile": true, "limitk": true, "limit_ratio": true,
}

// selectTier picks the tier a Select may read, and what of its windows: the coarsest tier, of
// at least MinTierStep (any, where the raw points are gone), whose Step is at most a fifth
// of hints.Step and, for a range function, of hints.Range (else the range would hold too
// few windows); for an instant selector, under the lookback delta (else some steps would
// find no sample); and of at most maxStep. Functions a window cannot answer (count_over_time,
// sum_over_time, avg_over_time, quantiles, absent_over_time...) read raw.
func selectTier(tiers []Tier, hints *SelectHints, o QueryOptions, rawGone bool, maxStep time.Duration) (Tier, pick, bool) {
	if hints == nil || hints.Step <= 0 {
		return Tier{}, 0, false
	}
	p, ok := tierFuncs[hints.Func]
	if !ok && hints.Range == 0 && aggregations[hints.Func] {
		p, ok = pickLast, true
	}
	if !ok {
		return Tier{}, 0, false
	}
	step, rng := hints.Step, hints.Range
	lookback := hints.LookbackDelta
	if lookback <= 0 {
		lookback = defaultLookbackDelta
	}
	for i := len(tiers) - 1; i >= 0; i-- {
		t := tiers[i]
		if t.Step < o.MinTierStep && !rawGone {
			break // the finer ones too
		}
		if t.Step*tierFactor > step || t.Step > maxStep {
			continue
		}
		if hints.Range > 0 && t.Step*tierFactor > rng {
			continue
		}
		if hints.Range == 0 && t.Step >= lookback {
			continue
		}
		return t, p, true
	}
	return Tier{}, 0, false
}
