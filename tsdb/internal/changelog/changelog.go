// Package changelog holds the change logs of a tsdb database: an entity of the catalog a
// period and log (docs/format.md, "The catalog": partition `changes`) that every process
// which changes what a read of the period answers updates after the change and before
// anything that depends on it is visible. Each update adds one to the period's generation
// and records the range of times it touched (its last Kept updates are kept).
//
// The raw part keeps one (what its raw and histogram tables answer: the Fold, direct
// writes, Delete, Retain record there), the index another (the series its index lists:
// Register records there). It is what lets a read cache keep what it read without reading
// it again: what a read at generation g found over [from, to) still stands at generation G
// as long as none of the changes after g touched [from, to) (State.ValidUntil).
//
// A Fold's change may carry its receipt (Receipt, RecordFold): the staging entities it
// moved, so that a reader holding them takes the change in without reading the tables
// (State.Folds).
//
// A process's concurrent updates of one period are made one at a time, each taking in
// all the changes waiting (their ranges joined): the processes of a database contend for
// the entity, not their writes. It is a leaf: it depends on no part.
package changelog

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/internal/reqlimit"
	"github.com/seed71701133/tablets/tsdb/internal/azerr"
	"github.com/seed71701133/tablets/tsdb/internal/times"
)

// Log is one change log of a database: the entities of its periods, RowKey key(p).
type Log struct {
	client    *aztables.Client // the catalog's (or the table the log is of)
	partition string           // Partition, or the partition NewIn was given
	key       func(p uint64) string
	// after, if set, counts the reads a State must be later than (the raw part: the
	// staging table's reads completed): a state read after the count was n is later than
	// each of those n reads, and is reused while the count stands. nil: each State reads.
	after func() uint64
	// recorded, if set, runs after each update of an entity of the log, before Record
	// returns (OnRecorded): the staging table's logs' mark.
	recorded func(context.Context) error

	// changes counts the states read that differ from the one known (Changes).
	changes atomic.Uint64

	mu       sync.Mutex
	known    map[uint64]snapshot       // by period: the state last read
	waiting  map[uint64]*pendingChange // by period: the changes waiting for the update under way
	inFlight map[uint64]*stateRead     // by period: the newest read of State under way
}

// stateRead is a read of a period's entity for State under way, which the States that need
// no later one wait for instead of reading it again.
type stateRead struct {
	afterSeq uint64 // the count of Log.after when it began
	done     chan struct{}
	state    State
	err      error
}

// New returns the log of the catalog table client whose period p's entity has RowKey
// key(p); after is what a State must be later than (see Log; nil: nothing, each State
// reads the entity).
func New(client *aztables.Client, key func(p uint64) string, after func() uint64) *Log {
	return NewIn(client, Partition, key, after)
}

// NewIn is New of a log whose entities are in partition partition of client's table (a
// table's own log, kept in it so that one query reads both).
func NewIn(client *aztables.Client, partition string, key func(p uint64) string, after func() uint64) *Log {
	return &Log{client: client, partition: partition, key: key, after: after, known: map[uint64]snapshot{},
		waiting: map[uint64]*pendingChange{}, inFlight: map[uint64]*stateRead{}}
}

// DecodeState decodes an entity of a log as a query returned it.
func DecodeState(raw []byte) (State, error) { return decodeEntity(raw) }

// Range is the range of Unix milliseconds a change touched, [From, To).
type Range = times.MilliRange

// Kept is how many changes a period's entity records: a reader that last read the period
// more than that many changes ago reads again all it holds of it.
const Kept = 64

// The entity.
const (
	Partition       = "changes"
	formatVersion   = 1
	versionProp     = "V" // Edm.Double: formatVersion
	genProp         = "G" // Edm.Double: the generation, the number of changes recorded
	rangesProp      = "C" // Edm.Binary: the last changes' ranges, oldest first, 16 bytes each
	receiptsProp    = "F" // Edm.Binary: the Folds' receipts of the last changes, oldest first, receiptBytes each
	hullProp        = "H" // Edm.Binary: the hull of every change's range, 16 bytes as one of C's
	maxAttempts     = 30
	recordTimeLimit = time.Minute // an update's bound, whichever caller's changes it takes in
)

// State is a period's log as read: its generation, and the ranges of its last changes,
// oldest first (the last is generation Gen's), and the receipts of the Folds among them.
type State struct {
	gen      uint64
	ranges   []Range
	receipts []genReceipt // oldest first, of generations within the ranges kept
	// hull is the hull of every change's range when hullKept (H): what Hull answers once
	// the ranges no longer record every change. A writer of an earlier version replaces
	// the entity without it, and it is not known again in that period once the ranges
	// have lost a change.
	hull     Range
	hullKept bool
}

// ReceiptsKept is how many of a period's last changes keep their receipt (a Fold's): a
// reader more changes behind reads again what they touched.
const ReceiptsKept = 16

// Receipt says what a Fold moved into the raw tables: every sample of the staging entities
// it names, and nothing else. It names them as a set: those of the arrival buckets [From,
// Horizon) (Unix seconds), Count of them, and the first 16 bytes of the SHA-256 of their
// keys and ETags as the Fold read them (ReceiptDigest). A reader that knows a set of
// entities with that digest, and holds their columns at those ETags, knows what the change
// added to the raw tables without reading them (package raw's cache).
type Receipt struct {
	From, Horizon uint64
	Count         uint64
	Digest        [16]byte
}

// genReceipt is the receipt of generation gen's change.
type genReceipt struct {
	gen uint64
	Receipt
}

// receiptBytes is a receipt's size in the entity: the generation, From, Horizon, Count (8
// bytes each, big-endian) and the digest.
const receiptBytes = 48

// ReceiptEntity is an entity a receipt names: its keys and ETag.
type ReceiptEntity struct{ PartitionKey, RowKey, ETag string }

// ReceiptDigest is the digest of a set of entities (any order): the SHA-256 of their
// PartitionKey, RowKey and ETag, each followed by a zero byte, the entities sorted by
// PartitionKey, then RowKey (then ETag: a reader's candidates may hold an entity twice);
// its first 16 bytes.
func ReceiptDigest(entities []ReceiptEntity) [16]byte {
	sorted := slices.Clone(entities)
	slices.SortFunc(sorted, func(a, b ReceiptEntity) int {
		return cmp.Or(strings.Compare(a.PartitionKey, b.PartitionKey), strings.Compare(a.RowKey, b.RowKey), strings.Compare(a.ETag, b.ETag))
	})
	h := sha256.New()
	for _, e := range sorted {
		for _, s := range []string{e.PartitionKey, e.RowKey, e.ETag} {
			h.Write([]byte(s))
			h.Write([]byte{0})
		}
	}
	var d [16]byte
	copy(d[:], h.Sum(nil))
	return d
}

// Gen is the state's generation.
func (s State) Gen() uint64 { return s.gen }

// StateOfGen is the state of a log known only by its generation: what a read mark kept in
// the database (tsdb's kept answers) records of each period. As the earlier state of a
// comparison (the g of ValidUntil, Changes, Folds) it is as good as the state it was read
// as; as the later one it records no change, so that a generation other than its own is
// never valid against it.
func StateOfGen(gen uint64) State { return State{gen: gen} }

// Hull is the hull of the ranges of every change the period had, and true, when s knows
// it: the entity keeps it (H), or still records each change (at most Kept of them;
// generation 0: none, an empty range); false when it knows neither (the ranges lost a
// change while a writer of an earlier version kept no hull).
func (s State) Hull() (Range, bool) {
	if s.hullKept {
		return s.hull, true
	}
	if s.gen > uint64(len(s.ranges)) {
		return Range{}, false
	}
	var h Range
	for i, r := range s.ranges {
		if i == 0 {
			h = r
			continue
		}
		h = Range{From: min(h.From, r.From), To: max(h.To, r.To)}
	}
	return h, true
}

// snapshot is a state with the count of Log.after when it was read.
type snapshot struct {
	state    State
	afterSeq uint64
}

// pendingChange is the changes of a period waiting for an update: the hull of their ranges.
type pendingChange struct {
	r Range
	// values is the context whose values the update is made with (not its cancellation):
	// a waiting remote write's when there is one, so that the update has the ingest class
	// of the account's request limit (reqlimit) and does not wait behind queries with the
	// write that waits for it; else the first caller's.
	values context.Context
	// receipt is the Fold's of the change, if it is one change only (nil once joined).
	receipt *Receipt
	done    chan struct{}
	err     error
}

// appendEntity is the body of an entity of RowKey rowKey at state s.
func appendEntity(partition, rowKey string, s State) []byte {
	b := entity.AppendKeys(nil, partition, rowKey)
	b = entity.AppendDouble(b, versionProp, formatVersion)
	b = entity.AppendDouble(b, genProp, float64(s.gen))
	ranges := make([]byte, 0, 16*len(s.ranges))
	for _, r := range s.ranges {
		ranges = binary.BigEndian.AppendUint64(ranges, uint64(r.From))
		ranges = binary.BigEndian.AppendUint64(ranges, uint64(r.To))
	}
	b = entity.AppendBinary(b, rangesProp, ranges)
	if len(s.receipts) > 0 {
		receipts := make([]byte, 0, receiptBytes*len(s.receipts))
		for _, r := range s.receipts {
			for _, v := range []uint64{r.gen, r.From, r.Horizon, r.Count} {
				receipts = binary.BigEndian.AppendUint64(receipts, v)
			}
			receipts = append(receipts, r.Digest[:]...)
		}
		b = entity.AppendBinary(b, receiptsProp, receipts)
	}
	if s.hullKept {
		hull := binary.BigEndian.AppendUint64(make([]byte, 0, 16), uint64(s.hull.From))
		hull = binary.BigEndian.AppendUint64(hull, uint64(s.hull.To))
		b = entity.AppendBinary(b, hullProp, hull)
	}
	return entity.AppendEnd(b)
}

// decodeEntity reads an entity of the log, or says why it cannot: another version, or
// malformed values.
func decodeEntity(raw []byte) (State, error) {
	e := entity.Entity{AllowStrings: true}
	if err := e.Decode(raw); err != nil {
		return State{}, err
	}
	version, gen := math.NaN(), math.NaN()
	for _, p := range e.Props {
		switch string(p.Name) {
		case versionProp:
			version = p.Value
		case genProp:
			gen = p.Value
		}
	}
	if version != formatVersion {
		return State{}, fmt.Errorf("format version %v, not %d", version, formatVersion)
	}
	if gen != math.Trunc(gen) || gen < 0 || gen > 1<<53 {
		return State{}, fmt.Errorf("generation %v is not a whole number in range", gen)
	}
	s := State{gen: uint64(gen)}
	b64, _ := e.String(rangesProp)
	ranges, err := base64.StdEncoding.DecodeString(string(b64))
	switch {
	case err != nil:
		return State{}, fmt.Errorf("ranges: %w", err)
	case len(ranges)%16 != 0 || len(ranges)/16 > Kept:
		return State{}, fmt.Errorf("ranges of %d bytes: not at most %d ranges of 16 bytes", len(ranges), Kept)
	case uint64(len(ranges)/16) > s.gen:
		return State{}, fmt.Errorf("%d ranges for generation %d", len(ranges)/16, s.gen)
	}
	for i := 0; i < len(ranges); i += 16 {
		r := Range{From: int64(binary.BigEndian.Uint64(ranges[i:])), To: int64(binary.BigEndian.Uint64(ranges[i+8:]))}
		if r.From >= r.To {
			return State{}, fmt.Errorf("range [%d, %d) is empty", r.From, r.To)
		}
		s.ranges = append(s.ranges, r)
	}
	b64, _ = e.String(receiptsProp)
	receipts, err := base64.StdEncoding.DecodeString(string(b64))
	switch {
	case err != nil:
		return State{}, fmt.Errorf("receipts: %w", err)
	case len(receipts)%receiptBytes != 0 || len(receipts)/receiptBytes > ReceiptsKept:
		return State{}, fmt.Errorf("receipts of %d bytes: not at most %d receipts of %d bytes", len(receipts), ReceiptsKept, receiptBytes)
	}
	for i := 0; i < len(receipts); i += receiptBytes {
		var r genReceipt
		r.gen = binary.BigEndian.Uint64(receipts[i:])
		r.From = binary.BigEndian.Uint64(receipts[i+8:])
		r.Horizon = binary.BigEndian.Uint64(receipts[i+16:])
		r.Count = binary.BigEndian.Uint64(receipts[i+24:])
		copy(r.Digest[:], receipts[i+32:])
		// A receipt of a change the ranges no longer hold, or out of order, is not this
		// version's: an entity a writer of an earlier version replaced keeps none.
		if r.gen > s.gen || r.gen+uint64(len(s.ranges)) <= s.gen || r.From >= r.Horizon ||
			(len(s.receipts) > 0 && r.gen <= s.receipts[len(s.receipts)-1].gen) {
			return State{}, fmt.Errorf("receipt of generation %d (buckets [%d, %d)) at generation %d with %d ranges", r.gen, r.From, r.Horizon, s.gen, len(s.ranges))
		}
		s.receipts = append(s.receipts, r)
	}
	b64, ok := e.String(hullProp)
	if !ok {
		return s, nil
	}
	hull, err := base64.StdEncoding.DecodeString(string(b64))
	if err != nil || len(hull) != 16 {
		return State{}, fmt.Errorf("hull of %d bytes (%v): not 16", len(hull), err)
	}
	s.hull = Range{From: int64(binary.BigEndian.Uint64(hull)), To: int64(binary.BigEndian.Uint64(hull[8:]))}
	s.hullKept = true
	switch {
	case s.gen == 0 && s.hull != Range{}:
		return State{}, fmt.Errorf("hull [%d, %d) at generation 0", s.hull.From, s.hull.To)
	case s.gen > 0 && s.hull.From >= s.hull.To:
		return State{}, fmt.Errorf("hull [%d, %d) is empty", s.hull.From, s.hull.To)
	}
	for _, r := range s.ranges {
		if r.From < s.hull.From || r.To > s.hull.To {
			return State{}, fmt.Errorf("hull [%d, %d) does not hold the change of [%d, %d)", s.hull.From, s.hull.To, r.From, r.To)
		}
	}
	return s, nil
}

// read reads period p's entity: no entity is generation 0, no change.
func (c *Log) read(ctx context.Context, p uint64) (State, azcore.ETag, bool, error) {
	resp, err := c.client.GetEntity(ctx, c.partition, c.key(p), nil)
	if azerr.IsStatus(err, http.StatusNotFound) || azerr.IsTableGone(err) {
		return State{}, "", false, nil
	}
	if err != nil {
		return State{}, "", false, fmt.Errorf("tsdb: change log: %w", err)
	}
	s, err := decodeEntity(resp.Value)
	if err != nil {
		return State{}, "", false, fmt.Errorf("tsdb: change log of period %d: %w", p, err)
	}
	return s, resp.ETag, true, nil
}

// OnRecorded has f run after each update of an entity of the log (a change recorded),
// before Record returns: a Record whose f fails fails. The tsdb database's raw and index
// logs rewrite the staging table's logs' mark (staging.Table.MarkLogs) so, which lets a
// reader that finds the mark as it was know that no change was recorded since (Vouch).
// Call it before the log is used.
func (c *Log) OnRecorded(f func(context.Context) error) { c.recorded = f }

// Stamp returns a new epoch number: a state of a log without after whose read began after
// Stamp returned has a higher one (see Vouch).
func Stamp() uint64 { return epoch.Add(1) }

// Vouch says that no change was recorded in c (in any period) from before a state whose
// read took count since (Log.after's count, or the epoch for a Log without after) until
// until: the states known that were read with since or later stand for a read of until, as
// if read then. The staging table's listings call it for the index log when they find its
// logs' mark as it was (staging.Table.VouchFor).
func (c *Log) Vouch(since, until uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for p, snap := range c.known {
		if snap.afterSeq >= since && snap.afterSeq < until {
			snap.afterSeq = until
			c.known[p] = snap
		}
	}
}

// Widen widens period p's range in ranges to hold [from, to).
func Widen(ranges map[uint64]Range, p uint64, from, to int64) {
	if r, ok := ranges[p]; ok {
		from, to = min(r.From, from), max(r.To, to)
	}
	ranges[p] = Range{From: from, To: to}
}

// Record records a change in each period of ranges, in the range of times it touched: one
// generation more a period (or for several changes of this process at once). The caller
// made the change before (a change recorded and not made only costs readers a read).
func (c *Log) Record(ctx context.Context, ranges map[uint64]Range) error {
	return c.RecordFold(ctx, ranges, nil)
}

// RecordFold is Record of a Fold's change, with its receipt (nil: none), which the change
// keeps when this process records it alone (not joined with another of its changes).
func (c *Log) RecordFold(ctx context.Context, ranges map[uint64]Range, receipt *Receipt) error {
	for p, r := range ranges {
		if r.From >= r.To {
			continue
		}
		if err := c.recordJoined(ctx, p, r, receipt); err != nil {
			return err
		}
	}
	return nil
}

// recordJoined records r in period p: in an update of its own when none is under way;
// else with the changes that wait for that one to end (their ranges joined), all made in
// one update once it has (handOn). A caller returns once its change is recorded.
func (c *Log) recordJoined(ctx context.Context, p uint64, r Range, receipt *Receipt) error {
	c.mu.Lock()
	w, ok := c.waiting[p]
	switch {
	case ok && w != nil: // an update under way, and changes waiting: join them
		w.r = Range{From: min(w.r.From, r.From), To: max(w.r.To, r.To)}
		w.receipt = nil // one change of many: it is no Fold's alone
		if reqlimit.IsIngest(ctx) && !reqlimit.IsIngest(w.values) {
			w.values = context.WithoutCancel(ctx)
		}
	case ok: // an update under way: wait for it
		w = &pendingChange{r: r, values: context.WithoutCancel(ctx), receipt: receipt, done: make(chan struct{})}
		c.waiting[p] = w
	default: // none: make it
		c.waiting[p] = nil
		c.mu.Unlock()
		err := c.recordUpdate(ctx, p, r, receipt)
		c.handOn(p)
		return err
	}
	c.mu.Unlock()
	select {
	case <-w.done:
		return w.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// handOn makes the update of the changes waiting for period p, if any, once the one under
// way is done: in the background, bounded in time, so that no caller waits for another's.
func (c *Log) handOn(p uint64) {
	c.mu.Lock()
	w := c.waiting[p]
	if w == nil {
		delete(c.waiting, p)
		c.mu.Unlock()
		return
	}
	c.waiting[p] = nil
	c.mu.Unlock()
	go func() {
		ctx, cancel := context.WithTimeout(w.values, recordTimeLimit)
		w.err = c.recordUpdate(ctx, p, w.r, w.receipt)
		cancel()
		close(w.done)
		c.handOn(p)
	}()
}

// recordUpdate adds a change of r to period p's entity (with its receipt, if not nil),
// conditionally on the ETag it read.
func (c *Log) recordUpdate(ctx context.Context, p uint64, r Range, receipt *Receipt) error {
	for range maxAttempts {
		s, etag, ok, err := c.read(ctx, p)
		if err != nil {
			return err
		}
		// The hull of every change, kept while it is known: Hull before this one's.
		if h, known := s.Hull(); known {
			s.hull, s.hullKept = r, true
			if s.gen > 0 {
				s.hull = Range{From: min(h.From, r.From), To: max(h.To, r.To)}
			}
		}
		s.gen++
		s.ranges = append(s.ranges, r)
		if len(s.ranges) > Kept {
			s.ranges = s.ranges[len(s.ranges)-Kept:]
		}
		if receipt != nil {
			s.receipts = append(s.receipts, genReceipt{gen: s.gen, Receipt: *receipt})
		}
		// The receipts of the last ReceiptsKept changes only.
		s.receipts = slices.DeleteFunc(s.receipts, func(g genReceipt) bool { return g.gen+ReceiptsKept <= s.gen })
		body := appendEntity(c.partition, c.key(p), s)
		if ok {
			_, err = c.client.UpdateEntity(ctx, body, &aztables.UpdateEntityOptions{IfMatch: &etag, UpdateMode: aztables.UpdateModeReplace})
		} else {
			_, err = c.client.AddEntity(ctx, body, nil)
		}
		switch {
		case err == nil && c.recorded != nil:
			if err := c.recorded(ctx); err != nil {
				return fmt.Errorf("tsdb: change log of period %d: recorded, then: %w", p, err)
			}
			return nil
		case err == nil:
			return nil
		case azerr.IsStatus(err, http.StatusPreconditionFailed), azerr.IsStatus(err, http.StatusConflict), azerr.IsStatus(err, http.StatusNotFound):
			// Another process recorded a change meanwhile (or this one's request whose reply
			// was lost: the change then counts twice, which only costs a read).
		default:
			return fmt.Errorf("tsdb: change log: %w", err)
		}
	}
	return fmt.Errorf("tsdb: change log of period %d: still changing after %d attempts", p, maxAttempts)
}

// State returns period p's log as read after every read that Log.after counts so far: the
// state last read if it was, else read now (always, for a Log without after).
// A context of AfterRead asks for the state as read after the count it carries instead.
//
// For a Log without after, a context of Begin takes the state last read, or the read under
// way, if its read began after the context's read did (else it reads, as without). A
// context of AnyKnown takes the state last read, if any.
func (c *Log) State(ctx context.Context, p uint64) (State, error) {
	if IsSpeculative(ctx) {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.speculative(p)
	}
	if IsAnyKnown(ctx) {
		if s, ok := c.Known(p); ok {
			return s, nil
		}
	}
	if c.after == nil {
		began, ok := ctx.Value(beganKey{}).(uint64)
		if !ok {
			s, _, _, err := c.read(ctx, p)
			return s, err
		}
		// A read begun later took a later epoch number than the read's Begin.
		return c.stateShared(ctx, p, began+1, func() uint64 { return epoch.Add(1) })
	}
	if seq, ok := ctx.Value(afterKey{}).(uint64); ok {
		return c.StateAfter(ctx, p, seq)
	}
	return c.StateAfter(ctx, p, c.after())
}

// ReadNow reads period p's state now, whatever is known or under way: for work that must
// see every change recorded before it began (a compaction that skips a table unchanged
// since its last run). The state read is known to the States after it, as theirs are.
func (c *Log) ReadNow(ctx context.Context, p uint64) (State, error) {
	now := func() uint64 { return epoch.Add(1) }
	if c.after != nil {
		now = c.after
	}
	c.mu.Lock()
	return c.readShared(ctx, p, now())
}

// anyKnownKey is the context key of AnyKnown.
type anyKnownKey struct{}

// AnyKnown returns a context whose States take the state last read of a period, however
// old, where one was read: for a read whose answer only guides what another reads (a
// prefetch of what a query's Selects will read), never for one whose answer is a read's.
func AnyKnown(ctx context.Context) context.Context {
	return context.WithValue(ctx, anyKnownKey{}, true)
}

// IsAnyKnown reports whether ctx is of AnyKnown: what a read with it finds only guides.
func IsAnyKnown(ctx context.Context) bool { return ctx.Value(anyKnownKey{}) != nil }

// Known returns period p's state as last read, without a request, and whether it was
// read: an estimate's, not a read's (it may be old).
func (c *Log) Known(p uint64) (State, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	snap, ok := c.known[p]
	return snap.state, ok
}

// epoch orders the beginnings of reads (Begin) and of the reads of logs without after:
// a state whose read took a later number than a read's Begin was read after it began.
var epoch atomic.Uint64

// beganKey is the context key of Begin: the epoch when the read began.
type beganKey struct{}

// Begin returns the context of a read that begins now (a query, with its read mark): the
// States of logs without after it asks for (the index's) may be any read after it began,
// so that its parts (a read mark, its Selects) share one request a period. A context that
// began already is returned as is: the read began then.
func Begin(ctx context.Context) context.Context {
	if _, ok := ctx.Value(beganKey{}).(uint64); ok {
		return ctx
	}
	return context.WithValue(ctx, beganKey{}, epoch.Add(1))
}

// Began reports whether ctx is of a read that began (Begin).
func Began(ctx context.Context) bool {
	_, ok := ctx.Value(beganKey{}).(uint64)
	return ok
}

// afterKey is the context key of AfterRead.
type afterKey struct{}

// AfterRead returns a context whose States of a log with after (the raw part's) need only
// be read after the count reached seq: the reads of the samples a read of the staging
// table went with, which knows what its entities were as of (staging.Table.ReadPacked).
// Give it to those reads only: another read needs its own.
func AfterRead(ctx context.Context, seq uint64) context.Context {
	return context.WithValue(ctx, afterKey{}, seq)
}

// StateAfter returns period p's log as read once Log.after counted seq (at least): the
// state last read if it was, else the read under way if it began then (concurrent reads of
// a Select's batches, or of a read mark and the Select after it, share one request), else
// read now. seq must be a count Log.after has reached: a read that counted (see
// staging.Table.ReadPacked) knows it. A Log without after reads each time.
func (c *Log) StateAfter(ctx context.Context, p uint64, seq uint64) (State, error) {
	if IsSpeculative(ctx) {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.speculative(p)
	}
	if c.after == nil {
		s, _, _, err := c.read(ctx, p)
		return s, err
	}
	// A read begun now began after the count reached now's, which is at least seq.
	return c.stateShared(ctx, p, seq, func() uint64 { return max(seq, c.after()) })
}

// stateShared returns the state last read if its count (snapshot.afterSeq) is at least
// need, else the read under way if its count is, else reads it with the count now gives
// (a Log with after: after's; without: the epoch).
func (c *Log) stateShared(ctx context.Context, p uint64, need uint64, now func() uint64) (State, error) {
	c.mu.Lock()
	if snap, ok := c.known[p]; ok && snap.afterSeq >= need {
		c.mu.Unlock()
		return snap.state, nil
	}
	if r, ok := c.inFlight[p]; ok && r.afterSeq >= need {
		c.mu.Unlock()
		joined := time.Now()
		select {
		case <-r.done:
		case <-ctx.Done():
			return State{}, ctx.Err()
		}
		reqlimit.TallyJoined(ctx, joined)
		if r.err == nil {
			return r.state, nil
		}
		// The read it waited for failed (its caller's context, perhaps): its own.
		c.mu.Lock()
	}
	return c.readShared(ctx, p, now())
}

// readShared reads period p's state, as read once the count (after's, or the epoch for a
// Log without after) reached seq, for the States that wait for it; c.mu is held, and
// released.
func (c *Log) readShared(ctx context.Context, p uint64, seq uint64) (State, error) {
	r := &stateRead{afterSeq: seq, done: make(chan struct{})}
	if old, ok := c.inFlight[p]; !ok || old.afterSeq <= r.afterSeq {
		c.inFlight[p] = r
	}
	c.mu.Unlock()
	s, _, _, err := c.read(ctx, p)
	c.land(p, r, s, err)
	return s, err
}

// land ends read r of period p with its state s or error: the States waiting for it take
// it, and the state known is the newest read.
func (c *Log) land(p uint64, r *stateRead, s State, err error) {
	r.state, r.err = s, err
	c.mu.Lock()
	if c.inFlight[p] == r {
		delete(c.inFlight, p)
	}
	if err == nil {
		// The newest state read is kept, with the latest count of the reads: a later
		// generation records every change an earlier one does, so it stands for any count
		// either was read after. A read begun before another may be served after it (the
		// account orders no two requests), and a read mark's state must not be followed by
		// an older one (a Select's: an answer cached under the mark would lack a change
		// the mark has). A log whose generation went back (its catalog made again) keeps
		// the higher one known, which only makes its readers read its tables again.
		old, ok := c.known[p]
		if !ok || s.gen > old.state.gen {
			c.changes.Add(1)
		}
		switch {
		case !ok:
			c.known[p] = snapshot{state: s, afterSeq: r.afterSeq}
		case s.gen >= old.state.gen:
			c.known[p] = snapshot{state: s, afterSeq: max(old.afterSeq, r.afterSeq)}
		default:
			c.known[p] = snapshot{state: old.state, afterSeq: max(old.afterSeq, r.afterSeq)}
		}
	}
	c.mu.Unlock()
	close(r.done)
}

// ValidUntil returns how much of [from, to), read at generation g, still stands at state s:
// [from, until), until the earliest start of the changes after g that overlap it; from when
// none stands (a change from before it, or s no longer records every change after g).
func (s State) ValidUntil(g uint64, from, to int64) int64 {
	if g == s.gen {
		return to
	}
	if g > s.gen || s.gen-g > uint64(len(s.ranges)) {
		return from // a log that went back (recreated), or changes no longer recorded
	}
	until := to
	for _, r := range s.ranges[uint64(len(s.ranges))-(s.gen-g):] {
		if r.To > from && r.From < until {
			until = r.From
		}
	}
	return max(until, from)
}

// Changes returns how many of the changes after generation g overlap [from, to), and
// whether s records every change after g (false also when the log went back: none is
// counted then).
func (s State) Changes(g uint64, from, to int64) (int, bool) {
	if g > s.gen || s.gen-g > uint64(len(s.ranges)) {
		return 0, false
	}
	n := 0
	for _, r := range s.ranges[uint64(len(s.ranges))-(s.gen-g):] {
		if r.To > from && r.From < to {
			n++
		}
	}
	return n, true
}

// Folds returns the receipts of the changes after generation g that overlap [from, to), in
// order, and whether every one of them is a Fold's with its receipt kept: false when one
// is not (a direct write, a Delete, Retain, a Fold's joined with another change), or when s
// no longer records every change after g (or the log went back). No change overlapping:
// none, and true.
func (s State) Folds(g uint64, from, to int64) ([]Receipt, bool) {
	if g == s.gen {
		return nil, true
	}
	if g > s.gen || s.gen-g > uint64(len(s.ranges)) {
		return nil, false
	}
	var out []Receipt
	first := uint64(len(s.ranges)) - (s.gen - g)
	for i, r := range s.ranges[first:] {
		if r.To <= from || r.From >= to {
			continue
		}
		gen := g + 1 + uint64(i)
		k, found := slices.BinarySearchFunc(s.receipts, gen, func(r genReceipt, gen uint64) int { return cmp.Compare(r.gen, gen) })
		if !found {
			return nil, false
		}
		out = append(out, s.receipts[k].Receipt)
	}
	return out, true
}
