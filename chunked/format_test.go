package chunked

import (
	"testing"
	"time"

	"github.com/seed71701133/tablets/internal/partkey"
	"github.com/seed71701133/tablets/internal/testkit/formatdoc"
	"github.com/seed71701133/tablets/rounding"
)

// The worked example of docs/format.md ("Layout chunked") is what the layout writes with the
// default options, for a write of priority 0x18ea95edac91e707.
func TestFormatDoc(t *testing.T) {
	format, err := rounding.NewFineKeyFormat(DefaultResolution)
	if err != nil {
		t.Fatal(err)
	}
	l := layout{format: format, partUnits: uint64(DefaultPartitionFactor / DefaultResolution)}
	at := uint64(time.Date(2015, 4, 28, 12, 4, 35, 250e6, time.UTC).UnixMilli())
	units := []uint64{at, at + 1000, at + 1500}
	pk := l.partitionKey(partkey.Escape("cpu"), at)
	_, body := l.Encode(pk, l.rowKey(at, 0x18ea95edac91e707, nil), units, []float64{20.37, 20.38, 20.36})
	if string(body) != string(formatdoc.JSON(t, "chunked-chunk")) {
		t.Errorf("the layout writes %s", body)
	}
}
