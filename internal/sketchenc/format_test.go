package sketchenc

import (
	"math"
	"testing"

	"github.com/seed71701133/tablets/internal/testkit/formatdoc"
)

// The worked example of docs/format.md ("Sketches") is what Append writes, and decodes back.
func TestFormatDoc(t *testing.T) {
	s := New(0.01)
	for _, v := range []float64{0, 2.5, 4, -3, math.Inf(1)} {
		s.Add(v)
	}
	want := formatdoc.Hex(t, "sketch")
	if got := s.Append(nil); string(got) != string(want) {
		t.Errorf("Append = %x, the document %x", got, want)
	}
	d, err := Decode(want, 0.01)
	if err != nil {
		t.Fatal(err)
	}
	if d.Count() != 5 || d.m.infKey() != 35488 || string(d.Append(nil)) != string(want) {
		t.Errorf("decodes to %d values, the key of infinities %d", d.Count(), d.m.infKey())
	}
}
