package tsdb

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"iter"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/internal/batch"
	"github.com/seed71701133/tablets/internal/priority"
	"github.com/seed71701133/tablets/internal/stageenc"
)

// The staging table (name + "w") holds the points of the series a write gives few points:
// an entity holds many series, in columns, so a remote write costs a few transactions. Fold
// moves them into the raw tables later. docs/format.md, "Staging", has every byte.
const (
	// stageVersion is the V of a staging entity of float points.
	stageVersion = 1
	// stageHistVersion is the V of a staging entity of histogram samples (staginghist.go).
	stageHistVersion = 2
	// stageColumns is the number of columns of a staging entity: a series' points go in
	// column hash % stageColumns, and a read of one series selects that column only.
	stageColumns = 240
	// stageSlots is the number of slots (the hash's top byte) that partitions share.
	stageSlots = 256
	// stageBucket is the span of arrival time of a staging partition.
	stageBucket = 10 * time.Minute
	// stageMaxColumn is Azure's limit of a binary property.
	stageMaxColumn = 64 << 10
	// stageMaxEntity bounds the columns' bytes of an entity: under Azure's 1 MiB of an
	// entity, and three of them (as base64) under the 4 MiB of a transaction.
	stageMaxEntity = 768 << 10
	// stageEntitiesPerTx: three entities of stageMaxEntity bytes are 3 MiB as base64.
	stageEntitiesPerTx = 3
	// directPoints: a series with at least this many points in a period of one write is
	// written into the raw table directly, a transaction of its own being cheaper than
	// staging its points and folding them later.
	directPoints = 100
	// foldMargin is how long after its end an arrival bucket is folded: a writer whose
	// clock is behind, or whose transaction is slow, may still add to it meanwhile (what it
	// adds later is folded by the next Fold).
	foldMargin = 5 * time.Minute
	// stagePageBytes bounds the JSON of a page of a staging read (after its first): the
	// service pages by count, and a page of 1,000 entities of many columns is hundreds of
	// MiB, which the SDK holds about four times over while decoding it.
	stagePageBytes = 8 << 20
	// stageFirstTop is the $top of a staging read's first page: at most 64 MiB of entities of
	// stageMaxEntity, about 2 MiB of those of a remote write of 2,000 samples.
	stageFirstTop = 64
)

// Staging entity properties (docs/format.md, "Staging").
const (
	stageVersionProp = "V" // Edm.Double: stageVersion
	stageLoProp      = "A" // Edm.String: the lowest slot of the partition, 2 hex digits
	stageHiProp      = "B" // Edm.String: the highest slot of the partition, 2 hex digits
	stageFirstProp   = "T" // Edm.String: the time key of the earliest point
	stageLastProp    = "U" // Edm.String: the time key of the latest point
	stageCountProp   = "N" // Edm.Double: the number of points
	stageColumnChar  = "c" // + column number in decimal: Edm.Binary, a stageenc column
)

// stageHash places a series: its slot (which partition) and its column (which property).
func stageHash(series string) (slot, column int) {
	h := fnv.New64a()
	h.Write([]byte(series))
	s := h.Sum64()
	return int(s >> 56), int(s % stageColumns)
}

// stageTimeKey is the fixed-width key of a time in milliseconds whose order as a string is
// the order of the times: 16 lowercase hex digits of the bits with the sign flipped.
func stageTimeKey(ms int64) string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(ms)^1<<63)
	return fmt.Sprintf("%x", b[:])
}

// stagePartitionKey is the PartitionKey of arrival bucket start (Unix seconds) and the
// partition whose slots start at lo: 12 decimal digits, "-", 2 hex digits.
func stagePartitionKey(bucket uint64, lo int) string {
	return fmt.Sprintf("%012d-%02x", bucket, lo)
}

// stageSlotRange is the range of slots of the partition holding slot, with partitions
// partitions.
func stageSlotRange(slot, partitions int) (lo, hi int) {
	width := stageSlots / partitions
	lo = slot / width * width
	return lo, lo + width - 1
}

// stageRowKey is the RowKey of an entity of one write: its stamp (16 hex digits), the
// writing DB's random id (8 hex digits) and the entity's number in the write (4 hex).
func stageRowKey(stamp uint64, writer uint32, n int) string {
	return fmt.Sprintf("%016x-%08x-%04x", stamp, writer, n)
}

// stampOf is the stamp of a staging RowKey, and the entity's number in its write.
func stampOf(rowKey []byte) (stamp uint64, n int, ok bool) {
	parts := strings.Split(string(rowKey), "-")
	if len(parts) != 3 || len(parts[0]) != 16 {
		return 0, 0, false
	}
	stamp, err := strconv.ParseUint(parts[0], 16, 64)
	if err != nil {
		return 0, 0, false
	}
	m, err := strconv.ParseUint(parts[2], 16, 31)
	return stamp, int(m), err == nil
}

// stagedPiece is the part of one plan's samples in one staging entity: indexes into its
// samples.
type stagedPiece struct {
	plan int
	args []int
}

// stagingEntity is one entity of a write being built.
type stagingEntity struct {
	partitionKey, rowKey string
	lo, hi               int
	version              int // stageVersion (0 means it too) or stageHistVersion
	columns              [stageColumns][]stageenc.Series
	histRecords          [stageColumns][]byte // of a histogram entity: each column's records
	sizes                [stageColumns]int
	size                 int
	points               int
	first, last          int64
	pieces               []stagedPiece
}

func (e *stagingEntity) fits(column, n int) bool {
	size := e.sizes[column]
	if size == 0 {
		size = stageenc.HeaderSize
	}
	return size+n <= stageMaxColumn && e.size+n+stageenc.HeaderSize <= stageMaxEntity
}

func (e *stagingEntity) add(column int, s stageenc.Series, piece stagedPiece) {
	n := stageenc.Size(s)
	if e.sizes[column] == 0 {
		e.sizes[column] = stageenc.HeaderSize
		e.size += stageenc.HeaderSize
	}
	e.sizes[column] += n
	e.size += n
	e.columns[column] = append(e.columns[column], s)
	e.points += len(s.Times)
	if len(e.pieces) == 0 || s.Times[0] < e.first {
		e.first = s.Times[0]
	}
	if len(e.pieces) == 0 || s.Times[len(s.Times)-1] > e.last {
		e.last = s.Times[len(s.Times)-1]
	}
	e.pieces = append(e.pieces, piece)
}

// body is the entity's JSON.
func (e *stagingEntity) body() []byte {
	hist := e.version == stageHistVersion
	version, timeKey := stageVersion, stageTimeKey
	if hist {
		version, timeKey = stageHistVersion, stageHistTimeKey
	}
	b := entity.AppendKeys(nil, e.partitionKey, e.rowKey)
	b = entity.AppendDouble(b, stageVersionProp, float64(version))
	b = entity.AppendStringProperty(b, stageLoProp, fmt.Sprintf("%02x", e.lo))
	b = entity.AppendStringProperty(b, stageHiProp, fmt.Sprintf("%02x", e.hi))
	b = entity.AppendStringProperty(b, stageFirstProp, timeKey(e.first))
	b = entity.AppendStringProperty(b, stageLastProp, timeKey(e.last))
	b = entity.AppendDouble(b, stageCountProp, float64(e.points))
	for c := range stageColumns {
		switch {
		case hist && len(e.histRecords[c]) > 0:
			col := append([]byte{stageenc.HistVersion}, e.histRecords[c]...)
			b = entity.AppendBinary(b, stageColumnChar+strconv.Itoa(c), col)
		case !hist && len(e.columns[c]) > 0:
			b = entity.AppendBinary(b, stageColumnChar+strconv.Itoa(c), stageenc.Append(nil, e.columns[c]))
		}
	}
	return entity.AppendEnd(b)
}

// stageSeries is the points of one plan to stage, sorted by time with the last of a time
// kept (as a write keeps the later argument).
func stageSeries(series string, points []tablets.Point) stageenc.Series {
	sorted := slices.Clone(points)
	// By millisecond, stably: of the points of one millisecond, the later argument wins.
	slices.SortStableFunc(sorted, func(a, b tablets.Point) int { return cmp.Compare(a.Time.UnixMilli(), b.Time.UnixMilli()) })
	s := stageenc.Series{Key: series}
	for i, p := range sorted {
		ms := p.Time.UnixMilli()
		if i > 0 && ms == s.Times[len(s.Times)-1] {
			s.Values[len(s.Values)-1] = p.Value
			continue
		}
		s.Times = append(s.Times, ms)
		s.Values = append(s.Values, p.Value)
	}
	return s
}

// stagingEntities packs the staged samples of plans (staged[i], indexes into
// plans[i].samples) into entities, by partition: float entities and histogram entities of a
// partition in the order made, so that its transactions hold both.
func (db *DB) stagingEntities(plans []planned, staged [][]int) map[string][]*stagingEntity {
	bucket := floorSec(unix(db.now()), stageBucket)
	stamp := priority.Next()
	byPartition := map[string][]*stagingEntity{}
	type open struct {
		pk   string
		kind *sampleKind
	}
	last := map[open]*stagingEntity{} // the entity of a partition and kind being filled
	n := 0
	for i, pl := range plans {
		if len(staged[i]) == 0 {
			continue
		}
		slot, column := stageHash(pl.series)
		lo, hi := stageSlotRange(slot, db.opts.StagingPartitions)
		pk := stagePartitionKey(bucket, lo)
		for _, r := range pl.kind.stageRecords(pl.series, pl.samples, staged[i]) {
			e := last[open{pk, pl.kind}]
			if e == nil || !e.fits(column, r.size) {
				version := stageVersion
				if pl.kind.hist {
					version = stageHistVersion
				}
				e = &stagingEntity{partitionKey: pk, rowKey: stageRowKey(stamp, db.writer, n), lo: lo, hi: hi, version: version}
				n++
				byPartition[pk] = append(byPartition[pk], e)
				last[open{pk, pl.kind}] = e
			}
			r.addTo(e, column, stagedPiece{plan: i, args: r.args})
		}
	}
	return byPartition
}

// stage writes the staged samples of plans (staged[i], indexes into plans[i].samples) into
// the staging table, the entities of a partition (of both kinds) in transactions of
// stageEntitiesPerTx, and returns the samples of each plan whose transaction failed, with
// the first error of each.
func (db *DB) stage(ctx context.Context, plans []planned, staged [][]int) (failed [][]int, errs []error) {
	failed = make([][]int, len(plans))
	errs = make([]error, len(plans))
	for e, err := range db.submitStaging(ctx, db.stagingEntities(plans, staged)) {
		for _, p := range e.pieces {
			failed[p.plan] = append(failed[p.plan], p.args...)
			if errs[p.plan] == nil {
				errs[p.plan] = fmt.Errorf("tsdb: stage: %w", err)
			}
		}
	}
	return failed, errs
}

// submitStaging writes the entities of byPartition, those of a partition in transactions
// of stageEntitiesPerTx, and yields each entity not written with its error.
func (db *DB) submitStaging(ctx context.Context, byPartition map[string][]*stagingEntity) iter.Seq2[*stagingEntity, error] {
	return func(yield func(*stagingEntity, error) bool) {
		if len(byPartition) == 0 {
			return
		}
		if err := db.ensureStaging(ctx); err != nil {
			for _, pk := range slices.Sorted(maps.Keys(byPartition)) {
				for _, e := range byPartition[pk] {
					if !yield(e, err) {
						return
					}
				}
			}
			return
		}
		for e, err := range db.submitStagingTxs(ctx, byPartition) {
			if !yield(e, err) {
				return
			}
		}
	}
}

// submitStagingTxs runs the transactions of byPartition (the table exists) and yields the
// entities of each failed one with its error.
func (db *DB) submitStagingTxs(ctx context.Context, byPartition map[string][]*stagingEntity) iter.Seq2[*stagingEntity, error] {
	type tx struct {
		pk       string
		entities []*stagingEntity
	}
	var txs []tx
	for _, pk := range slices.Sorted(maps.Keys(byPartition)) {
		es := byPartition[pk]
		for len(es) > 0 {
			n := min(len(es), stageEntitiesPerTx)
			txs = append(txs, tx{pk, es[:n]})
			es = es[n:]
		}
	}
	client := db.service.NewClient(db.names.Staging())
	txErrs := batch.Run(ctx, writeConcurrency, len(txs), func(ctx context.Context, i int) error {
		actions := make([]aztables.TransactionAction, len(txs[i].entities))
		for j, e := range txs[i].entities {
			actions[j] = aztables.TransactionAction{ActionType: aztables.TransactionTypeInsertReplace, Entity: e.body()}
		}
		return batch.Submit(ctx, client, txs[i].pk, actions)
	})
	return func(yield func(*stagingEntity, error) bool) {
		for i, err := range txErrs {
			if err == nil {
				continue
			}
			if isTableGone(err) {
				db.stagingMade.Store(false)
			}
			for _, e := range txs[i].entities {
				if !yield(e, err) {
					return
				}
			}
		}
	}
}

// ensureStaging creates the staging table, once a process while it is known to exist.
func (db *DB) ensureStaging(ctx context.Context) error {
	if db.stagingMade.Load() {
		return nil
	}
	if err := tablets.EnsureTable(ctx, db.service.NewClient(db.names.Staging())); err != nil {
		return fmt.Errorf("tsdb: staging table: %w", err)
	}
	db.stagingMade.Store(true)
	return nil
}

// errStagingVersion is a staging entity of a version this reader does not know.
var errStagingVersion = errors.New("unknown staging entity version")
