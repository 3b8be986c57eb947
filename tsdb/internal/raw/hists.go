package raw

import (
	"fmt"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/histenc"
)

// histMaxSampleBytes bounds one sample's encoding: a chunk of it alone must fit Azure's
// 64 KiB binary property.
const histMaxSampleBytes = 63 << 10

// ValidHistSample is HistogramPoint.Validate, and a sample small enough to store (a
// histogram of thousands of buckets may not be): errors wrap tablets.ErrInvalidHistogram.
func ValidHistSample(p tablets.HistogramPoint) error {
	if err := p.Validate(); err != nil {
		return err
	}
	var parts int // an upper bound of the encoding's size, cheap to compute
	if p.H != nil {
		parts = 2*(len(p.H.PositiveBuckets)+len(p.H.NegativeBuckets)) + len(p.H.CustomValues) + len(p.H.PositiveSpans) + len(p.H.NegativeSpans)
	} else {
		parts = 2*(len(p.FH.PositiveBuckets)+len(p.FH.NegativeBuckets)) + len(p.FH.CustomValues) + len(p.FH.PositiveSpans) + len(p.FH.NegativeSpans)
	}
	if 10*parts+128 <= histMaxSampleBytes {
		return nil
	}
	if n := len(histenc.Append(nil, []histenc.Sample{{H: p.H, FH: p.FH}})); n > histMaxSampleBytes {
		return fmt.Errorf("%w: %d bytes encoded, over the %d a sample may take", tablets.ErrInvalidHistogram, n, histMaxSampleBytes)
	}
	return nil
}
