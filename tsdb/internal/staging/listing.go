package staging

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/filter"
	"github.com/seed71701133/tablets/internal/pager"
	"github.com/seed71701133/tablets/internal/reqlimit"
	"github.com/seed71701133/tablets/tsdb/internal/azerr"
	"github.com/seed71701133/tablets/tsdb/internal/changelog"
)

// The staging log is a change log (package changelog) of the staging table as a whole, an
// entity of the table itself (LogPartition, StagingLogKey): a Fold records in it after
// deleting the entities it folded, a Delete after rewriting or deleting the entities it
// changed. Entities are otherwise only added, so a process that
// listed the table at generation g still knows every entity that was there, at its ETag,
// while the log stands at g: it asks only for the entities written since.
const (
	// LogPartition is the PartitionKey of the staging log's entity in the staging table:
	// it sorts before every arrival bucket's (digits), so that a query of the table reads
	// it first.
	LogPartition = "!changes"
	// StagingLogKey is its RowKey (the log's one "period", 0).
	StagingLogKey = "s"
	// FoldsPartition is the PartitionKey of the folds' log in the staging table: a change
	// log whose generation a Fold moves after it recorded its change in the raw part's
	// log and before it deletes a staging entity (RowKey FoldsBegunKey). It sorts after
	// every arrival bucket's, so that a query of the table reads it last: a listing that
	// finds its generation where an earlier listing did found every entity a Fold deleted
	// before this one read it, and a raw log read after that earlier listing has the
	// changes of every Fold that deleted since (see logAfter).
	FoldsPartition = "~folds"
	// FoldsBegunKey is its RowKey.
	FoldsBegunKey = "b"
	// LogsMarkKey is the RowKey, in FoldsPartition, of the logs' mark (MarkLogs): an entity
	// that every change recorded in the catalog's change logs (the raw part's, the
	// index's) rewrites after it is recorded, so that a listing, which reads it with the
	// folds' log, finds it as it was only while no change was recorded (VouchFor).
	LogsMarkKey = "l"
	// logsMarkProp is the logs' mark's property that each write sets to a new random
	// value: a reader compares it with the ETag, which Azurite may give two writes of one
	// millisecond alike.
	logsMarkProp = "R"
	// listingMargin is how long before the service's time of the last listing a later one
	// asks for entities from (their Timestamp, the service's time of their last write):
	// the servers of the service agree on the time within it, and the Date header of a
	// reply is to the second.
	listingMargin = 10 * time.Second
	// listingRenewal bounds how long a process trusts a listing it only added to: it lists
	// the table whole again at least that often. A process killed between a Fold's or a
	// Delete's change and its record leaves no later reader wrong for longer.
	listingRenewal = time.Minute
)

// newStagingLog returns the staging log of the staging table client.
func newStagingLog(client *aztables.Client) *changelog.Log {
	return changelog.NewIn(client, LogPartition, func(uint64) string { return StagingLogKey }, nil)
}

// newFoldsLog returns the folds' log of the staging table client (FoldsPartition).
func newFoldsLog(client *aztables.Client) *changelog.Log {
	return changelog.NewIn(client, FoldsPartition, func(uint64) string { return FoldsBegunKey }, nil)
}

// MarkLogs rewrites the logs' mark (LogsMarkKey), after a change recorded in one of the
// catalog's change logs: a listing that finds it as an earlier one did then knows that
// no change was recorded in them between the two (changelog.Log.OnRecorded). A Table that
// does not stage (its layout keeps no staging table) has no listing to tell: nothing.
func (st *Table) MarkLogs(ctx context.Context) error {
	if !st.reads {
		return nil
	}
	var r [16]byte
	_, _ = rand.Read(r[:]) // never fails (crypto/rand)
	_, err := st.client.UpsertEntity(ctx, logsMarkBody(r), &aztables.UpsertEntityOptions{UpdateMode: aztables.UpdateModeReplace})
	if azerr.IsTableGone(err) {
		return nil // no listing finds it: one that finds the table gone vouches for nothing
	}
	if err != nil {
		return fmt.Errorf("tsdb: the logs' mark: %w", err)
	}
	return st.markStaged(ctx)
}

// logsMarkBody is the logs' mark's entity with the value r (docs/format.md, "The logs'
// mark").
func logsMarkBody(r [16]byte) []byte {
	b := entity.AppendKeys(nil, FoldsPartition, LogsMarkKey)
	b = entity.AppendDouble(b, "V", 1)
	b = entity.AppendStringProperty(b, logsMarkProp, hex.EncodeToString(r[:]))
	return entity.AppendEnd(b)
}

// VouchFor has the listings vouch for the states of logs (logs without after, read by
// epoch: the index's) while they find the logs' mark as it was: the states read after a
// listing that found it then stand for a read that begins before a later listing that
// finds it so (changelog.Log.Vouch). Call it before the Table is used.
func (st *Table) VouchFor(logs ...*changelog.Log) { st.vouched = append(st.vouched, logs...) }

// LogsStill is the count of ReadsDone since which the listings found the logs' mark as it
// was (0: none known): a raw log state read once the count reached it goes with the last
// listing (logAfter). A read mark reads its raw logs with it beside its listing, so that a
// state read before serves it without a request (tsdb's ReadMark).
func (st *Table) LogsStill() uint64 {
	if st == nil {
		return 0
	}
	l := &st.listing
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.known {
		return 0
	}
	return l.markFrom
}

// recordChanged records a change of the staging table's entities in its log.
func (st *Table) recordChanged(ctx context.Context) error {
	if st.log == nil {
		return nil
	}
	if err := st.log.Record(ctx, map[uint64]changelog.Range{0: {From: 0, To: 1}}); err != nil {
		return err
	}
	return st.markStaged(ctx)
}

// recordFoldBegun records in the folds' log that a Fold is about to delete staging
// entities, after it recorded its change in the raw part's log.
func (st *Table) recordFoldBegun(ctx context.Context) error {
	if st.begun == nil {
		return nil
	}
	if err := st.begun.Record(ctx, map[uint64]changelog.Range{0: {From: 0, To: 1}}); err != nil {
		return err
	}
	return st.markStaged(ctx)
}

// entityListing is what a Table knows of its entities: their keys, ETags and the properties a
// query's filter compares (T, U, A, B), as last listed.
type entityListing struct {
	refresh sync.Mutex // one refresh at a time: a reader that waited takes a later one's
	mu      sync.Mutex // guards the fields below
	starts  uint64     // refreshes started
	done    uint64     // the start number of the last refresh completed
	known   bool       // byKey holds the table's entities at gen
	gen     uint64     // the staging log's generation when listed whole
	whole   time.Time  // when it was listed whole (this process's clock)
	since   time.Time  // the service's time of the last listing, less listingMargin
	byKey   map[[2]string]listedProps
	// byLast is byKey's keys in the order of their entities' U (listedProps.last; nil
	// when byKey changed since it was made): a read selects entities whose U is at or
	// after its range's start (filter.Expr.LowerBound), the newest few of many.
	byLast []lastKey
	// doneReads is Table.ReadsDone as the last refresh completed (counting it): a change
	// log read once the count reached it is later than that listing (see collect).
	doneReads uint64
	// begun is the folds' log's generation the last refresh found (FoldsPartition), and
	// quietFrom the doneReads of the first of the refreshes since that found it there
	// (0: none is known): a raw log read once the count reached quietFrom goes with the
	// last refresh's listing as well as one read after it (logAfter).
	begun, quietFrom uint64
	// mark is the logs' mark the last refresh found (its ETag and value; "" without one),
	// markFrom the doneReads of the first of the refreshes since that found it so, since
	// the last whole listing (0: none is known), and markEpoch the epoch
	// (changelog.Stamp) taken when that refresh completed: the raw log states read once
	// the count reached markFrom, and the index log states read after markEpoch, stand
	// for the last refresh's listing (logAfter, Table.VouchFor).
	mark                string
	markFrom, markEpoch uint64
	// recent are the entities the last refresh listed when it was incremental (those
	// written since the one before, and within listingMargin of it); nil after a whole
	// listing: what a Prefetch fetches (listedEntities' selectRecent).
	recent map[[2]string]bool
	// departed are the entities a whole listing no longer found (or found at another ETag)
	// that the one before it had, as that one had them, for a while (departedFor): what
	// the Folds' receipts name is mostly what they moved out of the table (folded.go).
	departed map[[2]string]departedEntity
	// receipts are the receipts matched against what the listing knew, by digest (folded.go).
	receipts map[[16]byte][]listedEntity
	// staged is the staging mark the last listing found (markOf; "" without one), and
	// listNext whether the last refresh found the table changed: the next refresh then
	// lists at once, else it reads the mark first and takes the listing as it stands
	// when the mark is as the listing found it (stagingmark.go).
	staged   string
	listNext bool
	// changes counts the refreshes that found the table otherwise than the one before
	// (Table.Changes): another entity or ETag, another generation of either log, another
	// logs' mark, the table made or gone; and those that failed. gone is whether the last
	// refresh found no table.
	changes atomic.Uint64
	gone    bool
}

// Changes counts the refreshes of the listing that found the table otherwise than the one
// before, or failed: while it stands, the listing is what a refresh finds, as far as this
// process refreshed it (tsdb's DB.Speculate).
func (st *Table) Changes() uint64 { return st.listing.changes.Load() }

// Speculates reports whether a speculative read (changelog.Speculative) may take the
// listing: it is known, or the Table reads no staged samples.
func (st *Table) Speculates() bool {
	if st == nil || !st.reads {
		return true
	}
	st.listing.mu.Lock()
	defer st.listing.mu.Unlock()
	return st.listing.known
}

// sameProps reports whether a and b list an entity alike (what reads fetched of it aside).
func sameProps(a, b listedProps) bool {
	a.fetches, b.fetches = 0, 0
	return a == b
}

// changedLogs reports whether found finds the logs otherwise than the last refresh did.
// l.mu is held.
func (l *entityListing) changedLogs(found listFound) bool {
	return found.gone != l.gone || found.begun != l.begun || found.mark != l.mark
}

// departedEntity is an entity a whole listing no longer found (its ETag, T and U as listed
// before), and when it found so.
type departedEntity struct {
	etag, first, last string
	at                time.Time
}

const (
	// departedFor is how long a listing keeps an entity it no longer found, and maxDeparted
	// how many at most: a reader a change of the raw log behind reads from the tables what
	// no kept receipt tells, which costs reads, not answers.
	departedFor = 30 * time.Minute
	maxDeparted = 100_000
	maxReceipts = 64
)

// depart records the entities of was that now lacks (or has at another ETag) as departed,
// at, and forgets those departed before departedFor. l.mu is held.
func (l *entityListing) depart(was, now map[[2]string]listedProps, at time.Time) {
	if l.departed == nil {
		l.departed = map[[2]string]departedEntity{}
	}
	for k, p := range was {
		if n, ok := now[k]; !ok || n.etag != p.etag {
			l.departed[k] = departedEntity{etag: p.etag, first: p.first, last: p.last, at: at}
		}
	}
	for k, d := range l.departed {
		if at.Sub(d.at) > departedFor || len(l.departed) > maxDeparted {
			delete(l.departed, k)
		}
	}
}

// lastKey is an entity of the listing by its U, for entityListing.byLast.
type lastKey struct {
	last string
	key  [2]string
}

// sortedByLast returns byLast, made again if byKey changed since. l.mu is held.
func (l *entityListing) sortedByLast() []lastKey {
	if l.byLast == nil || len(l.byLast) != len(l.byKey) {
		l.byLast = make([]lastKey, 0, len(l.byKey))
		for k, p := range l.byKey {
			l.byLast = append(l.byLast, lastKey{p.last, k})
		}
		slices.SortFunc(l.byLast, func(a, b lastKey) int { return filter.CompareUTF16(a.last, b.last) })
	}
	return l.byLast
}

// listedProps is an entity as listed: its ETag and the properties a query's filter
// compares.
type listedProps struct {
	etag, first, last, lo, hi string // T, U, A, B
	points                    int    // N
	fetches                   int    // reads of columns that fetched it since listed (see wholeAfter)
}

// eval reports whether f selects the entity (f compares T, U, A and B only).
func (p *listedProps) eval(f filter.Expr) bool {
	return f.EvalFunc(p.prop)
}

// prop returns the entity's property name as listed, false where it lacks it (a comparison
// of it is then false).
func (p *listedProps) prop(name string) (string, bool) {
	var v string
	switch name {
	case FirstProp:
		v = p.first
	case LastProp:
		v = p.last
	case LoProp:
		v = p.lo
	case HiProp:
		v = p.hi
	}
	return v, v != ""
}

// listedEntities returns the keys and ETags of the entities f selects (f compares T, U, A and B
// only), in key order: from what the Table listed before, and the entities written since
// (one query of their Timestamp), or listed whole again when the staging log says a Fold
// or a Delete changed entities since (or listingRenewal passed). What it returns was in
// the table after the call began: a refresh that began before it is not taken. Of the
// entities which selects: all (selectAll), those the last refresh listed when it was
// incremental (selectRecent; else all), or none (selectNone: the listing brought up to
// date only).
func (st *Table) listedEntities(ctx context.Context, f filter.Expr, which selection) ([]listedEntity, uint64, error) {
	l := &st.listing
	l.mu.Lock()
	arrival := l.starts
	began, ok := ctx.Value(readBeganKey{st}).(readBegan)
	if ok {
		arrival = min(arrival, began.starts) // the read began with StartListing: its refresh counts
	}
	l.mu.Unlock()
	if changelog.IsSpeculative(ctx) {
		return st.speculativeEntities(f, which, began)
	}
	joined := time.Now()
	l.refresh.Lock() // behind a refresh under way, whose answer it may take
	reqlimit.TallyJoined(ctx, joined)
	l.mu.Lock()
	fresh := l.done > arrival && l.known // a refresh that started after this call began
	l.mu.Unlock()
	if !fresh {
		if err := st.refreshListing(ctx); err != nil {
			l.refresh.Unlock()
			return nil, 0, err
		}
	}
	out, listedAt := st.selectListed(f, which, began)
	l.refresh.Unlock()
	return out, listedAt, nil
}

// selectListed returns the entities of the listing which selects, in key order, and the
// count of ReadsDone a raw log read must have seen to go with it (logAfter), for a read
// that began as began says.
func (st *Table) selectListed(f filter.Expr, which selection, began readBegan) ([]listedEntity, uint64) {
	l := &st.listing
	l.mu.Lock()
	listedAt := logAfter(l.doneReads, l.quietFrom, began.reads, l.markFrom)
	var out []listedEntity
	switch {
	case which == selectNone:
	case which == selectRecent && l.recent != nil:
		out = l.selectedOf(l.recent, f)
	default:
		out = l.selected(f)
	}
	l.mu.Unlock()
	slices.SortFunc(out, func(a, b listedEntity) int {
		return cmp.Or(strings.Compare(a.pk, b.pk), strings.Compare(a.rk, b.rk))
	})
	return out, listedAt
}

// speculativeEntities is listedEntities of a speculative read (changelog.Speculative): the
// listing as it stands, without a refresh or a wait for one under way, or
// changelog.ErrNotKnown while none is known.
func (st *Table) speculativeEntities(f filter.Expr, which selection, began readBegan) ([]listedEntity, uint64, error) {
	l := &st.listing
	l.mu.Lock()
	known := l.known // a refresh failing after it counts a change (Changes): no answer holds
	l.mu.Unlock()
	if !known {
		return nil, 0, changelog.ErrNotKnown
	}
	out, listedAt := st.selectListed(f, which, began)
	return out, listedAt, nil
}

// selection is which listed entities listedEntities gives.
type selection int

const (
	selectAll selection = iota
	selectRecent
	selectNone
)

// selected returns the entities f selects (f compares T, U, A and B only), in no order.
// l.mu is held.
func (l *entityListing) selected(f filter.Expr) []listedEntity {
	var out []listedEntity
	if spans, ok := l.spansOf(f); ok {
		byLast := l.sortedByLast()
		for _, sp := range spans {
			for _, lk := range byLast[sp[0]:sp[1]] {
				out = l.appendSelected(out, lk.key, l.byKey[lk.key], f)
			}
		}
		return out
	}
	for k, le := range l.byKey {
		out = l.appendSelected(out, k, le, f)
	}
	return out
}

// spansOf returns the spans of sortedByLast (from, to; in order, apart) outside which f
// selects no entity, and false where it cannot tell (f does not bound U). Each of f's
// disjuncts (filter.Expr.Disjuncts) selects only entities whose U is at or after its
// bound, and, where it bounds T below histKeyPrefix, only float entities: an entity's T and
// U are time keys of one kind, and every float U sorts before every histogram one. A read
// of both kinds (a read mark's, a panel's of native histograms) looked at every histogram
// entity to select the few of its range. l.mu is held.
func (l *entityListing) spansOf(f filter.Expr) ([][2]int, bool) {
	disjuncts := f.Disjuncts()
	for _, d := range disjuncts {
		if _, ok := d.LowerBound(LastProp); !ok {
			return nil, false
		}
	}
	byLast := l.sortedByLast()
	search := func(from string) int {
		i, _ := slices.BinarySearchFunc(byLast, from, func(lk lastKey, from string) int {
			if filter.CompareUTF16(lk.last, from) < 0 {
				return -1
			}
			return 1
		})
		return i
	}
	floatsEnd := search(histKeyPrefix)
	var spans [][2]int
	for _, d := range disjuncts {
		from, _ := d.LowerBound(LastProp)
		sp := [2]int{search(from), len(byLast)}
		if below, ok := d.UpperBound(FirstProp); ok && filter.CompareUTF16(below, histKeyPrefix) < 0 {
			sp[1] = max(sp[0], floatsEnd) // T a float time key: U too
		}
		spans = append(spans, sp)
	}
	slices.SortFunc(spans, func(a, b [2]int) int { return cmp.Compare(a[0], b[0]) })
	merged := spans[:1]
	for _, sp := range spans[1:] {
		if last := &merged[len(merged)-1]; sp[0] <= last[1] {
			last[1] = max(last[1], sp[1]) // overlapping: one span, each entity once
		} else {
			merged = append(merged, sp)
		}
	}
	return merged, true
}

// selectedOf is selected of the entities of keys only (those byKey has). l.mu is held.
func (l *entityListing) selectedOf(keys map[[2]string]bool, f filter.Expr) []listedEntity {
	var out []listedEntity
	for k := range keys {
		if le, ok := l.byKey[k]; ok {
			out = l.appendSelected(out, k, le, f)
		}
	}
	return out
}

// appendSelected appends the entity of key k to out if f selects it.
func (l *entityListing) appendSelected(out []listedEntity, k [2]string, le listedProps, f filter.Expr) []listedEntity {
	if !le.eval(f) {
		return out
	}
	return append(out, listedEntity{pk: k[0], rk: k[1], etag: le.etag, first: le.first, last: le.last,
		points: le.points, fetches: le.fetches})
}

// prefetchTimeout bounds a refresh StartListing began.
const prefetchTimeout = 30 * time.Second

// readBeganKey is the context key of StartListing and BeginRead (a readBegan), for the
// Table it names.
type readBeganKey struct{ st *Table }

// readBegan is when a read began: the listing's refresh count, and the count of ReadsDone
// it took (a raw log read once the count reached it was read after the read began).
type readBegan struct{ starts, reads uint64 }

// StartListing begins bringing the listing up to date for a read that begins now, and
// returns the read's context: the read's staged entities then come from that refresh (or a
// later one) instead of one of their own, so that the listing's request runs beside what
// the read does first (its series index) rather than after it. What the read finds was in
// the table after StartListing was called, as if it had listed then. A Table whose cache is
// not warm yet (its first read lists nothing), that does not read staged samples, or that
// keeps no staging log, starts nothing. The refresh outlives ctx (by at most
// prefetchTimeout: one cut short would have the next read list the table whole); a failed
// one is the read's to do again. A read that finds no series reads no staging: its refresh
// is a request for nothing.
func (st *Table) StartListing(ctx context.Context) context.Context {
	if st == nil || !st.reads || st.cache == nil || st.log == nil || !st.warm.Load() {
		return ctx
	}
	l := &st.listing
	l.mu.Lock()
	began := readBegan{starts: l.starts}
	if b, ok := ctx.Value(readBeganKey{st}).(readBegan); ok {
		// The read began before (BeginRead): a refresh since serves it, and then none is
		// needed.
		began = readBegan{starts: min(began.starts, b.starts), reads: b.reads}
		if l.done > began.starts && l.known {
			l.mu.Unlock()
			return ctx
		}
	} else {
		began.reads = st.readsDone.Add(1)
	}
	l.mu.Unlock()
	// Not ended with ctx: a refresh cut short lists the table whole at the next read.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), prefetchTimeout)
	go func() {
		defer cancel()
		l.refresh.Lock()
		defer l.refresh.Unlock()
		l.mu.Lock()
		fresh := l.done > began.starts && l.known
		l.mu.Unlock()
		if !fresh {
			_ = st.refreshListing(rctx) // a failure leaves the listing to the read's own refresh
		}
	}()
	return context.WithValue(ctx, readBeganKey{st}, began)
}

// BeginRead returns the context of a read that begins now and lists the table more than
// once (a read mark, then the Selects of its query): a refresh of the listing that began
// after it serves each of them, as StartListing's does a Select. A context that began
// already is returned as is.
func (st *Table) BeginRead(ctx context.Context) context.Context {
	if st == nil || !st.reads || st.cache == nil || st.log == nil {
		return ctx
	}
	if _, ok := ctx.Value(readBeganKey{st}).(readBegan); ok {
		return ctx
	}
	l := &st.listing
	l.mu.Lock()
	began := readBegan{starts: l.starts, reads: st.readsDone.Add(1)}
	l.mu.Unlock()
	return context.WithValue(ctx, readBeganKey{st}, began)
}

// Began reports whether ctx is of a read that began (BeginRead or StartListing) with a
// listing of this Table: its parts then take one listing.
func (st *Table) Began(ctx context.Context) bool {
	if st == nil {
		return false
	}
	_, ok := ctx.Value(readBeganKey{st}).(readBegan)
	return ok
}

// ReadBegan returns the count of ReadsDone the read of ctx took when it began
// (BeginRead, StartListing), and whether it began so: a raw log read once the count
// reached it may go with the read's listing (Listing.LogAfter).
func (st *Table) ReadBegan(ctx context.Context) (uint64, bool) {
	if st == nil {
		return 0, false
	}
	b, ok := ctx.Value(readBeganKey{st}).(readBegan)
	return b.reads, ok && b.reads != 0
}

// fetched counts a read of columns that fetched the entities les.
func (l *entityListing) fetched(les []listedEntity) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, le := range les {
		k := [2]string{le.pk, le.rk}
		if p, ok := l.byKey[k]; ok && p.etag == le.etag {
			p.fetches++
			l.byKey[k] = p
		}
	}
}

// refreshListing brings the listing up to date, under l.refresh: a query of the staging
// log's entity and the entities written since the last listing, or, when the log changed
// (or there was none, or listingRenewal passed), of every entity. The log's entity sorts
// before every staging entity, so a query reads it first: a Fold or Delete that recorded
// before it was read had changed its entities before they were.
func (st *Table) refreshListing(ctx context.Context) error {
	l := &st.listing
	l.mu.Lock()
	l.starts++
	start := l.starts
	startEpoch := changelog.Stamp() // before the query: a state vouched for stands for it
	incremental := l.known && !l.since.IsZero() && time.Since(l.whole) < listingRenewal
	since, known := l.since, l.gen
	staged, listNext := l.staged, l.listNext
	l.mu.Unlock()
	if incremental && staged != "" && !listNext {
		if m, err := st.readStagingMark(ctx); err == nil && m == staged {
			st.listedUnchanged(start, startEpoch)
			return nil
		}
		// Changed, or the read failed: the query of the entities written since says what.
	}
	if incremental {
		q := pager.SubQuery{Select: listingSelect,
			// The literal is this package's, written from a time: no user string is in it.
			Filter: filter.Eq("PartitionKey", LogPartition).String() + " or " + filter.Eq("PartitionKey", FoldsPartition).String() +
				" or Timestamp ge datetime'" + since.UTC().Format("2006-01-02T15:04:05Z") + "'"}
		got, found, err := st.listAll(ctx, q)
		if err == nil && found.gen == known {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.recent = make(map[[2]string]bool, len(got))
			changed := l.changedLogs(found)
			for k, p := range got {
				l.recent[k] = true
				was, ok := l.byKey[k]
				if ok && was.etag == p.etag {
					p.fetches = was.fetches // listed again within the margin: the same entity
				}
				changed = changed || !ok || !sameProps(was, p)
				if !ok || was.last != p.last {
					l.byLast = nil
				}
				l.byKey[k] = p
			}
			if changed {
				l.changes.Add(1)
			}
			l.staged, l.listNext = found.staged, changed
			l.gone = found.gone
			l.since, l.done = sinceOf(found.date), start
			l.doneReads = st.readsDone.Add(1)
			l.found(true, found.begun)
			st.markFound(true, found, startEpoch)
			st.noteListed(got, true) // written since: buckets only added
			return nil
		}
		// Changed since (or the query failed): listed whole.
	}
	wholeAt := time.Now()
	got, found, err := st.listAll(ctx, pager.SubQuery{Select: listingSelect})
	if err != nil {
		l.mu.Lock()
		l.known = false
		l.quietFrom, l.markFrom = 0, 0
		l.changes.Add(1)
		l.mu.Unlock()
		return fmt.Errorf("tsdb: list staging: %w", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	changed := !l.known || found.gen != l.gen || l.changedLogs(found) || !maps.EqualFunc(l.byKey, got, sameProps)
	if changed {
		l.changes.Add(1)
	}
	l.staged, l.listNext = found.staged, changed
	l.gone = found.gone
	l.depart(l.byKey, got, wholeAt)
	wasKnown := l.known
	l.byKey, l.gen, l.whole, l.known = got, found.gen, wholeAt, st.log != nil
	l.byLast, l.recent = nil, nil
	l.since, l.done = sinceOf(found.date), start
	l.doneReads = st.readsDone.Add(1)
	l.found(wasKnown, found.begun)
	st.markFound(false, found, startEpoch)
	st.noteListed(l.byKey, false)
	return nil
}

// listedUnchanged records a refresh (start, begun at epoch startEpoch) that found the
// staging mark as the last listing found it: nothing that listing would have found
// otherwise was made since it began (a staged write, a Fold's or a Delete's record, a
// change recorded in the logs: each rewrites the mark after it), so the refresh stands as
// an incremental listing that found no entity written since, the logs where they were. The
// time the next listing asks from stays the last listing's: an entity written before this
// read whose mark came after it is still found.
func (st *Table) listedUnchanged(start, startEpoch uint64) {
	l := &st.listing
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recent = map[[2]string]bool{} // nothing written since: a Prefetch fetches nothing
	l.done = start
	l.doneReads = st.readsDone.Add(1)
	l.found(true, l.begun)
	st.markFound(true, listFound{gen: l.gen, begun: l.begun, mark: l.mark, staged: l.staged}, startEpoch)
}

// ListedBuckets are the starts of the arrival buckets the last listing found entities of
// (the Cache keeps their entities), oldest first; nil while none is known.
func (st *Table) ListedBuckets() []time.Time {
	buckets := st.listed.Load()
	if buckets == nil {
		return nil
	}
	out := make([]time.Time, len(*buckets))
	for i, b := range *buckets {
		out[i] = time.Unix(int64(b), 0).UTC()
	}
	return out
}

// noteListed records the arrival buckets of the entities listed (Table.listed): of a whole
// listing, or, added to those known (an incremental listing's: no entity it lacks is
// gone), of the entities written since. l.mu is held.
func (st *Table) noteListed(listed map[[2]string]listedProps, added bool) {
	var buckets []uint64
	if known := st.listed.Load(); added && known != nil {
		buckets = slices.Clone(*known)
	}
	before := len(buckets)
	for k := range listed {
		if end := BucketEnd(k[0]); end != tablets.MaxTime {
			if b := uint64(end.Add(-Bucket).Unix()); !slices.Contains(buckets, b) {
				buckets = append(buckets, b)
			}
		}
	}
	if added && st.listed.Load() != nil && len(buckets) == before {
		return // no new bucket
	}
	slices.Sort(buckets)
	st.listed.Store(&buckets)
}

// found records that the refresh that just completed (at l.doneReads) found the folds'
// log at generation begun; after is whether the listing was known before it (a failed
// refresh forgets what the ones before found). l.mu is held.
func (l *entityListing) found(after bool, begun uint64) {
	if !after || l.quietFrom == 0 || begun != l.begun {
		l.quietFrom = l.doneReads
	}
	l.begun = begun
}

// markFound records the logs' mark the refresh that just completed (at l.doneReads) found,
// which began at epoch startEpoch; incremental is whether it only added to the listing. One
// that finds it as the refreshes since the one at markFrom did vouches for the states of
// the logs of VouchFor read after that one, as of startEpoch; one that lists the table
// whole (at least every listingRenewal), finds it changed, or finds no table begins again:
// a process killed between a change recorded and the mark's write leaves no reader wrong
// for longer. l.mu is held.
func (st *Table) markFound(incremental bool, found listFound, startEpoch uint64) {
	l := &st.listing
	if incremental && l.markFrom != 0 && found.mark == l.mark && !found.gone {
		for _, lg := range st.vouched {
			lg.Vouch(l.markEpoch, startEpoch)
		}
		return
	}
	l.mark, l.markFrom, l.markEpoch = found.mark, l.doneReads, changelog.Stamp()
	if found.gone {
		l.markFrom = 0 // no table, no mark: MarkLogs writes none
	}
}

// logAfter is the count of ReadsDone (Table.ReadsDone) a raw log read must have seen to go
// with a listing read at listedReads whose refreshes found the folds' log unchanged since
// the one at quietFrom, for a read that began at count began (readBegan.reads; 0: none
// known): began, when the refresh at quietFrom completed by then, else listedReads.
//
// A Fold records in the raw log, then in the folds' log, then deletes. An entity missing
// from the listing (deleted before the listing's query read it) was deleted by a Fold
// whose record in the folds' log came before the listing read that log (last, as the log
// sorts last): the refreshes since quietFrom found no such record, so it came before the
// refresh at quietFrom read it, and the Fold's raw log record before that. A raw log read
// after the count reached quietFrom has it. And one read after the read began has every
// change made before it began (direct writes, Deletes, Retain). So a query's read mark
// reads the raw log beside its listing, not after it (DB.ReadMark).
//
// And a raw log read once the count reached both markFrom and quietFrom (neither 0) goes
// with it too: every change recorded in the raw log rewrites the logs' mark after it is
// recorded (a Fold's before it records in the folds' log and deletes), and the refreshes
// since found the mark as it was, the last as it read its entities (the mark sorts last):
// no change was recorded after such a read. The folds' log standing still as well keeps a
// Fold's deletes from going unseen should its mark be lost.
func logAfter(listedReads, quietFrom, began, markFrom uint64) uint64 {
	after := listedReads
	if began != 0 && quietFrom != 0 && quietFrom <= began {
		after = min(began, listedReads)
	}
	if markFrom != 0 && quietFrom != 0 {
		after = min(after, max(markFrom, quietFrom))
	}
	return after
}

// sinceOf is what the next listing asks for the entities written since: the service's time
// of the last, less listingMargin (none without it).
func sinceOf(date time.Time) time.Time {
	if date.IsZero() {
		return date
	}
	return date.Add(-listingMargin)
}

// listingSelect is what a listing reads of an entity: the keys and the properties that
// queries' filters compare of a staging entity, the staging log's of its entity.
const listingSelect = "PartitionKey,RowKey," + FirstProp + "," + LastProp + "," + LoProp + "," + HiProp + "," + CountProp + ",V,G,C," + logsMarkProp

// listFound is what a listing found besides the staging entities: the staging log's
// generation and the folds' log's (0 without their entity), the logs' mark (its ETag and
// value, "" without one), whether the table is gone, and the service's time of its first
// reply.
type listFound struct {
	gen, begun uint64
	mark       string
	staged     string // the staging mark (markOf; "" without one)
	gone       bool
	date       time.Time
}

// listAll runs q (pages of keys) and returns its staging entities and what else it found.
// A staging table that does not exist holds nothing.
func (st *Table) listAll(ctx context.Context, q pager.SubQuery) (out map[[2]string]listedProps, found listFound, err error) {
	out = map[[2]string]listedProps{}
	var e entity.Entity
	e.AllowStrings = true
	var cont pager.Continuation
	for {
		raw, next, d, err := pager.FetchDated(ctx, st.client, q, 0, cont)
		if azerr.IsTableGone(err) {
			return map[[2]string]listedProps{}, listFound{gone: true}, nil
		}
		if err != nil {
			return nil, listFound{}, err
		}
		if found.date.IsZero() {
			found.date = d
		}
		for _, r := range raw {
			if err := e.Decode(r); err != nil {
				return nil, listFound{}, err
			}
			if pk, rk := string(e.PartitionKey), string(e.RowKey); pk == LogPartition || pk == FoldsPartition {
				switch {
				case (pk == LogPartition && rk == StagingLogKey) || (pk == FoldsPartition && rk == FoldsBegunKey):
					s, err := changelog.DecodeState(r)
					if err != nil {
						return nil, listFound{}, fmt.Errorf("the staging log %s: %w", pk, err)
					}
					if pk == LogPartition {
						found.gen = s.Gen()
					} else {
						found.begun = s.Gen()
					}
				case pk == FoldsPartition && rk == LogsMarkKey:
					// Its ETag and value: whatever they hold, another write changes them.
					v, _ := e.String(logsMarkProp)
					found.mark = markOf(string(e.ETag), string(v))
				case pk == LogPartition && rk == StagingMarkKey:
					v, _ := e.String(logsMarkProp)
					found.staged = markOf(string(e.ETag), string(v))
				}
				continue
			}
			str := func(name string) string { v, _ := e.String(name); return string(v) }
			points := 0
			for _, p := range e.Props {
				if string(p.Name) == CountProp {
					points = int(p.Value)
				}
			}
			out[[2]string{string(e.PartitionKey), string(e.RowKey)}] = listedProps{etag: string(e.ETag),
				first: str(FirstProp), last: str(LastProp), lo: str(LoProp), hi: str(HiProp), points: points}
		}
		if next.IsZero() {
			return out, found, nil
		}
		cont = next
	}
}

// Listing is what the staging table held of a range of times when listed: the key, ETag
// and time span of each entity (of either kind) that may hold a sample in it, in key order.
// The Sums of a range in two listings are equal exactly when no staged write, Delete or
// Fold changed what a read of that range finds between them.
type Listing struct {
	entities []listedSpan
	logAfter uint64 // LogAfter
}

// LogAfter is the count of ReadsDone a raw log read must have seen to go with the listing
// (changelog.AfterRead): a Fold that deleted an entity the listing lacks recorded its
// change in the raw log before such a read. It is at most the count the read of its
// context took when it began (Table.ReadBegan) when the folds' log stood still since a
// listing before the read began, so that the raw log's read can go beside the listing's
// (logAfter).
func (l Listing) LogAfter() uint64 { return l.logAfter }

// listedSpan is an entity of a Listing.
type listedSpan struct {
	pk, rk, etag string
	first, last  int64 // the Unix milliseconds of its earliest and latest sample
}

// Sum is a Listing of a range, summed: the hash of its entities' keys and ETags.
type Sum [sha256.Size]byte

// Refresh is List of no entity: the listing brought up to date for the read of ctx (or
// taken from a refresh since it began), as a Listing whose LogAfter only counts. A read
// that keeps no mark (an instant query's) takes what its Selects will, without selecting
// or summing the entities of its range.
func (st *Table) Refresh(ctx context.Context) (Listing, error) {
	defer st.readsDone.Add(1)
	if !st.reads {
		return Listing{}, nil
	}
	_, after, err := st.listedEntities(ctx, filter.Expr{}, selectNone)
	if err != nil {
		return Listing{}, err
	}
	return Listing{logAfter: after}, nil
}

// List lists the staging entities that may hold samples of [from, to) (see
// listedEntities: a query of the entities written since the last listing, or of all).
// It counts as a read of staged samples (ReadsDone): a change log read after it is later
// than it. A DB that does not stage lists nothing (no request).
func (st *Table) List(ctx context.Context, from, to time.Time) (Listing, error) {
	defer st.readsDone.Add(1)
	if !st.reads || !from.Before(to) {
		return Listing{}, nil
	}
	f, _ := queryParts(nil, from, to, Both)
	listed, after, err := st.listedEntities(ctx, f, selectAll)
	if err != nil {
		return Listing{}, err
	}
	l := Listing{logAfter: after}
	for _, le := range listed {
		first, err1 := timeKeyMilli(le.first)
		last, err2 := timeKeyMilli(le.last)
		if err := cmp.Or(err1, err2); err != nil {
			return Listing{}, fmt.Errorf("tsdb: list staging: entity %s/%s: %w", le.pk, le.rk, err)
		}
		l.entities = append(l.entities, listedSpan{le.pk, le.rk, le.etag, first, last})
	}
	return l, nil
}

// Sum sums the entities of l that may hold samples of [from, to) (a range within the
// listed one).
func (l Listing) Sum(from, to time.Time) Sum {
	lo, hi := from.UnixMilli(), EarliestMilli(to)
	h := sha256.New()
	for _, le := range l.entities {
		if le.first >= hi || le.last < lo {
			continue
		}
		for _, s := range []string{le.pk, le.rk, le.etag} {
			h.Write([]byte(s))
			h.Write([]byte{0}) // no key or ETag holds a NUL
		}
	}
	var s Sum
	h.Sum(s[:0])
	return s
}

// SumWith is the Sum of l with the entities of moved (listings the Folds' receipts name,
// Moved) over [from, to): what a listing taken before those Folds summed, when they moved
// exactly the entities it had that l lacks. An entity in both (listed before its Fold
// deleted it, whose change a later read of the log saw) counts once.
func (l Listing) SumWith(moved []Listing, from, to time.Time) Sum {
	all := slices.Clone(l.entities)
	for _, m := range moved {
		all = append(all, m.entities...)
	}
	slices.SortFunc(all, func(a, b listedSpan) int {
		return cmp.Or(strings.Compare(a.pk, b.pk), strings.Compare(a.rk, b.rk), strings.Compare(a.etag, b.etag))
	})
	all = slices.CompactFunc(all, func(a, b listedSpan) bool { return a.pk == b.pk && a.rk == b.rk && a.etag == b.etag })
	return Listing{entities: all}.Sum(from, to)
}

// Moved is the listing of the entities the Fold of receipt r moved out of the table (their
// keys, ETags and times as listed), and true, when this Table's listings knew them:
// matched by the receipt's digest against those listed now and those a whole listing
// found gone (see receiptEntities). A read mark taken after the Fold then knows what the
// Fold moved, and that it moved nothing else (tsdb's ReadMark.Holds).
func (st *Table) Moved(r changelog.Receipt) (Listing, bool) {
	set, ok := st.receiptEntities(r)
	if !ok {
		return Listing{}, false
	}
	var l Listing
	for _, le := range set {
		first, err1 := timeKeyMilli(le.first)
		last, err2 := timeKeyMilli(le.last)
		if err1 != nil || err2 != nil {
			return Listing{}, false // listed before its times were known: not summed
		}
		l.entities = append(l.entities, listedSpan{le.pk, le.rk, le.etag, first, last})
	}
	return l, true
}

// timeKeyMilli is the Unix millisecond of a staging entity's T or U (of either kind).
func timeKeyMilli(key string) (int64, error) {
	k := strings.TrimPrefix(key, histKeyPrefix)
	if len(k) != 16 {
		return 0, fmt.Errorf("time key %q: not 16 hex digits", key)
	}
	u, err := strconv.ParseUint(k, 16, 64)
	if err != nil {
		return 0, fmt.Errorf("time key %q: %w", key, err)
	}
	return int64(u ^ 1<<63), nil
}
