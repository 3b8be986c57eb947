package tsdb

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/filter"
	"github.com/seed71701133/tablets/internal/batch"
	"github.com/seed71701133/tablets/internal/histenc"
	"github.com/seed71701133/tablets/internal/pager"
)

// FoldReport says what a Fold did.
type FoldReport struct {
	// Entities is the number of staging entities folded (and then deleted).
	Entities int
	// Points is the number of staged points written to the raw tables, and of staged
	// histogram samples written to the histogram tables.
	Points int
	// Series is the number of series written.
	Series int
	// Rounds is the number of passes over the staging entities: each writes the series of
	// a share of the columns, so that a round holds at most about 250,000 points.
	Rounds int
	// Through is the end of the arrival time folded: every point staged before it (by the
	// writers' clocks) is in the raw tables. Zero when the database does not stage.
	Through time.Time
}

// maxFoldPoints bounds the points a round of Fold holds. A point held costs far more than
// its 32 bytes (its staging entity decoded, the map of points by series, the late points):
// in the soak, where a 10-minute bucket of a tenant is 750,000 points (1,250 samples/s)
// and a server folds every tenant's at once, a heap profile showed 150 MB held by fold
// rounds. Rounds split the staging's columns, so that more rounds read no more bytes, only
// a few more pages.
var maxFoldPoints = 250_000 // a variable for the tests of rounds

// foldHistWeight is how many points a staged histogram sample counts as in a round: decoded,
// a 20-bucket histogram takes about 500 bytes.
const foldHistWeight = 16

// Fold moves the staged points into the raw tables (and the staged histogram samples into
// the histogram tables), and deletes them from the staging table: every staging entity of
// an arrival bucket that ended at least 5 minutes ago (by Options.Now). It lists the
// entities first, then reads their columns in rounds of at most about 250,000 points (a
// histogram sample counting as 16), a share of the columns a round, so that each series is
// written once: a transaction per series and raw partition (chunked: a day), whatever the
// number of writes staged. Each series' points are written with the priority of their latest write,
// so a Fold that runs late, or again, never hides a later write. Only then are the listed
// entities deleted, a transaction per 100.
//
// One process folds a database at a time: Fold takes a lease in the catalog (conditionally
// on its ETag; it lasts 5 minutes by Options.Now, renewed as the fold goes) and returns
// ErrFoldBusy while another holds it. Fold is idempotent and safe to kill at any moment:
// points written twice are the same points (a read keeps one per time), an entity not
// deleted is folded again by the next Fold, and a lease not released ends by itself. Points
// of a period that Retain dropped meanwhile are left out.
func (db *DB) Fold(ctx context.Context) (FoldReport, error) {
	if !db.stagedReads {
		return FoldReport{}, nil
	}
	horizon := floorSec(unix(db.now().Add(-foldMargin)), stageBucket)
	report := FoldReport{Through: at(horizon)}
	keys, points, err := db.listStaged(ctx, horizon)
	if err != nil || len(keys) == 0 {
		return report, err
	}
	lease, err := db.takeFoldLease(ctx)
	if err != nil {
		return FoldReport{}, err
	}
	defer lease.release(context.WithoutCancel(ctx))
	// Listed again under the lease: what a fold that held it before deleted is not listed.
	if keys, points, err = db.listStaged(ctx, horizon); err != nil || len(keys) == 0 {
		return report, err
	}
	listed := map[[2]string]bool{}
	for pk, rks := range keys {
		for _, rk := range rks {
			listed[[2]string{pk, rk}] = true
		}
	}
	rounds := max(1, min(stageColumns, (points+maxFoldPoints-1)/maxFoldPoints))
	for r := range rounds {
		if r > 0 {
			if err := lease.renew(ctx); err != nil {
				return report, err
			}
		}
		lo, hi := r*stageColumns/rounds, (r+1)*stageColumns/rounds
		series, n, err := db.foldRound(ctx, lease, listed, horizon, lo, hi)
		report.Series += series
		report.Points += n
		report.Rounds++
		if err != nil {
			return report, err
		}
	}
	if err := db.deleteFolded(ctx, keys); err != nil {
		return report, err
	}
	for _, rks := range keys {
		report.Entities += len(rks)
	}
	return report, nil
}

// bucketEnd is the end of the arrival bucket of a staging PartitionKey: the latest its
// points may have arrived (a malformed key: the end of time, so that they count as late).
func bucketEnd(partitionKey string) time.Time {
	b, err := strconv.ParseUint(partitionKey[:min(12, len(partitionKey))], 10, 64)
	if err != nil {
		return tablets.MaxTime
	}
	return at(b).Add(stageBucket)
}

// foldFilter selects the staging entities of the arrival buckets before horizon.
func foldFilter(horizon uint64) string {
	return filter.Lt("PartitionKey", fmt.Sprintf("%012d", horizon)).String()
}

// listStaged lists the keys of the staging entities before horizon, by PartitionKey, and
// counts their points.
func (db *DB) listStaged(ctx context.Context, horizon uint64) (map[string][]string, int, error) {
	q := pager.SubQuery{Filter: foldFilter(horizon), Select: "PartitionKey,RowKey," + stageCountProp + "," + stageVersionProp}
	keys := map[string][]string{}
	points := 0
	var e entity.Entity
	for page, err := range pager.Each(ctx, db.service.NewClient(db.names.Staging()), q, 0) {
		if isTableGone(err) {
			return nil, 0, nil
		}
		if err != nil {
			return nil, 0, fmt.Errorf("tsdb: fold: list staged: %w", err)
		}
		for _, raw := range page.Entities {
			if err := e.Decode(raw); err != nil {
				return nil, 0, fmt.Errorf("tsdb: fold: list staged: %w", err)
			}
			pk := string(e.PartitionKey)
			keys[pk] = append(keys[pk], string(e.RowKey))
			n, weight := 0, 1
			for _, p := range e.Props {
				switch string(p.Name) {
				case stageCountProp:
					n = int(p.Value)
				case stageVersionProp:
					if p.Value == stageHistVersion {
						weight = foldHistWeight
					}
				}
			}
			points += n * weight
		}
	}
	return keys, points, nil
}

// foldRound folds the series of columns [lo, hi) of the staging entities before horizon,
// and returns how many series and points it wrote.
// Only the listed entities are folded: one written since (late, into an old bucket) is
// neither written nor deleted, but folded by the next Fold.
func (db *DB) foldRound(ctx context.Context, lease *foldLease, listed map[[2]string]bool, horizon uint64, lo, hi int) (int, int, error) {
	sel := "PartitionKey,RowKey," + stageVersionProp
	for c := lo; c < hi; c++ {
		sel += "," + stageColumnChar + strconv.Itoa(c)
	}
	found := map[string][]stagedPoint{}
	foundHists := map[string][]stagedHist{}
	lateOf := map[string][]tablets.Point{} // points and samples staged after their windows may have sealed
	q := pager.SubQuery{Filter: foldFilter(horizon), Select: sel}
	// The round's points are a read of the staging read budget until they are written: a
	// server's tenants fold at once, and their rounds share the bound with the queries.
	read := db.opts.StagingReadBudget.beginRead()
	defer read.end()
	for se, err := range db.stagedEntitiesOf(ctx, q, nil, read) {
		if err != nil {
			return 0, 0, fmt.Errorf("tsdb: fold: %w", err)
		}
		if !listed[[2]string{se.partitionKey, se.rowKey}] {
			continue
		}
		if err := lease.keep(ctx); err != nil { // the read of a round's pages may be long too
			return 0, 0, fmt.Errorf("tsdb: fold: %w", err)
		}
		arrived := bucketEnd(se.partitionKey)
		late := arrived.Add(-(db.opts.SealDelay - sealMargin)).UnixMilli()
		var held int64
		for r, s := range se.hists {
			for _, h := range s.Samples {
				foundHists[s.Key] = append(foundHists[s.Key], stagedHist{h, se.stamp, se.record(r)})
				held += stagedHistBytes
				if ms := int64(h.Unit); ms < late {
					lateOf[s.Key] = append(lateOf[s.Key], tablets.Point{Time: time.UnixMilli(ms).UTC()})
					held += latePointBytes
				}
			}
		}
		for r, s := range se.series {
			for i, ms := range s.Times {
				found[s.Key] = append(found[s.Key], stagedPoint{ms, s.Values[i], se.stamp, se.record(r)})
				held += stagedPointBytes
				if ms < late {
					lateOf[s.Key] = append(lateOf[s.Key], tablets.Point{Time: time.UnixMilli(ms).UTC(), Value: s.Values[i]})
					held += latePointBytes
				}
			}
		}
		if err := read.hold(ctx, held); err != nil {
			return 0, 0, fmt.Errorf("tsdb: fold: %w", err)
		}
	}
	// Which periods were dropped: asked once a period, not once a series.
	dropped := map[uint64]bool{}
	for _, pts := range found {
		for _, p := range pts {
			dropped[db.names.PeriodOf(time.UnixMilli(p.ms))] = false
		}
	}
	for _, hs := range foundHists {
		for _, h := range hs {
			dropped[db.names.PeriodOf(time.UnixMilli(int64(h.sample.Unit)))] = false
		}
	}
	for p := range dropped {
		if err := db.tables.checkNotDropped(ctx, p); errors.Is(err, ErrExpired) {
			dropped[p] = true
		} else if err != nil {
			return 0, 0, fmt.Errorf("tsdb: fold: %w", err)
		}
	}
	names := slices.Sorted(maps.Keys(found))
	for name := range foundHists {
		if _, ok := found[name]; !ok {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	written := 0
	errs := batch.Run(ctx, writeConcurrency, len(names), func(ctx context.Context, i int) error {
		if err := lease.keep(ctx); err != nil {
			return err
		}
		if pts := found[names[i]]; len(pts) > 0 {
			priority := uint64(0)
			for _, p := range pts {
				priority = max(priority, p.stamp)
			}
			err := foldSeries(ctx, db, rawKind, names[i], lastWrites(pts), func(p tablets.Point) uint64 { return db.names.PeriodOf(p.Time) }, dropped,
				func(ctx context.Context, p uint64, pts []tablets.Point) error {
					_, err := db.floats.write(ctx, p, names[i], pts, priority)
					return err
				})
			if err != nil {
				return err
			}
		}
		if hs := foundHists[names[i]]; len(hs) > 0 {
			priority := uint64(0)
			for _, h := range hs {
				priority = max(priority, h.stamp)
			}
			err := foldSeries(ctx, db, histKind, names[i], lastHistWrites(hs), func(s histenc.Sample) uint64 { return db.names.PeriodOf(time.UnixMilli(int64(s.Unit))) }, dropped,
				func(ctx context.Context, p uint64, samples []histenc.Sample) error {
					_, err := db.hists.write(ctx, p, names[i], histPoints(samples), priority)
					return err
				})
			if err != nil {
				return err
			}
		}
		// Late points: mark their slices dirty, now that they are in the raw tables and
		// before they leave the staging table (Aggregate distrusts a window a staged point is
		// in).
		if late := lateOf[names[i]]; len(late) > 0 {
			return db.tiers.flagStaleAt(ctx, names[i], late, tablets.MaxTime)
		}
		return nil
	})
	for _, pts := range found {
		written += len(pts)
	}
	for _, hs := range foundHists {
		written += len(hs)
	}
	if err := errors.Join(distinctErrors(errs)...); err != nil {
		return len(names), written, fmt.Errorf("tsdb: fold: %w", err)
	}
	return len(names), written, nil
}

// distinctErrors is errs without nils and repeats of an error met before: a lost lease
// stops each of a round's writers with the same error, which a log line should say once.
func distinctErrors(errs []error) []error {
	var out []error
	for _, err := range errs {
		if err != nil && !slices.Contains(out, err) {
			out = append(out, err)
		}
	}
	return out
}

// foldSeries writes one series' staged samples of one kind (sorted, one a millisecond)
// into the tables of kind k of their periods (periodOf), each period's with write (the
// kind's codec and table, with the priority of the series' latest write). Samples of a
// dropped period, or of a table dropped meanwhile, are left out.
func foldSeries[S any](ctx context.Context, db *DB, k tableKind, series string, samples []S, periodOf func(S) uint64,
	dropped map[uint64]bool, write func(ctx context.Context, p uint64, samples []S) error) error {
	byPeriod := map[uint64][]S{}
	for _, s := range samples {
		p := periodOf(s)
		byPeriod[p] = append(byPeriod[p], s)
	}
	for _, p := range slices.Sorted(maps.Keys(byPeriod)) {
		if dropped[p] {
			continue
		}
		err := write(ctx, p, byPeriod[p])
		if isTableGone(err) {
			db.tables.gone(k, p) // dropped meanwhile
			continue
		}
		if err != nil {
			return fmt.Errorf("%q: %w", series, err)
		}
	}
	return nil
}

// deleteFolded deletes the folded entities. A read prefers a staged point to a raw one, so
// a Fold killed while deleting must not leave an entity whose point a newer deleted entity
// overwrote: the entities of a partition's slots are deleted oldest first (by stamp), in
// transactions of consecutive ones, one after the other; the slot ranges in parallel.
func (db *DB) deleteFolded(ctx context.Context, keys map[string][]string) error {
	type key struct{ pk, rk string }
	bySlots := map[string][]key{} // by the partition's slots: the PartitionKey after "-"
	for pk, rks := range keys {
		slots := pk[strings.LastIndexByte(pk, '-')+1:]
		for _, rk := range rks {
			bySlots[slots] = append(bySlots[slots], key{pk, rk})
		}
	}
	groups := slices.Sorted(maps.Keys(bySlots))
	client := db.service.NewClient(db.names.Staging())
	errs := batch.Run(ctx, writeConcurrency, len(groups), func(ctx context.Context, i int) error {
		ks := bySlots[groups[i]]
		slices.SortFunc(ks, func(a, b key) int { return cmp.Or(strings.Compare(a.rk, b.rk), strings.Compare(a.pk, b.pk)) })
		for len(ks) > 0 {
			n := 1
			for n < len(ks) && n < entity.MaxBatchOperations && ks[n].pk == ks[0].pk {
				n++
			}
			rks := make([]string, n)
			for j := range rks {
				rks[j] = ks[j].rk
			}
			if err := batch.DeleteRows(ctx, client, ks[0].pk, rks); err != nil && !isTableGone(err) {
				return err
			}
			ks = ks[n:]
		}
		return nil
	})
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("tsdb: fold: delete staged: %w", err)
	}
	return nil
}
