package raw

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/chunkenc"
	"github.com/seed71701133/tablets/internal/reqlimit"
	"github.com/seed71701133/tablets/rounding"
	"github.com/seed71701133/tablets/tsdb/internal/cache"
	"github.com/seed71701133/tablets/tsdb/internal/changelog"
	"github.com/seed71701133/tablets/tsdb/internal/times"
)

// Cache keeps the raw samples reads decoded, by table and series, with the range read and
// the generation of the period's raw change log (package changelog) they were read at, so
// that a read of the same series again (a refreshed panel, a zoom) reads only what changed
// since: a read asks the log (one small request a period, shared by the reads after the
// same staging reads) and reads from the tables only the times a change touched since
// (for each series it reads: the log holds ranges, not series), and the series the cache
// lacks. A read that reaches the present reads its table to
// the end of the period: what is after now costs nothing to read, and the next refresh
// finds it cached.
//
// A Fold's change carries a receipt (changelog.Receipt): the staging entities it moved.
// Where every change since an entry's generation that overlaps it is a Fold whose entities
// this process listed and holds the columns of (Config.FoldedFloats), the entry takes the
// folded points in without a read (takeInFolds): after each Fold, a refreshed panel over
// thousands of series used to read the folded minutes of each back, seven series a request.
//
// Every process that changes what the tables answer records it in the log before it can
// be seen otherwise (the Fold before deleting what it moved from the staging table, a
// direct write, Delete, Retain before it drops), and a read asks the log after its read of
// the staging table (Config.StagingReads): a cached sample is used only while no change
// recorded since touched its range, whichever process made it.
//
// An entry keeps what its reads ask for: when it grows, the samples before the earliest
// start its reads asked for in the last 10 to 20 minutes go (asked), so that a server's
// memory is that of what its panels read, not of every sample since its start.
//
// A Cache may be shared by the databases of a server (its tenants); it is bounded by the
// bytes of the samples it holds (two generations of cache.Gen). Safe for concurrent use.
type Cache struct {
	maxBytes int64
	counts   cache.Counts
	entries  *cache.Gen[cacheKey, cachedSamples]
	// foldedIn counts the entries brought up to a later generation with a Fold's samples
	// (takeInFolds), without a read.
	foldedIn atomic.Int64
	// notTakenIn counts, by FoldMiss, the entries a Fold's samples could not be taken
	// into: each then reads the table from the change on.
	notTakenIn [foldMisses]atomic.Int64
	// shared counts the series a read took from another's flight instead of reading them.
	shared atomic.Int64
	// spilled counts the series a read found beside those it was asked for and cached
	// (spill).
	spilled atomic.Int64

	mu      sync.Mutex
	flights map[cacheKey]*flight // the reads under way, by table and series
}

// flight is a read from a table under way (cachedSpan) of some series, from from to to
// (Unix milliseconds), at generation gen of the period's change log; done is closed once
// what it read is cached, or it failed.
type flight struct {
	gen      uint64
	from, to int64
	names    []string // its series
	done     chan struct{}
}

// Shared is how many times a read took a series from another read under way (a flight)
// instead of reading it from the table.
func (c *Cache) Shared() int64 { return c.shared.Load() }

// board takes the reads of the series of starts (by the start of each one's read, to end)
// from table at generation gen: with share, a series another read is reading now over a
// range holding [its start, to) at gen is left to it (taken out of starts, and returned
// under the flight to wait for); the others are boarded on flights of this read (own,
// one a start), which land must end. A read waits only for flights boarded before its
// own, which never wait for it: no cycle.
//
// A series read whole (from from) that another read is reading from a later time to the
// end of this one (the 1-hour panel of a metric under way as its 7-day panel asks) is
// left to it from that time on too: it is returned under that flight to wait for, and in
// heads by that time (the end of what this read must read itself, from from, not boarded:
// no other read waits for it).
func (c *Cache) board(table string, gen uint64, starts map[int64][]string, from, to, end int64, share bool) (waits map[*flight][]string, own []*flight, heads map[int64][]string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.flights == nil {
		c.flights = map[cacheKey]*flight{}
	}
	for start, names := range starts {
		var f *flight
		var mine []string
		for _, name := range names {
			k := cacheKey{table, name}
			if o := c.flights[k]; share && o != nil && o.gen == gen && o.to >= to && (o.from <= start || start == from && o.from < to) {
				if waits == nil {
					waits = map[*flight][]string{}
				}
				waits[o] = append(waits[o], name)
				if o.from > start {
					if heads == nil {
						heads = map[int64][]string{}
					}
					heads[o.from] = append(heads[o.from], name)
				}
				continue
			}
			if f == nil {
				f = &flight{gen: gen, from: start, to: end, done: make(chan struct{})}
				own = append(own, f)
			}
			c.flights[k] = f
			f.names = append(f.names, name)
			mine = append(mine, name)
		}
		if len(mine) == 0 {
			delete(starts, start)
		} else {
			starts[start] = mine
		}
	}
	return waits, own, heads
}

// untouched returns the series of names that the cache holds nothing of in table and that
// no read is reading from it now: those a prefetch reads (Floats.Prefetch). A series
// under way is left to the reads that wait for it, which a prefetch could only make read
// more (the head of a longer read is not a flight others join).
func (c *Cache) untouched(table string, names []string) []string {
	var out []string
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, name := range names {
		k := cacheKey{table, name}
		if _, cached := c.entries.Peek(k); !cached && c.flights[k] == nil {
			out = append(out, name)
		}
	}
	return out
}

// land ends this read's flights of table: their series are no longer under way here
// (unless a later read boarded its own for them), and their waiters go on.
func (c *Cache) land(table string, own []*flight) {
	if len(own) == 0 {
		return
	}
	c.mu.Lock()
	for _, f := range own {
		for _, name := range f.names {
			if k := (cacheKey{table, name}); c.flights[k] == f {
				delete(c.flights, k)
			}
		}
	}
	c.mu.Unlock()
	for _, f := range own {
		close(f.done)
	}
}

// waitFlights waits for the flights of waits to land, and returns the names they held.
func waitFlights(ctx context.Context, waits map[*flight][]string) ([]string, error) {
	var names []string
	defer reqlimit.TallyJoined(ctx, time.Now())
	for f, ns := range waits {
		select {
		case <-f.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		names = append(names, ns...)
	}
	return names, nil
}

// Spilled is how many series a read cached that it was not asked for (or more of them than
// was cached): a read of many series by the range of their keys reads every series of the
// range.
func (c *Cache) Spilled() int64 { return c.spilled.Load() }

// FoldedIn is how many times an entry took in a Fold's samples without reading them.
func (c *Cache) FoldedIn() int64 { return c.foldedIn.Load() }

// FoldMiss is why an entry changed by Folds did not take their samples in (takeInFolds),
// and read its table from the change on instead.
type FoldMiss int

const (
	// FoldMissLog: the change log does not say that Folds with their receipts were every
	// change since the entry was read (a direct write, a Delete or Retain; a Fold whose
	// rounds read different entities; more changes since than the log keeps).
	FoldMissLog FoldMiss = iota
	// FoldMissReceipt: a receipt's entities are not all known at the ETags the Fold read
	// (no listing of this process matched it, or an entity left the staging cache).
	FoldMissReceipt
	// FoldMissColumn: the series' column of an entity the Fold read is not cached.
	FoldMissColumn
	// FoldMissOverlap: a folded sample is at a millisecond the entry holds (which one
	// the table keeps is the writes' priorities').
	FoldMissOverlap
	foldMisses
)

// String is the reason's label value: log, receipt, column or overlap.
func (m FoldMiss) String() string {
	return [...]string{"log", "receipt", "column", "overlap"}[m]
}

// FoldMisses is how many times an entry changed by Folds read its table instead of taking
// their samples in, by reason.
func (c *Cache) FoldMisses(m FoldMiss) int64 { return c.notTakenIn[m].Load() }

// NewCache returns a cache of at most about maxBytes of samples (at least 1 MiB).
func NewCache(maxBytes int64) *Cache {
	maxBytes = max(maxBytes, 1<<20)
	return &Cache{maxBytes: maxBytes, entries: cache.New(int(maxBytes), cachedCost)}
}

// Stats returns the cache's counts: Hits are series a read took from the cache whole,
// Misses those it read from a table (whole, or from a change on).
func (c *Cache) Stats() cache.Stats { return cache.StatsOf(&c.counts, c.entries) }

type cacheKey struct{ table, series string }

// cachedSamples are a series' samples of a table in [from, to) (Unix milliseconds), read at
// generation gen of the period's change log: float points as one chunk of the chunked
// layout's codec (package chunkenc, times in milliseconds), histogram samples as read.
// Never changed once cached (a read that extends it caches a new one).
//
// The floats are kept encoded because a dashboard's working set did not fit decoded: four
// tenants of 18,746 series, an hour and more of samples each at 15 s, are 340 MB at 16
// bytes a sample, over the default bound (256 MiB), and the soak's refreshes read back
// from the account what the cache had just dropped. Encoded, a scraped series takes one
// to two bytes a sample; decoding it at each hit costs a few nanoseconds a sample. The
// chunk is cut every segmentPoints samples, so that a read of the entry's last minutes
// (a refresh) decodes those, not the week before them.
type cachedSamples struct {
	gen      uint64
	from, to int64
	floats   []floatSegment
	hists    []tablets.HistogramPoint
	asked    asked
}

// asked is what the reads of an entry asked for lately: the earliest start among those of
// the window that began at at (Unix milliseconds by the DB's clock), and among those of the
// window before it. When the entry grows (a Fold taken in, a refresh's read of the newest
// minutes) it keeps its samples from the earlier of the two on, and lets the segments
// wholly before it go (trimmed): an entry of a panel over the last hour kept every sample
// since the warm-up's start (2 hours before the server's start) and grew by each Fold, the
// cache with it, until its bound (docs/soak.md, run 161). A read of an older start reads
// the table for it, once, as the read that made the entry did. A window is twice the
// longest refresh Grafana offers (5 minutes), so that a panel refreshed that rarely is
// always within the two. The zero asked (an entry no read has been counted on yet) keeps
// everything.
type asked struct {
	at, from, prev int64
}

// askWindow is the length of an asked window.
const askWindow = 10 * time.Minute

// seen is a after a read from from at now (Unix milliseconds), and whether it changed.
func (a asked) seen(from, now int64) (asked, bool) {
	switch w := askWindow.Milliseconds(); {
	case a.at == 0 || now-a.at >= 2*w:
		return asked{at: now, from: from, prev: from}, true
	case now-a.at >= w:
		return asked{at: now, from: from, prev: a.from}, true
	case from < a.from:
		a.from = from
		return a, true
	}
	return a, false
}

// trimmed is where entry c keeps its samples from when it grows: before the segment that
// holds the earliest start its reads asked for (asked), float segments go whole (no
// segment is encoded again for it), histograms one by one; c.from when nothing goes.
func trimmed(c cachedSamples) int64 {
	if c.asked.at == 0 {
		return c.from
	}
	cut := min(c.asked.from, c.asked.prev)
	if len(c.hists) > 0 {
		return max(c.from, cut)
	}
	k := sort.Search(len(c.floats), func(k int) bool { return c.floats[k].last >= cut })
	if k == 0 {
		return c.from
	}
	return max(c.from, c.floats[k-1].last+1)
}

// floatSegment is a run of an entry's float samples, oldest first: the Unix millisecond
// of its last, and the samples as a chunk (chunkenc, times in milliseconds).
type floatSegment struct {
	last  int64
	chunk []byte
}

// segmentPoints is how many samples a floatSegment holds at most: 32 minutes at a 15 s
// scrape, so that a refresh's last minutes (a rate's window before the newest steps)
// decode one or two segments, a hundred-odd samples, where segments of 512 decoded the
// two hours before them too; a segment's overhead and its first sample's full width are
// then about a third of a byte a sample.
const segmentPoints = 128

// segmentOverhead is about what a floatSegment costs besides its chunk.
const segmentOverhead = 40

func floatBytes(segs []floatSegment) int {
	n := 0
	for _, sg := range segs {
		n += segmentOverhead + len(sg.chunk)
	}
	return n
}

// cachedOverhead is about what an entry costs besides its samples: the keys, the slices'
// headers, the maps' share.
const cachedOverhead = 200

// histogramBytes is about what a cached histogram sample holds: its spans and buckets (a
// typical latency histogram has 10 to 40 buckets).
const histogramBytes = 400

func cachedCost(k cacheKey, c cachedSamples) int {
	return cachedOverhead + len(k.table) + len(k.series) + floatBytes(c.floats) + histogramBytes*len(c.hists)
}

// sampleCache is how a kind's samples S go into a cache entry and back.
type sampleCache[S any] struct {
	// ms is a sample's time in Unix milliseconds, and whether it is a whole one (the cache
	// holds only those).
	ms func(S) (int64, bool)
	// put sets the entry's samples to samples (sorted by time, each time once, whole
	// milliseconds): false when they cannot be kept so (the entry is then not cached).
	put func(c *cachedSamples, samples []S) bool
	// each passes yield the entry's samples at from <= time < to, oldest first, until it
	// returns false (each then returns false).
	each func(c *cachedSamples, from, to int64, yield func(S) bool) (bool, error)
	// splice sets the entry's samples to those it holds at from <= time < to, then add
	// (sorted, each after the last of those): what put of them all would, without decoding
	// and encoding again what it keeps whole. False (the entry unchanged) when add does not
	// come after them, or put would refuse it.
	splice func(c *cachedSamples, from, to int64, add []S) (bool, error)
}

var floatCache = sampleCache[tablets.Point]{
	ms:  func(p tablets.Point) (int64, bool) { return p.Time.UnixMilli(), p.Time.Nanosecond()%1e6 == 0 },
	put: putFloats,
	each: func(c *cachedSamples, from, to int64, yield func(tablets.Point) bool) (bool, error) {
		more := true
		// The first segment whose last sample is at or after from.
		for k := sort.Search(len(c.floats), func(k int) bool { return c.floats[k].last >= from }); more && k < len(c.floats); k++ {
			past := false
			err := chunkenc.Decode(c.floats[k].chunk, func(t uint64, v float64) {
				switch ms := int64(t); {
				case ms >= to:
					past = true
				case more && ms >= from:
					more = yield(tablets.Point{Time: time.UnixMilli(ms).UTC(), Value: v})
				}
			})
			if err != nil {
				return false, fmt.Errorf("tsdb: raw cache: %w", err)
			}
			if past {
				break
			}
		}
		return more, nil
	},
	splice: spliceFloats,
}

// putFloats is floatCache's put.
func putFloats(c *cachedSamples, pts []tablets.Point) bool {
	times, values := make([]uint64, len(pts)), make([]float64, len(pts))
	for i, p := range pts {
		ms := p.Time.UnixMilli()
		if ms < 0 || p.Time.Nanosecond()%1e6 != 0 || i > 0 && uint64(ms) <= times[i-1] {
			return false // the codec's times: strictly increasing, not before the epoch
		}
		times[i], values[i] = uint64(ms), p.Value
	}
	c.floats, c.hists = nil, nil
	for i := 0; i < len(pts); i += segmentPoints {
		j := min(i+segmentPoints, len(pts))
		c.floats = append(c.floats, floatSegment{last: int64(times[j-1]), chunk: chunkenc.Append(nil, times[i:j], values[i:j])})
	}
	return true
}

// spliceFloats is floatCache's splice. A Fold taken in, or a refresh's read of the newest
// minutes, adds a few samples after an entry of hours: put of them all decoded and
// encoded every segment again, for every series of the tenant on every server at each
// Fold (its garbage the servers' peaks of memory, docs/soak.md run 160). The segments
// wholly inside [from, to) are kept as they are (their chunks are never changed, so they
// are shared with the entry they came from); the one that from cuts, and the last kept with
// what to cuts of the next and add, are encoded again.
func spliceFloats(c *cachedSamples, from, to int64, add []tablets.Point) (bool, error) {
	segs := c.floats
	lo := sort.Search(len(segs), func(k int) bool { return segs[k].last >= from }) // the first with a sample at or after from
	hi := sort.Search(len(segs), func(k int) bool { return segs[k].last >= to })   // the first with one at or after to
	hi = max(hi, lo)                                                               // (an empty range: none kept)
	decode := func(seg floatSegment, out []tablets.Point) ([]tablets.Point, error) {
		err := chunkenc.Decode(seg.chunk, func(t uint64, v float64) {
			if ms := int64(t); ms >= from && ms < to {
				out = append(out, tablets.Point{Time: time.UnixMilli(ms).UTC(), Value: v})
			}
		})
		if err != nil {
			return nil, fmt.Errorf("tsdb: raw cache: %w", err)
		}
		return out, nil
	}
	// kept: whole segments; head: a first segment that from cuts, encoded again; tail: the
	// samples encoded again after the kept ones (of the last segment before hi, and of hi).
	kept := segs[lo:hi]
	var head []tablets.Point
	if len(kept) > 0 {
		_, first, _, err := chunkenc.Header(kept[0].chunk)
		if err != nil {
			return false, fmt.Errorf("tsdb: raw cache: %w", err)
		}
		if int64(first) < from {
			if head, err = decode(kept[0], nil); err != nil {
				return false, err
			}
			kept = kept[1:]
		}
	}
	var tail []tablets.Point
	if len(kept) > 0 {
		var err error
		if tail, err = decode(kept[len(kept)-1], nil); err != nil {
			return false, err
		}
		kept = kept[:len(kept)-1]
	}
	if hi < len(segs) {
		var err error
		if tail, err = decode(segs[hi], tail); err != nil {
			return false, err
		}
	}
	last := int64(math.MinInt64) // of the samples before add
	switch {
	case len(tail) > 0:
		last = tail[len(tail)-1].Time.UnixMilli()
	case len(kept) > 0:
		last = kept[len(kept)-1].last
	case len(head) > 0:
		last = head[len(head)-1].Time.UnixMilli()
	}
	if len(add) > 0 && (add[0].Time.UnixMilli() <= last || add[0].Time.Nanosecond()%1e6 != 0) {
		return false, nil
	}
	var headSeg, tailSegs cachedSamples
	if !putFloats(&headSeg, head) || !putFloats(&tailSegs, append(tail, add...)) {
		return false, nil
	}
	c.floats = slices.Concat(headSeg.floats, kept, tailSegs.floats)
	c.hists = nil
	return true, nil
}

var histCache = sampleCache[tablets.HistogramPoint]{
	ms: func(h tablets.HistogramPoint) (int64, bool) { return h.Time.UnixMilli(), h.Time.Nanosecond()%1e6 == 0 },
	put: func(c *cachedSamples, hs []tablets.HistogramPoint) bool {
		c.floats, c.hists = nil, slices.Clone(hs)
		return true
	},
	each: func(c *cachedSamples, from, to int64, yield func(tablets.HistogramPoint) bool) (bool, error) {
		for i := sort.Search(len(c.hists), func(i int) bool { return c.hists[i].Time.UnixMilli() >= from }); i < len(c.hists); i++ {
			if c.hists[i].Time.UnixMilli() >= to {
				break
			}
			if !yield(c.hists[i]) {
				return false, nil
			}
		}
		return true, nil
	},
	splice: func(c *cachedSamples, from, to int64, add []tablets.HistogramPoint) (bool, error) {
		hs := c.hists
		lo := sort.Search(len(hs), func(i int) bool { return hs[i].Time.UnixMilli() >= from })
		hi := sort.Search(len(hs), func(i int) bool { return hs[i].Time.UnixMilli() >= to })
		kept := hs[lo:max(lo, hi)]
		for i, h := range add {
			prev := int64(math.MinInt64)
			switch {
			case i > 0:
				prev = add[i-1].Time.UnixMilli()
			case len(kept) > 0:
				prev = kept[len(kept)-1].Time.UnixMilli()
			}
			if h.Time.UnixMilli() <= prev {
				return false, nil
			}
		}
		c.floats, c.hists = nil, slices.Concat(kept, add)
		return true, nil
	},
}

// samples are the entry's samples at from <= time < to, oldest first.
func (sc sampleCache[S]) samples(c *cachedSamples, from, to int64) ([]S, error) {
	var out []S
	_, err := sc.each(c, from, to, func(s S) bool { out = append(out, s); return true })
	return out, err
}

// ceilMilli is t in Unix milliseconds, rounded up: a sample of whole milliseconds is at or
// after t if and only if its milliseconds are at or after ceilMilli(t).
func ceilMilli(t time.Time) int64 {
	if t.Nanosecond()%1e6 != 0 {
		return t.UnixMilli() + 1 // times of tsdb are not before the Unix epoch
	}
	return t.UnixMilli()
}

// liveMargin: a read whose range ends after now less this is a read of the present (a
// dashboard's), which reads its table to the end of the period.
const liveMargin = 5 * time.Minute

// LogKey is the RowKey of period p's entity of the raw change log: its start in Unix
// seconds, 12 digits (docs/format.md, "The catalog").
func LogKey(p uint64) string { return fmt.Sprintf("%012d", p) }

// RecordSpans records in the raw change log a change of each span's range in its period.
func RecordSpans(ctx context.Context, log *changelog.Log, spans []Span) error {
	ranges := map[uint64]changelog.Range{}
	for _, sp := range spans {
		changelog.Widen(ranges, sp.Period, sp.From.UnixMilli(), ceilMilli(sp.To))
	}
	return log.Record(ctx, ranges)
}

// RecordRange records in the raw change log a change of [from, to) in each period where a
// table of stores exists or may exist (Store.Spans): a Delete's, before or after its
// deletes (some may be gone), so that no read cache answers with what it deleted after.
func RecordRange(ctx context.Context, log *changelog.Log, from, to time.Time, stores ...interface {
	Spans(ctx context.Context, from, to time.Time) ([]Span, error)
}) error {
	var spans []Span
	for _, st := range stores {
		sp, err := st.Spans(ctx, from, to)
		if err != nil {
			return err
		}
		spans = append(spans, sp...)
	}
	return RecordSpans(ctx, log, spans)
}

// cachedSpan passes emit the samples of the series in Span sp, from the cache where the
// change log says they still stand, else from the table (and caches them). It returns gone
// for a table that is gone.
//
// A series another read is reading from the same table now (a flight: the panels of a
// dashboard opened at once, over the same metric), over a range holding this one's, at the
// generation of the log this read has, is not read again: this read waits for that one,
// then takes the series from the cache as a later read would. A series this read reads
// whole, which another read is reading from a later time to this one's end (the 1-hour
// panel of a metric under way as its 6-hour or 7-day panel asks), this read reads itself
// only up to that time, and joins the rest from that one's. What it still lacks then (the
// other read failed, or cached nothing), it reads itself.
//
// With run (float points only), a segment of a series' cached entry that lies whole in the
// span is offered to run as it is kept, encoded; one run does not take is decoded and
// passed to emit sample by sample.
func (r *Store[S, T]) cachedSpan(ctx context.Context, sp Span, series []string, emit func(series string, s S) bool, run func(FloatRun) (taken, more bool)) (bool, error) {
	state, err := r.changes.State(ctx, sp.Period)
	if err != nil { // the log cannot be read: read the table, and cache nothing
		return r.inTable(sp.Period, func(t T) error { return t.queryMany(ctx, series, sp.From, sp.To, emit) })
	}
	if noSamplesFrom(state, ceilMilli(sp.From)) {
		// The table holds nothing of the span at this state (the hull of its changes ends
		// before it): a read of the present before the next Fold, whose staged samples
		// are all there is, looks up none of its series.
		return false, nil
	}
	rd := spanRead[S]{table: r.names.Table(r.kind, sp.Period), state: state, from: ceilMilli(sp.From), to: ceilMilli(sp.To),
		readTo: r.liveEnd(sp), kept: make(map[string]cachedSamples, len(series)), read: make(map[string][]S, len(series))}
	pending, share := series, true
	for len(pending) > 0 {
		waits, gone, err := r.readMissing(ctx, sp.Period, &rd, pending, share)
		switch {
		case err != nil:
			return false, err
		case gone:
			return true, nil
		}
		if pending, err = waitFlights(ctx, waits); err != nil {
			return false, err
		}
		share = false // once: what another read did not leave in the cache, this one reads
	}
	for _, name := range series {
		// Emit the cached samples of [from, c.to), then the fresh ones of [.., to).
		if c, cached := rd.kept[name]; cached {
			var more bool
			if run != nil && len(c.floats) > 0 {
				more, err = r.eachRun(&c, name, rd.from, min(c.to, rd.to), emit, run)
			} else {
				more, err = r.cached.each(&c, rd.from, min(c.to, rd.to), func(s S) bool { return emit(name, s) })
			}
			if err != nil || !more {
				return false, err
			}
		}
		for _, s := range rd.read[name] {
			if ms, _ := r.cached.ms(s); ms >= rd.to {
				break
			}
			if !emit(name, s) {
				return false, nil
			}
		}
	}
	return false, nil
}

// FloatRun is a run of a series' float points passed whole, as the raw cache keeps them: a
// chunk (internal/chunkenc, times in Unix milliseconds) of N points, from First to Last,
// all inside the read's range. The chunk is shared with the cache and never changed: a
// reader keeps it as it is (a Series holds its floats in such chunks), and decodes it
// only as it iterates over it.
//
// Decoding every cached point into a tablets.Point, merging it with the staged points and
// appending it to a Series was half of the server's CPU in the soak's first minute (a
// dashboard's first panels over 12,000 cached series); a run costs a slice header.
type FloatRun struct {
	Series      string
	Chunk       []byte
	N           int
	First, Last int64
}

// eachRun passes the samples of cached entry c of series name at from <= time < to, oldest
// first, as each does, but offers run every segment that lies whole in that range; a
// segment run does not take is decoded and passed to emit. It returns false once emit or
// run said to stop.
func (r *Store[S, T]) eachRun(c *cachedSamples, name string, from, to int64, emit func(string, S) bool, run func(FloatRun) (taken, more bool)) (bool, error) {
	segs := c.floats
	for k := sort.Search(len(segs), func(k int) bool { return segs[k].last >= from }); k < len(segs); k++ {
		seg := segs[k]
		if seg.last < to {
			n, first, last, err := chunkenc.Header(seg.chunk)
			if err == nil && n > 0 && int64(first) >= from && int64(last) == seg.last {
				taken, more := run(FloatRun{Series: name, Chunk: seg.chunk, N: n, First: int64(first), Last: int64(last)})
				if !more {
					return false, nil
				}
				if taken {
					continue
				}
			}
		}
		one := cachedSamples{floats: segs[k : k+1]}
		more, err := r.cached.each(&one, from, to, func(s S) bool { return emit(name, s) })
		if err != nil || !more {
			return false, err
		}
		if seg.last >= to {
			break
		}
	}
	return true, nil
}

// spanRead is what a cachedSpan gathers: for each series, its entry from the cache as far
// as it stands (kept) and the samples read from the table after it (read).
type spanRead[S any] struct {
	table    string
	state    changelog.State
	from, to int64     // the span, in Unix milliseconds
	readTo   time.Time // where reads of the table end (liveEnd)
	kept     map[string]cachedSamples
	read     map[string][]S
	// heads are the series whose read from from this read made only up to a time (to), the
	// rest left to another's read under way (Cache.board): joined to what that one cached.
	heads map[string]headRead[S]
}

// headRead is the samples of a series read from a span's start up to to (Unix
// milliseconds), which another read's samples from to on complete.
type headRead[S any] struct {
	to      int64
	samples []S
}

// readMissing looks the series names up in the cache, reads from period p's table what does
// not stand there, and caches it, into rd. With share, the series that another read is
// reading now (a flight, see cachedSpan) are left for it: the flights to wait for are
// returned, with the names each holds. gone: the table is gone.
func (r *Store[S, T]) readMissing(ctx context.Context, p uint64, rd *spanRead[S], names []string, share bool) (map[*flight][]string, bool, error) {
	from, to, table := rd.from, rd.to, rd.table
	readEnd := ceilMilli(rd.readTo)
	// Each series is a hit (all of [from, to) cached and standing), extends its entry (from
	// where it stops standing), or is read whole; the reads group by their start.
	starts := map[int64][]string{}
	entries := make(map[string]cachedSamples, len(names))
	now := r.now().UnixMilli()
	for _, name := range names {
		if c, ok := r.cache.entries.Get(cacheKey{table, name}); ok {
			var changed bool
			if c.asked, changed = c.asked.seen(from, now); changed {
				r.cache.entries.Add(cacheKey{table, name}, c)
			}
			entries[name] = c
		}
	}
	r.takeInFolds(rd.state, table, entries)
	hits := 0
	for _, name := range names {
		c, ok := entries[name]
		if ok {
			c = standing(rd.state, c, from)
		}
		head, headed := rd.heads[name]
		delete(rd.heads, name)
		if headed && ok && c.from <= head.to && c.to >= to && c.from > from {
			if j, whole := r.joined(head, c, from, rd.state.Gen()); whole {
				rd.kept[name] = j // the head this read made, the rest another's
				r.cache.entries.Add(cacheKey{table, name}, j)
				continue
			}
		}
		switch {
		case ok && c.from <= from && c.to >= to:
			rd.kept[name] = c
			hits++
			if c.gen != rd.state.Gen() {
				// A hit that still stands: cached again at the current generation, as far
				// as it stands (its samples are never changed: the slices are shared).
				c.gen = rd.state.Gen()
				r.cache.entries.Add(cacheKey{table, name}, c)
			}
		case ok && c.from <= from && c.to > from:
			rd.kept[name] = c // and read from where it stops standing
			starts[c.to] = append(starts[c.to], name)
		default:
			delete(rd.kept, name)
			starts[from] = append(starts[from], name)
		}
	}
	r.cache.counts.Hit(hits)
	// A group whose read would find nothing is not read: the log, at this read's state,
	// knows that no change of the period touched its range (noSamplesFrom).
	var empty []string
	for start, group := range starts {
		if noSamplesFrom(rd.state, start) {
			empty = append(empty, group...)
			delete(starts, start)
			r.cache.counts.Miss(len(group))
		}
	}
	waits, own, heads := r.cache.board(table, rd.state.Gen(), starts, from, to, readEnd, share)
	defer r.cache.land(table, own)
	for _, ns := range waits {
		for _, name := range ns {
			delete(rd.kept, name) // looked up again once the flight landed
		}
		r.cache.shared.Add(int64(len(ns)))
	}
	// The reads of the table: each group of starts to where reads end, then each group of
	// heads from from to where another's read under way takes them up.
	type tableRead struct {
		from  int64
		to    time.Time
		names []string
		head  bool
	}
	var reads []tableRead
	for _, start := range slices.Sorted(maps.Keys(starts)) {
		reads = append(reads, tableRead{start, rd.readTo, starts[start], false})
		r.cache.counts.Miss(len(starts[start]))
	}
	for _, until := range slices.Sorted(maps.Keys(heads)) {
		reads = append(reads, tableRead{from, time.UnixMilli(until).UTC(), heads[until], true})
		r.cache.counts.Miss(len(heads[until]))
		if rd.heads == nil {
			rd.heads = map[string]headRead[S]{}
		}
		for _, name := range heads[until] {
			rd.heads[name] = headRead[S]{to: until}
		}
	}
	for _, rt := range reads {
		gone, err := r.inTable(p, func(t T) error {
			rctx := ctx
			if !rt.head && rt.from == from {
				// Only where the cache holds less of the series than this read (spill): the
				// others' chunks are not even gathered.
				widens := func(name string) bool { return r.spillWidens(table, name, from, readEnd) }
				rctx = t.spilling(ctx, widens, func(name string, samples []S) { r.spill(table, name, rd.state.Gen(), samples, from, readEnd) })
			}
			return t.queryMany(rctx, rt.names, time.UnixMilli(rt.from).UTC(), rt.to, func(name string, s S) bool {
				if rt.head {
					h := rd.heads[name]
					h.samples = append(h.samples, s)
					rd.heads[name] = h
				} else {
					rd.read[name] = append(rd.read[name], s)
				}
				return true
			})
		})
		switch {
		case err != nil:
			return nil, false, err
		case gone && rd.state.Gen() == 0:
			// No change was ever recorded in the period: its table was never made (a range
			// reaching back into a period before the database's first, as a 7-day panel of
			// a young one does). Its series are cached empty at generation 0, as an empty
			// table's would be, so that the reads of such ranges do not ask again until a
			// change is recorded there (a write records one after storing its samples).
			// A later read of the cache finds them empty rather than gone, which changes
			// nothing: a period without a change was not dropped (Retain records first).
			for _, name := range names {
				if _, hit := rd.kept[name]; !hit {
					r.store(table, name, 0, cachedSamples{}, false, nil, from, readEnd)
				}
			}
			return nil, true, nil
		case gone:
			return nil, true, nil
		}
	}
	for _, group := range append(slices.Collect(maps.Values(starts)), empty) {
		for _, name := range group {
			c, cached := rd.kept[name]
			r.store(table, name, rd.state.Gen(), c, cached, rd.read[name], from, readEnd)
		}
	}
	return waits, false, nil
}

// noSamplesFrom reports whether a period's table holds no sample from from on (Unix
// milliseconds) at state: the log has recorded changes and knows the hull of them all, and
// every one ended by from. Each sample the table holds was written by a recorded change
// (every writer records), so that a read of the present (a rule's, an instant query's, a
// panel's newest steps) before the next Fold costs no request of the table: the staged
// samples are all there is. The answer is as good as the state, as a read of the table at
// it would be: a change recorded later makes what was cached empty stand only where it does
// not overlap. Only what comes after the hull is taken as empty, and never at generation
// 0: a table written by a version before the logs (2026-11-29) holds samples no change
// recorded, after the hull's end only until the first Fold recorded in its period (a
// Fold records the newest minutes); a table of no change is read, found gone or not, and
// cached at generation 0 as before.
func noSamplesFrom(state changelog.State, from int64) bool {
	if state.Gen() == 0 {
		return false
	}
	h, ok := state.Hull()
	return ok && h.To <= from
}

// spill caches the samples of [from, end) of a series a read of others found beside them
// (Table.spilling), read at generation gen, as a read of that series would have: where the
// cache holds less of it (spillWidens).
func (r *Store[S, T]) spill(table, name string, gen uint64, samples []S, from, end int64) {
	if !r.spillWidens(table, name, from, end) {
		return
	}
	r.store(table, name, gen, cachedSamples{}, false, samples, from, end)
	r.cache.spilled.Add(1)
}

// spillWidens says whether a read of [from, end) of a series beside those it was asked for
// holds more of it than the cache: the cache holds nothing of it, or an entry within
// [from, end) that begins later (a 1-hour panel's, beside a read of a 7-day panel's
// series: each 7-day panel over other series read the hour's chunks again, whole key ranges
// of them). An entry that reaches further than end is left as it is: a read of the series
// extends it. The entry replaced may be of a later generation than the read: the read's
// samples stand where no change since its generation overlaps them, as any entry's.
func (r *Store[S, T]) spillWidens(table, name string, from, end int64) bool {
	c, ok := r.cache.entries.Peek(cacheKey{table, name})
	return !ok || from < c.from && c.to <= end
}

// liveEnd is where a read of span sp reads its table to: sp's end, or for a read of the
// present (a dashboard's, a rule's), the end of the partition holding now and liveMargin
// (within the period): what is after now costs nothing to read, and the next refresh finds
// it cached. Not the period's end: a range over several of a series' partitions costs its
// filter two comparisons more, and a request reads fewer series (Azure's 15 comparisons a
// filter): a read of the last hour at 100 targets read 3.5 series a request instead of 7.
func (r *Store[S, T]) liveEnd(sp Span) time.Time {
	now := r.now()
	end := r.names.End(sp.Period)
	if !sp.To.After(now.Add(-liveMargin)) || !end.After(sp.To) {
		return sp.To
	}
	if r.partition > 0 {
		// Partitions start at multiples of their span since the Unix epoch.
		next := rounding.Floor(now.Add(liveMargin), r.partition).Add(r.partition)
		end = times.Earlier(end, times.Later(next, sp.To))
	}
	return end
}

// standing is what of entry c still stands at state, for a read from from on: [c.from,
// until), until the first change after c's generation that overlaps the entry. When that
// change is before from, the part from from on is judged alone, and the entry then starts
// at from: a fold records the minutes before a query's range (the fold leaves the last 5
// to 15 minutes staged), and a rule or a refreshed panel over the last minutes must not
// read every series again for it. Measured with 1,000 rules over 10,000 series: after the
// hourly fold every evaluation read its series anew, and evaluations lagged by a minute.
func standing(state changelog.State, c cachedSamples, from int64) cachedSamples {
	until := state.ValidUntil(c.gen, c.from, c.to)
	if until < from && c.from < from && from < c.to {
		if u := state.ValidUntil(c.gen, from, c.to); u > from {
			c.from, until = from, u
		}
	}
	c.to = until
	return c
}

// store caches a series' samples read at generation gen: those of the entry c still
// standing (when cached), then the fresh ones read, up to end; or only the fresh ones, from
// from. A series with a sample not of whole milliseconds is not cached.
func (r *Store[S, T]) store(table, name string, gen uint64, c cachedSamples, cached bool, fresh []S, from, end int64) {
	for _, s := range fresh {
		if _, whole := r.cached.ms(s); !whole {
			return
		}
	}
	var all []S
	start := from
	next := c
	spliced := false
	if cached {
		// The fresh samples were read from where the entry stops standing: they come after
		// what it keeps, which is kept as it is encoded, from where its reads still ask.
		start = trimmed(c)
		var err error
		if spliced, err = r.cached.splice(&next, start, c.to, fresh); err != nil {
			r.cache.entries.Remove(cacheKey{table, name})
			return
		}
		if !spliced {
			if all, err = r.cached.samples(&c, start, c.to); err != nil {
				r.cache.entries.Remove(cacheKey{table, name})
				return
			}
		}
	}
	if !spliced {
		next = cachedSamples{asked: c.asked}
		if !r.cached.put(&next, append(all, fresh...)) {
			r.cache.entries.Remove(cacheKey{table, name})
			return
		}
	}
	if !cached {
		next.asked, _ = asked{}.seen(from, r.now().UnixMilli())
	}
	next.gen, next.from, next.to = gen, start, end
	r.cache.entries.Add(cacheKey{table, name}, next)
}

// joined is the entry of a series read from from: the samples of head (read from from up
// to head.to), then those of c (another read's, from head.to on, as far as it stands), at
// generation gen, the state both reads were made at. whole is false when a sample of head
// is not of whole milliseconds (the cache holds only those): the series is read again.
func (r *Store[S, T]) joined(head headRead[S], c cachedSamples, from int64, gen uint64) (j cachedSamples, whole bool) {
	all := make([]S, 0, len(head.samples))
	for _, s := range head.samples {
		ms, whole := r.cached.ms(s)
		if !whole {
			return cachedSamples{}, false
		}
		if ms < head.to {
			all = append(all, s)
		}
	}
	tail, err := r.cached.samples(&c, head.to, c.to)
	if err != nil || !r.cached.put(&j, append(all, tail...)) {
		return cachedSamples{}, false
	}
	j.gen, j.from, j.to = gen, from, c.to
	return j, true
}

// takeInFolds brings the entries (by series) of a table up to state where every change
// since an entry's generation that overlaps it is a Fold whose receipt this process can
// read without a request (Store.folded: the entities the Fold moved, as its staging
// listing and cache knew them): the Fold's samples of the entry's range join it, at state's
// generation, as a read of the table would have found them. An entry a Fold's sample
// would replace (a sample at the same millisecond: which one the table keeps is the
// priorities') is left as it is, and read from the change on. Each set of receipts is
// looked up once for all its series.
func (r *Store[S, T]) takeInFolds(state changelog.State, table string, entries map[string]cachedSamples) {
	if r.folded == nil {
		return
	}
	type folds struct {
		receipts []changelog.Receipt
		names    []string
	}
	groups := map[string]*folds{} // by the receipts' digests
	for name, c := range entries {
		if c.gen == state.Gen() {
			continue
		}
		receipts, ok := state.Folds(c.gen, c.from, c.to)
		if !ok {
			r.cache.notTakenIn[FoldMissLog].Add(1)
			continue
		}
		if len(receipts) == 0 {
			continue
		}
		var key []byte
		for _, rc := range receipts {
			key = append(key, rc.Digest[:]...)
		}
		g := groups[string(key)]
		if g == nil {
			g = &folds{receipts: receipts}
			groups[string(key)] = g
		}
		g.names = append(g.names, name)
	}
	for _, g := range groups {
		folded := r.folded(g.receipts, g.names)
		for _, name := range g.names {
			samples, ok := folded[name]
			switch {
			case !ok && folded == nil:
				r.cache.notTakenIn[FoldMissReceipt].Add(1)
				continue
			case !ok:
				r.cache.notTakenIn[FoldMissColumn].Add(1)
				continue
			}
			if next, ok := r.withFolded(entries[name], samples); ok {
				next.gen = state.Gen()
				entries[name] = next
				r.cache.entries.Add(cacheKey{table, name}, next)
				r.cache.foldedIn.Add(1)
			} else {
				r.cache.notTakenIn[FoldMissOverlap].Add(1)
			}
		}
	}
}

// withFolded is entry c with the samples of folded (sorted) in its range, or false when one
// is at a millisecond c holds, or is not of whole milliseconds.
func (r *Store[S, T]) withFolded(c cachedSamples, folded []S) (cachedSamples, bool) {
	var in []S
	for _, s := range folded {
		ms, whole := r.cached.ms(s)
		if !whole {
			return c, false
		}
		if ms >= c.from && ms < c.to {
			in = append(in, s)
		}
	}
	if len(in) == 0 {
		return c, true
	}
	// A Fold moves the newest minutes: its samples come after the entry's, which are kept
	// as they are encoded, from where its reads still ask.
	next := c
	start := trimmed(c)
	add := in
	for len(add) > 0 {
		if ms, _ := r.cached.ms(add[0]); ms >= start {
			break
		}
		add = add[1:]
	}
	if spliced, err := r.cached.splice(&next, start, math.MaxInt64, add); err != nil {
		return c, false
	} else if spliced {
		next.from = start
		return next, true
	}
	was, err := r.cached.samples(&c, math.MinInt64, math.MaxInt64)
	if err != nil {
		return c, false
	}
	n := len(was)
	all := make([]S, 0, n+len(in))
	i := 0
	at := func(i int) int64 { ms, _ := r.cached.ms(was[i]); return ms }
	for _, s := range in {
		ms, _ := r.cached.ms(s)
		for ; i < n && at(i) < ms; i++ {
			all = append(all, was[i])
		}
		if i < n && at(i) == ms {
			return c, false
		}
		all = append(all, s)
	}
	all = append(all, was[i:]...)
	next = cachedSamples{from: c.from, to: c.to, asked: c.asked}
	if !r.cached.put(&next, all) {
		return c, false
	}
	return next, true
}
