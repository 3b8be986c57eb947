package raw

import (
	"context"
	"slices"
	"time"

	"github.com/seed71701133/tablets/chunked"
	"github.com/seed71701133/tablets/rounding"
	"github.com/seed71701133/tablets/tsdb/internal/times"
)

// Warmed is what a Warm brought into the cache.
type Warmed struct {
	Series int   // the entries cached (a series a period)
	Points int   // their points
	Bytes  int64 // the cache's bytes they took
	Full   bool  // the cache reached the bound of a warm-up: the scan stopped there
}

// Warm brings into the cache the float points of every series from from to the present,
// as the reads of a dashboard's panels over that range would (the entries end where a read
// of the present ends, liveEnd; they begin at from, or earlier in a young table: see
// warmStart), with one scan of each period's table by ranges of keys
// (chunked's ScanPoints, pages of 1,000 chunks) instead of a read of each panel's series:
// a server just started answers its first dashboards from the cache. Each entry is of the
// generation of the period's change log read before the scan, so the reads after it check
// it against the changes since as any other (a change made during the scan makes the
// entries it overlaps read again, never kept stale). A series the cache holds as much of
// or more is left as it is. It stops once the cache holds half its bound (Full): a
// warm-up must not push out what it warms. Without a cache, or with a raw layout that does
// not scan (only chunked does), it does nothing.
func (floats *Floats) Warm(ctx context.Context, from time.Time) (Warmed, error) {
	var w Warmed
	r := floats.Store
	if r.cache == nil {
		return w, nil
	}
	now := r.now()
	spans, err := r.Spans(ctx, from, now)
	if err != nil {
		return w, err
	}
	for _, sp := range spans {
		if r.cache.full() {
			w.Full = true
			return w, nil
		}
		state, err := r.changes.State(ctx, sp.Period)
		if err != nil {
			return w, err
		}
		table, end := r.names.Table(r.kind, sp.Period), r.liveEnd(sp)
		_, err = r.inTable(sp.Period, func(t pointTable) error {
			scanner, ok := t.store.(*chunked.Store)
			if !ok {
				return nil
			}
			scanFrom, start, err := r.warmStart(ctx, scanner, sp)
			if err != nil {
				return err
			}
			for s, err := range scanner.ScanPoints(ctx, scanFrom, end, nil) {
				if err != nil {
					return err
				}
				if r.cache.full() {
					w.Full = true
					return nil
				}
				if !r.spillWidens(table, s.Series, start, ceilMilli(end)) {
					continue
				}
				before := r.cache.entries.Size()
				r.store(table, s.Series, state.Gen(), cachedSamples{}, false, s.Points, start, ceilMilli(end))
				w.Series++
				w.Points += len(s.Points)
				w.Bytes += int64(r.cache.entries.Size() - before)
			}
			return nil
		})
		if err != nil || w.Full {
			return w, err
		}
	}
	return w, nil
}

// warmStart is where Warm scans span sp's table from (scanFrom) and where its entries
// begin (start, Unix milliseconds): sp's start, or, where no chunk of the table is older
// than the partition holding sp's start (a table begun since: a young database, the
// first days of a period), that partition's start and the period's start. A scan reads
// whole partitions, so scanning from the partition's start costs no more, and a read of
// the whole period (a 7-day panel of a young database reads its raw table from the
// period's start) then finds its series cached. One query of the table's keys (the first
// chunk before the partition, if any) tells.
func (r *Store[S, T]) warmStart(ctx context.Context, scanner *chunked.Store, sp Span) (scanFrom time.Time, start int64, err error) {
	scanFrom, start = sp.From, ceilMilli(sp.From)
	periodStart := r.names.Start(sp.Period)
	if r.partition <= 0 {
		return scanFrom, start, nil
	}
	partStart := times.Later(rounding.Floor(sp.From, r.partition), periodStart)
	if partStart.After(periodStart) {
		for _, err := range scanner.ScanChunks(ctx, periodStart, partStart) {
			// A chunk (or an error): the table holds older samples, or may.
			return scanFrom, start, err
		}
	}
	return partStart, periodStart.UnixMilli(), nil
}

// full says whether the cache holds half its bound or more: where a warm-up stops (the
// cache's current generation is half the bound; what a warm-up adds past it pushes out
// what it added first).
func (c *Cache) full() bool { return int64(c.entries.Size()) >= c.maxBytes/2 }

// Warm brings into the cache the histogram samples of the series of names from from to the
// present, and the float points of the same series (mostly none: a histogram series' float
// table holds its float samples, if any), as the reads of a dashboard's panels of them
// would: the histogram tables have no scan by ranges of keys, so it reads the series named
// (the index's series with histogram samples, tsdb's Warm), by the reads a Select makes
// (pages of their chunks, by ranges of keys where many). Each entry is of the generation of
// the period's change log read before it, as every read's. It stops once the cache holds
// half its bound (Full), within a batch of warmHistBatch series; without a cache it reads
// nothing. Warmed counts the histogram series read, their samples and the bytes the cache
// took.
func (h *Hists) Warm(ctx context.Context, floats *Floats, names []string, from time.Time) (w Warmed, err error) {
	r := h.Store
	if r.cache == nil || len(names) == 0 {
		return w, nil
	}
	if r.cache.full() {
		w.Full = true
		return w, nil
	}
	now := r.now()
	if !from.Before(now) {
		return w, nil
	}
	before := r.cache.entries.Size()
	defer func() { w.Bytes = int64(r.cache.entries.Size() - before) }()
	// A batch at a time, so that it stops within a batch of the bound, as the floats' scan
	// stops within a series: a database of many native histogram series would otherwise
	// read them all, and push out of the cache what the warm-up cached first.
	for batch := range slices.Chunk(names, warmHistBatch) {
		if r.cache.full() {
			w.Full = true
			return w, nil
		}
		seen := map[string]bool{}
		for s, err := range h.WithStaged(ctx, batch, from, now, nil) {
			if err != nil {
				return w, err
			}
			if !seen[s.Series] {
				seen[s.Series] = true
				w.Series++
			}
			w.Points++
		}
		if _, err := floats.Prefetch(ctx, batch, from, now); err != nil {
			return w, err
		}
	}
	return w, nil
}

// warmHistBatch is how many series a histogram warm-up reads at once: a Select's batch.
const warmHistBatch = 64
