// Package promstore is a Prometheus storage.Queryable over a *tsdb.DB: what the PromQL engine
// and the remote-read API of `tablets serve` read through.
//
// # Time ranges
//
// Prometheus times are int64 milliseconds and its ranges [mint, maxt] are inclusive; tsdb
// ranges are [from, to) of time.Time. A Querier reads [mint, maxt+1ms), clamped to the times
// tablets stores ([tablets.MinTime, tablets.MaxTime]). A Select with hints reads the hints'
// [Start, End] instead, as Prometheus' own TSDB does: the engine has already moved Start
// back by the range of a range selector (or the lookback delta of an instant one).
//
// # Raw reads
//
// A Select reads the series index once (tsdb.DB.Select: label sets sorted as Prometheus
// sorts them), then the points of BatchSize series per tsdb.DB.QueryMany, which packs many
// series into each request of a table, Concurrency batches at a time ahead of the consumer:
// memory holds at most Concurrency+1 batches of points beyond what the caller keeps.
// Samples come back exactly: the millisecond of each point (tsdb's layouts used here store
// milliseconds) and the float64 bits unchanged, Prometheus' staleness marker included.
// Series without a point in the range (the index lists a series for its whole period) are
// left out.
//
// # Native histograms
//
// The series the index marks as having histogram samples in the range
// (tsdb.SeriesInfo.Histograms) also have those read, with tsdb.DB.QueryManyHistograms (the
// histogram series of a batch in one call), and merged with their float samples by time
// into one series, as Prometheus allows a series to switch between floats and histograms.
// Its iterator returns chunkenc.ValFloat, ValHistogram (integer counts) or
// ValFloatHistogram per sample, exactly as stored: counter reset hints, custom bounds,
// staleness markers (a histogram whose Sum is the stale NaN); AtFloatHistogram converts an
// integer histogram, as Prometheus' iterators do. Where a float and a histogram sample
// share a millisecond, the histogram is returned and the float left out: the series is a
// histogram series at that time (Prometheus' TSDB, given a float staleness marker for a
// histogram series, stores a histogram one). A decoded histogram weighs more than a float
// in an XOR chunk: a series with histograms counts as 4 series in a batch of BatchSize (a
// compromise: more would cost more requests, each batch costing about three).
//
// # Tier reads
//
// A PromQL range query at a coarse step does not need every raw point: as Thanos'
// auto-downsampling does, a Select whose hints say the step is at least five times a rollup
// tier's Step, and whose function a per-window Min, Max or Last answers, can read that tier
// and return one synthetic sample per whole window, at the window's last millisecond. The
// tier is the coarsest of at least MinTierStep (any, where the raw points are gone) whose
// Step is at most a fifth of the hints' Step and, for a range function, of its Range; for an
// instant selector, under the lookback delta. Functions a window cannot answer
// (count_over_time, sum_over_time, avg_over_time, quantiles, absent_over_time...) read raw.
// The answer is approximate (rate over window-end samples instead of every sample), and the
// staleness markers are lost (a window ignores NaNs).
//
// # The choice by cost
//
// Where a tier can serve a Select, the Select reads it if that is estimated to cost fewer
// bytes than the raw points, or if the raw points of the start of its range are gone
// (Retain dropped them); PreferTiers reads it always. The estimate (docs/tiers.md has its
// figures and their measurements), for the float series of the Select:
//
//   - raw: the samples of the range at the bytes a sample of the database's layout (1.5 in
//     chunked's chunks, or Options.RawBytesPerSample), counting chunked's chunks whole (a
//     day of a series, or 16 KiB), 300 bytes an entity, a request per BatchSize series
//     and raw table;
//   - tier: its columnar blocks whole (a read selects columns, and a column holds a
//     block's every window: a day of minutes, 14 days of hours), a byte or two a window for
//     the column of the field read, 200 an entity, a request per 13 series and tier table;
//     and the raw read of the windows Aggregate reads raw: those within
//     tsdb.Options.SealDelay of the present, and those after the rollup loops' progress in
//     the catalog (tsdb.TaskRollup, read at most once a minute; none: every window).
//
// Both scale with the sample rate, a moving estimate of the Queryable: the float samples
// its reads returned (raw samples, and the windows' counts of tier reads) over the
// series-seconds they covered, starting at a sample every 15 s. Series scraped every 15 s
// read the minute tier whatever the range (a chunk and a block both hold a day); sparse
// series (a sample a minute or less often) read raw. Stats tell which path each Select
// took and why, and the sums of the estimates.
//
// A tier Select reads the windows of BatchSize series at a time, in one
// tsdb.DB.AggregateSeries of the field its function needs (tsdb.FieldLast, FieldMin or
// FieldMax: the block's other columns and the sketches are not read). Series with histogram
// samples read raw even then, in their place among the others: a window of floats cannot
// stand for their histograms (rate or histogram_quantile over it would be wrong). Stats
// tells how many series a tier Select read raw for their histograms.
package promstore
