package promstore

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/util/annotations"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/rounding"
	"github.com/seed71701133/tablets/tsdb"
)

// entry is a series Select found: its key, its labels, and whether it has histogram
// samples in the range.
type entry struct {
	series string
	lset   labels.Labels
	hist   bool
}

// Select returns the series matching every matcher with their samples in the range (see
// the package documentation), sorted by labels whatever sortSeries says. hints.Limit
// bounds the series returned; hints.ShardCount and ShardIndex select a shard by
// labels.StableHash; hints.Func "series" returns labels only, reading no point. Matchers
// that all match "" (a selector of every series) give an error wrapping
// tablets.ErrInvalidMatcher, before any request. Reading goes on in the background ahead of
// Next: read the set to its end, or cancel ctx or Close the Querier.
func (qr *Querier) Select(ctx context.Context, _ bool, hints *storage.SelectHints, matchers ...*labels.Matcher) storage.SeriesSet {
	if !selective(matchers) {
		return storage.ErrSeriesSet(fmt.Errorf("promstore: %w: %w", tablets.ErrInvalidMatcher, errNotSelective))
	}
	ms, err := MatchersToTSDB(matchers)
	if err != nil {
		return storage.ErrSeriesSet(err)
	}
	mint, maxt := qr.mint, qr.maxt
	if hints != nil {
		mint, maxt = hints.Start, hints.End
	}
	from, to, ok := timeRange(mint, maxt)
	if !ok {
		return storage.EmptySeriesSet()
	}
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(qr.ctx, cancel)
	done := func() { stop(); cancel() }

	var entries []entry
	for s, err := range qr.q.db.Select(ctx, from, to, ms...) {
		if err != nil {
			done()
			return storage.ErrSeriesSet(err)
		}
		lset := LabelsFromTSDB(s.Labels)
		if hints != nil && hints.ShardCount > 0 && labels.StableHash(lset)%hints.ShardCount != hints.ShardIndex {
			continue
		}
		entries = append(entries, entry{s.Series, lset, s.Histograms})
	}
	lim := 0
	if hints != nil && hints.Limit > 0 {
		lim = hints.Limit
	}

	q := qr.q
	if hints != nil && hints.Func == "series" {
		// The series API wants labels only, as Prometheus' own TSDB gives them: no point is
		// read (a series is listed for the whole raw period its index covers).
		q.labelSelects.Add(1)
		done()
		out := make([]*memSeries, len(entries))
		for i, e := range entries {
			out[i] = &memSeries{lset: e.lset}
		}
		return newListSet(q, out, lim)
	}

	units, err := q.plan(ctx, entries, hints, from, to)
	if err != nil {
		done()
		return storage.ErrSeriesSet(err)
	}
	staged := newStagedGroups(q, units, from, to)
	fetch := func(ctx context.Context, i int) ([]*memSeries, error) {
		u := units[i]
		st, err := staged.acquire(ctx, i)
		if err != nil {
			return nil, err
		}
		defer staged.release(i)
		if u.tier {
			return q.readTier(ctx, u.entries, u.from, u.to, u.step, u.pick, st)
		}
		return q.readRaw(ctx, u.entries, from, to, st)
	}
	return newPipeline(ctx, done, q, len(units), q.opts.Concurrency, fetch, lim)
}

// plan cuts the series of a Select into the units its pipeline reads, and counts the path
// it takes: a tier for the float series where one serves the hints and costs less than raw
// (or raw points are gone), raw points else.
func (q *Queryable) plan(ctx context.Context, entries []entry, hints *storage.SelectHints, from, to time.Time) ([]unit, error) {
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
		return rawUnits(entries, q.opts.BatchSize), nil
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

// choice is the path of a Select, and why.
type choice struct {
	tier      bool // read tier t
	t         tsdb.Tier
	pick      pick
	estimated bool // a tier could serve the Select: est holds the estimates
	est       estimate
	rawGone   bool // the tier is read because raw points of the range are gone
}

// choose picks the path of a Select of [from, to) with hints over floats series of float
// samples: the tier tierPlan picks (respecting MinTierStep) where the estimate of its bytes
// is under raw's; else, if the range starts before the oldest raw table, the tier tierPlan
// picks of any step; else raw.
func (q *Queryable) choose(ctx context.Context, hints *storage.SelectHints, from, to time.Time, floats int) (choice, error) {
	if q.opts.DisableTiers {
		return choice{}, nil
	}
	tiers := q.db.Options().Tiers
	var c choice
	if t, p, ok := tierPlan(tiers, hints, q.opts, false); ok {
		// No float series: what reads a tier reads raw (their histograms) anyway.
		if floats == 0 || q.opts.PreferTiers {
			return choice{tier: true, t: t, pick: p}, nil
		}
		rolledUp, err := q.rolledUp(ctx)
		if err != nil {
			return choice{}, err
		}
		c = choice{t: t, pick: p, estimated: true, est: q.estimate(floats, t, p, from, to, rolledUp)}
		if c.est.tier < c.est.raw {
			c.tier = true
			return c, nil
		}
	}
	t, p, ok := tierPlan(tiers, hints, q.opts, true)
	if !ok {
		return c, nil
	}
	rawFrom, haveRaw, err := q.db.RawFrom(ctx)
	if err != nil {
		return choice{}, err
	}
	if haveRaw && !from.Before(rawFrom) {
		return c, nil
	}
	c.tier, c.t, c.pick, c.rawGone = true, t, p, true
	return c, nil
}

// estimate is the cost of reading floats series' samples in [from, to) raw, and of their
// windows of tier t (the whole windows of the range, as tierUnits reads them) when the
// tiers are rolled up before rolledUp.
func (q *Queryable) estimate(floats int, t tsdb.Tier, p pick, from, to, rolledUp time.Time) estimate {
	rate := q.cost.rate.perSecond()
	served := q.cost.servedBefore(q.db.Options().Now(), rolledUp)
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
// the rollup loops says (tsdb.TaskRollup; the zero time if none ran), read again after
// rolledUpRefresh.
func (q *Queryable) rolledUp(ctx context.Context) (time.Time, error) {
	now := q.db.Options().Now()
	q.rollup.mu.Lock()
	defer q.rollup.mu.Unlock()
	if !q.rollup.read.IsZero() && now.Sub(q.rollup.read) < rolledUpRefresh && !now.Before(q.rollup.read) {
		return q.rollup.covered, nil
	}
	covered, _, err := q.db.Covered(ctx, tsdb.TaskRollup)
	if err != nil {
		return time.Time{}, err
	}
	q.rollup.covered, q.rollup.read = covered, now
	return covered, nil
}

// unit is what one fetch of a Select's pipeline reads: a batch of series' raw samples, or
// their windows of a tier.
type unit struct {
	entries []entry
	tier    bool
	// Of a tier unit: the whole windows of step in [from, to), and what of them.
	from, to time.Time
	step     time.Duration
	pick     pick
}

// histogramWeight is what a series with histogram samples counts for in a raw batch of
// BatchSize series. Memory would want more: a decoded sample of a 20-bucket histogram
// holds about 330 bytes where a float takes one or two in an XOR chunk. Requests want
// fewer: each batch costs about three requests whatever its size (its histograms, and its
// floats from the staging and the raw table). Measured on 40 series of an hour of 20-bucket
// histograms every 15 s, at the default BatchSize: 15 requests at 4 (16 series a batch,
// about 1.3 MB decoded), 31 at 16, 9 with no weight (one batch).
const histogramWeight = 4

// rawUnits cuts entries, in their order, into raw batches of at most size series, a
// series with histograms counting as histogramWeight (a batch holds one series at least).
func rawUnits(entries []entry, size int) []unit {
	var units []unit
	start, weight := 0, 0
	for i, e := range entries {
		w := 1
		if e.hist {
			w = histogramWeight
		}
		if i > start && weight+w > size {
			units = append(units, unit{entries: entries[start:i]})
			start, weight = i, 0
		}
		weight += w
	}
	if start < len(entries) {
		units = append(units, unit{entries: entries[start:]})
	}
	return units
}

// tierUnits plans a tier Select: a unit per run of at most BatchSize consecutive series
// of float samples reads their whole windows of step; the series with histogram samples,
// which a window of floats cannot stand for (rate, histogram_quantile... of raw
// histograms), read raw, in batches of the consecutive ones, so that the order stays the
// labels'.
//
// Whole windows only: Aggregate reads a window cut by the range from raw points, a request
// or two per series and a whole raw chunk in the reply. from goes down to its window's
// start (the sample, at the window's end, is still in the range; a Min or Max may take a
// point up to a window before it); to goes down to its window's start, leaving out the
// points after the last whole window: those of every evaluation time but the last are left
// out just the same. Less than a window: no sample.
func (q *Queryable) tierUnits(entries []entry, from, to time.Time, step time.Duration, p pick) []unit {
	tfrom, tto := rounding.Floor(from, step), rounding.Floor(to, step)
	var units []unit
	for i := 0; i < len(entries); {
		j := i
		for j < len(entries) && entries[j].hist == entries[i].hist && (entries[i].hist || j-i < q.opts.BatchSize) {
			j++
		}
		switch {
		case entries[i].hist:
			q.histogramRawSeries.Add(uint64(j - i))
			units = append(units, rawUnits(entries[i:j], q.opts.BatchSize)...)
		case tfrom.Before(tto):
			units = append(units, unit{entries: entries[i:j], tier: true, from: tfrom, to: tto, step: step, pick: p})
		}
		i = j
	}
	return units
}

// readRaw reads the samples of a batch of series: the histograms of those that have some
// in one QueryManyHistograms, then the floats of all in one QueryMany (many series a
// request; with the staged points of staged, if not nil), and returns the series with
// samples, in the batch's order.
func (q *Queryable) readRaw(ctx context.Context, batch []entry, from, to time.Time, staged *tsdb.Staged) ([]*memSeries, error) {
	names := make([]string, len(batch))
	byName := make(map[string]*memSeries, len(batch))
	all := make([]*memSeries, len(batch))
	var withHist []string
	for i, e := range batch {
		names[i] = e.series
		all[i] = &memSeries{lset: e.lset}
		byName[e.series] = all[i]
		if e.hist {
			withHist = append(withHist, e.series)
		}
	}
	if len(withHist) > 0 {
		for p, err := range q.db.QueryManyHistograms(ctx, withHist, from, to) {
			if err != nil {
				return nil, err
			}
			if s := byName[p.Series]; s != nil {
				if err := s.appendHistogram(millis(p.Time), p.HistogramPoint); err != nil {
					return nil, fmt.Errorf("promstore: series %s: %w", p.Series, err)
				}
			}
		}
	}
	points := q.db.QueryMany(ctx, names, from, to)
	if staged != nil {
		points = q.db.QueryManyStaged(ctx, names, from, to, staged)
	}
	for p, err := range points {
		if err != nil {
			return nil, err
		}
		if s := byName[p.Series]; s != nil {
			s.append(millis(p.Time), p.Value)
		}
	}
	floats, floatSeries := 0, 0
	for i, s := range all {
		s.finish()
		if !batch[i].hist {
			floats += s.n
			floatSeries++
		}
	}
	q.cost.rate.observe(float64(floats), float64(floatSeries)*to.Sub(from).Seconds())
	return nonEmpty(all), nil
}

// readTier reads a batch of series' windows of step in [from, to) (whole windows) in one
// AggregateSeries, of the field p picks only, and makes a sample of each: at the window's
// last millisecond, of the value p picks. It returns the series with samples, in the
// batch's order. staged, if not nil, holds the batch's staged points.
func (q *Queryable) readTier(ctx context.Context, batch []entry, from, to time.Time, step time.Duration, p pick, staged *tsdb.Staged) ([]*memSeries, error) {
	names := make([]string, len(batch))
	byName := make(map[string]*memSeries, len(batch))
	all := make([]*memSeries, len(batch))
	for i, e := range batch {
		names[i] = e.series
		all[i] = &memSeries{lset: e.lset}
		byName[e.series] = all[i]
	}
	var points uint64
	for w, err := range q.db.AggregateSeries(ctx, names, from, to, step, &tsdb.AggregateOptions{Fields: p.fields(), Staged: staged}) {
		if err != nil {
			return nil, err
		}
		if s := byName[w.Series]; s != nil {
			s.append(millis(w.Start.Add(step))-1, p.value(w.Window))
			points += w.Count
		}
	}
	for _, s := range all {
		s.flush()
	}
	if points > 0 {
		q.cost.rate.observe(float64(points), float64(len(batch))*to.Sub(from).Seconds())
	}
	return nonEmpty(all), nil
}

func nonEmpty(all []*memSeries) []*memSeries {
	out := all[:0]
	for _, s := range all {
		if s.samples() > 0 {
			out = append(out, s)
		}
	}
	return out
}

// pick is the value of a window a tier read returns.
type pick int

const (
	pickLast pick = iota
	pickMin
	pickMax
)

// fields are the fields of a window p needs.
func (p pick) fields() tsdb.Fields {
	switch p {
	case pickMin:
		return tsdb.FieldMin
	case pickMax:
		return tsdb.FieldMax
	}
	return tsdb.FieldLast
}

func (p pick) value(w tsdb.Window) float64 {
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

// tierPlan picks the tier a Select may read, and what of its windows: the coarsest tier, of
// at least MinTierStep (any, where the raw points are gone), whose Step is at most a fifth
// of hints.Step and, for a range function, of hints.Range (else the range would hold too
// few windows); for an instant selector, under the lookback delta (else some steps would
// find no sample). Functions a window cannot answer (count_over_time,
// sum_over_time, avg_over_time, quantiles, absent_over_time...) read raw.
func tierPlan(tiers []tsdb.Tier, hints *storage.SelectHints, o Options, rawGone bool) (tsdb.Tier, pick, bool) {
	if hints == nil || hints.Step <= 0 {
		return tsdb.Tier{}, 0, false
	}
	p, ok := tierFuncs[hints.Func]
	if !ok && hints.Range == 0 && aggregations[hints.Func] {
		p, ok = pickLast, true
	}
	if !ok {
		return tsdb.Tier{}, 0, false
	}
	step := time.Duration(hints.Step) * time.Millisecond
	rng := time.Duration(hints.Range) * time.Millisecond
	for i := len(tiers) - 1; i >= 0; i-- {
		t := tiers[i]
		if t.Step < o.MinTierStep && !rawGone {
			break // the finer ones too
		}
		if t.Step*tierFactor > step {
			continue
		}
		if hints.Range > 0 && t.Step*tierFactor > rng {
			continue
		}
		if hints.Range == 0 && t.Step >= o.LookbackDelta {
			continue
		}
		return t, p, true
	}
	return tsdb.Tier{}, 0, false
}

// memSeries is a series and its samples, read whole. Floats are in Prometheus' XOR
// (Gorilla) chunks: lossless (float bits unchanged), a few bytes a sample, and their
// iterator is Prometheus' own. A series with histogram samples has them, and its floats,
// in one list by time instead (see histograms.go).
type memSeries struct {
	lset   labels.Labels
	chunks []*chunkenc.XORChunk
	app    chunkenc.Appender
	n      int // float samples, the pending one included

	pending bool // a sample waits for the next: a later one in its millisecond replaces it
	pendT   int64
	pendV   float64

	hists []mixedSample // histogram samples as read, times strictly ascending
	mixed []mixedSample // after finish, for a series with histograms: all its samples
	nh    int           // histogram samples, of mixed
}

// maxChunkSamples keeps a chunk's count (16 bits) from overflowing.
const maxChunkSamples = 1 << 15

// append adds a float sample, times ascending. Two points in one millisecond (a layout
// finer than Prometheus' milliseconds) give one sample, the later's value: Prometheus needs
// times strictly ascending. Call flush after the last (finish, if the series may have
// histograms).
func (s *memSeries) append(t int64, v float64) {
	if s.pending {
		if t <= s.pendT {
			if t == s.pendT {
				s.pendV = v
			}
			return
		}
		s.flush()
	}
	s.pending, s.pendT, s.pendV = true, t, v
	s.n++
}

// flush appends the pending sample to the chunks.
func (s *memSeries) flush() {
	if !s.pending {
		return
	}
	s.pending = false
	if len(s.chunks) == 0 || s.chunks[len(s.chunks)-1].NumSamples() >= maxChunkSamples {
		c := chunkenc.NewXORChunk()
		app, err := c.Appender()
		if err != nil {
			panic(err) // a new chunk always has an appender
		}
		s.chunks, s.app = append(s.chunks, c), app
	}
	s.app.Append(s.pendT, s.pendV)
}

func (s *memSeries) Labels() labels.Labels { return s.lset }

func (s *memSeries) Iterator(it chunkenc.Iterator) chunkenc.Iterator {
	if s.mixed != nil {
		return newMixedIterator(s.mixed)
	}
	return s.floatIterator(it)
}

// floatIterator iterates over the float samples.
func (s *memSeries) floatIterator(it chunkenc.Iterator) chunkenc.Iterator {
	switch len(s.chunks) {
	case 0:
		return chunkenc.NewNopIterator()
	case 1:
		return s.chunks[0].Iterator(it)
	}
	its := make([]chunkenc.Iterator, len(s.chunks))
	for i, c := range s.chunks {
		its[i] = c.Iterator(nil)
	}
	return storage.ChainSampleIteratorFromIterators(it, its)
}

// unitResult is what reading one unit (a raw batch, or a series' tier windows) gave.
type unitResult struct {
	series []*memSeries
	err    error
	token  bool // its reading held a token, which taking it frees
}

// seriesSet hands out the series of units read in order. A unit is read once a token is
// free; the consumer frees one as it takes a unit's series: at most Concurrency units are
// being read or wait, whatever the consumer's pace.
type seriesSet struct {
	q       *Queryable
	results []chan unitResult // one per unit, buffered: a reader never blocks
	tokens  chan struct{}
	done    func() // cancels what is still being read
	next    int    // the unit to take next

	cur     []*memSeries
	i       int
	at      *memSeries
	limit   int // 0: none
	emitted int
	err     error
}

func newPipeline(ctx context.Context, done func(), q *Queryable, units, concurrency int, fetch func(context.Context, int) ([]*memSeries, error), limit int) *seriesSet {
	s := &seriesSet{q: q, results: make([]chan unitResult, units), tokens: make(chan struct{}, concurrency), done: done, limit: limit}
	for i := range s.results {
		s.results[i] = make(chan unitResult, 1)
	}
	if units == 0 {
		done()
		return s
	}
	go func() {
		for i := range units {
			select {
			case s.tokens <- struct{}{}:
			case <-ctx.Done():
				for j := i; j < units; j++ {
					s.results[j] <- unitResult{err: ctx.Err()}
				}
				return
			}
			go func() {
				r, err := fetch(ctx, i)
				s.results[i] <- unitResult{r, err, true}
			}()
		}
	}()
	return s
}

// newListSet is a set of series already read.
func newListSet(q *Queryable, series []*memSeries, limit int) *seriesSet {
	return &seriesSet{q: q, cur: series, done: func() {}, limit: limit}
}

func (s *seriesSet) Next() bool {
	if s.err != nil {
		return false
	}
	for {
		if s.limit > 0 && s.emitted >= s.limit {
			s.done()
			return false
		}
		if s.i < len(s.cur) {
			s.at = s.cur[s.i]
			s.cur[s.i] = nil // the caller keeps it if it wants it
			s.i++
			s.emitted++
			s.q.series.Add(1)
			s.q.samples.Add(uint64(s.at.samples()))
			s.q.histograms.Add(uint64(s.at.nh))
			return true
		}
		if s.next == len(s.results) {
			s.done()
			return false
		}
		r := <-s.results[s.next]
		s.next++
		if r.token {
			<-s.tokens
		}
		if r.err != nil {
			s.err = r.err
			s.done()
			return false
		}
		s.cur, s.i = r.series, 0
	}
}

func (s *seriesSet) At() storage.Series                { return s.at }
func (s *seriesSet) Err() error                        { return s.err }
func (s *seriesSet) Warnings() annotations.Annotations { return nil }
