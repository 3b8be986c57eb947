package tsdb

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"iter"
	"slices"
	"sync"
	"time"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/pager"
	"github.com/seed71701133/tablets/rounding"
	"github.com/seed71701133/tablets/tsdb/internal/raw"
	"github.com/seed71701133/tablets/tsdb/internal/staging"
)

// Query yields the points with from <= Time < to, oldest first, from every raw table of the
// range and the staging table.
func (db *DB) Query(ctx context.Context, series string, from, to time.Time) iter.Seq2[tablets.Point, error] {
	return queryPoints(ctx, db.floats, db.staging, series, from, to)
}

// queryPoints is the read of one series' points, its staged ones merged in: DB.Query's, and
// the rollup's of a series (the tiers are given the same parts).
func queryPoints(ctx context.Context, floats *raw.Floats, st *staging.Table, series string, from, to time.Time) iter.Seq2[tablets.Point, error] {
	return func(yield func(tablets.Point, error) bool) {
		if err := floats.Validate(ctx, series); err != nil {
			yield(tablets.Point{}, fmt.Errorf("tsdb: %w", err))
			return
		}
		if err := rounding.CheckRange(from, to); err != nil {
			yield(tablets.Point{}, err)
			return
		}
		// Staged points first: a Fold that moves them meanwhile writes them into the raw
		// tables before it deletes them, so the raw read that follows finds them.
		staged, err := st.Read(ctx, []string{series}, from, to)
		if err != nil {
			yield(tablets.Point{}, err)
			return
		}
		for p, err := range staging.PointsMerge.One(floats.Points(ctx, series, from, to), staged[series]) {
			if !yield(p, err) || err != nil {
				return
			}
		}
	}
}

// QueryMany yields the points of every named series in [from, to), table by table, each
// series' oldest first; the staged points of a series come in among its raw points.
func (db *DB) QueryMany(ctx context.Context, series []string, from, to time.Time) iter.Seq2[tablets.SeriesPoint, error] {
	return db.queryMany(ctx, series, from, to, nil)
}

// stagedSet holds the staged points of some series in a range, read once by readStagedSet
// for the many reads of one Select: a staging entity holds points of thousands of
// series, so that each batch of a large read reading it again would read it many times.
// It is safe for concurrent use.
type stagedSet struct {
	from, to time.Time
	// after is what the raw change log must be read after for the reads that go with it
	// (changelog.AfterRead): the staging table's reads counted when it was read, or its
	// listing's when it came from the cache whole.
	after    uint64
	mu       sync.Mutex // guards series, points and hists, which Drop changes
	series   map[string]bool
	points   map[string]staging.Packed // packed: they live while the batches are read
	hists    map[string][]HistogramPoint
	withHist bool // the histogram samples were read too
}

// Drop drops the staged points of series once they are read, so that a long read frees
// them batch by batch. A queryManyStaged of a dropped series is an error.
func (s *stagedSet) drop(series []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, name := range series {
		delete(s.series, name)
		delete(s.points, name)
		delete(s.hists, name)
	}
}

// readStagedSet reads the staged samples of series in [from, to) of the kinds asked for, in
// one query (with staging.Both, the histogram samples too: see histsIn), for the units of a
// Select that share it (queryManyStaged, AggregateOptions.staged). Call it before the reads
// that use it, and not long before: a fold moves staged points to the raw tables, so a raw
// read after the staged one misses none, but what was staged after it is not read. The
// series are the index's (a Select's), checked as their entries were read.
func (db *DB) readStagedSet(ctx context.Context, series []string, from, to time.Time, kinds staging.Kinds, latest bool) (*stagedSet, error) {
	if err := rounding.CheckRange(from, to); err != nil {
		return nil, err
	}
	st := &stagedSet{from: from, to: to, series: make(map[string]bool, len(series)), withHist: kinds&staging.Hists != 0}
	for _, name := range series {
		st.series[name] = true
	}
	var err error
	if st.points, st.hists, st.after, err = db.staging.ReadPacked(ctx, series, from, to, kinds, latest); err != nil {
		return nil, err
	}
	return st, nil
}

// in returns the staged points of series in [from, to), within the range read; each
// series must be among those read and not dropped.
func (s *stagedSet) in(series []string, from, to time.Time) (map[string][]tablets.Point, error) {
	return stagedIn(s, series, from, to, "points", func(name string) ([]tablets.Point, error) {
		pts, err := s.points[name].In(from, to)
		if err != nil { // a chunk this process packed: a bug
			return nil, fmt.Errorf("tsdb: staged points of %s: %w", name, err)
		}
		return pts, nil
	})
}

// histsIn returns the staged histogram samples of series in [from, to), as in does the
// points: the Staged must have been read with them.
func (s *stagedSet) histsIn(series []string, from, to time.Time) (map[string][]HistogramPoint, error) {
	if !s.withHist {
		return nil, fmt.Errorf("tsdb: %w: staged samples read without their histograms", tablets.ErrInvalidOptions)
	}
	return stagedIn(s, series, from, to, "samples", func(name string) ([]HistogramPoint, error) {
		return staging.HistsMerge.In(s.hists[name], from, to), nil
	})
}

// stagedIn is in and histsIn whatever the kind: the staged samples of each of series
// (those of [from, to) of a series, as of gives them: s.mu is held), checked to be of the
// range read and of series read and not dropped; noun names the kind's samples in errors.
func stagedIn[S any](s *stagedSet, series []string, from, to time.Time, noun string, of func(name string) ([]S, error)) (map[string][]S, error) {
	if from.Before(s.from) || to.After(s.to) {
		return nil, fmt.Errorf("tsdb: %w: staged %s of [%v, %v), not of the range read [%v, %v)",
			tablets.ErrInvalidOptions, noun, s.from, s.to, from, to)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string][]S, len(series))
	for _, name := range series {
		if !s.series[name] {
			return nil, fmt.Errorf("tsdb: %w: series %s is not among the staged %s read (or was dropped)", tablets.ErrInvalidOptions, name, noun)
		}
		ss, err := of(name)
		if err != nil {
			return nil, err
		}
		if len(ss) > 0 {
			out[name] = ss
		}
	}
	return out, nil
}

// queryManyStaged is QueryMany with the staged points of staged (from readStagedSet of a range
// that covers [from, to) and of series that hold these), which it does not read again.
func (db *DB) queryManyStaged(ctx context.Context, series []string, from, to time.Time, staged *stagedSet) iter.Seq2[tablets.SeriesPoint, error] {
	if staged == nil {
		return func(yield func(tablets.SeriesPoint, error) bool) {
			yield(tablets.SeriesPoint{}, fmt.Errorf("tsdb: %w: queryManyStaged without a stagedSet", tablets.ErrInvalidOptions))
		}
	}
	return db.queryMany(ctx, series, from, to, staged)
}

// queryMany is QueryMany, with the staged points of staged where it is not nil.
func (db *DB) queryMany(ctx context.Context, series []string, from, to time.Time, staged *stagedSet) iter.Seq2[tablets.SeriesPoint, error] {
	return func(yield func(tablets.SeriesPoint, error) bool) {
		for _, name := range series {
			if err := db.floats.Validate(ctx, name); err != nil {
				yield(tablets.SeriesPoint{}, fmt.Errorf("tsdb: %w", err))
				return
			}
		}
		if err := rounding.CheckRange(from, to); err != nil {
			yield(tablets.SeriesPoint{}, err)
			return
		}
		if len(series) == 0 {
			return
		}
		var points map[string][]tablets.Point
		if staged == nil {
			var err error
			if points, err = db.staging.Read(ctx, series, from, to); err != nil { // first: see Query
				yield(tablets.SeriesPoint{}, err)
				return
			}
		} else {
			var err error
			if points, err = staged.in(series, from, to); err != nil {
				yield(tablets.SeriesPoint{}, err)
				return
			}
		}
		for p, err := range db.floats.WithStaged(ctx, series, from, to, points) {
			if !yield(p, err) || err != nil {
				return
			}
		}
	}
}

// Latest returns the n newest points of the series, newest first: the raw tables newest
// first, each asked for the points still wanted. The tables are the cached list's while it is
// younger than a minute, else listed again (one request).
func (db *DB) Latest(ctx context.Context, series string, n int) ([]tablets.Point, error) {
	if err := db.floats.Validate(ctx, series); err != nil {
		return nil, fmt.Errorf("tsdb: %w", err)
	}
	if n < 1 {
		return nil, fmt.Errorf("tsdb: latest %q: %w: n %d must be at least 1", series, tablets.ErrInvalidLimit, n)
	}
	// Staged points first: see Query.
	staged, err := db.staging.Read(ctx, []string{series}, tablets.MinTime, tablets.MaxTime.Add(time.Millisecond))
	if err != nil {
		return nil, err
	}
	out, err := db.floats.Newest(ctx, series, n)
	if err != nil {
		return nil, err
	}
	return staging.NewestWithStaged(out, staged[series], n), nil
}

// Delete removes the points and histogram samples with from <= Time < to from the staging
// table, then the points from every raw table of the range, then the histogram samples of
// the range from the histogram tables (chunks inside deleted, chunks cut rewritten without
// them, conditionally on their ETags).
// A Fold moving the same points meanwhile may write them into a raw table after the Delete:
// delete again after a Fold to be sure (tablets maintain folds).
func (db *DB) Delete(ctx context.Context, series string, from, to time.Time) error {
	if err := db.floats.Validate(ctx, series); err != nil {
		return fmt.Errorf("tsdb: %w", err)
	}
	if err := rounding.CheckRange(from, to); err != nil {
		return err
	}
	if err := db.staging.Delete(ctx, series, from, to); err != nil {
		return err
	}
	err := db.floats.Delete(ctx, series, from, to)
	if err == nil && db.hists.Validate(ctx, series) == nil { // a series the histogram tables refuse has none
		err = db.hists.Delete(ctx, series, from, to)
	}
	// Announced in the change log after the tables changed, failed or not (some samples
	// may be gone): no read cache answers with them after.
	if rerr := raw.RecordRange(ctx, db.changes, from, to, db.floats, db.hists); err == nil {
		err = rerr
	}
	return err
}

// QueryPage returns at most limit points of [from, to) from token ("" to start). A token is
// the time the next page starts at (just after the last point returned), bound to the
// series and range; each page is a fresh query of the raw stores from there, one point past
// the page telling whether there is a next.
func (db *DB) QueryPage(ctx context.Context, series string, from, to time.Time, limit int, token string) (tablets.Page, error) {
	if err := db.floats.Validate(ctx, series); err != nil {
		return tablets.Page{}, fmt.Errorf("tsdb: %w", err)
	}
	if err := rounding.CheckRange(from, to); err != nil {
		return tablets.Page{}, err
	}
	if limit < 1 {
		return tablets.Page{}, fmt.Errorf("tsdb: query page %q: %w: limit %d must be at least 1", series, tablets.ErrInvalidLimit, limit)
	}
	binding := pageBinding(db.name, series, from, to)
	resume := from
	if token != "" {
		var err error
		if resume, err = decodePageToken(token, binding, from, to); err != nil {
			return tablets.Page{}, err
		}
	}
	staged, err := db.staging.Read(ctx, []string{series}, resume, to) // first: see Query
	if err != nil {
		return tablets.Page{}, err
	}
	raw, rawMore, err := db.floats.Page(ctx, series, resume, to, limit)
	if err != nil {
		return tablets.Page{}, err
	}
	rest := staged[series]
	if rawMore {
		// Past the last raw point read, the next page's raw points may come first.
		last := raw[len(raw)-1].Time
		rest = rest[:len(slices.DeleteFunc(slices.Clone(rest), func(p tablets.Point) bool { return p.Time.After(last) }))]
	}
	var merged []tablets.Point
	for p, err := range staging.PointsMerge.One(staging.PointsOfSlice(raw), rest) {
		if err != nil {
			return tablets.Page{}, err
		}
		merged = append(merged, p)
	}
	var out tablets.Page
	more := rawMore || len(rest) < len(staged[series])
	if len(merged) > limit {
		merged, more = merged[:limit], true
	}
	out.Points = merged
	if more {
		out.Next = encodePageToken(binding, out.Points[len(out.Points)-1].Time.Add(time.Nanosecond))
	}
	return out, nil
}

// pageTokenVersion is tsdb's page token (pager's envelope, docs/format.md): two fields, the
// Unix seconds and nanoseconds of the time the next page starts at.
const pageTokenVersion = 1

func pageBinding(db, series string, from, to time.Time) [8]byte {
	h := sha256.New()
	for _, part := range []string{db, series, from.UTC().Format(time.RFC3339Nano), to.UTC().Format(time.RFC3339Nano)} {
		h.Write(binary.AppendUvarint(nil, uint64(len(part))))
		h.Write([]byte(part))
	}
	var b [8]byte
	copy(b[:], h.Sum(nil))
	return b
}

func encodePageToken(binding [8]byte, at time.Time) string {
	return pager.EncodeFields(pageTokenVersion, binding, uint64(at.Unix()), uint64(at.Nanosecond()))
}

func decodePageToken(s string, binding [8]byte, from, to time.Time) (time.Time, error) {
	f, err := pager.DecodeFields(s, pageTokenVersion, binding, 2)
	if err != nil {
		return time.Time{}, err
	}
	sec, nsec := f[0], f[1]
	if nsec >= 1e9 || sec > uint64(tablets.MaxTime.Unix()) {
		return time.Time{}, fmt.Errorf("%w: malformed", tablets.ErrInvalidToken)
	}
	at := time.Unix(int64(sec), int64(nsec)).UTC()
	if !at.After(from) || at.After(to) {
		return time.Time{}, fmt.Errorf("%w: resume position outside the query's range", tablets.ErrInvalidToken)
	}
	return at, nil
}

// Series returns the series with points or histogram samples in the raw periods that
// [from, to) overlaps, sorted (the series index's listing: index.Index.Series).
func (db *DB) Series(ctx context.Context, from, to time.Time) ([]string, error) {
	return db.index.Series(ctx, from, to)
}

// RawFrom returns the start of the oldest raw table, and false when there is none: before
// it, the raw points are gone (dropped by Retain) or were never written, and only the tiers
// may hold windows. The tables are the cached list's while it is younger than a minute, else
// listed again (one request).
func (db *DB) RawFrom(ctx context.Context) (time.Time, bool, error) {
	periods, err := db.tables.All(ctx, rawKind)
	if err != nil || len(periods) == 0 {
		return time.Time{}, false, err
	}
	return db.names.Start(periods[0]), true, nil
}
