package entity

import (
	"fmt"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/seed71701133/tablets"
)

// The Table service's limits (Azure; Azurite enforces only some of them).
const (
	// MaxUserProperties is the number of properties an entity may have besides
	// PartitionKey, RowKey and Timestamp (255 in all).
	MaxUserProperties = 252
	// MaxEntityBytes is the size of an entity's property data.
	MaxEntityBytes = 1 << 20
	// MaxBatchOperations is the number of operations in one entity group transaction.
	MaxBatchOperations = 100
	// MaxBatchBytes is the payload of one entity group transaction.
	MaxBatchBytes = 4 << 20
	// MaxKeyBytes is the size of a PartitionKey or RowKey. The service stores strings as
	// UTF-16, so a key may hold at most 512 UTF-16 code units; we count it that way, the
	// strict reading of "1 KiB".
	MaxKeyBytes = 1024
	// MaxFilterComparisons is the number of discrete comparisons one $filter may hold.
	MaxFilterComparisons = 15
	// MaxPageEntities is the most entities one query page returns.
	MaxPageEntities = 1000
)

// batchOverhead is a generous bound on the multipart framing aztables adds around each
// operation of a transaction (boundary, headers, request line with the URL-encoded keys are
// counted separately by the caller).
const batchOverhead = 512

// KeySize returns the size of a key as the service counts it: two bytes per UTF-16 code unit.
func KeySize(key string) int {
	n := 0
	for _, r := range key {
		n += 2 * utf16.RuneLen(r)
	}
	return n
}

// forbiddenKeyRune reports the characters Azure does not allow in PartitionKey and RowKey.
func forbiddenKeyRune(r rune) bool {
	switch {
	case r == '/', r == '\\', r == '#', r == '?':
		return true
	case r <= 0x1f, r >= 0x7f && r <= 0x9f:
		return true
	}
	return false
}

// ValidateSeries checks a series name: not empty, valid UTF-8, none of / \ # ? or control
// characters, and a key of at most maxKeyBytes (as counted by KeySize) once the store adds
// what it adds (keyExtra bytes). The error wraps tablets.ErrInvalidSeries.
func ValidateSeries(series string, keyExtra int) error {
	if series == "" {
		return fmt.Errorf("%w: empty name", tablets.ErrInvalidSeries)
	}
	if !utf8.ValidString(series) {
		return fmt.Errorf("%w: %q is not valid UTF-8", tablets.ErrInvalidSeries, series)
	}
	for i, r := range series {
		if forbiddenKeyRune(r) {
			return fmt.Errorf("%w: %q has %q at byte %d (Azure forbids / \\ # ? and control characters in keys)",
				tablets.ErrInvalidSeries, truncate(series), r, i)
		}
	}
	if size := KeySize(series) + keyExtra; size > MaxKeyBytes {
		return fmt.Errorf("%w: name of %d bytes makes a key of %d bytes (UTF-16), over Azure's %d",
			tablets.ErrInvalidSeries, len(series), size, MaxKeyBytes)
	}
	return nil
}

// ValidateKey checks a complete PartitionKey or RowKey against the service's rules.
func ValidateKey(key string) error {
	if !utf8.ValidString(key) {
		return fmt.Errorf("entity: key %q is not valid UTF-8", key)
	}
	for i, r := range key {
		if forbiddenKeyRune(r) {
			return fmt.Errorf("entity: key %q has forbidden %q at byte %d", truncate(key), r, i)
		}
	}
	if size := KeySize(key); size > MaxKeyBytes {
		return fmt.Errorf("entity: key of %d bytes (UTF-16) is over %d", size, MaxKeyBytes)
	}
	return nil
}

func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// Batches splits a run of operations into consecutive transactions that respect the service's
// limits: at most MaxBatchOperations operations and MaxBatchBytes of payload. size(i) is the
// JSON body size of operation i plus the length of its keys. It returns the end index of each
// transaction. An operation too large to go alone is still returned alone; the entity limits
// must have rejected it before.
func Batches(n int, size func(i int) int) []int {
	var ends []int
	count, bytes := 0, 0
	const budget = MaxBatchBytes - 64<<10 // leave room for the batch's own framing
	for i := range n {
		s := size(i) + batchOverhead
		if count > 0 && (count == MaxBatchOperations || bytes+s > budget) {
			ends = append(ends, i)
			count, bytes = 0, 0
		}
		count++
		bytes += s
	}
	if count > 0 {
		ends = append(ends, n)
	}
	return ends
}
