package staging

import (
	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/histenc"
	"github.com/seed71701133/tablets/internal/stageenc"
)

// Record is a run of one series' samples in a staging column: a float series (of a float
// entity) or a histogram record (of a histogram entity), no more than half a column.
type Record struct {
	points      *stageenc.Series // float points
	chunk       []byte           // histogram samples (histenc), of key
	key         string
	size        int // bytes in the column
	first, last int64
	count       int
	// Args are the caller's samples it holds: a failed transaction lists exactly them.
	Args []int
}

// PointRecords cuts a series' float points into records: sorted by millisecond, the later
// argument winning a millisecond, in runs of at most half a column. pts[j] is the caller's
// sample args[j].
func PointRecords(series string, pts []tablets.Point, args []int) []Record {
	s := SortedSeries(series, pts)
	var out []Record
	for len(s.Times) > 0 {
		piece := s
		for stageenc.Size(piece)+stageenc.HeaderSize > MaxColumn/2 && len(piece.Times) > 1 {
			half := len(piece.Times) / 2
			piece = stageenc.Series{Key: s.Key, Times: piece.Times[:half], Values: piece.Values[:half]}
		}
		s = stageenc.Series{Key: s.Key, Times: s.Times[len(piece.Times):], Values: s.Values[len(piece.Times):]}
		// The caller's points the piece holds (a piece is a run of milliseconds).
		first, last := piece.Times[0], piece.Times[len(piece.Times)-1]
		var held []int
		for j, a := range args {
			if ms := pts[j].Time.UnixMilli(); ms >= first && ms <= last {
				held = append(held, a)
			}
		}
		out = append(out, Record{points: &piece, key: series, size: stageenc.Size(piece), first: first, last: last,
			count: len(piece.Times), Args: held})
	}
	return out
}

// HistRecords cuts a series' histogram samples (sorted, one a millisecond: sorted[j] holds
// the caller's samples args[j], the last of which won the millisecond) into records, a
// chunk each of at most half a column.
func HistRecords(series string, sorted []histenc.Sample, args [][]int) []Record {
	var out []Record
	for len(sorted) > 0 {
		chunk, k := histenc.AppendLimit(nil, sorted, MaxColumn/2)
		var held []int
		for _, a := range args[:k] {
			held = append(held, a...)
		}
		out = append(out, Record{chunk: chunk, key: series, size: stageenc.HistRecordSize(series, len(chunk)),
			first: int64(sorted[0].Unit), last: int64(sorted[k-1].Unit), count: k, Args: held})
		sorted, args = sorted[k:], args[k:]
	}
	return out
}

// Write is what a write stages of one series and kind: its records.
type Write struct {
	Series  string
	Hist    bool // histogram samples: they go in histogram entities
	Records []Record
}

// Build packs writes into entities, by partition: those of arrival bucket (Unix seconds),
// of the writer's id and of a write's stamp, over partitions partitions. Float entities
// and histogram entities of a partition are in the order made, so that its transactions
// hold both. An entity's pieces name the writes (their index in writes) and the samples
// of each it holds.
func Build(writes []Write, bucket, stamp uint64, writer uint32, partitions int) map[string][]*Entity {
	byPartition := map[string][]*Entity{}
	type open struct {
		pk   string
		hist bool
	}
	last := map[open]*Entity{} // the entity of a partition and kind being filled
	n := 0
	for i, w := range writes {
		if len(w.Records) == 0 {
			continue
		}
		slot, column := Hash(w.Series)
		lo, hi := SlotRange(slot, partitions)
		pk := PartitionKey(bucket, lo)
		for _, r := range w.Records {
			e := last[open{pk, w.Hist}]
			if e == nil || !e.Fits(column, r.size) {
				version := Version
				if w.Hist {
					version = HistVersion
				}
				e = &Entity{PartitionKey: pk, RowKey: RowKey(stamp, writer, n), Lo: lo, Hi: hi, Version: version}
				n++
				byPartition[pk] = append(byPartition[pk], e)
				last[open{pk, w.Hist}] = e
			}
			e.AddRecord(column, r, Piece{Write: i, Args: r.Args})
		}
	}
	return byPartition
}

// AddRecord adds a record to column of an entity of its kind.
func (e *Entity) AddRecord(column int, r Record, piece Piece) {
	if r.points != nil {
		e.Add(column, *r.points, piece)
		return
	}
	e.AddHist(column, r.key, r.chunk, r.first, r.last, r.count, piece)
}
