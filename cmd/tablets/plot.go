package main

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"image"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/tsdb"
)

func (a *app) plotCommand() *cobra.Command {
	var (
		sf            storeFlags
		rf            rangeFlags
		series        []string
		out           string
		width, height int
		title         string
	)
	cmd := &cobra.Command{
		Use:   "plot (--table T | --db NAME) --series S[,S2...] --out chart.png|chart.svg [--from -24h --to now]\n  tablets plot --db NAME SELECTOR... --out chart.png|chart.svg [--from -24h --to now]",
		Short: "Draw a line chart of one or more series to PNG or SVG",
		Long: `Draw a line chart of one or more series over [--from, --to) to a PNG or SVG file (by
the extension of --out).

Each series is downsampled to the width of the image: buckets of (to - from) / width,
aligned to the Unix epoch. The line is the mean of each bucket; where buckets hold more
than one point, a shaded band shows each bucket's minimum and maximum, so that spikes stay
visible. The line breaks across gaps in the data (no bucket for more than three times the
usual spacing). NaN and infinite values are left out.

With --db, the series may be chosen by selectors instead of --series: positional arguments,
such as 'http_requests_total{code=~"5.."}' (several: their union). They are the labelled
series ('tablets write --labels') that match and have points in the raw periods the range
overlaps; the legend names each by its labels.

With --db, a series with native histogram samples in the range is drawn as three lines,
its p50, p90 and p99 in each bucket: for a counter histogram, the quantiles of the
observations made in the bucket (its increase, counter resets accounted for as PromQL's
rate does); for a gauge histogram, those of its last sample in the bucket (interpolated
as histogram_quantile does). Its float samples, if it has any, are not drawn.

` + selectorHelp,
		Example: `  tablets plot --table metrics --series cpu --from -24h --out cpu.png
  tablets plot --table metrics --series cpu,mem --from 2024-05-01 --to 2024-05-08 --out week.svg --width 1600
  tablets plot --db metrics 'http_requests_total{code=~"5.."}' --from -6h --out errors.png`,
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
			if out == "" {
				return usageErrorf(cmd, "--out is required (a .png or .svg file)")
			}
			ext := strings.ToLower(filepath.Ext(out))
			if ext != ".png" && ext != ".svg" {
				return usageErrorf(cmd, "--out %q: want a .png or .svg file", out)
			}
			if width < 100 || height < 100 || width > 20000 || height > 20000 {
				return usageErrorf(cmd, "--width and --height must be 100 to 20000 pixels")
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
				return fmt.Errorf("no series matches %s in [%s, %s): nothing to plot", choice.what(), fmtTime(from), fmtTime(to))
			}
			return a.plot(cmd.Context(), store, names, shown, hist, choice.what(), from, to, out, ext, width, height, title)
		},
	}
	addStoreFlags(cmd, &sf)
	f := cmd.Flags()
	f.StringSliceVar(&series, "series", nil, "series names, comma-separated or repeated (required unless selectors are given)")
	addRangeFlags(cmd, &rf, "-24h", "now")
	f.StringVar(&out, "out", "", "output file: .png or .svg (required)")
	f.IntVar(&width, "width", 1000, "image width in pixels")
	f.IntVar(&height, "height", 400, "image height in pixels")
	f.StringVar(&title, "title", "", "chart title (default: the series and the range)")
	return cmd
}

// bucketSeries is one series downsampled for a chart.
type bucketSeries struct {
	name           string
	band           string    // what the band shows: "" for min-max
	t              []float64 // bucket starts, Unix seconds
	avg, min, max  []float64
	meanCount      float64 // points per bucket
	dropped, total int
}

// plot charts the series names (keys), each shown by its shown name; what names them all
// (the default title, messages). From a database, the series in hist (all if hist is nil:
// not known) that have histogram samples are drawn as their quantiles.
func (a *app) plot(ctx context.Context, store tablets.Store, names, shown []string, hist map[string]bool, what string, from, to time.Time,
	out, ext string, width, height int, title string) error {
	step := max(to.Sub(from)/time.Duration(width), 1)
	if db, ok := store.(*tsdb.DB); ok {
		return a.plotDB(ctx, db, names, shown, hist, what, from, to, step, out, ext, width, height, title)
	}
	ds := newSeriesDownsamplers(names, step, tablets.Avg, tablets.Min, tablets.Max, tablets.Count)
	defer ds.abort()
	for sp, err := range store.QueryMany(ctx, names, from, to) {
		if err != nil {
			return err
		}
		ds.push(sp)
	}
	var all []bucketSeries
	points := 0
	for i, r := range ds.finish() {
		if r.err != nil {
			return fmt.Errorf("series %q: %w", shown[i], r.err)
		}
		bs := bucketSeries{name: shown[i]}
		avg, mn, mx, cnt := r.all[0], r.all[1], r.all[2], r.all[3]
		for k := range avg {
			points += int(cnt[k].Value)
			bs.total++
			if !finite(avg[k].Value) || !finite(mn[k].Value) || !finite(mx[k].Value) {
				bs.dropped++
				continue
			}
			bs.t = append(bs.t, unixSeconds(avg[k].Time))
			bs.avg = append(bs.avg, avg[k].Value)
			bs.min = append(bs.min, mn[k].Value)
			bs.max = append(bs.max, mx[k].Value)
			bs.meanCount += cnt[k].Value
		}
		if len(bs.t) > 0 {
			bs.meanCount /= float64(len(bs.t))
		}
		if bs.dropped > 0 {
			fmt.Fprintf(a.stderr, "series %q: %d of %d buckets left out (NaN or infinite values)\n", bs.name, bs.dropped, bs.total)
		}
		all = append(all, bs)
	}
	return a.drawChart(all, what, from, to, step, points, out, ext, width, height, title)
}

// drawChart draws the buckets of every series into out; what names the series.
func (a *app) drawChart(all []bucketSeries, what string, from, to time.Time, step time.Duration, points int,
	out, ext string, width, height int, title string) error {
	if points == 0 {
		return fmt.Errorf("no points of %s in [%s, %s): nothing to plot", what, fmtTime(from), fmtTime(to))
	}
	if title == "" {
		title = fmt.Sprintf("%s, %s to %s", what, from.UTC().Format("2006-01-02 15:04"), to.UTC().Format("2006-01-02 15:04 MST"))
	}
	p, err := chart(all, from, to, step, title)
	if err != nil {
		return err
	}
	if err := saveChart(p, out, ext, width, height); err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "wrote %s: %d x %d, %s points in buckets of %s\n", out, width, height, thousands(int64(points)), step)
	return nil
}

// plotDB plots a database's series from its Aggregate: the mean line in a p50-p99 band, at a
// step rounded up to a minute or an hour where the rollup tiers hold the windows; and its
// histogram series (see plot) as quantile lines.
func (a *app) plotDB(ctx context.Context, db *tsdb.DB, names, shown []string, hist map[string]bool, what string, from, to time.Time, step time.Duration,
	out, ext string, width, height int, title string) error {
	switch {
	case step > time.Hour:
		step = (step + time.Hour - 1) / time.Hour * time.Hour
	case step > time.Minute:
		step = (step + time.Minute - 1) / time.Minute * time.Minute
	}
	lines, points, err := histogramQuantileLines(ctx, db, histogramNames(names, hist), from, to, step)
	if err != nil {
		return err
	}
	var all []bucketSeries
	for i, name := range names {
		if l := lines[name]; l != nil {
			all = append(all, l.finish(shown[i])...)
			if l.skipped > 0 {
				fmt.Fprintf(a.stderr, "series %q: %d increases left out (their buckets do not add up: custom bounds changed)\n", shown[i], l.skipped)
			}
			continue
		}
		bs := bucketSeries{name: shown[i], band: "p50-p99"}
		for w, err := range db.Aggregate(ctx, []string{name}, from, to, step, nil) {
			if err != nil {
				return err
			}
			points += int(w.Count)
			bs.total++
			mean, p50, p99 := w.Mean(), w.Quantile(0.5), w.Quantile(0.99)
			if !finite(mean) || !finite(p50) || !finite(p99) {
				bs.dropped++
				continue
			}
			bs.t = append(bs.t, unixSeconds(w.Start))
			bs.avg, bs.min, bs.max = append(bs.avg, mean), append(bs.min, min(p50, mean)), append(bs.max, max(p99, mean))
			bs.meanCount += float64(w.Count)
		}
		if len(bs.t) > 0 {
			bs.meanCount /= float64(len(bs.t))
		}
		all = append(all, bs)
	}
	return a.drawChart(all, what, from, to, step, points, out, ext, width, height, title)
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// chart builds the plot: per series, the min-max band (where buckets hold several points)
// and the mean line, both broken across gaps.
func chart(all []bucketSeries, from, to time.Time, step time.Duration, title string) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "time (UTC)"
	p.Y.Label.Text = "value"
	p.X.Min, p.X.Max = unixSeconds(from), unixSeconds(to)
	p.X.Tick.Marker = timeTicker{}
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	// Headroom for the legend, so that it does not hide the top of the lines.
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, bs := range all {
		for k := range bs.t {
			lo, hi = min(lo, bs.min[k]), max(hi, bs.max[k])
		}
	}
	if lo <= hi {
		pad := (hi - lo) * (0.03 + 0.07*float64(len(all)))
		p.Y.Min, p.Y.Max = lo-(hi-lo)*0.03, hi+pad
		if hi == lo { // a flat line: center it
			pad = math.Max(math.Abs(hi)*0.1, 1)
			p.Y.Min, p.Y.Max = lo-pad, hi+pad
		}
	}
	for i, bs := range all {
		if len(bs.t) == 0 {
			continue
		}
		c := plotutil.Color(i)
		runs := splitRuns(bs.t, step.Seconds())
		band := bs.meanCount >= 2
		for _, r := range runs {
			if band {
				xy := make(plotter.XYs, 0, 2*(r[1]-r[0]))
				for k := r[0]; k < r[1]; k++ {
					xy = append(xy, plotter.XY{X: bs.t[k], Y: bs.max[k]})
				}
				for k := r[1] - 1; k >= r[0]; k-- {
					xy = append(xy, plotter.XY{X: bs.t[k], Y: bs.min[k]})
				}
				poly, err := plotter.NewPolygon(xy)
				if err != nil {
					return nil, err
				}
				r, g, b, _ := c.RGBA()
				poly.Color = color.NRGBA{R: uint8(r >> 8), G: uint8(g >> 8), B: uint8(b >> 8), A: 70}
				poly.LineStyle.Width = 0
				p.Add(poly)
			}
		}
		var legend plot.Thumbnailer
		for _, r := range runs {
			xy := make(plotter.XYs, 0, r[1]-r[0])
			for k := r[0]; k < r[1]; k++ {
				xy = append(xy, plotter.XY{X: bs.t[k], Y: bs.avg[k]})
			}
			if len(xy) == 1 {
				s, err := plotter.NewScatter(xy)
				if err != nil {
					return nil, err
				}
				s.GlyphStyle.Color = c
				s.GlyphStyle.Radius = vg.Points(1.5)
				s.GlyphStyle.Shape = draw.CircleGlyph{}
				p.Add(s)
				if legend == nil {
					legend = s
				}
				continue
			}
			l, err := plotter.NewLine(xy)
			if err != nil {
				return nil, err
			}
			l.LineStyle.Color = c
			l.LineStyle.Width = vg.Points(1.2)
			p.Add(l)
			if _, isLine := legend.(*plotter.Line); !isLine {
				legend = l
			}
		}
		label := bs.name
		if band {
			label += " (mean, " + cmp.Or(bs.band, "min-max") + " band)"
		}
		p.Legend.Add(label, legend)
	}
	return p, nil
}

// timeTicker puts the ticks of a time axis (Unix seconds) on round times: every 1, 2, 5,
// 10, 15 or 30 seconds or minutes, 1, 2, 3, 6 or 12 hours, 1, 2 or 7 days, whichever gives
// at most seven labels, aligned to the epoch (so whole hours and midnights UTC).
type timeTicker struct{}

var tickSteps = []float64{1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 2 * 3600, 3 * 3600, 6 * 3600,
	12 * 3600, 86400, 2 * 86400, 7 * 86400, 14 * 86400, 28 * 86400, 91 * 86400, 182 * 86400, 364 * 86400}

func (timeTicker) Ticks(lo, hi float64) []plot.Tick {
	span := hi - lo
	if !(span > 0) {
		return nil
	}
	step := tickSteps[len(tickSteps)-1]
	for _, s := range tickSteps {
		if span/s <= 7 {
			step = s
			break
		}
	}
	if span/step > 7 { // beyond the table: years and more
		step = math.Ceil(span/7/(364*86400)) * 364 * 86400
	}
	minor := step
	for _, s := range tickSteps { // the finest step dividing step in at most 6
		if s < step && math.Mod(step, s) == 0 && step/s <= 6 {
			minor = s
			break
		}
	}
	layout := "15:04"
	switch {
	case step < 60:
		layout = "15:04:05"
	case step >= 86400:
		layout = "2006-01-02"
	}
	var ticks []plot.Tick
	for t := math.Ceil(lo/minor) * minor; t <= hi; t += minor {
		tick := plot.Tick{Value: t}
		if math.Mod(t, step) == 0 {
			tm := time.Unix(int64(t), 0).UTC()
			tick.Label = tm.Format(layout)
			if step < 86400 && span > 86400/2 && tm.Hour() == 0 && tm.Minute() == 0 && tm.Second() == 0 {
				tick.Label = tm.Format("Jan 2")
			}
		}
		ticks = append(ticks, tick)
	}
	return ticks
}

// splitRuns splits bucket times (ascending) into runs [start, end) without gaps: a gap is a
// distance over three times the median distance (and over three steps).
func splitRuns(t []float64, step float64) [][2]int {
	if len(t) == 0 {
		return nil
	}
	gaps := make([]float64, 0, len(t)-1)
	for k := 1; k < len(t); k++ {
		gaps = append(gaps, t[k]-t[k-1])
	}
	limit := 3 * step
	if len(gaps) > 0 {
		sorted := slices.Clone(gaps)
		slices.Sort(sorted)
		limit = max(limit, 3*sorted[len(sorted)/2])
	}
	var runs [][2]int
	start := 0
	for k, g := range gaps {
		if g > limit {
			runs = append(runs, [2]int{start, k + 1})
			start = k + 1
		}
	}
	return append(runs, [2]int{start, len(t)})
}

// saveChart draws p to out: a PNG of exactly width x height pixels, or an SVG of that size
// (at 96 pixels per inch).
func saveChart(p *plot.Plot, out, ext string, width, height int) error {
	var w io.WriterTo
	switch ext {
	case ".png":
		c := vgimg.NewWith(vgimg.UseImage(image.NewRGBA(image.Rect(0, 0, width, height))))
		p.Draw(draw.New(c))
		w = vgimg.PngCanvas{Canvas: c}
	case ".svg":
		px := vg.Inch / vgimg.DefaultDPI
		c := vgsvg.New(vg.Length(width)*px, vg.Length(height)*px)
		p.Draw(draw.New(c))
		w = c
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(f)
	if _, err := w.WriteTo(bw); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", out, err)
	}
	if err := bw.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", out, err)
	}
	return f.Close()
}
