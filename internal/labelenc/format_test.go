package labelenc

import (
	"slices"
	"testing"

	"github.com/seed71701133/tablets/internal/testkit/formatdoc"
)

// The worked example of docs/format.md ("Label sets") is what Append writes, and decodes back.
func TestFormatDoc(t *testing.T) {
	ls := []Label{{"__name__", "up"}, {"job", "api"}}
	want := formatdoc.Hex(t, "labels")
	if got := Append(nil, ls); string(got) != string(want) {
		t.Errorf("Append = %x, the document %x", got, want)
	}
	if back, err := Decode[Label](want); err != nil || !slices.Equal(back, ls) {
		t.Errorf("decodes to %v, %v", back, err)
	}
}
