package tsdb

import (
	"encoding/base64"
	"slices"
	"testing"
	"time"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/internal/histenc"
	"github.com/seed71701133/tablets/internal/testkit/formatdoc"
	"github.com/seed71701133/tablets/tsdb/internal/catalog"
	"github.com/seed71701133/tablets/tsdb/internal/index"
	"github.com/seed71701133/tablets/tsdb/internal/labels"
	"github.com/seed71701133/tablets/tsdb/internal/lease"
	"github.com/seed71701133/tablets/tsdb/internal/naming"
	"github.com/seed71701133/tablets/tsdb/internal/staging"
	"github.com/seed71701133/tablets/tsdb/internal/tiers"
)

// The worked examples of docs/format.md that tsdb writes: table names, label sets and
// series keys, the catalog's entities, the index's, a page token (the tier block: package
// tiers' TestBlockFormatDoc).
func TestFormatDoc(t *testing.T) {
	db := &DB{name: "metrics", names: naming.Names{Base: "metrics", Period: DefaultRawPeriod}}
	db.tiers = tiers.New(db.service, db.names, tiers.Config{}, db.catalog, db.tables, tiers.Reads{})
	period := uint64(time.Date(2024, 5, 23, 0, 0, 0, 0, time.UTC).Unix())
	hour := Tier{Step: time.Hour, Period: 364 * 24 * time.Hour}
	tables := []string{db.names.Catalog(), db.names.RawTable(period), db.names.IndexTable(period), db.tiers.TierTable(hour, 1698278400), db.names.Staging(), db.names.Answers()}
	if want := formatdoc.Lines(t, "tables"); !slices.Equal(tables, want) {
		t.Errorf("tables %q, the document %q", tables, want)
	}

	ls := LabelsFromStrings("job", "api", "__name__", "up")
	enc, err := ls.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if string(enc) != string(formatdoc.Hex(t, "labels")) {
		t.Errorf("label set %x", enc)
	}
	key := labels.Key(ls)
	if want := formatdoc.Lines(t, "series-key"); len(want) != 1 || key != want[0] {
		t.Errorf("series key %s, the document %q", key, want)
	}

	// The bodies SeriesOfMany, a Write and Retain send, built from the same parts.
	registry := entity.AppendEnd(entity.AppendBinary(entity.AppendKeys(nil, catalog.RegistryPartition(key), key), catalog.LabelsProperty, labels.Append(nil, ls)))
	indexed := entity.AppendEnd(entity.AppendBinary(entity.AppendKeys(nil, catalog.MetricPartition("up"), key), catalog.LabelsProperty, labels.Append(nil, ls)))
	plain := entity.AppendEnd(entity.AppendKeys(nil, index.PlainPartition, "cpu"))
	dropped := entity.AppendEnd(entity.AppendDouble(entity.AppendKeys(nil, catalog.Dropped, db.names.RawTable(period)), entity.ValueProperty, 1))
	for _, tc := range []struct {
		body, doc []byte
	}{
		{registry, formatdoc.JSON(t, "registry")},
		{indexed, formatdoc.JSON(t, "index-labels")},
		{plain, formatdoc.JSON(t, "index-plain")},
		{dropped, formatdoc.JSON(t, "dropped")},
		{rawFormatBody(), formatdoc.JSON(t, "raw-format")},
		{tierLayoutBody(tierLayoutPacked), formatdoc.JSON(t, "tier-layout")},
	} {
		if string(tc.body) != string(tc.doc) {
			t.Errorf("%s, the document %s", tc.body, tc.doc)
		}
	}

	// A block of the minute tier, and its stale flag: see package tiers' TestBlockFormatDoc.
	start := uint64(time.Date(2024, 5, 23, 0, 0, 0, 0, time.UTC).Unix())
	ws := time.Unix(int64(start), 0).UTC().Add(2 * time.Minute)
	// A page token of a read of that series over the period's first day.
	from, to := time.Unix(int64(period), 0).UTC(), time.Unix(int64(period), 0).UTC().Add(24*time.Hour)
	token := encodePageToken(pageBinding(db.name, key, from, to), from.Add(90*time.Minute+500*time.Millisecond))
	if want := formatdoc.Lines(t, "tsdb-token"); len(want) != 1 || token != want[0] {
		t.Errorf("token %s", token)
	}
	// A staging entity of a write of two points of that series, and the fold lease.
	slot, column := staging.Hash(key)
	if slot != 149 || column != 183 {
		t.Errorf("slot %d column %d, the document 149 and 183", slot, column)
	}
	pts := []tablets.Point{{Time: ws.Add(time.Second), Value: 2.5}, {Time: ws.Add(16 * time.Second), Value: 4}}
	e := &staging.Entity{PartitionKey: staging.PartitionKey(start, 0), RowKey: staging.RowKey(0x18ea95edac91e707, 0x9e3779b9, 0), Hi: 255}
	e.Add(column, staging.SortedSeries(key, pts), staging.Piece{})
	if body := e.Body(); string(body) != string(formatdoc.JSON(t, "staging-entity")) {
		t.Errorf("staging entity %s", body)
	}
	// The histogram staging entity of a write of one sample of that series at 00:02:01.
	h := &staging.Entity{PartitionKey: staging.PartitionKey(start, 0), RowKey: staging.RowKey(0x18ea95edac91e708, 0x9e3779b9, 0), Hi: 255, Version: staging.HistVersion}
	sample := histenc.Sample{Unit: uint64(ws.Add(time.Second).UnixMilli()), H: &tablets.Histogram{Count: 3, Sum: 2.5,
		PositiveSpans: []tablets.HistogramSpan{{Offset: 0, Length: 2}}, PositiveBuckets: []int64{1, 1}}}
	h.AddHist(column, key, histenc.Append(nil, []histenc.Sample{sample}), int64(sample.Unit), int64(sample.Unit), 1, staging.Piece{})
	if body := h.Body(); string(body) != string(formatdoc.JSON(t, "staging-entity-hist")) {
		t.Errorf("histogram staging entity %s", body)
	}
	if body := staging.FoldLeaseBody("9e3779b9-18ea95edac91e707", time.UnixMilli(1716422700000)); string(body) != string(formatdoc.JSON(t, "fold-lease")) {
		t.Errorf("fold lease %s", body)
	}
	if body := lease.Body(taskLeases[TaskCompact].PartitionKey, "5f0e3c2a9b1d7e64", time.UnixMilli(1716422700000)); string(body) != string(formatdoc.JSON(t, "compact-lease")) {
		t.Errorf("compaction lease %s", body)
	}
	if body := lease.Body(taskLeases[TaskRollup].PartitionKey, "5f0e3c2a9b1d7e64", time.UnixMilli(1716422700000)); string(body) != string(formatdoc.JSON(t, "rollup-lease")) {
		t.Errorf("rollup lease %s", body)
	}
	if body := lease.Body(taskLeases[TaskFlagged].PartitionKey, "5f0e3c2a9b1d7e64", time.UnixMilli(1716422700000)); string(body) != string(formatdoc.JSON(t, "flagged-lease")) {
		t.Errorf("flagged lease %s", body)
	}
	for slot, golden := range [][]byte{formatdoc.JSON(t, "background-lease"), formatdoc.JSON(t, "background1-lease")} {
		kind, _ := backgroundLease(BackgroundTask(slot))
		if body := lease.Body(kind.PartitionKey, "5f0e3c2a9b1d7e64", time.UnixMilli(1716422700000)); string(body) != string(golden) {
			t.Errorf("background lease, slot %d: %s", slot, body)
		}
	}
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil || string(raw) != string(formatdoc.Hex(t, "tsdb-token-bytes")) {
		t.Errorf("token bytes %x, %v", raw, err)
	}
}
