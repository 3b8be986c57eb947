package tsdb

import (
	"context"
	"errors"

	"github.com/seed71701133/tablets"
)

// Appender collects samples of many series, float points and native histogram samples
// together, and stores them in one Commit: one plan, one index registration a period and
// one staging write for both kinds, so that a remote write holding both costs the
// transactions of one. An Appender is not safe for concurrent use; get one per batch from
// DB.Appender. Write, WriteMany and WriteSamples are Commits of one.
type Appender struct {
	db      *DB
	entries []appended
}

// appended is what one Append call added: samples of one series, of one kind.
type appended struct {
	series  string
	kind    *sampleKind
	samples []sample
}

// Appender returns an empty Appender storing into db.
func (db *DB) Appender() *Appender { return &Appender{db: db} }

// AppendPoints adds float points of series. Nothing is checked or sent before Commit; the
// points are copied (the caller may reuse pts).
func (a *Appender) AppendPoints(series string, pts ...tablets.Point) {
	if len(pts) == 0 {
		return
	}
	s := make([]sample, len(pts))
	for i, p := range pts {
		s[i] = sample{t: p.Time, v: p.Value}
	}
	a.entries = append(a.entries, appended{series, floatSamples, s})
}

// AppendHistograms adds native histogram samples of series. Nothing is checked or sent
// before Commit; the slice is copied, not the histograms (which must not change until
// Commit returns).
func (a *Appender) AppendHistograms(series string, hs ...HistogramPoint) {
	if len(hs) == 0 {
		return
	}
	s := make([]sample, len(hs))
	for i, h := range hs {
		s[i] = sample{t: h.Time, h: h.H, fh: h.FH}
	}
	a.entries = append(a.entries, appended{series, histSamples, s})
}

// Rollback drops what was appended since the last Commit, storing nothing.
func (a *Appender) Rollback() { a.entries = nil }

// Commit stores what was appended, as much as it can, says exactly what it did not store,
// and empties the Appender (whatever it returns: a caller retries with the samples its
// error lists).
//
// Before any request it checks every series and sample, and rejects, each in a
// *tablets.WriteError of the series (Index -1) listing those samples in Failed (float
// points) or FailedHistograms (histogram samples), one kind each:
//   - a series whose name the layout refuses (or, for histograms, the histogram tables):
//     all its samples of that kind, Err wrapping tablets.ErrInvalidSeries;
//   - invalid histogram samples (HistogramPoint.Validate, or too large to store): Err
//     wrapping tablets.ErrInvalidHistogram;
//   - times outside [tablets.MinTime, tablets.MaxTime]: Err wrapping tablets.ErrInvalidTime;
//   - samples older than the raw retention (Time before Options.Now() - RawRetention), or
//     in a period whose tables Retain dropped: Err wrapping ErrExpired. (Whether a period
//     was dropped is read from the catalog the first time, one request a period.)
//
// The other samples are written. A series appended several times is one series of each
// kind: of samples of one time (a float point at its millisecond with the chunked layout,
// a histogram sample at its millisecond), the later argument wins. First the tables of each
// period are made (with the next period's) and the series new to a period are listed in its
// index, flagged where they have histogram samples (see Select): one registration a
// period, in transactions of one index partition and 100 series. Then, with the chunked
// layout, the samples of each series and kind with fewer than 100 in a period go to the
// staging table, float and histogram entities of a partition in the same transactions: a
// transaction or a few for the whole Commit (see the package documentation, "Staging");
// the others are written into the raw tables (floats) and histogram tables directly, 32
// series at a time. Samples written directly that are older than Options.SealDelay (less
// 5 minutes) then mark their rollup slices dirty (staged ones are marked by the Fold that
// moves them).
//
// Each series not wholly written gets a *tablets.WriteError of one kind listing exactly its
// samples that may not be stored (those of failed transactions; all of them if its slices
// could not be marked dirty: writing them again marks them), with the service's Status and
// Code (a throttled write matches tablets.ErrThrottled). A failed direct write stops the
// direct writes not yet started: each of those series lists all its samples of the kind,
// Err saying it was not written after another failed (a series wholly staged is never one:
// its staging transactions decided). The error
// joins them all (errors.As finds one; its Unwrap() []error lists all): the rejects first,
// in the order appended (for a series: invalid, bad time, expired), then the failed
// writes; nil means every sample is stored. A transaction sent again (a retry after a lost
// reply) stores the same entities, and writing samples again stores the same samples: a
// caller retries the samples listed safely. A failure to read the catalog before writing
// is returned alone, nothing written.
func (a *Appender) Commit(ctx context.Context) error {
	defer a.Rollback() // empty whatever it returns
	if len(a.entries) == 0 {
		return nil
	}
	plans, rejects, err := a.plan(ctx, false)
	if err != nil {
		return err
	}
	errs := make([]error, 0, len(rejects))
	for _, r := range rejects {
		errs = append(errs, r)
	}
	for _, err := range a.writePlanned(ctx, plans) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Write stores points of one series in the raw tables of their periods. Before any request
// it checks the series, the times and the raw retention (by Options.Now); a point in a
// period whose table was dropped fails the whole call with ErrExpired too, before anything is
// written, and such a table is never created again. Any bad point fails the whole call, its
// error wrapping tablets.ErrInvalidSeries, tablets.ErrInvalidTime or ErrExpired. The table of
// a period is created on its first write, with the next period's (so that it is not new, and
// throttled, when its time comes). A series new to a period is listed in its index before its
// points are written there. With the chunked layout, fewer than 100 points of a period go to
// the staging table instead, as an Appender's do (see the package documentation, "Staging").
func (db *DB) Write(ctx context.Context, series string, points ...tablets.Point) error {
	a := db.Appender()
	a.AppendPoints(series, points...)
	if len(a.entries) == 0 {
		return nil
	}
	plans, rejects, err := a.plan(ctx, true)
	if err != nil {
		return err
	}
	if len(rejects) > 0 {
		return rejects[0].Err
	}
	if len(plans) == 0 {
		return nil
	}
	return a.writePlanned(ctx, plans)[0]
}

// SeriesPoints are points of one series, for WriteMany.
type SeriesPoints = tablets.SeriesPoints

// WriteSamples stores float points and native histogram samples of many series together:
// a Commit of an Appender holding them all (see Appender.Commit for its checks, its writes
// and its errors, each a *tablets.WriteError whose Failed lists points and
// FailedHistograms histogram samples), so that both kinds cost one index registration a
// period and one staging write. Remote write goes through it. Histogram samples are stored
// in the histogram tables of their periods at the millisecond (a time truncates to it,
// whatever the raw layout): a sample whose series and millisecond are stored replaces it
// (within a call the later argument wins, across entries of one series too); the package
// documentation, "Histograms", says how they are stored.
func (db *DB) WriteSamples(ctx context.Context, points []SeriesPoints, hists []SeriesHistograms) error {
	a := db.Appender()
	for _, sp := range points {
		a.AppendPoints(sp.Series, sp.Points...)
	}
	for _, sh := range hists {
		a.AppendHistograms(sh.Series, sh.Histograms...)
	}
	return a.Commit(ctx)
}

// WriteMany is Write of many series, which stores what it can and says exactly what it did
// not store, as Prometheus' appender does: WriteSamples of points only (see
// Appender.Commit for its checks, its writes and its errors, each a *tablets.WriteError
// whose Failed lists points). A writer.Writer flushing into a DB calls it.
func (db *DB) WriteMany(ctx context.Context, batch []SeriesPoints) error {
	return db.WriteSamples(ctx, batch, nil)
}
