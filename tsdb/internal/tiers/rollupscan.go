package tiers

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"sync"
	"time"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/chunked"
	"github.com/seed71701133/tablets/internal/batch"
	"github.com/seed71701133/tablets/tsdb/internal/azerr"
	"github.com/seed71701133/tablets/tsdb/internal/naming"
	"github.com/seed71701133/tablets/tsdb/internal/staging"
	"github.com/seed71701133/tablets/tsdb/internal/tables"
	"github.com/seed71701133/tablets/tsdb/internal/times"
)

const (
	// maxRollupGroup bounds the series a batched Rollup reads at once.
	maxRollupGroup = 2000
	// maxGroupBlocks bounds the blocks it reads at once (whole, for their windows outside the
	// slice): a group has fewer series when a slice spans many blocks (by default, 2).
	maxGroupBlocks = 3_500
	// maxGroupBytes bounds the size of the blocks it holds at once, as read: a group after
	// the first has fewer series when the first's blocks took more than this a series.
	maxGroupBytes = 64 << 20
	// writeConcurrency is how many series' blocks it writes at once (as many as the write
	// path's writes of series).
	writeConcurrency = 32
)

// scanRollup is Rollup of [from, to) over chunked raw tables: instead of reads per series,
// the windows of each slice of the range that it computes (windowsToRoll) are rolled up a
// group of series at a time (up to maxRollupGroup, consecutive in the order of their raw
// keys) in this order, which keeps it correct beside writers and other rollers:
//  1. the group's blocks holding those windows, read whole with their ETags, a query
//     across partitions per tier table with windows to compute (of a tier whose windows
//     are written as tails, the keys and ETags of the blocks at the span's start only);
//  2. the group's staged points and histogram samples of those windows, one query;
//  3. the group's raw points of those windows, a query across partitions per raw table
//     (chunked's ScanPoints), streamed series by series, merged with the staged ones;
//  4. each series' blocks that changed, the windows spliced in, a transaction per tier
//     table (packed: with the other series' of its partition, up to 100 blocks a
//     transaction, groupWriter), conditional on the ETags read, or as new where none was
//     (a tail: as new, beside an empty merge into its guard, conditional on its ETag): a
//     block that changed or appeared meanwhile fails the write, and the windows of that
//     transaction's series are rolled up again, each by itself.
//
// It reports false when a raw table of the range is not chunked: the caller then rolls up
// series by series. Slices without a raw table are left alone.
func (tr *Tiers) scanRollup(ctx context.Context, names []string, lo, hi uint64, from, to time.Time) (bool, error) {
	tiers := tr.cfg.Tiers
	block := tiers[len(tiers)-1].block()
	span := uint64(block / time.Second)
	spans, err := tr.periods.Spans(ctx, naming.Raw, times.At(lo), times.Earlier(times.At(hi), tablets.MaxTime))
	if err != nil {
		return true, err
	}
	stores := make([]*chunked.Store, len(spans))
	for i, sp := range spans {
		s, err := tr.reads.Store(sp.Period)
		if err != nil {
			return true, err
		}
		c, ok := s.(*chunked.Store)
		if !ok {
			return false, nil
		}
		stores[i] = c
	}
	names = slices.Clone(names)
	slices.SortFunc(names, chunked.CompareSeries)
	blocks := 0 // a series' blocks over a slice, all tiers
	for _, t := range tiers {
		blo, bhi := tr.storedSpan(t, lo, lo+span)
		blocks += int((bhi - blo) / uint64(tr.blockSpan(t)/time.Second))
	}
	group := max(1, min(maxRollupGroup, maxGroupBlocks/blocks))
	// Periods of histogram samples only have no raw table, but slices all the same.
	hist, err := tr.periods.Spans(ctx, naming.Hist, times.At(lo), times.Earlier(times.At(hi), tablets.MaxTime))
	if err != nil {
		return true, err
	}
	starts := slices.Compact(slices.Sorted(slices.Values(append(sliceStarts(spans, lo, hi, block), sliceStarts(hist, lo, hi, block)...))))
	// The slices with windows to compute, and those windows, as of now: a window only
	// overlapped that seals while a paced Rollup goes on is the next range's to write.
	type slice struct {
		start   uint64
		windows rollupWindows
	}
	var work []slice
	now := tr.now()
	for _, s := range starts {
		if w := tr.windowsToRoll(from, to, s, s+span, now); !w.none() {
			work = append(work, slice{s, w})
		}
	}
	pace := tr.rollupPacer(to, len(work)*len(names))
	for k, sl := range work {
		s, w := sl.start, sl.windows
		var raw []rawSpan
		for i, sp := range spans {
			if sp.From.Before(times.At(w.hi)) && sp.To.After(times.At(w.lo)) {
				raw = append(raw, rawSpan{stores[i], times.Later(sp.From, times.At(w.lo)), times.Earlier(sp.To, times.At(w.hi))})
			}
		}
		if err := tr.ensureTierTables(ctx, s, s+span); err != nil {
			return true, err
		}
		for g := 0; g < len(names); {
			n := min(group, len(names)-g)
			if err := pace.Wait(ctx, k*len(names)+g); err != nil {
				return true, err
			}
			size, err := tr.rollupGroup(ctx, names[g:g+n], n == len(names), raw, w)
			if err != nil {
				return true, err
			}
			group = nextGroup(group, blocks, n, size)
			g += n
		}
	}
	return true, nil
}

// pacedLag is how long after the end of a Rollup's range, past the seal delay, its Rollup is
// still paced (Config.Pace): the maintenance loop's rollup of the windows sealed since its
// last one ends at the seal delay (and the tenant's spread) before now; a catch-up's slices
// of older windows are not paced, nor a flagged slice's of older ones.
const pacedLag = time.Hour

// rollupPacer is the pace of a batched Rollup of works series-slices whose range ends at to:
// its groups begin evenly over Config.Pace, the k-th of works no earlier than Pace*k/works
// after the first, by the wall clock (it is the account's time that pacing shares, whatever
// the database's Now). Unpaced, a tenant's rollup in the soak (18,746 series, a day's block of
// minutes and a fortnight's of hours each, about 400 transactions of 100 blocks) kept
// Azurite's one thread busy for 20 to 25 s (docs/soak.md, run 149): the blocks read whole
// and written back whole, 44 MB each way, and every query's requests waited behind them.
// A Rollup whose range ended long ago (a catch-up: pacedLag past the seal delay) is not
// paced: its windows are late already.
func (tr *Tiers) rollupPacer(to time.Time, works int) batch.Pace {
	if tr.now().Sub(to) > tr.cfg.SealDelay+pacedLag {
		return batch.Pace{}
	}
	return batch.NewPace(tr.cfg.Pace, works)
}

// nextGroup is how many series the group after one of n series whose blocks took size
// bytes holds, when a series has blocks blocks over a slice: as many as maxGroupBytes holds
// at that size a series, and at most group's bounds.
func nextGroup(group, blocks, n, size int) int {
	if size == 0 {
		return group
	}
	return max(1, min(maxRollupGroup, maxGroupBlocks/blocks, int(int64(maxGroupBytes)*int64(n)/int64(size))))
}

// sliceStarts lists the starts of the slices of [lo, hi) (Unix seconds, multiples of
// block) that overlap a raw table.
func sliceStarts(spans []span, lo, hi uint64, block time.Duration) []uint64 {
	var starts []uint64
	for _, sp := range spans {
		for s := max(lo, times.FloorSec(times.Unix(sp.From), block)); s < hi && times.At(s).Before(sp.To); s += uint64(block / time.Second) {
			if len(starts) == 0 || s > starts[len(starts)-1] {
				starts = append(starts, s)
			}
		}
	}
	return starts
}

// ensureTierTables makes the tier tables of [lo, hi) once, before the series' writers would
// each try at once. A dropped one is left dropped.
func (tr *Tiers) ensureTierTables(ctx context.Context, lo, hi uint64) error {
	for _, t := range tr.cfg.Tiers {
		for p := tierPeriod(t, lo); p < hi; p += uint64(t.Period / time.Second) {
			if err := tr.tables.ensure(ctx, tr.TierTable(t, p)); err != nil && !errors.Is(err, errTierDropped) {
				return err
			}
		}
	}
	return nil
}

// span is the part of a range in one raw period.
type span = tables.Span

// rawSpan is the part of a slice in one raw table.
type rawSpan struct {
	store    *chunked.Store
	from, to time.Time
}

// rollupGroup rolls up the windows w (of one slice) of a group of series (sorted by
// chunked.CompareSeries), and returns the size of the blocks it read. all says the group is
// every series.
func (tr *Tiers) rollupGroup(ctx context.Context, group []string, all bool, raw []rawSpan, w rollupWindows) (int, error) {
	stored, size, err := tr.groupBlocks(ctx, group, w)
	if err != nil {
		return 0, err
	}
	stagedOf := group
	if all {
		stagedOf = nil // every series: the filter need not name columns
	}
	staged, stagedHists, err := tr.reads.Staged(ctx, stagedOf, times.At(w.lo), times.At(w.hi), staging.Both)
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var packer *groupWriter // packed: the group's blocks are written many series a transaction
	if tr.keys.packed() {
		packer = newGroupWriter(tr, w)
	}
	jobs := make(chan rollupJob)
	var wg sync.WaitGroup
	for range tr.rollupWorkers(packer != nil) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				if err := tr.rollupScanned(ctx, j, w, packer); err != nil {
					cancel(fmt.Errorf("tsdb: rollup %q: %w", j.series, err))
				}
			}
		}()
	}
	// After the ETags: a histogram table made since holds late samples that flagged blocks.
	exists, err := tr.histTablesIn(ctx, times.At(w.lo), times.At(w.hi))
	if err != nil {
		return 0, err
	}
	hists := histPrefetch{histograms: tr.reads.Histograms, valid: tr.histogramNames, group: group, lo: w.lo, hi: w.hi, none: !exists, staged: stagedHists}
	err = tr.groupPoints(ctx, group, raw, staged, func(series string, pts []tablets.Point) bool {
		hs, err := hists.next(ctx, series)
		if err != nil {
			cancel(err)
			return false
		}
		j := rollupJob{series: series, points: pts, hists: hs, stored: stored[series]}
		if len(pts) == 0 && len(hs) == 0 && j.stored == nil {
			return true // nothing there, nothing rolled up before
		}
		select {
		case jobs <- j:
			return true
		case <-ctx.Done():
			return false
		}
	})
	close(jobs)
	wg.Wait()
	if cause := context.Cause(ctx); cause != nil {
		return 0, cause // a writer's error, or the caller's
	}
	if err != nil {
		return 0, err
	}
	if packer != nil {
		if err := packer.flush(ctx); err != nil {
			return 0, err
		}
	}
	return size, nil
}

// packedSenders is how many of a packed rollup's workers may be sending a full transaction
// while the others compute.
const packedSenders = 4

// rollupWorkers is how many goroutines roll up a group's series. A series layout's rollup
// writes a transaction a series, so it wants writeConcurrency of them. A packed one writes a
// transaction for up to 100 series: its workers mostly compute, and the computations take
// turns in the ComputeLimit. It has as many as that limit's slots, and packedSenders more to
// send what fills while the others compute. With 32, soak run 110 had about a hundred
// goroutines of the four tenants' rollups waiting (for a series, for the limit or for the
// account's requests) while one computed.
func (tr *Tiers) rollupWorkers(packed bool) int {
	if !packed {
		return writeConcurrency
	}
	return min(writeConcurrency, tr.compute().Slots()+packedSenders)
}

// rollupJob is one series' points of a slice, and its blocks stored there, by tier.
type rollupJob struct {
	series string
	points []tablets.Point
	hists  []tablets.HistogramPoint
	stored storedBlocks // nil: no block
}

// histPrefetchSeries is how many series' histogram samples a batched Rollup reads at once
// (a slice's samples of each are in memory together).
const histPrefetchSeries = 64

// histPrefetch reads the histogram samples of a group's series in [lo, hi), a few series'
// at a time, as the rollup of the group comes to them (in the group's order).
type histPrefetch struct {
	// histograms reads the samples of series in [from, to), staged ones included (the raw
	// part's histogram read).
	histograms func(ctx context.Context, names []string, from, to time.Time, staged map[string][]tablets.HistogramPoint) iter.Seq2[tablets.SeriesHistogram, error]
	// valid are the names that may hold histogram samples (histogramNames).
	valid  func(names []string) []string
	group  []string
	lo, hi uint64
	none   bool                                // no histogram table: nothing to read
	staged map[string][]tablets.HistogramPoint // the group's staged samples, read once
	upto   int                                 // the index in group of the first series not read yet
	read   map[string][]tablets.HistogramPoint
}

// next returns the samples of series, the next of the group not asked for yet.
func (h *histPrefetch) next(ctx context.Context, series string) ([]tablets.HistogramPoint, error) {
	if h.none {
		return nil, nil
	}
	if samples, ok := h.read[series]; ok {
		delete(h.read, series)
		return samples, nil
	}
	i := slices.Index(h.group[h.upto:], series)
	if i < 0 {
		return nil, fmt.Errorf("tsdb: rollup: series %q out of order", series)
	}
	batch := h.group[h.upto+i : min(h.upto+i+histPrefetchSeries, len(h.group))]
	h.upto += i + len(batch)
	h.read = make(map[string][]tablets.HistogramPoint, len(batch))
	for _, s := range batch {
		h.read[s] = nil
	}
	for sh, err := range h.histograms(ctx, h.valid(batch), times.At(h.lo), times.Earlier(times.At(h.hi), tablets.MaxTime), h.staged) {
		if err != nil {
			return nil, fmt.Errorf("tsdb: rollup: read histograms: %w", err)
		}
		if _, ok := h.read[sh.Series]; ok {
			h.read[sh.Series] = append(h.read[sh.Series], sh.HistogramPoint)
		}
	}
	samples := h.read[series]
	delete(h.read, series)
	return samples, nil
}

// rollupScanned writes one series' blocks from the points scanned; where a block changed
// since it was read (or appeared), it rolls the series' windows w up again by itself. With
// a packer (packed layout) it hands them to it, which writes them with other series'.
func (tr *Tiers) rollupScanned(ctx context.Context, j rollupJob, w rollupWindows, packer *groupWriter) error {
	writes, err := tr.computeWrites(ctx, j.series, j.stored, j.points, j.hists, w)
	if err != nil {
		return err
	}
	if packer != nil {
		return packer.add(ctx, writes)
	}
	err = tr.submitWrites(ctx, writes)
	if batch.IsConflict(err) {
		return tr.rollupSeries(ctx, j.series, w)
	}
	return err
}

// groupPoints calls each with every series of group (in order), its points in the raw
// spans (scanned) merged with its staged ones, until each returns false.
func (tr *Tiers) groupPoints(ctx context.Context, group []string, raw []rawSpan, staged map[string][]tablets.Point,
	each func(series string, pts []tablets.Point) bool) error {
	type puller struct {
		next func() (chunked.SeriesPoints, error, bool)
		head chunked.SeriesPoints
		ok   bool
	}
	pullers := make([]*puller, len(raw))
	for i, r := range raw {
		next, stop := iter.Pull2(r.store.ScanPoints(ctx, r.from, r.to, &chunked.ScanOptions{Series: group}))
		defer stop()
		pullers[i] = &puller{next: next}
	}
	advance := func(p *puller) error {
		sp, err, ok := p.next()
		if err != nil && !azerr.IsTableGone(err) {
			return fmt.Errorf("tsdb: rollup: %w", err)
		}
		p.head, p.ok = sp, ok && err == nil
		return nil
	}
	for _, p := range pullers {
		if err := advance(p); err != nil {
			return err
		}
	}
	for _, series := range group {
		var pts []tablets.Point
		for _, p := range pullers { // the raw spans in time order
			if p.ok && p.head.Series == series {
				pts = append(pts, p.head.Points...)
				if err := advance(p); err != nil {
					return err
				}
			}
		}
		if s := staged[series]; len(s) > 0 {
			var merged []tablets.Point
			for p := range staging.PointsMerge.One(staging.PointsOfSlice(pts), s) {
				merged = append(merged, p)
			}
			pts = merged
		}
		if !each(series, pts) {
			return nil
		}
	}
	return nil
}

// groupBlocks reads the blocks of a group of series that hold the windows w (see
// readSeriesBlocks), by series, as read, and their size in all: per tier table with windows
// in w, a scan of the keys from the group's first name to its last. Of a tier whose windows
// are written as tails, it reads only the keys (and ETags) of the blocks at the span's
// start, the tails' guards.
func (tr *Tiers) groupBlocks(ctx context.Context, group []string, w rollupWindows) (map[string]storedBlocks, int, error) {
	in := make(map[string]bool, len(group))
	for _, s := range group {
		in[s] = true
	}
	out := map[string]storedBlocks{}
	size := 0
	tiers := tr.cfg.Tiers
	tails := tr.tails(w)
	for i, t := range tiers {
		lo, hi := w.tiers[i][0], w.tiers[i][1]
		if lo >= hi {
			continue
		}
		blo, bhi := tr.storedSpan(t, lo, hi)
		sel := ""
		if tails[i] {
			blo, bhi, sel = times.FloorSec(lo, tr.blockSpan(t)), times.FloorSec(lo, tr.blockSpan(t))+1, "PartitionKey,RowKey"
		}
		err := tr.readTierEntities(ctx, t, blo, bhi, tr.keys.scanFilter(group, blo, bhi), sel, func(series string, raw []byte) {
			if !in[series] {
				return
			}
			if out[series] == nil {
				out[series] = make(storedBlocks, len(tiers))
			}
			out[series][i] = append(out[series][i], raw)
			size += len(raw)
		})
		if err != nil {
			return nil, 0, fmt.Errorf("tsdb: rollup: %w", err)
		}
	}
	return out, size, nil
}
