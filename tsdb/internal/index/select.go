package index

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/filter"
	"github.com/seed71701133/tablets/internal/pager"
	"github.com/seed71701133/tablets/rounding"
	"github.com/seed71701133/tablets/tsdb/internal/azerr"
	"github.com/seed71701133/tablets/tsdb/internal/catalog"
	"github.com/seed71701133/tablets/tsdb/internal/changelog"
	"github.com/seed71701133/tablets/tsdb/internal/labels"
	"github.com/seed71701133/tablets/tsdb/internal/naming"
)

// SeriesInfo is a series Select found: its key and its label set.
type SeriesInfo struct {
	Series string
	Labels labels.Labels
	// Histograms: the series has histogram samples in a period of the range (its index
	// entry there says so); read them with a Querier's Read or Select.
	Histograms bool
	invalid    error // the check's refusal of its key (see New)
}

// Invalid is why the raw layout refuses the series' key (an entry another writer made; it
// wraps tablets.ErrInvalidSeries), nil when its samples can be read. The index checks
// each entry's key once as it reads it (New's check), not each read of its samples; a
// listing of series or of label values still lists such an entry.
func (s SeriesInfo) Invalid() error { return s.invalid }

// LabelNames returns the sorted label names of the series with points in the periods [from,
// to) overlaps that match ms (all series' with none): DB.LabelNames.
func (x *Index) LabelNames(ctx context.Context, from, to time.Time, ms []labels.Matcher) ([]string, error) {
	found, err := x.SelectSets(ctx, from, to, ms, len(ms) > 0)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, s := range found {
		for _, l := range s.Labels {
			seen[l.Name] = true
		}
	}
	return sortedKeys(seen), nil
}

// LabelValues returns the sorted values of the label name among the series LabelNames would
// consider ("" is never a value): DB.LabelValues.
func (x *Index) LabelValues(ctx context.Context, name string, from, to time.Time, ms []labels.Matcher) ([]string, error) {
	if name == "" {
		return nil, fmt.Errorf("tsdb: %w: empty label name", tablets.ErrInvalidLabels)
	}
	found, err := x.SelectSets(ctx, from, to, ms, len(ms) > 0)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, s := range found {
		if v := s.Labels.Get(name); v != "" {
			seen[v] = true
		}
	}
	return sortedKeys(seen), nil
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// LogWants returns the periods of [from, to) that have an index as wants of the index
// change log, for the Selects of a read that began (changelog.Begin) to take: a read mark
// reads them with the raw log's (changelog.StatesTogether), beside its listing. Without an
// index cache, or a read that began, or when the periods cannot be listed, none: the
// Selects read the log themselves (and say what is wrong).
func (x *Index) LogWants(ctx context.Context, from, to time.Time) []changelog.Want {
	if x.cache == nil || !changelog.Began(ctx) {
		return nil
	}
	periods, err := x.tables.InRange(ctx, naming.Index, from, to)
	if err != nil {
		return nil
	}
	wants := make([]changelog.Want, len(periods))
	for i, p := range periods {
		wants[i] = changelog.Want{Log: x.Log, Period: p}
	}
	return wants
}

// SelectSets reads the label sets of the periods [from, to) overlaps that match ms, sorted
// by labels: DB.Select. With needSelective, ms must hold a matcher that does not match the
// empty string (labels.Compile); a bad matcher is an error before any request.
func (x *Index) SelectSets(ctx context.Context, from, to time.Time, ms []labels.Matcher, needSelective bool) ([]SeriesInfo, error) {
	compiled, err := labels.Compile(ms, needSelective)
	if err != nil {
		return nil, fmt.Errorf("tsdb: %w", err)
	}
	if err := rounding.CheckRange(from, to); err != nil {
		return nil, err
	}
	if x.cache == nil && changelog.IsAnyKnown(ctx) {
		return nil, ErrNotCached // a guess, and no cache to guess from
	}
	// The indexes, not the raw tables: a period's index outlives its raw points while a tier
	// keeps its windows (see Retain).
	periods, err := x.tables.InRange(ctx, naming.Index, from, to)
	if err != nil {
		return nil, err
	}
	var filters []string
	if names, ok := labels.NameValues(compiled); ok {
		slices.Sort(names)
		for _, n := range slices.Compact(names) {
			filters = append(filters, filter.Eq("PartitionKey", catalog.MetricPartition(n)).String())
		}
	} else {
		filters = []string{allMetricsFilter()}
	}
	found := map[string]*SeriesInfo{} // without a cache
	// With a cache, the series found in the order found, and (once a second query adds to
	// them) their index by key; sorted while they come from one cached query (whose
	// entries are in labels' order), or from more that add none after the first's.
	var out []SeriesInfo
	var at map[string]int
	sorted := x.cache != nil
	for _, p := range periods {
		var state changelog.State
		if x.cache != nil {
			if state, err = x.Log.State(ctx, p); err != nil {
				return nil, err
			}
		}
		for _, f := range filters {
			if x.cache != nil {
				before := len(out)
				if before > 0 && at == nil {
					at = make(map[string]int, len(out))
					for i, s := range out {
						at[s.Series] = i
					}
				}
				err = x.readCached(ctx, p, state, f, compiled, &out, at)
				if before > 0 && len(out) > before {
					sorted = false
				}
			} else {
				err = x.readIndex(ctx, p, f, compiled, found)
			}
			if err != nil {
				return nil, err
			}
		}
	}
	if x.cache == nil {
		out = make([]SeriesInfo, 0, len(found))
		for _, s := range found {
			out = append(out, *s)
		}
	}
	if !sorted {
		slices.SortFunc(out, func(a, b SeriesInfo) int { return labels.Compare(a.Labels, b.Labels) })
	}
	return out, nil
}

// entriesPager lists the entries of period p's index that filter f selects ("": all), as
// decodeEntry reads them. No metadata: an entry's ETag and the binary labels' type
// annotation are a third of its bytes (a Grafana variable over 100 series: 21.9 KB), and
// the labels decode from the base64 string alone.
func (x *Index) entriesPager(p uint64, f string) *runtime.Pager[aztables.ListEntitiesResponse] {
	sel := "RowKey," + catalog.LabelsProperty + "," + histogramsProperty
	noMetadata := aztables.MetadataFormatNone
	opts := &aztables.ListEntitiesOptions{Select: &sel, Format: &noMetadata}
	if f != "" {
		opts.Filter = &f
	}
	return x.service.NewClient(x.names.IndexTable(p)).NewListEntitiesPager(opts)
}

// indexEntry is an index entry as entriesPager lists it: its series, its label set (none
// for a plain series) and whether it is flagged with histograms.
type indexEntry struct {
	RowKey string
	L      []byte  // catalog.LabelsProperty
	H      float64 // histogramsProperty
}

func decodeEntry(raw []byte) (indexEntry, error) {
	var e indexEntry
	if err := json.Unmarshal(raw, &e); err != nil {
		return e, fmt.Errorf("tsdb: index: %w", err)
	}
	return e, nil
}

// infoOf is the SeriesInfo of entry e, its labels ls, with check's refusal of its key.
func (x *Index) infoOf(e indexEntry, ls labels.Labels) SeriesInfo {
	info := SeriesInfo{Series: e.RowKey, Labels: ls, Histograms: e.H == 1}
	if x.check != nil {
		if err := x.check(e.RowKey); err != nil {
			info.invalid = fmt.Errorf("index entry %s: %w", e.RowKey, err)
		}
	}
	return info
}

// readIndex adds to found the label sets of one query of period p's index that match ms,
// and flags those whose entry says they have histogram samples there.
// A period whose index does not exist (never made, or dropped meanwhile) holds none.
func (x *Index) readIndex(ctx context.Context, p uint64, f string, ms []labels.Compiled, found map[string]*SeriesInfo) error {
	for pager := x.entriesPager(p, f); pager.More(); {
		page, err := pager.NextPage(ctx)
		if azerr.IsTableGone(err) {
			x.tables.Gone(naming.Index, p)
			return nil
		}
		if err != nil {
			return fmt.Errorf("tsdb: index: %w", err)
		}
		for _, raw := range page.Entities {
			e, err := decodeEntry(raw)
			if err != nil {
				return err
			}
			if known, ok := found[e.RowKey]; ok {
				known.Histograms = known.Histograms || e.H == 1
				continue
			}
			ls, err := labels.Decode(e.L)
			if err != nil {
				return fmt.Errorf("tsdb: index entry %s: %w", e.RowKey, err)
			}
			if labels.MatchSet(ms, ls) {
				info := x.infoOf(e, ls)
				found[e.RowKey] = &info
			}
		}
	}
	x.tables.Found(naming.Index, p)
	return nil
}

// Series returns the series with points or histogram samples in the raw periods that
// [from, to) overlaps, sorted:
// the index of each period lists every series a Write gave points there (the index's
// granularity is the period: a series is listed for the whole period). With a cache, each
// period's listing is kept at the generation of its index log (listedKeys).
func (x *Index) Series(ctx context.Context, from, to time.Time) ([]string, error) {
	if err := rounding.CheckRange(from, to); err != nil {
		return nil, err
	}
	// The periods with a raw or a histogram table (a period may hold only histograms); not
	// the index tables, which outlive their period's dropped tables while tiers need them.
	periods, err := x.tables.InRange(ctx, naming.Raw, from, to)
	if err != nil {
		return nil, err
	}
	hist, err := x.tables.InRange(ctx, naming.Hist, from, to)
	if err != nil {
		return nil, err
	}
	periods = slices.Compact(slices.Sorted(slices.Values(append(periods, hist...))))
	seen := map[string]bool{}
	for _, p := range periods {
		keys, gone, err := x.listedKeys(ctx, p)
		if err != nil {
			return nil, err
		}
		if gone {
			x.tables.Gone(naming.Index, p)
		}
		for _, k := range keys {
			seen[k] = true
		}
	}
	out := make([]string, 0, len(seen))
	for s := range seen {
		out = append(out, s)
	}
	slices.Sort(out)
	return out, nil
}

// ListedIn returns the series period p's index lists, in its order; an index table that is
// gone lists none.
func (x *Index) ListedIn(ctx context.Context, p uint64) ([]string, error) {
	keys, _, err := x.listedKeys(ctx, p)
	return keys, err
}

// listedFilter is the cache's key of a period's every series as listed (listedKeys): no
// filter of a query holds a NUL.
const listedFilter = "\x00RowKey"

// listedKeys returns the series period p's index lists, in its order, and whether its table
// is gone. A rollup lists them every run, and the index of a period is a table of an entity a
// series: on Azurite each page of the listing (1,000 entities) scans and sorts the whole
// table (about 110 ms of its one thread at 18,750 series, 19 pages). With a cache, the
// listing is kept at the generation of the period's index log, read before it (a point
// read): Register records in the log after it writes entries, so a listing made after the
// log was read holds every entry recorded at that generation.
func (x *Index) listedKeys(ctx context.Context, p uint64) ([]string, bool, error) {
	var state changelog.State
	key := setsKey{x.names.IndexTable(p), listedFilter}
	if x.cache != nil {
		var err error
		if state, err = x.Log.State(ctx, p); err != nil {
			return nil, false, err
		}
		if c, ok := x.cache.sets.Get(key); ok && c.gen == state.Gen() {
			x.cache.counts.Hit(1)
			keys := make([]string, len(c.entries))
			for i, e := range c.entries {
				keys[i] = e.Series
			}
			return keys, false, nil
		}
		x.cache.counts.Miss(1)
	}
	var keys []string
	var e entity.Entity
	for page, err := range pager.Each(ctx, x.service.NewClient(x.names.IndexTable(p)), pager.SubQuery{Select: "RowKey"}, 0) {
		if azerr.IsTableGone(err) {
			return nil, true, nil
		}
		if err != nil {
			return nil, false, fmt.Errorf("tsdb: index: %w", err)
		}
		for _, raw := range page.Entities {
			if err := e.Decode(raw); err != nil {
				return nil, false, fmt.Errorf("tsdb: index: %w", err)
			}
			keys = append(keys, string(e.RowKey))
		}
	}
	if x.cache != nil {
		c := cachedSets{gen: state.Gen(), entries: make([]SeriesInfo, len(keys))}
		for i, k := range keys {
			c.entries[i] = SeriesInfo{Series: k}
		}
		// A listing of more than a quarter of the cache would drop the label sets the
		// queries use (a million series is about 100 MB): it is read again next time.
		if setsCost(key, c) <= x.cache.maxBytes/4 {
			x.cache.sets.Add(key, c)
		}
	}
	return keys, false, nil
}
