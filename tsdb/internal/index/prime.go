package index

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/seed71701133/tablets/filter"
	"github.com/seed71701133/tablets/internal/reqlimit"
	"github.com/seed71701133/tablets/tsdb/internal/azerr"
	"github.com/seed71701133/tablets/tsdb/internal/labels"
	"github.com/seed71701133/tablets/tsdb/internal/naming"
)

// A process just started knows no series listed anywhere: the first write of each series it
// serves registers its label set again and lists it in the period's index again (a
// transaction a registry or index partition and 100 series), and every index registration
// is recorded in the change log, which makes every process's cached index reads of the
// period read it again. In the soak (4 tenants of 18,746 series, the server restarted after
// the backfill) that was about 1,500 transactions in the first two minutes, at ingest's
// priority, with the remote writes waiting for them and the dashboards' first loads
// reading the index again and again.
//
// So a Register (or a catalog registration, Catalog.Prime) that finds catalog.PrimeAt or
// more series it does not know reads the period's index once instead, waiting for it at
// most primeWait: its keys, flags and label sets (a request per 1,000 series and range of
// primeRanges, the label sets' bytes), which the registrations and the catalog's cache then
// know. Only the series the index does not list are written; an index entry is never removed while its table stands, and the registry is
// written before any index lists a set, so what the listing shows needs no writing.

// primeFlight is a process's read of a period's index into its registrations: done is
// closed when it ends; a failed read is forgotten, and the next Register tries again.
type primeFlight struct {
	done chan struct{}
}

// primeWait is how long a registration waits for the read of the index it started (or
// found under way) before it writes what it does not know, as without one: the read goes on
// for the registrations after it. On Azure the read takes about a second; on an account
// busy with the first loads of every dashboard (the soak, on Azurite) a page waited its
// turn for seconds, and the remote writes waited with it.
const primeWait = 5 * time.Second

// primeTimeout bounds the read of the index, which outlives the registration that started
// it.
const primeTimeout = 2 * time.Minute

// Prime reads period p's index into the registrations and the catalog's cache, once per
// process and period (a failed read is tried again by the next call), for the newest
// periods only (registeredPeriods: an older one's registrations are not kept). It waits
// for the read at most primeWait (or until ctx ends), and never fails: a series it did not
// learn is registered as before. At most the registrations' bound of entries is read: a
// period with more series than the cache keeps is read in part.
func (x *Index) Prime(ctx context.Context, p uint64) { x.prime(ctx, p, primeWait) }

// PrimeWhole is Prime waiting for the read to end (or ctx): a process that starts primes
// before its first writes need it (tsdb.DB.Warm).
func (x *Index) PrimeWhole(ctx context.Context, p uint64) { x.prime(ctx, p, primeTimeout) }

// prime is Prime waiting at most wait.
func (x *Index) prime(ctx context.Context, p uint64, wait time.Duration) {
	x.primeMu.Lock()
	if x.primed == nil {
		x.primed = map[uint64]*primeFlight{}
	}
	f := x.primed[p]
	if f == nil {
		if len(x.primed) >= registeredPeriods { // the newest periods only, as the registrations
			oldest := p
			for q := range x.primed {
				oldest = min(oldest, q)
			}
			if oldest == p { // older than those: its registrations would not be kept
				x.primeMu.Unlock()
				return
			}
			delete(x.primed, oldest)
		}
		f = &primeFlight{done: make(chan struct{})}
		x.primed[p] = f
		// The read outlives ctx (with its values: a write's requests keep their class).
		readCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), primeTimeout)
		go func() {
			defer cancel()
			if err := x.readPrime(readCtx, p); err != nil {
				x.primeMu.Lock()
				if x.primed[p] == f {
					delete(x.primed, p)
				}
				x.primeMu.Unlock()
			}
			close(f.done)
		}()
	}
	x.primeMu.Unlock()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	defer reqlimit.TallyJoined(ctx, time.Now())
	select {
	case <-f.done:
	case <-timer.C:
	case <-ctx.Done():
	}
}

// primeRanges split a large index's listing by RowKey, read at once: the label sets' keys
// (labels.KeyPrefix and 32 hex digits, uniformly spread) by their second character, and
// the plain series' keys outside them. A listing of 18,746 series was 19 pages one after
// another.
var primeRanges = func() []filter.Expr {
	const hex = "0123456789abcdef"
	first, end := labels.KeyPrefix+"0", labels.KeyPrefix+"g" // "g" follows "f"
	out := []filter.Expr{filter.Or(filter.Lt("RowKey", first), filter.Ge("RowKey", end))}
	for i := range 16 {
		to := end
		if i < 15 {
			to = labels.KeyPrefix + hex[i+1:i+2]
		}
		out = append(out, filter.And(filter.Ge("RowKey", labels.KeyPrefix+hex[i:i+1]), filter.Lt("RowKey", to)))
	}
	return out
}()

// readPrime reads period p's index entries (at most about the registrations' bound) into the
// registrations and the catalog's cache: its first page, and when there are more, the
// whole index again by primeRanges at once. An index table that does not exist lists
// nothing.
func (x *Index) readPrime(ctx context.Context, p uint64) error {
	limit := 2 * x.listed.perPeriod
	more, err := x.readPrimeRange(ctx, p, "", min(limit, 1000), true)
	if err != nil || !more {
		return err
	}
	errs := make([]error, len(primeRanges))
	var wg sync.WaitGroup
	for i, f := range primeRanges {
		wg.Go(func() { _, errs[i] = x.readPrimeRange(ctx, p, f.String(), limit/len(primeRanges)+1, false) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// readPrimeRange reads at most about limit entries of period p's index that filter f
// selects ("": all), or only its first page, into the registrations and the catalog's
// cache; more is whether the index holds entries past what was read.
func (x *Index) readPrimeRange(ctx context.Context, p uint64, f string, limit int, firstPage bool) (more bool, err error) {
	var listed, hist []seriesID
	defer func() {
		x.listed.remember(p, listed)
		x.listedHist.remember(p, hist)
	}()
	pager := x.entriesPager(p, f)
	for pager.More() && len(listed) < limit {
		if firstPage && len(listed) > 0 {
			return true, nil
		}
		page, err := pager.NextPage(ctx)
		if azerr.IsTableGone(err) {
			x.tables.Gone(naming.Index, p)
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("tsdb: index: %w", err)
		}
		for _, raw := range page.Entities {
			e, err := decodeEntry(raw)
			if err != nil {
				return false, err
			}
			if len(e.L) > 0 {
				if err := x.catalog.Remember(e.RowKey, e.L); err != nil {
					continue // not listed as known either: a Register of it writes it again
				}
			}
			id := idOf(e.RowKey)
			listed = append(listed, id)
			if e.H == 1 {
				hist = append(hist, id)
			}
		}
	}
	return pager.More(), nil
}
