package staging

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
	"unsafe"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/internal/batch"
	"github.com/seed71701133/tablets/internal/histenc"
	"github.com/seed71701133/tablets/internal/pager"
	"github.com/seed71701133/tablets/tsdb/internal/azerr"
	"github.com/seed71701133/tablets/tsdb/internal/changelog"
	"github.com/seed71701133/tablets/tsdb/internal/naming"
	"github.com/seed71701133/tablets/tsdb/internal/sentinel"
	"github.com/seed71701133/tablets/tsdb/internal/tables"
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

// MaxFoldPoints bounds the points a round of Fold holds. A point held costs far more than
// its 32 bytes (its staging entity decoded, the map of points by series, the late points):
// in the soak, where a 10-minute bucket of a tenant is 750,000 points (1,250 samples/s)
// and a server folds every tenant's at once, a heap profile showed 150 MB held by fold
// rounds. Rounds split the staging's columns, so that more rounds read no more bytes, only
// a few more pages.
var MaxFoldPoints = 250_000 // a variable for the tests of rounds

// foldMargin is how long after its end an arrival bucket is folded: a writer whose clock
// is behind, or whose transaction is slow, may still add to it meanwhile (what it adds
// later is folded by the next Fold).
const foldMargin = 5 * time.Minute

// latePointBytes is what a late point a round collects takes of the staging read budget.
const latePointBytes = int64(unsafe.Sizeof(tablets.Point{}))

// Folder is the part of a tsdb DB that folds: it moves the staged points out of the staging
// table (the Table, which it reads and empties) into the raw and histogram tables, under the
// fold lease (foldlease.go). The raw writes and the tiers' flagging are given to it as
// functions by tsdb's newDB (FoldWrites), so that neither the staging table nor the raw
// tables' part depends on the Fold. It holds no state of its own between Folds: one process
// at a time folds, by the lease.
type Folder struct {
	staging    *Table
	tables     *tables.Periods  // which periods were dropped, and tables found gone
	names      naming.Names     // the period of a point
	catalog    *aztables.Client // the fold lease is an entity of the catalog
	now        func() time.Time // Options.Now
	sealDelay  time.Duration    // Options.SealDelay: which staged points are late
	sealMargin time.Duration    // the tiers' seal margin: which staged points are late
	delay      time.Duration    // Options.FoldDelay: added to foldMargin
	pace       time.Duration    // Options.FoldPace: the least time the writes of a Fold on time take
	writes     FoldWrites
}

// FolderConfig is what a Folder is given of tsdb's Options, and of the tiers' constants.
type FolderConfig struct {
	Now       func() time.Time // Options.Now
	SealDelay time.Duration    // Options.SealDelay
	// SealMargin is the clock skew sealing tolerates (the tiers'): a staged point more than
	// SealDelay - SealMargin older than its arrival bucket's end is late.
	SealMargin time.Duration
	// Delay is how much later than foldMargin after its end a bucket is folded
	// (Options.FoldDelay).
	Delay time.Duration
	// Pace is the least time the writes of a Fold of one bucket take (Options.FoldPace):
	// its series' writes begin evenly over it. 0: as fast as FoldWriters allow.
	Pace time.Duration
}

// FoldWrites are the writes of the other parts a Folder makes, given as functions.
type FoldWrites struct {
	// WritePoints writes a series' float points (sorted, one a millisecond) of period p into
	// its raw table, with priority (the raw part).
	WritePoints func(ctx context.Context, p uint64, series string, points []tablets.Point, priority uint64) error
	// WriteHists writes a series' histogram samples (sorted, one a millisecond) of period
	// p into its histogram table, with priority.
	WriteHists func(ctx context.Context, p uint64, series string, samples []histenc.Sample, priority uint64) error
	// FlagLate marks the tier windows of a series' late points stale (the tiers), once the
	// points are in the raw tables.
	FlagLate func(ctx context.Context, series string, late []tablets.Point) error
	// Changed records in the raw change log the range of times the Fold wrote into each
	// period (changelog.Log.RecordFold), with its receipt (nil: none, see Run), after its
	// writes and before its samples leave the staging table.
	Changed func(ctx context.Context, ranges map[uint64]changelog.Range, receipt *changelog.Receipt) error
}

// NewFolder makes the Fold of the staging table st over the period tables periods, its
// lease in the catalog table catalog; it sends no request.
func NewFolder(st *Table, periods *tables.Periods, names naming.Names, catalog *aztables.Client, c FolderConfig, w FoldWrites) *Folder {
	return &Folder{staging: st, tables: periods, names: names, catalog: catalog,
		now: c.Now, sealDelay: c.SealDelay, sealMargin: c.SealMargin, delay: c.Delay, pace: c.Pace, writes: w}
}

// Run is a Fold (tsdb's DB.Fold, which delegates to it, documents it): it lists the staging
// entities of the arrival buckets that ended foldMargin (and the delay) ago, takes the fold
// lease, lists them again, folds their series in rounds (foldRound), then deletes them
// (deleteFolded).
func (f *Folder) Run(ctx context.Context) (FoldReport, error) {
	if !f.staging.reads {
		return FoldReport{}, nil
	}
	horizon := BucketOf(f.now().Add(-foldMargin - f.delay))
	report := FoldReport{Through: time.Unix(int64(horizon), 0).UTC()}
	keys, points, _, err := f.listStaged(ctx, horizon)
	if err != nil || len(keys) == 0 {
		return report, err
	}
	lease, err := f.takeLease(ctx)
	if err != nil {
		return FoldReport{}, err
	}
	defer lease.Release(context.WithoutCancel(ctx))
	// Listed again under the lease: what a fold that held it before deleted is not listed.
	keys, points, listedETags, err := f.listStaged(ctx, horizon)
	if err != nil || len(keys) == 0 {
		return report, err
	}
	// A Fold cut off in its deletes (an outage, a process killed) left entities it had
	// folded: their samples are in the raw tables and its change in the raw change log.
	// Written again, their samples would be a second change whose receipt no reader's
	// listing matches (it knew the entities the first Fold read, not those it left), and
	// every server would read the Fold's minutes of every series back from the raw tables
	// (docs/soak.md, run 149: Azurite busy for minutes, answers taking a minute). So those
	// entities are only deleted.
	done, err := f.staging.foldedBefore(ctx, horizon, listedETags)
	if err != nil {
		return report, err
	}
	if done {
		return report, f.finishDeletes(ctx, keys, &report)
	}
	listed := map[[2]string]bool{}
	for pk, rks := range keys {
		for _, rk := range rks {
			listed[[2]string{pk, rk}] = true
		}
	}
	rounds := max(1, min(Columns, (points+MaxFoldPoints-1)/MaxFoldPoints))
	span := f.roundSpan(keys, horizon, rounds)
	changed := map[uint64]changelog.Range{}      // by raw period, the times the rounds wrote
	read := make([]map[[2]string]string, rounds) // by round, the ETags of the entities it read
	var wrote *memoFold                          // what the rounds wrote, kept after (foldMemo)
	if f.staging.folds != nil {
		wrote = newMemoFold()
	}
	for r := range rounds {
		if r > 0 {
			if err := lease.Renew(ctx); err != nil {
				return report, err
			}
		}
		lo, hi := r*Columns/rounds, (r+1)*Columns/rounds
		read[r] = map[[2]string]string{}
		series, n, err := f.foldRound(ctx, lease, listed, horizon, lo, hi, span, changed, read[r], wrote)
		report.Series += series
		report.Points += n
		report.Rounds++
		if err != nil {
			return report, err
		}
	}
	// Recorded in the raw part's change log before the samples leave the staging table: a
	// read that no longer finds them there finds the change in the log it reads after.
	receipt := receiptOf(read, horizon)
	if err := f.writes.Changed(ctx, changed, receipt); err != nil {
		return report, fmt.Errorf("tsdb: fold: %w", err)
	}
	if receipt != nil {
		f.staging.folds.keep(receipt.Digest, wrote)
		// What the rounds read, before any delete: a Fold after one cut off in its deletes
		// only finishes them (foldedBefore).
		if err := f.staging.recordFoldEntities(ctx, horizon, read[0]); err != nil {
			return report, err
		}
	}
	return report, f.finishDeletes(ctx, keys, &report)
}

// finishDeletes records in the folds' log that the Fold deletes, deletes the entities of
// keys, records the change in the staging log, and counts them in report.
func (f *Folder) finishDeletes(ctx context.Context, keys map[string][]string, report *FoldReport) error {
	// Recorded in the folds' log before any entity leaves: a listing that finds it where
	// a listing before found it lacks no entity this Fold moved (listing.go, logAfter).
	if err := f.staging.recordFoldBegun(ctx); err != nil {
		return fmt.Errorf("tsdb: fold: %w", err)
	}
	// Recorded in the staging log after the entities left, deleted or not (some may be
	// gone): a process that listed the table before lists it whole again.
	err := f.deleteFolded(ctx, keys)
	if rerr := f.staging.recordChanged(ctx); err == nil && rerr != nil {
		err = fmt.Errorf("tsdb: fold: %w", rerr)
	}
	if err != nil {
		return err
	}
	for _, rks := range keys {
		report.Entities += len(rks)
	}
	return nil
}

// roundSpan is how long each of rounds spreads its writes over (batch.RunPaced): its share
// of the pace, where the Fold is on time (every key listed is of the one bucket that ended
// at horizon). A Fold that catches up (after an outage, or a backlog of buckets, or a late
// write into one folded before) writes as fast as it can: the pace is for the account's
// other readers in the steady state, not a bound on how far behind the raw tables fall.
func (f *Folder) roundSpan(keys map[string][]string, horizon uint64, rounds int) time.Duration {
	if f.pace <= 0 {
		return 0
	}
	for pk := range keys {
		if BucketEnd(pk).Unix() != int64(horizon) {
			return 0
		}
	}
	return f.pace / time.Duration(rounds)
}

// receiptOf is the receipt of a Fold whose rounds read the entities of read (each round's
// ETags by key) of the arrival buckets before horizon: nil when the rounds did not read the
// same entities at the same ETags (a Delete rewrote or deleted one between two rounds), so
// that no reader takes the Fold's change as the samples of one set of entities.
func receiptOf(read []map[[2]string]string, horizon uint64) *changelog.Receipt {
	if len(read) == 0 || len(read[0]) == 0 {
		return nil
	}
	for _, r := range read[1:] {
		if !maps.Equal(r, read[0]) {
			return nil
		}
	}
	receipt := &changelog.Receipt{From: horizon, Horizon: horizon, Count: uint64(len(read[0]))}
	entities := make([]changelog.ReceiptEntity, 0, len(read[0]))
	for k, etag := range read[0] {
		if etag == "" {
			return nil
		}
		b := BucketEnd(k[0]).Add(-Bucket).Unix()
		receipt.From = min(receipt.From, uint64(b))
		entities = append(entities, changelog.ReceiptEntity{PartitionKey: k[0], RowKey: k[1], ETag: etag})
	}
	receipt.Digest = changelog.ReceiptDigest(entities)
	return receipt
}

// listStaged lists the keys of the staging entities before horizon, by PartitionKey, counts
// their points, and returns their ETags by key.
func (f *Folder) listStaged(ctx context.Context, horizon uint64) (map[string][]string, int, map[[2]string]string, error) {
	q := pager.SubQuery{Filter: BucketsBefore(horizon), Select: "PartitionKey,RowKey," + CountProp + "," + VersionProp}
	keys := map[string][]string{}
	etags := map[[2]string]string{}
	points := 0
	var e entity.Entity
	for page, err := range pager.Each(ctx, f.staging.client, q, 0) {
		if azerr.IsTableGone(err) {
			return nil, 0, nil, nil
		}
		if err != nil {
			return nil, 0, nil, fmt.Errorf("tsdb: fold: list staged: %w", err)
		}
		for _, raw := range page.Entities {
			if err := e.Decode(raw); err != nil {
				return nil, 0, nil, fmt.Errorf("tsdb: fold: list staged: %w", err)
			}
			pk := string(e.PartitionKey)
			keys[pk] = append(keys[pk], string(e.RowKey))
			etags[[2]string{pk, string(e.RowKey)}] = string(e.ETag)
			n, weight := 0, 1
			for _, p := range e.Props {
				switch string(p.Name) {
				case CountProp:
					n = int(p.Value)
				case VersionProp:
					if p.Value == HistVersion {
						weight = HistWeight
					}
				}
			}
			points += n * weight
		}
	}
	return keys, points, etags, nil
}

// foldRound folds the series of columns [lo, hi) of the staging entities before horizon,
// and returns how many series and points it wrote. Its series' writes begin evenly over
// span (0: at once, FoldWriters at a time).
// Only the listed entities are folded: one written since (late, into an old bucket) is
// neither written nor deleted, but folded by the next Fold.
//
// It sets etags[key] to the ETag of each entity it read, and adds to wrote (nil: none) the
// samples it wrote of each series.
func (f *Folder) foldRound(ctx context.Context, lease *foldLease, listed map[[2]string]bool, horizon uint64, lo, hi int, span time.Duration, changed map[uint64]changelog.Range,
	etags map[[2]string]string, wrote *memoFold) (int, int, error) {
	sel := "PartitionKey,RowKey," + VersionProp
	for c := lo; c < hi; c++ {
		sel += "," + ColumnChar + strconv.Itoa(c)
	}
	found := map[string][]Point{}
	foundHists := map[string][]Hist{}
	lateOf := map[string][]tablets.Point{} // points and samples staged after their windows may have sealed
	q := pager.SubQuery{Filter: BucketsBefore(horizon), Select: sel}
	// The round's points are a read of the fold read budget until they are written: a
	// server's tenants fold at once, and their rounds share that bound. Not the queries':
	// a round holds its points while it writes them, minutes on a busy account, and the
	// soak's dashboards answered nothing meanwhile (24 queries waiting for the budget).
	read := f.staging.beginFoldRead()
	defer read.end()
	for se, err := range f.staging.entitiesIn(ctx, q, nil, read) {
		if err != nil {
			return 0, 0, fmt.Errorf("tsdb: fold: %w", err)
		}
		if !listed[[2]string{se.PartitionKey, se.RowKey}] {
			continue
		}
		etags[[2]string{se.PartitionKey, se.RowKey}] = se.ETag
		if err := lease.Keep(ctx); err != nil { // the read of a round's pages may be long too
			return 0, 0, fmt.Errorf("tsdb: fold: %w", err)
		}
		arrived := BucketEnd(se.PartitionKey)
		late := arrived.Add(-(f.sealDelay - f.sealMargin)).UnixMilli()
		var held int64
		for r, s := range se.Hists {
			for _, h := range s.Samples {
				foundHists[s.Key] = append(foundHists[s.Key], Hist{Sample: h, Stamp: se.Stamp, Record: se.Record(r)})
				held += HistBytes
				if ms := int64(h.Unit); ms < late {
					lateOf[s.Key] = append(lateOf[s.Key], tablets.Point{Time: time.UnixMilli(ms).UTC()})
					held += latePointBytes
				}
			}
		}
		for r, s := range se.Series {
			for i, ms := range s.Times {
				found[s.Key] = append(found[s.Key], Point{MS: ms, Value: s.Values[i], Stamp: se.Stamp, Record: se.Record(r)})
				held += PointBytes
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
			dropped[f.names.PeriodOf(time.UnixMilli(p.MS))] = false
		}
	}
	for _, hs := range foundHists {
		for _, h := range hs {
			dropped[f.names.PeriodOf(time.UnixMilli(int64(h.Sample.Unit)))] = false
		}
	}
	for p := range dropped {
		if err := f.tables.CheckNotDropped(ctx, p); errors.Is(err, sentinel.ErrExpired) {
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
	errs := batch.RunPaced(ctx, f.staging.foldWriters, len(names), span, func(ctx context.Context, i int) error {
		if err := lease.Keep(ctx); err != nil {
			return err
		}
		pointPeriod := func(p tablets.Point) uint64 { return f.names.PeriodOf(p.Time) }
		points, err := foldSeries(ctx, f.tables, naming.Raw, names[i], found[names[i]], pointPeriod, dropped, f.writes.WritePoints)
		if err != nil {
			return err
		}
		wrote.addFloats(names[i], points)
		histPeriod := func(s histenc.Sample) uint64 { return f.names.PeriodOf(time.UnixMilli(int64(s.Unit))) }
		samples, err := foldSeries(ctx, f.tables, naming.Hist, names[i], foundHists[names[i]], histPeriod, dropped, f.writes.WriteHists)
		if err != nil {
			return err
		}
		wrote.addHists(names[i], samples)
		// Late points: mark their slices dirty, now that they are in the raw tables and
		// before they leave the staging table (Aggregate distrusts a window a staged point is
		// in).
		if late := lateOf[names[i]]; len(late) > 0 {
			return f.writes.FlagLate(ctx, names[i], late)
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
	addFolded(changed, f.names, found, foundHists, dropped)
	return len(names), written, nil
}

// addFolded widens changed by the times a round wrote into each period not dropped.
func addFolded(changed map[uint64]changelog.Range, names naming.Names, found map[string][]Point, foundHists map[string][]Hist, dropped map[uint64]bool) {
	add := func(ms int64) {
		if p := names.PeriodOf(time.UnixMilli(ms)); !dropped[p] {
			changelog.Widen(changed, p, ms, ms+1)
		}
	}
	for _, pts := range found {
		for _, p := range pts {
			add(p.MS)
		}
	}
	for _, hs := range foundHists {
		for _, h := range hs {
			add(int64(h.Sample.Unit))
		}
	}
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

// foldSeries writes one series' staged writes of one kind (as read: the last write of each
// millisecond is kept) into the tables of kind k of their periods (periodOf), each period's
// with write (the kind's codec and table), at the priority of the series' latest write, so
// that a later write wins a time in the raw tables too. One code for both kinds. Samples of a
// dropped period, or of a table dropped meanwhile, are left out. It returns the samples it
// wrote, sorted.
func foldSeries[S any, W Written[S]](ctx context.Context, tables *tables.Periods, k naming.Kind, series string, staged []W, periodOf func(S) uint64,
	dropped map[uint64]bool, write func(ctx context.Context, p uint64, series string, samples []S, priority uint64) error) ([]S, error) {
	if len(staged) == 0 {
		return nil, nil
	}
	priority := uint64(0)
	for _, w := range staged {
		_, stamp, _ := w.written()
		priority = max(priority, stamp)
	}
	samples := LastWrites[S](staged)
	byPeriod := map[uint64][]S{}
	for _, s := range samples {
		p := periodOf(s)
		byPeriod[p] = append(byPeriod[p], s)
	}
	var wrote []S
	for _, p := range slices.Sorted(maps.Keys(byPeriod)) {
		if dropped[p] {
			continue
		}
		err := write(ctx, p, series, byPeriod[p], priority)
		if azerr.IsTableGone(err) {
			tables.Gone(k, p) // dropped meanwhile
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%q: %w", series, err)
		}
		wrote = append(wrote, byPeriod[p]...)
	}
	return wrote, nil
}

// deleteFolded deletes the folded entities. A read prefers a staged point to a raw one, so
// a Fold killed while deleting must not leave an entity whose point a newer deleted entity
// overwrote: the entities of a partition's slots are deleted oldest first (by stamp), in
// transactions of consecutive ones, one after the other; the slot ranges in parallel.
func (f *Folder) deleteFolded(ctx context.Context, keys map[string][]string) error {
	type key struct{ pk, rk string }
	bySlots := map[string][]key{} // by the partition's slots: the PartitionKey after "-"
	for pk, rks := range keys {
		slots := pk[strings.LastIndexByte(pk, '-')+1:]
		for _, rk := range rks {
			bySlots[slots] = append(bySlots[slots], key{pk, rk})
		}
	}
	groups := slices.Sorted(maps.Keys(bySlots))
	errs := batch.Run(ctx, f.staging.foldWriters, len(groups), func(ctx context.Context, i int) error {
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
			if err := batch.DeleteRows(ctx, f.staging.client, ks[0].pk, rks); err != nil && !azerr.IsTableGone(err) {
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
