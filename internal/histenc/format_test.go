package histenc

import (
	"testing"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/testkit/formatdoc"
)

// The worked example of docs/format.md ("Histogram chunks") is what Append writes, and
// decodes back.
func TestFormatDoc(t *testing.T) {
	spans := []tablets.HistogramSpan{{Offset: 0, Length: 2}}
	samples := []Sample{
		{Unit: 15000, H: &tablets.Histogram{Count: 3, Sum: 1.5, PositiveSpans: spans, PositiveBuckets: []int64{1, 1}}},
		{Unit: 30000, H: &tablets.Histogram{Count: 5, Sum: 2.5, PositiveSpans: spans, PositiveBuckets: []int64{2, 1}}},
		{Unit: 45000, H: &tablets.Histogram{Count: 8, Sum: 4, PositiveSpans: spans, PositiveBuckets: []int64{3, 2}}},
	}
	want := formatdoc.Hex(t, "histogram-chunk")
	if got := Append(nil, samples); string(got) != string(want) {
		t.Errorf("Append = %x, the document %x", got, want)
	}
	got, err := decodeAll(want)
	if err != nil {
		t.Fatal(err)
	}
	checkSame(t, got, samples)
}
