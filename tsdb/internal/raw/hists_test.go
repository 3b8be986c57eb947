package raw

import (
	"errors"
	"testing"

	"github.com/seed71701133/tablets"
)

// A sample too large for a chunk of its own (Azure's 64 KiB binary property) is invalid
// input, found before any request; ordinary ones pass without being encoded twice.
func TestValidHistSampleSize(t *testing.T) {
	big := func(n int) tablets.HistogramPoint {
		h := &tablets.FloatHistogram{Schema: 0, PositiveSpans: []tablets.HistogramSpan{{Length: uint32(n)}}}
		for i := range n {
			v := float64(i*7919%1000) + 1.0/float64(i+3)
			h.PositiveBuckets = append(h.PositiveBuckets, v)
			h.Count += v
		}
		return tablets.HistogramPoint{FH: h}
	}
	if err := ValidHistSample(big(160)); err != nil {
		t.Fatalf("160 buckets: %v", err)
	}
	err := ValidHistSample(big(20000))
	if !errors.Is(err, tablets.ErrInvalidHistogram) {
		t.Fatalf("20,000 buckets: %v", err)
	}
}
