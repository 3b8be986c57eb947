package tsdb

import (
	"cmp"
	"context"
	"encoding/base64"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/filter"
	"github.com/seed71701133/tablets/internal/pager"
	"github.com/seed71701133/tablets/internal/stageenc"
)

// stagedPoint is a staged point and where it was staged, to order the writes of one time.
type stagedPoint struct {
	ms     int64
	value  float64
	stamp  uint64 // of its entity: the later write has the higher
	record int    // in its write (entity number, then record): the later argument is higher
}

// stagedEntity is one staging entity as read: its keys, stamp and columns' series (of
// float points, or of histogram samples).
type stagedEntity struct {
	partitionKey, rowKey string
	stamp                uint64
	seq                  int // the entity's number in its write
	version              int // stageVersion or stageHistVersion
	series               []stageenc.Series
	hists                []stageenc.HistSeries
}

// stagedKinds says which staging entities a read selects.
type stagedKinds int

const (
	stagedFloats stagedKinds = 1 << iota // V = stageVersion
	stagedHists                          // V = stageHistVersion
	stagedBoth   = stagedFloats | stagedHists
)

// record orders the records of one write: entity by entity, each in order.
func (se stagedEntity) record(r int) int { return se.seq<<20 | r }

// stagedQuery is the query of the staging entities of kinds that may hold points of series
// (nil: of every series) in [from, to). A kind costs two comparisons (T and U: the time keys
// of the two kinds do not overlap), both kinds four, the slot range two more: at most six.
func stagedQuery(series []string, from, to time.Time, kinds stagedKinds) pager.SubQuery {
	floats := filter.And(
		filter.Lt(stageFirstProp, stageTimeKey(earliestMilli(to))),
		filter.Ge(stageLastProp, stageTimeKey(from.UnixMilli())))
	hists := filter.And(
		filter.Lt(stageFirstProp, stageHistTimeKey(earliestMilli(to))),
		filter.Ge(stageLastProp, stageHistTimeKey(from.UnixMilli())))
	var clauses []filter.Expr
	switch kinds {
	case stagedFloats:
		clauses = []filter.Expr{floats}
	case stagedHists:
		clauses = []filter.Expr{hists}
	default:
		clauses = []filter.Expr{filter.Or(floats, hists)}
	}
	sel := "RowKey," + stageVersionProp
	if series == nil {
		return pager.SubQuery{Filter: filter.And(clauses...).String()}
	}
	if len(series) == 1 {
		slot, _ := stageHash(series[0])
		hex := fmt.Sprintf("%02x", slot)
		clauses = append(clauses, filter.Le(stageLoProp, hex), filter.Ge(stageHiProp, hex))
	}
	columns := map[int]bool{}
	for _, s := range series {
		_, c := stageHash(s)
		columns[c] = true
	}
	if len(columns) < stageColumns {
		for _, c := range slices.Sorted(maps.Keys(columns)) {
			sel += "," + stageColumnChar + strconv.Itoa(c)
		}
	} else {
		sel = ""
	}
	return pager.SubQuery{Filter: filter.And(clauses...).String(), Select: sel}
}

// earliestMilli is the first millisecond at or after t: a point at millisecond m is before
// t exactly when m < earliestMilli(t).
func earliestMilli(t time.Time) int64 {
	ms := t.UnixMilli()
	if time.UnixMilli(ms).Before(t) {
		ms++
	}
	return ms
}

// stagedEntities yields the staging entities of q, decoded, in pages of about
// stagePageBytes unless q sizes its own. A staging table that does not exist holds nothing.
// It is a read of Options.StagingReadBudget of its own (see stagedEntitiesOf).
func (db *DB) stagedEntities(ctx context.Context, q pager.SubQuery, want map[string]bool) iter.Seq2[stagedEntity, error] {
	return db.stagedEntitiesOf(ctx, q, want, nil)
}

// stagedEntitiesOf is stagedEntities as part of read, which may collect what it reads
// under the budget (nil: a read of its own, ended with the iteration). Each page is fetched
// and decoded under Options.StagingReadBudget; then read holds its decoded size until the
// page's last entity was yielded.
func (db *DB) stagedEntitiesOf(ctx context.Context, q pager.SubQuery, want map[string]bool, read *collectRead) iter.Seq2[stagedEntity, error] {
	return func(yield func(stagedEntity, error) bool) {
		if read == nil {
			read = db.opts.StagingReadBudget.beginRead()
			defer read.end()
		}
		client := db.service.NewClient(db.names.Staging())
		if q.PageBytes == 0 {
			q.Top, q.PageBytes = db.stagePage.Top, db.stagePage.PageBytes
		}
		top := q.Top
		var cont pager.Continuation
		for {
			page, decoded, next, err := db.stagedPage(ctx, client, q, &top, cont, want, read)
			if err != nil {
				if !isTableGone(err) {
					yield(stagedEntity{}, fmt.Errorf("tsdb: read staging: %w", err))
				}
				return
			}
			for i, se := range page {
				page[i] = stagedEntity{} // what the consumer keeps of it is its to count
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

// stagedPage fetches and decodes the page of q at cont under the staging read budget, and
// sets *top to the $top of the next page. Its decoded size is held by read when it returns
// (decoded): the caller gives it back.
func (db *DB) stagedPage(ctx context.Context, client pager.Lister, q pager.SubQuery, top *int32, cont pager.Continuation, want map[string]bool, read *collectRead) (
	page []stagedEntity, decoded int64, next pager.Continuation, err error) {
	done, err := db.opts.StagingReadBudget.take(ctx, read, int64(q.PageBytes))
	if err != nil {
		return nil, 0, pager.Continuation{}, err
	}
	defer done()
	raw, next, err := pager.Fetch(ctx, client, q, *top, cont)
	if err != nil {
		return nil, 0, pager.Continuation{}, err
	}
	*top = pager.NextTop(q, *top, raw)
	var e entity.Entity
	e.AllowStrings = true
	page = make([]stagedEntity, 0, len(raw))
	for _, r := range raw {
		se, err := decodeStaged(&e, r, want)
		if err != nil {
			return nil, 0, pager.Continuation{}, err
		}
		page = append(page, se)
		decoded += se.decodedBytes()
	}
	// Held before the page's bytes are given back: the oldest read goes on, others wait.
	if err := read.hold(ctx, decoded); err != nil {
		return nil, 0, pager.Continuation{}, err
	}
	return page, decoded, next, nil
}

// decodedBytes is about the memory of se's decoded series.
func (se stagedEntity) decodedBytes() int64 {
	n := int64(unsafe.Sizeof(se))
	for _, s := range se.series {
		n += int64(unsafe.Sizeof(s)) + int64(len(s.Key)) + 8*int64(cap(s.Times)+cap(s.Values))
	}
	for _, s := range se.hists {
		n += int64(unsafe.Sizeof(s)) + int64(len(s.Key)) + int64(len(s.Samples))*stagedHistBytes
	}
	return n
}

// decodeStaged decodes one staging entity's JSON (as much of it as was selected), keeping
// the float series want holds (nil: all): a read of a batch of series decodes entities that
// hold thousands, and only those of the batch cost memory.
func decodeStaged(e *entity.Entity, raw []byte, want map[string]bool) (stagedEntity, error) {
	if err := e.Decode(raw); err != nil {
		return stagedEntity{}, err
	}
	se := stagedEntity{partitionKey: string(e.PartitionKey), rowKey: string(e.RowKey)}
	stamp, seq, ok := stampOf(e.RowKey)
	if !ok {
		return stagedEntity{}, fmt.Errorf("staging entity %q: bad RowKey", e.RowKey)
	}
	se.stamp, se.seq = stamp, seq
	version := -1.0
	for _, p := range e.Props {
		if string(p.Name) == stageVersionProp {
			version = p.Value
		}
	}
	if version != stageVersion && version != stageHistVersion {
		return stagedEntity{}, fmt.Errorf("staging entity %q: %w %v", e.RowKey, errStagingVersion, version)
	}
	se.version = int(version)
	for _, sp := range e.Strings {
		name := string(sp.Name)
		if !strings.HasPrefix(name, stageColumnChar) {
			continue
		}
		b, err := base64.StdEncoding.DecodeString(string(sp.Value))
		if err != nil {
			return stagedEntity{}, fmt.Errorf("staging entity %q column %s: %w", e.RowKey, name, err)
		}
		if se.version == stageHistVersion {
			hists, err := stageenc.DecodeHist(b)
			if err != nil {
				return stagedEntity{}, fmt.Errorf("staging entity %q column %s: %w", e.RowKey, name, err)
			}
			se.hists = append(se.hists, hists...)
			continue
		}
		series, err := stageenc.DecodeSome(b, want)
		if err != nil {
			return stagedEntity{}, fmt.Errorf("staging entity %q column %s: %w", e.RowKey, name, err)
		}
		se.series = append(se.series, series...)
	}
	return se, nil
}

// readStaged returns the staged points of series (nil: of every series) in [from, to),
// by series, each sorted by time with the last write of a time kept. A DB that does not
// stage reads nothing (no request).
func (db *DB) readStaged(ctx context.Context, series []string, from, to time.Time) (map[string][]tablets.Point, error) {
	floats, _, err := db.readStagedKinds(ctx, series, from, to, stagedFloats)
	return floats, err
}

// readStagedKinds is readStaged of the kinds asked for, in one query: the staged points and
// the staged histogram samples, by series.
func (db *DB) readStagedKinds(ctx context.Context, series []string, from, to time.Time, kinds stagedKinds) (map[string][]tablets.Point, map[string][]HistogramPoint, error) {
	found, foundHists, done, err := db.collectStaged(ctx, series, from, to, kinds)
	if err != nil {
		return nil, nil, err
	}
	defer done()
	out := make(map[string][]tablets.Point, len(found))
	for key, pts := range found {
		out[key] = lastWrites(pts)
		delete(found, key) // the writes of a series are garbage once sorted
	}
	hists := make(map[string][]HistogramPoint, len(foundHists))
	for key, hs := range foundHists {
		for _, s := range lastHistWrites(hs) {
			hists[key] = append(hists[key], pointOf(s))
		}
	}
	return out, hists, nil
}

// readStagedPacked is readStagedKinds with each series' float points packed.
func (db *DB) readStagedPacked(ctx context.Context, series []string, from, to time.Time, kinds stagedKinds) (map[string]packedPoints, map[string][]HistogramPoint, error) {
	found, foundHists, done, err := db.collectStaged(ctx, series, from, to, kinds)
	if err != nil {
		return nil, nil, err
	}
	defer done()
	out := make(map[string]packedPoints, len(found))
	var scratch packScratch
	for key, pts := range found {
		out[key] = scratch.pack(lastWrites(pts))
		delete(found, key)
	}
	hists := make(map[string][]HistogramPoint, len(foundHists))
	for key, hs := range foundHists {
		for _, s := range lastHistWrites(hs) {
			hists[key] = append(hists[key], pointOf(s))
		}
	}
	return out, hists, nil
}

// collectStaged reads the staged writes of the kinds asked for in one query: each point and
// histogram sample in [from, to) of series (nil: of every series) as written, by series,
// in no order. What it collects holds its bytes of Options.StagingReadBudget until done is
// called (also after an error). A DB that does not stage reads nothing (no request).
func (db *DB) collectStaged(ctx context.Context, series []string, from, to time.Time, kinds stagedKinds) (
	found map[string][]stagedPoint, foundHists map[string][]stagedHist, done func(), err error) {
	if !db.stagedReads || !from.Before(to) {
		return nil, nil, func() {}, nil
	}
	read := db.opts.StagingReadBudget.beginRead()
	defer func() {
		if err != nil {
			read.end()
		}
	}()
	var want map[string]bool
	if series != nil {
		want = make(map[string]bool, len(series))
		for _, s := range series {
			want[s] = true
		}
	}
	lo, hi := earliestMilli(from), earliestMilli(to)
	found = map[string][]stagedPoint{}
	foundHists = map[string][]stagedHist{}
	for se, err := range db.stagedEntitiesOf(ctx, stagedQuery(series, from, to, kinds), want, read) {
		if err != nil {
			return nil, nil, nil, err
		}
		points, hists := 0, 0
		for r, s := range se.hists {
			if want != nil && !want[s.Key] {
				continue
			}
			for _, h := range s.Samples {
				if ms := int64(h.Unit); ms >= lo && ms < hi {
					foundHists[s.Key] = append(foundHists[s.Key], stagedHist{h, se.stamp, se.record(r)})
					hists++
				}
			}
		}
		for r, s := range se.series {
			if want != nil && !want[s.Key] {
				continue
			}
			for i, ms := range s.Times {
				if ms >= lo && ms < hi {
					found[s.Key] = append(found[s.Key], stagedPoint{ms, s.Values[i], se.stamp, se.record(r)})
					points++
				}
			}
		}
		if err := read.hold(ctx, int64(points)*stagedPointBytes+int64(hists)*stagedHistBytes); err != nil {
			return nil, nil, nil, err
		}
	}
	return found, foundHists, read.end, nil
}

// The bytes a collected point, late point and histogram sample take, as a read's budget
// counts them: their size, and a histogram's decoded buckets as about 500 bytes (see
// foldHistWeight).
const (
	stagedPointBytes = int64(unsafe.Sizeof(stagedPoint{}))
	latePointBytes   = int64(unsafe.Sizeof(tablets.Point{}))
	stagedHistBytes  = int64(unsafe.Sizeof(stagedHist{})) + foldHistWeight*stagedPointBytes
)

// lastWrites sorts staged points by time and keeps, of each time, the last write.
func lastWrites(pts []stagedPoint) []tablets.Point {
	slices.SortFunc(pts, func(a, b stagedPoint) int {
		return cmp.Or(cmp.Compare(a.ms, b.ms), cmp.Compare(a.stamp, b.stamp), cmp.Compare(a.record, b.record))
	})
	out := make([]tablets.Point, 0, len(pts))
	for i, p := range pts {
		if i+1 < len(pts) && pts[i+1].ms == p.ms {
			continue
		}
		out = append(out, tablets.Point{Time: time.UnixMilli(p.ms).UTC(), Value: p.value})
	}
	return out
}

// withStaged merges staged points (sorted, one per time) into a series' raw points (oldest
// first): where both hold a time, the staged point is the later write.
func withStaged(raw iter.Seq2[tablets.Point, error], staged []tablets.Point) iter.Seq2[tablets.Point, error] {
	if len(staged) == 0 {
		return raw
	}
	return func(yield func(tablets.Point, error) bool) {
		for p, err := range raw {
			if err != nil {
				yield(p, err)
				return
			}
			replaced := false
			for len(staged) > 0 && !staged[0].Time.After(p.Time) {
				replaced = staged[0].Time.Equal(p.Time)
				if !yield(staged[0], nil) {
					return
				}
				staged = staged[1:]
			}
			if !replaced && !yield(p, nil) {
				return
			}
		}
		for _, p := range staged {
			if !yield(p, nil) {
				return
			}
		}
	}
}

// withStagedMany merges staged points (by series, each sorted, one per time) into the raw
// points of many series (each series' oldest first): a series' staged points come just
// before its first raw point after them, and those left at the end, series by series in
// the order of their names.
func withStagedMany(raw iter.Seq2[tablets.SeriesPoint, error], staged map[string][]tablets.Point) iter.Seq2[tablets.SeriesPoint, error] {
	if len(staged) == 0 {
		return raw
	}
	return func(yield func(tablets.SeriesPoint, error) bool) {
		for p, err := range raw {
			if err != nil {
				yield(p, err)
				return
			}
			rest := staged[p.Series]
			replaced := false
			for len(rest) > 0 && !rest[0].Time.After(p.Time) {
				replaced = rest[0].Time.Equal(p.Time)
				if !yield(tablets.SeriesPoint{Series: p.Series, Point: rest[0]}, nil) {
					return
				}
				rest = rest[1:]
			}
			staged[p.Series] = rest
			if !replaced && !yield(p, nil) {
				return
			}
		}
		for _, name := range slices.Sorted(maps.Keys(staged)) {
			for _, p := range staged[name] {
				if !yield(tablets.SeriesPoint{Series: name, Point: p}, nil) {
					return
				}
			}
		}
	}
}

// pointsOfSlice yields pts.
func pointsOfSlice(pts []tablets.Point) iter.Seq2[tablets.Point, error] {
	return func(yield func(tablets.Point, error) bool) {
		for _, p := range pts {
			if !yield(p, nil) {
				return
			}
		}
	}
}

// newestWithStaged merges raw points (newest first) with staged ones (oldest first, one per
// time), the staged winning a time both hold, and returns the n newest, newest first.
func newestWithStaged(raw, staged []tablets.Point, n int) []tablets.Point {
	if len(staged) == 0 {
		return raw
	}
	oldestFirst := slices.Clone(raw)
	slices.Reverse(oldestFirst)
	var all []tablets.Point
	for p, _ := range withStaged(pointsOfSlice(oldestFirst), staged) {
		all = append(all, p)
	}
	all = all[max(0, len(all)-n):]
	slices.Reverse(all)
	return all
}

// pointsIn is the part of pts (sorted) in [from, to).
func pointsIn(pts []tablets.Point, from, to time.Time) []tablets.Point {
	lo, _ := slices.BinarySearchFunc(pts, from, func(p tablets.Point, t time.Time) int { return p.Time.Compare(t) })
	hi, _ := slices.BinarySearchFunc(pts, to, func(p tablets.Point, t time.Time) int { return p.Time.Compare(t) })
	return pts[lo:max(lo, hi)]
}
