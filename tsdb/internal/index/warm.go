package index

import (
	"context"
	"fmt"
	"slices"

	"github.com/seed71701133/tablets/filter"
	"github.com/seed71701133/tablets/tsdb/internal/azerr"
	"github.com/seed71701133/tablets/tsdb/internal/catalog"
	"github.com/seed71701133/tablets/tsdb/internal/labels"
	"github.com/seed71701133/tablets/tsdb/internal/naming"
)

// WarmCache reads period p's label sets (every metric's partition, in one listing) into the
// cache as the Selects of a process just started would read them, metric by metric (a
// dashboard's panels): under each metric's query (the query of its partition, as a Select
// by metric name reads it), at the generation of the period's index log read before the
// listing, so that a registration since makes the Selects read again, as for any entry.
// It returns how many metrics it cached, and the series of those with histogram samples
// (which a warm-up of the histogram tables reads). A listing that would fill the cache past
// half its bound (it is shared by a server's tenants: the first warmed take the room)
// caches nothing; without a cache it does nothing.
func (x *Index) WarmCache(ctx context.Context, p uint64) (int, []string, error) {
	if x.cache == nil {
		return 0, nil, nil
	}
	state, err := x.Log.State(ctx, p)
	if err != nil {
		return 0, nil, err
	}
	table := x.names.IndexTable(p)
	var entries []SeriesInfo
	seen := map[string]int{}
	cost := 0
	for pager := x.entriesPager(p, allMetricsFilter()); pager.More(); {
		page, err := pager.NextPage(ctx)
		if azerr.IsTableGone(err) {
			x.tables.Gone(naming.Index, p)
			return 0, nil, nil
		}
		if err != nil {
			return 0, nil, fmt.Errorf("tsdb: index: %w", err)
		}
		for _, raw := range page.Entities {
			e, err := decodeEntry(raw)
			if err != nil {
				return 0, nil, err
			}
			if i, ok := seen[e.RowKey]; ok {
				entries[i].Histograms = entries[i].Histograms || e.H == 1
				continue
			}
			ls, err := labels.Decode(e.L)
			if err != nil {
				return 0, nil, fmt.Errorf("tsdb: index entry %s: %w", e.RowKey, err)
			}
			seen[e.RowKey] = len(entries)
			entries = append(entries, x.infoOf(e, ls))
			cost += entryCost(entries[len(entries)-1])
		}
		if x.cache.sets.Size()+cost > x.cache.maxBytes/2 {
			return 0, nil, nil
		}
	}
	x.tables.Found(naming.Index, p)
	slices.SortFunc(entries, func(a, b SeriesInfo) int { return labels.Compare(a.Labels, b.Labels) })
	byMetric := map[string][]SeriesInfo{}
	var hists []string
	for _, e := range entries {
		name := e.Labels.Get(labels.MetricName)
		byMetric[name] = append(byMetric[name], e) // in labels' order, as the listing's
		if e.Histograms {
			hists = append(hists, e.Series)
		}
	}
	for name, sets := range byMetric {
		f := filter.Eq("PartitionKey", catalog.MetricPartition(name)).String()
		x.cache.sets.Add(setsKey{table, f}, cachedSets{gen: state.Gen(), entries: sets})
	}
	return len(byMetric), hists, nil
}

// allMetricsFilter is the query of every metric's partition of an index (a Select without
// a metric name).
func allMetricsFilter() string {
	return filter.And(filter.Ge("PartitionKey", catalog.LabelPartitionsFrom), filter.Lt("PartitionKey", catalog.LabelPartitionsTo)).String()
}
