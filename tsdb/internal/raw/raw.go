package raw

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/histenc"
	"github.com/seed71701133/tablets/rounding"
	"github.com/seed71701133/tablets/tsdb/internal/azerr"
	"github.com/seed71701133/tablets/tsdb/internal/cache"
	"github.com/seed71701133/tablets/tsdb/internal/changelog"
	"github.com/seed71701133/tablets/tsdb/internal/naming"
	"github.com/seed71701133/tablets/tsdb/internal/staging"
	"github.com/seed71701133/tablets/tsdb/internal/tables"
	"github.com/seed71701133/tablets/tsdb/internal/times"
)

// Store is the raw part of one kind of samples: its tables, one a period (float points:
// the raw tables, a store of the raw layout each, stores.go; native histogram samples: the
// histogram tables, chunks of internal/histenc, histtable.go), and the one implementation of
// what reads and writes them whatever the kind: the spans of a range, a read of many series
// a span, the write of a series' samples into a period, compaction and delete. S is the
// kind's sample, T its table of a period: the kinds fork only in T, whose codec (the layout's,
// or package chunks with internal/histenc) stores them. It is safe for concurrent use; the
// period tables (which tables exist) and the series check are shared by both kinds.
type Store[S any, T Table[S]] struct {
	kind   naming.Kind
	names  naming.Names
	tables *tables.Periods
	series *seriesCheck
	open   func(p uint64) (T, error) // the table of period p (no request)

	// The read cache (nil: none), the change log it is checked against, how the kind's
	// samples go into it, and the clock that tells a read of the present.
	cache   *Cache
	changes *changelog.Log
	cached  sampleCache[S]
	now     func() time.Time
	// partition is the span of the tables' partitions (0: unknown): a read of the present
	// reads to the end of the partition holding it (see cachedSpan).
	partition time.Duration
	// folded is the samples of names the Folds of receipts wrote, where this process knows
	// them without a request (Config.FoldedFloats; nil: never): see takeInFolds.
	folded func(receipts []changelog.Receipt, names []string) map[string][]S

	compactMu sync.Mutex
	compacted map[uint64]compactedSpan // by period: what the last Compacts did (Compact)
}

// compactedSpan is a range of a period that Compacts of this process merged whole while the
// period's change log stood at generation gen and the partition growing began (the one
// holding the present, which a Compact leaves until it holds a few chunks), and the fewest
// chunks a partition of it could gain then before one is worth compacting (headroom, at
// least 1).
type compactedSpan struct {
	gen      uint64
	from, to time.Time
	growing  time.Time
	headroom int
}

// Floats is the raw part's float points: besides what both kinds do, the reads of one
// series that only floats have (tablets.Store's Query, QueryPage and Latest; floats.go).
type Floats struct {
	*Store[tablets.Point, pointTable]
}

// Hists is the raw part's histogram samples: besides what both kinds do, their read
// merged with staged samples (hists.go).
type Hists struct {
	*Store[tablets.HistogramPoint, histTable]
}

// Table is a period's table of one kind of samples S (the package's pointTable and
// histTable).
type Table[S any] interface {
	// queryMany passes emit the samples of every named series (valid, distinct) with
	// from <= Time < to, each series' oldest first, the latest write of a time winning;
	// emit returns false to stop.
	queryMany(ctx context.Context, series []string, from, to time.Time, emit func(series string, s S) bool) error
	// write stores samples of a series (any order; of two at one time, the later argument
	// wins) with priority (0: this process's clock, so that the latest write wins; a Fold
	// gives the priority of the staged samples' write). It returns the indexes of the
	// samples that may not be stored, and the first failure.
	write(ctx context.Context, series string, samples []S, priority uint64) ([]int, error)
	// delete removes the samples of series with from <= Time < to.
	delete(ctx context.Context, series string, from, to time.Time) error
	// compact merges the small chunks of [from, to) in every series (nothing where the
	// layout does not compact); those of partitions that end after growing (still being
	// written) once there are a few (chunked.CompactOptions). It returns the range's
	// headroom (chunks.Compacted): the fewest chunks a partition can gain before one is
	// worth compacting.
	compact(ctx context.Context, from, to, growing time.Time) (int, error)
	// spilling returns a context in which queryMany passes sink the samples it read of
	// series it was not asked for that wants (nil: all) takes (chunked.Store.WithSpill), or
	// ctx where the layout reads none.
	spilling(ctx context.Context, wants func(series string) bool, sink func(series string, samples []S)) context.Context
}

// Span is the part of [from, to) in one raw period.
type Span = tables.Span

// Spans lists, oldest first, the tables of the kind that exist or may exist (see
// tables.Periods.Spans) with the part of [from, to) in each.
func (r *Store[S, T]) Spans(ctx context.Context, from, to time.Time) ([]Span, error) {
	return r.tables.Spans(ctx, r.kind, from, to)
}

// readDone records what a request to period p's table learned: the table exists (err nil),
// or is gone (dropped meanwhile, or never made), which a read takes as an empty period (it
// returns true).
func (r *Store[S, T]) readDone(p uint64, err error) (empty bool) {
	switch {
	case err == nil:
		r.tables.Found(r.kind, p)
	case azerr.IsTableGone(err):
		r.tables.Gone(r.kind, p)
		return true
	}
	return false
}

// inTable calls do with period p's table and records what it learned (readDone): it
// returns gone for a table that is gone (an empty period), and do's other errors.
func (r *Store[S, T]) inTable(p uint64, do func(T) error) (gone bool, err error) {
	t, err := r.open(p)
	if err != nil {
		return false, err
	}
	err = do(t)
	if r.readDone(p, err) {
		return true, nil
	}
	return false, err
}

// Validate checks a series for the kind's tables, before any request.
func (r *Store[S, T]) Validate(ctx context.Context, series string) error {
	return r.series.check(ctx, series, r.kind)
}

// queryMany passes emit the samples of every named series (valid, distinct) in [from, to),
// table by table, each series' oldest first; emit returns false to stop.
func (r *Store[S, T]) queryMany(ctx context.Context, series []string, from, to time.Time, emit func(series string, s S) bool) error {
	spans, err := r.Spans(ctx, from, to)
	if err != nil {
		return err
	}
	for _, sp := range spans {
		stopped := false
		_, err := r.querySpan(ctx, sp, series, func(name string, s S) bool {
			stopped = !emit(name, s)
			return !stopped
		}, nil)
		if err != nil || stopped {
			return err
		}
	}
	return nil
}

// querySpan passes emit the samples of the series in Span sp, from its table. It returns
// gone for a table that is gone: an empty period.
func (r *Store[S, T]) querySpan(ctx context.Context, sp Span, series []string, emit func(series string, s S) bool, run func(FloatRun) (taken, more bool)) (bool, error) {
	var gone bool
	var err error
	if r.cache != nil {
		gone, err = r.cachedSpan(ctx, sp, series, emit, run)
	} else {
		gone, err = r.inTable(sp.Period, func(t T) error { return t.queryMany(ctx, series, sp.From, sp.To, emit) })
	}
	if err != nil {
		return false, fmt.Errorf("tsdb: %w", err)
	}
	return gone, nil
}

// Write writes a series' samples of period p into its table (see Table.write), and
// records whether the table is gone.
func (r *Store[S, T]) Write(ctx context.Context, p uint64, series string, samples []S, priority uint64) ([]int, error) {
	t, err := r.open(p)
	if err != nil {
		return allIndexes(len(samples)), err
	}
	failed, err := t.write(ctx, series, samples, priority)
	if azerr.IsTableGone(err) {
		r.tables.Gone(r.kind, p) // dropped meanwhile: a retry checks the catalog
	}
	return failed, err
}

func allIndexes(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// Delete removes the samples of series with from <= Time < to from every table of the
// range.
func (r *Store[S, T]) Delete(ctx context.Context, series string, from, to time.Time) error {
	spans, err := r.Spans(ctx, from, to)
	if err != nil {
		return err
	}
	for _, sp := range spans {
		if _, err := r.inTable(sp.Period, func(t T) error { return t.delete(ctx, series, sp.From, sp.To) }); err != nil {
			return fmt.Errorf("tsdb: %w", err)
		}
	}
	return nil
}

// Compact merges the small chunks of every table of [from, to). A table that fails does
// not stop the others.
//
// A table whose range this process compacted whole is skipped while the changes recorded
// in the period's change log since, over that range, are fewer than the headroom the
// compaction left (chunks.Compacted): what a compaction merges only a write makes, and
// every write records in the log (a direct write after it is stored, a Fold before it
// deletes what it moved, Delete, Retain). A change is counted as one chunk a partition: a
// Fold writes each series it moves once, a direct write each series of its batch once, a
// chunk a partition unless the points fill one (16 KiB, hours of a series scraped every
// second). Where a change wrote more, or one process's concurrent writes were recorded as
// one change, the partitions wait for a later scan, at most the headroom's changes later,
// or the one after the present has left them: only the reads of those partitions cost
// more meanwhile, and every sample stays readable. The log is read before the table is
// scanned, so a write the scan missed is a change after it. A compaction scans its whole
// range of the table for partitions of several chunks (a request per 1,000 chunks, and on
// Azurite each page scans and sorts the whole table): the soak's, every two minutes, found
// nothing between its folds, and after each fold nothing until the fourth.
func (r *Store[S, T]) Compact(ctx context.Context, from, to time.Time) error {
	spans, err := r.Spans(ctx, from, to)
	if err != nil {
		return err
	}
	// The partition holding the present is still written (by every fold, in a staging
	// database): it is compacted once it holds a few chunks (chunked.CompactOptions), and
	// whole once the present has left it.
	growing := r.now()
	var errs []error
	for _, sp := range spans {
		state, err := r.changes.ReadNow(ctx, sp.Period)
		if err != nil {
			errs = append(errs, fmt.Errorf("tsdb: compact %s: %w", r.names.Table(r.kind, sp.Period), err))
			continue
		}
		if r.compactedSince(sp, state, growing) {
			continue
		}
		headroom := 1
		gone, err := r.inTable(sp.Period, func(t T) error {
			var err error
			headroom, err = t.compact(ctx, sp.From, sp.To, growing)
			return err
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("tsdb: compact %s: %w", r.names.Table(r.kind, sp.Period), err))
			continue
		}
		if gone {
			headroom = 1 // no table: a change may make one
		}
		r.noteCompacted(sp, state.Gen(), growing, headroom)
	}
	return errors.Join(errs...)
}

// compactedSince reports whether span sp was compacted whole, while the partition growing
// is in was the one still written, with fewer changes over it since, as state records
// them, than its headroom.
func (r *Store[S, T]) compactedSince(sp Span, state changelog.State, growing time.Time) bool {
	r.compactMu.Lock()
	defer r.compactMu.Unlock()
	c, ok := r.compacted[sp.Period]
	if !ok || !c.growing.Equal(r.partitionOf(growing)) || sp.From.Before(c.from) || sp.To.After(c.to) {
		return false
	}
	n, known := state.Changes(c.gen, c.from.UnixMilli(), ceilMilli(c.to))
	return known && n < c.headroom
}

// partitionOf is the start of the partition holding t (zero when the partitions are
// unknown: a layout that does not compact).
func (r *Store[S, T]) partitionOf(t time.Time) time.Time {
	if r.partition <= 0 {
		return time.Time{}
	}
	return rounding.Floor(t, r.partition)
}

// noteCompacted notes that span sp was compacted whole at generation gen, leaving headroom:
// with what was noted at gen, where the two meet. A compaction merges the chunks of every
// partition its range overlaps, whole (chunks.Layout.ScanFilter), so the span noted is of
// whole partitions: the maintenance loop's ranges slide with the clock, within a partition.
func (r *Store[S, T]) noteCompacted(sp Span, gen uint64, growing time.Time, headroom int) {
	if r.partition > 0 {
		// Partitions start at multiples of their span since the Unix epoch.
		sp.From = rounding.Floor(sp.From, r.partition)
		sp.To = rounding.Floor(sp.To.Add(-time.Nanosecond), r.partition).Add(r.partition)
	}
	r.compactMu.Lock()
	defer r.compactMu.Unlock()
	if r.compacted == nil {
		r.compacted = map[uint64]compactedSpan{}
	}
	growing = r.partitionOf(growing)
	c, ok := r.compacted[sp.Period]
	headroom = max(headroom, 1)
	if ok && c.gen == gen && c.growing.Equal(growing) && !sp.From.After(c.to) && !sp.To.Before(c.from) {
		r.compacted[sp.Period] = compactedSpan{gen: gen, from: times.Earlier(c.from, sp.From), to: times.Later(c.to, sp.To),
			growing: growing, headroom: min(c.headroom, headroom)}
		return
	}
	r.compacted[sp.Period] = compactedSpan{gen: gen, from: sp.From, to: sp.To, growing: growing, headroom: headroom}
}

// seriesCheck checks series names before any request, for the tables of each kind: with
// the raw layout's rules (a histogram series is a series of the database, listed in the
// same index) and, for histograms, the histogram tables' keys. It remembers the series it
// passed lately: the check builds the layout's filters, a quarter of a remote write's CPU.
type seriesCheck struct {
	layout tablets.Store // a store of the raw layout, for its checks: a Write of no points sends nothing
	valid  *cache.Gen[string, struct{}]
}

func newSeriesCheck(layout tablets.Store, cachedSeries int) *seriesCheck {
	return &seriesCheck{layout: layout, valid: cache.New(2*cachedSeries*validEntryBytes, validEntryCost)}
}

// validEntryBytes bounds the cache of valid series: about the heap of an entry of a series
// key (33 bytes) and the maps' share.
const validEntryBytes = 128

func validEntryCost(series string, _ struct{}) int { return len(series) + validEntryBytes - 33 }

// check checks series for the tables of kind k (naming.Raw, naming.Hist); its error is the
// layout's, unwrapped.
func (c *seriesCheck) check(ctx context.Context, series string, k naming.Kind) error {
	if _, ok := c.valid.Get(series); !ok {
		if err := c.layout.Write(ctx, series); err != nil { // no points: validates, sends nothing
			return err
		}
		c.valid.Add(series, struct{}{})
	}
	if k != naming.Hist {
		return nil
	}
	key := "\x00h" + series // no series holds a control character: apart from the layout's
	if _, ok := c.valid.Get(key); ok {
		return nil
	}
	if err := HistLayout.ValidateSeries(series); err != nil {
		return err
	}
	c.valid.Add(key, struct{}{})
	return nil
}

// Config is what the raw part is given besides the account and the tables.
type Config struct {
	CachedSeries int // the series names found valid that are remembered (at least)
	// Cache keeps the samples reads decoded (nil: none); StagingReads counts the reads of
	// the staging table completed (what a read of the change log must be later than: see
	// Cache); Now is the clock (nil: time.Now).
	Cache        *Cache
	StagingReads func() uint64
	Now          func() time.Time
	// Partition is the span of the raw layout's partitions (chunked's PartitionFactor; 0:
	// none, or unknown), for the cache's reads of the present.
	Partition time.Duration
	// FoldedFloats returns the float points the Folds of receipts wrote of each of names
	// that this process knows without a request (staging.Table.FoldedFloats), so that the
	// cache takes in a Fold without reading its samples again. nil: it reads them.
	FoldedFloats func(receipts []changelog.Receipt, names []string) map[string][]tablets.Point
	// FoldedHists is FoldedFloats of histogram samples (staging.Table.FoldedHists).
	FoldedHists func(receipts []changelog.Receipt, names []string) map[string][]histenc.Sample
}

// New makes the raw part's two kinds over the period tables: the float points in the
// stores of the raw layout, the histogram samples in the histogram tables; validator is a
// store of the raw layout, for its checks of series names. Both kinds share the change log
// (the raw change log, which it returns) and c.Cache. It sends no request.
func New(service *aztables.ServiceClient, names naming.Names, tables *tables.Periods, stores *Stores, validator tablets.Store, c Config) (*Floats, *Hists, *changelog.Log) {
	series := newSeriesCheck(validator, c.CachedSeries)
	changes := changelog.New(service.NewClient(names.Catalog()), LogKey, c.StagingReads)
	now := c.Now
	if now == nil {
		now = time.Now
	}
	floats := &Store[tablets.Point, pointTable]{kind: naming.Raw, names: names, tables: tables, series: series, open: func(p uint64) (pointTable, error) {
		s, err := stores.Get(p)
		return pointTable{s}, err
	}, cache: c.Cache, changes: changes, cached: floatCache, now: now, partition: c.Partition, folded: c.FoldedFloats}
	hists := &Store[tablets.HistogramPoint, histTable]{kind: naming.Hist, names: names, tables: tables, series: series, open: func(p uint64) (histTable, error) {
		return histTableOf(service.NewClient(names.HistTable(p))), nil
	}, cache: c.Cache, changes: changes, cached: histCache, now: now, partition: histPartition}
	if c.FoldedHists != nil {
		hists.folded = func(receipts []changelog.Receipt, names []string) map[string][]tablets.HistogramPoint {
			folded := c.FoldedHists(receipts, names)
			if folded == nil {
				return nil // no series known (takeInFolds tells why: FoldMissReceipt)
			}
			out := map[string][]tablets.HistogramPoint{}
			for name, samples := range folded {
				out[name] = HistPoints(samples)
			}
			return out
		}
	}
	return &Floats{floats}, &Hists{hists}, changes
}

// WithStaged yields the samples of names (valid; a name given twice is read once) in
// [from, to) from r's tables, table by table, merged with staged (read before, by series,
// each sorted, one a millisecond) by merge, the kind's (staging.PointsMerge,
// staging.HistsMerge): where both hold a millisecond, the staged sample is the later write.
// Each series' samples come oldest first. Staged samples are read whatever the tables this
// process knows of (another may have made the table since its last listing), but those of
// a period known to be dropped or found gone (Retain dropped it) are left out. One code for
// both kinds: Floats' and Hists' reads of many series with their staged samples.
func WithStaged[P, S any, T Table[S]](ctx context.Context, r *Store[S, T], merge staging.Merge[S, P], names []string, from, to time.Time, staged map[string][]S) iter.Seq2[P, error] {
	return func(yield func(P, error) bool) {
		stopped := false
		err := withStaged(ctx, r, merge, names, from, to, staged, func(p P) bool {
			stopped = !yield(p, nil)
			return !stopped
		}, nil, nil)
		if err != nil && !stopped {
			var zero P
			yield(zero, err)
		}
	}
}

// withStaged is WithStaged passing each sample to yield (until it returns false) and, with
// run, the runs of cached floats that no staged sample falls among to run whole, and with
// after, the staged samples of a span that come after all of its series' samples of the
// tables, together (see Floats.ReadRuns).
func withStaged[P, S any, T Table[S]](ctx context.Context, r *Store[S, T], merge staging.Merge[S, P], names []string, from, to time.Time, staged map[string][]S,
	yield func(P) bool, after func(string, []S) bool, run func(FloatRun) bool) error {
	names = distinct(names)
	spans, err := r.Spans(ctx, from, to)
	if err != nil {
		return err
	}
	for _, sp := range stagedSpans(r, merge, spans, names, from, to, staged) {
		rest := make(map[string][]S, len(names)) // each series' staged samples of the span
		for _, name := range names {
			rest[name] = merge.In(staged[name], sp.From, sp.To)
		}
		stopped := false
		emit := func(name string, s S) bool {
			stopped = !yield(merge.Pair(name, s))
			return !stopped
		}
		if !sp.stagedOnly {
			// A series' samples come together: its staged ones are looked up once a run.
			var cur string
			var curRest []S
			started := false
			switchTo := func(name string) {
				if !started || name != cur {
					if started {
						rest[cur] = curRest
					}
					cur, curRest, started = name, rest[name], true
				}
			}
			var runWhole func(FloatRun) (bool, bool)
			if run != nil {
				runWhole = func(fr FloatRun) (bool, bool) {
					switchTo(fr.Series)
					// The staged samples before the run go first; one in its milliseconds
					// leaves the run to be decoded, sample by sample, for the merge.
					i := 0
					for i < len(curRest) && merge.Time(curRest[i]).UnixMilli() < fr.First {
						i++
					}
					if i < len(curRest) && merge.Time(curRest[i]).UnixMilli() <= fr.Last {
						return false, true
					}
					for _, st := range curRest[:i] {
						if !emit(fr.Series, st) {
							return false, false
						}
					}
					curRest = curRest[i:]
					stopped = !run(fr)
					return true, !stopped
				}
			}
			gone, err := r.querySpan(ctx, sp.Span, names, func(name string, s S) bool {
				switchTo(name)
				if len(curRest) == 0 {
					return emit(name, s)
				}
				var ok bool
				curRest, ok = merge.UpTo(curRest, s, func(st S) bool { return emit(name, st) })
				return ok
			}, runWhole)
			if started {
				rest[cur] = curRest
			}
			if stopped {
				return nil
			}
			if err != nil {
				return err
			}
			if gone {
				continue // the table is gone, and its period with it
			}
		}
		for _, name := range names {
			if after != nil && len(rest[name]) > 0 {
				if !after(name, rest[name]) {
					return nil
				}
				continue
			}
			for _, s := range rest[name] {
				if !emit(name, s) {
					return nil
				}
			}
		}
	}
	return nil
}

// readSpan is a span of a read merged with staged samples: a table's, or (stagedOnly) a
// period of staged samples whose table this process does not know of.
type readSpan struct {
	Span
	stagedOnly bool
}

// stagedSpans adds to spans (oldest first) the periods of [from, to) holding staged
// samples of names that spans lack, unless known dropped, in order.
func stagedSpans[P, S any, T Table[S]](r *Store[S, T], merge staging.Merge[S, P], spans []Span, names []string, from, to time.Time, staged map[string][]S) []readSpan {
	out := make([]readSpan, 0, len(spans))
	listed := map[uint64]bool{}
	for _, sp := range spans {
		out = append(out, readSpan{Span: sp})
		listed[sp.Period] = true
	}
	added := false
	for _, name := range names {
		// A series' staged samples are sorted: a search finds the first of the next period
		// (looking up each sample's was 2 ms of a refresh of 1,200 series' staged hour).
		samples := staged[name]
		for i := 0; i < len(samples); {
			p := r.names.PeriodOf(merge.Time(samples[i]))
			end := r.names.End(p)
			i += max(1, sort.Search(len(samples)-i, func(k int) bool { return !merge.Time(samples[i+k]).Before(end) }))
			if listed[p] || r.tables.KnownDropped(p) {
				continue
			}
			listed[p], added = true, true
			out = append(out, readSpan{r.tables.SpanOf(p, from, to), true})
		}
	}
	if added {
		slices.SortFunc(out, func(a, b readSpan) int { return cmp.Compare(a.Period, b.Period) })
	}
	return out
}

// distinct is names without repeats, in their first order.
func distinct(names []string) []string {
	sorted := slices.Clone(names)
	slices.Sort(sorted)
	if len(slices.Compact(sorted)) == len(names) {
		return names // none repeats (a Select's names never do): no set to make
	}
	seen := make(map[string]bool, len(names))
	out := make([]string, 0, len(names))
	for _, name := range names {
		if !seen[name] {
			seen[name] = true
			out = append(out, name)
		}
	}
	return out
}

// WithStaged is the histogram samples' read of many series merged with staged ones (see
// the function WithStaged).
func (h *Hists) WithStaged(ctx context.Context, names []string, from, to time.Time, staged map[string][]tablets.HistogramPoint) iter.Seq2[tablets.SeriesHistogram, error] {
	return WithStaged(ctx, h.Store, staging.HistsMerge, names, from, to, staged)
}

// WithStaged is the float points' read of many series merged with staged ones (see the
// function WithStaged).
func (f *Floats) WithStaged(ctx context.Context, names []string, from, to time.Time, staged map[string][]tablets.Point) iter.Seq2[tablets.SeriesPoint, error] {
	return WithStaged(ctx, f.Store, staging.PointsMerge, names, from, to, staged)
}

// ReadRuns is WithStaged passing the points to point (until it returns false), but the
// runs of cached points that no staged point of their series falls among (FloatRun: all
// of a cache segment inside the range) to run, whole and still encoded, in their place
// among the series' points; and the staged points of a series that come after all of its
// points in a table (all of a span's but those that fell among them), to after, together
// in their place. A reader that keeps points encoded anyway (a Series) takes
// most of a read from the cache without decoding it, and a refresh's staged points (most
// of its points while samples arrive: an hour's, where the Folds run hourly) a series at a
// time, not a call each.
func (f *Floats) ReadRuns(ctx context.Context, names []string, from, to time.Time, staged map[string][]tablets.Point,
	point func(tablets.SeriesPoint) bool, after func(series string, pts []tablets.Point) bool, run func(FloatRun) bool) error {
	return withStaged(ctx, f.Store, staging.PointsMerge, names, from, to, staged, point, after, run)
}

// Prefetch reads into the cache the float points of the series of names in [from, to) that
// it holds nothing of, table by table, at the state of the change log last read (of any
// age; read now where none was), as ReadRuns would read them, and passes none on. A Select
// runs it beside its read of the staged points, which a read of the tables must follow (a
// Fold writes the tables before it deletes what it moved): the read after the staged one
// reads the log again, takes from the cache what still stands at that state (or joins this
// read where it is still under way at the same generation), and reads what changed since
// itself. A series the cache holds something of is left to that read, which knows what of
// it still stands (a refresh costs the lookups, nothing more), and so is one another read
// is reading now (Cache.untouched). It returns how many series it read from the tables
// (once a table). Without a cache it does nothing.
func (f *Floats) Prefetch(ctx context.Context, names []string, from, to time.Time) (int, error) {
	if f.cache == nil {
		return 0, nil
	}
	ctx = changelog.AnyKnown(ctx)
	spans, err := f.Spans(ctx, from, to)
	if err != nil {
		return 0, err
	}
	read := 0
	names = distinct(names)
	for _, sp := range spans {
		absent := f.cache.untouched(f.names.Table(f.kind, sp.Period), names)
		if len(absent) == 0 {
			continue
		}
		_, err := f.querySpan(ctx, sp, absent, func(string, tablets.Point) bool { return true },
			func(FloatRun) (taken, more bool) { return true, true })
		if err != nil {
			return read, err
		}
		read += len(absent)
	}
	return read, nil
}
