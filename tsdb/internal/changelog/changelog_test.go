package changelog

import (
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
	} {
		if s, err := decodeEntity([]byte(bad)); err == nil {
			t.Errorf("%s: read as %+v", bad, s)
		}
	}
	s, err := decodeEntity([]byte(`{"odata.etag":"W/\"x\"","PartitionKey":"changes","RowKey":"001716422400","V":1,"G":3}`))
	if err != nil || s.gen != 3 || len(s.ranges) != 0 {
		t.Errorf("decoded %+v, %v", s, err)
	}
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

// No input makes the decoder panic, and what it accepts it writes back the same.
func FuzzDecode(f *testing.F) {
	f.Add(appendEntity(Partition, "001716422400", State{gen: 2, ranges: []Range{{From: 1, To: 2}, {From: 5, To: 9}}}))
	f.Add([]byte(`{"PartitionKey":"changes","RowKey":"001716422400","V":1,"G":3}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := decodeEntity(b)
		if err != nil {
			return
		}
		again, err := decodeEntity(appendEntity(Partition, "001716422400", s))
		if err != nil || again.gen != s.gen || !slices.Equal(again.ranges, s.ranges) {
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
