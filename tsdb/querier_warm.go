package tsdb

import (
	"context"
	"fmt"
	"time"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/tsdb/internal/times"
)

// warmStaged is how far back Warm reads the staged samples: what a steady ingest keeps
// staged, an arrival bucket (10 minutes) for the 5 minutes after its end, FoldDelay (at
// most MaxFoldDelay) and its Fold's pace (at most MaxFoldPace). A backlog older than that
// (an outage's, a backfill's) is read by the queries that need it, not by every process
// that starts.
const warmStaged = 30 * time.Minute

// WarmReport is what a Warm brought into the caches.
type WarmReport struct {
	// Series is the number of entries cached (a series a raw table), Points their points,
	// Bytes the cache's bytes they take.
	Series, Points int
	Bytes          int64
	// Full is set when the warm-up stopped at its bound: half the cache.
	Full bool
	// Metrics is the number of metrics whose label sets the index cache took.
	Metrics int
	// Staged is the number of staging entities of the range the staging cache took whole.
	Staged int
	// HistSeries is the number of series whose histogram samples were cached, HistSamples
	// their samples, HistBytes the cache's bytes they (and the same series' float points,
	// if any) took.
	HistSeries, HistSamples int
	HistBytes               int64
}

// Warm brings up what a process just started (a deploy, a restart, one more server behind a
// front) lacks before the writes and queries that would fill it, at their cost:
//
//   - the registrations of the present period's index: its label sets and keys, read once
//     (a request per 1,000 series, ranges of keys at once), as the first write of a hundred
//     series it does not know would read them (and wait for them up to 5 seconds);
//   - the index cache (Options.IndexCache): the present period's label sets, metric by
//     metric, as the Selects of a dashboard's panels by metric read them (one listing of
//     the index, unless it would fill more than half the cache);
//   - the raw cache (Options.RawCache): the float points of every series of the raw tables
//     from from to the present, as the reads of a dashboard over that range would cache
//     them, with one scan of each table by ranges of keys (pages of 1,000 chunks) instead
//     of a read of each panel's series. In a table whose chunks all lie in days after its
//     period's first (a young database) the entries begin at the period's start, so that
//     a 7-day panel's read finds them too. What it caches is checked against the raw
//     change log like any other entry: a write, fold, delete or retention made since, by
//     any process, is read again where it touched. It stops once the cache holds half its
//     bound (the cache is shared by a server's tenants: the first warmed take the room),
//     and leaves a series the cache holds as much of as it is. With a raw layout that does
//     not scan (only chunked does) or without a raw cache it caches nothing;
//   - the same for native histograms: the histogram samples (and float points, mostly
//     none) of the series the index cache found with histogram samples, read as a Select
//     of them reads (their tables have no scan), unless the cache is half full;
//   - the staging cache (Options.StagingCache): the staging entities holding samples of
//     the last warmStaged (from on), whole, with one query (as the first read of every series would fetch
//     them), and the listing of the table, so that the first queries list only what was
//     written since and fetch only that. A server restarted under a steady ingest has the
//     last minutes of every series staged: its first panels of the present fetched them,
//     each its series' columns (docs/results.md: up-by-job-now, 734 KB).
//
// from must not be after now. The priming does not fail (a series it did not learn is
// registered as without it); a failed read of the index stops the warm-up there.
func (db *DB) Warm(ctx context.Context, from time.Time) (WarmReport, error) {
	if from.After(db.opts.Now()) {
		return WarmReport{}, fmt.Errorf("tsdb: %w: warm-up from %v, after now", tablets.ErrInvalidTime, from)
	}
	present := db.names.PeriodOf(db.opts.Now())
	db.index.PrimeWhole(ctx, present)
	metrics, histSeries, err := db.index.WarmCache(ctx, present)
	if err != nil {
		return WarmReport{}, fmt.Errorf("tsdb: warming the index cache: %w", err)
	}
	staged, err := db.staging.Warm(ctx, times.Later(from, db.opts.Now().Add(-warmStaged)), tablets.MaxTime)
	if err != nil {
		return WarmReport{Metrics: metrics}, err
	}
	w, err := db.floats.Warm(ctx, from)
	rep := WarmReport{Series: w.Series, Points: w.Points, Bytes: w.Bytes, Full: w.Full, Metrics: metrics, Staged: staged}
	if err != nil {
		return rep, fmt.Errorf("tsdb: warming the raw cache: %w", err)
	}
	if w.Full {
		return rep, nil
	}
	hw, err := db.hists.Warm(ctx, db.floats, histSeries, from)
	rep.HistSeries, rep.HistSamples, rep.HistBytes, rep.Full = hw.Series, hw.Points, hw.Bytes, hw.Full
	if err != nil {
		err = fmt.Errorf("tsdb: warming the raw cache of histograms: %w", err)
	}
	return rep, err
}
