package staging

import (
	"context"
	"fmt"
	"iter"
	"math"
	"slices"
	"time"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/internal/histenc"
	"github.com/seed71701133/tablets/internal/pager"
	"github.com/seed71701133/tablets/rounding"
	"github.com/seed71701133/tablets/tsdb/internal/azerr"
)

// Entities yields the staging entities of q, decoded, in pages of about PageBytes unless q
// sizes its own. A staging table that does not exist holds nothing. It is a read of the
// Budget of its own (see entitiesIn).
func (st *Table) Entities(ctx context.Context, q pager.SubQuery, want map[string]bool) iter.Seq2[Decoded, error] {
	return st.entitiesIn(ctx, q, want, nil)
}

// beginRead starts a read of the staging read budget that collects points (see
// ReadBudget): what it holds is given back at its end.
func (st *Table) beginRead() *collectRead { return st.Budget.beginRead() }

// beginFoldRead is beginRead for a fold's round, of the FoldBudget (the Budget without
// one): a round holds what it collected while it writes it, a transaction a series, and
// queries waiting behind it answered nothing for minutes.
func (st *Table) beginFoldRead() *collectRead {
	if st.FoldBudget != nil {
		return st.FoldBudget.beginRead()
	}
	return st.beginRead()
}

// entitiesIn is Entities as part of read, which may collect what it reads under the
// budget (nil: a read of its own, ended with the iteration). Each page is fetched and
// decoded under the Budget; then read holds its decoded size until the
// page's last entity was yielded.
func (st *Table) entitiesIn(ctx context.Context, q pager.SubQuery, want map[string]bool, read *collectRead) iter.Seq2[Decoded, error] {
	return func(yield func(Decoded, error) bool) {
		if read == nil {
			read = st.beginRead()
			defer read.end()
		}
		if q.PageBytes == 0 {
			q.Top, q.PageBytes = st.Page.Top, st.Page.PageBytes
		}
		top := q.Top
		var cont pager.Continuation
		for {
			page, decoded, next, err := st.readPage(ctx, q, &top, cont, want, read)
			if err != nil {
				if !azerr.IsTableGone(err) {
					yield(Decoded{}, fmt.Errorf("tsdb: read staging: %w", err))
				}
				return
			}
			for i, se := range page {
				page[i] = Decoded{} // what the consumer keeps of it is its to count
				if !yield(se, nil) {
					read.give(decoded)
					return
				}
			}
			read.give(decoded)
			if next.IsZero() {
				return
			}
			cont = next
		}
	}
}

// readPage fetches and decodes the page of q at cont under the staging read budget, and
// sets *top to the $top of the next page. Its decoded size is held by read when it returns
// (decoded): the caller gives it back.
func (st *Table) readPage(ctx context.Context, q pager.SubQuery, top *int32, cont pager.Continuation, want map[string]bool, read *collectRead) (
	page []Decoded, decoded int64, next pager.Continuation, err error) {
	done, err := st.Budget.budgetOf(read).take(ctx, read, int64(q.PageBytes))
	if err != nil {
		return nil, 0, pager.Continuation{}, err
	}
	defer done()
	raw, next, err := pager.Fetch(ctx, st.client, q, *top, cont)
	if err != nil {
		return nil, 0, pager.Continuation{}, err
	}
	*top = pager.NextTop(q, *top, raw)
	var e entity.Entity
	e.AllowStrings = true
	page = make([]Decoded, 0, len(raw))
	for _, r := range raw {
		se, err := Decode(&e, r, want)
		if err != nil {
			return nil, 0, pager.Continuation{}, err
		}
		page = append(page, se)
		decoded += se.DecodedBytes()
	}
	// Held before the page's bytes are given back: the oldest read goes on, others wait.
	if err := read.hold(ctx, decoded); err != nil {
		return nil, 0, pager.Continuation{}, err
	}
	return page, decoded, next, nil
}

// Read returns the staged points of series (nil: of every series) in [from, to), by
// series, each sorted by time with the last write of a time kept. A DB that does not stage
// reads nothing (no request).
func (st *Table) Read(ctx context.Context, series []string, from, to time.Time) (map[string][]tablets.Point, error) {
	floats, _, err := st.ReadKinds(ctx, series, from, to, Floats)
	return floats, err
}

// ReadKinds is Read of the kinds asked for, in one query: the staged points and the staged
// histogram samples, by series.
func (st *Table) ReadKinds(ctx context.Context, series []string, from, to time.Time, kinds Kinds) (map[string][]tablets.Point, map[string][]tablets.HistogramPoint, error) {
	found, foundHists, done, _, err := st.collect(ctx, series, from, to, kinds, false)
	if err != nil {
		return nil, nil, err
	}
	defer done()
	out := make(map[string][]tablets.Point, len(found))
	for key, pts := range found {
		out[key] = appendLastPoints(nil, pts)
	}
	hists := make(map[string][]tablets.HistogramPoint, len(foundHists))
	for key, hs := range foundHists {
		for _, s := range LastWrites[histenc.Sample](hs) {
			hists[key] = append(hists[key], histPoint(s))
		}
	}
	return out, hists, nil
}

// ReadPacked is ReadKinds with each series' float points packed (the first
// PlainPackedPoints of them kept plain), and the count of ReadsDone a raw change log read
// must have seen to be later than it (see collect). With latest, it reads of each series
// (series must not be nil) only the float point it would give last: the latest in the
// range, as the last write of its millisecond had it (histogram samples are all read).
func (st *Table) ReadPacked(ctx context.Context, series []string, from, to time.Time, kinds Kinds, latest bool) (map[string]Packed, map[string][]tablets.HistogramPoint, uint64, error) {
	found, foundHists, done, after, err := st.collect(ctx, series, from, to, kinds, latest)
	if err != nil {
		return nil, nil, 0, err
	}
	defer done()
	out := make(map[string]Packed, len(found))
	scratch := PackScratch{PlainLeft: PlainPackedPoints}
	total := 0
	for _, pts := range found {
		total += len(pts)
	}
	// The series kept plain share one array (an allocation a read, not a series): their
	// points number min(total, PlainPackedPoints) at most. A series sure to be kept plain
	// (as many points as it was written, at most) is sorted into it; another into spare
	// first, and copied there if kept plain.
	plain := make([]tablets.Point, 0, min(total, PlainPackedPoints))
	var spare []tablets.Point
	for key, pts := range found {
		if len(pts) <= scratch.PlainLeft && len(pts) <= cap(plain)-len(plain) {
			start := len(plain)
			plain = appendLastPoints(plain, pts)
			out[key] = scratch.Pack(plain[start:])
			continue
		}
		spare = appendLastPoints(spare[:0], pts)
		switch {
		case len(spare) > scratch.PlainLeft:
			out[key] = scratch.Pack(spare) // encoded: Pack does not keep spare
		case len(spare) <= cap(plain)-len(plain):
			start := len(plain)
			plain = append(plain, spare...)
			out[key] = scratch.Pack(plain[start:])
		default: // not expected: plain has room for every point kept plain
			out[key] = scratch.Pack(slices.Clone(spare))
		}
	}
	hists := make(map[string][]tablets.HistogramPoint, len(foundHists))
	for key, hs := range foundHists {
		for _, s := range LastWrites[histenc.Sample](hs) {
			hists[key] = append(hists[key], histPoint(s))
		}
	}
	return out, hists, after, nil
}

// PlainPackedPoints is how many of a ReadPacked's points stay plain (8 MB of them): the
// staged points of a refreshed panel over a thousand series (half an hour of a scrape every
// 15 s: 120,000 points), which packing and unpacking cost an eighth of its CPU. A read of
// more (the soak's, of tens of thousands of series) packs the rest.
const PlainPackedPoints = 1 << 18

// heldPoints is how many points a read takes through the series index before it holds
// them under its budget (256 KB of them).
const heldPoints = 8192

// wholeColumns is how many of the Columns a read with a cache asks for at least to read
// its entities whole: three quarters.
const wholeColumns = Columns * 3 / 4

// collect reads the staged writes of the kinds asked for in one query: each point and
// histogram sample in [from, to) of series (nil: of every series) as written, by series,
// in no order, but those of raw periods known dropped (which the Fold leaves out: a read
// before the Fold answers as one after it). What it collects holds its bytes of the Budget
// until done is called (also after an error); found's slices are of arrays done gives back
// to a pool (see takenPoints): the caller copies out what it keeps before. A DB that does
// not stage reads nothing (no request). With latest (of series, not nil), it collects of
// each series only the float point that LastWrites would give last (seriesSlots.keepLatest),
// and takes no point of the cached entities whose every point is earlier than the points
// it has (seriesIndex.take).
//
// after is the count of ReadsDone a change log read must have seen to be later than this
// read (changelog.Log.StateAfter): its own, or that of the listing it read when it read
// every entity the listing had (a refresh's reads then share the log's state the listing's
// read mark took, also when they fetched the entities staged since the last refresh).
func (st *Table) collect(ctx context.Context, series []string, from, to time.Time, kinds Kinds, latest bool) (
	found map[string][]Point, foundHists map[string][]Hist, done func(), after uint64, err error) {
	if !st.reads || !from.Before(to) {
		return nil, nil, func() {}, st.readsDone.Add(1), nil
	}
	read := st.beginRead()
	slots := newSeriesSlots(series)
	if latest {
		slots.keepLatest()
	}
	defer func() {
		if err != nil {
			read.end()
			slots.release()
		}
	}()
	var want map[string]bool
	if series != nil {
		want = make(map[string]bool, len(series))
		for _, s := range series {
			want[s] = true
		}
	}
	lo, hi := EarliestMilli(from), EarliestMilli(to)
	dropped := st.droppedPeriods()
	// A read of many series' floats takes what a memo of them holds, and keeps there
	// every point it takes from the memo's start (or its own, if earlier) on, beyond to
	// too (seriesmemo.go).
	var memo *seriesMemo
	takeLo, takeHi := lo, hi
	if st.cache != nil && series != nil && kinds == Floats && !latest && len(slots.keys) >= memoMinSeries {
		if memo = st.cache.memos.acquire(slots.keys); memo != nil {
			defer memo.mu.Unlock()
			takeLo, takeHi = memo.start(lo), math.MaxInt64
		}
	}
	points := 0 // taken since the read last held them
	kept := 1   // of a point taken, the points held: none when each series keeps its latest
	if slots.latest != nil {
		kept = 0
	}
	// A refresh of an hour's staged points takes hundreds of thousands: the period asked
	// of last and where the points go are looked at here, not in a call a point.
	dlo, dhi, dd := int64(1), int64(0), false // the period last asked of, and whether dropped
	taken, latestOf := slots.taken, slots.latest
	takeSeries := func(slot int32, stamp uint64, record int, times []int64, values []float64) {
		for i, ms := range times {
			if ms < takeLo || ms >= takeHi {
				continue
			}
			if ms < dlo || ms >= dhi {
				dd, dlo, dhi = dropped(ms)
			}
			if dd {
				continue
			}
			p := Point{MS: ms, Value: values[i], Stamp: stamp, Record: record}
			if latestOf != nil {
				latestOf.offer(slot, p)
			} else {
				taken.add(slot, p)
			}
			points += kept
		}
	}
	foundHists = map[string][]Hist{}
	var entities iter.Seq2[Decoded, error]
	var listedAt uint64 // the listing's ReadsDone when every entity it listed was read
	if st.cache == nil {
		entities = st.entitiesIn(ctx, Query(series, from, to, kinds), want, read)
	} else {
		listFrom, listTo := from, to
		if memo != nil { // the entities of the memo's points are listed, and those after to
			listFrom, listTo = time.UnixMilli(takeLo), tablets.MaxTime
		}
		f, columns := queryParts(series, listFrom, listTo, kinds)
		if len(columns) >= wholeColumns {
			// Most of the columns: every one costs a quarter more bytes at most, and the
			// cache then serves any later read of the entities, and this read's fetch the
			// reads at once that ask for other columns (the panels of a dashboard opened
			// together: a metric of a thousand series holds nearly every column).
			columns = nil
		}
		// The points the series index gives are held as they come, every heldPoints. A read
		// whose query ended (a speculation the check spoilt, a client gone) stops here too:
		// taking a thousand series' points from hundreds of entities is many milliseconds.
		held := func() error {
			if err := ctx.Err(); err != nil {
				return err
			}
			if points < heldPoints {
				return nil
			}
			n := points
			points = 0
			return read.hold(ctx, int64(n)*PointBytes)
		}
		var pick pickFunc
		if memo != nil {
			// Whether a raw period holding a millisecond of [a, b] is known dropped.
			droppedIn := func(a, b int64) bool {
				for ms := a; ms <= b; {
					d, _, end := dropped(ms)
					if d || end <= ms {
						return d
					}
					ms = end
				}
				return false
			}
			pick = func(listed []listedEntity) []listedEntity { return memo.pick(lo, droppedIn, listed) }
		}
		entities = st.cachedEntities(ctx, f, columns, slots, read, &listedAt, takeSeries, held, pick)
	}
	for se, err := range entities {
		if err != nil {
			return nil, nil, nil, 0, err
		}
		hists := 0
		for r, s := range se.Hists {
			if want != nil && !want[s.Key] {
				continue
			}
			for _, h := range s.Samples {
				if ms := int64(h.Unit); ms >= lo && ms < hi && !droppedAt(dropped, ms) {
					foundHists[s.Key] = append(foundHists[s.Key], Hist{Sample: h, Stamp: se.Stamp, Record: se.Record(r)})
					hists++
				}
			}
		}
		for r, s := range se.Series {
			var slot int32
			if se.Slots != nil {
				slot = se.Slots[r]
			} else {
				var ok bool
				if slot, ok = slots.slot(s.Key); !ok {
					continue
				}
			}
			takeSeries(slot, se.Stamp, se.Record(r), s.Times, s.Values)
		}
		se.release() // its points and samples are copied out
		if err := read.hold(ctx, int64(points)*PointBytes+int64(hists)*HistBytes); err != nil {
			return nil, nil, nil, 0, err
		}
		points = 0
	}
	// The points the cache's series index gave (seriesIndex), after the last entity.
	if err := read.hold(ctx, int64(points)*PointBytes); err != nil {
		return nil, nil, nil, 0, err
	}
	after = st.readsDone.Add(1)
	if listedAt != 0 {
		after = listedAt
	}
	if memo != nil && memo.pending != nil { // picked: the entities were listed and read
		found, err = st.keepMemo(ctx, memo, slots, read, lo, hi)
		if err != nil {
			return nil, nil, nil, 0, err
		}
		return found, foundHists, func() { read.end(); slots.release() }, after, nil
	}
	return slots.found(), foundHists, func() { read.end(); slots.release() }, after, nil
}

// keepMemo takes the points a read took into its memo (seriesMemo.keep) and returns the
// series' points in [lo, hi) (milliseconds), slices of the memo's, held under the read's
// budget as if it had taken them all.
func (st *Table) keepMemo(ctx context.Context, memo *seriesMemo, slots *seriesSlots, read *collectRead, lo, hi int64) (map[string][]Point, error) {
	t := slots.taken
	starts := t.bySlot(len(slots.keys))
	taken := t.len()
	out := memo.keep(lo, hi, len(slots.keys), func(slot int) []Point { return t.sorted[starts[slot]:starts[slot+1]] })
	found := make(map[string][]Point, len(slots.keys))
	total := 0
	for slot, pts := range out {
		if len(pts) > 0 {
			found[slots.keys[slot]] = pts
			total += len(pts)
		}
	}
	if err := read.hold(ctx, int64(max(total-taken, 0))*PointBytes); err != nil {
		return nil, err
	}
	return found, nil
}

// ReadsDone is the number of reads of staged samples (Read, ReadKinds, ReadPacked)
// completed so far: what the raw part's change log is read after (raw.Changes), so that a
// sample the Fold moved out of the staging table after a read is in the log read next.
func (st *Table) ReadsDone() uint64 { return st.readsDone.Load() }

// droppedPeriods returns whether the raw period holding a Unix millisecond is known
// dropped, and that period's milliseconds [lo, hi) (empty for times before 1970, which
// are asked of each), asking the period tables once a period of the read.
func (st *Table) droppedPeriods() func(ms int64) (dropped bool, lo, hi int64) {
	if st.dropped == nil {
		return func(int64) (bool, int64, int64) { return false, math.MinInt64, math.MaxInt64 }
	}
	known := map[uint64]bool{}
	return func(ms int64) (bool, int64, int64) {
		p := st.names.PeriodOf(time.UnixMilli(ms))
		d, ok := known[p]
		if !ok {
			d = st.dropped(p)
			known[p] = d
		}
		if ms < 0 { // PeriodOf's periods are of times since 1970
			return d, 1, 0
		}
		return d, st.names.Start(p).UnixMilli(), st.names.End(p).UnixMilli()
	}
}

// droppedAt is dropped's answer for ms alone.
func droppedAt(dropped func(ms int64) (bool, int64, int64), ms int64) bool {
	d, _, _ := dropped(ms)
	return d
}

// millis is the time key of histogram tables (milliseconds): a staged histogram sample's
// Unit is its millisecond in it.
var millis = func() rounding.KeyFormat {
	f, err := rounding.NewKeyFormat(time.Millisecond)
	if err != nil {
		panic(err) // a constant resolution: never
	}
	return f
}()

// histPoint is a staged histogram sample as the API returns it.
func histPoint(s histenc.Sample) tablets.HistogramPoint {
	return tablets.HistogramPoint{Time: millis.Time(s.Unit), H: s.H, FH: s.FH}
}
