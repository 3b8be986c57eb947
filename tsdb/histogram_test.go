package tsdb

import (
	"github.com/seed71701133/tablets/internal/chunks"
	"github.com/seed71701133/tablets/internal/engine"
	"github.com/seed71701133/tablets/internal/histenc"
	"github.com/seed71701133/tablets/tsdb/internal/raw"
)

// The tables of chunks themselves (keys, rows, reads across a compaction, runs, the merger,
// decoding any entity) are tested in internal/chunks, with the histogram tables' layout.

// histRow is a chunk entity of a histogram table as a write makes it: it holds the samples
// [from, to) of the write's samples.
type histRow struct {
	pk, rk   string
	body     []byte
	from, to int
}

// histRows cuts samples (strictly increasing milliseconds) of series into the chunk
// entities a write of priority prio sends.
func histRows(series string, samples []histenc.Sample, prio uint64) []histRow {
	var rows []histRow
	raw.HistLayout.Rows(series, chunks.HistogramUnits(samples), samples, prio, func(r engine.Row) {
		rows = append(rows, histRow{pk: r.PartitionKey, rk: r.RowKey, body: r.Body, from: r.From, to: r.To})
	})
	return rows
}

// histPartitionOf is the first millisecond of the partition (day) of millisecond u.
func histPartitionOf(u uint64) uint64 { return raw.HistLayout.PartitionOf(u) }
