// Package tables knows which period tables of a tsdb database exist (raw points, series
// index, histogram samples: one of each kind a raw period) and which periods Retain dropped,
// so that a read need not list the account's tables first (Periods). It depends only on the
// leaf layer: the table names, the catalog (where dropped tables are recorded), the cache.
package tables

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/filter"
	"github.com/seed71701133/tablets/rounding"
	"github.com/seed71701133/tablets/tsdb/internal/cache"
	"github.com/seed71701133/tablets/tsdb/internal/catalog"
	"github.com/seed71701133/tablets/tsdb/internal/naming"
	"github.com/seed71701133/tablets/tsdb/internal/sentinel"
)

// ListTTL is how long a listing of the tables answers for the periods it did not find
// (see Periods).
const ListTTL = time.Minute

// maxProbes is how many periods a read queries without knowing their tables exist, before it
// lists the tables instead.
const maxProbes = 2

// maxDroppedCached bounds the cache of periods known dropped.
const maxDroppedCached = 4096

// Periods knows which raw, index and histogram tables of a database exist and which
// periods were dropped, so that a read does not list the account's tables first.
//
// What it holds: the tables of the last listing, the tables this process created, and those
// a read found; a table is forgotten when this process drops it or a request finds it gone.
// Another process may create a table at any time, so for a period it does not hold, a read
// of a range
//   - queries the table directly when at most maxProbes such periods are in the range (a
//     TableNotFound is then an empty period): a table created a moment ago by another
//     process is seen at once;
//   - else trusts the last listing if it is younger than ListTTL, and lists the
//     tables again (one request) if not: such a table is hidden for at most ListTTL.
//
// Whole-database questions (Latest, RawFrom) use the cache while the listing is younger than
// ListTTL; Retain always lists.
//
// It is given what it uses, not the DB: the service client, the table names, the catalog
// (where dropped tables are recorded) and the clock. The part depends on nothing above it.
type Periods struct {
	service *aztables.ServiceClient
	names   naming.Names     // the database's table names and raw periods
	catalog *catalog.Catalog // the dropped tables' records
	now     func() time.Time

	mu sync.Mutex
	// exists holds, by kind, the periods whose table exists: true when made by this process
	// or listed, false when a read found it (a read that sent no request finds nothing for
	// sure, so a Write still makes such a table).
	exists   [naming.NumKinds]map[uint64]bool
	listedAt time.Time // of the last listing; zero: never listed
	Dropped  *cache.Gen[uint64, struct{}]
	// Vanished counts the raw and histogram tables this process knew to exist that a read
	// found gone: another process's Retain dropped them. A read that planned on them (an
	// Aggregate that read a window raw rather than trust the tier) plans again.
	Vanished atomic.Uint64
}

func NewPeriods(service *aztables.ServiceClient, names naming.Names, c *catalog.Catalog, now func() time.Time) *Periods {
	return &Periods{service: service, names: names, catalog: c, now: now, exists: newKindMaps(),
		Dropped: cache.New[uint64, struct{}](maxDroppedCached, nil)}
}

func newKindMaps() [naming.NumKinds]map[uint64]bool {
	var m [naming.NumKinds]map[uint64]bool
	for k := range m {
		m[k] = map[uint64]bool{}
	}
	return m
}

// PeriodSeconds is the length of a raw period in seconds.
func (t *Periods) PeriodSeconds() uint64 { return uint64(t.names.Period / time.Second) }

// Found records that a read of period p's table of kind k did not find it gone.
func (t *Periods) Found(k naming.Kind, p uint64) {
	t.mu.Lock()
	if _, ok := t.exists[k][p]; !ok {
		t.exists[k][p] = false
	}
	t.mu.Unlock()
}

// Made records that period p's table of kind k exists: this process Made it.
func (t *Periods) Made(k naming.Kind, p uint64) {
	t.mu.Lock()
	t.exists[k][p] = true
	t.mu.Unlock()
}

// Gone records that period p's table of kind k does not exist (dropped, by this process or
// another).
func (t *Periods) Gone(k naming.Kind, p uint64) {
	t.mu.Lock()
	_, known := t.exists[k][p]
	delete(t.exists[k], p)
	t.mu.Unlock()
	if known && k != naming.Index {
		t.Vanished.Add(1)
	}
}

// Has reports whether period p's table of kind k is known to exist (made or listed).
func (t *Periods) Has(k naming.Kind, p uint64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.exists[k][p]
}

// fresh reports whether the last listing is younger than ListTTL.
func (t *Periods) freshLocked() bool {
	return !t.listedAt.IsZero() && t.now().Sub(t.listedAt) < ListTTL
}

// InRange returns, ascending, the periods of kind k that [from, to) overlaps whose tables
// exist or may exist (see Periods): a read queries those, and takes a TableNotFound as
// an empty period (reporting it with gone).
func (t *Periods) InRange(ctx context.Context, k naming.Kind, from, to time.Time) ([]uint64, error) {
	if !from.Before(to) {
		return nil, nil
	}
	first, last := t.names.PeriodOf(from), t.names.PeriodOf(to.Add(-time.Nanosecond))
	n := (last-first)/t.PeriodSeconds() + 1
	t.mu.Lock()
	known := t.inRangeLocked(k, first, last)
	fresh := t.freshLocked()
	t.mu.Unlock()
	if uint64(len(known)) == n || fresh && n-uint64(len(known)) > maxProbes {
		return known, nil
	}
	if n-uint64(len(known)) <= maxProbes {
		out := known
		for p, i := first, 0; p <= last; p += t.PeriodSeconds() {
			for i < len(known) && known[i] < p {
				i++
			}
			if i < len(known) && known[i] == p {
				continue
			}
			if _, dropped := t.Dropped.Get(p); dropped && k != naming.Index {
				continue
			}
			out = append(out, p)
		}
		slices.Sort(out)
		return out, nil
	}
	if err := t.List(ctx); err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.inRangeLocked(k, first, last), nil
}

func (t *Periods) inRangeLocked(k naming.Kind, first, last uint64) []uint64 {
	var out []uint64
	for p := range t.exists[k] {
		if p >= first && p <= last {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// All returns, ascending, the periods whose tables of kind k exist: from the cache while the
// last listing is younger than ListTTL, else from a new listing (one request).
func (t *Periods) All(ctx context.Context, k naming.Kind) ([]uint64, error) {
	t.mu.Lock()
	fresh := t.freshLocked()
	t.mu.Unlock()
	if !fresh {
		if err := t.List(ctx); err != nil {
			return nil, err
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]uint64, 0, len(t.exists[k]))
	for p := range t.exists[k] {
		out = append(out, p)
	}
	slices.Sort(out)
	return out, nil
}

// Listed returns, ascending, the periods whose tables of kind k exist, from a new listing.
func (t *Periods) Listed(ctx context.Context, k naming.Kind) ([]uint64, error) {
	if err := t.List(ctx); err != nil {
		return nil, err
	}
	return t.All(ctx, k)
}

// List lists the raw, index and histogram tables (one request; a page per 1,000 tables) and
// replaces the cache with what it found.
func (t *Periods) List(ctx context.Context) error {
	started := t.now()
	name := t.names.Base
	f := filter.And(filter.Ge("TableName", name+"h"), filter.Lt("TableName", name+"s")).String()
	found := newKindMaps()
	for pager := t.service.NewListTablesPager(&aztables.ListTablesOptions{Filter: &f}); pager.More(); {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("tsdb: list tables: %w", err)
		}
		for _, tb := range page.Tables {
			if tb.Name == nil || !strings.HasPrefix(*tb.Name, name) || len(*tb.Name) < len(name)+2 {
				continue
			}
			rest := (*tb.Name)[len(name):]
			p, err := strconv.ParseUint(rest[1:], 10, 64)
			if err != nil {
				continue
			}
			switch {
			case rest[0] == 'r' && t.names.RawTable(p) == *tb.Name:
				found[naming.Raw][p] = true
			case rest[0] == 'i' && t.names.IndexTable(p) == *tb.Name:
				found[naming.Index][p] = true
			case rest[0] == 'h' && t.names.HistTable(p) == *tb.Name:
				found[naming.Hist][p] = true
			}
		}
	}
	t.mu.Lock()
	t.exists, t.listedAt = found, started
	t.mu.Unlock()
	return nil
}

// CheckNotDropped returns an error wrapping ErrExpired if period p's raw table was dropped
// (Retain drops a period's raw and histogram tables together): known from the cache, else
// from the catalog (one request) unless the raw or histogram table is known to exist.
func (t *Periods) CheckNotDropped(ctx context.Context, p uint64) error {
	_, dropped := t.Dropped.Get(p)
	if !dropped && !t.Has(naming.Raw, p) && !t.Has(naming.Hist, p) {
		var err error
		if dropped, err = t.catalog.IsDropped(ctx, t.names.RawTable(p)); err != nil {
			return err
		}
		if dropped {
			t.Dropped.Add(p, struct{}{})
		}
	}
	if dropped {
		return fmt.Errorf("%w: the table of the period from %s (%s) was dropped by Retain", sentinel.ErrExpired,
			t.names.Start(p).Format(time.RFC3339), t.names.RawTable(p))
	}
	return nil
}

// Ensure creates the raw and index tables of period p and of the next period, unless known
// to exist or dropped: the next period's tables are then not new (which Azure may throttle)
// when their time comes.
func (t *Periods) Ensure(ctx context.Context, p uint64) error {
	return t.EnsureKinds(ctx, p, naming.Raw, naming.Index)
}

// EnsureKinds is ensure of the tables of the kinds given, in that order.
func (t *Periods) EnsureKinds(ctx context.Context, p uint64, kinds ...naming.Kind) error {
	for _, q := range []uint64{p, p + t.PeriodSeconds()} {
		t.mu.Lock()
		known := true
		for _, k := range kinds {
			known = known && t.exists[k][q]
		}
		t.mu.Unlock()
		if _, dropped := t.Dropped.Get(q); known || dropped || t.names.Start(q).After(tablets.MaxTime) {
			continue
		}
		var err error
		for _, k := range kinds {
			if err = tablets.EnsureTable(ctx, t.service.NewClient(t.names.Table(k, q))); err != nil {
				break
			}
			t.Made(k, q)
		}
		if err != nil {
			if q != p {
				continue // the next period's tables are a courtesy: its first write makes them
			}
			return fmt.Errorf("tsdb: %w", err)
		}
	}
	return nil
}

// RecordDropped marks period p's raw table dropped in the catalog, before the table goes.
func (t *Periods) RecordDropped(ctx context.Context, p uint64) error {
	if err := t.catalog.RecordDropped(ctx, t.names.RawTable(p)); err != nil {
		return err
	}
	t.Dropped.Add(p, struct{}{})
	t.Gone(naming.Raw, p)
	return nil
}

// LearnDropped reads the latest raw period recorded dropped in the catalog (one query) and
// remembers the periods of [from, to) up to it as dropped (Retain drops the oldest periods
// first, and Rollup leaves alone every period up to the latest dropped): after a read found
// a table gone, so that the next plan takes their tier windows as the last word.
func (t *Periods) LearnDropped(ctx context.Context, from, to time.Time) error {
	if !from.Before(to) {
		return nil
	}
	latest, ok, err := t.LatestDroppedRecorded(ctx)
	if err != nil || !ok {
		return err
	}
	first, last := t.names.PeriodOf(from), min(t.names.PeriodOf(to.Add(-time.Nanosecond)), latest)
	for p := first; p <= last; p += t.PeriodSeconds() {
		t.Dropped.Add(p, struct{}{})
		t.Gone(naming.Raw, p)
	}
	return nil
}

// OldestKeptPeriod is the start of the raw period after the latest one recorded dropped,
// where a Rollup from lo (Unix seconds) may reach one (false: none may be): Rollup leaves
// alone the slices of dropped periods, whose windows are the last word. It knows the
// periods this process saw dropped; and where lo is old enough that a Retain may have
// dropped a period there (now - rawRetention, give or take the clock margin), it reads the
// catalog's records: one query. rawRetention is Options.RawRetention (0: nothing is dropped
// but what this process saw); margin is the clock skew the tiers allow.
func (t *Periods) OldestKeptPeriod(ctx context.Context, lo uint64, rawRetention, margin time.Duration) (uint64, bool, error) {
	latest, ok := t.LatestDroppedCached()
	if horizon := t.now().Add(-rawRetention + margin); rawRetention > 0 && time.Unix(int64(lo), 0).Before(horizon) {
		recorded, found, err := t.LatestDroppedRecorded(ctx)
		if err != nil {
			return 0, false, err
		}
		if found && (!ok || recorded > latest) {
			latest, ok = recorded, true
		}
	}
	if !ok {
		return 0, false, nil
	}
	return latest + t.PeriodSeconds(), true, nil
}

// LatestDroppedCached is the latest period this process knows dropped.
func (t *Periods) LatestDroppedCached() (uint64, bool) {
	latest, ok := uint64(0), false
	for _, p := range t.Dropped.Keys() {
		latest, ok = max(latest, p), true
	}
	return latest, ok
}

// LatestDroppedRecorded reads the latest raw period recorded dropped in the catalog: one
// query.
func (t *Periods) LatestDroppedRecorded(ctx context.Context) (uint64, bool, error) {
	prefix := t.names.Base + "r"
	latest, ok := uint64(0), false
	err := t.catalog.EachDropped(ctx, prefix, t.names.Base+"s", func(name string) {
		p, err := strconv.ParseUint(strings.TrimPrefix(name, prefix), 10, 64)
		if err != nil || t.names.RawTable(p) != name {
			return
		}
		latest, ok = max(latest, p), true
	})
	if err != nil {
		return 0, false, err
	}
	return latest, ok, nil
}

// KnownDropped reports whether period p is known to have been dropped by Retain.
func (t *Periods) KnownDropped(p uint64) bool {
	_, dropped := t.Dropped.Get(p)
	return dropped
}

// Known reports whether period p's table of kind k is known to exist: made, listed or
// found by a read.
func (t *Periods) Known(k naming.Kind, p uint64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.exists[k][p]
	return ok
}

// OldestKnown is the oldest period whose table of kind k is known to exist (made, listed
// or found by a read), without a request: false when none is.
func (t *Periods) OldestKnown(k naming.Kind) (uint64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	oldest, ok := uint64(0), false
	for p := range t.exists[k] {
		if !ok || p < oldest {
			oldest, ok = p, true
		}
	}
	return oldest, ok
}

// Span is the part of a range in one raw period.
type Span struct {
	Period   uint64
	From, To time.Time
}

// SpanOf is the part of [from, to) in period p (From not before To when they overlap).
func (t *Periods) SpanOf(p uint64, from, to time.Time) Span {
	start, end := t.names.Start(p), t.names.End(p)
	if start.Before(from) {
		start = from
	}
	if end.After(to) {
		end = to
	}
	return Span{Period: p, From: start, To: end}
}

// Spans lists, oldest first, the tables of kind k that exist or may exist (see InRange)
// with the part of [from, to) in each. A period without a table (never written, or
// dropped) holds nothing: its read finds the table gone.
func (t *Periods) Spans(ctx context.Context, k naming.Kind, from, to time.Time) ([]Span, error) {
	if err := rounding.CheckRange(from, to); err != nil {
		return nil, err
	}
	if !from.Before(to) {
		return nil, nil
	}
	periods, err := t.InRange(ctx, k, from, to)
	if err != nil {
		return nil, err
	}
	var out []Span
	for _, p := range periods {
		if sp := t.SpanOf(p, from, to); sp.From.Before(sp.To) {
			out = append(out, sp)
		}
	}
	return out, nil
}
