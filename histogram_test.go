package tablets_test

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seed71701133/tablets"
)

// validHistogram is a schema-0 histogram: buckets 1, 3, 0 (deltas 1, 2, -3) and 2 in the zero
// bucket: 6 observations.
func validHistogram() *tablets.Histogram {
	return &tablets.Histogram{
		Schema: 0, ZeroThreshold: 1e-128, ZeroCount: 2, Count: 6, Sum: 12.5,
		PositiveSpans:   []tablets.HistogramSpan{{Offset: -1, Length: 2}, {Offset: 3, Length: 1}},
		PositiveBuckets: []int64{1, 2, -3},
	}
}

func validCustom() *tablets.FloatHistogram {
	return &tablets.FloatHistogram{
		Schema: tablets.CustomBucketsSchema, Count: 5, Sum: 3,
		PositiveSpans:   []tablets.HistogramSpan{{Offset: 0, Length: 3}},
		PositiveBuckets: []float64{1, 3, 1},
		CustomValues:    []float64{0.1, 0.5},
	}
}

func TestHistogramValidate(t *testing.T) {
	require.NoError(t, validHistogram().Validate())
	require.NoError(t, validCustom().Validate())
	stale := &tablets.Histogram{Sum: staleNaN}
	require.NoError(t, stale.Validate(), "a staleness marker is a valid histogram")
	require.NoError(t, (&tablets.FloatHistogram{Sum: staleNaN}).Validate())
	nanSum := validHistogram()
	nanSum.Sum, nanSum.Count = math.NaN(), 7
	require.NoError(t, nanSum.Validate(), "with a NaN sum, Count may exceed the buckets' total")

	bad := map[string]func() error{
		"spans do not match the buckets": func() error {
			h := validHistogram()
			h.PositiveSpans[1].Length = 2
			return h.Validate()
		},
		"schema out of range": func() error {
			h := validHistogram()
			h.Schema = 9
			return h.Validate()
		},
		"schema below the range": func() error {
			h := validHistogram()
			h.Schema = -5
			return h.Validate()
		},
		"custom values not sorted": func() error {
			h := validCustom()
			h.CustomValues = []float64{0.5, 0.1}
			return h.Validate()
		},
		"custom values ending at +Inf": func() error {
			h := validCustom()
			h.CustomValues = []float64{0.1, math.Inf(1)}
			return h.Validate()
		},
		"custom values on an exponential schema": func() error {
			h := validHistogram()
			h.CustomValues = []float64{1}
			return h.Validate()
		},
		"negative count in an integer histogram": func() error {
			h := validHistogram()
			h.PositiveBuckets = []int64{1, -2, 4}
			return h.Validate()
		},
		"count not the buckets' total": func() error {
			h := validHistogram()
			h.Count = 7
			return h.Validate()
		},
		"NaN count": func() error {
			h := validCustom()
			h.Count = math.NaN()
			return h.Validate()
		},
		"NaN bucket": func() error {
			h := validCustom()
			h.PositiveBuckets[1] = math.NaN()
			return h.Validate()
		},
		"negative float bucket": func() error {
			h := validCustom()
			h.PositiveBuckets[1] = -1
			return h.Validate()
		},
		"negative offset of a later span": func() error {
			h := validHistogram()
			h.PositiveSpans[1].Offset = -1
			return h.Validate()
		},
		"custom buckets with a zero bucket": func() error {
			h := validCustom()
			h.ZeroCount = 1
			return h.Validate()
		},
		"custom bounds too few for the spans": func() error {
			h := validCustom()
			h.CustomValues = []float64{0.1}
			return h.Validate()
		},
		"neither histogram": func() error { return tablets.HistogramPoint{Time: time.Unix(1, 0)}.Validate() },
		"both histograms": func() error {
			return tablets.HistogramPoint{H: validHistogram(), FH: validCustom()}.Validate()
		},
	}
	for name, validate := range bad {
		t.Run(name, func(t *testing.T) {
			err := validate()
			require.Error(t, err)
			require.True(t, errors.Is(err, tablets.ErrInvalidHistogram), "%v", err)
		})
	}
}
