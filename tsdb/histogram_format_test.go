package tsdb

import (
	"testing"
	"time"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/histenc"
	"github.com/seed71701133/tablets/internal/partkey"
	"github.com/seed71701133/tablets/internal/testkit/formatdoc"
	"github.com/seed71701133/tablets/tsdb/internal/catalog"
	"github.com/seed71701133/tablets/tsdb/internal/index"
	"github.com/seed71701133/tablets/tsdb/internal/labels"
	"github.com/seed71701133/tablets/tsdb/internal/naming"
	"github.com/seed71701133/tablets/tsdb/internal/raw"
)

// formatHistSeries is the label set of the histogram examples of docs/format.md.
var formatHistSeries = LabelsFromStrings("__name__", "rpc_seconds", "job", "api")

// formatHistSamples are the two samples of the example chunk: 00:01:00 and 00:01:15 on
// 2024-05-23, integer histograms of schema 3.
func formatHistSamples() []histenc.Sample {
	day := uint64(time.Date(2024, 5, 23, 0, 0, 0, 0, time.UTC).UnixMilli())
	h := func(buckets ...int64) *tablets.Histogram {
		var n, abs int64
		for _, d := range buckets {
			abs += d
			n += abs
		}
		return &tablets.Histogram{Schema: 3, ZeroThreshold: 1e-128, Count: uint64(n), Sum: 0.125 * float64(n),
			PositiveSpans: []tablets.HistogramSpan{{Offset: -2, Length: uint32(len(buckets))}}, PositiveBuckets: buckets}
	}
	return []histenc.Sample{{Unit: day + 60_000, H: h(1, 2, -1)}, {Unit: day + 75_000, H: h(2, 2, -1)}}
}

// The worked examples of docs/format.md's "Histogram tables" and the index entry of a series
// with histograms.
func TestHistogramFormatDoc(t *testing.T) {
	db := &DB{name: "metrics", names: naming.Names{Base: "metrics", Period: DefaultRawPeriod}}
	period := uint64(time.Date(2024, 5, 23, 0, 0, 0, 0, time.UTC).Unix())
	if want := formatdoc.Lines(t, "hist-table"); len(want) != 1 || want[0] != db.names.HistTable(period) {
		t.Errorf("histogram table %s, the document %q", db.names.HistTable(period), want)
	}
	key := labels.Key(formatHistSeries)
	samples := formatHistSamples()
	rows := histRows(key, samples, 0x18ea95edac91e707)
	if len(rows) != 1 {
		t.Fatalf("%d chunks", len(rows))
	}
	if string(rows[0].body) != string(formatdoc.JSON(t, "hist-chunk")) {
		t.Errorf("histogram chunk entity %s", rows[0].body)
	}
	if want := partkey.Key(raw.HistFormat, key, histPartitionOf(samples[0].Unit)); rows[0].pk != want {
		t.Errorf("PartitionKey %s, want %s", rows[0].pk, want)
	}
	_, entry := index.Entity(key, catalog.NewEntry(formatHistSeries), true, true)
	if string(entry) != string(formatdoc.JSON(t, "index-histograms")) {
		t.Errorf("index entry %s", entry)
	}
}
