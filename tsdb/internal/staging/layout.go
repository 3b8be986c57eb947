// The layout of the staging table: the keys and properties of its entities (see doc.go).

package staging

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/filter"
)

const (
	// Version is the V of a staging entity of float points.
	Version = 1
	// HistVersion is the V of a staging entity of histogram samples.
	HistVersion = 2
	// Columns is the number of columns of a staging entity: a series' points go in column
	// hash % Columns, and a read of one series selects that column only.
	Columns = 240
	// Slots is the number of slots (the hash's top byte) that partitions share.
	Slots = 256
	// Bucket is the span of arrival time of a staging partition.
	Bucket = 10 * time.Minute
	// MaxColumn is Azure's limit of a binary property.
	MaxColumn = 64 << 10
	// MaxEntity bounds the columns' bytes of an entity: under Azure's 1 MiB of an entity,
	// and three of them (as base64) under the 4 MiB of a transaction.
	MaxEntity = 768 << 10
	// EntitiesPerTx: three entities of MaxEntity bytes are 3 MiB as base64.
	EntitiesPerTx = 3
	// PageBytes bounds the JSON of a page of a staging read (after its first): the service
	// pages by count, and a page of 1,000 entities of many columns is hundreds of MiB, which
	// the SDK holds about four times over while decoding it.
	PageBytes = 8 << 20
	// FirstTop is the $top of a staging read's first page: at most 64 MiB of entities of
	// MaxEntity, about 2 MiB of those of a remote write of 2,000 samples.
	FirstTop = 64
)

// Staging entity properties (docs/format.md, "Staging").
const (
	VersionProp = "V" // Edm.Double: Version or HistVersion
	LoProp      = "A" // Edm.String: the lowest slot of the partition, 2 hex digits
	HiProp      = "B" // Edm.String: the highest slot of the partition, 2 hex digits
	FirstProp   = "T" // Edm.String: the time key of the earliest point
	LastProp    = "U" // Edm.String: the time key of the latest point
	CountProp   = "N" // Edm.Double: the number of points
	ColumnChar  = "c" // + column number in decimal: Edm.Binary, a stageenc column
)

// Histogram samples are staged as float points are, in entities of their own in the same
// table: V is HistVersion, each column a histogram column (stageenc.AppendHist), and T and
// U are the time keys after the letter "h". As "h" sorts after every hex digit, a read of
// float entities (T and U compared with bare time keys) never matches a histogram entity,
// nor a read of histogram entities a float one: each kind is selected by the same two
// comparisons (docs/format.md, "Staging entities").

// histKeyPrefix starts the time keys T and U of a histogram staging entity.
const histKeyPrefix = "h"

// Hash places a series: its slot (which partition) and its column (which property).
func Hash(series string) (slot, column int) {
	// FNV-1a of 64 bits (hash/fnv's New64a), over the string without a copy: a read hashes
	// each series it selects.
	s := uint64(fnvOffset64)
	for i := 0; i < len(series); i++ {
		s ^= uint64(series[i])
		s *= fnvPrime64
	}
	return int(s >> 56), int(s % Columns)
}

// The FNV-1a constants of 64 bits.
const (
	fnvOffset64 = 14695981039346656037
	fnvPrime64  = 1099511628211
)

// TimeKey is the fixed-width key of a time in milliseconds whose order as a string is the
// order of the times: 16 lowercase hex digits of the bits with the sign flipped.
func TimeKey(ms int64) string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(ms)^1<<63)
	return hex.EncodeToString(b[:])
}

// HistTimeKey is the time key of a histogram staging entity's T or U.
func HistTimeKey(ms int64) string { return histKeyPrefix + TimeKey(ms) }

// BucketOf is the arrival bucket of a write at t: the start of its Bucket, in Unix
// seconds.
func BucketOf(t time.Time) uint64 {
	n := uint64(Bucket / time.Second)
	return uint64(t.Unix()) / n * n
}

// PartitionKey is the PartitionKey of arrival bucket start (Unix seconds) and the partition
// whose slots start at lo: 12 decimal digits, "-", 2 hex digits.
func PartitionKey(bucket uint64, lo int) string {
	return fmt.Sprintf("%012d-%02x", bucket, lo)
}

// SlotRange is the range of slots of the partition holding slot, with partitions
// partitions.
func SlotRange(slot, partitions int) (lo, hi int) {
	width := Slots / partitions
	lo = slot / width * width
	return lo, lo + width - 1
}

// RowKey is the RowKey of an entity of one write: its stamp (16 hex digits), the writing
// DB's random id (8 hex digits) and the entity's number in the write (4 hex).
func RowKey(stamp uint64, writer uint32, n int) string {
	return fmt.Sprintf("%016x-%08x-%04x", stamp, writer, n)
}

// StampOf is the stamp of a staging RowKey, and the entity's number in its write.
func StampOf(rowKey []byte) (stamp uint64, n int, ok bool) {
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

// BucketEnd is the end of the arrival bucket of a staging PartitionKey: the latest its
// points may have arrived (a malformed key: the end of time, so that they count as late).
func BucketEnd(partitionKey string) time.Time {
	b, err := strconv.ParseUint(partitionKey[:min(12, len(partitionKey))], 10, 64)
	if err != nil {
		return tablets.MaxTime
	}
	return time.Unix(int64(b), 0).UTC().Add(Bucket)
}

// BucketsBefore is the filter of the staging entities of the arrival buckets before
// horizon (Unix seconds).
// (The staging log's partition, which sorts before them, and the folds' log's, which
// sorts after them, are not.)
func BucketsBefore(horizon uint64) string {
	return filter.And(filter.Ge("PartitionKey", "0"), filter.Lt("PartitionKey", fmt.Sprintf("%012d", horizon))).String()
}
