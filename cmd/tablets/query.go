package main

import (
	"context"
	"fmt"
	"iter"
	"math"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/tsdb"
)

// rangeFlags are --from and --to.
type rangeFlags struct {
	from, to string
}

func addRangeFlags(cmd *cobra.Command, r *rangeFlags, defFrom, defTo string) {
	f := cmd.Flags()
	f.StringVar(&r.from, "from", defFrom, "start of the range, included: RFC 3339, a date, now, -2h, now-7d, Unix time")
	f.StringVar(&r.to, "to", defTo, "end of the range, excluded: same forms as --from")
}

func (r rangeFlags) parse(cmd *cobra.Command, now time.Time) (from, to time.Time, err error) {
	if r.from == "" || r.to == "" {
		return from, to, usageErrorf(cmd, "--from and --to are required")
	}
	if from, err = parseFlagTime(r.from, now); err != nil {
		return from, to, usageErrorf(cmd, "--from: %v", err)
	}
	if to, err = parseFlagTime(r.to, now); err != nil {
		return from, to, usageErrorf(cmd, "--to: %v", err)
	}
	if err := checkRange(from, to); err != nil {
		return from, to, usageErrorf(cmd, "%v", err)
	}
	return from, to, nil
}

// seriesList splits --series values ("a,b" and repeated flags) and drops duplicates.
func seriesList(cmd *cobra.Command, vals []string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, v := range vals {
		for _, s := range strings.Split(v, ",") {
			if s == "" {
				continue
			}
			if !seen[s] {
				seen[s] = true
				out = append(out, s)
			}
		}
	}
	if len(out) == 0 {
		return nil, usageErrorf(cmd, "--series is required")
	}
	return out, nil
}

func (a *app) queryCommand() *cobra.Command {
	var (
		sf     storeFlags
		rf     rangeFlags
		series []string
		step   time.Duration
		agg    string
		format string
	)
	cmd := &cobra.Command{
		Use:   "query (--table T | --db NAME) --series S[,S2...] [--from -24h --to now] [--step 1m --agg avg]\n  tablets query --db NAME SELECTOR... [--from -24h --to now] [--step 1m --agg avg]",
		Short: "Print the points of one or more series in a time range",
		Long: `Print the points of one or more series with --from <= time < --to, each series oldest
first.

With --db, the series may be chosen by selectors instead of --series: positional arguments,
such as 'http_requests_total{code=~"5.."}' (several: their union). They are the labelled
series ('tablets write --labels') that match and have points in the raw periods the range
overlaps, sorted by labels; the output names each by its labels, always in a series column.

` + selectorHelp + `

With --step, each series is downsampled: one point per non-empty bucket of --step (buckets
are aligned to the Unix epoch, so 1m buckets start on whole minutes), whose time is the
bucket's start and whose value is the --agg of the bucket's values: avg (mean), min, max,
sum, count, first, last, median, pN (p50, p99, p99.9) or qF (q0.25).

Formats: table (aligned columns), csv (time,value; time,series,value for several series
or a selector; a one-series CSV can be imported back with 'tablets write'), json (JSON
lines {"series":..,"time":..,"value":..}; NaN and infinities as strings). Times are RFC 3339 in
UTC; values print exactly (the shortest decimal that reads back as the same float64).

From a database, the native histogram samples of the series (as Prometheus' remote write
stores them) print after its float points, one line each, in the value column of a table
or CSV: {count:12, sum:3.5, schema:3, (0.5,0.5453]:4, ...}, each non-empty bucket as its
bounds ('[' or ']' includes the bound) and its count, lowest first; "gauge" marks a gauge
histogram, "stale" a staleness marker. In JSON lines a histogram sample has
"histogram":{"count":..,"sum":..,"schema":..,"zero_threshold":..,"reset_hint":..,"buckets":
[[rule,lower,upper,count],...]} instead of "value" (buckets as in Prometheus' HTTP API).
With --step, the windows of a histogram series aggregate its observations in the window
(for a counter histogram, its increase between its samples there): avg, sum, count and
the quantiles (from its buckets, as histogram_quantile) are theirs; min, max, first and
last are NaN.`,
		Example: `  tablets query --table metrics --series cpu --from -2h
  tablets query --table metrics --series cpu,mem --from 2024-05-01 --to 2024-05-02 --format csv
  tablets query --table metrics --series cpu --from -7d --step 1h --agg p99 --format json
  tablets query --db metrics 'http_requests_total{code=~"5.."}' --from -1h
  tablets query --db metrics 'up{job="api"}' 'up{job="web"}' --step 5m --agg min --format csv`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			choice, err := chooseSeries(cmd, &sf, series, args)
			if err != nil {
				return err
			}
			from, to, err := rf.parse(cmd, a.now)
			if err != nil {
				return err
			}
			if err := checkOutFormat(format); err != nil {
				return usageErrorf(cmd, "%v", err)
			}
			aggregation, err := tablets.ParseAggregation(agg)
			if err != nil {
				return usageErrorf(cmd, "--agg: %v", err)
			}
			if step < 0 {
				return usageErrorf(cmd, "--step must be positive")
			}
			store, _, err := sf.open(cmd, a)
			if err != nil {
				return err
			}
			names, shown, hist, err := choice.resolve(cmd.Context(), cmd, store, from, to)
			if err != nil {
				return err
			}
			if len(names) == 0 {
				if format == outTable {
					fmt.Fprintf(a.stderr, "no series matches %s in [%s, %s)\n", choice.what(), fmtTime(from), fmtTime(to))
				}
				pw := newPointWriter(a.stdout, format, nil)
				pw.withSeries = true
				return pw.flush(true) // a CSV header
			}
			return a.query(cmd.Context(), store, names, shown, hist, choice.labelled(), from, to, step, aggregation, format)
		},
	}
	addStoreFlags(cmd, &sf)
	f := cmd.Flags()
	f.StringSliceVar(&series, "series", nil, "series names, comma-separated or repeated (required unless selectors are given)")
	addRangeFlags(cmd, &rf, "-24h", "now")
	f.DurationVar(&step, "step", 0, "downsample to buckets of this width (e.g. 1m, 1h; 0: every point)")
	f.StringVar(&agg, "agg", "avg", "aggregation of a bucket with --step: avg, min, max, sum, count, first, last, median, pN, qF")
	f.StringVar(&format, "format", outTable, "output format: table, csv or json")
	return cmd
}

// query prints the points of the series names (keys), each shown by its shown name (its
// labels for a selector's series; with labelled, the output always has a series column),
// then, from a database, the histogram samples of those in hist (all if hist is nil: not
// known).
func (a *app) query(ctx context.Context, store tablets.Store, names, shown []string, hist map[string]bool, labelled bool, from, to time.Time,
	step time.Duration, agg tablets.Aggregation, format string) error {
	pw := newPointWriter(a.stdout, format, shown)
	pw.withSeries = pw.withSeries || labelled
	show := make(map[string]string, len(names))
	for i, n := range names {
		show[n] = shown[i]
	}
	if db, ok := store.(*tsdb.DB); ok && step > 0 {
		// A database aggregates itself: from its rollup tiers where they hold the windows.
		for i, name := range names {
			for w, err := range db.Aggregate(ctx, []string{name}, from, to, step, nil) {
				if err != nil {
					return err
				}
				if err := pw.write(shown[i], tablets.Point{Time: w.Start, Value: windowValue(w, agg)}); err != nil {
					return err
				}
			}
		}
	} else if step == 0 {
		for sp, err := range store.QueryMany(ctx, names, from, to) {
			if err != nil {
				_ = pw.flush(false)
				return err
			}
			if err := pw.write(show[sp.Series], sp.Point); err != nil {
				return err
			}
		}
		if db, ok := store.(*tsdb.DB); ok {
			if err := queryHistograms(ctx, db, histogramNames(names, hist), show, from, to, pw); err != nil {
				return err
			}
		}
	} else {
		ds := newSeriesDownsamplers(names, step, agg)
		defer ds.abort()
		for sp, err := range store.QueryMany(ctx, names, from, to) {
			if err != nil {
				return err
			}
			ds.push(sp)
		}
		for i, out := range ds.finish() {
			if out.err != nil {
				return fmt.Errorf("series %q: %w", shown[i], out.err)
			}
			for _, p := range out.points {
				if err := pw.write(shown[i], p); err != nil {
					return err
				}
			}
		}
	}
	if step > 0 {
		for i, n := range names {
			if hist[n] {
				fmt.Fprintf(a.stderr, "series %s has histogram samples: with --step, avg, sum, count and the quantiles are those of their observations in each window (min, max, first and last have none)\n", shown[i])
			}
		}
	}
	if pw.n == 0 && format == outTable {
		fmt.Fprintf(a.stderr, "no points in [%s, %s) (if the series has points there, was it written with another --layout or --resolution?)\n", fmtTime(from), fmtTime(to))
	}
	return pw.flush(true)
}

// downsampler runs tablets.Downsample over points pushed to it one at a time: Downsample
// pulls its input, so it runs in a goroutine fed by a channel of chunks.
type downsampler struct {
	in     chan []tablets.Point
	buf    []tablets.Point
	out    []tablets.Point
	err    error
	done   chan struct{}
	closed bool
}

const pushChunk = 1024

func newDownsampler(step time.Duration, agg tablets.Aggregation) *downsampler {
	d := &downsampler{in: make(chan []tablets.Point, 4), done: make(chan struct{})}
	go func() {
		defer close(d.done)
		var src iter.Seq2[tablets.Point, error] = func(yield func(tablets.Point, error) bool) {
			for chunk := range d.in {
				for _, p := range chunk {
					if !yield(p, nil) {
						return
					}
				}
			}
		}
		for p, err := range tablets.Downsample(src, step, agg) {
			if err != nil {
				d.err = err
				break
			}
			d.out = append(d.out, p)
		}
		for range d.in { // Downsample stopped early (an error): let the pusher finish
		}
	}()
	return d
}

func (d *downsampler) push(p tablets.Point) {
	if d.buf == nil {
		d.buf = make([]tablets.Point, 0, pushChunk)
	}
	d.buf = append(d.buf, p)
	if len(d.buf) == pushChunk {
		d.in <- d.buf
		d.buf = nil
	}
}

// finish ends the input and returns the downsampled points.
func (d *downsampler) finish() ([]tablets.Point, error) {
	if !d.closed {
		if len(d.buf) > 0 {
			d.in <- d.buf
			d.buf = nil
		}
		d.closed = true
		close(d.in)
	}
	<-d.done
	return d.out, d.err
}

// seriesDownsamplers downsample several series, each with several aggregations.
type seriesDownsamplers struct {
	names []string
	index map[string]int
	ds    [][]*downsampler // [series][aggregation]
}

type seriesResult struct {
	points []tablets.Point // of the first aggregation
	all    [][]tablets.Point
	err    error
}

func newSeriesDownsamplers(names []string, step time.Duration, aggs ...tablets.Aggregation) *seriesDownsamplers {
	s := &seriesDownsamplers{names: names, index: map[string]int{}}
	for i, n := range names {
		s.index[n] = i
		row := make([]*downsampler, len(aggs))
		for j, agg := range aggs {
			row[j] = newDownsampler(step, agg)
		}
		s.ds = append(s.ds, row)
	}
	return s
}

func (s *seriesDownsamplers) push(sp tablets.SeriesPoint) {
	i, ok := s.index[sp.Series]
	if !ok {
		return
	}
	for _, d := range s.ds[i] {
		d.push(sp.Point)
	}
}

// finish returns each series' results, in the order of names.
func (s *seriesDownsamplers) finish() []seriesResult {
	out := make([]seriesResult, len(s.ds))
	for i, row := range s.ds {
		for j, d := range row {
			pts, err := d.finish()
			if err != nil && out[i].err == nil {
				out[i].err = err
			}
			if j == 0 {
				out[i].points = pts
			}
			out[i].all = append(out[i].all, pts)
		}
	}
	return out
}

// abort stops every goroutine (idempotent; after finish it does nothing).
func (s *seriesDownsamplers) abort() {
	for _, row := range s.ds {
		for _, d := range row {
			d.buf = nil
			_, _ = d.finish()
		}
	}
}

// windowValue is the aggregation of a database's window (percentiles from its sketch,
// within the database's accuracy).
func windowValue(w tsdb.Window, agg tablets.Aggregation) float64 {
	if q, ok := agg.Quantile(); ok {
		return w.Quantile(q)
	}
	if w.Count == 0 && w.HistogramCount > 0 {
		return histogramWindowValue(w, agg)
	}
	switch agg {
	case tablets.Min:
		return w.Min
	case tablets.Max:
		return w.Max
	case tablets.Sum:
		return w.Sum
	case tablets.Count:
		return float64(w.Count)
	case tablets.First:
		return w.First
	case tablets.Last:
		return w.Last
	default:
		return w.Mean()
	}
}

// histogramWindowValue is the aggregation of the observations of a window of histogram
// samples only (its Histogram): their count, sum and mean; NaN for the others (a histogram
// keeps no single observation) and where the window's histograms do not add up.
func histogramWindowValue(w tsdb.Window, agg tablets.Aggregation) float64 {
	h := w.Histogram
	if h == nil {
		return math.NaN()
	}
	switch agg {
	case tablets.Count:
		return h.Count
	case tablets.Sum:
		return h.Sum
	case tablets.Avg:
		if h.Count == 0 {
			return math.NaN()
		}
		return h.Sum / h.Count
	}
	return math.NaN()
}
