package basic

import (
	"testing"
	"time"

	"github.com/seed71701133/tablets/internal/engine"
	"github.com/seed71701133/tablets/internal/testkit/formatdoc"
	"github.com/seed71701133/tablets/rounding"
)

// The worked examples of docs/format.md ("Layout basic") are what the layout writes.
func TestFormatDoc(t *testing.T) {
	format, err := rounding.NewKeyFormat(time.Second)
	if err != nil {
		t.Fatal(err)
	}
	l := layout{format: format}
	at := uint64(time.Date(2015, 4, 28, 12, 4, 35, 0, time.UTC).Unix())
	var rows []engine.Row
	l.Rows("cpu", []uint64{at}, []float64{0.5}, func(r engine.Row) { rows = append(rows, r) })
	if len(rows) != 1 || string(rows[0].Body) != string(formatdoc.JSON(t, "basic-point")) {
		t.Errorf("the layout writes %d rows: %s", len(rows), rows[0].Body)
	}
	if h := l.HintRow("cpu", at); string(h.Body) != string(formatdoc.JSON(t, "basic-hint")) {
		t.Errorf("the hint is %s", h.Body)
	}
}
