package tsdb

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"iter"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/entity"
	"github.com/seed71701133/tablets/filter"
	"github.com/seed71701133/tablets/rounding"
)

// The series index of a period (table name + "i" + start) has an entity per series with
// points in the period:
//
//	PartitionKey  "s" for a plain series (a key SeriesOf never returned); for a label set,
//	              metricPartition of its metric name
//	RowKey        the series key
//	L             Edm.Binary, the label set (appendLabels), on label sets' entities only
//
// The registry of label sets is in the catalog (name + "m"): PartitionKey "l" and the first
// hex digit of the key (16 partitions), RowKey the key, L the label set. SeriesOf writes it
// once; a Write of a key it does not know in a period reads it there.
const labelsProperty = "L"

// metricPartition is the index partition of the label sets with metric name name: "n" and
// the name when it is short and valid in a key, else "h" and the first 16 bytes of its
// SHA-256 in hex. Every label set's partition is in ["h", "o").
func metricPartition(name string) string {
	if len(name) <= 200 && entity.ValidateKey("n"+name) == nil {
		return "n" + name
	}
	sum := sha256.Sum256([]byte(name))
	return "h" + hex.EncodeToString(sum[:16])
}

// labelPartitions bounds every label set's index partition: [labelPartitionsFrom, labelPartitionsTo).
const labelPartitionsFrom, labelPartitionsTo = "h", "o"

func registryPartition(key string) string { return "l" + key[1:2] }

// SeriesInfo is a series Select found: its key and its label set.
type SeriesInfo struct {
	Series string
	Labels Labels
}

// SeriesOf returns the series key of a label set given in any order (labels with an empty
// value are dropped, as in Prometheus), registering it in the catalog: one request the first
// time a process asks, none after (a cache). The key is the same in every process and
// version. A bad set (no labels, an empty or duplicate name, invalid UTF-8, over
// MaxLabelsSize) gives an error wrapping tablets.ErrInvalidLabels before any request.
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
	keys := make([]string, len(sets))
	byPart := map[string][]aztables.TransactionAction{}
	fresh := map[string]Labels{}
	db.mu.Lock()
	for i, ls := range sets {
		c, err := Canonical(ls)
		if err != nil {
			db.mu.Unlock()
			return nil, fmt.Errorf("tsdb: label set %d: %w", i, err)
		}
		keys[i] = seriesKey(c)
		if _, known := db.labels[keys[i]]; known || fresh[keys[i]] != nil {
			continue
		}
		fresh[keys[i]] = c
		pk := registryPartition(keys[i])
		body := entity.AppendEnd(entity.AppendBinary(entity.AppendKeys(nil, pk, keys[i]), labelsProperty, appendLabels(nil, c)))
		byPart[pk] = append(byPart[pk], aztables.TransactionAction{ActionType: aztables.TransactionTypeInsertReplace, Entity: body})
	}
	db.mu.Unlock()
	for pk, actions := range byPart {
		if err := submitAll(ctx, db.meta, pk, actions); err != nil {
			return nil, fmt.Errorf("tsdb: register label sets: %w", err)
		}
	}
	db.mu.Lock()
	for k, ls := range fresh {
		db.labels[k] = ls
	}
	db.mu.Unlock()
	return keys, nil
}

// labelsOf returns the label set registered for a series key, or nil for a plain series.
func (db *DB) labelsOf(ctx context.Context, series string) (Labels, error) {
	if !isLabelsKey(series) {
		return nil, nil
	}
	db.mu.Lock()
	ls, known := db.labels[series]
	db.mu.Unlock()
	if known {
		return ls, nil
	}
	resp, err := db.meta.GetEntity(ctx, registryPartition(series), series, nil)
	if isStatus(err, http.StatusNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("tsdb: registry: %w", err)
	}
	var e struct{ L []byte }
	if err := json.Unmarshal(resp.Value, &e); err != nil {
		return nil, fmt.Errorf("tsdb: registry entry of %s: %w", series, err)
	}
	if ls, err = decodeLabels(e.L); err != nil {
		return nil, fmt.Errorf("tsdb: registry entry of %s: %w", series, err)
	}
	if seriesKey(ls) != series {
		return nil, fmt.Errorf("tsdb: registry entry of %s holds the labels of %s", series, seriesKey(ls))
	}
	db.mu.Lock()
	db.labels[series] = ls
	db.mu.Unlock()
	return ls, nil
}

// register lists series in period p's index, those this process does not know are there:
// an entity each, in a transaction per index partition and 100 series. A series costs a
// registry read (if this process never saw its labels) and its share of a transaction, the
// first time a process writes it in a period; nothing after.
func (db *DB) register(ctx context.Context, p uint64, series ...string) error {
	byPart := map[string][]aztables.TransactionAction{}
	var added []indexKey
	for _, s := range series {
		k := indexKey{p, s}
		db.mu.Lock()
		known := db.registered[k]
		db.mu.Unlock()
		if known || slices.Contains(added, k) {
			continue
		}
		ls, err := db.labelsOf(ctx, s)
		if err != nil {
			return err
		}
		pk := indexPartition
		b := entity.AppendKeys(nil, pk, s)
		if ls != nil {
			pk = metricPartition(ls.Get(MetricName))
			b = entity.AppendBinary(entity.AppendKeys(nil, pk, s), labelsProperty, appendLabels(nil, ls))
		}
		byPart[pk] = append(byPart[pk], aztables.TransactionAction{ActionType: aztables.TransactionTypeInsertReplace, Entity: entity.AppendEnd(b)})
		added = append(added, k)
	}
	client := db.service.NewClient(db.indexTable(p))
	for pk, actions := range byPart {
		if err := submitAll(ctx, client, pk, actions); err != nil {
			return fmt.Errorf("tsdb: index: %w", err)
		}
	}
	db.mu.Lock()
	for _, k := range added {
		db.registered[k] = true
	}
	db.mu.Unlock()
	return nil
}

// Select yields the label sets with points in the periods that [from, to) overlaps (the
// index's granularity is the period) whose labels match every matcher, sorted by labels as
// Prometheus sorts them. It reads the index of each period the range covers: with an
// equality on MetricName (or a regexp on it that is an alternation of literals) only that
// metric's partition, else the partitions of every label set. Bad matchers, or none that
// does not match the empty string, give an error wrapping tablets.ErrInvalidMatcher before
// any request.
func (db *DB) Select(ctx context.Context, from, to time.Time, ms ...Matcher) iter.Seq2[SeriesInfo, error] {
	return func(yield func(SeriesInfo, error) bool) {
		found, err := db.selectSets(ctx, from, to, ms, true)
		if err != nil {
			yield(SeriesInfo{}, err)
			return
		}
		for _, s := range found {
			if !yield(s, nil) {
				return
			}
		}
	}
}

// LabelNames returns the sorted label names of the series with points in the periods [from,
// to) overlaps that match the matchers (all series' with none), as Prometheus' API does:
// MetricName is one of them.
func (db *DB) LabelNames(ctx context.Context, from, to time.Time, ms ...Matcher) ([]string, error) {
	found, err := db.selectSets(ctx, from, to, ms, len(ms) > 0)
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
// consider. A series without the label contributes no value ("" is never a value).
func (db *DB) LabelValues(ctx context.Context, name string, from, to time.Time, ms ...Matcher) ([]string, error) {
	if name == "" {
		return nil, fmt.Errorf("tsdb: %w: empty label name", tablets.ErrInvalidLabels)
	}
	found, err := db.selectSets(ctx, from, to, ms, len(ms) > 0)
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

// selectSets reads the label sets of the periods [from, to) overlaps that match ms.
func (db *DB) selectSets(ctx context.Context, from, to time.Time, ms []Matcher, needSelective bool) ([]SeriesInfo, error) {
	compiled, err := compileMatchers(ms, needSelective)
	if err != nil {
		return nil, fmt.Errorf("tsdb: %w", err)
	}
	if err := rounding.CheckRange(from, to); err != nil {
		return nil, err
	}
	// The indexes, not the raw tables: a period's index outlives its raw points while a tier
	// keeps its windows (see Retain).
	periods, err := db.indexPeriods(ctx)
	if err != nil {
		return nil, err
	}
	var filters []string
	if names, ok := nameValues(compiled); ok {
		slices.Sort(names)
		for _, n := range slices.Compact(names) {
			filters = append(filters, filter.Eq("PartitionKey", metricPartition(n)).String())
		}
	} else {
		filters = []string{filter.And(filter.Ge("PartitionKey", labelPartitionsFrom), filter.Lt("PartitionKey", labelPartitionsTo)).String()}
	}
	found := map[string]Labels{}
	for _, p := range periods {
		if !db.periodEnd(p).After(from) || !db.periodStart(p).Before(to) {
			continue
		}
		client := db.service.NewClient(db.indexTable(p))
		for _, f := range filters {
			if err := readIndex(ctx, client, f, compiled, found); err != nil {
				return nil, err
			}
		}
	}
	out := make([]SeriesInfo, 0, len(found))
	for k, ls := range found {
		out = append(out, SeriesInfo{k, ls})
	}
	slices.SortFunc(out, func(a, b SeriesInfo) int { return CompareLabels(a.Labels, b.Labels) })
	return out, nil
}

// readIndex adds to found the label sets of one index query that match ms.
func readIndex(ctx context.Context, client *aztables.Client, f string, ms []matcher, found map[string]Labels) error {
	sel := "RowKey," + labelsProperty
	for pager := client.NewListEntitiesPager(&aztables.ListEntitiesOptions{Filter: &f, Select: &sel}); pager.More(); {
		page, err := pager.NextPage(ctx)
		if isTableGone(err) {
			return nil // dropped meanwhile: its series are gone with it
		}
		if err != nil {
			return fmt.Errorf("tsdb: index: %w", err)
		}
		for _, raw := range page.Entities {
			var e struct {
				RowKey string
				L      []byte
			}
			if err := json.Unmarshal(raw, &e); err != nil {
				return fmt.Errorf("tsdb: index: %w", err)
			}
			if _, ok := found[e.RowKey]; ok {
				continue
			}
			ls, err := decodeLabels(e.L)
			if err != nil {
				return fmt.Errorf("tsdb: index entry %s: %w", e.RowKey, err)
			}
			if matchesSet(ms, ls) {
				found[e.RowKey] = ls
			}
		}
	}
	return nil
}

// CompareLabels orders label sets as Prometheus' labels.Compare (and Select): label by label,
// name then value, a prefix first.
func CompareLabels(a, b Labels) int {
	for i := range min(len(a), len(b)) {
		if c := strings.Compare(a[i].Name, b[i].Name); c != 0 {
			return c
		}
		if c := strings.Compare(a[i].Value, b[i].Value); c != 0 {
			return c
		}
	}
	return cmp.Compare(len(a), len(b))
}
