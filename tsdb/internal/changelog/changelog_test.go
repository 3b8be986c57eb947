package changelog

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/seed71701133/tablets/internal/testkit/formatdoc"
)

// The change log's entity of docs/format.md, "The catalog", is what a writer writes, and
// reads back as its state.
func TestFormatDoc(t *testing.T) {
	day := time.Date(2024, 5, 23, 0, 0, 0, 0, time.UTC)
	want := State{gen: 7, ranges: []Range{
		{From: day.Add(time.Hour).UnixMilli(), To: day.Add(75*time.Minute).UnixMilli() + 1},
		{From: day.Add(10 * time.Hour).UnixMilli(), To: day.Add(11 * time.Hour).UnixMilli()},
	}}
	doc := formatdoc.JSON(t, "raw-changes")
	if body := appendEntity(Partition, fmt.Sprintf("%012d", day.Unix()), want); string(body) != string(doc) {
		t.Errorf("changes %s, the document %s", body, doc)
	}
	got, err := decodeEntity(doc)
	if err != nil || got.gen != want.gen || !slices.Equal(got.ranges, want.ranges) {
		t.Errorf("decoded %+v, %v; want %+v", got, err, want)
	}
}

// The raw log's entity after a Fold, with its receipt (docs/format.md, "The catalog"): what
// a writer writes, read back with the receipt, whose digest is that of the entities the
// document names.
func TestFormatDocFold(t *testing.T) {
	day := time.Date(2024, 5, 23, 0, 0, 0, 0, time.UTC)
	entities := []ReceiptEntity{
		{"001716426600-00", "18ea95edac91e707-5f3a9c01-0000", `W/"datetime'2024-05-23T01%3A12%3A00.1234567Z'"`},
		{"001716426600-80", "18ea95edac91e707-5f3a9c01-0001", `W/"datetime'2024-05-23T01%3A12%3A00.1234567Z'"`},
		{"001716427200-00", "18ea96b1e1a2c3d4-5f3a9c01-0000", `W/"datetime'2024-05-23T01%3A25%3A30.7654321Z'"`},
	}
	receipt := Receipt{From: uint64(day.Add(70 * time.Minute).Unix()), Horizon: uint64(day.Add(90 * time.Minute).Unix()), Count: 3,
		Digest: ReceiptDigest(entities)}
	want := State{gen: 8, ranges: []Range{
		{From: day.Add(time.Hour).UnixMilli(), To: day.Add(75*time.Minute).UnixMilli() + 1},
		{From: day.Add(10 * time.Hour).UnixMilli(), To: day.Add(11 * time.Hour).UnixMilli()},
		{From: day.Add(70 * time.Minute).UnixMilli(), To: day.Add(90 * time.Minute).UnixMilli()},
	}, receipts: []genReceipt{{gen: 8, Receipt: receipt}}}
	doc := formatdoc.JSON(t, "raw-changes-fold")
	if body := appendEntity(Partition, fmt.Sprintf("%012d", day.Unix()), want); string(body) != string(doc) {
		t.Errorf("changes %s, the document %s", body, doc)
	}
	got, err := decodeEntity(doc)
	if err != nil || got.gen != want.gen || !slices.Equal(got.ranges, want.ranges) || !slices.Equal(got.receipts, want.receipts) {
		t.Errorf("decoded %+v, %v; want %+v", got, err, want)
	}
	if r, ok := got.Folds(7, 0, day.Add(24*time.Hour).UnixMilli()); !ok || !slices.Equal(r, []Receipt{receipt}) {
		t.Errorf("folds after generation 7: %v, %v", r, ok)
	}
}

// The raw log's entity with its hull (docs/format.md, "The catalog"): what a writer of this
// version writes at generation 2, and what a reader of it knows once the ranges are gone.
func TestFormatDocHull(t *testing.T) {
	day := time.Date(2024, 5, 23, 0, 0, 0, 0, time.UTC)
	want := State{gen: 2, ranges: []Range{
		{From: day.Add(time.Hour).UnixMilli(), To: day.Add(75*time.Minute).UnixMilli() + 1},
		{From: day.UnixMilli(), To: day.Add(30 * time.Minute).UnixMilli()},
	}, hull: Range{From: day.UnixMilli(), To: day.Add(75*time.Minute).UnixMilli() + 1}, hullKept: true}
	doc := formatdoc.JSON(t, "raw-changes-hull")
	if body := appendEntity(Partition, fmt.Sprintf("%012d", day.Unix()), want); string(body) != string(doc) {
		t.Errorf("changes %s, the document %s", body, doc)
	}
	got, err := decodeEntity(doc)
	if err != nil || got.gen != want.gen || !slices.Equal(got.ranges, want.ranges) || got.hull != want.hull || !got.hullKept {
		t.Errorf("decoded %+v, %v; want %+v", got, err, want)
	}
	got.gen, got.ranges = 90, got.ranges[1:]
	if h, ok := got.Hull(); !ok || h != want.hull {
		t.Errorf("hull at generation 90: %v, %v; want %v", h, ok, want.hull)
	}
}

// A reader rejects another version, a generation that is not a whole number, ranges that
// are not 16 bytes each, empty, more than kept, or more than the generation counts.
func TestDecode(t *testing.T) {
	for _, bad := range []string{
		`{"PartitionKey":"changes","RowKey":"001716422400","V":2,"G":1,"C@odata.type":"Edm.Binary","C":""}`,
		`{"PartitionKey":"changes","RowKey":"001716422400","G":1}`,
		`{"PartitionKey":"changes","RowKey":"001716422400","V":1,"G":1.5}`,
		`{"PartitionKey":"changes","RowKey":"001716422400","V":1,"G":-1}`,
		`{"PartitionKey":"changes","RowKey":"001716422400","V":1}`,
		`{"PartitionKey":"changes","RowKey":"001716422400","V":1,"G":1,"C@odata.type":"Edm.Binary","C":"AAAB"}`,
		`{"PartitionKey":"changes","RowKey":"001716422400","V":1,"G":1,"C@odata.type":"Edm.Binary","C":"!!"}`,
		// [2, 1): empty.
		`{"PartitionKey":"changes","RowKey":"001716422400","V":1,"G":1,"C@odata.type":"Edm.Binary","C":"AAAAAAAAAAIAAAAAAAAAAQ=="}`,
		// Two ranges for generation 1.
		`{"PartitionKey":"changes","RowKey":"001716422400","V":1,"G":1,"C@odata.type":"Edm.Binary","C":"AAAAAAAAAAEAAAAAAAAAAgAAAAAAAAABAAAAAAAAAAI="}`,
		// Receipts: not 48 bytes each; of generation 2 at generation 1; of generation 0 (no
		// change); an empty range of buckets.
		`{"PartitionKey":"changes","RowKey":"001716422400","V":1,"G":1,"C@odata.type":"Edm.Binary","C":"AAAAAAAAAAEAAAAAAAAAAg==","F@odata.type":"Edm.Binary","F":"AAAB"}`,
		`{"PartitionKey":"changes","RowKey":"001716422400","V":1,"G":1,"C@odata.type":"Edm.Binary","C":"AAAAAAAAAAEAAAAAAAAAAg==","F@odata.type":"Edm.Binary","F":"` + receiptB64(2, 0, 600) + `"}`,
		`{"PartitionKey":"changes","RowKey":"001716422400","V":1,"G":1,"C@odata.type":"Edm.Binary","C":"AAAAAAAAAAEAAAAAAAAAAg==","F@odata.type":"Edm.Binary","F":"` + receiptB64(0, 0, 600) + `"}`,
		`{"PartitionKey":"changes","RowKey":"001716422400","V":1,"G":1,"C@odata.type":"Edm.Binary","C":"AAAAAAAAAAEAAAAAAAAAAg==","F@odata.type":"Edm.Binary","F":"` + receiptB64(1, 600, 600) + `"}`,
		// Two receipts of one generation.
		`{"PartitionKey":"changes","RowKey":"001716422400","V":1,"G":1,"C@odata.type":"Edm.Binary","C":"AAAAAAAAAAEAAAAAAAAAAg==","F@odata.type":"Edm.Binary","F":"` + receiptB64(1, 0, 600, 1, 0, 600) + `"}`,
		// Hulls: not 16 bytes; empty at generation 1; not holding the change [1, 2); not empty
		// at generation 0.
		`{"PartitionKey":"changes","RowKey":"001716422400","V":1,"G":1,"C@odata.type":"Edm.Binary","C":"AAAAAAAAAAEAAAAAAAAAAg==","H@odata.type":"Edm.Binary","H":"AAAB"}`,
		`{"PartitionKey":"changes","RowKey":"001716422400","V":1,"G":1,"C@odata.type":"Edm.Binary","C":"AAAAAAAAAAEAAAAAAAAAAg==","H@odata.type":"Edm.Binary","H":"` + hullB64(2, 2) + `"}`,
		`{"PartitionKey":"changes","RowKey":"001716422400","V":1,"G":1,"C@odata.type":"Edm.Binary","C":"AAAAAAAAAAEAAAAAAAAAAg==","H@odata.type":"Edm.Binary","H":"` + hullB64(0, 1) + `"}`,
		`{"PartitionKey":"changes","RowKey":"001716422400","V":1,"G":0,"H@odata.type":"Edm.Binary","H":"` + hullB64(0, 1) + `"}`,
	} {
		if s, err := decodeEntity([]byte(bad)); err == nil {
			t.Errorf("%s: read as %+v", bad, s)
		}
	}
	s, err := decodeEntity([]byte(`{"odata.etag":"W/\"x\"","PartitionKey":"changes","RowKey":"001716422400","V":1,"G":3}`))
	if err != nil || s.gen != 3 || len(s.ranges) != 0 {
		t.Errorf("decoded %+v, %v", s, err)
	}
	s, err = decodeEntity([]byte(`{"PartitionKey":"changes","RowKey":"001716422400","V":1,"G":1,"C@odata.type":"Edm.Binary","C":"AAAAAAAAAAEAAAAAAAAAAg==","F@odata.type":"Edm.Binary","F":"` + receiptB64(1, 0, 600) + `"}`))
	if err != nil || len(s.receipts) != 1 || s.receipts[0].gen != 1 || s.receipts[0].Horizon != 600 {
		t.Errorf("decoded %+v, %v", s, err)
	}
	// A hull wider than the ranges kept: the changes before them.
	s, err = decodeEntity([]byte(`{"PartitionKey":"changes","RowKey":"001716422400","V":1,"G":90,"C@odata.type":"Edm.Binary","C":"AAAAAAAAAAEAAAAAAAAAAg==","H@odata.type":"Edm.Binary","H":"` + hullB64(-5, 9) + `"}`))
	if h, ok := s.Hull(); err != nil || !ok || h != (Range{From: -5, To: 9}) {
		t.Errorf("decoded %+v, %v: hull %v, %v", s, err, h, ok)
	}
}

// hullB64 is the H property of the hull [from, to).
func hullB64(from, to int64) string {
	b := binary.BigEndian.AppendUint64(nil, uint64(from))
	return base64.StdEncoding.EncodeToString(binary.BigEndian.AppendUint64(b, uint64(to)))
}

// receiptB64 is the F property of receipts of (generation, From, Horizon), in threes.
func receiptB64(v ...uint64) string {
	var b []byte
	for i := 0; i+2 < len(v); i += 3 {
		for _, x := range []uint64{v[i], v[i+1], v[i+2], 1} {
			b = binary.BigEndian.AppendUint64(b, x)
		}
		b = append(b, make([]byte, 16)...)
	}
	return base64.StdEncoding.EncodeToString(b)
}

// What a cached range still holds at a later state: up to the first change after its
// generation that overlaps it; nothing once the log lost a change after it, or went back.
func TestValidUntil(t *testing.T) {
	s := State{gen: 10, ranges: []Range{{From: 50, To: 60}, {From: 200, To: 300}, {From: 120, To: 121}}}
	for _, c := range []struct {
		gen      uint64
		from, to int64
		want     int64
	}{
		{10, 0, 1000, 1000},  // read at the current generation
		{9, 0, 1000, 120},    // the last change, at 120
		{9, 0, 120, 120},     // which is after the range
		{9, 121, 1000, 1000}, // and before it
		{8, 0, 1000, 120},    // the last two: the earliest overlapping start
		{8, 250, 1000, 250},  // a change across the range's start: nothing stands
		{8, 130, 1000, 200},
		{7, 0, 1000, 50},
		{7, 55, 1000, 55},
		{6, 0, 1000, 0},  // a change after generation 6 is no longer recorded
		{11, 0, 1000, 0}, // a log that went back
	} {
		if got := s.ValidUntil(c.gen, c.from, c.to); got != c.want {
			t.Errorf("validUntil(%d, %d, %d) = %d, want %d", c.gen, c.from, c.to, got, c.want)
		}
	}
}

// How many changes after a generation overlap a range: counted while the state records each
// of them.
func TestStateChanges(t *testing.T) {
	s := State{gen: 10, ranges: []Range{{From: 50, To: 60}, {From: 200, To: 300}, {From: 120, To: 121}}}
	for _, c := range []struct {
		gen      uint64
		from, to int64
		want     int
		known    bool
	}{
		{10, 0, 1000, 0, true},
		{9, 0, 1000, 1, true},
		{9, 121, 1000, 0, true}, // the last change ends where the range starts
		{7, 0, 1000, 3, true},
		{7, 55, 250, 3, true},
		{7, 60, 120, 0, true}, // between them all
		{7, 100, 1000, 2, true},
		{6, 0, 1000, 0, false},  // a change after generation 6 is no longer recorded
		{11, 0, 1000, 0, false}, // a log that went back
	} {
		if got, known := s.Changes(c.gen, c.from, c.to); got != c.want || known != c.known {
			t.Errorf("Changes(%d, %d, %d) = %d, %v, want %d, %v", c.gen, c.from, c.to, got, known, c.want, c.known)
		}
	}
}

// The hull of a period's changes: known while the state records each of them, whatever
// their order; a period without changes has an empty one.
func TestStateHull(t *testing.T) {
	for _, c := range []struct {
		s    State
		want Range
		ok   bool
	}{
		{State{}, Range{}, true},
		{State{gen: 1, ranges: []Range{{From: 50, To: 60}}}, Range{From: 50, To: 60}, true},
		{State{gen: 3, ranges: []Range{{From: 200, To: 300}, {From: 50, To: 60}, {From: 120, To: 121}}}, Range{From: 50, To: 300}, true},
		{State{gen: 4, ranges: []Range{{From: 200, To: 300}, {From: 50, To: 60}, {From: 120, To: 121}}}, Range{}, false}, // the first change is no longer recorded
		// The entity keeps the hull (H): known past the changes recorded.
		{State{gen: 4, ranges: []Range{{From: 200, To: 300}, {From: 50, To: 60}, {From: 120, To: 121}}, hull: Range{From: 10, To: 300}, hullKept: true}, Range{From: 10, To: 300}, true},
	} {
		got, ok := c.s.Hull()
		if got != c.want || ok != c.ok {
			t.Errorf("%+v: Hull() = %v, %v, want %v, %v", c.s, got, ok, c.want, c.ok)
		}
	}
}

// No input makes the decoder panic, and what it accepts it writes back the same.
func FuzzDecode(f *testing.F) {
	f.Add(appendEntity(Partition, "001716422400", State{gen: 2, ranges: []Range{{From: 1, To: 2}, {From: 5, To: 9}}}))
	f.Add([]byte(`{"PartitionKey":"changes","RowKey":"001716422400","V":1,"G":3}`))
	f.Add(appendEntity(Partition, "001716422400", State{gen: 3, ranges: []Range{{From: 1, To: 2}, {From: 5, To: 9}},
		receipts: []genReceipt{{gen: 2, Receipt: Receipt{From: 0, Horizon: 600, Count: 4, Digest: [16]byte{9}}}}}))
	f.Add(appendEntity(Partition, "001716422400", State{gen: 90, ranges: []Range{{From: 1, To: 2}, {From: 5, To: 9}},
		hull: Range{From: -3, To: 9}, hullKept: true}))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := decodeEntity(b)
		if err != nil {
			return
		}
		again, err := decodeEntity(appendEntity(Partition, "001716422400", s))
		if err != nil || again.gen != s.gen || !slices.Equal(again.ranges, s.ranges) || !slices.Equal(again.receipts, s.receipts) ||
			again.hull != s.hull || again.hullKept != s.hullKept {
			t.Fatalf("%+v written and read back: %+v, %v", s, again, err)
		}
	})
}

// The staging log's entity of docs/format.md ("The staging log") is a log's entity in the
// staging table's partition.
func TestFormatDocStaging(t *testing.T) {
	want := State{gen: 2, ranges: []Range{{From: 0, To: 1}, {From: 0, To: 1}}}
	doc := formatdoc.JSON(t, "staging-changes")
	if body := appendEntity("!changes", "s", want); string(body) != string(doc) {
		t.Errorf("changes %s, the document %s", body, doc)
	}
}

// The folds' log's entity of docs/format.md ("The folds' log") is a log's entity too.
func TestFormatDocFolds(t *testing.T) {
	want := State{gen: 1, ranges: []Range{{From: 0, To: 1}}}
	doc := formatdoc.JSON(t, "staging-folds")
	if body := appendEntity("~folds", "b", want); string(body) != string(doc) {
		t.Errorf("folds %s, the document %s", body, doc)
	}
}
