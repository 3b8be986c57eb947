package chunkenc

import (
	"testing"

	"github.com/seed71701133/tablets/internal/testkit/formatdoc"
)

// The worked example of docs/format.md ("Chunks") is what Append writes, and decodes back.
func TestFormatDoc(t *testing.T) {
	times := []uint64{1000, 2000, 3000}
	values := []float64{20.37, 20.38, 20.36}
	want := formatdoc.Hex(t, "chunk")
	if got := Append(nil, times, values); string(got) != string(want) {
		t.Errorf("Append = %x, the document %x", got, want)
	}
	checkDecodes(t, want, times, values)
}
