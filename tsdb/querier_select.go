package tsdb

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"time"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/chunks"
	"github.com/seed71701133/tablets/rounding"
	"github.com/seed71701133/tablets/tsdb/internal/changelog"
	"github.com/seed71701133/tablets/tsdb/internal/raw"
	"github.com/seed71701133/tablets/tsdb/internal/staging"
	"github.com/seed71701133/tablets/tsdb/internal/tiers"
	"github.com/seed71701133/tablets/tsdb/internal/times"
)

// entry is a series a Select found: its key, its labels, and whether it has histogram
// samples in the range.
type entry struct {
	series string
	labels Labels
	hist   bool
	rank   int // in the Select's labels order (its entries', which Index.Select gives sorted)
}

// selectSeries is Querier.Select of [from, to).
func (q *Queryable) selectSeries(ctx context.Context, from, to time.Time, hints *SelectHints, ms []Matcher) iter.Seq2[*Series, error] {
	return func(yield func(*Series, error) bool) {
		if hints != nil && (!hints.Start.IsZero() || !hints.End.IsZero()) {
			// The engine has moved Start back by the range of a range selector, or the
			// lookback delta of an instant one: its range is the one to read, as
			// Prometheus' own TSDB reads it.
			if !hints.Start.IsZero() {
				from = times.Later(hints.Start, tablets.MinTime)
			}
			if !hints.End.IsZero() {
				to = times.Earlier(hints.End, tablets.MaxTime)
			}
		}
		if !from.Before(to) {
			return
		}
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		if (hints == nil || hints.Func != "series") && !changelog.IsSpeculative(ctx) {
			// The staging listing's refresh beside the series index's read, not after it.
			// (Not a speculative read's: it takes the listing and logs as they stand.)
			ctx = q.db.staging.StartListing(ctx)
			if began, ok := q.db.staging.ReadBegan(ctx); ok {
				// And the raw change log's read beside them: the raw reads take it when the
				// listing they go with allows (staging.Listing.LogAfter, as DB.ReadMark), else
				// read it again. A read mark that read it already leaves nothing to read, nor
				// do states read before while the logs' mark stands (LogsStill).
				need := began
				if still := q.db.staging.LogsStill(); still != 0 {
					need = min(need, still)
				}
				go func() { _, _ = changelog.StatesTogether(changelog.AfterRead(ctx, need), rawLogWants(q.db, from, to)) }()
			}
		}
		var entries []entry
		labelsOnly := hints != nil && hints.Func == "series"
		for s, err := range q.db.Select(ctx, from, to, ms...) {
			if err != nil {
				yield(nil, err)
				return
			}
			if hints != nil && hints.Keep != nil && !hints.Keep(s.Labels) {
				continue
			}
			if err := s.Invalid(); err != nil && !labelsOnly {
				// Before any read: a key the raw layout refuses (the index checked it).
				yield(nil, fmt.Errorf("tsdb: %w", err))
				return
			}
			entries = append(entries, entry{s.Series, s.Labels, s.Histograms, len(entries)})
		}
		limit := 0
		if hints != nil && hints.Limit > 0 {
			limit = hints.Limit
		}
		emitted := 0
		emit := func(s *Series) bool {
			if limit > 0 && emitted >= limit {
				return false
			}
			emitted++
			n, h := s.Len()
			q.series.Add(1)
			q.samples.Add(uint64(n))
			q.histograms.Add(uint64(h))
			return yield(s, nil)
		}
		if labelsOnly {
			// Labels only, as Prometheus' own TSDB gives them to the series API: no sample is
			// read (a series is listed for the whole raw period its index covers).
			q.labelSelects.Add(1)
			for _, e := range entries {
				if !emit(&Series{Series: e.series, Labels: e.labels}) {
					return
				}
			}
			return
		}
		for plans := 1; ; plans++ {
			all, replan, err := q.readPlanned(ctx, entries, hints, from, to, emit, plans < maxSelectPlans && emitted == 0)
			if err != nil {
				yield(nil, err)
				return
			}
			if replan {
				// Another process's Retain dropped raw tables the plan read (their windows
				// are in the tiers): the next plan knows them dropped.
				continue
			}
			for _, s := range all {
				if !emit(s) {
					return
				}
			}
			return
		}
	}
}

// maxSelectPlans is how many times a Select plans its reads at most when raw tables it
// read were found gone meanwhile.
const maxSelectPlans = 3

// errTablesDropped is a Select's error when raw tables it read were dropped by another
// process meanwhile, after it gave series (or planned maxSelectPlans times): what it read
// of them would be short.
var errTablesDropped = errors.New("tsdb: select: raw tables of the range were dropped while it read them")

// readPlanned plans the Select of entries and reads it: it gives the units' series to
// emit as they come, but those of units in key order, which it returns sorted by labels.
// When a read of this process found a raw or histogram table it knew of gone
// (tables.Periods.Vanished) and the catalog says Retain dropped a period of [from, to)
// (another process's: LearnDropped), what it read is short: with mayReplan (no series
// given yet) it stops and says replan; else it fails (errTablesDropped).
func (q *Queryable) readPlanned(ctx context.Context, entries []entry, hints *SelectHints, from, to time.Time,
	emit func(*Series) bool, mayReplan bool) (sorted []*Series, replan bool, err error) {
	vanished := q.db.tables.Vanished.Load()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	units, err := q.plan(ctx, entries, hints, from, to)
	if err != nil {
		return nil, false, err
	}
	if changelog.IsSpeculative(ctx) && slices.ContainsFunc(units, func(u unit) bool { return u.tier }) {
		// A tier's blocks are checked against no change log: a read after the refresh
		// reads them (DB.Speculate).
		return nil, false, ErrNotKnown
	}
	staged := newStagedGroups(q, units, from, to)
	latest := hints != nil && hints.Latest
	// Of the staged points, each series' latest only, where every unit reads raw samples:
	// a tier unit's windows take the staged points of each.
	staged.latest = latest && !slices.ContainsFunc(units, func(u unit) bool { return u.tier })
	plain := newPlainBudget(plainSelectSamples)
	fetch := func(ctx context.Context, i int) ([]*Series, error) {
		return q.readUnit(ctx, staged, units, i, from, to, plain)
	}
	keyOrdered := slices.ContainsFunc(units, func(u unit) bool { return u.keyRange })
	var all []*Series // of a plan in key order, to sort by labels
	for series, err := range readAhead(ctx, len(units), q.opts.Concurrency, fetch) {
		if err != nil {
			return nil, false, err
		}
		if latest {
			for _, s := range series {
				s.keepLast()
			}
		}
		if now := q.db.tables.Vanished.Load(); now != vanished {
			vanished = now
			dropped, err := q.droppedIn(ctx, from, to)
			switch {
			case err != nil:
				return nil, false, err
			case dropped && mayReplan:
				return nil, true, nil
			case dropped:
				return nil, false, errTablesDropped
			}
			// Another Select's table, of another range.
		}
		if keyOrdered {
			all = append(all, series...)
			continue
		}
		mayReplan = false
		for _, s := range series {
			if !emit(s) {
				return nil, false, nil
			}
		}
	}
	// Back in the entries' order, labels': by rank, which compares no label (comparing the
	// labels of a Select of 16,000 series was a percent of the soak server's CPU).
	slices.SortFunc(all, func(a, b *Series) int { return cmp.Compare(a.rank, b.rank) })
	return all, false, nil
}

// droppedIn learns from the catalog which raw periods of [from, to) Retain dropped
// (tables.Periods.LearnDropped), and reports whether any was: Retain drops the oldest
// periods first, so that one was where the range begins at or before the latest dropped.
func (q *Queryable) droppedIn(ctx context.Context, from, to time.Time) (bool, error) {
	if err := q.db.tables.LearnDropped(ctx, from, to); err != nil {
		return false, err
	}
	latest, ok := q.db.tables.LatestDroppedCached()
	return ok && q.db.names.PeriodOf(from) <= latest, nil
}

// unitResult is what reading one unit gave.
type unitResult struct {
	series []*Series
	err    error
}

// readAhead reads n units with fetch, concurrency at once ahead of the consumer, and
// yields what each gave, in order, whatever order they finish in: at most concurrency
// units are being read or wait, whatever the consumer's pace. Stopping the iteration (or
// the first error) stops the reads. The consumer starts the reads itself (unit
// i+concurrency when it takes unit i), so that a Select waiting for its units holds no
// goroutine beyond theirs. The consumer's goroutine reads the first unit itself (it
// would only wait for it): a refreshed panel's Select reads one or two units, and a
// goroutine started and a wait handed over cost a few percent of its time.
func readAhead(ctx context.Context, n, concurrency int, fetch func(context.Context, int) ([]*Series, error)) iter.Seq2[[]*Series, error] {
	return func(yield func([]*Series, error) bool) {
		if n == 0 {
			return
		}
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		results := make([]chan unitResult, n)
		for i := range results {
			results[i] = make(chan unitResult, 1) // a reader never blocks
		}
		start := func(i int) {
			if i >= n {
				return
			}
			if err := ctx.Err(); err != nil {
				results[i] <- unitResult{err: err}
				return
			}
			go func() {
				r, err := fetch(ctx, i)
				results[i] <- unitResult{r, err}
			}()
		}
		concurrency = max(concurrency, 1)
		for i := 1; i < min(n, concurrency); i++ {
			start(i)
		}
		for i := range n {
			var r unitResult
			if i == 0 {
				r.series, r.err = fetch(ctx, 0) // the others read meanwhile
			} else {
				r = <-results[i]
			}
			if r.err != nil {
				yield(nil, r.err)
				return
			}
			start(i + concurrency) // before yielding: it reads while the consumer works
			if !yield(r.series, nil) {
				return
			}
		}
	}
}

// readUnit reads unit i of units, with its group's staged samples.
func (q *Queryable) readUnit(ctx context.Context, staged *stagedGroups, units []unit, i int, from, to time.Time, plain *plainBudget) ([]*Series, error) {
	u := units[i]
	if u.keyRange {
		ctx = chunks.WithKeyRange(ctx)
	}
	if !u.tier && staged.unread(i) {
		q.prefetchRaw(ctx, u.entries, from, to)
	}
	st, err := staged.acquire(ctx, i)
	if err != nil {
		return nil, err
	}
	defer staged.release(i)
	if u.tier {
		return q.readTier(ctx, u.entries, u.from, u.to, u.step, u.pick, st)
	}
	return q.readRaw(ctx, u.entries, from, to, st, plain, staged.latest)
}

// prefetchRaw starts reading into the raw cache the float points of batch in [from, to)
// that it lacks (raw.Floats.Prefetch), while the batch's staged points are read: the read
// of the tables must follow that of the staged points, and then finds them cached, or
// being read. The first run of a dashboard's 1-hour panel read its staged hour (two pages,
// 120 ms of Azurite's time) and only then its raw points (three queries, 100 ms more).
// It ends with ctx (the Select's plan); its errors are the read's to find again.
func (q *Queryable) prefetchRaw(ctx context.Context, batch []entry, from, to time.Time) {
	if q.db.opts.RawCache == nil {
		return
	}
	names := make([]string, len(batch))
	for i, e := range batch {
		names[i] = e.series
	}
	go func() {
		if n, _ := q.db.floats.Prefetch(ctx, names, from, to); n > 0 {
			q.rawPrefetches.Add(1)
		}
	}()
}

// unit is what one read of a Select reads: a batch of series' raw samples, or their windows
// of a tier.
type unit struct {
	entries []entry
	tier    bool
	// Its entries are a run of the Select's in key order, read by their range of keys:
	// a raw unit's samples (rawPlan), a tier unit's raw points where the tier has no
	// window (tierUnits).
	keyRange bool
	// Of a tier unit: the whole windows of step in [from, to), and what of them.
	from, to time.Time
	step     time.Duration
	pick     pick
}

// histogramWeight is what a series with histogram samples counts for in a raw batch of
// BatchSize series. Memory would want more: a decoded sample of a 20-bucket histogram
// holds about 330 bytes where a float takes one or two in a chunk. Requests want fewer:
// each batch costs a request or two whatever its size (the staging table, the raw and the
// histogram tables). Measured on 40 series of an hour of 20-bucket histograms every 15 s,
// at the default BatchSize: 15 requests at 4 (16 series a batch, about 1.3 MB decoded), 31
// at 16, 9 with no weight (one batch).
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
// A Select of at least two batches of float series cuts them in key order instead (as
// rawPlan does), each unit read by the range of keys it spans: the windows the tier cannot
// give (not rolled up yet, unsealed, marked dirty) are its raw points, one query of the
// raw table a unit where a run in labels' order, spread over the whole table, takes a
// request per 13 series; and its tier blocks one scan of its partitions where such a run
// takes a filter per 13 series. Its histogram series then read raw in batches, and the
// Select gives all its series in labels' order once read.
//
// Whole windows only: Aggregate reads a window cut by the range from raw points, a request
// or two per series and a whole raw chunk in the reply. from goes down to its window's
// start (the sample, at the window's end, is still in the range; a Min or Max may take a
// point up to a window before it); to goes down to its window's start, leaving out the
// points after the last whole window: those of every evaluation time but the last are left
// out just the same. Less than a window: no sample.
func (q *Queryable) tierUnits(entries []entry, from, to time.Time, step time.Duration, p pick) []unit {
	tfrom, tto := rounding.Floor(from, step), rounding.Floor(to, step)
	size := q.opts.BatchSize
	var floats, hists []entry
	for _, e := range entries {
		if e.hist {
			hists = append(hists, e)
		} else {
			floats = append(floats, e)
		}
	}
	var units []unit
	if len(floats) >= 2*size {
		if tfrom.Before(tto) {
			byKey := inKeyOrder(floats)
			for i := 0; i < len(byKey); i += size {
				units = append(units, unit{entries: byKey[i:min(i+size, len(byKey))], tier: true, keyRange: true,
					from: tfrom, to: tto, step: step, pick: p})
			}
		}
		if len(hists) > 0 {
			q.histogramRawSeries.Add(uint64(len(hists)))
			units = append(units, rawUnits(hists, size)...)
		}
		return units
	}
	for i := 0; i < len(entries); {
		j := i
		for j < len(entries) && entries[j].hist == entries[i].hist && (entries[i].hist || j-i < size) {
			j++
		}
		switch {
		case entries[i].hist:
			q.histogramRawSeries.Add(uint64(j - i))
			units = append(units, rawUnits(entries[i:j], size)...)
		case tfrom.Before(tto):
			units = append(units, unit{entries: entries[i:j], tier: true, from: tfrom, to: tto, step: step, pick: p})
		}
		i = j
	}
	return units
}

// readRaw reads the samples of a batch of series: the staged samples of both kinds in one
// read of the staging table (or from staged, the group's, when not nil), the histogram
// samples of those that have some from the histogram tables, then the floats of all from
// the raw tables (many series a request). It returns the series with samples, in the
// batch's order. The batch's series are the index's, checked as their entries were read
// (index.New's check): checking each again at every read was 4% of a soak server's CPU.
// With latest, a read of its own staged points reads each series' latest only.
func (q *Queryable) readRaw(ctx context.Context, batch []entry, from, to time.Time, staged *stagedSet, plain *plainBudget, latest bool) ([]*Series, error) {
	db := q.db
	names := make([]string, len(batch))
	byName := make(map[string]*Series, len(batch))
	all := make([]*Series, len(batch))
	var withHist []string
	for i, e := range batch {
		names[i] = e.series
		all[i] = &Series{Series: e.series, Labels: e.labels, plain: plain, rank: e.rank}
		byName[e.series] = all[i]
		if e.hist {
			withHist = append(withHist, e.series)
		}
	}
	withHist = histogramNames(withHist)
	if staged == nil {
		// Both kinds in one query, before the tables: a Fold that moves them meanwhile
		// writes them into the tables before it deletes them.
		kinds := staging.Floats
		if len(withHist) > 0 {
			kinds = staging.Both
		}
		var err error
		if staged, err = db.readStagedSet(ctx, names, from, to, kinds, latest); err != nil {
			return nil, err
		}
	}
	var stagedHists map[string][]HistogramPoint
	if len(withHist) > 0 {
		var err error
		if stagedHists, err = staged.histsIn(withHist, from, to); err != nil {
			return nil, err
		}
	}
	stagedPoints, err := staged.in(names, from, to)
	if err != nil {
		return nil, err
	}
	ctx = changelog.AfterRead(ctx, staged.after)
	if err := q.readSamples(ctx, byName, withHist, names, from, to, stagedHists, stagedPoints); err != nil {
		return nil, err
	}
	floats, floatSeries := 0, 0
	for i, s := range all {
		s.finish()
		if !batch[i].hist {
			n, _ := s.Len()
			floats += n
			floatSeries++
		}
	}
	span := to.Sub(q.rawDataFrom(from, to)) // of the raw samples: a 7-day read of a day's
	if span <= 0 {
		span = to.Sub(from) // none raw known: the staged ones', over the range
	}
	q.cost.rate.observe(float64(floats), float64(floatSeries)*span.Seconds())
	return nonEmpty(all), nil
}

// readTier reads a batch of series' windows of step in [from, to) (whole windows) in one
// AggregateSeries, of the field p picks only, and makes a sample of each: at the window's
// last millisecond, of the value p picks. It returns the series with samples, in the
// batch's order. staged, if not nil, holds the batch's staged points.
func (q *Queryable) readTier(ctx context.Context, batch []entry, from, to time.Time, step time.Duration, p pick, staged *stagedSet) ([]*Series, error) {
	names := make([]string, len(batch))
	byName := make(map[string]*Series, len(batch))
	all := make([]*Series, len(batch))
	for i, e := range batch {
		names[i] = e.series
		all[i] = &Series{Series: e.series, Labels: e.labels, rank: e.rank}
		byName[e.series] = all[i]
	}
	var points uint64
	var stagedPoints tiers.StagedPoints // nil: the read reads them
	if staged != nil {
		stagedPoints = staged.in
		ctx = changelog.AfterRead(ctx, staged.after)
	}
	opts := tiers.WithStaged(&AggregateOptions{Fields: p.fields()}, stagedPoints)
	for w, err := range q.db.tiers.AggregateBySeries(ctx, names, from, to, step, opts) {
		if err != nil {
			return nil, err
		}
		if s := byName[w.Series]; s != nil {
			s.appendFloat(w.Start.Add(step).UnixMilli()-1, p.value(w.Window))
			points += w.Count
		}
	}
	for _, s := range all {
		s.finish()
	}
	if points > 0 {
		q.cost.rate.observe(float64(points), float64(len(batch))*to.Sub(from).Seconds())
	}
	return nonEmpty(all), nil
}

func nonEmpty(all []*Series) []*Series {
	return slices.DeleteFunc(all, func(s *Series) bool { n, _ := s.Len(); return n == 0 })
}

// histogramNames are the names that may hold histogram samples: those valid for the keys of
// histogram tables (a float series' name may be too long for them, and then has none).
func histogramNames(names []string) []string {
	return slices.DeleteFunc(slices.Clone(names), func(s string) bool { return raw.ValidateHistSeries(s) != nil })
}
