package index

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets/tsdb/internal/azerr"
	"github.com/seed71701133/tablets/tsdb/internal/catalog"
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
// more series it does not know reads the period's index once instead: its keys, flags and
// label sets (about a request per 1,000 series, the label sets' bytes), which the
// registrations and the catalog's cache then know. Only the series the index does not list
// are written; an index entry is never removed while its table stands, and the registry is
// written before any index lists a set, so what the listing shows needs no writing.

// primeFlight is a process's read of a period's index into its registrations: done is
// closed when it ends; a failed read is forgotten, and the next Register tries again.
type primeFlight struct {
	done chan struct{}
}

// Prime reads period p's index into the registrations and the catalog's cache, once per
// process and period (concurrent calls wait for the one reading; a failed read is tried
// again by the next call), for the newest periods only (registeredPeriods: an older one's
// registrations are not kept). At most the registrations' bound of entries is read: a period
// with more series than the cache keeps is read in part. It never fails: a series it did not
// learn is registered as before.
func (x *Index) Prime(ctx context.Context, p uint64) {
	x.primeMu.Lock()
	if x.primed == nil {
		x.primed = map[uint64]*primeFlight{}
	}
	if f := x.primed[p]; f != nil {
		x.primeMu.Unlock()
		select {
		case <-f.done:
		case <-ctx.Done():
		}
		return
	}
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
	f := &primeFlight{done: make(chan struct{})}
	x.primed[p] = f
	x.primeMu.Unlock()
	if err := x.readPrime(ctx, p); err != nil {
		x.primeMu.Lock()
		if x.primed[p] == f {
			delete(x.primed, p)
		}
		x.primeMu.Unlock()
	}
	close(f.done)
}

// readPrime reads period p's index entries (at most the registrations' bound) into the
// registrations and the catalog's cache. An index table that does not exist lists nothing.
func (x *Index) readPrime(ctx context.Context, p uint64) error {
	client := x.service.NewClient(x.names.IndexTable(p))
	sel := "RowKey," + catalog.LabelsProperty + "," + histogramsProperty
	noMetadata := aztables.MetadataFormatNone
	limit := 2 * x.listed.perPeriod
	var listed, hist []seriesID
	defer func() {
		x.listed.remember(p, listed)
		x.listedHist.remember(p, hist)
	}()
	for pager := client.NewListEntitiesPager(&aztables.ListEntitiesOptions{Select: &sel, Format: &noMetadata}); pager.More() && len(listed) < limit; {
		page, err := pager.NextPage(ctx)
		if azerr.IsTableGone(err) {
			x.tables.Gone(naming.Index, p)
			return nil
		}
		if err != nil {
			return fmt.Errorf("tsdb: index: %w", err)
		}
		for _, raw := range page.Entities {
			var e struct {
				RowKey string
				L      []byte
				H      float64 // histogramsProperty
			}
			if err := json.Unmarshal(raw, &e); err != nil {
				return fmt.Errorf("tsdb: index: %w", err)
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
	return nil
}
