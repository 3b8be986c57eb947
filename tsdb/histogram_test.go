package tsdb

import (
	"errors"
	"testing"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/chunks"
	"github.com/seed71701133/tablets/internal/engine"
	"github.com/seed71701133/tablets/internal/histenc"
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
	histLayout.Rows(series, chunks.HistogramUnits(samples), samples, prio, func(r engine.Row) {
		rows = append(rows, histRow{pk: r.PartitionKey, rk: r.RowKey, body: r.Body, from: r.From, to: r.To})
	})
	return rows
}

// histPartitionOf is the first millisecond of the partition (day) of millisecond u.
func histPartitionOf(u uint64) uint64 { return histLayout.PartitionOf(u) }

// A sample too large for a chunk of its own (Azure's 64 KiB binary property) is invalid
// input, found before any request; ordinary ones pass without being encoded twice.
func TestValidHistSampleSize(t *testing.T) {
	big := func(n int) HistogramPoint {
		h := &tablets.FloatHistogram{Schema: 0, PositiveSpans: []tablets.HistogramSpan{{Length: uint32(n)}}}
		for i := range n {
			v := float64(i*7919%1000) + 1.0/float64(i+3)
			h.PositiveBuckets = append(h.PositiveBuckets, v)
			h.Count += v
		}
		return HistogramPoint{FH: h}
	}
	if err := validHistSample(big(160)); err != nil {
		t.Fatalf("160 buckets: %v", err)
	}
	err := validHistSample(big(20000))
	if !errors.Is(err, tablets.ErrInvalidHistogram) {
		t.Fatalf("20,000 buckets: %v", err)
	}
}
