package tsdb

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/filter"
	"github.com/seed71701133/tablets/internal/pager"
	"github.com/seed71701133/tablets/tsdb/internal/cache"
	"github.com/seed71701133/tablets/tsdb/internal/labels"
)

// The catalog table (name + "m") holds what every process of a database must agree on:
//
//	partition "dropped"         a table Retain dropped (RowKey its name): never created again
//	partitions "l0" .. "lf"     the label-set registry: RowKey a series key, L its label set
//	partition "fold"            the fold lease (RowKey "lease"): one Fold at a time
//	partition "progress"        how far a background task got (RowKey the task): SetCovered
//
// catalog reads and writes it, and caches the registry's label sets (bounded).
type catalog struct {
	client *aztables.Client
	// labels are label sets known registered, by series key: what a Write needs to list a
	// series in a period's index (its partition and encoding), without reading the registry.
	labels *cache.Gen[string, labelEntry]
}

// catalogDropped is the catalog partition of dropped tables: RowKey the table's name.
const catalogDropped = "dropped"

// labelEntry is what the index entry of a label set needs: its index partition and encoding.
type labelEntry struct {
	partition string
	encoded   []byte
}

// labelEntryOverhead is about what an entry of the label cache costs besides its bytes: the
// key, the slice and string headers, the map's share.
const labelEntryOverhead = 160

// labelEntryBytes is what CachedSeries allows an entry of the label cache: a generation
// holds CachedSeries times this many bytes (CachedSeries sets of up to 300 bytes encoded).
const labelEntryBytes = 512

func labelEntryCost(k string, e labelEntry) int {
	return len(k) + len(e.partition) + len(e.encoded) + labelEntryOverhead
}

func newCatalog(client *aztables.Client, cachedSeries int) *catalog {
	return &catalog{client: client, labels: cache.New(2*cachedSeries*labelEntryBytes, labelEntryCost)}
}

func newLabelEntry(ls Labels) labelEntry {
	return labelEntry{partition: metricPartition(ls.Get(MetricName)), encoded: labels.Append(nil, ls)}
}

// isDropped reads whether Retain dropped the table name: one request.
func (c *catalog) isDropped(ctx context.Context, name string) (bool, error) {
	_, err := c.client.GetEntity(ctx, catalogDropped, name, nil)
	switch {
	case err == nil:
		return true, nil
	case isStatus(err, http.StatusNotFound):
		return false, nil
	}
	return false, fmt.Errorf("tsdb: catalog: %w", err)
}

// recordDropped marks a table dropped (RowKey its name): one request.
func (c *catalog) recordDropped(ctx context.Context, name string) error {
	body := entity.AppendEnd(entity.AppendDouble(entity.AppendKeys(nil, catalogDropped, name), entity.ValueProperty, 1))
	if _, err := c.client.UpsertEntity(ctx, body, nil); err != nil {
		return fmt.Errorf("tsdb: catalog: %w", err)
	}
	return nil
}

// eachDropped calls fn with the name of each table recorded dropped whose name is in [from,
// to): one query. A catalog that does not exist records none.
func (c *catalog) eachDropped(ctx context.Context, from, to string, fn func(name string)) error {
	q := pager.SubQuery{Filter: filter.And(filter.Eq("PartitionKey", catalogDropped), filter.Ge("RowKey", from),
		filter.Lt("RowKey", to)).String(), Select: "RowKey"}
	var e entity.Entity
	for page, err := range pager.Each(ctx, c.client, q, 0) {
		if isTableGone(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("tsdb: catalog: %w", err)
		}
		for _, raw := range page.Entities {
			if err := e.Decode(raw); err != nil {
				return fmt.Errorf("tsdb: catalog: %w", err)
			}
			fn(string(e.RowKey))
		}
	}
	return nil
}

func registryPartition(key string) string { return "l" + key[1:2] }

// register records label sets in the registry, those the cache does not hold: in
// transactions (one per registry partition and 100 sets). It returns their keys. Every set is
// checked before any request.
func (c *catalog) register(ctx context.Context, sets []Labels) ([]string, error) {
	keys := make([]string, len(sets))
	byPart := map[string][]aztables.TransactionAction{}
	fresh := map[string]labelEntry{}
	for i, ls := range sets {
		canon, err := Canonical(ls)
		if err != nil {
			return nil, fmt.Errorf("tsdb: label set %d: %w", i, err)
		}
		keys[i] = labels.Key(canon)
		if _, known := c.labels.Get(keys[i]); known {
			continue
		}
		if _, dup := fresh[keys[i]]; dup {
			continue
		}
		e := newLabelEntry(canon)
		fresh[keys[i]] = e
		pk := registryPartition(keys[i])
		body := entity.AppendEnd(entity.AppendBinary(entity.AppendKeys(nil, pk, keys[i]), labelsProperty, e.encoded))
		byPart[pk] = append(byPart[pk], aztables.TransactionAction{ActionType: aztables.TransactionTypeInsertReplace, Entity: body})
	}
	if err := submitPartitions(ctx, c.client, byPart); err != nil {
		return nil, fmt.Errorf("tsdb: register label sets: %w", err)
	}
	for k, e := range fresh {
		c.labels.Add(k, e)
	}
	return keys, nil
}

// labelsOf returns the registry's entry for a series key (the cache's, else one request),
// and false for a plain series (a key the registry does not hold).
func (c *catalog) labelsOf(ctx context.Context, series string) (labelEntry, bool, error) {
	if !labels.IsKey(series) {
		return labelEntry{}, false, nil
	}
	if e, known := c.labels.Get(series); known {
		return e, true, nil
	}
	resp, err := c.client.GetEntity(ctx, registryPartition(series), series, nil)
	if isStatus(err, http.StatusNotFound) {
		return labelEntry{}, false, nil
	}
	if err != nil {
		return labelEntry{}, false, fmt.Errorf("tsdb: registry: %w", err)
	}
	var stored struct{ L []byte }
	if err := json.Unmarshal(resp.Value, &stored); err != nil {
		return labelEntry{}, false, fmt.Errorf("tsdb: registry entry of %s: %w", series, err)
	}
	ls, err := labels.Decode(stored.L)
	if err != nil {
		return labelEntry{}, false, fmt.Errorf("tsdb: registry entry of %s: %w", series, err)
	}
	if labels.Key(ls) != series {
		return labelEntry{}, false, fmt.Errorf("tsdb: registry entry of %s holds the labels of %s", series, labels.Key(ls))
	}
	e := newLabelEntry(ls)
	c.labels.Add(series, e)
	return e, true, nil
}

// SeriesOf returns the series key of a label set given in any order (labels with an empty
// value are dropped, as in Prometheus), registering it in the catalog: one request the first
// time a process asks, none after while the set stays cached (see Options.CachedSeries). The
// key is the same in every process and version. A bad set (no labels, an empty or duplicate
// name, invalid UTF-8, over MaxLabelsSize) gives an error wrapping tablets.ErrInvalidLabels
// before any request.
func (db *DB) SeriesOf(ctx context.Context, ls Labels) (string, error) {
	keys, err := db.SeriesOfMany(ctx, []Labels{ls})
	if err != nil {
		return "", err
	}
	return keys[0], nil
}

// SeriesOfMany is SeriesOf of many label sets, the new ones registered in transactions
// (one per registry partition and 100 sets). Every set is checked before any request.
func (db *DB) SeriesOfMany(ctx context.Context, sets []Labels) ([]string, error) {
	return db.catalog.register(ctx, sets)
}
