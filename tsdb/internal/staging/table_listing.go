package staging

import (
	"cmp"
	"context"
	"crypto/sha256"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/internal/pager"
	"github.com/seed71701133/tablets/tsdb/internal/azerr"
)

// Listing is what the staging table held of a range of times when listed: the key, ETag
// and time span of each entity (of either kind) that may hold a sample in it, in key order.
// The Sums of a range in two listings are equal exactly when no staged write, Delete or
// Fold changed what a read of that range finds between them.
type Listing struct {
	entities []listing
}

// listing is an entity of a Listing.
type listing struct {
	pk, rk, etag string
	first, last  int64 // the Unix milliseconds of its earliest and latest sample
}

// Sum is a Listing of a range, summed: the hash of its entities' keys and ETags.
type Sum [sha256.Size]byte

// List lists the staging entities that may hold samples of [from, to): one query of keys.
// It counts as a read of staged samples (ReadsDone): a change log read after it is later
// than it. A DB that does not stage lists nothing (no request).
func (st *Table) List(ctx context.Context, from, to time.Time) (Listing, error) {
	defer st.readsDone.Add(1)
	if !st.reads || !from.Before(to) {
		return Listing{}, nil
	}
	f, _ := queryParts(nil, from, to, Both)
	var l Listing
	var e entity.Entity
	e.AllowStrings = true
	q := pager.SubQuery{Filter: f.String(), Select: "PartitionKey,RowKey," + FirstProp + "," + LastProp}
	for page, err := range pager.Each(ctx, st.client, q, 0) {
		if azerr.IsTableGone(err) {
			return Listing{}, nil
		}
		if err != nil {
			return Listing{}, fmt.Errorf("tsdb: list staging: %w", err)
		}
		for _, raw := range page.Entities {
			if err := e.Decode(raw); err != nil {
				return Listing{}, fmt.Errorf("tsdb: list staging: %w", err)
			}
			first, err1 := timeKeyMilli(e.String(FirstProp))
			last, err2 := timeKeyMilli(e.String(LastProp))
			if err := cmp.Or(err1, err2); err != nil {
				return Listing{}, fmt.Errorf("tsdb: list staging: entity %s/%s: %w", e.PartitionKey, e.RowKey, err)
			}
			l.entities = append(l.entities, listing{string(e.PartitionKey), string(e.RowKey), string(e.ETag), first, last})
		}
	}
	slices.SortFunc(l.entities, func(a, b listing) int {
		return cmp.Or(strings.Compare(a.pk, b.pk), strings.Compare(a.rk, b.rk))
	})
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

// timeKeyMilli is the Unix millisecond of a staging entity's T or U (of either kind).
func timeKeyMilli(key []byte, ok bool) (int64, error) {
	k := strings.TrimPrefix(string(key), histKeyPrefix)
	if !ok || len(k) != 16 {
		return 0, fmt.Errorf("time key %q: not 16 hex digits", key)
	}
	u, err := strconv.ParseUint(k, 16, 64)
	if err != nil {
		return 0, fmt.Errorf("time key %q: %w", key, err)
	}
	return int64(u ^ 1<<63), nil
}
