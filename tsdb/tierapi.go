package tsdb

import (
	"context"
	"iter"
	"time"

	"github.com/seed71701133/tablets/tsdb/internal/tiers"
)

// The tiers (package internal/tiers) own the rollup, the dirty markers, the tier tables and
// Aggregate; a DB's methods of these delegate to them, and their public types are here.

// Tier is a rollup tier: windows of Step, aggregated from the raw points, kept in one table
// per Period.
type Tier = tiers.Tier

// DefaultTiers are a minute kept 400 days and an hour kept forever.
var DefaultTiers = tiers.DefaultTiers

// DefaultSealDelay is how long after its end a window is sealed (see Options.SealDelay).
const DefaultSealDelay = tiers.DefaultSealDelay

// Window is the aggregate of the points of one series in one window of time: the unit of
// the rollup tiers.
//
// Count, Sum, Min, Max, First and Last are exact (Sum up to floating-point rounding, which
// depends on the order of the points); Min, Max, First and Last are 0 when Count is 0.
// Quantiles come from a DDSketch of a fixed relative accuracy: merging
// windows of the same accuracy is exact, as if the window had been built from all their
// points (Count, Min, Max, First, Last and the sketch's bins, Sum up to rounding).
//
// NaN and infinities:
//   - A NaN is not a sample: every NaN, Prometheus' staleness marker
//     (0x7ff0000000000002) and any other, is ignored, counted nowhere. This is the rule of
//     tablets.Downsample too (see tablets.Aggregation, "NaN"): a window and Downsample over
//     the same points aggregate the same points.
//   - ±Inf are samples: counted in Count, and in Min, Max, First, Last and Sum by IEEE 754
//     arithmetic (Sum, hence Mean, is NaN when a window holds both +Inf and -Inf). The
//     sketch counts them in a bin of their own past the largest finite one, so that the
//     quantiles whose rank falls on them are ±Inf, and the others are unaffected.
//   - The sketch counts as zeros the nonzero magnitudes below DDSketch's smallest indexable
//     value (about 2.3e-308: the subnormal numbers), so a quantile whose rank falls on them
//     is 0, or Min if Min > 0, or Max if Max < 0.
//
// Native histogram samples are counted apart from the points: Count, Sum, Min, Max, First,
// Last and the sketch are those of the float points only, and the Histogram fields those of
// the histogram samples (staleness markers are not samples). Histogram holds the
// observations made in the window, exactly, as one float histogram (hint GaugeType):
//   - of a counter histogram (hint other than GaugeType), its increase over the window:
//     the sum of the differences between its consecutive samples in the window, where a
//     sample that follows a counter reset (as Prometheus' DetectReset sees one: its hint, a
//     count going down, a change of bounds...) counts for itself; as Prometheus' increase()
//     over the window's samples, without extrapolation. A window of one sample observed
//     nothing: an empty histogram in the sample's layout. The increase from a window's last
//     sample to the next window's first is in neither (it depends on both): windows of a
//     step only a few sample intervals long miss that share of the observations, which
//     LastHistogram and the next window's FirstHistogram give.
//   - of a gauge histogram (hint GaugeType), the sum of its samples.
//
// The windows of several series add up. Histograms of different exponential schemas add at
// the smaller schema, of different zero thresholds at the larger one (exact: buckets are
// merged, never split). Histograms that no histogram adds up exactly (custom bounds that
// differ, or counter histograms with gauge histograms) leave Histogram nil and set
// HistogramConflict instead: the window never mixes them.
//
// A Window's sketch is shared by its copies: add and merge on one copy change the
// quantiles of all. The zero Window is empty, of the default accuracy (1%).
type Window = tiers.Window

// Fields are the parts of a Window that an Aggregate computes (Start and Count always): what
// it reads of the tiers' columns.
type Fields = tiers.Fields

const (
	FieldSum        = tiers.FieldSum        // Sum (and Mean)
	FieldMin        = tiers.FieldMin        // Min
	FieldMax        = tiers.FieldMax        // Max
	FieldFirst      = tiers.FieldFirst      // First
	FieldLast       = tiers.FieldLast       // Last
	FieldQuantiles  = tiers.FieldQuantiles  // Quantile and FloatQuantile: the windows' sketches (and Min and Max, which bound them)
	FieldHistograms = tiers.FieldHistograms // the Histogram fields
	FieldExact      = tiers.FieldExact      // NaNs and Resets (Window.ResetsKnown), with First and Last: what Evaluate needs

	// AllFields is every field.
	AllFields = tiers.AllFields
)

// AggregateOptions configure Aggregate and AggregateSeries.
type AggregateOptions = tiers.AggregateOptions

// SeriesWindow is a window of one series, as AggregateSeries yields it.
type SeriesWindow = tiers.SeriesWindow

// HistogramQuantile returns the q-quantile of the observations of the native histogram h,
// as Prometheus' histogram_quantile computes it for native histograms: the bucket where the
// rank q × Count falls, and within it a linear interpolation (custom bounds, the zero
// bucket) or one on a logarithmic scale (exponential buckets). It is -Inf for q < 0, +Inf
// for q > 1, NaN for a NaN q or an empty or nil h; a quantile in the first custom bucket is
// interpolated from 0 (or is its bound if that is not positive), one in the last (+Inf)
// custom bucket is its lower bound.
func HistogramQuantile(q float64, h *FloatHistogram) float64 { return tiers.HistogramQuantile(q, h) }

// Rollup (re)computes the tier windows of [from, to) from the raw points and histogram
// samples (see Window), for every series with either there (the series index of the
// periods): in each tier, the windows within [from, to), and those it only overlaps where
// they are sealed (a window not sealed yet is the work of the Rollup of the range that holds
// its end: the scheduler's ranges follow each other and end SealDelay before now, so a run
// computes each window once, when sealed, from the raw points of the windows it computes,
// and writes a tier's blocks only where one of its windows sealed since the last run).
// It works a slice at a time (24 windows of the coarsest tier: a day by default):
// for each series it reads the tier blocks holding those windows (whole, with their ETags), then the raw
// points, then writes each block with those windows recomputed and its others as they
// were, conditionally on the ETag it read (or as new): a block written from a read that a
// concurrent Rollup has made stale fails, and that series starts again. A block it finds
// already up to date it leaves alone, so a Rollup of a range rolled up and sealed writes
// nothing, and rollers running at once do not fail each other. Blocks of an older format
// over the slices are rewritten in the current one. A window is stored sealed when it is
// computed SealDelay or more after its end (by Options.Now). It is idempotent, and safe
// under lost replies (the retry finds the ETag changed and starts again). Run it on a timer,
// (the server's scheduler does, and tablets maintain), to keep tiers current. It leaves alone the slices of raw periods Retain
// recorded dropped: their raw points are gone, and the windows computed before (Retain
// rolls a period up before it drops it) are the last word there.
// Once done with a range of whole slices, it deletes the dirty markers of the range (see
// RollupFlagged) it read before the raw points, each conditionally on the ETag read then;
// a Rollup of part of a slice leaves them (a marker may be for a window outside its range)
// to RollupFlagged, which recomputes the whole slice.
//
// Over chunked raw tables it reads many series at once instead of each by itself, a slice
// at a time: for each slice with a raw table, and a few hundred series at a time, the
// blocks (a query per tier table), the staged points (one query) and the raw points (a
// query per raw table, a request per 1,000 chunks), the histogram samples (a read of many
// series a request, a few dozen series at a time, after the blocks), then it writes a
// transaction per series and tier table whose blocks changed; a series whose write meets a
// change is rolled up again by itself. With Options.RollupPace, a Rollup of windows sealed in
// the last hour begins its groups of series evenly over the pace.
func (db *DB) Rollup(ctx context.Context, from, to time.Time) error {
	return db.tiers.Rollup(ctx, from, to)
}

// RollupFlagged recomputes the tier windows of every slice (24 windows of the coarsest tier)
// that a Write of late points marked dirty, and deletes those markers: a reader then trusts
// the windows again. For each slice it reads the markers (one query for all), rolls up the
// marked series there (a Rollup of the slice when many are marked), then deletes each marker
// conditionally on the ETag it read before the rollup read the raw points: a marker written
// again meanwhile (a later late point) stays for the next run. Markers of slices whose raw
// points Retain dropped are deleted unrolled: the windows stored there are the last word.
// It returns how many markers it cleared. A run killed anywhere leaves the markers it did not
// delete, and the next run does their work; several processes may run it at once.
// The server's scheduler runs it at the rollup's interval, and tablets maintain after
// its rollup.
func (db *DB) RollupFlagged(ctx context.Context) (int, error) {
	return db.tiers.RollupFlagged(ctx)
}

// AggregateSeries is Aggregate of each series apart: it yields the windows of each series
// (in the order of series, a name given twice once, each oldest first), not merged,
// reading the tier blocks and raw points of all the series together (see Aggregate).
func (db *DB) AggregateSeries(ctx context.Context, series []string, from, to time.Time, step time.Duration, opts *AggregateOptions) iter.Seq2[SeriesWindow, error] {
	return db.tiers.AggregateBySeries(ctx, series, from, to, step, opts)
}

// Aggregate yields, oldest first, one Window per epoch-aligned step window that holds points
// in [from, to), aggregating the points of all the named series together; a window cut by
// from or to aggregates only the points inside. It reads the coarsest tier whose Step
// divides step (a 5-minute step reads the minute tier's windows, merged) wherever that
// tier's windows are sealed (see Options.SealDelay), not in a slice a late write marked
// dirty (until RollupFlagged recomputes it), and holding no staged point; and the raw
// points elsewhere: the answer does not depend on which. Where the raw points are gone
// (before RawFrom: dropped by Retain), every window the tier holds is used, sealed or not:
// it is the last word.
//
// What it reads: the staged points (a query, for a database that stages), the dirty
// markers of the range (a query of the catalog), the tier blocks of many series together
// (up to 13 series a request, or a scan of the tier's partitions from the first name to
// the last when more are asked, cut short where the partitions met are mostly of other
// series; a page per 1,000 blocks), then the raw points where needed, with QueryMany, the
// series that need the same range together.
//
// Histogram samples are aggregated too, apart from the points (see Window): the windows of
// a histogram series hold its observations, merged exactly from the tier's windows, so that
// Quantile over histogram series comes from their own buckets. A tier window stored without
// its histograms (too large) is read raw. Staleness markers are not samples.
//
// opts (nil: every field) says which fields of the windows the caller wants: a tier read
// selects only their columns, and the other fields are zero (see AggregateOptions).
func (db *DB) Aggregate(ctx context.Context, series []string, from, to time.Time, step time.Duration, opts *AggregateOptions) iter.Seq2[Window, error] {
	return db.tiers.Aggregate(ctx, series, from, to, step, opts)
}
