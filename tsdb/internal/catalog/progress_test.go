package catalog

import (
	"testing"
	"time"

	"github.com/seed71701133/tablets/internal/testkit/formatdoc"
)

// The progress entity of docs/format.md, "The catalog", is what SetCovered writes, and
// reads back as its time.
func TestProgressFormatDoc(t *testing.T) {
	covered := time.Date(2024, 5, 23, 1, 0, 0, 0, time.UTC)
	doc := formatdoc.JSON(t, "progress")
	if body := appendProgress("rollup", covered.UnixMilli()); string(body) != string(doc) {
		t.Errorf("progress %s, the document %s", body, doc)
	}
	ms, err := decodeProgress(doc)
	if err != nil || ms != covered.UnixMilli() {
		t.Errorf("decoded %d, %v; want %d", ms, err, covered.UnixMilli())
	}
}

// A reader rejects another version, and a time that is not a whole number of milliseconds
// in range; it reads a Double sent as a plain JSON number (as Azurite answers).
func TestDecodeProgress(t *testing.T) {
	for _, bad := range []string{
		`{"PartitionKey":"progress","RowKey":"rollup","V":2,"V@odata.type":"Edm.Double","T":1.716426e+12}`,
		`{"PartitionKey":"progress","RowKey":"rollup","T":1.716426e+12}`,
		`{"PartitionKey":"progress","RowKey":"rollup","V":2,"V@odata.type":"Edm.Double","S":"x"}`,
		`{"PartitionKey":"progress","RowKey":"rollup","V":1,"V@odata.type":"Edm.Double"}`,
		`{"PartitionKey":"progress","RowKey":"rollup","V":1,"V@odata.type":"Edm.Double","T":1.5}`,
		`{"PartitionKey":"progress","RowKey":"rollup","V":1,"V@odata.type":"Edm.Double","T":-1000}`,
		`{"PartitionKey":"progress","RowKey":"rollup","V":1,"V@odata.type":"Edm.Double","T":"NaN"}`,
		`{"PartitionKey":"progress","RowKey":"rollup","V":1,"V@odata.type":"Edm.Double","T":1e+300}`,
	} {
		if ms, err := decodeProgress([]byte(bad)); err == nil {
			t.Errorf("%s: read as %d", bad, ms)
		}
	}
	ms, err := decodeProgress([]byte(`{"odata.etag":"W/\"x\"","PartitionKey":"progress","RowKey":"compact","Timestamp":"2024-05-23T01:00:00Z","V":1,"T":1716426000123}`))
	if err != nil || ms != 1716426000123 {
		t.Errorf("decoded %d, %v", ms, err)
	}
}
