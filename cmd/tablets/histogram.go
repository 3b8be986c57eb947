package main

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser/posrange"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/server/promconv"
	"github.com/seed71701133/tablets/tsdb"
)

// Native histogram samples in query and plot: printed readably, or drawn as quantiles.

// promFloat returns a histogram sample as Prometheus' float histogram (absolute counts),
// nil if the point holds none.
func promFloat(p tablets.HistogramPoint) *histogram.FloatHistogram {
	switch {
	case p.H != nil:
		return promconv.ToProm(p.H).ToFloat(nil)
	case p.FH != nil:
		return promconv.FloatToProm(p.FH)
	}
	return nil
}

// formatHistogram prints a histogram sample on one line, as Prometheus' String() does with
// the schema added: {count:12, sum:3.5, schema:3, (0.5,0.5453]:4, ...}, each non-empty
// bucket as its bounds (a bracket includes the bound) and its count, lowest first, values
// exact. A gauge histogram says "gauge"; a staleness marker prints as "stale".
func formatHistogram(fh *histogram.FloatHistogram) string {
	if value.IsStaleNaN(fh.Sum) {
		return "stale"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "{count:%s, sum:%s, schema:%d", formatValue(fh.Count), formatValue(fh.Sum), fh.Schema)
	if fh.CounterResetHint == histogram.GaugeType {
		b.WriteString(", gauge")
	}
	for it := fh.AllBucketIterator(); it.Next(); {
		if bk := it.At(); bk.Count != 0 {
			b.WriteString(", ")
			b.WriteString(bk.String())
		}
	}
	b.WriteByte('}')
	return b.String()
}

// resetHints name the counter reset hints in JSON output.
var resetHints = map[histogram.CounterResetHint]string{
	histogram.UnknownCounterReset: "unknown", histogram.CounterReset: "reset",
	histogram.NotCounterReset: "not_reset", histogram.GaugeType: "gauge",
}

// histogramJSON renders a histogram sample as a JSON object: count, sum, schema, zero
// threshold, counter reset hint, and the non-empty buckets as Prometheus' HTTP API does,
// [boundary rule, lower, upper, count] (rule 0: (lower, upper], 1: [lower, upper), 2:
// (lower, upper), 3: [lower, upper]), with numbers as JSON numbers (non-finite ones as
// strings, like values). A staleness marker has "stale": true.
func histogramJSON(fh *histogram.FloatHistogram) string {
	var b strings.Builder
	fmt.Fprintf(&b, `{"count":%s,"sum":%s,"schema":%d,"zero_threshold":%s,"reset_hint":%q`,
		jsonValue(fh.Count), jsonValue(fh.Sum), fh.Schema, jsonValue(fh.ZeroThreshold), resetHints[fh.CounterResetHint])
	if value.IsStaleNaN(fh.Sum) {
		b.WriteString(`,"stale":true`)
	}
	b.WriteString(`,"buckets":[`)
	n := 0
	for it := fh.AllBucketIterator(); it.Next(); {
		bk := it.At()
		if bk.Count == 0 {
			continue
		}
		if n++; n > 1 {
			b.WriteByte(',')
		}
		rule := 2
		switch {
		case bk.LowerInclusive && bk.UpperInclusive:
			rule = 3
		case bk.LowerInclusive:
			rule = 1
		case bk.UpperInclusive:
			rule = 0
		}
		fmt.Fprintf(&b, "[%d,%s,%s,%s]", rule, jsonValue(bk.Lower), jsonValue(bk.Upper), jsonValue(bk.Count))
	}
	b.WriteString("]}")
	return b.String()
}

// writeHistogram prints a histogram sample: in the value column of a table or CSV (as
// formatHistogram), as a "histogram" object instead of a "value" in JSON lines.
func (pw *pointWriter) writeHistogram(series string, t time.Time, fh *histogram.FloatHistogram) error {
	pw.header()
	pw.n++
	ts := t.UTC().Format(time.RFC3339Nano)
	switch pw.format {
	case outCSV:
		if pw.withSeries {
			pw.rec[0], pw.rec[1], pw.rec[2] = ts, series, formatHistogram(fh)
		} else {
			pw.rec[0], pw.rec[1] = ts, formatHistogram(fh)
		}
		return pw.csv.Write(pw.rec)
	case outJSON:
		name, _ := json.Marshal(series)
		_, err := fmt.Fprintf(pw.w, `{"series":%s,"time":"%s","histogram":%s}`+"\n", name, ts, histogramJSON(fh))
		return err
	default:
		var err error
		if pw.withSeries {
			_, err = fmt.Fprintf(pw.w, "%-30s  %-*s  %s\n", ts, pw.seriesW, series, formatHistogram(fh))
		} else {
			_, err = fmt.Fprintf(pw.w, "%-30s  %s\n", ts, formatHistogram(fh))
		}
		return err
	}
}

// histogramNames returns the series of names to read histogram samples of: those hist says
// have some, or all of them if hist is nil (not known).
func histogramNames(names []string, hist map[string]bool) []string {
	if hist == nil {
		return names
	}
	var out []string
	for _, n := range names {
		if hist[n] {
			out = append(out, n)
		}
	}
	return out
}

// readHistograms yields the histogram samples of names in [from, to), series by series, each
// oldest first: a Querier's Read of histograms.
func readHistograms(ctx context.Context, db *tsdb.DB, names []string, from, to time.Time) iter.Seq2[tablets.SeriesHistogram, error] {
	return func(yield func(tablets.SeriesHistogram, error) bool) {
		q, err := db.Queryable(nil)
		if err != nil {
			yield(tablets.SeriesHistogram{}, err)
			return
		}
		for s, err := range q.Querier(from, to).Read(ctx, tsdb.HistogramSamples, names...) {
			if err != nil {
				yield(tablets.SeriesHistogram{}, err)
				return
			}
			for it := s.Iterator(); it.Next(); {
				x := it.At()
				p := tablets.HistogramPoint{Time: time.UnixMilli(x.T).UTC(), H: x.H, FH: x.FH}
				if !yield(tablets.SeriesHistogram{Series: s.Series, HistogramPoint: p}, nil) {
					return
				}
			}
		}
	}
}

// queryHistograms prints the histogram samples of names (shown by show) in [from, to).
func queryHistograms(ctx context.Context, db *tsdb.DB, names []string, show map[string]string, from, to time.Time, pw *pointWriter) error {
	if len(names) == 0 {
		return nil
	}
	for sh, err := range readHistograms(ctx, db, names, from, to) {
		if err != nil {
			_ = pw.flush(false)
			return err
		}
		fh := promFloat(sh.HistogramPoint)
		if fh == nil {
			continue
		}
		if err := pw.writeHistogram(show[sh.Series], sh.Time, fh); err != nil {
			return err
		}
	}
	return nil
}

// plotQuantiles are the quantiles plot draws of a histogram series.
var plotQuantiles = []float64{0.5, 0.9, 0.99}

// quantileLines computes the plotQuantiles of one histogram series over time, in intervals
// of step aligned to the Unix epoch: for a counter histogram, of the observations made in
// each interval (its increase over the interval, counter resets accounted for as rate
// does); for a gauge histogram, of its last sample in each interval. Feed it the series'
// samples oldest first.
type quantileLines struct {
	step     time.Duration
	t        []float64   // interval starts, Unix seconds
	q        [][]float64 // [quantile][interval]
	samples  int
	skipped  int                       // increases that could not be computed (incompatible buckets)
	prev     *histogram.FloatHistogram // last sample, nil after a staleness marker
	interval int64                     // current interval (its start in step units)
	cur      *histogram.FloatHistogram // its increase (counter) or last sample (gauge)
	open     bool                      // an interval is being accumulated
}

func newQuantileLines(step time.Duration) *quantileLines {
	return &quantileLines{step: step, q: make([][]float64, len(plotQuantiles))}
}

// push adds the next sample.
func (l *quantileLines) push(t time.Time, fh *histogram.FloatHistogram) {
	l.samples++
	if value.IsStaleNaN(fh.Sum) {
		l.prev = nil
		return
	}
	iv := t.UnixNano() / int64(l.step)
	if t.UnixNano() < 0 && t.UnixNano()%int64(l.step) != 0 {
		iv--
	}
	if l.open && iv != l.interval {
		l.emit()
	}
	if !l.open {
		l.interval, l.cur, l.open = iv, nil, true
	}
	prev := l.prev
	l.prev = fh
	if fh.CounterResetHint == histogram.GaugeType {
		l.cur = fh
		return
	}
	if prev == nil || prev.CounterResetHint == histogram.GaugeType {
		return // the first sample of a run: no increase yet
	}
	inc := fh.Copy()
	if !fh.DetectReset(prev) {
		if _, err := inc.Sub(prev); err != nil {
			l.skipped++
			return
		}
	}
	if l.cur == nil {
		l.cur = inc
	} else if _, err := l.cur.Add(inc); err != nil {
		l.skipped++
	}
}

// emit closes the current interval.
func (l *quantileLines) emit() {
	l.open = false
	if l.cur == nil {
		return
	}
	qs := make([]float64, len(plotQuantiles))
	for i, q := range plotQuantiles {
		qs[i] = histogramQuantile(q, l.cur)
		if math.IsNaN(qs[i]) || math.IsInf(qs[i], 0) {
			return // no observations in the interval
		}
	}
	l.t = append(l.t, float64(l.interval)*l.step.Seconds())
	for i := range qs {
		l.q[i] = append(l.q[i], qs[i])
	}
}

// finish closes the last interval and returns one line a quantile, named after name.
func (l *quantileLines) finish(name string) []bucketSeries {
	if l.open {
		l.emit()
	}
	out := make([]bucketSeries, len(plotQuantiles))
	for i, q := range plotQuantiles {
		out[i] = bucketSeries{name: name + " p" + strconv.FormatFloat(q*100, 'g', -1, 64), t: l.t,
			avg: l.q[i], min: l.q[i], max: l.q[i], meanCount: 1, total: len(l.t)}
	}
	return out
}

// histogramQuantile is PromQL's histogram_quantile of one histogram.
func histogramQuantile(q float64, fh *histogram.FloatHistogram) float64 {
	v, _ := promql.HistogramQuantile(q, fh, "", posrange.PositionRange{})
	return v
}

// histogramQuantileLines reads the histogram samples of names in [from, to) and returns the
// quantile lines of each series that has some, and the number of samples read.
func histogramQuantileLines(ctx context.Context, db *tsdb.DB, names []string, from, to time.Time, step time.Duration) (map[string]*quantileLines, int, error) {
	lines := map[string]*quantileLines{}
	if len(names) == 0 {
		return lines, 0, nil
	}
	n := 0
	for sh, err := range readHistograms(ctx, db, names, from, to) {
		if err != nil {
			return nil, 0, err
		}
		fh := promFloat(sh.HistogramPoint)
		if fh == nil {
			continue
		}
		l := lines[sh.Series]
		if l == nil {
			l = newQuantileLines(step)
			lines[sh.Series] = l
		}
		l.push(sh.Time, fh)
		n++
	}
	return lines, n, nil
}
