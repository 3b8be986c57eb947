package advanced

import (
	"testing"
	"time"

	"github.com/seed71701133/tablets/internal/engine"
	"github.com/seed71701133/tablets/internal/testkit/formatdoc"
	"github.com/seed71701133/tablets/rounding"
)

// The worked example of docs/format.md ("Layout advanced") is what the layout writes with
// the default options.
func TestFormatDoc(t *testing.T) {
	format, err := rounding.NewKeyFormat(DefaultResolution)
	if err != nil {
		t.Fatal(err)
	}
	l := layout{format: format, rowUnits: uint64(DefaultRowFactor / DefaultResolution), partUnits: uint64(DefaultPartitionFactor / DefaultResolution)}
	at := uint64(time.Date(2015, 4, 28, 12, 4, 35, 0, time.UTC).Unix())
	var rows []engine.Row
	l.Rows("cpu|1", []uint64{at, at + 1}, []float64{0.5, 2}, func(r engine.Row) { rows = append(rows, r) })
	if len(rows) != 1 || string(rows[0].Body) != string(formatdoc.JSON(t, "advanced-row")) {
		t.Errorf("the layout writes %d rows: %s", len(rows), rows[0].Body)
	}
}
