package tsdb

import (
	"github.com/seed71701133/tablets"
)

// Histogram types of the library (package tablets), here for convenience.
type (
	Histogram        = tablets.Histogram
	FloatHistogram   = tablets.FloatHistogram
	HistogramPoint   = tablets.HistogramPoint
	SeriesHistograms = tablets.SeriesHistograms
	SeriesHistogram  = tablets.SeriesHistogram
)
