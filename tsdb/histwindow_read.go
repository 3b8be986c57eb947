package tsdb

import (
	"context"
	"fmt"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
)

// histTablesIn reports whether a histogram table of the periods [from, to) overlaps exists:
// one this process knows of, else one a query finds (a request a period not known; a
// database without histograms pays one a period). Read before the histogram samples, after
// the blocks' ETags, it misses none written before it: a table made later holds samples
// that flag the blocks they are late for.
func (tr *tiers) histTablesIn(ctx context.Context, from, to time.Time) (bool, error) {
	spans, err := tr.hists.spans(ctx, from, to)
	if err != nil {
		return false, err
	}
	for _, sp := range spans {
		if tr.periods.known(histKind, sp.period) {
			return true, nil
		}
	}
	one, sel := int32(1), "RowKey"
	for _, sp := range spans {
		pager := tr.service.NewClient(tr.names.HistTable(sp.period)).NewListEntitiesPager(&aztables.ListEntitiesOptions{Top: &one, Select: &sel})
		_, err := pager.NextPage(ctx)
		if isTableGone(err) {
			tr.periods.gone(histKind, sp.period)
			continue
		}
		if err != nil {
			return false, fmt.Errorf("tsdb: histograms: %w", err)
		}
		tr.periods.found(histKind, sp.period)
		return true, nil
	}
	return false, nil
}

// known reports whether period p's table of kind k is known to exist: made, listed or
// found by a read.
func (t *periodTables) known(k tableKind, p uint64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.exists[k][p]
	return ok
}
