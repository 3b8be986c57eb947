package raw

import (
	"cmp"
	"context"
	"fmt"
	"iter"
	"slices"
	"time"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/internal/histenc"
	"github.com/seed71701133/tablets/tsdb/internal/staging"
)

// WithStaged yields the histogram samples of names (valid, distinct) in
// [from, to) from the histogram tables, table by table, merged with staged (read before, by
// series, each sorted, one a millisecond) by the merge of both kinds (staging.HistsMerge): where
// both hold a millisecond, the staged sample is the later write. Staged samples are read
// whatever the tables this process knows of (another may have made the table since its
// last listing), but those of a period known to be dropped or found gone (Retain dropped
// it) are left out.
func (hists *Hists) WithStaged(ctx context.Context, names []string, from, to time.Time, staged map[string][]tablets.HistogramPoint) iter.Seq2[tablets.SeriesHistogram, error] {
	return func(yield func(tablets.SeriesHistogram, error) bool) {
		spans, err := hists.Spans(ctx, from, to)
		if err != nil {
			yield(tablets.SeriesHistogram{}, err)
			return
		}
		for _, sp := range hists.stagedSpans(spans, names, from, to, staged) {
			rest := make(map[string][]tablets.HistogramPoint, len(names)) // each series' staged samples of the span
			for _, name := range names {
				rest[name] = staging.HistsMerge.In(staged[name], sp.From, sp.To)
			}
			stopped := false
			emit := func(name string, p tablets.HistogramPoint) bool {
				stopped = !yield(tablets.SeriesHistogram{Series: name, HistogramPoint: p}, nil)
				return !stopped
			}
			if !sp.stagedOnly {
				gone, err := hists.querySpan(ctx, sp.Span, names, func(name string, p tablets.HistogramPoint) bool {
					var ok bool
					rest[name], ok = staging.HistsMerge.UpTo(rest[name], p, func(s tablets.HistogramPoint) bool { return emit(name, s) })
					return ok
				})
				if stopped {
					return
				}
				if err != nil {
					yield(tablets.SeriesHistogram{}, err)
					return
				}
				if gone {
					continue // the table is gone, and its period with it
				}
			}
			for _, name := range names {
				for _, p := range rest[name] {
					if !emit(name, p) {
						return
					}
				}
			}
		}
	}
}

// histSpan is a span of a histogram read: a table's, or (stagedOnly) a period of staged
// samples whose table this process does not know of.
type histSpan struct {
	Span
	stagedOnly bool
}

// stagedSpans adds to spans (oldest first) the periods of [from, to) holding staged
// samples of names that spans lack, unless known dropped, in order.
func (hists *Hists) stagedSpans(spans []Span, names []string, from, to time.Time, staged map[string][]tablets.HistogramPoint) []histSpan {
	out := make([]histSpan, 0, len(spans))
	listed := map[uint64]bool{}
	for _, sp := range spans {
		out = append(out, histSpan{Span: sp})
		listed[sp.Period] = true
	}
	added := false
	for _, name := range names {
		for _, h := range staged[name] {
			p := hists.names.PeriodOf(h.Time)
			if listed[p] || hists.tables.KnownDropped(p) {
				continue
			}
			listed[p], added = true, true
			out = append(out, histSpan{Span{p, laterOf(from, hists.names.Start(p)), earlierOf(to, hists.names.End(p))}, true})
		}
	}
	if added {
		slices.SortFunc(out, func(a, b histSpan) int { return cmp.Compare(a.Period, b.Period) })
	}
	return out
}

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
