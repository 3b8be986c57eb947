package tiers

import (
	"context"
	"fmt"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets/tsdb/internal/azerr"
	"github.com/seed71701133/tablets/tsdb/internal/naming"
)

// histTablesIn reports whether a histogram table of the periods [from, to) overlaps exists:
// one this process knows of, else one a query finds (a request a period not known; a
// database without histograms pays one a period). Read before the histogram samples, after
// the blocks' ETags, it misses none written before it: a table made later holds samples
// that flag the blocks they are late for.
func (tr *Tiers) histTablesIn(ctx context.Context, from, to time.Time) (bool, error) {
	spans, err := tr.periods.Spans(ctx, naming.Hist, from, to)
	if err != nil {
		return false, err
	}
	for _, sp := range spans {
		if tr.periods.Known(naming.Hist, sp.Period) {
			return true, nil
		}
	}
	one, sel := int32(1), "RowKey"
	for _, sp := range spans {
		pager := tr.service.NewClient(tr.names.HistTable(sp.Period)).NewListEntitiesPager(&aztables.ListEntitiesOptions{Top: &one, Select: &sel})
		_, err := pager.NextPage(ctx)
		if azerr.IsTableGone(err) {
			tr.periods.Gone(naming.Hist, sp.Period)
			continue
		}
		if err != nil {
			return false, fmt.Errorf("tsdb: histograms: %w", err)
		}
		tr.periods.Found(naming.Hist, sp.Period)
		return true, nil
	}
	return false, nil
}
