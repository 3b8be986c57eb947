package chunked

import (
	"context"
	"fmt"
	"iter"
	"slices"
	"time"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/filter"
	"github.com/seed71701133/tablets/internal/chunks"
	"github.com/seed71701133/tablets/internal/pager"
	"github.com/seed71701133/tablets/internal/partkey"
	"github.com/seed71701133/tablets/rounding"
)

// ChunkInfo is a chunk as ScanChunks finds it: its keys, not its points.
type ChunkInfo struct {
	Series    string
	Partition time.Time // the start of its partition
	First     time.Time // the time of its first point
	Last      time.Time // the time of its last point
}

// SeriesPoints are the points of one series, oldest first.
type SeriesPoints struct {
	Series string
	Points []tablets.Point
}

// ScanOptions narrow ScanPoints. nil: every series of the table.
type ScanOptions struct {
	// Series, unless nil, are the only series yielded. The scan reads the keys from the
	// first to the last of them in the order of CompareSeries: a caller that scans a large
	// table a group of series at a time reads least with groups consecutive in that order.
	Series []string
}

// CompareSeries is the order of series in a table, the order in which scans yield them: the
// order of their PartitionKeys (docs/format.md, "Layout chunked"), not quite that of their
// names ("cpu_total" comes before "cpu").
func CompareSeries(a, b string) int { return partkey.Compare(a, b) }

// ScanChunks yields the keys of every chunk of every series in the partitions that [from, to)
// overlaps (whole partitions, as Compact works), series by series in the order of
// CompareSeries, each series' chunks by first time. It sends one query across all
// partitions, paged (at most 1,000 chunks a page), selecting the keys and L only. It is not
// a snapshot: a chunk written or compacted while it runs may be missed, or seen beside the
// chunks it replaced; use it to plan work (as CompactAll does), not to read points. On Azure
// the query scans the table server-side, and is billed as the requests it takes (a page is at
// most 1,000 entities or 5 seconds of the service's time, and may be empty). An entity that
// is not a chunk of this layout is an error. Bad times are an error wrapping
// tablets.ErrInvalidTime, before any request.
func (s *Store) ScanChunks(ctx context.Context, from, to time.Time) iter.Seq2[ChunkInfo, error] {
	return func(yield func(ChunkInfo, error) bool) {
		lo, hi, err := s.scanUnits(from, to)
		if err != nil {
			yield(ChunkInfo{}, err)
			return
		}
		if lo >= hi {
			return
		}
		f := s.layout.format
		for k, err := range s.table().ScanKeys(ctx, lo, hi) {
			if err != nil {
				yield(ChunkInfo{}, fmt.Errorf("chunked: scan: %w", err))
				return
			}
			c := ChunkInfo{Series: k.Series, Partition: f.Time(k.Start), First: f.Time(k.First), Last: f.Time(k.Last)}
			if !yield(c, nil) {
				return
			}
		}
	}
}

// splitKey recovers the series and partition start of an entity's PartitionKey.
func (s *Store) splitKey(e *entity.Entity) (string, uint64, error) {
	return s.layout.chunks().SplitKey(e)
}

// scanUnits returns [from, to) as units, a unit in the range iff its time is; hi may be one
// past the format's last unit.
func (s *Store) scanUnits(from, to time.Time) (uint64, uint64, error) {
	if err := rounding.CheckRange(from, to); err != nil {
		return 0, 0, err
	}
	f := s.layout.format
	ceil := func(t time.Time) uint64 {
		u, err := f.Units(t)
		if err != nil {
			return f.Last + 1
		}
		if f.Time(u).Before(t) {
			u++
		}
		return u
	}
	return ceil(from), ceil(to), nil
}

// scanFilter selects the chunks of the partitions that [lo, hi) overlaps, whole (see
// chunks.Layout.ScanFilter): every chunk of such a partition is selected, so that a page cut
// inside a partition is always cut after some of its chunks (see ScanPoints).
func (s *Store) scanFilter(lo, hi uint64, lower string, strict bool, upper string) filter.Expr {
	return s.layout.chunks().ScanFilter(lo, hi, lower, strict, upper)
}

// ScanPoints yields the points in [from, to) of every series of the table (or of
// opts.Series), series by series in the order of CompareSeries, each series' points oldest
// first, the latest write of a time winning, as Query reads them; a series without points
// there is not yielded. It reads the chunks of the partitions the range overlaps (whole
// partitions) with one query across partitions, paged (at most 1,000 chunks a page),
// instead of a query per series: on Azure the query scans the table (or the range of keys
// of opts.Series) server-side, and is billed as the requests it takes (a page is at most
// 1,000 entities or 5 seconds of the service's time, and may be empty).
//
// Each partition is read within one request, as Query reads it, so a compaction that
// commits meanwhile neither hides a point nor shows it twice: where a page ends inside a
// partition, the scan starts again from that partition in a fresh query (a partition of
// more chunks than a page holds is read by itself, as Query reads it). It holds one series'
// points at a time. An entity that is not a chunk of this layout is an error; so are bad
// times (tablets.ErrInvalidTime) and bad series names (tablets.ErrInvalidSeries), before any
// request.
func (s *Store) ScanPoints(ctx context.Context, from, to time.Time, opts *ScanOptions) iter.Seq2[SeriesPoints, error] {
	return func(yield func(SeriesPoints, error) bool) {
		sc, err := s.newPointScan(from, to, opts)
		if err != nil {
			yield(SeriesPoints{}, err)
			return
		}
		if sc.lo >= sc.hi || (sc.want != nil && len(sc.want) == 0) {
			return
		}
		if err := sc.run(ctx, yield); err != nil {
			yield(SeriesPoints{}, fmt.Errorf("chunked: scan: %w", err))
		}
	}
}

// pointScan is the state of a ScanPoints.
type pointScan struct {
	s            *Store
	lo, hi       uint64
	want         map[string]bool // nil: every series
	lower, upper string          // PartitionKey bounds of opts.Series ("": none)

	cur  SeriesPoints // the series being read: the points of its finished partitions
	part scanPart     // the partition being read
	e    entity.Entity
}

// scanPart is the partition being read: its points merged, by priority.
type scanPart struct {
	pk     string // "" before the first
	series string
	start  uint64
	skip   bool // a series not asked for
	m      chunks.Merger[float64]
}

func (s *Store) newPointScan(from, to time.Time, opts *ScanOptions) (*pointScan, error) {
	lo, hi, err := s.scanUnits(from, to)
	if err != nil {
		return nil, err
	}
	sc := &pointScan{s: s, lo: lo, hi: hi}
	sc.e.AllowStrings = true
	if opts == nil || opts.Series == nil {
		return sc, nil
	}
	sc.want = make(map[string]bool, len(opts.Series))
	for _, name := range opts.Series {
		if err := s.layout.ValidateSeries(name); err != nil {
			return nil, err
		}
		sc.want[name] = true
	}
	if len(opts.Series) > 0 {
		first := slices.MinFunc(opts.Series, CompareSeries)
		last := slices.MaxFunc(opts.Series, CompareSeries)
		sc.lower = partkey.Key(s.layout.format, partkey.Escape(first), 0)
		sc.upper = partkey.End(partkey.Escape(last))
	}
	return sc, nil
}

// run reads the chunks in fresh queries from a PartitionKey, each as far as its pages go:
// where a page that holds chunks has a continuation, the partition of its last chunk may be
// cut (its other chunks come in the next request, after a compaction may have replaced
// them), so it is dropped and the next query starts from it. An empty page with a
// continuation is followed: the filter selects whole partitions, so the service cut none
// after some of its chunks. A query whose chunks all belong to the partition it cut makes no
// progress: that partition is read by itself, as Query reads it, and the next query starts
// after it.
func (sc *pointScan) run(ctx context.Context, yield func(SeriesPoints, error) bool) error {
	lower, strict := sc.lower, false
	for {
		q := pager.SubQuery{Filter: sc.s.scanFilter(sc.lo, sc.hi, lower, strict, sc.upper).String(), Select: sc.s.layout.Select()}
		onlyPart := "" // the one partition this query's chunks belong to, if one
		mixed := false // they belong to several
		var cont pager.Continuation
		for {
			entities, next, err := pager.Fetch(ctx, sc.s.client, q, sc.s.scanTop, cont)
			if err != nil {
				return err
			}
			for _, raw := range entities {
				pk, err := sc.add(raw, yield)
				if err != nil || pk == "" {
					return err // "": the consumer stopped
				}
				if onlyPart == "" {
					onlyPart = pk
				}
				mixed = mixed || pk != onlyPart
			}
			if next.IsZero() {
				sc.finishPart()
				if len(sc.cur.Points) > 0 {
					yield(sc.cur, nil)
				}
				return nil
			}
			if len(entities) == 0 || sc.part.skip {
				cont = next // nothing of a partition we want is cut
				continue
			}
			cut := sc.part.pk
			if mixed {
				sc.part = scanPart{} // read it again, whole, in the next query
				lower, strict = cut, false
				break
			}
			if err := sc.readAlone(ctx); err != nil {
				return err
			}
			lower, strict = cut, true
			break
		}
	}
}

// add decodes a chunk into the partition being read, first finishing the one before (and
// yielding the series before, when the series changes). It returns the chunk's
// PartitionKey, or "" when the consumer stopped.
func (sc *pointScan) add(raw []byte, yield func(SeriesPoints, error) bool) (string, error) {
	e := &sc.e
	if err := e.Decode(raw); err != nil {
		return "", err
	}
	if string(e.PartitionKey) != sc.part.pk {
		series, start, err := sc.s.splitKey(e)
		if err != nil {
			return "", err
		}
		sc.finishPart()
		if series != sc.cur.Series {
			if len(sc.cur.Points) > 0 && !yield(sc.cur, nil) {
				return "", nil
			}
			sc.cur = SeriesPoints{Series: series}
		}
		sc.part = scanPart{pk: string(e.PartitionKey), series: series, start: start, skip: sc.want != nil && !sc.want[series]}
	}
	if sc.part.skip {
		if _, _, err := sc.s.layout.Span(e); err != nil {
			return "", err
		}
		return sc.part.pk, nil
	}
	prio, err := sc.s.layout.Priority(e)
	if err != nil {
		return "", err
	}
	err = sc.s.layout.Points(e, func(u uint64, v float64) {
		if u >= sc.lo && u < sc.hi {
			sc.part.m.Add(u, v, prio)
		}
	})
	return sc.part.pk, err
}

// finishPart adds the points of the partition read to its series'.
func (sc *pointScan) finishPart() {
	f := sc.s.layout.format
	sc.part.m.Release(sc.hi, func(u uint64, v float64) bool {
		sc.cur.Points = append(sc.cur.Points, tablets.Point{Time: f.Time(u), Value: v})
		return true
	})
	sc.part = scanPart{}
}

// readAlone reads the partition being read again, by itself, in fresh snapshots as Query
// does, and finishes it.
func (sc *pointScan) readAlone(ctx context.Context) error {
	l := sc.s.layout
	from := max(sc.lo, sc.part.start)
	to := min(sc.hi, sc.part.start+l.partUnits)
	if to < sc.part.start { // the last partition of a format that ends near 2^64
		to = sc.hi
	}
	sc.part.m = chunks.Merger[float64]{}
	f := l.format
	if from < to {
		for p, err := range sc.s.eng.Query(ctx, sc.part.series, f.Time(from), f.Time(to)) {
			if err != nil {
				return err
			}
			sc.cur.Points = append(sc.cur.Points, p)
		}
	}
	sc.part = scanPart{}
	return nil
}
